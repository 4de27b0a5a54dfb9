//! The core/v1 recorder (`kinformer_events::record`) on a fake clock against a sink that
//! behaves like the API server's core/v1 events endpoint: client-go's `tools/record`
//! (`makeEvent`, the `EventCorrelator`, `recordToSink`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kinformer_events::record::{Broadcaster, Config, Recorder, Source};
use kinformer_events::{BoxFuture, Clock, Error, EventSink, EventType, FakeClock};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::common::{Verb, mins, secs, start};

const COMPONENT: &str = "widget-controller";
const QUIET: Duration = Duration::from_millis(100);

/// One call to the sink.
#[derive(Clone, Debug)]
struct Call {
    verb: Verb,
    event: Event,
    patch: Option<Value>,
    ok: bool,
}

#[derive(Default)]
struct State {
    stored: HashMap<String, Event>,
    /// Transport failures for the next calls.
    failures: VecDeque<()>,
}

/// Stores core/v1 events as the API server does (create refuses a taken name, a patch a
/// missing one, and applies `count`, `lastTimestamp` and `message`), recording each call.
#[derive(Clone)]
struct CoreSink {
    state: Arc<Mutex<State>>,
    calls: mpsc::UnboundedSender<Call>,
}

fn api(code: u16, reason: &str) -> Error {
    Error::Api {
        code,
        reason: reason.to_owned(),
        message: String::new(),
    }
}

fn key(event: &Event) -> String {
    format!(
        "{}/{}",
        event.metadata.namespace.as_deref().unwrap_or_default(),
        event.metadata.name.as_deref().unwrap_or_default()
    )
}

impl CoreSink {
    fn stored(&self) -> Vec<Event> {
        let mut events: Vec<Event> = self
            .state
            .lock()
            .unwrap()
            .stored
            .values()
            .cloned()
            .collect();
        events.sort_by_key(|e| e.metadata.name.clone());
        events
    }

    fn answer(&self, verb: Verb, event: &Event, patch: Option<&[u8]>) -> Result<Event, Error> {
        let mut state = self.state.lock().unwrap();
        let result = if state.failures.pop_front().is_some() {
            Err(Error::Transport("connection refused".into()))
        } else {
            match verb {
                Verb::Create if state.stored.contains_key(&key(event)) => {
                    Err(api(409, "AlreadyExists"))
                }
                Verb::Create => {
                    let mut stored = event.clone();
                    stored.metadata.resource_version = Some("1".into());
                    state.stored.insert(key(event), stored.clone());
                    Ok(stored)
                }
                Verb::Patch => match state.stored.get_mut(&key(event)) {
                    None => Err(api(404, "NotFound")),
                    Some(stored) => {
                        let patch: Value = serde_json::from_slice(patch.unwrap()).unwrap();
                        let mut v = serde_json::to_value(&*stored).unwrap();
                        for (field, value) in patch.as_object().unwrap() {
                            v[field] = value.clone();
                        }
                        *stored = serde_json::from_value(v).unwrap();
                        Ok(stored.clone())
                    }
                },
            }
        };
        let _ = self.calls.send(Call {
            verb,
            event: event.clone(),
            patch: patch.map(|p| serde_json::from_slice(p).unwrap()),
            ok: result.is_ok(),
        });
        result
    }
}

impl EventSink<Event> for CoreSink {
    fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<Event, Error>> {
        Box::pin(async move { self.answer(Verb::Create, event, None) })
    }

    fn patch<'a>(
        &'a self,
        event: &'a Event,
        patch: &'a [u8],
    ) -> BoxFuture<'a, Result<Event, Error>> {
        Box::pin(async move { self.answer(Verb::Patch, event, Some(patch)) })
    }
}

struct Harness {
    clock: FakeClock,
    sink: CoreSink,
    broadcaster: Broadcaster,
    recorder: Recorder,
    calls: mpsc::UnboundedReceiver<Call>,
}

impl Harness {
    fn new() -> Self {
        Self::with_config(|config| config)
    }

