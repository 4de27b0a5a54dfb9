//! Kubernetes protobuf on the wire: list pages, watch frames, bookmarks and error statuses,
//! decoded by kinformer-protobuf straight into `K` (whatever decodes the object's JSON),
//! without any value from the body in an error.

use kinformer_protobuf as pb;
use serde::de::DeserializeOwned;

use super::ProtobufDecode;
use super::decode::{BookmarkObject, Expected, KeyOnly, Modify, finish, undecodable};
use kinformer_reflector::{Bookmark, Error, ListPage, WatchEvent};

/// A decoding failure of `what`. kinformer-protobuf's messages name the schema's fields,
/// never a value; a type the schema does not know gets a hint.
fn decode_error(what: impl Into<String>, e: &pb::Error) -> Error {
    match e {
        pb::Error::UnknownKind { .. } => Error::decode(
            what,
            format!("{e}: ask for JSON for this type (WireFormat::Json or Auto)"),
        ),
        _ => Error::decode(what, e.to_string()),
    }
}

/// Checks the kind of a list envelope (`PodList` for pods): the items of a protobuf list
/// carry no kind of their own, the list's says what they are.
fn check_list(expected: &Expected, list: &pb::Object<'_>) -> Result<(), Error> {
    let kind = list.kind().strip_suffix("List").unwrap_or(list.kind());
    expected.check(Some(list.api_version()), Some(kind))
}

/// Decodes a list page, modifying and wrapping each item in its `Arc` as soon as it is
/// decoded (so a page never holds every item in its unmodified form at once).
pub(super) fn decode_list<K: DeserializeOwned>(
    body: &[u8],
    expected: &Expected,
    modify: Option<&Modify<K>>,
    custom: Option<&ProtobufDecode<K>>,
) -> Result<ListPage<K>, Error> {
    let object = pb::Object::from_bytes(body).map_err(|e| decode_error("list", &e))?;
    check_list(expected, &object)?;
    let list = object.list().map_err(|e| decode_error("list", &e))?;
    let mut items = Vec::with_capacity(list.len());
    let mut skipped = Vec::new();
    let decoded: Box<dyn Iterator<Item = Result<K, pb::Error>>> = match custom {
        None => Box::new(list.items::<K>()),
        Some(decode) => Box::new(list.objects().map(|o| o.and_then(|o| decode(&o)))),
    };
    for (i, item) in decoded.enumerate() {
        match item {
            Ok(item) => items.push(finish(item, modify)),
            Err(e) => {
                // Only the failing item is read again, for its key alone.
                let key = list.items::<KeyOnly>().nth(i).and_then(Result::ok);
                skipped.push(undecodable(
                    decode_error(format!("list item {i}"), &e),
                    key,
                )?);
            }
        }
    }
    let meta = list.meta();
    let mut page = ListPage::shared(items, meta.resource_version.clone());
    page.continue_token = meta.continue_token.clone();
    page.shard_selector = meta.shard_selector.clone();
    page.undecodable = skipped;
    Ok(page)
}

/// Decodes one frame of a watch stream.
pub(super) fn decode_frame<K: DeserializeOwned>(
    frame: &[u8],
    expected: &Expected,
    modify: Option<&Modify<K>>,
    custom: Option<&ProtobufDecode<K>>,
) -> Result<WatchEvent<K>, Error> {
    use pb::EventType;

    let event = pb::WatchEvent::from_frame(frame).map_err(|e| decode_error("watch event", &e))?;
    let object = event.object();
    let decode = |ty: EventType| {
        expected.check(Some(object.api_version()), Some(object.kind()))?;
        let decoded = match custom {
            None => object.deserialize(),
            Some(decode) => decode(&object),
        };
        let mut obj: K = decoded.map_err(|e| {
            let err = decode_error(format!("{ty} object"), &e);
            let key = object.deserialize::<KeyOnly>().ok();
            match undecodable(err, key) {
                Ok(object) => Error::Undecodable {
                    object,
                    deleted: ty == EventType::Deleted,
                },
                Err(e) => e,
            }
        })?;
        if let Some(m) = modify {
            m(&mut obj);
        }
        Ok::<K, Error>(obj)
    };
    match event.event_type() {
        ty @ EventType::Added => decode(ty).map(WatchEvent::Added),
        ty @ EventType::Modified => decode(ty).map(WatchEvent::Modified),
        ty @ EventType::Deleted => decode(ty).map(WatchEvent::Deleted),
        EventType::Bookmark => decode_bookmark(&object).map(WatchEvent::Bookmark),
        EventType::Error => {
            let status: kube::core::Status = object
                .deserialize()
                .map_err(|e| decode_error("ERROR event", &e))?;
            Err(Error::Api(crate::response::api_status(status)))
        }
    }
}

