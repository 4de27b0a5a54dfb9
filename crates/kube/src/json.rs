//! JSON on the wire: list pages, watch lines, bookmarks and error bodies, decoded without
//! ever quoting a value from the body in an error.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::decode::{self, BookmarkObject, Expected, KeyOnly, ListMeta, Modify, RawList, finish};
use kinformer_reflector::{Bookmark, Error, ListPage, WatchEvent};

/// Checks the type fields of a raw object: from its leading keys only, where the API
/// server writes them (`{"kind":..,"apiVersion":..,"metadata":..}`), so that the check
/// costs next to nothing on the hot path; with `whole`, from anywhere in it.
fn check(expected: &Expected, raw: &RawValue, whole: bool) -> Result<(), Error> {
    let (api_version, kind) = peek_type(raw.get(), whole);
    expected.check(api_version.as_deref(), kind.as_deref())
}

/// Reads `apiVersion` and `kind` of a JSON object: from its leading keys only, or (with
/// `whole`) from anywhere in it. Malformed JSON gives what was found before the fault.
fn peek_type(raw: &str, whole: bool) -> (Option<String>, Option<String>) {
    use serde::de::{IgnoredAny, MapAccess, Visitor};

    struct Peek<'a> {
        found: &'a mut (Option<String>, Option<String>),
        whole: bool,
    }
    impl<'de> Visitor<'de> for Peek<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                match &*key {
                    "apiVersion" => self.found.0 = Some(map.next_value()?),
                    "kind" => self.found.1 = Some(map.next_value()?),
                    // Stopping early leaves the object unfinished, which the caller
                    // ignores: what was found is already stored.
                    _ if !self.whole => return Ok(()),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                if self.found.0.is_some() && self.found.1.is_some() {
                    return Ok(());
                }
            }
            Ok(())
        }
    }
    let mut found = (None, None);
    let mut de = serde_json::Deserializer::from_str(raw);
    let _ = serde::Deserializer::deserialize_map(
        &mut de,
        Peek {
            found: &mut found,
            whole,
        },
    );
    found
}

/// Decodes one object, telling a wrong kind from a malformed object.
fn decode_object<K: DeserializeOwned>(
    raw: &RawValue,
    expected: &Expected,
    what: impl FnOnce() -> String,
) -> Result<K, Error> {
    check(expected, raw, false)?;
    serde_json::from_str(raw.get()).map_err(|e| {
        // A wrong kind often fails to decode: say so rather than "cannot decode".
        match check(expected, raw, true) {
            Err(wrong_kind) => wrong_kind,
            Ok(()) => Error::decode(what(), describe_json_error(&e)),
        }
    })
}

/// Decodes a list page. The fast path decodes it in one pass, modifying and wrapping
/// each item in its `Arc` as soon as it is decoded (so a page never holds every item in
/// its unmodified form at once); only a page that fails is decoded again item by item,
/// to say which item failed and whether it is of another kind. (Items of a list are
/// checked for their kind that way only: the API server omits `kind` in the items of
/// built-in lists, and typed resources refuse another kind while decoding anyway.)
pub(super) fn decode_list<K: DeserializeOwned>(
    text: &str,
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<ListPage<K>, Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = ListSeed { modify };
    match seed
        .deserialize(&mut de)
        .and_then(|page| de.end().map(|()| page))
    {
        Ok(page) => Ok(page),
        Err(_) => decode_list_by_item(text, expected, modify),
    }
}

/// Deserializes a list page: `metadata`, and `items` through [`ItemsSeed`].
struct ListSeed<'m, K> {
    modify: Option<&'m Modify<K>>,
}

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ListSeed<'_, K> {
    type Value = ListPage<K>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for ListSeed<'_, K> {
    type Value = ListPage<K>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut meta = ListMeta::default();
        let mut items = Vec::new();
        while let Some(field) = map.next_key::<Cow<'de, str>>()? {
            match &*field {
                "metadata" => meta = map.next_value::<Option<ListMeta>>()?.unwrap_or_default(),
                "items" => {
                    items = map.next_value_seed(ItemsSeed {
                        modify: self.modify,
                    })?
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(meta.page(items, Vec::new()))
    }
}

/// Deserializes `items` (an array, or null) into `Arc`s, modifying each item first.
struct ItemsSeed<'m, K> {
    modify: Option<&'m Modify<K>>,
}

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ItemsSeed<'_, K> {
    type Value = Vec<Arc<K>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for ItemsSeed<'_, K> {
    type Value = Vec<Arc<K>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<K>()? {
            items.push(finish(item, self.modify));
        }
        Ok(items)
    }
}

