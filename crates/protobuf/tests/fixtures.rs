//! The fixtures of tests/data, written by Go's own encoders (`go run ./cmd/proto-corpus
//! -fixtures` in xtask/go): each protobuf body decodes to what its JSON twin decodes to.

use crate::support::without_nulls;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kinformer_protobuf::{Error, EventType, FrameDecoder, Object, WatchEvent};
use serde_json::Value;

const POD_PB: &[u8] = include_bytes!("data/pod.pb");
const POD_JSON: &[u8] = include_bytes!("data/pod.json");
const LIST_PB: &[u8] = include_bytes!("data/pod-list.pb");
const LIST_JSON: &[u8] = include_bytes!("data/pod-list.json");
const WATCH: &[u8] = include_bytes!("data/watch-stream.pb");

#[test]
fn a_realistic_pod_decodes_as_its_json_does() {
    let from_pb: Pod = kinformer_protobuf::from_slice(POD_PB).expect("protobuf");
    let from_json: Pod = serde_json::from_slice(POD_JSON).expect("json");
    assert_eq!(from_pb, from_json);
    assert_eq!(from_pb.spec.as_ref().map(|s| s.containers.len()), Some(3));
}

#[test]
fn a_realistic_pod_shows_the_same_json_value() {
    let from_pb: Value = kinformer_protobuf::from_slice(POD_PB).expect("protobuf");
    let from_json: Value = serde_json::from_slice(POD_JSON).expect("json");
    assert_eq!(without_nulls(from_pb), without_nulls(from_json));
}

#[test]
fn a_pod_list_decodes_item_by_item_with_its_metadata() {
    let list = Object::from_bytes(LIST_PB)
        .and_then(|o| o.list())
        .expect("list");
    assert_eq!((list.api_version(), list.kind()), ("v1", "PodList"));
    assert_eq!(list.meta().resource_version, "1234");
    assert_eq!(list.meta().continue_token, None);
    assert_eq!(list.meta().remaining_item_count, None);
    assert_eq!(list.len(), 2);
    let items: Vec<Pod> = list.items().collect::<Result<_, _>>().expect("items");
    let json: k8s_openapi::List<Pod> = serde_json::from_slice(LIST_JSON).expect("json");
    assert_eq!(items, json.items);
    // The whole list through k8s-openapi's List too.
    let whole: k8s_openapi::List<Pod> = kinformer_protobuf::from_slice(LIST_PB).expect("whole");
    assert_eq!(whole, json);
}

#[test]
fn a_watch_stream_yields_its_events_in_any_chunking() {
    for chunk in [1, 7, 512, WATCH.len()] {
        let mut frames = FrameDecoder::new();
        let mut seen = Vec::new();
        for c in WATCH.chunks(chunk) {
            frames.push(c);
            while let Some(frame) = frames.next_frame().expect("frame") {
                let ev = WatchEvent::from_frame(frame).expect("event");
                let what = match ev.event_type() {
                    EventType::Added | EventType::Modified => {
                        let pod: Pod = ev.object().deserialize().expect("pod");
                        format!(
                            "{} {}",
                            ev.event_type(),
                            pod.metadata.resource_version.unwrap_or_default()
                        )
                    }
                    EventType::Bookmark => {
                        let pod: Pod = ev.object().deserialize().expect("bookmark");
                        let end = pod
                            .metadata
                            .annotations
                            .unwrap_or_default()
                            .get("k8s.io/initial-events-end")
                            .cloned();
                        format!(
                            "BOOKMARK {} {end:?}",
                            pod.metadata.resource_version.unwrap_or_default()
                        )
                    }
                    EventType::Error => {
                        assert_eq!(ev.object().kind(), "Status");
                        let status: Status = ev.object().deserialize().expect("status");
                        format!("ERROR {:?} {:?}", status.code, status.reason)
                    }
                    EventType::Deleted => unreachable!("no DELETED in the fixture"),
                };
                seen.push(what);
            }
        }
        frames.finish().expect("ends between frames");
        assert_eq!(
            seen,
            [
                "ADDED 1287",
                "MODIFIED 1301",
                "BOOKMARK 1302 Some(\"true\")",
                "ERROR Some(410) Some(\"Expired\")"
            ],
            "chunk {chunk}"
        );
    }
}

#[test]
fn a_status_decodes_into_kube_status_too() {
    let mut frames = FrameDecoder::new();
    frames.push(WATCH);
    let mut last = None;
    while let Some(f) = frames.next_frame().expect("frame") {
        last = Some(f.to_vec());
    }
    let last = last.expect("frames");
    let ev = WatchEvent::from_frame(&last).expect("event");
    let status: kube::core::Status = ev.object().deserialize().expect("kube Status");
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    assert!(status.is_failure());
}

#[test]
fn partial_object_meta_and_projections_take_what_they_need() {
    #[derive(serde::Deserialize)]
    struct Projection {
        metadata: Meta,
        spec: Spec,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        name: String,
        labels: std::collections::BTreeMap<String, String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        node_name: String,
        containers: Vec<Named>,
    }
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let p: Projection = kinformer_protobuf::from_slice(POD_PB).expect("projection");
    assert_eq!(p.metadata.name, "web-0");
    assert_eq!(
        p.metadata.labels.get("app").map(String::as_str),
        Some("web")
    );
    assert_eq!(p.spec.node_name, "node-3");
    let names: Vec<_> = p.spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app", "sidecar", "metrics"]);

    let meta: kube::core::PartialObjectMeta<Pod> =
        kinformer_protobuf::from_slice(POD_PB).expect("PartialObjectMeta");
    let from_json: kube::core::PartialObjectMeta<Pod> =
        serde_json::from_slice(POD_JSON).expect("json");
    assert_eq!(meta.metadata, from_json.metadata);
    assert_eq!(meta.types, from_json.types);
}

#[test]
fn json_is_told_apart_from_protobuf() {
    assert!(matches!(
        Object::from_bytes(POD_JSON),
        Err(Error::NotProtobuf)
    ));
}

#[test]
fn a_wrong_target_kind_is_rejected_by_the_target() {
    use k8s_openapi::api::core::v1::Service;
    let err = kinformer_protobuf::from_slice::<Service>(POD_PB).expect_err("a pod is no service");
    assert!(matches!(err, Error::Rejected { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "cannot decode Pod into the target type: invalid value: string, expected Service"
    );
}
