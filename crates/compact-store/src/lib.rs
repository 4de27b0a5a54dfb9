//! Kubernetes objects kept encoded and read where they lie: [`Cached<K>`], the object type
//! of kinformer's default informers, its encoding and its typed read views.
//!
//! An informer exists to be read: every reconcile gets its object from the lister, a
//! ReplicaSet controller lists its pods by selector on every pass, a node-keyed controller
//! looks them up by index. client-go's cache holds decoded objects, so a read is a map
//! look-up and a pointer, at the price of the decoded object's memory (a realistic pod is
//! tens of KB decoded, hundreds of allocations). [`Cached<K>`] keeps each object in a
//! compact binary encoding (about its size on the wire, `managedFields` as the JSON text the
//! server sent) and reads it *in place*: its typed view's accessors, named as k8s-openapi's
//! fields, find each field where it lies. A read builds nothing, so reads cost what
//! client-go's cost while the cache costs a fraction of client-go's memory.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use kinformer_compact_store::Cached;
//! use kinformer_indexer::{IndexFunc, Indexer, Lister, ThreadSafeStore, namespace_indexers, parse_selector};
//!
//! // The default informer's cache: a store of `Cached` pods, with an index that reads
//! // each pod's node through its view.
//! let mut indexers = namespace_indexers();
//! indexers.insert(
//!     "byNode".into(),
//!     IndexFunc::single(|p: &Cached<Pod>| p.spec()?.node_name()),
//! );
//! let store = Arc::new(ThreadSafeStore::new(indexers));
//!
//! // The informer writes objects as they come from the wire; here by hand.
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
//! store.add(Arc::new(Cached::new(&pod)?))?;
//!
//! // Reads hand out the cached object itself and read fields where they lie.
//! let lister = Lister::new(Arc::clone(&store));
//! let got = lister.namespaced("default").get("web-0")?;
//! assert_eq!(got.spec().and_then(|s| s.node_name()), Some("node-1"));
//! assert_eq!(lister.list(&parse_selector("app=web")?).len(), 1);
//! assert_eq!(store.by_index("byNode", "node-1")?[0].metadata().name(), Some("web-0"));
//! // The object itself, for code that changes it and writes it back.
//! assert_eq!(got.decode()?, pod);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a `Cached<K>` holds
//!
//! One allocation for the encoding; beside it where the object's name, namespace, resource
//! version and uid lie in it (found once, when it is made), and its labels, shared with
//! every other object that has the same ones (the pods of one ReplicaSet). Keys, label
//! selectors, the namespace index and the relist comparison read those at no cost, so
//! kinformer-indexer's `ThreadSafeStore` keeps `Cached` objects as they are: the default
//! informer's cache is `ThreadSafeStore<Cached<K>>`, and every rule of that store (keys,
//! indices, the consistency of reads with writes) holds for it unchanged.
//!
//! A k8s-openapi `Pod` is large in memory where most of it is `None` (every optional nested
//! struct is inline: a `Container` is ~2 KiB with no probe, no security context, no
//! resources), and its labels and annotations are B-tree maps; encoded, only what is set
//! takes bytes. BENCHMARKS.md in the repository has the measured bytes per pod against
//! client-go (`cargo xtask bench informer`).
//!
//! # Where they are made: from the wire, without building a `K`
//!
//! [`Cached::from_protobuf`] transcodes the protobuf the API server sent straight into the
//! encoding (kinformer-protobuf's `Object::transcoder`): no `K` is built, `managedFields`
//! stay JSON text. kinformer-reflector's `KubeListerWatcher::cached` lists and watches that
//! way; JSON (custom resources) goes through `K` (`Cached`'s `Deserialize`), and
//! [`Cached::new`] encodes a `K` you have. The informer then carries the same
//! `Arc<Cached<K>>` from the reflector through its FIFO to its cache and every handler: one
//! allocation per object version, as client-go shares one pointer.
//!
//! # Reading
//!
//! - **Typed views** ([`view`]): every Kubernetes kind has one, generated from the same
//!   schema table as the protobuf decoder; the handle has the kind's top-level accessors
//!   (`pod.metadata()`, `pod.spec()`), nested structs, lists and maps are views too, and
//!   quantities, times, int-or-string and free-form JSON are borrowed text that turns into
//!   k8s-openapi's value on request. Nothing is allocated.
//! - **Metadata of any type** ([`Cached::meta`], and [`KubeObject`] for code generic over
//!   decoded and cached objects): a custom resource's name, labels, owners, generation.
//! - **By field name** ([`Cached::object`]): the untyped view, for a custom resource's
//!   fields.
//! - **Decoded** ([`Cached::decode`]): the `K`, built anew on each call (a few microseconds
//!   for a pod), for code that changes the object and writes it back.
//!
//! # The encoding
//!
//! The crate's own: a tagged binary form shaped like the JSON of the value, every value
//! prefixed by its length (so that a read view steps over a field in one jump), in which
//! each struct field name is a number of one or two bytes (serde hands field names over as
//! `&'static str`, and a process-wide table numbers them). Not the protobuf the API server
//! sent: a view would have to parse varint-keyed messages whose field numbers differ per
//! type, custom resources and `DynamicObject` have no protobuf, and a transform runs on
//! the decoded object. Not JSON: field names would be most of the bytes. Free-form JSON
//! (`managedFields`) stays JSON: it has no field names to number, and kept as text it costs
//! one `serde_json` write instead of a key-by-key walk. The bytes never leave the process,
//! so the format has no version.
//!
//! `K` must decode what it encodes with the same result, as through JSON: every k8s-openapi
//! type, `DynamicObject`, `#[derive(CustomResource)]` types and projection structs do. An
//! object that fails to decode is a typed error naming its key ([`DecodeError`]), never a
//! panic, and a view of it reads the fields it can.
//!
//! # Differences from client-go
//!
//! client-go's cache holds decoded objects; there is no encoded one to compare with (an
//! upstream experiment keeps objects as bytes outside the Go heap). Reads here hand out the
//! cached object as client-go does (never to be changed: here the type has no setters), but
//! read through views rather than struct fields; code that needs the Go-like struct
//! decodes it.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod cached;
mod codec;
mod labels;
mod object;
pub mod snapshot;
pub mod view;

pub use cached::{Cached, DecodeError};
pub use codec::{CodecError, RAW_JSON_TYPES};
pub use object::{KubeObject, OwnerRef};
pub use view::HasView;

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
