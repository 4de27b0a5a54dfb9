//! The deserializer against hand-built messages and schemas.

use serde::Deserialize;
use serde_json::{Value, json};

use super::*;
use crate::schema::flags::*;

/// A message builder for hand-made inputs.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn varint(mut self, mut v: u64) -> Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    fn key(self, number: u32, wire: u8) -> Self {
        self.varint(u64::from(number) << 3 | u64::from(wire))
    }
    fn int(self, number: u32, v: u64) -> Self {
        self.key(number, 0).varint(v)
    }
    fn bytes(self, number: u32, b: &[u8]) -> Self {
        let mut s = self.key(number, 2).varint(b.len() as u64);
        s.0.extend_from_slice(b);
        s
    }
    fn msg(self, number: u32, m: Enc) -> Self {
        self.bytes(number, &m.0)
    }
    fn fixed64(mut self, number: u32, v: u64) -> Self {
        self = self.key(number, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn fixed32(mut self, number: u32, v: u32) -> Self {
        self = self.key(number, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
}

fn field(number: u32, json: &'static str, ty: Ty, flags: u8) -> Field {
    Field {
        number,
        json,
        ty,
        flags,
    }
}

static INNER: Message = Message {
    name: "test.Inner",
    fields: &[Field {
        number: 1,
        json: "innerName",
        ty: Ty::String,
        flags: OMIT_EMPTY,
    }],
};

fn decode<'a, T: Deserialize<'a>>(
    msg: &'static Message,
    b: &'a [u8],
) -> std::result::Result<T, crate::Error> {
    T::deserialize(MessageDe {
        msg,
        buf: b,
        type_meta: None,
    })
    .map_err(Error::into_error)
}

fn leak(fields: Vec<Field>) -> &'static Message {
    Box::leak(Box::new(Message {
        name: "test.Msg",
        fields: Box::leak(fields.into_boxed_slice()),
    }))
}

#[test]
fn scalars_of_every_kind_read_as_their_json() {
    let msg = leak(vec![
        field(1, "u32", Ty::Uint32, 0),
        field(2, "u64", Ty::Uint64, 0),
        field(3, "double", Ty::Double, 0),
        field(4, "float", Ty::Float, 0),
        field(5, "duration", Ty::Duration, 0),
        field(6, "i32", Ty::Int32, 0),
        field(7, "i64", Ty::Int64, 0),
        field(8, "bool", Ty::Bool, 0),
        field(9, "bytes", Ty::Bytes, 0),
        field(10, "integral", Ty::Double, 0),
    ]);
    let b = Enc::default()
        .int(1, u64::MAX) // Go keeps the low 32 bits of a uint32
        .int(2, u64::MAX)
        .fixed64(3, 2.5f64.to_bits())
        .fixed32(4, 0.1f32.to_bits())
        .msg(5, Enc::default().int(1, 90_000_000_000))
        .int(6, (-5i64) as u64) // int32 negatives are sign-extended to ten bytes
        .int(7, (-7i64) as u64)
        .int(8, 1)
        .bytes(9, b"\x00\xffhi")
        .fixed64(10, 3.0f64.to_bits());
    let v: Value = decode(msg, &b.0).expect("decodes");
    assert_eq!(
        v,
        json!({
            "u32": 4_294_967_295u64, "u64": u64::MAX, "double": 2.5, "float": 0.1,
            "duration": "1m30s", "i32": -5, "i64": -7, "bool": true, "bytes": "AP9oaQ==",
            "integral": 3
        })
    );
}

#[test]
fn omitempty_zero_values_are_left_out_but_pointer_zeros_stay() {
    let msg = leak(vec![
        field(1, "count", Ty::Int32, OMIT_EMPTY),
        field(2, "name", Ty::String, OMIT_EMPTY),
        field(3, "flag", Ty::Bool, OMIT_EMPTY),
        field(4, "ratio", Ty::Double, OMIT_EMPTY),
        // A pointer, or a field without omitempty: JSON writes the zero.
        field(5, "replicas", Ty::Int32, 0),
        field(6, "label", Ty::String, 0),
    ]);
    let b = Enc::default()
        .int(1, 0)
        .bytes(2, b"")
        .int(3, 0)
        .fixed64(4, (-0.0f64).to_bits())
        .int(5, 0)
        .bytes(6, b"");
    let v: Value = decode(msg, &b.0).expect("decodes");
    assert_eq!(v, json!({"replicas": 0, "label": ""}));
}

#[test]
fn inlined_messages_are_flattened_into_their_parent() {
    static PARENT_FIELDS: [Field; 2] = [
        Field {
            number: 1,
            json: "",
            ty: Ty::Message(&INNER),
            flags: INLINE,
        },
        Field {
            number: 2,
            json: "own",
            ty: Ty::Int64,
            flags: 0,
        },
    ];
    static PARENT: Message = Message {
        name: "test.Parent",
        fields: &PARENT_FIELDS,
    };
    let b = Enc::default()
        .msg(1, Enc::default().bytes(1, b"x").int(99, 1))
        .int(2, 3);
    let v: Value = decode(&PARENT, &b.0).expect("decodes");
    assert_eq!(v, json!({"innerName": "x", "own": 3}));
}

#[test]
fn repeated_fields_are_gathered_packed_or_not_wherever_they_are() {
    let msg = leak(vec![
        field(1, "names", Ty::String, REPEATED),
        field(2, "ports", Ty::Int32, REPEATED),
        field(3, "other", Ty::Int32, 0),
    ]);
    let packed = Enc::default().varint(80).varint(443);
    let b = Enc::default()
        .bytes(1, b"a")
        .int(3, 7)
        .bytes(1, b"b")
        .int(2, 1)
        .msg(2, packed)
        .bytes(1, b"c");
    let v: Value = decode(msg, &b.0).expect("decodes");
    assert_eq!(
        v,
        json!({"names": ["a", "b", "c"], "other": 7, "ports": [1, 80, 443]})
    );
}

#[test]
fn maps_read_as_objects_and_a_missing_value_is_the_zero_value() {
    let msg = leak(vec![
        field(1, "labels", Ty::Map(&Ty::String), REPEATED),
        field(2, "limits", Ty::Map(&Ty::Quantity), REPEATED),
        field(3, "extra", Ty::Map(&Ty::WrappedList(&Ty::String)), REPEATED),
    ]);
    let b = Enc::default()
        .msg(1, Enc::default().bytes(1, b"app").bytes(2, b"web"))
        .msg(1, Enc::default().bytes(1, b"empty"))
        .msg(
            2,
            Enc::default()
                .bytes(1, b"cpu")
                .msg(2, Enc::default().bytes(1, b"250m")),
        )
        .msg(2, Enc::default().bytes(1, b"gpu"))
        .msg(
            3,
            Enc::default()
                .bytes(1, b"groups")
                .msg(2, Enc::default().bytes(1, b"a").bytes(1, b"b")),
        )
        .msg(3, Enc::default().bytes(1, b"none"));
    let v: Value = decode(msg, &b.0).expect("decodes");
    assert_eq!(
        v,
        json!({
            "labels": {"app": "web", "empty": ""},
            "limits": {"cpu": "250m", "gpu": "0"},
            "extra": {"groups": ["a", "b"], "none": []}
        })
    );
}

#[test]
fn special_types_read_as_their_json() {
    let msg = leak(vec![
        field(1, "port", Ty::IntOrString, 0),
        field(2, "target", Ty::IntOrString, 0),
        field(3, "raw", Ty::RawExtension, 0),
        field(4, "nilRaw", Ty::RawExtension, 0),
        field(5, "fields", Ty::FieldsV1, 0),
        field(6, "noFields", Ty::FieldsV1, 0),
        field(7, "created", Ty::Time, 0),
        field(8, "zero", Ty::Time, 0),
        field(9, "omitted", Ty::Time, OMIT_ZERO),
        field(10, "eventTime", Ty::MicroTime, 0),
    ]);
    let b = Enc::default()
        .msg(1, Enc::default().int(1, 0).int(2, 8080))
        .msg(2, Enc::default().int(1, 1).bytes(3, b"http"))
        .msg(3, Enc::default().bytes(1, br#"{"kind":"X","n":[1,2]}"#))
        .msg(4, Enc::default())
        .msg(5, Enc::default().bytes(1, br#"{"f:metadata":{}}"#))
        .msg(6, Enc::default().bytes(1, b""))
        .msg(7, Enc::default().int(1, 1_700_000_000).int(2, 5))
        .msg(8, Enc::default())
        .msg(9, Enc::default())
        .msg(10, Enc::default().int(1, 1_700_000_000).int(2, 123_456_789));
    let v: Value = decode(msg, &b.0).expect("decodes");
    assert_eq!(
        v,
        json!({
            "port": 8080, "target": "http",
            "raw": {"kind": "X", "n": [1, 2]}, "nilRaw": null,
            "fields": {"f:metadata": {}}, "noFields": null,
            "created": "2023-11-14T22:13:20Z", "zero": null,
            "eventTime": "2023-11-14T22:13:20.123456Z"
        })
    );
    // Optional targets see JSON's null as None.
    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Opt {
        zero: Option<String>,
        created: Option<String>,
        no_fields: Option<Value>,
    }
    let o: Opt = decode(msg, &b.0).expect("decodes");
    assert_eq!(
        o,
        Opt {
            zero: None,
            created: Some("2023-11-14T22:13:20Z".into()),
            no_fields: None
        }
    );
}

#[test]
fn embedded_cbor_and_bad_int_or_string_types_are_malformed() {
    let msg = leak(vec![
        field(1, "raw", Ty::RawExtension, 0),
        field(2, "port", Ty::IntOrString, 0),
    ]);
    let cbor = Enc::default().msg(1, Enc::default().bytes(1, &[0xd9, 0xd9, 0xf7, 0xa0]));
    let err = decode::<Value>(msg, &cbor.0).expect_err("CBOR");
    assert!(matches!(err, crate::Error::Malformed { .. }), "{err}");
    assert_eq!(err.path().map(ToString::to_string).as_deref(), Some("raw"));
    let bad = Enc::default().msg(2, Enc::default().int(1, 7));
    assert!(matches!(
        decode::<Value>(msg, &bad.0),
        Err(crate::Error::Malformed { .. })
    ));
}

#[test]
fn unknown_fields_are_skipped_and_ignored_fields_are_not_decoded() {
    let msg = leak(vec![
        field(1, "name", Ty::String, 0),
        field(2, "blob", Ty::RawExtension, 0),
    ]);
    // `blob` holds bytes that would fail to decode: a target that ignores it never
    // looks inside.
    let b = Enc::default()
        .int(7, 1)
        .bytes(1, b"n")
        .fixed32(9, 1)
        .msg(2, Enc::default().bytes(1, &[0xff]));
    #[derive(Deserialize)]
    struct OnlyName {
        name: String,
    }
    let v: OnlyName = decode(msg, &b.0).expect("decodes");
    assert_eq!(v.name, "n");
    assert!(decode::<Value>(msg, &b.0).is_err());
}

#[test]
fn wrong_wire_types_are_malformed_and_name_the_field() {
    let msg = leak(vec![
        field(1, "name", Ty::String, 0),
        field(2, "items", Ty::Message(&INNER), REPEATED),
    ]);
    let b = Enc::default().int(1, 5);
    let err = decode::<Value>(msg, &b.0).expect_err("varint for a string");
    assert_eq!(
        err.to_string(),
        "malformed protobuf at name: wrong wire type"
    );
    let b = Enc::default().bytes(2, b"").int(2, 1);
    let err = decode::<Value>(msg, &b.0).expect_err("varint for a message");
    assert_eq!(
        err.to_string(),
        "malformed protobuf at items[1]: wrong wire type"
    );
}

#[test]
fn enums_and_flatten_work_through_deserialize_any() {
    #[derive(Deserialize, Debug, PartialEq)]
    enum Policy {
        Always,
        Never,
    }
    #[derive(Deserialize, Debug, PartialEq)]
    struct Target {
        name: Policy,
        #[serde(flatten)]
        rest: std::collections::BTreeMap<String, Value>,
    }
    let msg = leak(vec![
        field(1, "name", Ty::String, 0),
        field(2, "n", Ty::Int64, 0),
    ]);
    let b = Enc::default().bytes(1, b"Never").int(2, 4);
    let t: Target = decode(msg, &b.0).expect("decodes");
    assert_eq!(t.name, Policy::Never);
    assert_eq!(t.rest.get("n"), Some(&json!(4)));
}

/// A message that holds itself (Kubernetes 1.37's `CompositePodGroupTemplate` does), nested
/// deeper than the decoder allows: a typed error, decoded or transcoded, not an overflowing
/// stack; one level less decodes.
#[test]
fn messages_nested_past_the_limit_are_malformed_not_a_stack_overflow() {
    static SELF_FIELDS: [Field; 1] = [Field {
        number: 1,
        json: "child",
        ty: Ty::Message(&SELF),
        flags: 0,
    }];
    static SELF: Message = Message {
        name: "Self",
        fields: &SELF_FIELDS,
    };
    // `levels` messages, each the `child` of the one around it.
    let nested = |levels: usize| {
        let mut b: Vec<u8> = Vec::new();
        for _ in 1..levels {
            let mut outer = vec![0x0a];
            let mut len = b.len();
            while len >= 0x80 {
                outer.push((len as u8) | 0x80);
                len >>= 7;
            }
            outer.push(len as u8);
            outer.extend_from_slice(&b);
            b = outer;
        }
        b
    };
    let fits = nested(super::MAX_MESSAGE_DEPTH);
    assert!(decode::<Value>(&SELF, &fits).is_ok(), "as deep as allowed");
    let deep = nested(100_000);
    let err = decode::<Value>(&SELF, &deep).expect_err("too deep");
    assert!(err.to_string().contains("nested too deep"), "{err}");
    let failure = super::transcode::Failure::default();
    let transcode = super::transcode::Transcode {
        msg: &SELF,
        buf: &deep,
        type_meta: None,
        failure: &failure,
    };
    assert!(
        serde_json::to_value(&transcode).is_err(),
        "transcoding refuses it too"
    );
    let err = failure.into_error(&SELF);
    assert!(err.to_string().contains("nested too deep"), "{err}");
}
