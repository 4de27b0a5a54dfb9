use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::*;

fn round_trip<T: Serialize + serde::de::DeserializeOwned>(v: &T) -> T {
    let mut buf = Vec::new();
    encode(v, &mut buf).unwrap();
    decode(&buf).unwrap()
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Shape {
    Unit,
    Newtype(i32),
    Tuple(u8, String),
    Struct { a: Option<bool>, b: Vec<u16> },
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Everything {
    small: u8,
    big: u64,
    negative: i64,
    min: i64,
    float: f64,
    text: String,
    long_text: String,
    #[serde(with = "serde_bytes_as_seq")]
    bytes: Vec<u8>,
    none: Option<String>,
    some: Option<String>,
    unit: (),
    shapes: Vec<Shape>,
    map: BTreeMap<String, i32>,
    tuple: (char, bool),
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

/// Bytes through `serialize_bytes`, read back from the borrowed bytes.
mod serde_bytes_as_seq {
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
        }
        d.deserialize_bytes(V)
    }
}

#[test]
fn every_kind_of_value_round_trips() {
    let v = Everything {
        small: 7,
        big: u64::MAX,
        negative: -300,
        min: i64::MIN,
        float: -1.5e300,
        text: "héllo".into(),
        long_text: "x".repeat(1000),
        bytes: vec![0, 1, 255],
        none: None,
        some: Some(String::new()),
        unit: (),
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(-1),
            Shape::Tuple(9, "t".into()),
            Shape::Struct {
                a: Some(false),
                b: vec![1, 600],
            },
        ],
        map: [("k".to_string(), 1), (String::new(), -2)].into(),
        tuple: ('é', true),
        rest: [("extra".to_string(), json!({"a": [1, null, "s"]}))].into(),
    };
    assert_eq!(round_trip(&v), v);
}

#[test]
fn a_pod_decodes_as_from_its_json() {
    use k8s_openapi::api::core::v1::Pod;
    let json = include_str!("../../../protobuf/tests/data/pod.json");
    let pod: Pod = serde_json::from_str(json).unwrap();
    let back = round_trip(&pod);
    assert_eq!(back, pod);
    // And the encoding is smaller than the JSON (field names are a byte each).
    let mut buf = Vec::new();
    encode(&pod, &mut buf).unwrap();
    let json_len = serde_json::to_vec(&pod).unwrap().len();
    assert!(buf.len() * 10 < json_len * 8, "{} vs {json_len}", buf.len());
}

/// A pod whose `managedFields` are as server-side apply writes them.
fn pod_with_managed_fields() -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "web-0", "namespace": "default", "resourceVersion": "7",
            "managedFields": [{
                "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                             "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                                 ".": {}, "f:image": {}, "f:name": {}}}}}
            }]
        },
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap()
}

/// `managedFields` are kept as their JSON text (one tag, a length, the text), not as a
/// tree of tagged values, and decode to the same `FieldsV1`.
#[test]
fn managed_fields_are_kept_as_json_text() {
    let pod = pod_with_managed_fields();
    let mut buf = Vec::new();
    encode(&pod, &mut buf).unwrap();
    let fields = &pod.metadata.managed_fields.as_ref().unwrap()[0];
    let text = serde_json::to_vec(fields.fields_v1.as_ref().unwrap()).unwrap();
    let at = buf
        .windows(text.len())
        .position(|w| w == text)
        .expect("the JSON text is in the encoding");
    // The tag, then the length as a two-byte varint (130 bytes of text).
    assert_eq!(text.len(), 130);
    assert_eq!(buf[at - 3..at], [RAW_JSON, 0x82, 0x01]);
    assert_eq!(round_trip(&pod), pod);
    // Through `deserialize_any` too (a flattened or untyped reader buffers the value).
    let any: Value = decode(&buf).unwrap();
    assert_eq!(any, serde_json::to_value(&pod).unwrap());
}

