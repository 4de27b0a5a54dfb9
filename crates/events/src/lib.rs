//! client-go's two Kubernetes Event recorders, written from a background task so that
//! recording never blocks or fails a reconcile: `tools/events` (`events.k8s.io/v1`
//! Events, isomorphic ones folded into series) at the crate root, and `tools/record`
//! (core/v1 Events through the `EventCorrelator`: repeat counts, aggregation, a spam
//! filter) in [`record`]. Which one to use: [below](#which-of-client-gos-recorders).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_events::{Broadcaster, Config, EventType, Reporter};
//! use kube::Api;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let broadcaster = Broadcaster::new(client.clone(), Config::default())?;
//! let recorder = broadcaster.recorder(Reporter::new("example.com/widget-controller"));
//!
//! let pod = Api::<Pod>::namespaced(client, "default").get("web-0").await?;
//! // Returns at once; the event is written (or folded into a series) in the background.
//! let _ = recorder.publish_for(&pod, EventType::Normal, "Scaled", "Scale", "scaled to 3 replicas");
//!
//! broadcaster.shutdown().await; // on the way out: writes what is queued
//! # Ok(())
//! # }
//! ```
//!
//! The same on a [`FakeClock`], with a sink of your own in place of the API server (the
//! [`EventSink`] trait is the swap point; [`KubeSink`] is the default):
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ObjectReference;
//! use k8s_openapi::api::events::v1::Event;
//! use kinformer_events::{
//!     Broadcaster, BoxFuture, Config, Error, EventSink, EventType, FakeClock, Reporter,
//! };
//!
//! /// Logs each write as "create" or "patch <series count>".
//! #[derive(Clone, Default)]
//! struct Log(Arc<Mutex<Vec<String>>>);
//!
//! impl EventSink for Log {
//!     fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<Event, Error>> {
//!         self.0.lock().unwrap().push("create".into());
//!         Box::pin(std::future::ready(Ok(event.clone())))
//!     }
//!     fn patch<'a>(&'a self, event: &'a Event, _: &'a [u8]) -> BoxFuture<'a, Result<Event, Error>> {
//!         let count = event.series.as_ref().map_or(1, |s| s.count);
//!         self.0.lock().unwrap().push(format!("patch {count}"));
//!         Box::pin(std::future::ready(Ok(event.clone())))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! let clock = FakeClock::new();
//! let log = Log::default();
//! let broadcaster = Broadcaster::with_sink(log.clone(), Config::new().clock(clock.clone()))?;
//! let recorder = broadcaster.recorder(Reporter::with_instance("widget-controller", "widget-0"));
//! let pod = ObjectReference {
//!     api_version: Some("v1".into()),
//!     kind: Some("Pod".into()),
//!     namespace: Some("default".into()),
//!     name: Some("web-0".into()),
//!     ..ObjectReference::default()
//! };
//!
//! for _ in 0..5 {
//!     recorder.publish(&pod, None, EventType::Warning, "BackOff", "Restart", "restarting")?;
//! }
//! broadcaster.flush().await?;
//! // The first is created, the second starts a series of 2; the next ones are only counted.
//! assert_eq!(*log.0.lock().unwrap(), ["create", "patch 2"]);
//!
//! // Once the series has been quiet for 6 minutes (checked every 6), it is written a last time.
//! clock.step(Duration::from_secs(12 * 60));
//! broadcaster.flush().await?;
//! assert_eq!(*log.0.lock().unwrap(), ["create", "patch 2", "patch 5"]);
//! # Ok(())
//! # }
//! ```
//!
//! # Which of client-go's recorders
//!
//! client-go has two, and so has this crate; both are ported from client-go v0.36.3 and
//! checked against it by `xtask/go/cmd/events-peer` on a real API server:
//!
//! | | [`Recorder`] (`tools/events`) | [`record::Recorder`] (`tools/record`) |
//! | --- | --- | --- |
//! | writes | `events.k8s.io/v1` Events | core/v1 Events |
//! | publishing | `Eventf(regarding, related, type, reason, action, note)` | `Eventf(object, type, reason, message)`: no action, no related object |
//! | who | `reportingController`, `reportingInstance` ([`Reporter`]) | `source.component` and `source.host`, copied to `reportingComponent` and `reportingInstance` ([`record::Source`]) |
//! | repeats | folded into a series, whose count is written when the series starts, every 30 minutes, when it has been quiet for 6, and at shutdown | each repeat patches `count` and `lastTimestamp` on the Event at once |
//! | the same event with another message | folded into the same series (the note is not compared; the first stays) | another Event; after 10 distinct messages in 10 minutes, one `(combined from similar events)` Event counting the rest |
//! | flood control | none | a token bucket per source and object: 25, then one per 5 minutes |
//! | an object's new resourceVersion | a new series (the whole reference is the key) | the same Event (the keys leave the resourceVersion out) |
//!
//! Use [`record`] when the Events should look like those of the client-go controller you
//! port or run beside (most of them, `kube-controller-manager`'s among them,
//! use `tools/record`), when tools and people read `count` and `lastTimestamp`, or when
//! one object's Events must stay few whatever the controller does: an object that changes
//! on every reconcile gets one Event per kind of event, not one per version. Use the
//! root [`Recorder`] for `events.k8s.io/v1`, the current API (GA since Kubernetes 1.19),
//! with actions and related objects: controller-runtime v0.23's `GetEventRecorder` hands
//! out `tools/events` recorders, and kube-runtime's `events::Recorder` writes that API
//! too. `kubectl events` and `kubectl describe` show both kinds.
//!
//! The two differ on the object reference as client-go's two do.
//! [`Recorder::publish_for`] and [`record::Recorder::event_for`] both make the reference
//! client-go's `GetReference` makes, resourceVersion included. `tools/events` compares
//! whole references, so an event about the next version of an object is a new event
//! (client-go's behaviour, kept here); to fold across versions with it, publish with a
//! reference without the resourceVersion (kube's `Resource::object_ref`).
//! `tools/record` writes the resourceVersion of the first occurrence and leaves it out of
//! every key.
//!
//! The end-to-end tests (`tests/e2e.rs`, `tests/record_e2e.rs`) feed one sequence of
//! events to each recorder and, through `xtask/go/cmd/events-peer`, to client-go
//! v0.36.3's, both against the same real API server, and require the Event objects they
//! write to be equal.
//!
//! The rest of this page is about the `events.k8s.io/v1` recorder; [`record`] has its own.
//!
//! # What is folded, and when it is written
//!
//! Two events are *isomorphic* when they agree on the regarding object's reference and
//! the related one's (every field of each: apiVersion, kind, namespace, name, uid,
//! resourceVersion, fieldPath), the type, the reason, the action, and the reporting
//! controller and instance. The note is not compared: a repeat with another note folds
//! into the first, whose note stays. The broadcaster keeps the events it wrote, by that
//! key, and for each published event:
//!
//! | the cache holds | what happens | write |
//! | --- | --- | --- |
//! | nothing isomorphic | the event is cached | create it |
//! | an isomorphic event without a series | it gets `series: {count: 2, lastObservedTime: now}` | patch the series onto it |
//! | an isomorphic event with a series | `count + 1`, `lastObservedTime = now` | none |
//!
//! A repeat's count is therefore written later, by two periodic checks on the
//! [`Clock`]: every 6 minutes, each series last observed more than 6 minutes ago is
//! patched a last time and forgotten (a later repeat creates a new event), and each
//! single event published more than 6 minutes ago is forgotten; every 30 minutes, every
//! open series is patched with its count (its heartbeat). Each check starts a period after
//! the previous one ended. [`Broadcaster::shutdown`] writes, once, each series counted
//! past its last write (client-go does not: see the differences below). A series patch
//! that finds the event gone (`404`, say it was deleted or expired) creates it again,
//! series included.
//!
//! New events are named `<regarding object's name>.<publish time in Unix nanoseconds,
//! hex>`, or a random UUID when that is no valid name; they go in the regarding object's
//! namespace, `default` for a cluster-scoped object. The `eventTime` is the publish time.
//!
//! Nothing else limits events: `tools/events` has no rate limit or spam filter (those are
//! `tools/record`'s correlator), and neither has this crate; series are its only defence
//! against a flood of repeats.
//!
//! # Failures, retries, and bounds
//!
//! A create or a series patch is tried up to 12 times, 10 to 12.5 seconds apart, as long
//! as it fails for a reason that may pass: the transport ([`Error::Transport`]), or
//! `AlreadyExists` when creating a series (its first event was created meanwhile, so the
//! next try patches it). A refusal by the server ([`Error::Api`]: invalid, forbidden, too
//! many requests...) or a request that cannot be built ([`Error::Request`]) is logged and
//! dropped. The periodic writes of series are tried once per period, by the task itself
//! (client-go does them holding its cache lock), so events wait in the queue meanwhile.
//! Everything is logged with `tracing` (never the note).
//!
//! [`Recorder::publish`] only builds the event and puts it on a bounded queue (1000 by
//! default, client-go's depth): it never waits, and when the queue is full the event is
//! dropped and the call answers [`Error::QueueFull`]. One Tokio task takes events off the
//! queue in order and starts each write as its own task; at most 64 run (or sleep before a
//! retry) at once, and when all are busy the task waits, so a slow or failing API server
//! costs a full queue and dropped events, never a blocked caller or unbounded memory. The
//! cache holds at most 4096 events. All of these are settings of [`Config`].
//!
//! # Differences from client-go
//!
//! - **Bounds.** client-go starts a goroutine per event and per write, and its cache grows
//!   with the event rate; here writes in flight (64) and cached events (4096) are bounded.
//!   A new event that finds the cache full is written but not cached, so its repeats are
//!   created as new events until older entries expire.
//! - **Order.** client-go hands each event to its own goroutine, which takes the cache
//!   lock in no set order: of two events published back to back, the second may be the
//!   one created (its note kept) and the first the one that starts the series. Here one
//!   task folds events in publish order. The writes then run concurrently on both sides,
//!   so on both a series patch may still overtake its create, miss (`404`), create, meet
//!   `AlreadyExists`, and succeed on the retry 10 s later.
//! - **Same-instant checks.** Every 30 minutes both checks are due; client-go runs them
//!   in two goroutines in no set order, this crate finishes before it refreshes, so a
//!   series due for both is written once.
//! - **One clock.** client-go reads `time.Now()` for `eventTime`, the checks and the
//!   retries, and a clock field (always the real clock) for names and `lastObservedTime`;
//!   here every time comes from the [`Clock`] (kinformer-core's, the workqueue's and the
//!   leader elector's too), so a [`FakeClock`] drives everything.
//! - **Shutdown.** client-go's `Shutdown` stops taking events and returns while writes go
//!   on in their goroutines, and a series counted since it was last written keeps its
//!   count to itself; [`Broadcaster::shutdown`] ends the sleeps before retries, writes
//!   what is queued (each tried once), waits for the writes under way, writes once each
//!   series counted past its last write, and returns.
//! - **Settings.** client-go's timings are constants; here they are [`Config`] settings
//!   with client-go's values as defaults. The reporting instance can be set
//!   ([`Reporter::with_instance`]); [`Reporter::new`] derives it from the hostname as
//!   client-go does.
//! - **API shape.** `Eventf`'s format string and arguments are Rust's `format!`, done by
//!   the caller; the event type is an enum, so there is no invalid type to reject;
//!   [`Broadcaster::flush`] has no client-go counterpart (client-go offers no way to
//!   wait for writes). There is no watcher or logging fan-out (`StartEventWatcher`,
//!   `StartLogging`): events are logged at `debug` as they are written.
//!
//! Against kube-runtime's `events::Recorder`, which writes from `publish` itself (one
//! request per event, so a series count is patched on every repeat and `publish` waits
//! for the server): here the caller never waits, repeats cost no request until a series
//! ends or is refreshed, and [`Recorder::publish_for`] puts the object's resourceVersion
//! in the reference (kube's `object_ref` leaves it out), so the key is client-go's (see
//! [above](#which-of-client-gos-recorders) for what that does to an object that changes).
//!
//! # RBAC
//!
//! `create` and `patch` on `events` in the `events.k8s.io` group (core group for
//! [`record`]), in every namespace events are recorded in (and `default`, for
//! cluster-scoped objects).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod broadcaster;
mod config;
mod error;
mod event;
pub mod record;
mod recorder;
mod reporter;
mod series;
mod sink;
mod task;
mod write;

pub use broadcaster::Broadcaster;
pub use config::Config;
pub use error::Error;
pub use event::get_reference;
/// What [`EventSink`]'s methods return (kinformer-core's, the one async idiom of the swap
/// points).
pub use kinformer_core::BoxFuture;
pub use recorder::Recorder;
pub use reporter::{EventType, Reporter};
pub use sink::{EventObject, EventSink, KubeSink};

/// The clock is kinformer-core's, shared with the workqueue and the leader elector: event
/// timestamps are its [`wall_now`](Clock::wall_now), the periodic checks and the retries
/// sleep on it.
pub use kinformer_core::clock::{Clock, FakeClock, RealClock, Sleep, TimeListener};
/// kinformer-core's forwarding macro for a [`Clock`] decorator.
pub use kinformer_core::forward_clock;
