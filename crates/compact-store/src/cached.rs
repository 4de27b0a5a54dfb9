//! [`Cached<K>`]: an object kept in this crate's encoding, read where it lies.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use kinformer_core::MetaObject;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::codec::{self, CodecError, Keep};
use crate::labels::{self, Labels};
use crate::view::apimachinery::pkg::apis::meta::v1::ObjectMetaView;
use crate::view::read::{FieldName, Fields, NO_FIELDS, Raw, TopIndex};
use crate::view::{HasView, Object, ViewValue};

/// An object of type `K` kept in this crate's encoding ([the encoding](crate#the-encoding)),
/// read where it lies.
///
/// It is what kinformer's default informers carry from the wire to their handlers and keep
/// in their cache (`SharedIndexInformer<Cached<K>>`): every reader gets the same
/// allocation (`Arc<Cached<K>>`), as client-go hands out its cached pointer, so a lister
/// get costs a map look-up and a reference count, a list of 10,000 objects 10,000 of them,
/// and nothing is built.
///
/// Read it through its typed view: for each Kubernetes kind the handle has the kind's
/// top-level accessors itself (`pod.metadata()`, `pod.spec()`), and [`view`](Self::view)
/// gives the whole view; accessors have k8s-openapi's names and read each field where it
/// lies ([`view`](crate::view) lists the shapes). [`meta`](Self::meta) reads the metadata of
/// any `K`, a custom resource's too; [`object`](Self::object) reads any field by name; and
/// [`decode`](Self::decode) builds the `K` for code that changes it and writes it back.
///
/// The name, namespace, resource version and uid are found once, when the object is made,
/// and its labels are shared with every other object that has the same ones (the pods of
/// one ReplicaSet): keys, label selectors and the namespace index read them at no cost.
///
/// ```
/// use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
/// use kinformer_compact_store::Cached;
/// use kinformer_core::MetaObject;
///
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-0".into());
/// pod.metadata.namespace = Some("default".into());
/// pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
/// pod.spec = Some(PodSpec {
///     node_name: Some("node-1".into()),
///     containers: vec![Container { name: "app".into(), image: Some("nginx".into()), ..Default::default() }],
///     ..Default::default()
/// });
/// let cached = Cached::new(&pod)?;
///
/// // k8s-openapi's names: `pod.spec.as_ref()?.node_name` is `pod.spec()?.node_name()`.
/// assert_eq!(cached.spec().and_then(|s| s.node_name()), Some("node-1"));
/// assert_eq!(cached.metadata().labels().and_then(|l| l.get("app")), Some("web"));
/// let images: Vec<_> = cached.spec().unwrap().containers().iter().filter_map(|c| c.image()).collect();
/// assert_eq!(images, ["nginx"]);
/// // Keys and selectors read the metadata found when it was made.
/// assert_eq!(cached.object_name(), Some("web-0"));
/// // The object itself, for code that changes it.
/// assert_eq!(cached.decode()?, pod);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
// `repr(C)`: what a read takes — the reference count before it, the encoding's address, where
// the top-level fields lie — in the first 64 bytes of the allocation (one cache line).
#[repr(C)]
pub struct Cached<K> {
    bytes: Box<[u8]>,
    /// Where the top-level struct's content starts in `bytes` (after its tag and length),
    /// and whether it is a struct: a read goes to its fields without reading the header.
    content: u32,
    /// Where the top-level fields (`metadata`, `spec`, `status`) lie in the content.
    top: TopIndex,
    /// Where `metadata`'s namespace, name, resourceVersion and uid lie in `bytes`.
    meta: [Span; 4],
    labels: Option<Arc<Labels>>,
    _k: PhantomData<fn() -> K>,
}

/// A string of `bytes`: `start..start + len`; [`Span::ABSENT`] for a field not set.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    const ABSENT: Span = Span {
        start: u32::MAX,
        len: 0,
    };
}

const NAMESPACE: usize = 0;
const NAME: usize = 1;
const RESOURCE_VERSION: usize = 2;
const UID: usize = 3;

static F_METADATA: FieldName = FieldName::new("metadata");
static F_META: [FieldName; 4] = [
    FieldName::new("namespace"),
    FieldName::new("name"),
    FieldName::new("resourceVersion"),
    FieldName::new("uid"),
];
static F_LABELS: FieldName = FieldName::new("labels");

