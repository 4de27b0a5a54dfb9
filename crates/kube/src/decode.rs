//! What decoding needs whatever the wire format: the type objects must have, the change
//! made to each as it is decoded.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

use kinformer_core::ObjectKey;

use kinformer_reflector::{Bookmark, Error, ListPage, Undecodable, WatchEvent};

/// A change made to every object as it is decoded; see
/// [`KubeListerWatcher::modify`](super::KubeListerWatcher::modify).
pub(super) type Modify<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// The annotation of the bookmark that ends a streaming list.
pub(super) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Applies `modify` to a freshly decoded object and puts it in its `Arc`.
pub(super) fn finish<K>(mut obj: K, modify: Option<&Modify<K>>) -> Arc<K> {
    if let Some(m) = modify {
        m(&mut obj);
    }
    Arc::new(obj)
}

/// The object of a `BOOKMARK` event, in either format: an object of the watched type with
/// only its metadata's resourceVersion (and annotations) set.
#[derive(Deserialize)]
pub(super) struct BookmarkObject {
    metadata: BookmarkMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

impl From<BookmarkObject> for Bookmark {
    fn from(b: BookmarkObject) -> Self {
        let end = b
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INITIAL_EVENTS_END))
            .is_some_and(|v| v == "true");
        Bookmark::new(b.metadata.resource_version, end)
    }
}

/// What is left of an object that did not decode as `K`: its metadata's name and
/// namespace, read on their own (in either format), to report and skip that object alone.
#[derive(Deserialize)]
pub(super) struct KeyOnly {
    metadata: KeyMeta,
}

#[derive(Deserialize)]
struct KeyMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
}

impl KeyOnly {
    /// The object's key, if its metadata has a usable one.
    pub(super) fn key(&self) -> Option<ObjectKey> {
        let name = self.metadata.name.as_deref()?;
        ObjectKey::new(self.metadata.namespace.as_deref(), name).ok()
    }
}

/// An object that failed with `err` but whose metadata (`meta`) gave its key: skipped
/// alone. A wrong kind, or an object without a readable key, stays `err`.
pub(super) fn undecodable(err: Error, meta: Option<KeyOnly>) -> Result<Undecodable, Error> {
    let key = meta.as_ref().and_then(KeyOnly::key);
    match (err, key) {
        (Error::Decode { detail, .. }, Some(key)) => {
            let skipped = Undecodable::new(key, detail);
            Ok(match meta.and_then(|m| m.metadata.uid) {
                Some(uid) => skipped.with_uid(uid),
                None => skipped,
            })
        }
        (err, _) => Err(err),
    }
}

/// A list's `metadata` in either self-describing format (JSON, CBOR).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
    #[serde(default)]
    shard_info: Option<ShardInfo>,
}

/// `metadata.shardInfo` of a sharded list.
#[derive(Deserialize)]
struct ShardInfo {
    #[serde(default)]
    selector: String,
}

/// A list as its items' raw form `R` (JSON's `&RawValue`, CBOR's raw item) under its
/// metadata, before each item is decoded on its own.
#[derive(Deserialize)]
pub(super) struct RawList<R> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default = "Option::default")]
    items: Option<Vec<R>>,
}

impl<R: Copy> RawList<R> {
    /// The page: each item decoded with `decode` (given its index) and modified; one that
    /// fails is skipped alone when `key` reads its key (a wrong kind fails the page).
    pub(super) fn page<K>(
        self,
        modify: Option<&Modify<K>>,
        decode: impl Fn(R, usize) -> Result<K, Error>,
        key: impl Fn(R) -> Option<KeyOnly>,
    ) -> Result<ListPage<K>, Error> {
        let raw_items = self.items.unwrap_or_default();
        let mut items = Vec::with_capacity(raw_items.len());
        let mut skipped = Vec::new();
        for (i, item) in raw_items.into_iter().enumerate() {
            match decode(item, i) {
                Ok(obj) => items.push(finish(obj, modify)),
                Err(e) => skipped.push(undecodable(e, key(item))?),
            }
        }
        Ok(self.metadata.page(items, skipped))
    }
}

