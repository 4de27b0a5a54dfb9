//! client-go's other recorder, `tools/record`: core/v1 Events as most client-go
//! controllers write them, through the `EventCorrelator`.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_events::EventType;
//! use kinformer_events::record::{Broadcaster, Config, Source};
//! use kube::Api;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! // record.NewBroadcaster() + StartRecordingToSink(&EventSinkImpl{...})
//! let broadcaster = Broadcaster::new(client.clone(), Config::default())?;
//! // broadcaster.NewRecorder(scheme, v1.EventSource{Component: "widget-controller"})
//! let recorder = broadcaster.recorder(Source::new("widget-controller"));
//!
//! let pod = Api::<Pod>::namespaced(client, "default").get("web-0").await?;
//! // recorder.Eventf(pod, v1.EventTypeNormal, "Scaled", "scaled to %d replicas", 3)
//! let _ = recorder.event_for(&pod, EventType::Normal, "Scaled", &format!("scaled to {} replicas", 3));
//!
//! broadcaster.shutdown().await; // on the way out: writes what is queued
//! # Ok(())
//! # }
//! ```
//!
//! The same on a [`FakeClock`](crate::FakeClock), with a sink of your own in place of the
//! API server ([`EventSink`] for core/v1 Events; [`KubeSink`] is the default): three
//! identical events are one Event and two count patches, and the tenth distinct message
//! about one object and reason is aggregated.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use k8s_openapi::api::core::v1::{Event, ObjectReference};
//! use kinformer_events::record::{Broadcaster, Config, Source};
//! use kinformer_events::{BoxFuture, Error, EventSink, EventType, FakeClock};
//!
//! #[derive(Clone, Default)]
//! struct Log(Arc<Mutex<Vec<String>>>);
//!
//! impl EventSink<Event> for Log {
//!     fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<Event, Error>> {
//!         let message = event.message.clone().unwrap_or_default();
//!         self.0.lock().unwrap().push(format!("create {message}"));
//!         Box::pin(std::future::ready(Ok(event.clone())))
//!     }
//!     fn patch<'a>(&'a self, event: &'a Event, _: &'a [u8]) -> BoxFuture<'a, Result<Event, Error>> {
//!         let count = event.count.unwrap_or_default();
//!         self.0.lock().unwrap().push(format!("patch count {count}"));
//!         Box::pin(std::future::ready(Ok(event.clone())))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! let log = Log::default();
//! let broadcaster = Broadcaster::with_sink(log.clone(), Config::new().clock(FakeClock::new()))?;
//! let recorder = broadcaster.recorder(Source::new("widget-controller"));
//! let pod = ObjectReference {
//!     api_version: Some("v1".into()),
//!     kind: Some("Pod".into()),
//!     namespace: Some("default".into()),
//!     name: Some("web-0".into()),
//!     ..ObjectReference::default()
//! };
//!
//! for _ in 0..3 {
//!     recorder.event(&pod, EventType::Warning, "BackOff", "restarting")?;
//! }
//! for i in 1..=10 {
//!     recorder.event(&pod, EventType::Normal, "Progress", &format!("step {i}"))?;
//! }
//! broadcaster.flush().await?;
//! let log = log.0.lock().unwrap();
//! assert_eq!(log[..3], ["create restarting", "patch count 2", "patch count 3"]);
//! assert_eq!(log[3..12].len(), 9, "step 1 to step 9, one Event each");
//! assert_eq!(log[12], "create (combined from similar events): step 10");
//! # Ok(())
//! # }
//! ```
//!
//! # What is written
//!
//! [`Recorder::event_for`] makes the reference client-go's `GetReference` makes
//! (apiVersion, kind, namespace, name, uid, resourceVersion) and builds the Event as
//! client-go's `makeEvent`: named `<object name>.<publish time in Unix nanoseconds, hex>`
//! (a random UUID when that is no valid name), in the object's namespace (`default` for a
//! cluster-scoped object), `count: 1`, `firstTimestamp` and `lastTimestamp` the publish
//! time, `source` the recorder's [`Source`], `reportingComponent` its component and
//! `reportingInstance` its host. There is no action and no related object: core/v1 Events
//! have none (`events.k8s.io/v1`'s [`Recorder`](crate::Recorder) has both).
//!
//! Then the correlator, in publish order, on the [`Clock`]:
//!
//! 1. **Aggregation.** Events about one object from one source with the same type and
//!    reason but different messages are similar. When a group has had 10 distinct
//!    messages, each less than 10 minutes after the group's previous event, the event is
//!    replaced by the group's aggregate: an Event whose message is
//!    `(combined from similar events): <the latest message>`, counted like any other (the
//!    first creates it, each next one patches its count and message).
//! 2. **Counting.** An event identical to one written before (same source, object with
//!    its fieldPath, type, reason and message) is not written anew: the Event written
//!    then is patched with `count + 1`, the new `lastTimestamp` and the message. A patch
//!    that finds the Event gone (`404`: deleted, or expired after the server's TTL)
//!    creates it again, with the count.
//! 3. **Spam filter.** Each source and object (whatever the reason) has a token bucket of
//!    25 events, refilled by one every 5 minutes; an event that finds it empty is dropped
//!    (logged at `debug`). It was counted first, as in client-go: the next repeat that
//!    gets through writes the count including the dropped ones.
//!
//! The resourceVersion of the object is written in `involvedObject` (as `GetReference`
//! puts it there) but is part of none of these keys: every version of an object is the
//! same object, so a controller reporting the same thing about an object that changed
//! meanwhile raises one Event's count, never writes a new Event per version. (The
//! `events.k8s.io/v1` recorder of `tools/events` does the opposite; see the
//! [crate docs](crate#which-of-client-gos-recorders).)
//!
//! Each of the three keeps at most 4096 entries (client-go's LRU caches), forgetting the
//! least recently used. All of these are settings of [`Config`], with client-go's values
//! as defaults.
//!
//! # Writes, failures, shutdown
//!
//! [`Recorder::event`] only builds the event and puts it on a bounded queue (1000, as
//! client-go): it never waits, and a full queue drops the event with [`Error::QueueFull`].
//! One task correlates and writes the events one at a time, in order, as client-go's
//! watcher goroutine does: a count patch always finds the Event its first occurrence
//! created. A write failing in its transport is tried again up to 12 times, the first
//! retry after a random part of 10 s, the next ones 10 s apart (client-go's), while the
//! events behind it wait in the queue; a refusal by the server (invalid, forbidden,
//! `AlreadyExists`...) is logged and dropped. [`Broadcaster::shutdown`] ends those sleeps,
//! writes every event queued before it (each tried once) and returns when they are
//! written; [`Broadcaster::flush`] waits for the same without shutting down.
//!
//! # Differences from client-go
//!
//! - **Shutdown.** client-go's `Shutdown` drops what its queue still holds; here it is
//!   written.
//! - **One clock.** client-go's recorder reads a clock field and its correlator another
//!   (both the real clock in practice); here both are the [`Clock`] of the
//!   [`Config`], so a [`FakeClock`](crate::FakeClock) drives the aggregation window and
//!   the spam filter's refill.
//! - **Keys.** client-go joins the fields of each key into one string with no separator
//!   (so two different events can share a key); here they are kept apart. Which message
//!   an aggregate group forgets when it is full (client-go's `PopAny` of a Go map, at
//!   random) is also unspecified here, but not random.
//! - **API shape.** `Eventf`'s format string and arguments are Rust's `format!`, done by
//!   the caller; the event type is an enum. There is no `Update` in the sink (client-go's
//!   `tools/record` never calls it), no watcher or logging fan-out (`StartEventWatcher`,
//!   `StartLogging`): events are logged at `debug` as they are written. A shutting-down
//!   namespace's refusal is logged as an error (client-go logs it at a debug level).
//!
//! # RBAC
//!
//! `create` and `patch` on `events` in the core group, in every namespace events are
//! recorded in (and `default`, for cluster-scoped objects).

