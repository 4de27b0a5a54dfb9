//! Record a Kubernetes list/watch stream, replay it into an informer on virtual time, and
//! perturb it: controller tests that run a real server's stream in milliseconds, the same
//! way every time, and the faults that stream could have had.
//!
//! - **Record**: [`Recorder`] wraps any [`ListerWatcher`](kinformer_reflector::ListerWatcher)
//!   (a `KubeListerWatcher` over `kube::Config::infer()`, or the local control plane of
//!   `cargo xtask record`) and writes every list call and page, every watch call and frame,
//!   every error (a `410`, a refused connection), and how each watch ended, each with its
//!   time, to a file in a documented, versioned format ([`mod@format`]). Secrets' values are
//!   redacted by default ([`RecordOptions::redact_secrets`]).
//! - **Replay**: [`Replay`] is a lister-watcher that answers the calls made of it as the
//!   recorded server answered them, each page and frame as long after its call as it came
//!   then, on a [`Clock`](kinformer_core::Clock) (Tokio's: under a paused test runtime a
//!   recording of minutes replays in milliseconds). Hand it to an informer as you would a
//!   `KubeListerWatcher`.
//! - **Perturb**: [`Perturbation`] names a change a server or a network could have made:
//!   delay frames, cut a watch at frame N, answer a re-watch with `410` or a refusal,
//!   duplicate or drop bookmarks, serve a stale list on a relist, split a page, swap events
//!   of two keys. Each keeps the recording answerable (the re-watch after a cut gets the
//!   rest; the relist after a `410` gets the state the watch left). [`Chaos`] picks some
//!   with a seed; [`check`] holds the invariants to check after (the store equals the
//!   server's final state, every delete seen, no false delete).
//!
//! # A controller test from a recording
//!
//! Record once against a cluster (a program of yours, or `cargo xtask record`):
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_compact_store::Cached;
//! use kinformer_informer_factory::SharedIndexInformer;
//! use kinformer_kube::{KubeListerWatcher, reflector_client};
//! use kinformer_replay::{RecordOptions, Recorder};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = reflector_client(kube::Config::infer().await?)?;
//! let pods = KubeListerWatcher::new(kube::Api::<Pod>::namespaced(client, "default")).cached();
//! let recorder = Recorder::to_file(pods, "pods.jsonl", RecordOptions::new("pods in default"))?;
//! let informer = SharedIndexInformer::<Cached<Pod>>::builder(recorder).build();
//! // ... run the controller over `informer` while the cluster changes; then stop ...
//! # Ok(())
//! # }
//! ```
//!
//! Then, in a test, replay the file into the same informer and controller on a paused
//! clock, perturbed, and assert what the controller wrote:
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_compact_store::Cached;
//! use kinformer_controller::controller::{Action, Context, Controller};
//! use kinformer_core::{ObjectKey, meta_namespace_key};
//! use kinformer_indexer::Lister;
//! use kinformer_informer_factory::SharedIndexInformer;
//! use kinformer_replay::informer::{Observer, outcome, settle};
//! use kinformer_replay::{Chaos, Replay, check, synthetic::Churn};
//! use tokio_util::sync::CancellationToken;
//!
//! /// The controller under test writes each pod's node, or that it is gone (to a map here;
//! /// to the API server in a program).
//! struct Labeler {
//!     pods: Lister<Cached<Pod>>,
//!     writes: Arc<Mutex<BTreeMap<String, String>>>,
//! }
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<Labeler>) -> Result<Action, kinformer_indexer::Error> {
//!     let write = match ctx.pods.namespaced(key.namespace().unwrap_or_default()).get(key.name()) {
//!         Ok(pod) => format!("node={}", pod.spec().and_then(|s| s.node_name()).unwrap_or("none")),
//!         Err(e) if e.is_not_found() => "gone".to_owned(),
//!         Err(e) => return Err(e),
//!     };
//!     ctx.writes.lock().unwrap().insert(key.to_string(), write);
//!     Ok(Action::Done)
//! }
//!
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
//! # rt.block_on(async {
//! // A recording (made up here; in a test, `Recording::load("pods.jsonl")?`), three faults.
//! let recording = Churn::new("v1", "Pod").objects(30).events(300).watch_len(100).build();
//! let (served, applied) = Chaos::new(42).perturbations(3).apply(&recording);
//!
//! let replay = Replay::<Cached<Pod>>::new(served.clone());
//! let informer = SharedIndexInformer::builder(replay.clone()).build();
//! let controller = Controller::<ObjectKey>::new("labeler").workers(2);
//! controller.watch(&informer);
//! let observer = Observer::new();
//! let registration = informer.add_event_handler(observer.clone()).unwrap();
//! let running = informer.start().unwrap();
//! let writes = Arc::new(Mutex::new(BTreeMap::new()));
//! let labeler = Labeler { pods: informer.lister(), writes: Arc::clone(&writes) };
//! let cancel = CancellationToken::new();
//! let workers = tokio::spawn(controller.run(reconcile, labeler, cancel.clone()));
//!
//! settle(&replay, &informer, &registration).await;
//! // The informer ended where the server did, saw every delete, and no false one.
//! let outcome = outcome(&informer, &observer);
//! if let Err(failed) = check::all(&check::standard(), &served, &outcome) {
//!     panic!("after {applied:?}: {failed:?}");
//! }
//! // The controller's last write of every pod it heard of: its node, or gone.
//! let mut want: BTreeMap<String, String> = recording.deletions().into_iter()
//!     .map(|(key, _)| (key, "gone".to_owned())).collect();
//! for pod in informer.indexer().list() {
//!     let node = pod.spec().and_then(|s| s.node_name()).unwrap_or("none");
//!     want.insert(meta_namespace_key(pod.as_ref()).unwrap().to_string(), format!("node={node}"));
//! }
//! for _ in 0..1000 {
//!     if *writes.lock().unwrap() == want { break; }
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//!     std::thread::sleep(Duration::from_millis(1)); // handlers run on threads of their own
//! }
//! assert_eq!(*writes.lock().unwrap(), want, "after {applied:?}");
//! cancel.cancel();
//! workers.await.unwrap();
//! running.stop().await.unwrap();
//! # });
//! ```
//!
//! # Why at the lister-watcher
//!
//! Everything the reflector's state machine acts on crosses the
//! [`ListerWatcher`](kinformer_reflector::ListerWatcher) trait: pages, events, errors and
//! connection ends, in a form that no longer depends on the wire format. So a recording
//! made there replays into any informer of the type (the default cache's `Cached<K>` or a
//! decoded `K`), and perturbations are edits of a list of calls, not of bytes. Objects are
//! written as their JSON (what the API serves for every type), whatever format they came
//! in.
//!
//! To keep the bytes themselves, record the wire instead (feature `wire`, module `wire`):
//! a `WireRecorder`'s tower layer on the client's stack writes every HTTP exchange, each
//! list page and watch frame as received (protobuf, JSON or CBOR, gzip-compressed when it
//! was), and a `WireReplay` serves the recording as a `kube::Client`, so that the
//! lister-watcher's own work (content negotiation's answer, decompression, framing,
//! decoding into `Cached<K>`) replays too. Such a recording replayed under a [`Recorder`]
//! becomes a decoded one, which the perturbations and checks work on. Bytes cannot be
//! redacted: a wire recording leaves Secrets' bodies out by default.
//!
//! # Determinism
//!
//! A replay on Tokio's paused clock, in a current-thread runtime, serves the same answers
//! in the same order every time; the reflector's random parts (backoff jitter, watch
//! timeouts) move only *when* a call is made, never what it is answered. So a seeded
//! [`Chaos`] run gives the same cache and the same notifications every time (checked a
//! hundred times in this crate's tests).

#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod check;
pub mod format;
#[cfg(feature = "informer")]
pub mod informer;
mod lines;
mod model;
#[cfg(feature = "kube")]
mod offline;
mod perturb;
mod record;
mod replay;
pub mod synthetic;
#[cfg(feature = "wire")]
pub mod wire;

pub use check::{Check, Observation, Outcome};
pub use format::{FormatError, Recording};
pub use model::State;
#[cfg(feature = "kube")]
pub use offline::offline_client;
pub use perturb::{Chaos, NotApplicable, Perturbation, Refusal, candidates};
pub use record::{RecordOptions, Recorder, Tape};
pub use replay::{Replay, Timing};