    fn with_config(configure: impl FnOnce(Config) -> Config) -> Self {
        let clock = FakeClock::starting_at_wall(start());
        let (tx, calls) = mpsc::unbounded_channel();
        let sink = CoreSink {
            state: Arc::default(),
            calls: tx,
        };
        let config = configure(Config::new().clock(clock.clone()));
        let broadcaster = Broadcaster::with_sink(sink.clone(), config).unwrap();
        let recorder = broadcaster.recorder(Source::new(COMPONENT));
        Self {
            clock,
            sink,
            broadcaster,
            recorder,
            calls,
        }
    }

    /// Waits until everything published so far is written, then returns the calls made
    /// since the last look.
    async fn settle(&mut self) -> Vec<Call> {
        tokio::time::timeout(Duration::from_secs(5), self.broadcaster.flush())
            .await
            .expect("flush returns within 5 s")
            .unwrap();
        let mut calls = Vec::new();
        while let Ok(call) = self.calls.try_recv() {
            calls.push(call);
        }
        calls
    }

    async fn next_call(&mut self) -> Call {
        tokio::time::timeout(Duration::from_secs(5), self.calls.recv())
            .await
            .expect("a call within 5 s")
            .unwrap()
    }

    fn event(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        self.recorder.event(object, type_, reason, message).unwrap();
    }
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some("default".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        resource_version: Some("1".into()),
        field_path: None,
    }
}

fn time(t: SystemTime) -> Time {
    Time(Timestamp::try_from(t).unwrap())
}

/// `t` as the API writes a `Time`: seconds.
fn written(t: SystemTime) -> Value {
    serde_json::to_value(time(t)).unwrap()
}