mod correlator;
mod lru;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kinformer_compact_store::KubeObject;
use kube::Resource;
use tokio::sync::mpsc;

use crate::event::get_reference;
use crate::task::{self, Command, Handle, Settings};
use crate::write::RetryPolicy;
use crate::{Clock, Error, EventSink, EventType, KubeSink, RealClock};
use correlator::{EventCorrelator, make_event};

/// Who records the events: an Event's `source` (client-go's `v1.EventSource`), and its
/// `reportingComponent` and `reportingInstance`, which client-go's recorder copies from
/// it.
///
/// ```
/// use kinformer_events::record::Source;
///
/// // As most controllers name themselves: a component and no host.
/// let source = Source::new("widget-controller");
/// assert_eq!((source.component(), source.host()), ("widget-controller", ""));
/// let source = Source::with_host("kubelet", "node-a");
/// assert_eq!(source.host(), "node-a");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Source {
    component: String,
    host: String,
}

impl Source {
    /// A source with a component and no host, as client-go controllers usually make it
    /// (`v1.EventSource{Component: "..."}`): `reportingInstance` is then left out.
    pub fn new(component: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            host: String::new(),
        }
    }

    /// A source with a host too, the node name for a kubelet, say.
    pub fn with_host(component: impl Into<String>, host: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            host: host.into(),
        }
    }

    /// The component (`source.component`, `reportingComponent`).
    pub fn component(&self) -> &str {
        &self.component
    }

    /// The host (`source.host`, `reportingInstance`), empty when not set.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// How a [`record::Broadcaster`](Broadcaster) runs: client-go's `CorrelatorOptions` and
