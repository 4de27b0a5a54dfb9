//! A cache for informers that keeps every object encoded and decodes it when it is read.
//!
//! [`CompactStore`] is the cache kinformer's informers keep by default
//! (kinformer-informer-factory's `CacheKind::Encoded`), and goes wherever kinformer-indexer's
//! [`ThreadSafeStore`](kinformer_indexer::ThreadSafeStore) goes (`SharedIndexInformer::
//! builder(..).store(..)` with index functions or a key function of your own). Listers,
//! indices, handlers and the FIFO's view of known objects work as over the decoded store;
//! only the memory and the cost of a read change.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use kinformer_compact_store::CompactStore;
//! use kinformer_core::Sink;
//! use kinformer_indexer::{IndexFunc, Indexer, Lister, namespace_indexers, parse_selector};
//!
//! let mut indexers = namespace_indexers();
//! indexers.insert(
//!     "byNode".into(),
//!     IndexFunc::new(|p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()),
//! );
//! let store = Arc::new(CompactStore::<Pod>::new(indexers));
//!
//! // The informer writes through `Sink`; here by hand.
//! let pod = Pod {
//!     metadata: ObjectMeta {
//!         name: Some("web-0".into()),
//!         namespace: Some("default".into()),
//!         labels: Some([("app".to_string(), "web".to_string())].into()),
//!         ..Default::default()
//!     },
//!     spec: Some(PodSpec {
//!         node_name: Some("node-1".into()),
//!         containers: vec![Container { name: "c".into(), image: Some("nginx".into()), ..Default::default() }],
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! store.add(Arc::new(pod.clone()))?;
//!
//! // Reads decode: equal objects, not the same allocation.
//! let lister = Lister::new(Arc::clone(&store));
//! assert_eq!(*lister.namespaced("default").get("web-0")?, pod);
//! assert_eq!(lister.list(&parse_selector("app=web")?).len(), 1);
//! assert_eq!(store.by_index("byNode", "node-1")?.len(), 1);
//! assert_eq!(store.stats().objects, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What it keeps
//!
//! Per object, one allocation: namespace, name, resource version (and the key, with a key
//! function of your own), then the object in a compact binary encoding of serde's data
//! model, in which `managedFields` (and any other free-form JSON the schema marks:
//! [`RAW_JSON_TYPES`]) are the JSON text the server sent; beside it the object's labels, shared with every other object that has the same
//! ones (the pods of one ReplicaSet), and the values of the index functions other than the
//! namespace index, computed when the object is written. The entries sit in a
//! `ThreadSafeStore`, so keys, the namespace index, the consistency of reads with writes
//! and every rule of the thread-safe store carry over; the rule and consistency tests of
//! kinformer-indexer run on this store too.
//!
//! A k8s-openapi `Pod` is large in memory where most of it is `None` (every optional nested
//! struct is inline: a `Container` is ~2 KiB with no probe, no security context, no
//! resources), and its labels and annotations are B-tree maps; encoded, only what is set
//! takes bytes. How much that saves, against the decoded store and client-go, is measured
//! by `cargo xtask bench informer` (BENCHMARKS.md in the repository).
//!
//! # What to expect from it
//!
//! An entry takes about what the object takes on the wire: `managedFields` cost their JSON
//! text, the rest of a pod about what its protobuf takes, where the decoded k8s-openapi pod
//! takes several times that (every optional nested struct inline, each `FieldsV1` a tree
//! of JSON maps); BENCHMARKS.md's "compact-store" and "informer-defaults" sections have
//! the measured bytes per pod.
//! The measurements against client-go with each side's defaults are BENCHMARKS.md's
//! "defaults" rows (`cargo xtask bench informer`). They hold because the informer never
//! has the whole list decoded at once: the first list reaches the store in parts as it
//! arrives (the reflector hands lists over in [`ListPart`](kinformer_core::ListPart)s, and
//! the in-order FIFO queues the first one's as they come), and a relist hands the store
//! only the keys of unchanged objects ([`Listed::Unchanged`](kinformer_core::Listed)),
//! whose entries it keeps in place. That is with the informer's default FIFO, the in-order
//! FIFO in atomic mode; in per-object mode relists hold the changed objects and listed
//! copies of the unchanged ones until they are applied, and with the DeltaFIFO the first
//! list too.
//!
//! # Objects that stay encoded all the way: [`Encoded<K>`]
//!
//! [`Encoded<K>`] is an object kept in this encoding with its name, namespace, resource
//! version, uid and labels beside the bytes, decoded into a `K` only when
//! [`Encoded::decode`] (or [`Encoded::decode_metadata`], the metadata alone) is called.
//! [`Encoded::from_protobuf`] makes one from the bytes on the wire by transcoding them
//! (kinformer-protobuf's `Object::transcoder`): no `K` is built, `managedFields` stay the
//! JSON text the server sent.
//!
//! The default informer uses it inside: its reflector, FIFO and listeners carry
//! `Encoded<K>` (a Kubernetes lister-watcher transcodes protobuf through
//! `KubeListerWatcher::decode_protobuf_with(Encoded::from_protobuf)`), the store takes the
//! entries as they are through [`CompactStore::encoded_side`], and each handler's thread
//! decodes what its handler needs. Keys, label selectors, the namespace index and the
//! relist comparison need no `K`. An informer can also take `Encoded<K>` as its object
//! type (handlers and listers then get `Encoded<K>` and decode what they read); keep it
//! in a `CacheKind::Decoded` store then, as its objects are encoded already.
//!
//! # The encoding
//!
//! The store's own: a tagged binary form shaped like the JSON of the value, every value
//! prefixed by its length (so that a read view steps over a field in one jump), in which
//! each struct field name is a number of one or two bytes (serde hands field names over as
//! `&'static str`, and a process-wide table numbers them). Not the protobuf the API server
//! sent: the store would need a protobuf encoder for every type, custom resources and
//! `DynamicObject` have none, and the transform (stripping `managedFields`) runs on the
//! decoded object. Not JSON: field names would be most of the bytes. Free-form JSON
//! (`managedFields`) stays JSON: it has no field names to number, and kept as text it costs
//! one `serde_json` write instead of a key-by-key walk. The bytes never leave the process,
//! so the format has no version.
//!
//! `K` must decode what it encodes with the same result, as through JSON: every k8s-openapi
//! type, `DynamicObject`, `#[derive(CustomResource)]` types and projection structs do. The
//! first write of a store checks it and refuses a type that does not (an error, not a
//! panic); a stored object that later fails to decode is read as missing, logged, and
//! counted in [`Stats::decode_failures`].
//!
//! # What a read costs
//!
//! Two ways to read, over the same entries:
//!
//! - **In place, through views** ([`CompactStore::cached_side`], the informer's
//!   `cached_lister()`): every read hands out the stored entries themselves
//!   (`Arc<Cached<K>>`), and a typed view reads each field from the encoding where it lies
//!   ([`view`]: `pod.spec()?.node_name()`). A get is a map look-up and a reference count, a
//!   list of 10,000 pods 10,000 reference counts; no object is built, nothing stays behind.
//!   What client-go's reads cost, and the way to read a large cache often.
//! - **Decoded** (the [`Indexer`](kinformer_indexer::Indexer) of `K` this store is):
//!   every read that returns objects decodes them (a few microseconds per pod; measured in
//!   the crate's criterion bench `cargo bench -p kinformer-compact-store`), and hands out a
//!   new `Arc`: two reads of one object give equal objects, not one allocation, unlike the
//!   decoded store. A small cache ([`DEFAULT_CACHE`] slots, [`CompactStore::with_cache`])
//!   keeps recently written and read objects, so the informer's next event on an object
//!   and a reconcile that reads one object several times decode it once. For code that
//!   changes the object and writes it back ([`Cached::decode`] does the same for one
//!   cached entry).
//!
//! Label selectors ([`Indexer::list_selected`](kinformer_indexer::Indexer::list_selected),
//! which listers use) and index lookups are answered before decoding: a decoded lister
//! decodes only what it returns. Keys, `len`, `index_keys`, resource-version checks need no
//! decoding at all.
//!
//! # Differences from client-go
//!
//! client-go's store holds decoded objects only; there is no encoded store to compare with
//! (an upstream experiment keeps objects as bytes outside the Go heap). Reads here return
//! copies, where client-go returns the cached pointer (which callers must not mutate
//! either).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod cache;
mod cached_side;
mod codec;
mod encoded;
mod entry;
mod labels;
mod side;
mod store;
pub mod view;

