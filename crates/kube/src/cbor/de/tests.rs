use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// CBOR as the API server writes it: the self-described tag, then the item (ciborium writes
/// definite lengths for values whose length is known, as every `serde_json::Value` is).
fn cbor(v: &Value) -> Vec<u8> {
    let mut out = vec![0xd9, 0xd9, 0xf7];
    ciborium::into_writer(v, &mut out).unwrap();
    out
}

#[test]
fn an_object_decodes_as_its_json_does() {
    let v = json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "a", "labels": {"app": "web"}, "generation": 3,
                     "managedFields": [{"fieldsV1": {"f:spec": {}}, "manager": "helm"}]},
        "spec": {"minReplicaCount": 0, "maxReplicaCount": 100, "cooldown": -5, "ratio": 0.25,
                 "paused": false, "fallback": null, "triggers": [{"type": "cpu", "metadata": {"value": "50"}}]}
    });
    let back: Value = from_slice(&cbor(&v)).unwrap();
    assert_eq!(back, v);
    let typed: kube::api::DynamicObject = from_slice(&cbor(&v)).unwrap();
    assert_eq!(typed.metadata.name.as_deref(), Some("a"));
    assert_eq!(typed.data["spec"]["maxReplicaCount"], 100);
}

#[test]
fn floats_of_every_width_and_options_decode() {
    // 1.5 as a half, a single and a double; null and undefined are None.
    for bytes in [
        &[0xf9, 0x3e, 0x00][..],
        &[0xfa, 0x3f, 0xc0, 0x00, 0x00],
        &[0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0],
    ] {
        assert_eq!(from_slice::<f64>(bytes).unwrap(), 1.5);
    }
    assert_eq!(
        from_slice::<f64>(&[0xf9, 0x00, 0x01]).unwrap(),
        2f64.powi(-24)
    );
    assert_eq!(from_slice::<Option<u8>>(&[0xf6]).unwrap(), None);
    assert_eq!(from_slice::<Option<u8>>(&[0xf7]).unwrap(), None);
    assert_eq!(
        from_slice::<Option<u8>>(&[0xd9, 0xd9, 0xf7, 0x07]).unwrap(),
        Some(7)
    );
    assert_eq!(from_slice::<i64>(&[0x38, 0x63]).unwrap(), -100);
}

#[test]
fn what_the_api_server_never_writes_is_malformed_not_a_panic() {
    let cases: [(&[u8], &str); 6] = [
        (&[0x9f, 0x01, 0xff], "indefinite"),
        (&[0xa1, 0x01, 0x02], "not a string"),
        (&[0x1c], "reserved"),
        (&[0xf8, 0x20], "simple"),
        (&[0x62, 0xff, 0xfe], "UTF-8"),
        (&[0x01, 0x02], "after"),
    ];
    for (bytes, what) in cases {
        let err = from_slice::<Value>(bytes).unwrap_err();
        assert!(err.to_string().contains(what), "{bytes:?}: {err}");
    }
    let deep: Vec<u8> = std::iter::repeat_n(0x81, MAX_DEPTH + 1)
        .chain([0x01])
        .collect();
    let err = from_slice::<Value>(&deep).unwrap_err();
    assert!(err.to_string().contains("depth"), "{err}");
    let shallow: Vec<u8> = std::iter::repeat_n(0x81, MAX_DEPTH - 1)
        .chain([0x01])
        .collect();
    assert!(from_slice::<Value>(&shallow).is_ok());
    assert_eq!(from_slice::<Value>(&[0x82, 0x01]).unwrap_err(), Error::Cut);
    // A length past the body is cut short, not an allocation.
    assert_eq!(
        from_slice::<Value>(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).unwrap_err(),
        Error::Cut
    );
}

#[test]
fn item_len_finds_each_item_of_a_sequence_and_waits_for_a_cut_one() {
    let a = cbor(&json!({"type": "ADDED", "object": {"metadata": {"name": "a"}}}));
    let b = cbor(&json!({"type": "BOOKMARK"}));
    let mut seq = a.clone();
    seq.extend(&b);
    assert_eq!(item_len(&seq).unwrap(), Some(a.len()));
    assert_eq!(item_len(&seq[a.len()..]).unwrap(), Some(b.len()));
    for cut in 0..a.len() {
        assert_eq!(item_len(&a[..cut]).unwrap(), None, "cut at {cut}");
    }
    assert!(item_len(&[0x9f]).is_err());
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
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
    /// Any JSON value written as CBOR decodes back to itself; any cut of it is `Cut` or an
    /// error, never a panic, and `item_len` agrees with the decoder on where it ends.
    #[test]
    fn cbor_of_any_json_value_decodes_to_it(v in json_value(), cut in any::<prop::sample::Index>()) {
        let bytes = cbor(&v);
        prop_assert_eq!(&from_slice::<Value>(&bytes).unwrap(), &v);
        prop_assert_eq!(item_len(&bytes).unwrap(), Some(bytes.len()));
        let at = cut.index(bytes.len());
        prop_assert!(from_slice::<Value>(&bytes[..at]).is_err());
        prop_assert_eq!(item_len(&bytes[..at]).unwrap(), None);
    }

    /// Arbitrary bytes: an error or a value, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = from_slice::<Value>(&bytes);
        let _ = item_len(&bytes);
    }
}

/// What the API server writes: Go strings (keys too) as byte strings, `[]byte` as a byte
/// string tagged 22 — read as JSON has them: the string, the base64 text.
#[test]
fn byte_strings_are_strings_and_tagged_ones_their_base64_text() {
    // {"name": "web", "data": 22(h'00ff10')}
    let mut bytes = vec![0xd9, 0xd9, 0xf7, 0xa2, 0x44];
    bytes.extend(b"name");
    bytes.push(0x43);
    bytes.extend(b"web");
    bytes.push(0x44);
    bytes.extend(b"data");
    bytes.extend([0xd6, 0x43, 0x00, 0xff, 0x10]);
    let v: Value = from_slice(&bytes).unwrap();
    assert_eq!(v, json!({"name": "web", "data": "AP8Q"}));
    // A Secret's data: 22-tagged bytes under a byte-string key, decoded by k8s-openapi.
    let mut secret = vec![0xa1, 0x44];
    secret.extend(b"data");
    secret.extend([0xa1, 0x41, b'k', 0xd6, 0x43, 0x00, 0xff, 0x10]);
    let secret: k8s_openapi::api::core::v1::Secret = from_slice(&secret).unwrap();
    assert_eq!(secret.data.unwrap()["k"].0, [0x00, 0xff, 0x10]);
    for (tag, want) in [(21u8, "AP8Q"), (22, "AP8Q"), (23, "00ff10")] {
        let b = [0xc0 | tag, 0x43, 0x00, 0xff, 0x10];
        assert_eq!(from_slice::<String>(&b).unwrap(), want, "tag {tag}");
    }
    assert_eq!(encode_expected(Some(22), b"ab"), "YWI=");
    assert_eq!(encode_expected(Some(21), b"ab"), "YWI");
    assert_eq!(encode_expected(Some(22), b""), "");
}