/// constants, with client-go's defaults.
///
/// ```
/// use std::time::Duration;
/// use kinformer_events::FakeClock;
/// use kinformer_events::record::Config;
///
/// let config = Config::new().spam_burst(5).max_interval(Duration::from_secs(60)).clock(FakeClock::new());
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) queue_capacity: usize,
    pub(crate) cache_size: usize,
    pub(crate) spam_burst: usize,
    pub(crate) spam_qps: f64,
    pub(crate) max_events: usize,
    pub(crate) max_interval: Duration,
    pub(crate) retry_sleep: Duration,
    pub(crate) max_tries: u32,
    pub(crate) clock: Arc<dyn Clock>,
}

impl Config {
    /// client-go's settings and the real clock.
    pub fn new() -> Self {
        Self {
            // client-go's maxQueuedEvents.
            queue_capacity: 1000,
            // maxLruCacheEntries.
            cache_size: 4096,
            // defaultSpamBurst, defaultSpamQPS.
            spam_burst: 25,
            spam_qps: 1.0 / 300.0,
            // defaultAggregateMaxEvents, defaultAggregateIntervalInSeconds.
            max_events: 10,
            max_interval: Duration::from_secs(600),
            // defaultSleepDuration, maxTriesPerEvent.
            retry_sleep: Duration::from_secs(10),
            max_tries: 12,
            clock: Arc::new(RealClock),
        }
    }

    /// How many published events may wait for the task (at least 1); past that,
    /// [`Recorder::event`] drops the event and answers
    /// [`Error::QueueFull`]. Default 1000.
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity.max(1);
        self
    }

    /// How many entries each of the aggregator, the logger and the spam filter keeps (at
    /// least 1), forgetting the least recently used. Default 4096 (client-go's
    /// `LRUCacheSize`).
    pub fn cache_size(mut self, size: usize) -> Self {
        self.cache_size = size.max(1);
        self
    }

    /// How many events one source may record about one object before the spam filter
    /// drops them. Default 25 (client-go's `BurstSize`).
    pub fn spam_burst(mut self, burst: usize) -> Self {
        self.spam_burst = burst;
        self
    }

    /// How fast the spam filter gives an object's events back, per second. Default
    /// 1/300: one every 5 minutes (client-go's `QPS`).
    pub fn spam_qps(mut self, qps: f64) -> Self {
        self.spam_qps = qps.max(0.0);
        self
    }

    /// How many distinct messages in one group of similar events make the next one an
    /// aggregate (at least 1). Default 10 (client-go's `MaxEvents`).
    pub fn max_events(mut self, max: usize) -> Self {
        self.max_events = max.max(1);
        self
    }

    /// How long after a group's last event a similar one starts the group again. Default
    /// 10 minutes (client-go's `MaxIntervalInSeconds`).
    pub fn max_interval(mut self, interval: Duration) -> Self {
        self.max_interval = interval;
        self
    }

    /// The sleep between tries of a failed write (the first retry sleeps a random part
    /// of it). Default 10 s.
    pub fn retry_sleep(mut self, sleep: Duration) -> Self {
        self.retry_sleep = sleep;
        self
    }

    /// How many times a write is tried before it is given up (at least 1). Default 12.
    pub fn max_tries(mut self, tries: u32) -> Self {
        self.max_tries = tries.max(1);
        self
    }

    /// Reads time and sleeps on `clock` (a [`FakeClock`](crate::FakeClock) in tests).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("queue_capacity", &self.queue_capacity)
            .field("cache_size", &self.cache_size)
            .field("spam_burst", &self.spam_burst)
            .field("spam_qps", &self.spam_qps)
            .field("max_events", &self.max_events)
            .field("max_interval", &self.max_interval)
            .field("retry_sleep", &self.retry_sleep)
            .field("max_tries", &self.max_tries)
            .field("clock", &self.clock)
            .finish()
    }
}

/// Receives core/v1 events from [`Recorder`]s, correlates them and writes them from a
/// background task: client-go's `tools/record` `EventBroadcaster` after
/// `StartRecordingToSink`.
///
/// One broadcaster serves any number of recorders (one per source) through one
/// correlator. Its task ends after [`Broadcaster::shutdown`], or once this handle and
/// every recorder are dropped. See the [module docs](self).
#[derive(Debug)]
pub struct Broadcaster {
    handle: Handle<Event>,
    clock: Arc<dyn Clock>,
}