impl<K> Cached<K> {
    /// An object of the encoding `bytes` (which this crate's encoder wrote): its metadata
    /// found, its labels shared.
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Self {
        let bytes = bytes.into_boxed_slice();
        let fields = top_fields(&bytes);
        let top = TopIndex::of(fields);
        // An encoding that is not a struct has no fields: its content is empty.
        let content = match Raw::whole(&bytes).and_then(|r| r.as_struct()) {
            Some(f) => span_of(&bytes, f.content).start,
            None => u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        };
        let mut meta = [Span::ABSENT; 4];
        let mut labels = None;
        let metadata = Fields::indexed(top_fields(&bytes), &top)
            .get(&F_METADATA)
            .and_then(|r| r.as_struct());
        if let Some(metadata) = metadata {
            for (span, name) in meta.iter_mut().zip(&F_META) {
                if let Some(s) = metadata.get(name).and_then(|r| r.as_str()) {
                    *span = span_of(&bytes, s.as_bytes());
                }
            }
            if let Some(map) = metadata.get(&F_LABELS).and_then(|r| r.as_map()) {
                labels = labels::shared(map);
            }
        }
        Self {
            bytes,
            content,
            top,
            meta,
            labels,
            _k: PhantomData,
        }
    }

    /// Its encoding, as a snapshot writes it.
    pub(crate) fn encoding(&self) -> &[u8] {
        &self.bytes
    }

    fn part(&self, i: usize) -> Option<&str> {
        let span = self.meta[i];
        if span == Span::ABSENT {
            return None;
        }
        let start = span.start as usize;
        let bytes = self.bytes.get(start..start + span.len as usize)?;
        // A string of the encoding, which holds UTF-8 only.
        std::str::from_utf8(bytes).ok()
    }

    /// The object as its protobuf says, transcoded into the encoding without building a
    /// `K` (kinformer-protobuf's `Object::transcoder`): what the Kubernetes lister-watcher
    /// makes of each list item and watch event (kinformer-reflector's
    /// `KubeListerWatcher::cached`). `managedFields` stay the JSON text the server sent.
    ///
    /// ```
    /// # let body = include_bytes!("../../protobuf/tests/data/pod.pb");
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    /// use kinformer_core::MetaObject;
    ///
    /// let object = kinformer_protobuf::Object::from_bytes(body)?;
    /// let cached = Cached::<Pod>::from_protobuf(&object)?;
    /// assert_eq!(cached.object_name(), Some("web-0"));
    /// assert_eq!(cached.decode()?, object.deserialize::<Pod>()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// What decoding the object would fail with on malformed protobuf or an unknown type
    /// (kinformer-protobuf's `Error`, with the path). That the bytes fit `K` is found when
    /// they are decoded: [`decode`](Self::decode) fails then.
    pub fn from_protobuf(
        object: &kinformer_protobuf::Object<'_>,
    ) -> Result<Self, kinformer_protobuf::Error> {
        Self::transcode(object, Keep::All).map(|(cached, _)| cached)
    }

    /// As [`from_protobuf`](Self::from_protobuf), leaving `metadata.managedFields` out:
    /// their bytes are stepped over, not transcoded. The `bool` says whether the object had
    /// any (whether this left something out).
    ///
    /// This is how an informer drops them (kinformer-kube's
    /// `KubeListerWatcher::drop_managed_fields`) for less than keeping them costs, where a
    /// transform on the informer decodes the object, changes it and encodes it again.
    ///
    /// ```
    /// # let body = include_bytes!("../../protobuf/tests/data/pod.pb");
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    ///
    /// let object = kinformer_protobuf::Object::from_bytes(body)?;
    /// let (cached, dropped) = Cached::<Pod>::from_protobuf_without_managed_fields(&object)?;
    /// assert!(dropped);
    /// assert!(cached.metadata().managed_fields().is_none());
    /// let mut pod = object.deserialize::<Pod>()?;
    /// pod.metadata.managed_fields = None;
    /// assert_eq!(cached.decode()?, pod);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`from_protobuf`](Self::from_protobuf); malformed bytes inside the left-out
    /// `managedFields` are not looked at.
    pub fn from_protobuf_without_managed_fields(
        object: &kinformer_protobuf::Object<'_>,
    ) -> Result<(Self, bool), kinformer_protobuf::Error> {
        Self::transcode(object, Keep::AllButManagedFields)
    }

