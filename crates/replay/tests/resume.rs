//! Rule 67 replayed: an informer restarted from its snapshot resumes on a replayed server
//! (the probe, the catch-up watch from the snapshot's version, nothing listed), and a
//! catch-up watch cut short (the `Cut` perturbation) costs exactly one consistent list.
//! Real time with `Timing::Immediate`: the snapshot loads on the blocking pool, which a
//! paused clock would race past the catch-up watch's 3 s.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_core::TokioClock;
use kinformer_informer_factory::{SharedIndexInformer, SnapshotOptions, SnapshotStart};
use kinformer_replay::format::{Answer, Call, End, Frame, Header, ListRequest, Page, Request};
use kinformer_replay::informer::{Observer, outcome, settle};
use kinformer_replay::synthetic::Churn;
use kinformer_replay::{Observation, Outcome, Perturbation, Recording, Replay, State, Timing};

const IDENTITY: &str = "v1/pods replayed";

fn informer(
    replay: &Replay<Cached<Pod>>,
    dir: &std::path::Path,
) -> SharedIndexInformer<Cached<Pod>> {
    SharedIndexInformer::builder(replay.clone())
        .snapshot(
            SnapshotOptions::new(dir)
                .period(Duration::ZERO)
                .start(SnapshotStart::ChangesOnly),
            IDENTITY,
        )
        .build()
}

/// Runs an informer with its snapshot in `dir` on `served` until it has taken it all.
async fn run(
    served: &Recording,
    known: Option<State>,
    dir: &std::path::Path,
) -> (Outcome, Replay<Cached<Pod>>, u64) {
    let mut replay = Replay::with(served.clone(), Arc::new(TokioClock), Timing::Immediate);
    if let Some(state) = known {
        replay = replay.knowing(state);
    }
    let informer = informer(&replay, dir);
    let observer = Observer::new();
    let registration = informer.add_event_handler(observer.clone()).unwrap();
    let running = informer.start().unwrap();
    settle(&replay, &informer, &registration).await;
    let resumed = informer.stats().reflector.resumed;
    let outcome = outcome(&informer, &observer);
    running.stop().await.unwrap();
    (outcome, replay, resumed)
}

/// A watch's frames up to its last object event: a catch-up watch ends there, once it has
/// reached the server's version.
fn stream_frames(call: &Call) -> Vec<Frame> {
    let Answer::Stream { frames, .. } = &call.answer else {
        panic!("{call:?}")
    };
    let last = frames
        .iter()
        .rposition(|f| f.event.item().is_some())
        .unwrap();
    frames[..=last].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule67_a_restart_resumes_on_a_replay_and_a_catch_up_cut_short_lists_once() {
    // A list, 100 events, 100 more, then quiet: the first process sees the first 100.
    let churn = Churn::new("v1", "Pod")
        .objects(20)
        .events(200)
        .watch_len(100)
        .build();
    let (list, w0, w1, quiet) = (
        &churn.calls[0],
        &churn.calls[1],
        &churn.calls[2],
        &churn.calls[3],
    );
    let mut first = Recording::new(Header::new("pods, first process", true));
    first.calls = vec![list.clone(), w0.clone(), quiet.clone()];
    let Request::Watch(mut from_s) = w1.request.clone() else {
        panic!()
    };
    if let Request::Watch(w) = &mut first.calls[2].request {
        w.resource_version.clone_from(&from_s.resource_version);
    }
    let snapshot = first.final_state();
    let dir = tempfile::tempdir().unwrap();
    run(&first, None, dir.path()).await;

    // The restarted process: the probe (one object, the server's version), the catch-up
    // watch from the snapshot's version (the next 100 events), then quiet.
    let end = churn.final_state();
    let probe = Call {
        at: Duration::ZERO,
        request: Request::List(ListRequest {
            resource_version: String::new(),
            limit: Some(1),
            continue_token: None,
            exact: false,
        }),
        answer: Answer::Page {
            at: Duration::from_millis(1),
            page: Page {
                resource_version: end.rv.clone(),
                continue_token: Some("more".into()),
                items: vec![end.objects.values().next().unwrap().clone()],
                undecodable: Vec::new(),
            },
        },
    };
    from_s.timeout_seconds = 3;
    let catch_up = Call {
        at: Duration::from_millis(2),
        request: Request::Watch(from_s),
        answer: Answer::Stream {
            frames: stream_frames(w1),
            end: Some((Duration::from_secs(3), End::Closed)),
        },
    };
    let mut second = Recording::new(Header::new("pods, restarted", true));
    second.calls = vec![probe, catch_up, quiet.clone()];
    let saved = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), saved.path().join(entry.file_name())).unwrap();
    }

    let (outcome, replay, resumed) = run(&second, Some(snapshot.clone()), dir.path()).await;
    assert_eq!(resumed, 1, "resumed from the snapshot");
    assert_eq!(
        replay.list_requests().len(),
        1,
        "the probe, nothing listed: {:?}",
        replay.list_requests()
    );
    assert_eq!(outcome.store, end.versions());
    assert_eq!(replay.divergences(), Vec::<String>::new());
    let changed: usize = outcome.observed.len();
    assert!(
        changed > 0 && changed <= 100,
        "handlers hear only the changes: {changed}"
    );

    // The catch-up watch cut after 50 events: the informer lists once, at "", and ends
    // where the server did, with no false delete.
    let cut = Perturbation::Cut {
        watch: 0,
        frame: 50,
    }
    .apply(&second)
    .unwrap();
    let (outcome, replay, resumed) = run(&cut, Some(snapshot), saved.path()).await;
    assert_eq!(resumed, 0);
    let lists = replay.list_requests();
    assert_eq!(lists.len(), 2, "the probe and one list: {lists:?}");
    assert_eq!(
        (lists[1].resource_version.as_str(), lists[1].limit.is_some()),
        ("", true)
    );
    assert_eq!(
        replay.divergences().len(),
        1,
        "the list, where the recording re-watched: {:?}",
        replay.divergences()
    );
    assert_eq!(outcome.store, end.versions());
    let deleted: Vec<_> = outcome
        .observed
        .iter()
        .filter_map(|o| match o {
            Observation::Delete { key } => Some(key),
            _ => None,
        })
        .collect();
    for key in deleted {
        assert!(!end.objects.contains_key(key), "a false delete of {key}");
    }
}