fn decode_list_by_item<K: DeserializeOwned>(
    text: &str,
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<ListPage<K>, Error> {
    let raw: RawList<&RawValue> =
        serde_json::from_str(text).map_err(|e| Error::decode("list", describe_json_error(&e)))?;
    raw.page(
        modify,
        |item, i| decode_object(item, expected, || format!("list item {i}")),
        key_of,
    )
}

/// What an object's metadata says of its key, read on its own.
fn key_of(raw: &RawValue) -> Option<KeyOnly> {
    serde_json::from_str(raw.get()).ok()
}

/// Decodes one line of a watch stream.
pub(super) fn decode_event<K: DeserializeOwned>(
    line: &str,
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<WatchEvent<K>, Error> {
    #[derive(Deserialize)]
    struct RawEvent<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        object: &'a RawValue,
    }
    let ev: RawEvent<'_> = match serde_json::from_str(line) {
        Ok(ev) => ev,
        Err(e) => {
            // A bare Status instead of an event: the server failed mid-stream.
            if let Ok(status) = serde_json::from_str::<kube::core::Status>(line)
                && (status.code != 0 || !status.reason.is_empty())
            {
                return Err(Error::Api(crate::response::api_status(status)));
            }
            return Err(Error::decode("watch event", describe_json_error(&e)));
        }
    };
    decode::event(
        &ev.kind,
        |what| {
            let decoded = decode_object(ev.object, expected, || format!("{what} object"));
            decode::event_object(what, decoded, || key_of(ev.object), modify)
        },
        || decode_bookmark(ev.object),
        || {
            serde_json::from_str(ev.object.get())
                .map_err(|e| Error::decode("ERROR event", describe_json_error(&e)))
        },
    )
}

fn decode_bookmark(raw: &RawValue) -> Result<Bookmark, Error> {
    serde_json::from_str::<BookmarkObject>(raw.get())
        .map(Bookmark::from)
        .map_err(|e| Error::decode("BOOKMARK object", describe_json_error(&e)))
}

/// Why a JSON value did not decode, without the value itself: serde's messages quote
/// the offending value (`invalid value: string "c2VjcmV0", expected ...`), and the value
/// may come from a Secret. Field and variant names are schema, and stay.
pub(super) fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let msg = e.to_string();
    // serde_json appends " at line L column C"; we add our own position.
    let msg = msg
        .rsplit_once(" at line ")
        .map_or(msg.as_str(), |(m, _)| m);
    let what = match e.classify() {
        Category::Data => {
            if let Some(rest) = msg
                .strip_prefix("invalid type: ")
                .or_else(|| msg.strip_prefix("invalid value: "))
            {
                let kind = if msg.starts_with("invalid type") {
                    "invalid type"
                } else {
                    "invalid value"
                };
                match rest.split_once(", expected ") {
                    Some((_, exp)) => format!("{kind}, expected {}", redact_quoted(exp)),
                    None => kind.to_owned(),
                }
            } else {
                redact_quoted(msg)
            }
        }
        Category::Syntax => format!("malformed JSON ({})", redact_quoted(msg)),
        Category::Eof => "truncated JSON".to_owned(),
        Category::Io => "I/O error".to_owned(),
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// Replaces the content of every `"..."` with `…`.
fn redact_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut inside = false;
    for c in s.chars() {
        if c == '"' {
            if inside {
                out.push('…');
            }
            inside = !inside;
            out.push(c);
        } else if !inside {
            out.push(c);
        }
    }
    out
}