    fn transcode(
        object: &kinformer_protobuf::Object<'_>,
        keep: Keep,
    ) -> Result<(Self, bool), kinformer_protobuf::Error> {
        let transcoder = object.transcoder()?;
        // The encoding is about the protobuf's size (BENCHMARKS.md): one allocation.
        let mut bytes = Vec::with_capacity(object.byte_len() + object.byte_len() / 8);
        match codec::encode_with(&transcoder, &mut bytes, keep) {
            Ok(left_out) => Ok((Self::from_bytes(bytes), left_out)),
            Err(_) => Err(transcoder.into_error()),
        }
    }

    /// The object's metadata, read where it lies, for any `K` (a custom resource's too;
    /// Kubernetes kinds also have [`metadata`](Self::view) on the handle): name, labels,
    /// annotations, owner references, generation, finalizers, `managedFields`.
    ///
    /// ```
    /// use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    /// use kinformer_compact_store::Cached;
    ///
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    /// let mut widget = DynamicObject::new("w-1", &ApiResource::from_gvk(&gvk));
    /// widget.metadata.generation = Some(3);
    /// let cached = Cached::new(&widget)?;
    /// assert_eq!(cached.meta().generation(), Some(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn meta(&self) -> ObjectMetaView<'_> {
        self.fields()
            .get(&F_METADATA)
            .and_then(ObjectMetaView::from_raw)
            .unwrap_or_default()
    }

    /// The object's fields, by name: the untyped view (for a type without generated views,
    /// a custom resource's fields).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kinformer_compact_store::Cached;
    ///
    /// let mut cm = ConfigMap::default();
    /// cm.data = Some([("mode".to_string(), "fast".to_string())].into());
    /// let cached = Cached::new(&cm)?;
    /// let mode = cached.object().get("data").and_then(|d| d.get("mode")).and_then(|v| v.as_str());
    /// assert_eq!(mode, Some("fast"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn object(&self) -> Object<'_> {
        Object::new(self.fields())
    }

    /// The top-level struct's fields (none when the encoding is not a struct), with where
    /// they lie.
    pub(crate) fn fields(&self) -> Fields<'_> {
        let content = self.bytes.get(self.content as usize..).unwrap_or_default();
        Fields::top(content, &self.top)
    }

    /// The size of the encoding in bytes (without the handle's own 56).
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }
}

/// The top-level fields of an encoding.
fn top_fields(bytes: &[u8]) -> Fields<'_> {
    Raw::whole(bytes)
        .and_then(|r| r.as_struct())
        .unwrap_or(NO_FIELDS)
}

/// Where `s`, a part of `bytes`, lies in them.
fn span_of(bytes: &[u8], s: &[u8]) -> Span {
    let start = (s.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
    match (u32::try_from(start), u32::try_from(s.len())) {
        // Objects are far below 4 GiB (the API server refuses requests over 3 MiB).
        (Ok(start), Ok(len)) if start != u32::MAX => Span { start, len },
        _ => Span::ABSENT,
    }
}

impl<K: Serialize> Cached<K> {
    /// `obj` encoded.
    ///
    /// # Errors
    /// [`CodecError::Encode`] when `obj` cannot be encoded (a 128-bit integer out of range,
    /// a failing `Serialize`).
    pub fn new(obj: &K) -> Result<Self, CodecError> {
        let mut bytes = Vec::new();
        codec::encode(obj, &mut bytes)?;
        Ok(Self::from_bytes(bytes))
    }

    /// `obj` encoded without its `metadata.managedFields`; the `bool` says whether it had
    /// any. The JSON path's (custom resources') counterpart of
    /// [`from_protobuf_without_managed_fields`](Self::from_protobuf_without_managed_fields).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    /// use kinformer_compact_store::Cached;
    ///
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("settings".into());
    /// cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    /// let (cached, dropped) = Cached::new_without_managed_fields(&cm)?;
    /// assert!(dropped);
    /// cm.metadata.managed_fields = None;
    /// assert_eq!(cached.decode()?, cm);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn new_without_managed_fields(obj: &K) -> Result<(Self, bool), CodecError> {
        let mut bytes = Vec::new();
        let left_out = codec::encode_with(obj, &mut bytes, Keep::AllButManagedFields)?;
        Ok((Self::from_bytes(bytes), left_out))
    }
}

