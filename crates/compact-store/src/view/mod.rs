//! Read views: a cached object's fields read where they lie, without decoding it.
//!
//! A read that builds the object (a `K` decoded from its encoding) costs every allocation
//! of that object — hundreds for a realistic pod, about 15 µs — where client-go's read is
//! a map look-up and a pointer. A view costs neither: the cache hands out the object as it
//! keeps it ([`Cached<K>`], behind the `Arc` the cache holds), and its typed view reads
//! each field from the encoding as it is asked for.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
//! use kinformer_compact_store::Cached;
//! use kinformer_indexer::{Lister, ThreadSafeStore, everything, namespace_indexers};
//!
//! // An informer's default cache: a store of `Cached` objects (filled by the informer).
//! let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("web-0".into());
//! pod.metadata.namespace = Some("default".into());
//! pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
//! pod.spec = Some(PodSpec {
//!     node_name: Some("node-1".into()),
//!     containers: vec![Container { name: "app".into(), ..Default::default() }],
//!     ..Default::default()
//! });
//! store.add(Arc::new(Cached::new(&pod)?))?;
//!
//! let pods = Lister::new(store);
//! for pod in pods.list(&everything()) {
//!     // k8s-openapi's names: `pod.spec.as_ref()?.node_name` is `pod.spec()?.node_name()`.
//!     assert_eq!(pod.spec().and_then(|s| s.node_name()), Some("node-1"));
//!     assert_eq!(pod.metadata().labels().and_then(|l| l.get("app")), Some("web"));
//!     let spec = pod.spec().unwrap();
//!     assert_eq!(spec.containers().iter().map(|c| c.name()).collect::<Vec<_>>(), ["app"]);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The views
//!
//! Every message of kinformer-protobuf's schema table (the Go types of every built-in
//! Kubernetes kind) has a generated view, in a module tree that mirrors k8s-openapi's:
//! `view::api::core::v1::PodSpecView` for `k8s_openapi::api::core::v1::PodSpec`. An
//! accessor is named as k8s-openapi's field and has its shape, borrowed:
//!
//! | k8s-openapi field | view accessor |
//! | --- | --- |
//! | `Option<String>`, `String` | `Option<&str>`, `&str` (`""` when absent) |
//! | `Option<bool>`, `Option<i32>`, … | the same, read from the encoding |
//! | `Option<PodSpec>`, `ObjectMeta` | `Option<PodSpecView>`, `ObjectMetaView` (empty when absent) |
//! | `Option<Vec<T>>`, `Vec<T>` | `Option<Seq<T's view>>`, `Seq<..>` (empty when absent) |
//! | `Option<BTreeMap<String, T>>` | `Option<Map<T's view>>` |
//! | `Quantity`, `Time`, `MicroTime`, `IntOrString`, `FieldsV1`, `RawExtension`, `ByteString` | [`QuantityView`], [`TimeView`], [`MicroTimeView`], [`IntOrStr`], [`JsonView`], [`BytesView`] |
//!
//! Each Kubernetes kind `K` implements [`HasView`], so [`Cached::view`] gives its view, and
//! the handle has the kind's top-level accessors itself (`pod.metadata()`, `pod.spec()`).
//! Every object's metadata reads through [`Cached::meta`] whatever its type; a type without
//! generated views (a custom resource) reads the rest by field name through
//! [`Cached::object`], or decoded ([`Cached::decode`]).
//!
//! # What a read costs
//!
//! A field is found by walking the fields of each struct on its path, stepping over every
//! other field in one jump (each value of the encoding starts with its length): reading
//! `spec.nodeName` of a realistic pod reads a few dozen bytes of it, whatever its
//! `managedFields` and status hold. A field name is turned into its number once per
//! process. Lists and maps are walked as they are iterated; `len` counts. Nothing is
//! allocated.
//!
//! A view never fails half-way: a field that is absent, `null`, or of another shape than
//! the schema's reads as absent. The bytes are this crate's, written by its encoder from
//! a typed object or from protobuf through the same schema table, so the shapes match;
//! [`Cached::decode`] is the typed error for an object that does not decode as a `K`.

#[rustfmt::skip]
#[allow(missing_docs, clippy::all)]
mod generated;
pub(crate) mod read;
mod values;

use read::Fields;

pub use crate::Cached;
pub use generated::*;
pub use values::{
    BytesView, DurationView, IntOrStr, JsonView, Map, MapIter, MicroTimeView, Object, QuantityView,
    Seq, SeqIter, TimeView, Value, ViewValue,
};

/// A type with a generated read view: every Kubernetes kind kinformer-protobuf's schema
/// table knows (generated from the Go types by `cargo xtask gen-proto`).
pub trait HasView {
    /// The view of an object of this type.
    type View<'a>: Copy;
    /// The view over an object's top-level fields.
    #[doc(hidden)]
    fn view(fields: Fields<'_>) -> Self::View<'_>;
}
