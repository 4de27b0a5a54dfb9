//! End-to-end on the real API server: the core/v1 recorder (`kinformer_events::record`)
//! against client-go's `tools/record` for the same sequence of events
//! (`tests/sequences/record.json`), through `events-peer --recorder record`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kinformer_events::EventType;
use kinformer_events::record::{Broadcaster, Config, Source};
use kinformer_testenv::ControlPlane;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::e2e::{Counting, init_tracing, replay_in_go, scene, sequence_path};

#[derive(Deserialize)]
struct Sequence {
    controller: String,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    regarding: String,
    #[serde(default)]
    touch: bool,
    #[serde(rename = "type")]
    type_: String,
    reason: String,
    message: String,
    #[serde(default)]
    repeat: usize,
    pause_ms: u64,
}

/// An object of the sequence, as last fetched.
enum Object {
    ConfigMap(ConfigMap),
    Namespace(Namespace),
}

async fn fetch(client: &Client, ns: &str, id: &str) -> Object {
    if id == "namespace" {
        Object::Namespace(Api::<Namespace>::all(client.clone()).get(ns).await.unwrap())
    } else {
        let name = id
            .strip_prefix("configmap/")
            .expect("configmap/NAME or namespace");
        Object::ConfigMap(
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .unwrap(),
        )
    }
}

/// Feeds the sequence to `record`, as the Go peer feeds it to client-go, shuts the
/// broadcaster down (which writes what is queued) and returns the sink's calls.
async fn replay_in_rust(client: Client, ns: &str, seq: &Sequence) -> Value {
    let sink = Counting::new(client.clone());
    let broadcaster = Broadcaster::with_sink(sink.clone(), Config::default()).unwrap();
    let recorder = broadcaster.recorder(Source::new(&seq.controller));
    let mut objects: BTreeMap<String, Object> = BTreeMap::new();
    for (i, step) in seq.steps.iter().enumerate() {
        if !objects.contains_key(&step.regarding) {
            let object = fetch(&client, ns, &step.regarding).await;
            objects.insert(step.regarding.clone(), object);
        }
        if step.touch {
            let Some(Object::ConfigMap(cm)) = objects.get(&step.regarding) else {
                panic!("only a configmap can be touched");
            };
            let mut cm = cm.clone();
            cm.data
                .get_or_insert_default()
                .insert("touched".into(), i.to_string());
            let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
            let name = cm.metadata.name.clone().unwrap();
            let updated = api
                .replace(&name, &PostParams::default(), &cm)
                .await
                .unwrap();
            objects.insert(step.regarding.clone(), Object::ConfigMap(updated));
        }
        let type_ = match step.type_.as_str() {
            "Warning" => EventType::Warning,
            _ => EventType::Normal,
        };
        for _ in 0..step.repeat.max(1) {
            let recorded = match &objects[&step.regarding] {
                Object::ConfigMap(cm) => recorder.event_for(cm, type_, &step.reason, &step.message),
                Object::Namespace(n) => recorder.event_for(n, type_, &step.reason, &step.message),
            };
            recorded.unwrap();
            tokio::time::sleep(Duration::from_millis(step.pause_ms)).await;
        }
    }
    // No flush first: the shutdown writes what is queued.
    broadcaster.shutdown().await;
    sink.calls()
}

/// The core/v1 events one side wrote: those in its namespace, and those in `default` about
/// it.
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
            .filter(|e| e.involved_object.name.as_deref() == Some(ns)),
    );
    events
}

