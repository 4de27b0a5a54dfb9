//! [`Cached<K>`]: a stored object as the store holds it, read in place.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use kinformer_core::MetaObject;
use serde::de::DeserializeOwned;

use super::read::{self, NO_FIELDS};
use super::values::Object;
use crate::Encoded;
use crate::codec::{self, CodecError};
use crate::entry::{Entry, Head};

/// An object of type `K` as the compact store keeps it: its encoding, with its name,
/// namespace, resource version, uid and labels beside it. Reads of the store's cached side
/// ([`CompactStore::cached_side`](crate::CompactStore::cached_side), the informer's
/// `cached_lister()`) hand out `Arc<Cached<K>>`: the stored allocation itself, as
/// client-go hands out its cached pointer, so a get costs a map look-up and a reference
/// count, and a list of 10,000 objects 10,000 of them, with no object built.
///
/// Read it through its typed view ([`view`](Self::view), and for each Kubernetes kind the
/// same accessors on the handle itself: `pod.spec()`), whose accessors read each field
/// where it lies with k8s-openapi's names; or by field name ([`object`](Self::object)) for
/// a type without generated views; or decode it into a `K` ([`decode`](Self::decode)) for
/// code that changes it and writes it back.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
/// use kinformer_compact_store::CompactStore;
/// use kinformer_core::Sink;
/// use kinformer_indexer::{Lister, namespace_indexers};
///
/// let store = Arc::new(CompactStore::<Pod>::new(namespace_indexers()));
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-0".into());
/// pod.metadata.namespace = Some("default".into());
/// pod.spec = Some(PodSpec {
///     node_name: Some("node-1".into()),
///     containers: vec![Container { name: "app".into(), image: Some("nginx".into()), ..Default::default() }],
///     ..Default::default()
/// });
/// store.add(Arc::new(pod.clone()))?;
///
/// let lister = Lister::from_dyn(store.cached_side());
/// let cached = lister.namespaced("default").get("web-0")?;
/// assert_eq!(cached.spec().and_then(|s| s.node_name()), Some("node-1"));
/// let spec = cached.spec().unwrap();
/// let images: Vec<_> = spec.containers().iter().filter_map(|c| c.image()).collect();
/// assert_eq!(images, ["nginx"]);
/// assert_eq!(cached.metadata().name(), Some("web-0"));
/// // The object itself, for code that changes it.
/// assert_eq!(cached.decode()?, pod);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Cached<K> {
    entry: Entry,
    _k: PhantomData<fn() -> K>,
}

impl<K> Cached<K> {
    pub(crate) fn new(entry: Entry) -> Self {
        Self {
            entry,
            _k: PhantomData,
        }
    }

    pub(crate) fn entry(&self) -> &Entry {
        &self.entry
    }

    /// A handle over a copy of an encoded object that is in no store (an informer
    /// handler's, a test's): the same views as a stored one.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::{Cached, Encoded};
    ///
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web-0".into());
    /// let cached = Cached::from_encoded(&Encoded::new(&pod)?);
    /// assert_eq!(cached.metadata().name(), Some("web-0"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_encoded(encoded: &Encoded<K>) -> Self {
        let head = Head {
            namespace: encoded.object_namespace(),
            name: encoded.object_name(),
            resource_version: encoded.object_resource_version(),
            uid: encoded.object_uid(),
            custom_key: None,
        };
        let labels = encoded.object_labels().cloned().map(std::sync::Arc::new);
        Self::new(Entry::new(&head, encoded.bytes(), labels, Box::default()))
    }

    /// The object's fields, by name: the untyped view (for a type without generated views,
    /// a custom resource's fields).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kinformer_compact_store::CompactStore;
    /// # use kinformer_core::{KnownObjects, Sink};
    /// # use kinformer_indexer::namespace_indexers;
    /// # let store = Arc::new(CompactStore::<ConfigMap>::new(namespace_indexers()));
    /// # let mut cm = ConfigMap::default();
    /// # cm.metadata.name = Some("settings".into());
    /// # cm.data = Some([("mode".to_string(), "fast".to_string())].into());
    /// # store.add(Arc::new(cm))?;
    /// let cached = store.cached_side().get_by_key("settings").unwrap();
    /// let mode = cached.object().get("data").and_then(|d| d.get("mode")).and_then(|v| v.as_str());
    /// assert_eq!(mode, Some("fast"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn object(&self) -> Object<'_> {
        Object::new(self.fields())
    }

    /// The top-level struct's fields (none when the encoding is not a struct).
    pub(crate) fn fields(&self) -> read::Fields<'_> {
        read::Raw::whole(self.entry.encoded())
            .and_then(|r| r.as_struct())
            .unwrap_or(NO_FIELDS)
    }

    /// The size of the encoding in bytes.
    pub fn encoded_len(&self) -> usize {
        self.entry.encoded().len()
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
    /// writes it back.
    ///
    /// # Errors
    /// [`CodecError::Rejected`] when `K` refuses what the bytes hold; no value is reported.
    pub fn decode(&self) -> Result<K, CodecError> {
        codec::decode(self.entry.encoded())
    }
}

impl<K> MetaObject for Cached<K> {
    fn object_name(&self) -> Option<&str> {
        self.entry.object_name()
    }
    fn object_namespace(&self) -> Option<&str> {
        self.entry.object_namespace()
    }
    fn object_resource_version(&self) -> Option<&str> {
        self.entry.object_resource_version()
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.entry.object_labels()
    }
    fn object_uid(&self) -> Option<&str> {
        self.entry.object_uid()
    }
}

impl<K> fmt::Debug for Cached<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes: they may be a Secret's.
        f.debug_struct("Cached")
            .field("namespace", &self.object_namespace())
            .field("name", &self.object_name())
            .field("resource_version", &self.object_resource_version())
            .field("len", &self.encoded_len())
            .finish_non_exhaustive()
    }
}

/// A type with a generated read view: every Kubernetes kind kinformer-protobuf's schema
/// table knows (generated from the Go types by `cargo xtask gen-proto`).
pub trait HasView {
    /// The view of an object of this type.
    type View<'a>: Copy;
    /// The view over an object's top-level fields.
    #[doc(hidden)]
    fn view(fields: read::Fields<'_>) -> Self::View<'_>;
}
