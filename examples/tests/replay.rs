//! The pod controller on a recorded stream: its demo recorded against the real API server
//! (end to end: live and replayed reconcile every pod to the same last state), and the
//! checked-in recording of it (`recordings/pod_controller_demo.jsonl`) replayed on a
//! paused clock, as recorded and under seeded faults, with no cluster: the tests a
//! controller author writes with kinformer-replay.
//!
//! `KINFORMER_WRITE_RECORDINGS=1 cargo test -p kinformer-examples --test examples --
//! --include-ignored replay::` records the checked-in file anew.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::pod_controller::{self, Output, PodController};
use k8s_openapi::api::core::v1::Pod;
use kinformer::informer::SharedInformerFactory;
use kinformer::prelude::*;
use kinformer::replay::{Chaos, RecordOptions, Recorder, Recording, Replay, Tape, check};
use kinformer::replay::{informer::Observer, offline_client};
use kinformer_testenv::ControlPlane;

const RECORDED: &str = include_str!("../recordings/pod_controller_demo.jsonl");

/// Runs the pod controller on `recording` until it has reconciled all of it; what each key
/// was last reconciled to, and whether the ready-made checks held.
async fn replay_demo(recording: &Recording) -> (BTreeMap<String, String>, Result<(), Vec<String>>) {
    let replay = Replay::<Cached<Pod>>::new(recording.clone());
    let serve = replay.clone();
    let factory = SharedInformerFactory::builder(offline_client("default"))
        .lister_watcher_for::<Cached<Pod>>(move |_, _| Arc::new(serve.clone()));
    let namespace = recording
        .final_state()
        .objects
        .keys()
        .next()
        .and_then(|k| k.split('/').next().map(str::to_owned))
        .unwrap();
    let controller = PodController::start_on(factory, &namespace, &Output::capture(), None)
        .await
        .unwrap();
    let observer = Observer::new();
    let registration = controller
        .informer()
        .add_event_handler(observer.clone())
        .unwrap();
    kinformer::replay::informer::settle(&replay, controller.informer(), &registration).await;
    // The handler and the workers: until nothing waits and no reconcile ran for a while.
    // (The handlers run on threads of their own, which a paused clock does not wait for:
    // each look also gives them real time.)
    let mut quiet = 0;
    let mut last = usize::MAX;
    while quiet < 5 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        std::thread::sleep(Duration::from_millis(2));
        let now = controller.reconciles();
        quiet = if now == last && controller.backlog() == 0 {
            quiet + 1
        } else {
            0
        };
        last = now;
    }
    let outcome = kinformer::replay::informer::outcome(controller.informer(), &observer);
    let checks = check::all(
        &[Box::new(check::StoreEqualsFinalState)],
        recording,
        &outcome,
    );
    let seen = controller.last_seen();
    controller.stop().await.unwrap();
    (seen, checks)
}

#[tokio::test(start_paused = true)]
async fn the_recorded_demo_replays_to_the_same_reconciles_as_recorded_and_under_faults() {
    let recording = Recording::parse(RECORDED.as_bytes()).unwrap();
    let ns = recording
        .final_state()
        .objects
        .keys()
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let want: BTreeMap<String, String> = [
        ("web-0", "Running"),
        ("web-1", "Pending"),
        ("cache-0", "deleted"),
        ("cache-1", "Pending"),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{ns}/{k}"), v.to_owned()))
    .collect();
    let wall = std::time::Instant::now();
    let (seen, checks) = replay_demo(&recording).await;
    assert_eq!(seen, want);
    assert_eq!(checks, Ok(()));
    for seed in 0..10 {
        let (served, applied) = Chaos::new(seed).perturbations(2).apply(&recording);
        let (seen, checks) = replay_demo(&served).await;
        assert_eq!(seen, want, "seed {seed}: {applied:?}");
        assert_eq!(checks, Ok(()), "seed {seed}: {applied:?}");
    }
    assert!(
        wall.elapsed() < Duration::from_secs(60),
        "{:?}",
        wall.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_demo_recorded_live_replays_to_the_same_reconciles() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("demo-recorded").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let tape: Arc<Mutex<Option<Tape>>> = Arc::default();
    let slot = Arc::clone(&tape);
    let factory = SharedInformerFactory::builder(client.clone()).lister_watcher_for::<Cached<Pod>>(
        move |_, cluster| {
            let recorder =
                Recorder::in_memory(cluster, RecordOptions::new("pods in the demo namespace"));
            *slot.lock().unwrap() = Some(recorder.tape());
            Arc::new(recorder)
        },
    );
    let summary = pod_controller::demo_on(client, factory, &ns, &Output::capture())
        .await
        .unwrap();
    let tape = tape.lock().unwrap().clone().unwrap();
    assert_eq!(tape.error(), None);
    let recording = tape.recording().unwrap();
    assert!(
        recording.event_count() >= 2,
        "the update and the delete: {recording:?}"
    );
    if std::env::var_os("KINFORMER_WRITE_RECORDINGS").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("recordings/pod_controller_demo.jsonl");
        recording.save(&path).unwrap();
    }
    // Replayed (on real time, as recorded): the same last state for every key.
    let (seen, checks) = replay_demo(&recording).await;
    assert_eq!(seen, summary.last_seen);
    assert_eq!(checks, Ok(()));
}