/// One event with what must differ between the two sides taken out: the side's namespace
/// becomes `NS`, the name's time suffix goes, the involved object's uid and
/// resourceVersion and the timestamps become whether they are set, the server's own
/// metadata goes.
fn normalize(event: &Event, ns: &str) -> Value {
    let name = event.metadata.name.clone().unwrap_or_default();
    let (prefix, suffix) = name.rsplit_once('.').unwrap_or((&name, ""));
    assert!(
        !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_hexdigit()),
        "named <object>.<hex time>: {name}"
    );
    assert_eq!(
        Some(prefix),
        event.involved_object.name.as_deref(),
        "named after its object"
    );
    assert!(
        event.last_timestamp >= event.first_timestamp,
        "last seen no earlier than first: {event:?}"
    );
    let mut v = serde_json::to_value(event).unwrap();
    v["metadata"] = json!({
        "name": format!("{prefix}.<time>"),
        "namespace": event.metadata.namespace,
    });
    for field in ["firstTimestamp", "lastTimestamp"] {
        if let Some(x) = v.get_mut(field) {
            *x = json!("<set>");
        }
    }
    for field in ["uid", "resourceVersion"] {
        if let Some(x) = v["involvedObject"].get_mut(field) {
            *x = json!("<set>");
        }
    }
    serde_json::from_str(&serde_json::to_string(&v).unwrap().replace(ns, "NS")).unwrap()
}

fn summarize(events: &[Event], ns: &str) -> Vec<Value> {
    let mut normalized: Vec<Value> = events.iter().map(|e| normalize(e, ns)).collect();
    normalized.sort_by_key(|v| v.to_string());
    normalized
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn core_v1_events_equal_client_go_records_for_the_same_sequence() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let client = cp.client().unwrap();
    let path = sequence_path("record.json");
    let seq: Sequence = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let (go_ns, rust_ns) = (scene(cp, "record-go").await, scene(cp, "record-rs").await);

    let started = Instant::now();
    let go = {
        let (go_ns, path) = (go_ns.clone(), path.clone());
        tokio::task::spawn_blocking(move || {
            replay_in_go(cp, &go_ns, &path, &["--recorder", "record"])
        })
    };
    let rust_calls = replay_in_rust(client.clone(), &rust_ns, &seq).await;
    let go_calls = go.await.unwrap();
    eprintln!("both sides done in {:?}", started.elapsed());

    assert_eq!(rust_calls, go_calls, "the same creates and patches");
    let go_events = summarize(&events_of(&client, &go_ns).await, &go_ns);
    let rust_events = summarize(&events_of(&client, &rust_ns).await, &rust_ns);
    assert_eq!(
        rust_events,
        go_events,
        "kinformer-events:\n{}\nclient-go:\n{}",
        serde_json::to_string_pretty(&rust_events).unwrap(),
        serde_json::to_string_pretty(&go_events).unwrap()
    );

    // What the sequence should come to on both sides, so that equal is not equally wrong.
    assert_eq!(go_calls, json!({"create": 16, "patch": 30, "failed": 0}));
    let mut seen: Vec<(String, String, String, i64)> = rust_events
        .iter()
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&e["involvedObject"]["kind"]),
                s(&e["reason"]),
                s(&e["message"]),
                e["count"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    seen.retain(|(_, reason, message, _)| reason != "Progress" || message.starts_with("(combined"));
    seen.sort();
    let expected = [
        ("ConfigMap", "BackOff", "back-off restarting", 20),
        // Ten beyond BackOff's twenty: the spam filter's burst of 25 per object and type.
        ("ConfigMap", "Failed", "failed to start", 5),
        ("ConfigMap", "Empty", "", 2),
        (
            "ConfigMap",
            "Progress",
            "(combined from similar events): step 12",
            3,
        ),
        // Three, then one about the object's next resourceVersion: one Event.
        ("ConfigMap", "Synced", "synced", 4),
        ("ConfigMap", "Synced", "synced, with a warning", 1),
        ("Namespace", "Synced", "namespace synced", 2),
    ];
    let mut expected: Vec<(String, String, String, i64)> = expected
        .iter()
        .map(|(k, r, m, c)| ((*k).into(), (*r).into(), (*m).into(), *c))
        .collect();
    expected.sort();
    assert_eq!(seen, expected, "{rust_events:#?}");
    let progress = rust_events
        .iter()
        .filter(|e| e["reason"] == "Progress" && e["count"] == 1)
        .count();
    assert_eq!(
        progress, 9,
        "the first nine distinct messages are Events of their own"
    );
    assert_eq!(rust_events.len(), 16);
    for e in &rust_events {
        assert_eq!(e["source"]["component"], json!(seq.controller), "{e}");
    }
}