fn verbs(calls: &[Call]) -> Vec<(Verb, i32)> {
    calls
        .iter()
        .map(|c| (c.verb, c.event.count.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn an_event_is_made_as_client_gos_make_event_with_the_source_and_no_action() {
    let mut h = Harness::new();
    h.event(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    let calls = h.settle().await;
    assert_eq!(verbs(&calls), [(Verb::Create, 1)]);
    let event = &calls[0].event;
    // <object name>.<publish time in Unix nanoseconds, hex>
    let nanos = start().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    assert_eq!(
        event.metadata.name.as_deref(),
        Some(format!("web-0.{nanos:x}").as_str())
    );
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.involved_object, pod("web-0"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("BackOff"));
    assert_eq!(event.message.as_deref(), Some("restarting"));
    assert_eq!(event.count, Some(1));
    assert_eq!(event.first_timestamp, Some(time(start())));
    assert_eq!(event.last_timestamp, Some(time(start())));
    let source = event.source.as_ref().unwrap();
    assert_eq!(source.component.as_deref(), Some(COMPONENT));
    assert_eq!(source.host, None, "no host: left out, as Go's omitempty");
    assert_eq!(event.reporting_component.as_deref(), Some(COMPONENT));
    assert_eq!(event.reporting_instance, None);
    assert_eq!(
        (
            &event.action,
            &event.related,
            &event.event_time,
            &event.series
        ),
        (&None, &None, &None, &None)
    );

    // A host becomes the reporting instance.
    let recorder = h
        .broadcaster
        .recorder(Source::with_host("kubelet", "node-a"));
    recorder
        .event(&pod("web-1"), EventType::Normal, "Pulled", "pulled")
        .unwrap();
    let event = &h.settle().await[0].event;
    assert_eq!(
        event.source.as_ref().unwrap().host.as_deref(),
        Some("node-a")
    );
    assert_eq!(event.reporting_component.as_deref(), Some("kubelet"));
    assert_eq!(event.reporting_instance.as_deref(), Some("node-a"));
}

#[tokio::test]
async fn an_event_for_an_object_takes_get_references_fields_and_a_cluster_scoped_one_goes_to_default()
 {
    let mut h = Harness::new();
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            namespace: Some("apps".into()),
            uid: Some("u-1".into()),
            resource_version: Some("42".into()),
            generation: Some(3),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    h.recorder
        .event_for(&cm, EventType::Normal, "Synced", "ok")
        .unwrap();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("apps".into()),
            uid: Some("u-2".into()),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    h.recorder
        .event_for(&ns, EventType::Normal, "Synced", "ok")
        .unwrap();
    let calls = h.settle().await;
    let expected = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        namespace: Some("apps".into()),
        name: Some("settings".into()),
        uid: Some("u-1".into()),
        resource_version: Some("42".into()),
        field_path: None,
    };
    assert_eq!(calls[0].event.involved_object, expected);
    assert_eq!(calls[0].event.metadata.namespace.as_deref(), Some("apps"));
    assert_eq!(
        calls[1].event.involved_object.kind.as_deref(),
        Some("Namespace")
    );
    assert_eq!(calls[1].event.involved_object.namespace, None);
    assert_eq!(
        calls[1].event.metadata.namespace.as_deref(),
        Some("default")
    );
}

#[tokio::test]
async fn an_identical_event_patches_the_count_and_last_timestamp_of_the_first() {
    let mut h = Harness::new();
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    h.clock.step(secs(30));
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    h.clock.step(secs(30));
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    let calls = h.settle().await;
    assert_eq!(
        verbs(&calls),
        [(Verb::Create, 1), (Verb::Patch, 2), (Verb::Patch, 3)]
    );
    let name = calls[0].event.metadata.name.clone();
    for patch in &calls[1..] {
        assert_eq!(
            patch.event.metadata.name, name,
            "the first event is patched"
        );
        assert_eq!(patch.event.first_timestamp, Some(time(start())));
    }
    assert_eq!(
        calls[2].patch,
        Some(
            json!({"count": 3, "lastTimestamp": written(start() + secs(60)), "message": "pulled"})
        )
    );
    let stored = h.sink.stored();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].count, Some(3));
    assert_eq!(stored[0].first_timestamp, Some(time(start())));
    assert_eq!(stored[0].last_timestamp, Some(time(start() + secs(60))));

    // Another message, reason or type is another event.
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled again");
    h.event(&pod("web-0"), EventType::Normal, "Started", "pulled");
    h.event(&pod("web-0"), EventType::Warning, "Pulled", "pulled");
    assert_eq!(
        verbs(&h.settle().await),
        [(Verb::Create, 1), (Verb::Create, 1), (Verb::Create, 1)]
    );
}

#[tokio::test]
async fn every_version_of_an_object_counts_on_one_event() {
    let mut h = Harness::new();
    let mut object = pod("web-0");
    h.event(&object, EventType::Normal, "Synced", "synced");
    object.resource_version = Some("2".into());
    h.event(&object, EventType::Normal, "Synced", "synced");
    let calls = h.settle().await;
    assert_eq!(verbs(&calls), [(Verb::Create, 1), (Verb::Patch, 2)]);
    // The reference is written as GetReference made it for the first, and the count
    // patch leaves it alone.
    let stored = h.sink.stored();
    assert_eq!(
        stored[0].involved_object.resource_version.as_deref(),
        Some("1")
    );
    assert_eq!(
        calls[1]
            .patch
            .as_ref()
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["count", "lastTimestamp", "message"]
    );
}

#[tokio::test]
async fn an_empty_message_is_left_out_of_the_patch() {
    let mut h = Harness::new();
    h.event(&pod("web-0"), EventType::Normal, "Killing", "");
    h.event(&pod("web-0"), EventType::Normal, "Killing", "");
    let calls = h.settle().await;
    assert_eq!(calls[0].event.message, None);
    assert_eq!(
        calls[1].patch,
        Some(json!({"count": 2, "lastTimestamp": written(start())}))
    );
}

#[tokio::test]
async fn a_count_patch_that_finds_the_event_gone_creates_it_with_the_count() {
    let mut h = Harness::new();
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    h.settle().await;
    h.sink.state.lock().unwrap().stored.clear(); // expired on the server
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    let calls = h.settle().await;
    assert_eq!(verbs(&calls), [(Verb::Patch, 3), (Verb::Create, 3)]);
    assert!(!calls[0].ok && calls[1].ok);
    assert_eq!(
        calls[1].event.metadata.resource_version, None,
        "a create clears it"
    );
    assert_eq!(h.sink.stored()[0].count, Some(3));
}

#[tokio::test]
async fn ten_distinct_messages_within_ten_minutes_become_one_combined_event() {
    let mut h = Harness::new();
    for i in 1..=9 {
        h.event(
            &pod("web-0"),
            EventType::Warning,
            "FailedMount",
            &format!("volume {i}"),
        );
        h.clock.step(secs(60));
    }
    let calls = h.settle().await;
    assert_eq!(calls.len(), 9);
    assert!(
        calls
            .iter()
            .all(|c| c.verb == Verb::Create && c.event.count == Some(1))
    );

    // The tenth distinct message within 10 minutes of the previous one: aggregated.
    // (The correlator reads the clock when it takes the event, as client-go's does.)
    let tenth_at = h.clock.wall_now();
    h.event(
        &pod("web-0"),
        EventType::Warning,
        "FailedMount",
        "volume 10",
    );
    let mut calls = h.settle().await;
    h.clock.step(secs(1));
    h.event(
        &pod("web-0"),
        EventType::Warning,
        "FailedMount",
        "volume 11",
    );
    calls.extend(h.settle().await);
    assert_eq!(verbs(&calls), [(Verb::Create, 1), (Verb::Patch, 2)]);
    let combined = &calls[0].event;
    assert_eq!(
        combined.message.as_deref(),
        Some("(combined from similar events): volume 10")
    );
    let nanos = tenth_at.duration_since(UNIX_EPOCH).unwrap().as_nanos();
    assert_eq!(
        combined.metadata.name.as_deref(),
        Some(format!("web-0.{nanos:x}").as_str())
    );
    assert_eq!(combined.involved_object, pod("web-0"));
    assert_eq!(combined.reason.as_deref(), Some("FailedMount"));
    assert_eq!(
        combined.source.as_ref().unwrap().component.as_deref(),
        Some(COMPONENT)
    );
    // client-go's aggregate copies no reporting fields.
    assert_eq!(combined.reporting_component, None);
    assert_eq!(calls[1].event.metadata.name, combined.metadata.name);
    assert_eq!(
        calls[1].patch.as_ref().unwrap()["message"],
        "(combined from similar events): volume 11"
    );

    // Another reason is another group; more than 10 quiet minutes start the group again.
    h.event(
        &pod("web-0"),
        EventType::Warning,
        "FailedAttach",
        "volume 12",
    );
    h.clock.step(mins(10) + secs(1));
    h.event(
        &pod("web-0"),
        EventType::Warning,
        "FailedMount",
        "volume 13",
    );
    let calls = h.settle().await;
    let messages: Vec<_> = calls
        .iter()
        .map(|c| c.event.message.clone().unwrap())
        .collect();
    assert_eq!(messages, ["volume 12", "volume 13"]);
}

#[tokio::test]
async fn the_spam_filter_lets_25_through_per_object_then_one_every_5_minutes() {
    let mut h = Harness::new();
    // Twenty of one reason and ten of another: one bucket per source, object and type.
    for _ in 0..20 {
        h.event(&pod("web-0"), EventType::Warning, "BackOff", "back-off");
    }
    for _ in 0..10 {
        h.event(&pod("web-0"), EventType::Warning, "Failed", "failed");
    }
    let calls = h.settle().await;
    assert_eq!(calls.len(), 25, "five dropped");
    assert_eq!(calls.last().map(|c| c.event.count), Some(Some(5)));
    // Another object, or another type, has a bucket of its own.
    h.event(&pod("web-1"), EventType::Warning, "Failed", "failed");
    h.event(&pod("web-0"), EventType::Normal, "Failed", "failed");
    assert_eq!(h.settle().await.len(), 2);

    // Almost 5 minutes: still nothing.
    h.clock.step(secs(299));
    h.event(&pod("web-0"), EventType::Warning, "Failed", "failed");
    assert!(h.settle().await.is_empty());
    // One token back: the next repeat goes through, counting those dropped (client-go
    // counts before it filters): 10 + 1 published since the first Failed.
    h.clock.step(secs(1));
    h.event(&pod("web-0"), EventType::Warning, "Failed", "failed");
    h.event(&pod("web-0"), EventType::Warning, "Failed", "failed");
    let calls = h.settle().await;
    assert_eq!(verbs(&calls), [(Verb::Patch, 12)]);
}

#[tokio::test]
async fn the_correlator_settings_apply() {
    let mut h = Harness::with_config(|c| c.spam_burst(2).max_events(2));
    h.event(&pod("web-0"), EventType::Normal, "Scaled", "to 1");
    h.event(&pod("web-0"), EventType::Normal, "Scaled", "to 2");
    h.event(&pod("web-0"), EventType::Normal, "Scaled", "to 3");
    let calls = h.settle().await;
    let messages: Vec<_> = calls
        .iter()
        .map(|c| c.event.message.clone().unwrap())
        .collect();
    assert_eq!(messages, ["to 1", "(combined from similar events): to 2"]);
}

#[tokio::test]
async fn a_transport_failure_is_retried_within_the_sleep_and_holds_the_events_behind_it() {
    let mut h = Harness::new();
    h.sink.state.lock().unwrap().failures.push_back(());
    h.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    h.event(&pod("web-1"), EventType::Normal, "Pulled", "pulled");
    let first = h.next_call().await;
    assert!(!first.ok);
    assert!(
        tokio::time::timeout(QUIET, h.calls.recv()).await.is_err(),
        "in order: web-1 waits for web-0's retry"
    );
    // The first retry sleeps a random part of 10 s.
    h.clock.step(secs(10));
    let calls = h.settle().await;
    let names: Vec<_> = calls
        .iter()
        .map(|c| c.event.involved_object.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["web-0", "web-1"]);
    assert_eq!(h.sink.stored().len(), 2);
}

#[tokio::test]
async fn shutdown_ends_a_retry_sleep_and_writes_every_queued_event_once() {
    let mut h = Harness::new();
    h.sink.state.lock().unwrap().failures.extend([(), ()]);
    for name in ["a", "b", "c"] {
        h.event(&pod(name), EventType::Normal, "Pulled", "pulled");
    }
    h.next_call().await; // a failed; its retry sleeps on a clock that never moves
    let Harness {
        broadcaster,
        recorder,
        sink,
        mut calls,
        ..
    } = h;
    tokio::time::timeout(Duration::from_secs(5), broadcaster.shutdown())
        .await
        .expect("shutdown returns without the retry");
    let mut tried = Vec::new();
    while let Ok(call) = calls.try_recv() {
        tried.push((call.event.involved_object.name.unwrap(), call.ok));
    }
    // a is not tried again; b fails its one try; c is written.
    assert_eq!(tried, [("b".to_owned(), false), ("c".to_owned(), true)]);
    assert_eq!(sink.stored().len(), 1);
    assert!(matches!(
        recorder.event(&pod("d"), EventType::Normal, "Pulled", ""),
        Err(Error::ShutDown)
    ));
}

#[tokio::test]
async fn shutdown_writes_what_is_queued_without_a_flush() {
    let h = Harness::new();
    for i in 0..50 {
        h.event(
            &pod(&format!("web-{i}")),
            EventType::Normal,
            "Pulled",
            "pulled",
        );
    }
    let Harness {
        broadcaster, sink, ..
    } = h;
    broadcaster.shutdown().await;
    assert_eq!(
        sink.stored().len(),
        25 + 25,
        "50 objects, each its own bucket"
    );
}

#[tokio::test]
async fn a_full_queue_drops_the_event() {
    let h = Harness::with_config(|c| c.queue_capacity(1));
    // The task is not polled until the test yields: the second publish finds the queue full.
    h.event(&pod("a"), EventType::Normal, "Pulled", "");
    assert!(matches!(
        h.recorder.event(&pod("b"), EventType::Normal, "Pulled", ""),
        Err(Error::QueueFull)
    ));
}