/// Every newtype in [`RAW_JSON_TYPES`] is kept as JSON, whatever it wraps; JSON text that
/// is corrupt or that the type refuses is a typed error.
#[test]
fn json_text_newtypes_round_trip_and_fail_typed() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct RawExtension(Value);
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[allow(clippy::upper_case_acronyms)]
    struct JSON(Vec<u8>);
    let raw = RawExtension(json!({"kind": "X", "n": [1, 2.5, null]}));
    assert_eq!(round_trip(&raw), raw);
    let bytes = JSON(vec![1, 2, 3]);
    assert_eq!(round_trip(&bytes), bytes);

    let mut buf = Vec::new();
    encode(&RawExtension(json!({"secret": "hunter2"})), &mut buf).unwrap();
    #[derive(Debug, Deserialize)]
    struct Strict(#[allow(dead_code)] Vec<u32>);
    #[derive(Debug, Deserialize)]
    #[serde(rename = "RawExtension")]
    struct Wrapper(#[allow(dead_code)] Strict);
    let e = decode::<Wrapper>(&buf).unwrap_err();
    assert!(matches!(e, CodecError::Rejected(_)), "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    // A length past the end, and text that is not JSON.
    assert!(decode::<RawExtension>(&[RAW_JSON, 9, b'{']).is_err());
    assert!(matches!(
        decode::<RawExtension>(&[RAW_JSON, 2, b'{', b'x']),
        Err(CodecError::Corrupt(_))
    ));
}

#[test]
fn a_type_that_refuses_its_own_encoding_is_a_typed_error_without_the_value() {
    #[derive(Serialize)]
    struct Out {
        secret: String,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct In {
        secret: u32,
    }
    let mut buf = Vec::new();
    encode(
        &Out {
            secret: "hunter2".into(),
        },
        &mut buf,
    )
    .unwrap();
    let e = decode::<In>(&buf).unwrap_err();
    assert!(matches!(e, CodecError::Rejected(_)));
    assert!(!e.to_string().contains("hunter2"), "{e}");
}

#[test]
fn corrupt_bytes_are_errors_not_panics() {
    let mut buf = Vec::new();
    encode(&json!({"a": [1, 2, {"b": "c"}]}), &mut buf).unwrap();
    for cut in 0..buf.len() {
        assert!(decode::<Value>(&buf[..cut]).is_err());
    }
    assert!(decode::<Value>(&[0x20]).is_err());
    let mut nested = json!([]);
    for _ in 0..MAX_DEPTH {
        nested = json!([nested]);
    }
    let mut deep = Vec::new();
    encode(&nested, &mut deep).unwrap();
    assert!(matches!(
        decode::<Value>(&deep),
        Err(CodecError::Corrupt("nested too deep"))
    ));
    let mut trailing = buf.clone();
    trailing.push(NULL);
    assert!(decode::<Value>(&trailing).is_err());
}

#[test]
fn out_of_range_integers_are_encode_errors() {
    let mut buf = Vec::new();
    assert!(matches!(
        encode(&u128::MAX, &mut buf),
        Err(CodecError::Encode(_))
    ));
    assert_eq!(round_trip(&-5i128), -5);
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        ".{0,80}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_json_value_round_trips(v in arb_json()) {
        prop_assert_eq!(round_trip(&v), v);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode::<Value>(&bytes);
    }
}

/// A compound longer than its two reserved length bytes hold (16 KiB) moves its content
/// over for a longer length, nested or not, and reads back.
#[test]
fn compounds_past_the_reserved_length_round_trip() {
    let v = json!({
        "short": [1, 2, 3],
        "long": ["x".repeat(20_000), {"deeper": "y".repeat(70_000)}],
        "after": true,
    });
    assert_eq!(round_trip(&v), v);
    let mut buf = Vec::new();
    encode(&v, &mut buf).unwrap();
    // Every value says its length: skipping the top-level value reads it whole.
    let mut d = &buf[..];
    assert!(crate::view::read::next(&mut d).is_some());
    assert!(d.is_empty());
}

/// `Keep::AllButManagedFields` leaves out the top-level `metadata.managedFields` and
/// nothing else: of a typed object, of `DynamicObject` (whose top level is a map, its fields
/// flattened), and not a field of that name anywhere below.
#[test]
fn managed_fields_are_left_out_of_the_metadata_alone() {
    let pod = pod_with_managed_fields();
    let mut without = pod.clone();
    without.metadata.managed_fields = None;
    let mut buf = Vec::new();
    assert!(encode_with(&pod, &mut buf, Keep::AllButManagedFields).unwrap());
    assert_eq!(
        decode::<k8s_openapi::api::core::v1::Pod>(&buf).unwrap(),
        without
    );
    let mut plain = Vec::new();
    encode(&without, &mut plain).unwrap();
    assert_eq!(
        buf, plain,
        "the same bytes as an object that never had them"
    );
    // Nothing to leave out: nothing left out, the same bytes.
    let mut again = Vec::new();
    assert!(!encode_with(&without, &mut again, Keep::AllButManagedFields).unwrap());
    assert_eq!(again, plain);

    let dynamic: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": serde_json::to_value(&pod.metadata).unwrap(),
        "spec": {"managedFields": ["kept: not the metadata's"],
                 "metadata": {"managedFields": "kept: below the top"}}
    }))
    .unwrap();
    let mut buf = Vec::new();
    assert!(encode_with(&dynamic, &mut buf, Keep::AllButManagedFields).unwrap());
    let back: Value = decode(&buf).unwrap();
    let mut want = serde_json::to_value(&dynamic).unwrap();
    want["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(back, want);
    assert_eq!(
        back["spec"]["metadata"]["managedFields"],
        "kept: below the top"
    );
}
