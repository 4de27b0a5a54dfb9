//! End-to-end on the real API server (kinformer-testenv): the recorder against client-go's
//! for the same sequence of events, and a series patch that finds its event deleted.
//! Run with `cargo xtask test`, or `cargo test -p kinformer-events -- --include-ignored`
//! once `cargo xtask controlplane build` has built the control plane and `events-peer`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_events::{
    BoxFuture, Broadcaster, Config, Error, EventObject, EventSink, EventType, KubeSink, Reporter,
};
use kinformer_testenv::{ControlPlane, eventually_async};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Sequence {
    controller: String,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    regarding: String,
    #[serde(default)]
    related: Option<String>,
    #[serde(rename = "type")]
    type_: String,
    reason: String,
    action: String,
    note: String,
    pause_ms: u64,
}

pub(crate) fn sequence_path(name: &str) -> PathBuf {
    // At run time: a binary built from another clone sharing the target dir has that
    // clone's dir compiled in.
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from)
        .join("tests")
        .join("sequences")
        .join(name)
}

pub(crate) fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "kinformer_events=debug".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A namespace holding the sequence's objects: the config maps `alpha` and `beta`.
pub(crate) async fn scene(cp: &ControlPlane, prefix: &str) -> String {
    let ns = cp.create_namespace(prefix).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), &ns);
    for name in ["alpha", "beta"] {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    ns
}

/// [`KubeSink`], counting calls as the Go peer counts client-go's.
pub(crate) struct Counting {
    inner: KubeSink,
    create: AtomicUsize,
    patch: AtomicUsize,
    failed: AtomicUsize,
}

impl Counting {
    pub(crate) fn new(client: Client) -> Arc<Self> {
        Arc::new(Self {
            inner: KubeSink::new(client),
            create: AtomicUsize::new(0),
            patch: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
        })
    }

    fn note<T>(&self, result: &Result<T, Error>) {
        if result.is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The calls, as the Go peer prints them.
    pub(crate) fn calls(&self) -> Value {
        json!({
            "create": self.create.load(Ordering::Relaxed),
            "patch": self.patch.load(Ordering::Relaxed),
            "failed": self.failed.load(Ordering::Relaxed),
        })
    }
}

impl<E: EventObject> EventSink<E> for Counting {
    fn create<'a>(&'a self, event: &'a E) -> BoxFuture<'a, Result<E, Error>> {
        Box::pin(async move {
            self.create.fetch_add(1, Ordering::Relaxed);
            let result = self.inner.create(event).await;
            self.note(&result);
            result
        })
    }

    fn patch<'a>(&'a self, event: &'a E, patch: &'a [u8]) -> BoxFuture<'a, Result<E, Error>> {
        Box::pin(async move {
            self.patch.fetch_add(1, Ordering::Relaxed);
            let result = self.inner.patch(event, patch).await;
            self.note(&result);
            result
        })
    }
}

/// Feeds the sequence to kinformer-events, as the Go peer feeds it to client-go, flushes,
/// and returns the broadcaster (not shut down) and the sink.
async fn replay_in_rust(client: Client, ns: &str, seq: &Sequence) -> (Broadcaster, Arc<Counting>) {
    let sink = Counting::new(client.clone());
    let broadcaster = Broadcaster::with_sink(Arc::clone(&sink), Config::default()).unwrap();
    let recorder = broadcaster.recorder(Reporter::new(&seq.controller));
    let mut objects: BTreeMap<String, ObjectReference> = BTreeMap::new();
    for step in &seq.steps {
        for id in std::iter::once(&step.regarding).chain(step.related.as_ref()) {
            if !objects.contains_key(id) {
                let reference = reference(&client, ns, id).await;
                objects.insert(id.clone(), reference);
            }
        }
        let type_ = match step.type_.as_str() {
            "Warning" => EventType::Warning,
            _ => EventType::Normal,
        };
        recorder
            .publish(
                &objects[&step.regarding],
                step.related.as_ref().map(|id| &objects[id]),
                type_,
                &step.reason,
                &step.action,
                &step.note,
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(step.pause_ms)).await;
    }
    broadcaster.flush().await.unwrap();
    (broadcaster, sink)
}