impl<K: HasView> Cached<K> {
    /// The object's typed view: accessors named as k8s-openapi's fields that read each
    /// field where it lies.
    #[inline]
    pub fn view(&self) -> K::View<'_> {
        K::view(self.fields())
    }
}

impl<K: DeserializeOwned> Cached<K> {
    /// The object, decoded (each call decodes it again): for code that changes it and
    /// writes it back. A realistic pod is hundreds of allocations (about 15 µs): read
    /// through the view what you only read.
    ///
    /// # Errors
    /// [`DecodeError`], naming the object, when `K` refuses what the bytes hold (protobuf
    /// of another type, transcoded by [`from_protobuf`](Self::from_protobuf)); no value is
    /// reported.
    pub fn decode(&self) -> Result<K, DecodeError> {
        codec::decode(&self.bytes).map_err(|source| self.error(source))
    }
}

impl<K> Cached<K> {
    /// `source`, about this object.
    fn error(&self, source: CodecError) -> DecodeError {
        let name = self.object_name().unwrap_or("<unnamed>");
        let key = match self.object_namespace().filter(|ns| !ns.is_empty()) {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        };
        DecodeError { key, source }
    }
}

/// A cached object that could not be decoded into its type, or encoded again after a
/// change ([`Cached::decode`], [`Cached::map`]): the object's key and why, never a value of
/// the object (it may be a Secret's). Objects made from the API server's answers decode;
/// this is a type whose `Deserialize` and `Serialize` do not round-trip.
#[derive(Debug, thiserror::Error)]
#[error("the cached object {key} does not decode as its type: {source}")]
#[non_exhaustive]
pub struct DecodeError {
    /// The object's key, `namespace/name` (`name` when cluster-scoped).
    pub key: String,
    /// Why.
    #[source]
    pub source: CodecError,
}

impl<K: Serialize + DeserializeOwned> Cached<K> {
    /// The object decoded, changed by `f` and encoded again: what a transform of the
    /// informer (`set_transform`) or a lister-watcher's `modify` does to a cached object.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    ///
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web-0".into());
    /// pod.metadata.managed_fields = Some(vec![Default::default()]);
    /// let lean = Cached::new(&pod)?.map(|p| p.metadata.managed_fields = None)?;
    /// assert!(lean.metadata().managed_fields().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`DecodeError`] when the object does not decode, or the changed one does not encode.
    pub fn map(&self, f: impl FnOnce(&mut K)) -> Result<Self, DecodeError> {
        let mut obj = self.decode()?;
        f(&mut obj);
        Self::new(&obj).map_err(|source| self.error(source))
    }
}

impl<K> MetaObject for Cached<K> {
    fn object_name(&self) -> Option<&str> {
        self.part(NAME)
    }
    fn object_namespace(&self) -> Option<&str> {
        self.part(NAMESPACE)
    }
    fn object_resource_version(&self) -> Option<&str> {
        self.part(RESOURCE_VERSION)
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.labels.as_deref()
    }
    fn object_uid(&self) -> Option<&str> {
        self.part(UID)
    }
}

impl<K> Clone for Cached<K> {
    fn clone(&self) -> Self {
        Self {
            bytes: self.bytes.clone(),
            content: self.content,
            top: self.top,
            meta: self.meta,
            labels: self.labels.clone(),
            _k: PhantomData,
        }
    }
}

