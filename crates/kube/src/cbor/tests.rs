use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::decode::testing::pods;

fn cbor(v: &Value) -> Vec<u8> {
    let mut out = vec![0xd9, 0xd9, 0xf7];
    ciborium::into_writer(v, &mut out).unwrap();
    out
}

fn pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": "5"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

#[test]
fn a_list_decodes_and_an_item_that_does_not_is_skipped_alone() {
    let mut bad = pod("bad");
    bad["spec"]["containers"] = json!("not a list");
    let body = cbor(&json!({
        "kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "10", "continue": "next"},
        "items": [pod("a"), bad, pod("b")]
    }));
    let page = decode_list::<Pod>(&body, &pods(), None).unwrap();
    let names: Vec<_> = page
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(page.resource_version, "10");
    assert_eq!(page.continue_token.as_deref(), Some("next"));
    assert_eq!(page.undecodable.len(), 1);
    let text = &page.undecodable[0].detail;
    assert!(
        text.contains("invalid type") && !text.contains("not a list"),
        "{text}"
    );
    assert_eq!(page.undecodable[0].key.name(), "bad");
}

#[test]
fn events_of_every_type_decode_and_another_kind_is_unexpected() {
    let added = cbor(&json!({"type": "ADDED", "object": pod("a")}));
    assert!(
        matches!(decode_event::<Pod>(&added, &pods(), None), Ok(WatchEvent::Added(p)) if p.metadata.name.as_deref() == Some("a"))
    );
    let bookmark = cbor(
        &json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
        "metadata": {"resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}}}}),
    );
    assert!(
        matches!(decode_event::<Pod>(&bookmark, &pods(), None), Ok(WatchEvent::Bookmark(b)) if b.initial_events_end && b.resource_version == "12")
    );
    let error = cbor(
        &json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}),
    );
    assert!(
        matches!(decode_event::<Pod>(&error, &pods(), None), Err(Error::Api(s)) if s.code == 410)
    );
    let mut cm = pod("cm");
    cm["kind"] = json!("ConfigMap");
    cm["apiVersion"] = json!("v1");
    let other = cbor(&json!({"type": "MODIFIED", "object": cm}));
    assert!(
        matches!(
            decode_event::<Pod>(&other, &pods(), None),
            Err(Error::UnexpectedKind { .. })
        ),
        "{:?}",
        decode_event::<Pod>(&other, &pods(), None)
    );
    let status = cbor(&json!({"kind": "Status", "code": 500, "reason": "InternalError"}));
    assert!(
        matches!(decode_event::<Pod>(&status, &pods(), None), Err(Error::Api(s)) if s.code == 500)
    );
    assert!(matches!(
        decode_event::<Pod>(b"\xff", &pods(), None),
        Err(Error::Decode { .. })
    ));
}

#[test]
fn a_sequence_hands_out_each_event_once_it_is_whole() {
    let a = cbor(&json!({"type": "ADDED", "object": pod("a")}));
    let b = cbor(&json!({"type": "DELETED", "object": pod("b")}));
    let mut body = a.clone();
    body.extend(&b);
    for chunk in [1, 3, 7, body.len()] {
        let mut seq = Sequence::default();
        let mut out = Vec::new();
        for c in body.chunks(chunk) {
            seq.push(c);
            while let Some(item) = seq.next_item().unwrap() {
                out.push(item.to_vec());
            }
        }
        assert_eq!(out, [a.clone(), b.clone()], "chunks of {chunk}");
        assert_eq!(seq.buffered(), 0);
    }
    let mut seq = Sequence::default();
    seq.push(&a[..a.len() - 1]);
    assert_eq!(seq.next_item().unwrap(), None);
    assert_eq!(seq.buffered(), a.len() - 1);
    let mut seq = Sequence::default();
    seq.push(&[0x9f, 0x01]);
    assert!(
        seq.next_item().is_err(),
        "an indefinite length cannot be framed"
    );
}