/// The reference client-go's `GetReference` makes for an object fetched from the server:
/// apiVersion, kind, namespace, name, uid, resourceVersion.
async fn reference(client: &Client, ns: &str, id: &str) -> ObjectReference {
    fn of<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
        let mut r = object.object_ref(&());
        r.resource_version = object.meta().resource_version.clone();
        r
    }
    if id == "namespace" {
        of(&Api::<Namespace>::all(client.clone()).get(ns).await.unwrap())
    } else {
        let name = id
            .strip_prefix("configmap/")
            .expect("configmap/NAME or namespace");
        of(&Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .unwrap())
    }
}

/// Runs client-go's side: `events-peer` on the same sequence in `ns`, with `args` more.
pub(crate) fn replay_in_go(cp: &ControlPlane, ns: &str, sequence: &Path, args: &[&str]) -> Value {
    let peer = kinformer_testenv::binary_dir().join("events-peer");
    assert!(
        peer.is_file(),
        "{} is missing: run `cargo xtask controlplane build`",
        peer.display()
    );
    let out = std::process::Command::new(&peer)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .args(["--namespace", ns])
        .arg("--sequence")
        .arg(sequence)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "events-peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The events one side wrote: those in its namespace, and those in `default` about it.
async fn events_of(client: &Client, ns: &str) -> Vec<Event> {
    let mut events = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    events.extend(
        Api::<Event>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(ns)),
    );
    events
}

/// One event with what must differ between the two sides taken out: the side's namespace
/// becomes `NS`, the name's time suffix goes, uids, resourceVersions and times become
/// whether they are set, the server's own metadata goes.
fn normalize(event: &Event, ns: &str) -> Value {
    let mut v = serde_json::to_value(event).unwrap();
    let name = event.metadata.name.clone().unwrap_or_default();
    let (prefix, suffix) = name.rsplit_once('.').unwrap_or((&name, ""));
    assert!(
        !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_hexdigit()),
        "named <object>.<hex time>: {name}"
    );
    v["metadata"] = json!({
        "name": format!("{prefix}.<time>"),
        "namespace": event.metadata.namespace,
    });
    let set = |v: &mut Value, field: &str| {
        if let Some(x) = v.get_mut(field) {
            *x = json!("<set>");
        }
    };
    set(&mut v, "eventTime");
    if let Some(series) = v.get_mut("series") {
        set(series, "lastObservedTime");
    }
    for side in ["regarding", "related"] {
        if let Some(r) = v.get_mut(side) {
            set(r, "uid");
            set(r, "resourceVersion");
        }
    }
    serde_json::from_str(&serde_json::to_string(&v).unwrap().replace(ns, "NS")).unwrap()
}