impl<K> PartialEq for Cached<K> {
    /// The same bytes (two encodings of one object made in two ways may differ in bytes
    /// and still decode equal).
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl<K> fmt::Debug for Cached<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes: they may be a Secret's.
        f.debug_struct("Cached")
            .field("namespace", &self.object_namespace())
            .field("name", &self.object_name())
            .field("resource_version", &self.object_resource_version())
            .field("len", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

impl<'de, K: DeserializeOwned + Serialize> Deserialize<'de> for Cached<K> {
    /// Decodes a `K` and encodes it (the JSON path; protobuf goes through
    /// [`from_protobuf`](Self::from_protobuf) without a `K`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let obj = K::deserialize(deserializer)?;
        Cached::new(&obj).map_err(serde::de::Error::custom)
    }
}

impl<K: DeserializeOwned + Serialize> Serialize for Cached<K> {
    /// Decodes the `K` and serializes it.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.decode()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    use super::*;

    const POD: &[u8] = include_bytes!("../../protobuf/tests/data/pod.pb");
    const LIST: &[u8] = include_bytes!("../../protobuf/tests/data/pod-list.pb");

    #[test]
    fn transcoded_list_items_decode_as_the_list_decodes_with_their_metadata_found() {
        let list = kinformer_protobuf::Object::from_bytes(LIST)
            .and_then(|o| o.list())
            .unwrap();
        let pods: Vec<Pod> = list.items::<Pod>().map(Result::unwrap).collect();
        assert!(!pods.is_empty());
        for (object, pod) in list.objects().zip(&pods) {
            let cached = Cached::<Pod>::from_protobuf(&object.unwrap()).unwrap();
            assert_eq!(&cached.decode().unwrap(), pod);
            let m = &pod.metadata;
            assert_eq!(cached.object_name(), m.name.as_deref());
            assert_eq!(cached.object_namespace(), m.namespace.as_deref());
            assert_eq!(
                cached.object_resource_version(),
                m.resource_version.as_deref()
            );
            assert_eq!(cached.object_uid(), m.uid.as_deref());
            assert_eq!(cached.object_labels(), m.labels.as_ref());
            // The same as encoding the decoded pod, as far as a reader can tell.
            let direct = Cached::new(pod).unwrap();
            assert_eq!(direct.decode().unwrap(), cached.decode().unwrap());
            assert_eq!(direct.object_labels(), cached.object_labels());
        }
    }

    #[test]
    fn unset_metadata_reads_as_none_and_empty_strings_as_empty() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("n".into());
        ns.metadata.resource_version = Some(String::new());
        let c = Cached::new(&ns).unwrap();
        assert_eq!(c.object_name(), Some("n"));
        assert_eq!(c.object_namespace(), None);
        assert_eq!(c.object_resource_version(), Some(""));
        assert_eq!(c.object_uid(), None);
        assert_eq!(c.object_labels(), None);
        assert_eq!(c.decode().unwrap(), ns);
    }

    #[test]
    fn equal_labels_are_one_allocation() {
        let mut pod = Pod::default();
        pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        let (a, b) = (Cached::new(&pod).unwrap(), Cached::new(&pod).unwrap());
        let (a, b) = (a.labels.unwrap(), b.labels.unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.get("app").map(String::as_str), Some("web"));
    }

    #[test]
    fn json_goes_through_k_and_another_type_is_refused_on_decode_not_before() {
        let pod: Pod = kinformer_protobuf::from_slice(POD).unwrap();
        let json = serde_json::to_vec(&pod).unwrap();
        let c: Cached<Pod> = serde_json::from_slice(&json).unwrap();
        assert_eq!(c.decode().unwrap(), pod);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::to_value(&pod).unwrap()
        );

        // A ConfigMap held as a pod: kept, then refused by Pod when decoded.
        let as_pod = Cached::<Pod>::from_bytes(
            crate::encode_to_vec(&serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "ns"}, "data": 1,
            }))
            .unwrap(),
        );
        let err = as_pod.decode().unwrap_err();
        assert!(matches!(err.source, CodecError::Rejected(_)), "{err}");
        assert_eq!(err.key, "ns/settings");
        assert!(!err.to_string().contains('1'), "no value: {err}");
    }

    #[test]
    fn debug_shows_metadata_never_the_bytes() {
        let object = kinformer_protobuf::Object::from_bytes(POD).unwrap();
        let c = Cached::<Pod>::from_protobuf(&object).unwrap();
        let shown = format!("{c:?}");
        assert!(shown.contains("web-0"), "{shown}");
        assert!(!shown.contains("bytes"), "{shown}");
    }
}