pub use codec::{CodecError, RAW_JSON_TYPES};
pub use encoded::Encoded;
pub use view::{Cached, HasView};

/// The encoding the store keeps `value` in (see [The encoding](crate#the-encoding)): for
/// sizing objects and for checking that a type round-trips. The bytes are this process's
/// (field names are numbered as they are first seen): never store or send them.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// cm.data = Some([("mode".to_string(), "fast".to_string())].into());
/// let bytes = kinformer_compact_store::encode_to_vec(&cm)?;
/// assert!(bytes.len() < serde_json::to_vec(&cm)?.len());
/// assert_eq!(kinformer_compact_store::decode_from_slice::<ConfigMap>(&bytes)?, cm);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CodecError::Encode`] when the value cannot be encoded (a 128-bit integer out of
/// range, a failing `Serialize`).
pub fn encode_to_vec<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    codec::encode(value, &mut out)?;
    Ok(out)
}

/// Decodes what [`encode_to_vec`] wrote in this process.
///
/// # Errors
/// [`CodecError::Rejected`] when `T` refuses the value, [`CodecError::Corrupt`] when the
/// bytes are not this encoding.
pub fn decode_from_slice<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    codec::decode(bytes)
}
pub use store::{CompactStore, DEFAULT_CACHE, Stats};
