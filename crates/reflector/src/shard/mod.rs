//! Sharded lists and watches (Kubernetes 1.36's `ShardedListAndWatch`, KEP-5866): the
//! [`ShardSelector`] sent as `shardSelector`, and [`ShardedListerWatcher`], which sends it
//! and filters on the client whatever the server did with it.
//!
//! The API server (with the alpha feature gate `ShardedListAndWatch` on) hashes a field of
//! each object — `metadata.uid` or `metadata.namespace` — with 64-bit FNV-1a and returns only
//! the objects whose hash falls in one of the selector's ranges, in lists and in watches.
//! A server without the gate (off by default in 1.36) or older than 1.36 ignores the field
//! and sends every object. Both hold here: the same hash and the same bounds (inclusive
//! start, exclusive end, which may be 2^64) decide membership on the client, so a sharded
//! informer caches exactly its shard on any server.

mod lister_watcher;
mod selection;
mod selector;

pub use lister_watcher::{ShardFiltering, ShardFilteringHandle, ShardedListerWatcher};
pub use selection::ShardSelection;
pub use selector::{ShardKey, ShardRange, ShardSelector, fnv1a_64};
