//! A sink that behaves like the API server's events endpoint (create refuses a taken name,
//! patch refuses a missing one), records every call, and answers scripted faults; and a
//! harness around a broadcaster on a fake clock.

#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kinformer_events::{
    BoxFuture, Broadcaster, Config, Error, EventSink, FakeClock, Recorder, Reporter,
};
use tokio::sync::mpsc;

/// 2023-11-14T22:13:20Z: where every fake clock starts.
pub fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// Which call the sink got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Create,
    Patch,
}

/// One call to the sink: what it was given and what it answered.
#[derive(Clone, Debug)]
pub struct Call {
    pub verb: Verb,
    pub event: Event,
    /// The patch, parsed (patches only).
    pub patch: Option<serde_json::Value>,
    /// `Ok` or the error's `Display`.
    pub answer: Result<(), String>,
}

impl Call {
    pub fn count(&self) -> Option<i32> {
        self.event.series.as_ref().map(|s| s.count)
    }
}

/// What the sink does with the next call instead of answering normally.
#[derive(Clone, Debug)]
pub enum Fault {
    Transport,
    Api(u16, &'static str),
    Request,
    /// Never answers.
    Hang,
}

#[derive(Default)]
struct State {
    /// The "server": events by namespace/name.
    stored: HashMap<String, Event>,
    /// Faults for the next calls, in order.
    faults: VecDeque<Fault>,
    /// A fault for every call once the scripted ones are used up.
    always: Option<Fault>,
}

#[derive(Clone)]
pub struct FakeSink {
    state: Arc<Mutex<State>>,
    calls: mpsc::UnboundedSender<Call>,
}

impl FakeSink {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Call>) {
        let (calls, rx) = mpsc::unbounded_channel();
        (
            Self {
                state: Arc::default(),
                calls,
            },
            rx,
        )
    }

    /// The next calls answer these faults, in order.
    pub fn fail_next(&self, faults: impl IntoIterator<Item = Fault>) {
        self.state.lock().unwrap().faults.extend(faults);
    }

    /// Every call (after the scripted ones) answers `fault`; `None` stops that.
    pub fn fail_always(&self, fault: Option<Fault>) {
        self.state.lock().unwrap().always = fault;
    }

    /// Deletes every stored event, as if they expired on the server.
    pub fn delete_all(&self) {
        self.state.lock().unwrap().stored.clear();
    }

    pub fn stored(&self) -> Vec<Event> {
        self.state
            .lock()
            .unwrap()
            .stored
            .values()
            .cloned()
            .collect()
    }

    async fn answer(
        &self,
        verb: Verb,
        event: &Event,
        patch: Option<&[u8]>,
    ) -> Result<Event, Error> {
        let fault = {
            let mut state = self.state.lock().unwrap();
            state.faults.pop_front().or_else(|| state.always.clone())
        };
        let key = format!(
            "{}/{}",
            event.metadata.namespace.as_deref().unwrap_or_default(),
            event.metadata.name.as_deref().unwrap_or_default()
        );
        let result = match fault {
            Some(Fault::Hang) => {
                self.record(verb, event, patch, Ok(()));
                return std::future::pending().await;
            }
            Some(Fault::Transport) => Err(Error::Transport("connection refused".into())),
            Some(Fault::Request) => Err(Error::Request("bad request".into())),
            Some(Fault::Api(code, reason)) => Err(api(code, reason)),
            None => {
                let mut state = self.state.lock().unwrap();
                match verb {
                    Verb::Create if state.stored.contains_key(&key) => {
                        Err(api(409, "AlreadyExists"))
                    }
                    Verb::Create => {
                        state.stored.insert(key, event.clone());
                        Ok(event.clone())
                    }
                    Verb::Patch => match state.stored.get_mut(&key) {
                        None => Err(api(404, "NotFound")),
                        Some(stored) => {
                            stored.series = event.series.clone();
                            Ok(stored.clone())
                        }
                    },
                }
            }
        };
        self.record(
            verb,
            event,
            patch,
            result.as_ref().map(|_| ()).map_err(ToString::to_string),
        );
        result
    }

    fn record(&self, verb: Verb, event: &Event, patch: Option<&[u8]>, answer: Result<(), String>) {
        let _ = self.calls.send(Call {
            verb,
            event: event.clone(),
            patch: patch.map(|p| serde_json::from_slice(p).unwrap()),
            answer,
        });
    }
}

fn api(code: u16, reason: &str) -> Error {
    Error::Api {
        code,
        reason: reason.to_owned(),
        message: String::new(),
    }
}

impl EventSink for FakeSink {
    fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<Event, Error>> {
        Box::pin(async move { self.answer(Verb::Create, event, None).await })
    }

    fn patch<'a>(
        &'a self,
        event: &'a Event,
        patch: &'a [u8],
    ) -> BoxFuture<'a, Result<Event, Error>> {
        Box::pin(async move { self.answer(Verb::Patch, event, Some(patch)).await })
    }
}

/// A broadcaster on a fake clock writing to a [`FakeSink`], and a recorder.
pub struct Harness {
    pub clock: FakeClock,
    pub sink: FakeSink,
    pub broadcaster: Broadcaster,
    pub recorder: Recorder,
    calls: mpsc::UnboundedReceiver<Call>,
}

pub const CONTROLLER: &str = "example.com/widget-controller";
pub const INSTANCE: &str = "widget-controller-0";

impl Harness {
    pub fn new() -> Self {
        Self::with_config(|config| config)
    }

    pub fn with_config(configure: impl FnOnce(Config) -> Config) -> Self {
        let clock = FakeClock::starting_at_wall(start());
        let (sink, calls) = FakeSink::new();
        let broadcaster =
            Broadcaster::with_sink(sink.clone(), configure(Config::new().clock(clock.clone())))
                .unwrap();
        let recorder = broadcaster.recorder(Reporter::with_instance(CONTROLLER, INSTANCE));
        Self {
            clock,
            sink,
            broadcaster,
            recorder,
            calls,
        }
    }

    /// Waits for the broadcaster to handle everything so far, then returns the calls made
    /// since the last look. Fails after 5 s of real time (a write sleeping before a retry
    /// on the fake clock would never end).
    pub async fn settle(&mut self) -> Vec<Call> {
        tokio::time::timeout(Duration::from_secs(5), self.broadcaster.flush())
            .await
            .expect("flush returns within 5 s: no write left sleeping before a retry")
            .unwrap();
        self.drain()
    }

    /// The calls made since the last look, without waiting.
    pub fn drain(&mut self) -> Vec<Call> {
        let mut calls = Vec::new();
        while let Ok(call) = self.calls.try_recv() {
            calls.push(call);
        }
        calls
    }

    /// The next call, waiting for it (at most 5 s of real time).
    pub async fn next_call(&mut self) -> Call {
        tokio::time::timeout(Duration::from_secs(5), self.calls.recv())
            .await
            .expect("a call to the sink within 5 s")
            .expect("the sink is alive")
    }

    /// `None` if no call comes within `wait` of real time.
    pub async fn call_within(&mut self, wait: Duration) -> Option<Call> {
        tokio::time::timeout(wait, self.calls.recv())
            .await
            .ok()
            .flatten()
    }

    pub fn step(&self, by: Duration) {
        self.clock.step(by);
    }
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub fn mins(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

/// A reference to the pod `name` in `default`, as client-go's `GetReference` makes it.
pub fn pod(name: &str) -> ObjectReference {
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