impl ListMeta {
    /// The page of `items` (and of the items skipped) this metadata heads.
    pub(super) fn page<K>(self, items: Vec<Arc<K>>, undecodable: Vec<Undecodable>) -> ListPage<K> {
        let mut page = ListPage::shared(items, self.resource_version.unwrap_or_default());
        page.continue_token = self.continue_token.filter(|c| !c.is_empty());
        page.shard_selector = self.shard_info.map(|s| s.selector);
        page.undecodable = undecodable;
        page
    }
}

/// A watch event of type `kind` (JSON's and CBOR's, whose events name their type as text):
/// `object` decodes the object of `ADDED`, `MODIFIED` and `DELETED` (given the type's name),
/// `bookmark` a `BOOKMARK`'s, `status` an `ERROR`'s.
pub(super) fn event<K>(
    kind: &str,
    object: impl FnOnce(&str) -> Result<K, Error>,
    bookmark: impl FnOnce() -> Result<Bookmark, Error>,
    status: impl FnOnce() -> Result<kube::core::Status, Error>,
) -> Result<WatchEvent<K>, Error> {
    match kind {
        "ADDED" => object("ADDED").map(WatchEvent::Added),
        "MODIFIED" => object("MODIFIED").map(WatchEvent::Modified),
        "DELETED" => object("DELETED").map(WatchEvent::Deleted),
        "BOOKMARK" => bookmark().map(WatchEvent::Bookmark),
        "ERROR" => Err(Error::Api(crate::response::api_status(status()?))),
        other => Err(Error::decode(
            "watch event",
            format!("unknown event type {:?}", truncate(other, 32)),
        )),
    }
}

/// The object of a watch event of type `what` once decoded (`decoded`): modified, or, when
/// it failed and its metadata (`meta`) gives its key, an [`Error::Undecodable`] that skips
/// it alone.
pub(super) fn event_object<K>(
    what: &str,
    decoded: Result<K, Error>,
    meta: impl FnOnce() -> Option<KeyOnly>,
    modify: Option<&Modify<K>>,
) -> Result<K, Error> {
    let mut obj = decoded.map_err(|e| match undecodable(e, meta()) {
        Ok(object) => Error::Undecodable {
            object,
            deleted: what == "DELETED",
        },
        Err(e) => e,
    })?;
    if let Some(m) = modify {
        m(&mut obj);
    }
    Ok(obj)
}

/// The `apiVersion`/`kind` objects must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Expected {
    pub(super) api_version: String,
    pub(super) kind: String,
}

impl Expected {
    pub(super) fn partial_metadata() -> Self {
        Self {
            api_version: "meta.k8s.io/v1".into(),
            kind: "PartialObjectMetadata".into(),
        }
    }

    /// Checks the type an object says it has. Absent fields pass: list items often omit
    /// them.
    pub(super) fn check(&self, api_version: Option<&str>, kind: Option<&str>) -> Result<(), Error> {
        let kind_ok = kind.is_none_or(|k| k == self.kind);
        let version_ok = api_version.is_none_or(|v| v == self.api_version);
        if kind_ok && version_ok {
            return Ok(());
        }
        Err(Error::UnexpectedKind {
            expected: self.to_string(),
            actual: format!("{}/{}", api_version.unwrap_or("?"), kind.unwrap_or("?")),
        })
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// At most `max` characters of `s`, for names from the server quoted in errors.
pub(super) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// What the decoding tests of both formats share.
#[cfg(test)]
pub(super) mod testing {
    use super::Expected;
    use kinformer_reflector::WatchEvent;

    /// The type pods must have.
    pub(crate) fn pods() -> Expected {
        Expected {
            api_version: "v1".into(),
            kind: "Pod".into(),
        }
    }

    /// The event's type on the wire and its object; panics on a bookmark or a shard change.
    pub(crate) fn object_of<K>(ev: WatchEvent<K>) -> (&'static str, K) {
        match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            WatchEvent::Bookmark(_) | WatchEvent::Shard(_) => panic!("not an object"),
        }
    }
}
