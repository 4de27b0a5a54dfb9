//! Running the default informer (`Cached<Pod>`) on a replay, on Tokio's paused clock.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_informer_factory::SharedIndexInformer;
use kinformer_replay::informer::{Observer, outcome, settle};
use kinformer_replay::{Outcome, Recording, Replay, check};

pub type Item = Cached<Pod>;

/// What a run left, and the replay (to read what was asked of it).
pub struct Run {
    pub outcome: Outcome,
    pub replay: Replay<Item>,
    pub last_sync: String,
    pub watch_errors: usize,
}

/// Serves `served` to a new informer until it has taken everything.
pub async fn run(served: &Recording) -> Run {
    let replay = Replay::<Item>::new(served.clone());
    let informer = SharedIndexInformer::builder(replay.clone()).build();
    let errors = Arc::new(AtomicUsize::new(0));
    let e = Arc::clone(&errors);
    informer
        .set_watch_error_handler(move |_| {
            e.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    let observer = Observer::new();
    let registration = informer.add_event_handler(observer.clone()).unwrap();
    let running = informer.start().unwrap();
    settle(&replay, &informer, &registration).await;
    let outcome = outcome(&informer, &observer);
    let last_sync = informer.last_sync_resource_version();
    running.stop().await.unwrap();
    Run {
        outcome,
        replay,
        last_sync,
        watch_errors: errors.load(Ordering::Relaxed),
    }
}

/// Runs and asserts the three ready-made checks and that the replay followed the script.
pub async fn run_checked(served: &Recording) -> Run {
    let run = run(served).await;
    if let Err(failed) = check::all(&check::standard(), served, &run.outcome) {
        panic!("checks failed: {failed:#?}");
    }
    assert_eq!(run.replay.divergences(), Vec::<String>::new());
    run
}
