//! The local cache: its read and write traits, the thread-safe store, index functions and listers.
//!
//! Every controller reads this cache instead of the API server: the informer writes each
//! change through the cache's [`IndexerWriter`] side, and workers read it through its
//! [`Indexer`] side or a [`Lister`], by key, by index or by label selector.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{Pod, PodSpec};
//! use kinformer_indexer::{
//!     namespace_indexers, parse_selector, IndexFunc, Indexer, KnownObjects, Lister, ThreadSafeStore,
//! };
//!
//! // The namespace index (what listers use) plus the reference article's `byNode`.
//! let mut indexers = namespace_indexers();
//! indexers.insert("byNode".into(), IndexFunc::single(|p: &Pod| p.spec.as_ref()?.node_name.as_deref()));
//! let store = Arc::new(ThreadSafeStore::new(indexers));
//!
//! for (name, app, node) in [("web-0", "nginx", "node1"), ("web-1", "nginx", "node2"), ("db-0", "pg", "node1")] {
//!     let mut pod = Pod::default();
//!     pod.metadata.namespace = Some("default".into());
//!     pod.metadata.name = Some(name.into());
//!     pod.metadata.labels = Some([("app".to_string(), app.to_string())].into());
//!     pod.spec = Some(PodSpec { node_name: Some(node.into()), ..PodSpec::default() });
//!     store.add(Arc::new(pod))?; // what the informer does for each event
//! }
//!
//! assert_eq!(store.by_index("byNode", "node1")?.len(), 2);
//!
//! let lister = Lister::new(Arc::clone(&store));
//! let nginx = lister.namespaced("default").list(&parse_selector("app=nginx")?);
//! assert_eq!(nginx.len(), 2);
//! let db = lister.namespaced("default").get("db-0")?;
//! assert!(Arc::ptr_eq(&db, &store.get_by_key("default/db-0").unwrap())); // shared, not copied
//! assert!(lister.namespaced("default").get("gone").unwrap_err().is_not_found());
//!
//! // What readers get: the read side only.
//! let reader: Arc<dyn Indexer<Pod>> = store;
//! assert_eq!(reader.list().len(), 3);
//! # Ok::<(), kinformer_indexer::Error>(())
//! ```
//!
//! A reader cannot write: `Indexer` has no write method, so this does not compile.
//!
//! ```compile_fail
//! # use std::sync::Arc;
//! # use k8s_openapi::api::core::v1::Pod;
//! # use kinformer_indexer::{Indexer, ThreadSafeStore, namespace_indexers};
//! # use kinformer_core::Sink;
//! let reader: Arc<dyn Indexer<Pod>> = Arc::new(ThreadSafeStore::new(namespace_indexers()));
//! reader.add(Arc::new(Pod::default())); // error: `add` needs the write side
//! ```
//!
//! # What is here
//!
//! - [`Indexer`] and [`IndexerWriter`]: the swap point between an informer and its cache,
//!   split by who may write. [`Indexer`] reads (by key through kinformer-core's
//!   [`KnownObjects`], all, by index); it is what listers and `informer.indexer()` hand out,
//!   so a reader cannot write. [`IndexerWriter`] adds the writes — kinformer-core's
//!   [`Sink`], the same calls the reflector makes into a FIFO — and `add_indexers`; only the
//!   informer holds it. Objects go in and come out as `Arc<K>`.
//! - [`ThreadSafeStore`]: this crate's implementation, every informer's cache by default,
//!   for any `K: MetaObject` (kinformer-compact-store's `Cached<K>`, what a factory's
//!   informers keep; every `kube::Resource` — k8s-openapi types, CRDs, `DynamicObject` —
//!   decoded; or your own type).
//! - [`IndexFunc`] and [`Indexers`]: index functions as closures — one borrowed value
//!   ([`IndexFunc::single`]), any number ([`IndexFunc::new`]), fallible
//!   ([`IndexFunc::fallible`]), and the built-in [`IndexFunc::namespace`]. [`KeyFunc`]
//!   replaces the `namespace/name` key.
//! - [`Lister`] / [`NamespacedLister`]: typed reads by name and label selector, namespaced
//!   ones through the [`NAMESPACE_INDEX`]; a missing object is [`Error::NotFound`].
//! - [`Selector`]: a label selector of this crate's own ([`Requirement`]s, client-go's
//!   `labels.Selector`), so the cache builds without kube; [`parse_selector`] reads
//!   client-go's string grammar (`a=b,c in (x,y),!d`), [`everything`] matches all without
//!   looking at labels, and kube-core's `Selector` (what a `LabelSelector` converts into)
//!   converts both ways under the `kube` feature.
//!
//! # Design decisions
//!
//! ## The structure, and the measurement behind it
//!
//! [`ThreadSafeStore`] is one `std::sync::RwLock` over:
//!
//! - a key map, `key → (slot id, object)`, with keys of up to 46 bytes stored inside the
//!   map entry (so comparing a key follows no pointer, and most keys cost no allocation);
//! - a dense array of objects by slot id (8 bytes a slot; freed slots are reused);
//! - per index, `value → set of slot ids`, with each value string allocated once and
//!   shared with the slots filed under it;
//! - per slot, the values it is filed under (16 bytes per index for a single value), so an
//!   update compares against them and a delete removes them without calling an index
//!   function on the old object — which would read cold memory, and could fail.
//!
//! `by_index` therefore walks a set of slot ids into the dense array instead of looking
//! every key up again. `benches/structures.rs` measures the candidates on the issue's
//! workload (100k pods, 100 namespaces, 1000 nodes, a namespace and a `byNode` index,
//! strided access, an update replacing a pod with a new version): one lock over slots (this
//! one), one lock over client-go's `threadSafeMap` shape (`key → object`, `value → set of
//! keys`), and sharded dashmap items and indices. When the structure was chosen
//! (2026-11-29, before the keys' hasher changed; no figures are kept here because that run
//! is superseded), slots made `by_index` about an order of magnitude faster than the keyed
//! shape at the same cost for `get` and `update`, and sharding bought nothing: all three
//! were bound by cache misses on 100k objects of 2.4 KB each, not by locking. Run
//! `cargo bench -p kinformer-indexer --bench structures` for today's figures. Sharding would
//! also cost the consistency guarantee below, and the informer is the only writer while
//! readers of a `RwLock` do not block each other. A lock-free read path (copy-on-write
//! snapshots, or left-right's two copies) was ruled out without a prototype: each write
//! would copy or double a 100k-entry index, and memory per cached object is one of the
//! project's targets.
//!
//! Against client-go v0.36.3's `ThreadSafeStore` on the same workload (`benches/indexer.rs`
//! and its Go twin, both run by `cargo xtask bench indexer`), the figures and which targets
//! they meet are in BENCHMARKS.md's `indexer` section in the repository; they are not
//! copied here, so that they cannot go stale. One difference in kind: a get
//! ([`KnownObjects::get_by_key`]) hands out an `Arc`, which writes the object's reference
//! count (a cache miss on a cold object), while client-go's `GetByKey` returns the object
//! without touching it; so the fair comparison, and the one the project's target uses, is a
//! `GetByKey` that then reads the object, as every caller does.
//!
//! ## The consistency guarantee
//!
//! Every read method takes the read lock once and copies out what it returns (`Arc`
//! clones, keys) before releasing it; every write takes the write lock once and changes
//! the items and all indices before releasing it. So each read sees the store as it was
//! between two writes:
//!
//! - `by_index(name, v)` and `index(name, obj)` return exactly the objects whose
//!   *current* version is filed under `v` — never a key whose object no longer matches
//!   (client-go's answer too), never a stale version;
//! - `list()` never sees half of a `replace`, and an index added by `add_indexers` is
//!   complete (back-filled) from the moment it can be queried;
//! - a lister's namespaced list is one `by_index` call, so it is one snapshot too.
//!
//! Two calls are two snapshots: the writer may run between them. What a read returned
//! stays valid (the `Arc` keeps the object alive) but may be outdated a moment later.
//! `tests/consistency.rs` checks this with a writer and three readers, and shows that the
//! same check catches a store whose index and items sit under separate locks.
//!
//! What the write lock is held for: computing the new object's index values (so index
//! functions must be quick, must not block, and must not call back into the store), and
//! updating the maps. Keys are computed before it is taken; the object a write replaces
//! is dropped after it is released, so freeing a large object never blocks readers.
//! `replace` builds the new items and indices without the lock and only swaps them in
//! under it (client-go rebuilds under the lock, stalling readers for the whole relist).
//! A panic in an index function happens before anything is changed, so the store stays
//! consistent and lock poisoning is ignored.
//!
//! ## Objects are shared, never copied
//!
//! The store keeps `Arc<K>`s and every read clones the `Arc`: the informer, its handlers
//! and every lister see the same allocation. There is no deep clone anywhere on a read
//! path. Treat objects as immutable; to change one, store a new one.
//!
//! ## Bad input is an error, not a panic
//!
//! An object without a valid key ([`Error::Key`]), an index function that fails
//! ([`Error::IndexFunc`]; client-go panics), an unknown index name
//! ([`Error::UnknownIndex`]), a duplicate index name ([`Error::IndexerConflict`]) and an
//! invalid selector string ([`Error::InvalidSelector`]) are typed errors, and a failed
//! write changes nothing: keys and index values are computed before anything is changed.
//!
//! ## Hashing
//!
//! Keys and index values come from the API server, so their maps use foldhash's quality
//! hasher with a random seed per map (object names chosen to collide under one seed do not
//! collide under another: names are chosen by whoever can create objects); std's SipHash
//! cost about four times as much on a 20-byte key. Slot ids are chosen by the store, so
//! their sets use a one-multiplication hash.
//!
//! ## Differences from client-go
//!
//! Besides errors instead of panics: `index_keys` and `list_index_func_values` come back
//! sorted; `delete` takes the object's final state and records its resource version
//! (client-go's `DeleteWithObject`), and `last_sync_resource_version` always reports (in
//! client-go it needs the `AtomicFIFO` gate). The selector parser refuses `>` and `<`
//! ([`Error::UnsupportedSelectorOperator`]), which kube-core's `Expression` cannot hold (and
//! so neither does [`Requirement`], which converts into it). A
//! selector printed back sorts its requirements by key stably; client-go's sort is not
//! stable past 12 requirements, so requirements on one key can print in another order then
//! (the selector they mean is the same; see [`parse_selector`]).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod hash;
mod index;
mod lister;
mod selector;
mod store;
mod traits;

pub use error::Error;
pub use index::{
    ALL_NAMESPACES, IndexFunc, Indexers, NAMESPACE_INDEX, namespace_indexers, namespaced_value,
};
/// Re-exported from kinformer-core, so that a cache can be written with this crate alone.
pub use kinformer_core::{
    BoxError, KeyFunc, KnownObjects, Sink, forward_known_objects, forward_sink,
};

#[doc(hidden)]
/// For the forwarding macros' paths.
pub use kinformer_core as __core;
pub use lister::{Lister, NamespacedLister};
pub use selector::{Requirement, Selector, everything, parse_selector};
pub use store::ThreadSafeStore;
pub use traits::{Indexer, IndexerWriter};