/// The normalized events of one side, sorted; and their (reason, action, type, object)
/// in the order of their `eventTime`.
fn summarize(events: &[Event], ns: &str) -> (Vec<Value>, Vec<String>) {
    let mut normalized: Vec<Value> = events.iter().map(|e| normalize(e, ns)).collect();
    normalized.sort_by_key(|v| v.to_string());
    let mut by_time: Vec<&Event> = events.iter().collect();
    by_time.sort_by_key(|e| e.event_time.clone());
    let order = by_time
        .iter()
        .map(|e| {
            let object = e.regarding.as_ref().and_then(|r| r.kind.clone());
            format!(
                "{:?} {:?} {:?} {:?} related={}",
                e.reason,
                e.action,
                e.type_,
                object,
                e.related.is_some()
            )
        })
        .collect();
    for e in events {
        if let Some(series) = &e.series {
            assert!(
                Some(&series.last_observed_time) > e.event_time.as_ref(),
                "a series is observed after its event"
            );
        }
    }
    (normalized, order)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn events_equal_client_gos_for_the_same_sequence() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().unwrap();
    let path = sequence_path("basic.json");
    let seq: Sequence = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let (go_ns, rust_ns) = (scene(cp, "events-go").await, scene(cp, "events-rs").await);

    let started = Instant::now();
    let go = {
        let (go_ns, path) = (go_ns.clone(), path.clone());
        tokio::task::spawn_blocking(move || replay_in_go(cp, &go_ns, &path, &[]))
    };
    let (broadcaster, sink) = replay_in_rust(client.clone(), &rust_ns, &seq).await;
    let rust_calls = sink.calls();
    let go_calls = go.await.unwrap();
    eprintln!("both sides done in {:?}", started.elapsed());

    assert_eq!(rust_calls, go_calls, "the same creates and patches");
    let (go_events, rust_events) = (
        events_of(&client, &go_ns).await,
        events_of(&client, &rust_ns).await,
    );
    let (go_events, go_order) = summarize(&go_events, &go_ns);
    let (rust_events, rust_order) = summarize(&rust_events, &rust_ns);
    assert_eq!(
        rust_events,
        go_events,
        "kinformer-events:\n{}\nclient-go:\n{}",
        serde_json::to_string_pretty(&rust_events).unwrap(),
        serde_json::to_string_pretty(&go_events).unwrap()
    );
    assert_eq!(rust_order, go_order, "the same order of eventTime");

    // What the sequence should come to on both sides, so that equal is not equally wrong.
    assert_eq!(go_calls, json!({"create": 8, "patch": 3, "failed": 1}));
    let series: Vec<i64> = rust_events
        .iter()
        .filter_map(|e| e["series"]["count"].as_i64())
        .collect();
    assert_eq!(
        series,
        [2, 2, 2],
        "alpha, beta and the namespace: {rust_events:#?}"
    );
    assert_eq!(rust_events.len(), 7);

    // Where this crate differs on purpose: client-go's shutdown leaves alpha's series at
    // the count of 2 it wrote; here the count it reached (6) is written on the way out.
    broadcaster.shutdown().await;
    assert_eq!(
        sink.calls()["patch"],
        json!(4),
        "one patch more at shutdown"
    );
    let alpha: Vec<Option<i32>> = events_of(&client, &rust_ns)
        .await
        .iter()
        .filter(|e| {
            e.note.as_deref() == Some("synced 1")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("alpha")
        })
        .map(|e| e.series.as_ref().map(|s| s.count))
        .collect();
    assert_eq!(alpha, [Some(6)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_finished_series_whose_event_was_deleted_is_created_again_with_its_count() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().unwrap();
    let ns = scene(cp, "events-gone").await;
    let alpha = reference(&client, &ns, "configmap/alpha").await;
    // client-go's 6 minutes, shortened: this crate lets the checks run sooner.
    let broadcaster = Broadcaster::new(
        client.clone(),
        Config::new().finish_time(Duration::from_secs(2)),
    )
    .unwrap();
    let recorder = broadcaster.recorder(Reporter::new("kinformer.dev/events-e2e"));
    let publish = || {
        recorder
            .publish(&alpha, None, EventType::Normal, "Synced", "Sync", "synced")
            .unwrap();
    };
    let events: Api<Event> = Api::namespaced(client, &ns);

    publish();
    tokio::time::sleep(Duration::from_millis(200)).await;
    publish();
    broadcaster.flush().await.unwrap();
    let written = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].series.as_ref().map(|s| s.count), Some(2));
    let name = written[0].metadata.name.clone().unwrap();

    events
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    publish(); // counted, not written
    // The check after the series has been quiet for 2 s patches, finds nothing (404),
    // and creates the event again with the series as counted.
    eventually_async(
        "the event to be created again",
        Duration::from_secs(15),
        || async { events.get(&name).await.is_ok() },
    )
    .await;
    let again = events.get(&name).await.unwrap();
    assert_eq!(again.series.as_ref().map(|s| s.count), Some(3));
    assert_eq!(again.note.as_deref(), Some("synced"));
    broadcaster.shutdown().await;
}