impl Broadcaster {
    /// A broadcaster writing through `client` to the core group's `events`.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn new(client: kube::Client, config: Config) -> Result<Self, Error> {
        Self::with_sink(KubeSink::new(client), config)
    }

    /// A broadcaster writing to `sink`.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn with_sink<S: EventSink<Event>>(sink: S, config: Config) -> Result<Self, Error> {
        let clock = Arc::clone(&config.clock);
        let settings = Settings {
            queue_capacity: config.queue_capacity,
            // Writes go one at a time in the task.
            max_writes_in_flight: 1,
            retry: RetryPolicy {
                sleep: config.retry_sleep,
                max_tries: config.max_tries,
                events_k8s_io: false,
            },
            clock: Arc::clone(&config.clock),
        };
        let handle = task::spawn(sink, EventCorrelator::new(&config), settings)?;
        Ok(Self { handle, clock })
    }

    /// A recorder publishing as `source` through this broadcaster (client-go's
    /// `NewRecorder(scheme, source)`).
    pub fn recorder(&self, source: Source) -> Recorder {
        Recorder {
            tx: self.handle.sender(),
            clock: Arc::clone(&self.clock),
            source: Arc::new(source),
        }
    }

    /// Waits until every event published before this call has been correlated and
    /// written (stored, given up, or out of tries). With a sink that keeps failing, this
    /// waits through the retries.
    ///
    /// # Errors
    /// [`Error::ShutDown`] if the broadcaster has shut down.
    pub async fn flush(&self) -> Result<(), Error> {
        self.handle.flush().await
    }

    /// Stops taking events (recorders then answer [`Error::ShutDown`]), ends the sleep
    /// before a retry, writes every event queued before it (each tried once), and returns
    /// once they are written. With a sink that may hang, put a timeout around it.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

/// Records core/v1 events as one [`Source`]: client-go's `tools/record` `EventRecorder`.
/// Cheap to clone; every clone feeds the same [`Broadcaster`].
///
/// Recording never waits for the API server: the event goes on the broadcaster's bounded
/// queue, and a full queue or a broadcaster that shut down drops it with an error the
/// caller may ignore.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Command<Event>>,
    clock: Arc<dyn Clock>,
    source: Arc<Source>,
}

impl Recorder {
    /// A recorder with a broadcaster of its own (default [`Config`]), writing through
    /// `client`; the broadcaster's task ends when the last clone of this recorder is
    /// dropped. To flush and shut down, make a [`Broadcaster`] and ask it for recorders.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn new(client: kube::Client, source: Source) -> Result<Self, Error> {
        Ok(Broadcaster::new(client, Config::default())?.recorder(source))
    }

    /// Who this recorder records as.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Records an event about `object` (client-go's `Event(object, eventtype, reason,
    /// message)`, `Eventf` with the message already formatted), through the reference
    /// client-go's `GetReference` makes: apiVersion, kind, namespace, name, uid and
    /// resourceVersion.
    ///
    /// `reason` should be short, unique and in UpperCamelCase; `message` is for humans.
    ///
    /// # Errors
    /// [`Error::QueueFull`] or [`Error::ShutDown`]: the event was dropped. Neither is a
    /// reason to fail a reconcile; log it or ignore it.
    pub fn event_for<K>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), Error>
    where
        K: KubeObject,
        K::Kind: Resource<DynamicType = ()>,
    {
        self.event(&get_reference(object), type_, reason, message)
    }

    /// Records an event about the object `reference` names (client-go's `Event` given an
    /// `*v1.ObjectReference`, which it uses as it is).
    ///
    /// # Errors
    /// As [`event_for`](Recorder::event_for).
    pub fn event(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), Error> {
        self.record(reference, None, type_, reason, message)
    }

    /// [`event`](Recorder::event) with annotations on the Event (client-go's
    /// `AnnotatedEventf`).
    ///
    /// # Errors
    /// As [`event_for`](Recorder::event_for).
    pub fn annotated_event(
        &self,
        reference: &ObjectReference,
        annotations: BTreeMap<String, String>,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), Error> {
        self.record(reference, Some(annotations), type_, reason, message)
    }

    fn record(
        &self,
        reference: &ObjectReference,
        annotations: Option<BTreeMap<String, String>>,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), Error> {
        let now = self.clock.wall_now();
        let event = make_event(
            &self.source,
            reference,
            annotations,
            type_,
            reason,
            message,
            now,
        );
        task::publish(&self.tx, event, now)
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}