/// Decodes one line of a watch stream as the framing hands it out: blank lines are
/// skipped, a line that is not UTF-8 is a decode error.
pub(super) fn decode_line<K: DeserializeOwned>(
    line: &[u8],
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Option<Result<WatchEvent<K>, Error>> {
    let line = match std::str::from_utf8(line) {
        Ok(s) => s.trim(),
        Err(_) => return Some(Err(Error::decode("watch event", "not UTF-8"))),
    };
    (!line.is_empty()).then(|| decode_event(line, expected, modify))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

    use super::super::decode::testing::{object_of, pods};
    use super::*;

    #[test]
    fn added_modified_deleted_decode_to_objects() {
        for t in ["ADDED", "MODIFIED", "DELETED"] {
            let line = format!(
                r#"{{"type":"{t}","object":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"a","namespace":"ns","resourceVersion":"5"}}}}}}"#
            );
            let (ty, pod) = object_of(decode_event::<Pod>(&line, &pods(), None).unwrap());
            assert_eq!(ty, t);
            assert_eq!(pod.metadata.resource_version.as_deref(), Some("5"));
        }
    }

    #[test]
    fn bookmark_carries_rv_and_the_initial_events_end_annotation() {
        let line = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"210","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        let ev = decode_event::<Pod>(line, &pods(), None).unwrap();
        assert_eq!(ev, WatchEvent::Bookmark(Bookmark::new("210", true)));
        let plain = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"211"}}}"#;
        let ev = decode_event::<Pod>(plain, &pods(), None).unwrap();
        assert_eq!(ev, WatchEvent::Bookmark(Bookmark::new("211", false)));
    }

    #[test]
    fn error_event_and_bare_status_become_api_errors() {
        let line = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        let err = decode_event::<Pod>(line, &pods(), None).unwrap_err();
        assert!(err.is_expired(), "{err}");
        let bare = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"boom","reason":"InternalError","code":500}"#;
        let err = decode_event::<Pod>(bare, &pods(), None).unwrap_err();
        assert_eq!(err.status_code(), Some(500));
    }

    #[test]
    fn garbage_and_unknown_types_are_decode_errors() {
        for line in [
            "not json",
            r#"{"type":"ADDED"}"#,
            r#"{"type":"WHAT","object":{}}"#,
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":5}}}"#,
        ] {
            let err = decode_event::<Pod>(line, &pods(), None).unwrap_err();
            assert!(matches!(err, Error::Decode { .. }), "{line}: {err:?}");
        }
    }

    #[test]
    fn an_object_of_another_kind_is_unexpected_kind_not_decode() {
        let line = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}}"#;
        match decode_event::<Pod>(line, &pods(), None).unwrap_err() {
            Error::UnexpectedKind { expected, actual } => {
                assert_eq!(expected, "v1/Pod");
                assert_eq!(actual, "v1/ConfigMap");
            }
            other => panic!("{other:?}"),
        }
        // A dynamic type checks against its ApiResource.
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"));
        let exp = Expected {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        };
        assert!(matches!(
            decode_event::<DynamicObject>(line, &exp, None),
            Err(Error::UnexpectedKind { .. })
        ));
    }

    #[test]
    fn decode_errors_never_echo_values_from_the_body() {
        // A Secret whose data is not base64: serde would quote the value.
        let line = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"hunter2-not-base64!"}}}"#;
        let exp = Expected {
            api_version: "v1".into(),
            kind: "Secret".into(),
        };
        let err = decode_event::<Secret>(line, &exp, None).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, Error::Undecodable { .. }), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let err = decode_event::<ConfigMap>(
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"},"data":{"k":5}}}"#,
            &Expected { api_version: "v1".into(), kind: "ConfigMap".into() },
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    /// A pod whose `spec.containers` is a number: the pod type cannot read it.
    fn bad_pod(name: &str) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}"}},"spec":{{"containers":7}}}}"#
        )
    }

    #[test]
    fn an_object_that_does_not_fit_the_type_is_skipped_alone_with_its_key() {
        let text = format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{{"metadata":{{"name":"a","namespace":"ns"}}}},{},{{"metadata":{{"name":"c","namespace":"ns"}}}}]}}"#,
            bad_pod("b")
        );
        let page = decode_list::<Pod>(&text, &pods(), None).unwrap();
        let names: Vec<_> = page
            .items
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(page.resource_version, "10");
        assert_eq!(page.undecodable.len(), 1);
        assert_eq!(page.undecodable[0].key.as_str(), "ns/b");
        // The uid too, for a sharded lister-watcher to tell its shard's objects by.
        assert_eq!(page.undecodable[0].uid.as_deref(), Some("u-b"));
        assert!(
            page.undecodable[0].detail.contains("invalid type"),
            "{:?}",
            page.undecodable
        );

        for (ty, deleted) in [("ADDED", false), ("MODIFIED", false), ("DELETED", true)] {
            let line = format!(r#"{{"type":"{ty}","object":{}}}"#, bad_pod("b"));
            match decode_event::<Pod>(&line, &pods(), None).unwrap_err() {
                Error::Undecodable { object, deleted: d } => {
                    assert_eq!((object.key.as_str(), d), ("ns/b", deleted), "{ty}");
                    assert_eq!(object.uid.as_deref(), Some("u-b"));
                }
                other => panic!("{ty}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_object_without_a_readable_name_still_fails_its_whole_list() {
        let text = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[{"metadata":{"namespace":"ns"},"spec":{"containers":7}}]}"#;
        let err = decode_list::<Pod>(text, &pods(), None).unwrap_err();
        assert!(matches!(err, Error::Decode { .. }), "{err:?}");
    }

    #[test]
    fn the_type_peek_reads_leading_keys_and_the_whole_object_on_demand() {
        let lead = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}"#;
        assert_eq!(
            peek_type(lead, false),
            (Some("v1".into()), Some("Pod".into()))
        );
        let late = r#"{"metadata":{"name":"a"},"kind":"Pod","apiVersion":"v1"}"#;
        assert_eq!(peek_type(late, false), (None, None));
        assert_eq!(
            peek_type(late, true),
            (Some("v1".into()), Some("Pod".into()))
        );
        assert_eq!(peek_type("not json", true), (None, None));
        assert_eq!(
            peek_type(r#"{"kind":"Pod","#, true),
            (None, Some("Pod".into()))
        );
    }

    #[test]
    fn a_wrong_kind_written_after_metadata_is_still_named_when_it_fails_to_decode() {
        // k8s-openapi refuses another kind while decoding; the error then says which.
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"a"},"apiVersion":"v1","kind":"ConfigMap"}}"#;
        assert!(matches!(
            decode_event::<Pod>(line, &pods(), None),
            Err(Error::UnexpectedKind { .. })
        ));
    }

    #[test]
    fn modify_runs_on_every_list_item_and_watch_object_on_both_decode_paths() {
        let strip: Modify<Pod> = Arc::new(|p: &mut Pod| {
            p.metadata.managed_fields = None;
            p.metadata
                .labels
                .get_or_insert_default()
                .insert("seen".into(), "1".into());
        });
        let mf =
            r#""managedFields":[{"manager":"m","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]"#;
        let fast = format!(
            r#"{{"kind":"PodList","metadata":{{"resourceVersion":"9"}},"items":[{{"metadata":{{"name":"a",{mf}}}}},{{"metadata":{{"name":"b",{mf}}}}}]}}"#
        );
        // A wrong kind among the items forces the item-by-item path: it must fail the same
        // way, and a good page decoded that way must be modified too.
        let page = decode_list::<Pod>(&fast, &pods(), Some(&strip)).unwrap();
        assert_eq!(page.resource_version, "9");
        for p in &page.items {
            assert_eq!(p.metadata.managed_fields, None);
            assert_eq!(p.metadata.labels.as_ref().unwrap()["seen"], "1");
        }
        let slow = decode_list_by_item::<Pod>(&fast, &pods(), Some(&strip)).unwrap();
        assert!(
            slow.items
                .iter()
                .all(|p| p.metadata.managed_fields.is_none())
        );
        let untouched = decode_list::<Pod>(&fast, &pods(), None).unwrap();
        assert!(
            untouched
                .items
                .iter()
                .all(|p| p.metadata.managed_fields.is_some())
        );

        let line = format!(
            r#"{{"type":"MODIFIED","object":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"a",{mf}}}}}}}"#
        );
        match decode_event::<Pod>(&line, &pods(), Some(&strip)).unwrap() {
            WatchEvent::Modified(p) => assert_eq!(p.metadata.managed_fields, None),
            _ => panic!("not a MODIFIED event"),
        }
    }

    #[test]
    fn list_pages_decode_with_rv_and_continue_and_tolerate_missing_item_kinds() {
        let text = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10","continue":"c1"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        let page = decode_list::<Pod>(text, &pods(), None).unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.resource_version, "10");
        assert_eq!(page.continue_token.as_deref(), Some("c1"));
        let last = r#"{"metadata":{"resourceVersion":"11","continue":""},"items":null}"#;
        let page = decode_list::<Pod>(last, &pods(), None).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.continue_token, None);
        let wrong = r#"{"metadata":{"resourceVersion":"11"},"items":[{"metadata":{"name":"a"}},{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"}}]}"#;
        assert!(matches!(
            decode_list::<Pod>(wrong, &pods(), None),
            Err(Error::UnexpectedKind { .. })
        ));
        let bad = r#"{"metadata":{"resourceVersion":"11"},"items":[{"metadata":{"name":"a"}},{"metadata":7}]}"#;
        match decode_list::<Pod>(bad, &pods(), None).unwrap_err() {
            Error::Decode { what, .. } => assert_eq!(what, "list item 1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn watch_lines_skip_blanks_and_reject_non_utf8() {
        assert!(decode_line::<Pod>(b"  ", &pods(), None).is_none());
        let err = decode_line::<Pod>(b"\xff\xfe", &pods(), None)
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, Error::Decode { .. }), "{err:?}");
    }
}