fn decode_bookmark(object: &pb::Object<'_>) -> Result<Bookmark, Error> {
    object
        .deserialize::<BookmarkObject>()
        .map(Bookmark::from)
        .map_err(|e| decode_error("BOOKMARK object", &e))
}

/// Decodes the `Status` of an error response.
pub(super) fn decode_status(body: &[u8]) -> Result<kube::core::Status, pb::Error> {
    pb::from_slice(body)
}

#[cfg(test)]
pub(super) mod tests {
    //! A small protobuf writer for the shapes the tests need (the envelope, `WatchEvent`,
    //! `Status`, pods with a few metadata fields, pod lists), field numbers from
    //! k8s.io/api and apimachinery's `generated.proto`.

    use std::sync::Arc;

    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Pod, Secret};
    use serde::Deserialize;

    use super::super::decode::INITIAL_EVENTS_END;
    use super::super::decode::testing::{object_of, pods};
    use super::*;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A length-delimited field.
    pub(crate) fn field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
        varint(out, u64::from(number) << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    fn int_field(out: &mut Vec<u8>, number: u32, v: u64) {
        varint(out, u64::from(number) << 3);
        varint(out, v);
    }

    /// `k8s\0` + `runtime.Unknown{typeMeta, raw}`.
    pub(crate) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = Vec::new();
        field(&mut type_meta, 1, api_version.as_bytes());
        field(&mut type_meta, 2, kind.as_bytes());
        let mut out = pb::MAGIC.to_vec();
        field(&mut out, 1, &type_meta);
        field(&mut out, 2, raw);
        out
    }

    /// `ObjectMeta{name, namespace, resourceVersion, labels, annotations}`.
    pub(crate) fn object_meta(name: &str, rv: &str, annotations: &[(&str, &str)]) -> Vec<u8> {
        let mut m = Vec::new();
        if !name.is_empty() {
            field(&mut m, 1, name.as_bytes());
            field(&mut m, 3, b"ns");
        }
        field(&mut m, 6, rv.as_bytes());
        for (k, v) in annotations {
            let mut entry = Vec::new();
            field(&mut entry, 1, k.as_bytes());
            field(&mut entry, 2, v.as_bytes());
            field(&mut m, 12, &entry);
        }
        m
    }

    /// A pod message (not enveloped): its metadata, and a container image.
    pub(crate) fn pod(name: &str, rv: &str) -> Vec<u8> {
        let mut container = Vec::new();
        field(&mut container, 1, b"c");
        field(&mut container, 2, b"busybox");
        let mut spec = Vec::new();
        field(&mut spec, 2, &container);
        let mut pod = Vec::new();
        field(&mut pod, 1, &object_meta(name, rv, &[]));
        field(&mut pod, 2, &spec);
        pod
    }

    /// A `PodList` envelope of `pods` (messages), with a resourceVersion and continue token.
    pub(crate) fn pod_list(pods: &[Vec<u8>], rv: &str, cont: &str) -> Vec<u8> {
        let mut meta = Vec::new();
        field(&mut meta, 2, rv.as_bytes());
        field(&mut meta, 3, cont.as_bytes());
        let mut list = Vec::new();
        field(&mut list, 1, &meta);
        for p in pods {
            field(&mut list, 2, p);
        }
        envelope("v1", "PodList", &list)
    }

    /// A `WatchEvent{type, object: RawExtension{raw: envelope}}` frame (without its prefix).
    pub(crate) fn event(ty: &str, object: &[u8]) -> Vec<u8> {
        let mut raw = Vec::new();
        field(&mut raw, 1, object);
        let mut ev = Vec::new();
        field(&mut ev, 1, ty.as_bytes());
        field(&mut ev, 2, &raw);
        ev
    }

    /// A `Status` message (not enveloped).
    fn status(code: u64, reason: &str, message: &str) -> Vec<u8> {
        let mut s = Vec::new();
        field(&mut s, 2, b"Failure");
        field(&mut s, 3, message.as_bytes());
        field(&mut s, 4, reason.as_bytes());
        int_field(&mut s, 6, code);
        s
    }

    /// An enveloped `Status`, as an error response body.
    pub(crate) fn status_envelope(code: u64, reason: &str, message: &str) -> Vec<u8> {
        envelope("v1", "Status", &status(code, reason, message))
    }

    #[test]
    fn added_modified_deleted_decode_to_objects() {
        for t in ["ADDED", "MODIFIED", "DELETED"] {
            let frame = event(t, &envelope("v1", "Pod", &pod("a", "5")));
            let (ty, pod) = object_of(decode_frame::<Pod>(&frame, &pods(), None, None).unwrap());
            assert_eq!(ty, t);
            assert_eq!(pod.metadata.resource_version.as_deref(), Some("5"));
            assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
            let image = pod.spec.unwrap().containers[0].image.clone();
            assert_eq!(image.as_deref(), Some("busybox"));
        }
    }

    #[test]
    fn bookmark_carries_rv_and_the_initial_events_end_annotation() {
        let mut marked = Vec::new();
        field(
            &mut marked,
            1,
            &object_meta("", "210", &[(INITIAL_EVENTS_END, "true")]),
        );
        let frame = event("BOOKMARK", &envelope("v1", "Pod", &marked));
        let ev = decode_frame::<Pod>(&frame, &pods(), None, None).unwrap();
        assert_eq!(ev, WatchEvent::Bookmark(Bookmark::new("210", true)));
        let mut plain = Vec::new();
        field(&mut plain, 1, &object_meta("", "211", &[]));
        let frame = event("BOOKMARK", &envelope("v1", "Pod", &plain));
        let ev = decode_frame::<Pod>(&frame, &pods(), None, None).unwrap();
        assert_eq!(ev, WatchEvent::Bookmark(Bookmark::new("211", false)));
    }

    #[test]
    fn an_error_event_is_an_api_error_with_its_status() {
        let frame = event(
            "ERROR",
            &status_envelope(410, "Expired", "too old resource version: 1 (5)"),
        );
        let err = decode_frame::<Pod>(&frame, &pods(), None, None).unwrap_err();
        assert!(err.is_expired(), "{err}");
        assert_eq!(err.status_code(), Some(410));
    }

    #[test]
    fn an_object_of_another_kind_is_unexpected_kind_not_decode() {
        let frame = event("ADDED", &envelope("v1", "ConfigMap", &pod("a", "1")));
        match decode_frame::<Pod>(&frame, &pods(), None, None).unwrap_err() {
            Error::UnexpectedKind { expected, actual } => {
                assert_eq!(
                    (expected.as_str(), actual.as_str()),
                    ("v1/Pod", "v1/ConfigMap")
                );
            }
            other => panic!("{other:?}"),
        }
        let list = envelope("v1", "ConfigMapList", &[]);
        match decode_list::<Pod>(&list, &pods(), None, None).unwrap_err() {
            Error::UnexpectedKind { actual, .. } => assert_eq!(actual, "v1/ConfigMap"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_frames_and_unknown_types_are_decode_errors_without_body_bytes() {
        let good = event("ADDED", &envelope("v1", "Pod", &pod("secret-name", "1")));
        let cases: Vec<Vec<u8>> = vec![
            b"not protobuf".to_vec(),
            event("WHAT", &envelope("v1", "Pod", &pod("a", "1"))),
            event("ADDED", b"no envelope"),
            good[..good.len() - 3].to_vec(),
            event("ADDED", &envelope("v1", "Pod", &[0xff, 0xff, 0xff])),
        ];
        for frame in &cases {
            let err = decode_frame::<Pod>(frame, &pods(), None, None).unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(matches!(err, Error::Decode { .. }), "{shown}");
            assert!(!shown.contains("secret-name"), "{shown}");
        }
        // A type the schema does not know, answered in protobuf: say so.
        let widgets = Expected {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
        };
        let frame = event("ADDED", &envelope("example.com/v1", "Widget", &[]));
        let err = decode_frame::<serde_json::Value>(&frame, &widgets, None, None).unwrap_err();
        assert!(err.to_string().contains("WireFormat::Json"), "{err}");
    }

    #[test]
    fn a_rejected_value_names_the_field_not_the_value() {
        // A Secret's data into a type that wants numbers: serde would quote the value.
        let mut data = Vec::new();
        let mut entry = Vec::new();
        field(&mut entry, 1, b"password");
        field(&mut entry, 2, b"hunter2");
        field(&mut data, 2, &entry);
        let secret = envelope("v1", "Secret", &data);
        let frame = event("ADDED", &secret);
        let exp = Expected {
            api_version: "v1".into(),
            kind: "Secret".into(),
        };
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Strict {
            data: BTreeMap<String, u32>,
        }
        let err = decode_frame::<Strict>(&frame, &exp, None, None).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, Error::Decode { .. }), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(decode_frame::<Secret>(&frame, &exp, None, None).is_ok());
    }

    #[test]
    fn an_object_that_does_not_fit_the_type_is_skipped_alone_with_its_key() {
        /// A pod type whose `spec.containers` is a number: no pod fits it.
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Strict {
            spec: StrictSpec,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct StrictSpec {
            containers: u32,
        }
        let body = pod_list(&[pod("a", "1")], "10", "");
        let page = decode_list::<Strict>(&body, &pods(), None, None).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.resource_version, "10");
        assert_eq!(page.undecodable.len(), 1);
        assert_eq!(page.undecodable[0].key.as_str(), "ns/a");
        for (ty, deleted) in [("ADDED", false), ("MODIFIED", false), ("DELETED", true)] {
            let frame = event(ty, &envelope("v1", "Pod", &pod("a", "1")));
            match decode_frame::<Strict>(&frame, &pods(), None, None).unwrap_err() {
                Error::Undecodable { object, deleted: d } => {
                    assert_eq!((object.key.as_str(), d), ("ns/a", deleted), "{ty}");
                }
                other => panic!("{ty}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_custom_protobuf_decoder_makes_every_item_and_event_and_its_refusals_are_skipped_alone() {
        // A decoder of names only, which refuses the object named "b".
        let names: ProtobufDecode<String> = Arc::new(|o: &pb::Object<'_>| {
            #[derive(Deserialize)]
            struct Named {
                metadata: NameOnly,
            }
            #[derive(Deserialize)]
            struct NameOnly {
                name: String,
            }
            let name = o.deserialize::<Named>()?.metadata.name;
            if name == "b" {
                // What a target type's refusal looks like.
                return o.deserialize::<u32>().map(|n| n.to_string());
            }
            Ok(name)
        });
        let body = pod_list(&[pod("a", "1"), pod("b", "2"), pod("c", "3")], "10", "");
        let page = decode_list::<String>(&body, &pods(), None, Some(&names)).unwrap();
        let got: Vec<&str> = page.items.iter().map(|n| n.as_str()).collect();
        assert_eq!(got, ["a", "c"]);
        assert_eq!(page.undecodable.len(), 1);
        assert_eq!(page.undecodable[0].key.as_str(), "ns/b");

        let frame = event("MODIFIED", &envelope("v1", "Pod", &pod("a", "3")));
        match decode_frame::<String>(&frame, &pods(), None, Some(&names)).unwrap() {
            WatchEvent::Modified(name) => assert_eq!(name, "a"),
            other => panic!("{other:?}"),
        }
        let frame = event("DELETED", &envelope("v1", "Pod", &pod("b", "4")));
        match decode_frame::<String>(&frame, &pods(), None, Some(&names)).unwrap_err() {
            Error::Undecodable { object, deleted } => {
                assert_eq!((object.key.as_str(), deleted), ("ns/b", true));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn list_pages_decode_with_rv_continue_and_modify_once_per_item() {
        let body = pod_list(&[pod("a", "1"), pod("b", "2")], "10", "c1");
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&seen);
        let strip: Modify<Pod> = Arc::new(move |p: &mut Pod| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            p.spec = None;
        });
        let page = decode_list::<Pod>(&body, &pods(), Some(&strip), None).unwrap();
        assert_eq!(page.resource_version, "10");
        assert_eq!(page.continue_token.as_deref(), Some("c1"));
        let names: Vec<_> = page
            .items
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert!(page.items.iter().all(|p| p.spec.is_none()));
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 2);

        let last = pod_list(&[], "11", "");
        let page = decode_list::<Pod>(&last, &pods(), None, None).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.continue_token, None);

        let bad = pod_list(&[pod("a", "1"), vec![0x0a, 0x05, 0x01]], "12", "");
        match decode_list::<Pod>(&bad, &pods(), None, None).unwrap_err() {
            Error::Decode { what, .. } => assert_eq!(what, "list item 1"),
            other => panic!("{other:?}"),
        }
        let modified = event("MODIFIED", &envelope("v1", "Pod", &pod("a", "3")));
        match decode_frame::<Pod>(&modified, &pods(), Some(&strip), None).unwrap() {
            WatchEvent::Modified(p) => assert!(p.spec.is_none()),
            other => panic!("{other:?}"),
        }
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[test]
    fn metadata_only_lists_and_events_decode_into_partial_object_meta() {
        use kube::core::PartialObjectMeta;

        let exp = Expected::partial_metadata();
        let mut item = Vec::new();
        field(&mut item, 1, &object_meta("a", "7", &[("k", "v")]));
        let mut list = Vec::new();
        let mut meta = Vec::new();
        field(&mut meta, 2, b"9");
        field(&mut list, 1, &meta);
        field(&mut list, 2, &item);
        let body = envelope("meta.k8s.io/v1", "PartialObjectMetadataList", &list);
        let page = decode_list::<PartialObjectMeta<Pod>>(&body, &exp, None, None).unwrap();
        assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
        assert_eq!(page.resource_version, "9");
        let frame = event(
            "ADDED",
            &envelope("meta.k8s.io/v1", "PartialObjectMetadata", &item),
        );
        match decode_frame::<PartialObjectMeta<Pod>>(&frame, &exp, None, None).unwrap() {
            WatchEvent::Added(p) => {
                assert_eq!(p.metadata.annotations.unwrap()["k"], "v");
            }
            other => panic!("{other:?}"),
        }
    }
}
