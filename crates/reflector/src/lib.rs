//! The [`Reflector`]: client-go's list-then-watch state machine, which keeps a
//! [`Sink`](kinformer_core::Sink) in step with a [`ListerWatcher`] through every failure
//! (relists on 410, backoff, bookmarks, streaming lists, paged lists, sharded list and
//! watch), and the [`ListerWatcher`] trait it reads through, with a scripted fake
//! ([`fake::FakeListerWatcher`], feature `fake`).
//!
//! The lister-watcher for the Kubernetes API (`KubeListerWatcher`, the JSON and protobuf
//! wire formats, `reflector_client`) is kinformer-kube's; this crate knows no kube, HTTP
//! or serde.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_core::{Error as SinkError, ListPart, Sink};
//! use kinformer_kube::{KubeListerWatcher, reflector_client};
//! use kinformer_reflector::Reflector;
//! use kube::Api;
//!
//! /// Any sink will do: a DeltaFIFO, the in-order FIFO, a store. This one prints keys.
//! struct Print;
//! impl Sink<Pod> for Print {
//!     fn add(&self, p: Arc<Pod>) -> Result<(), SinkError> { println!("add {:?}", p.metadata.name); Ok(()) }
//!     fn update(&self, p: Arc<Pod>) -> Result<(), SinkError> { println!("update {:?}", p.metadata.name); Ok(()) }
//!     fn delete(&self, p: Arc<Pod>) -> Result<(), SinkError> { println!("delete {:?}", p.metadata.name); Ok(()) }
//!     // A list comes a part at a time as it arrives; `end` carries its resourceVersion.
//!     fn replace(&self, part: ListPart<Pod>) -> Result<(), SinkError> {
//!         println!("{} pods listed{}", part.items.len(), part.end.map(|rv| format!(", at {rv}")).unwrap_or_default());
//!         Ok(())
//!     }
//!     fn resync(&self) -> Result<(), SinkError> { Ok(()) }
//!     fn bookmark(&self, _: &str) -> Result<(), SinkError> { Ok(()) }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // kube's own retry layer off: the reflector must see 429 and 504 itself.
//! let client = reflector_client(kube::Config::infer().await?)?;
//! let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client, "default"));
//! let handle = Reflector::new(pods, Print)
//!     .name("pods")
//!     .resync_period(std::time::Duration::from_secs(30))
//!     .on_watch_error(|e| eprintln!("reflector: {e}"))
//!     .spawn()?;
//! // ... until the program ends:
//! handle.stop().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # The state machine
//!
//! The reflector is client-go's (`tools/cache/reflector.go`, v0.36), on one Tokio task:
//!
//! ```text
//!          ┌───────────── backoff (800 ms → 30 s, jittered) ◀────────────┐
//!          ▼                                                             │
//!   [ initial state ]──── list (paged) or streaming list ───┐            │ relist
//!          │ fails                                          ▼            │
//!          └─────────────────────────────────────────▶ [ watching ] ─────┘
//!                                                       │    ▲  410 / too large RV /
//!                                clean close / cut ─────┘    │  decode error / other status /
//!                                429 or unreachable: backoff ┘  a watch shorter than 1 s
//! ```
//!
//! - **Initial state.** A list at `resourceVersion=0` (any version, so the API server's
//!   watch cache can serve it) in pages of 500 following `continue` tokens; a `continue`
//!   token that expires falls back to one unpaged list at the same RV. The sink gets one
//!   `replace(list, rv)`. With [`Reflector::watch_list`] the initial state comes instead
//!   from a streaming list (`sendInitialEvents=true`): the events gather in a temporary
//!   store until the bookmark annotated `k8s.io/initial-events-end`, the sink is replaced
//!   at that bookmark's RV, and *the same watch* goes on. A server that refuses the
//!   streaming list (or any failure of it other than 429 / unreachable, which back off
//!   and retry, and an expired RV, which retries at `""`) falls back to List+Watch for
//!   that round.
//! - **Watching.** From the last synced RV, with bookmarks and a timeout picked at random
//!   between 5 and 10 minutes (so that a fleet of clients does not reconnect in step).
//!   Each `ADDED` / `MODIFIED` / `DELETED` goes to the sink's `add` / `update` / `delete`,
//!   each bookmark to `bookmark`, and every one of them (bookmarks included) advances
//!   [`ReflectorStatus::last_sync_resource_version`] — except the synthetic `ADDED`
//!   events that open a watch from `""`/`"0"`, until the first other event. A watch that
//!   closes cleanly, or whose connection is cut, is re-opened from the last RV with *no*
//!   relist, so deletions made meanwhile arrive as real `DELETED` events.
//! - **Relist.** Everything that may have lost events relists, after a backoff: `410
//!   Gone` (expired RV), a too-large RV, an undecodable event, any other error status, a
//!   watch that ended within a second without events, a failed resync.
//!
//! - **Resume** ([`Reflector::resume`], not in client-go). Instead of the initial state,
//!   a reflector given a snapshot of its sink's consumer's cache (a [`Resume`]: the
//!   snapshot's RV and objects, which may still be loading) asks the server what it is at
//!   (a consistent list of one object), watches from the snapshot's RV until an event or
//!   bookmark reaches that version (the watch's `timeoutSeconds` is 3, so the API server's
//!   watch cache sends a bookmark about a second in), then hands the sink one list — the
//!   snapshot with what the watch changed — and goes on watching. A `410`, a watch that ends
//!   short (no watch cache: no bookmarks), a version that is not an integer, or a snapshot
//!   that fails to load lists at once instead, at `""`, handed on whole while the cache
//!   holds the snapshot; a server that cannot be reached keeps the resume for the next
//!   round, after the backoff.
//!
//! # Which resourceVersion each list uses
//!
//! | list | RV | paging |
//! | --- | --- | --- |
//! | first list | `"0"` (watch cache may serve it) | 500 per page |
//! | relist after a watch failure (e.g. `410` on the watch) | the last synced RV ("not older than") | none, so the watch cache can serve it — or 500 if the first list came back paged (watch cache off) |
//! | a list that itself answered `410` / too-large RV | `""`: a consistent read from etcd | as the list it retries |
//! | a `continue` token expired mid-list | the same RV as that list's first page | none (one full list) |
//! | streaming list | `""` at first and after an unavailable RV, else the last synced RV (`NotOlderThan`) | — |
//! | resume: what the server is at | `""` | one object |
//! | a resume that cannot catch up | `""` | as a first list (or a streaming list), handed on whole |
//!
//! # Backoff
//!
//! One [`Backoff`] per reflector spaces every retry: a failed round (before the relist),
//! a watch that failed to start with `429` or an unreachable server, a `429` in a watch
//! stream. Delays start at 800 ms, double up to 30 s, are stretched by a random 0–100 %,
//! and start over after two minutes without a backoff — as client-go's. Unlike client-go's
//! (which [`Backoff::client_go`] reproduces), they also start over once a watch delivers an
//! event or the server answers `410`, and stay at about a second while the server cannot be
//! reached at all: a reflector that backed off during a partition or an API server restart
//! catches up within seconds of the server coming back, instead of sleeping up to a minute
//! more. A server that answers with errors (`429`, `5xx`, `403`) still sees the full
//! escalation, and a list that works does not reset it. `429` and an unreachable server
//! re-watch from the last RV *without* relisting (client-go does this for "connection
//! refused"; kinformer widens it to every failure to reach the server, such as a TLS
//! handshake cut by a network partition, because the RV is still valid: if it is not,
//! the re-watch answers `410` and that relists).
//!
//! # Errors and the error handler
//!
//! Every failure reaches the handler set with [`Reflector::on_watch_error`] as a typed
//! [`Error`]; the reflector then recovers by itself. A watch event that fails to decode
//! ([`Error::Decode`], which never quotes values from the body) relists; an object of
//! the wrong kind ([`Error::UnexpectedKind`]) is skipped with a log line; a server error
//! status ([`Error::Api`]) is handled by its code as above. Nothing the server sends can
//! make the reflector panic or skip an event silently. The handler runs on the reflector's
//! task and should return quickly.
//!
//! One object that does not fit the type — a custom resource whose schema moved on, a
//! Rust struct that is out of date — while its metadata decodes is [`Error::Undecodable`]:
//! skipped alone and reported with its key, so the rest of the list and the watch go on
//! (client-go and kube-runtime fail the whole list and retry it forever). With a
//! known-objects view ([`Reflector::known_objects`], which informers set) the cache keeps
//! that object's last version that decoded, a relist included, and its deletion still
//! deletes it; when it is fixed, the next event brings it in.
//!
//! # Cancellation
//!
//! [`Reflector::run`] returns when its `CancellationToken` is cancelled; dropping its
//! future stops everything at once, as the reflector spawns no task of its own (resync
//! is a timer inside the same `select!`). [`Reflector::spawn`] runs it on a Tokio task
//! until [`ReflectorHandle::stop`]; dropping the handle leaves it running, as dropping a
//! Tokio `JoinHandle` does. The sink's methods are
//! synchronous and are called from the reflector's task: they must not block for long.
//!
//! # Tracing
//!
//! Spans `reflector{name}` › `list{reason, resource_version, page_size, pages, items}`,
//! `watch_list{reason}`, `watch_start{resource_version}` and `watch`: the `reason` of a
//! list says why it happened (initial list, expired RV, too-large RV, very short watch,
//! or the failure that ended the previous round). Keys, RVs and counts are logged,
//! never object bodies.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod backoff;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod lister_watcher;
mod reflector;
mod shard;
mod task;

pub use backoff::Backoff;
pub use error::{ApiStatus, Error};
/// Re-exported from kinformer-core: the boxed cause inside [`Error::Unreachable`] and others.
pub use kinformer_core::BoxError;
/// Re-exported from kinformer-core: what [`ListerWatcher`]'s methods return (the one async
/// idiom of kinformer's swap points).
pub use kinformer_core::BoxFuture;
pub use lister_watcher::{
    Bookmark, ListOptions, ListPage, ListerWatcher, ShardChange, Undecodable, WatchEvent,
    WatchOptions, WatchStream,
};
pub use reflector::{
    CATCH_UP_WATCH_TIMEOUT, DEFAULT_PAGE_SIZE, LastError, MIN_WATCH_TIMEOUT, Pace, Reflector,
    ReflectorCounters, ReflectorHandle, ReflectorStatus, Resume, STREAMED_PART, WatchErrorHandler,
};
pub use shard::{
    ShardFiltering, ShardFilteringHandle, ShardKey, ShardRange, ShardSelection, ShardSelector,
    ShardedListerWatcher, fnv1a_64,
};
pub use task::TaskHandle;
