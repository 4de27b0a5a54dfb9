//! The reflector's behaviour rules (ARCHITECTURE.md, rules 21–26, 47, 52, 53), each on a
//! replayed, perturbed stream into the default informer (`Cached<Pod>`), on Tokio's paused
//! clock. Every run also keeps the three ready-made checks (store equals the server's final
//! state, every delete seen, no false delete) and follows its script without divergence.

use std::time::Duration;

use crate::common::{run, run_checked};
use kinformer_replay::format::{Answer, Event, Frame, Request};
use kinformer_replay::synthetic::Churn;
use kinformer_replay::{Chaos, Check, Perturbation, Recording, Refusal, check};

fn churn() -> Recording {
    Churn::new("v1", "Pod")
        .objects(30)
        .events(300)
        .watch_len(100)
        .build()
}

fn frames(recording: &Recording, watch: usize) -> &[Frame] {
    recording
        .calls
        .iter()
        .filter(|c| matches!(c.request, Request::Watch(_)))
        .nth(watch)
        .and_then(|c| match &c.answer {
            Answer::Stream { frames, .. } => Some(frames.as_slice()),
            _ => None,
        })
        .unwrap()
}

fn apply(recording: &Recording, perturbations: &[Perturbation]) -> Recording {
    perturbations
        .iter()
        .fold(recording.clone(), |r, p| p.apply(&r).unwrap())
}

#[tokio::test(start_paused = true)]
async fn rule21_a_first_list_split_in_pages_is_followed_by_continue_tokens_then_watched_from_its_rv()
 {
    let recording = churn();
    let served = apply(&recording, &[Perturbation::SplitPages { list: 0, size: 7 }]);
    let run = run_checked(&served).await;
    let lists = run.replay.list_requests();
    assert_eq!(lists.len(), 5, "30 objects in pages of 7: {lists:?}");
    assert_eq!(
        (lists[0].resource_version.as_str(), lists[0].limit),
        ("0", Some(500))
    );
    for page in &lists[1..] {
        assert!(
            page.continue_token.is_some() && page.resource_version.is_empty(),
            "{page:?}"
        );
    }
    let list_rv = recording.state_after(1).rv;
    assert_eq!(run.replay.watch_requests()[0].resource_version, list_rv);
}

#[tokio::test(start_paused = true)]
async fn rule22_a_cut_watch_rewatches_from_the_last_rv_delivered_without_a_relist() {
    let recording = churn();
    let served = apply(
        &recording,
        &[Perturbation::Cut {
            watch: 1,
            frame: 40,
        }],
    );
    let last = frames(&served, 1)
        .last()
        .and_then(|f| f.event.rv())
        .unwrap()
        .to_owned();
    let run = run_checked(&served).await;
    assert_eq!(run.replay.list_requests().len(), 1, "no relist");
    let watches = run.replay.watch_requests();
    assert_eq!(watches[2].resource_version, last);
    assert_eq!(
        run.outcome,
        run_checked(&recording).await.outcome,
        "as if never cut"
    );
}

#[tokio::test(start_paused = true)]
async fn rule22_a_410_on_the_rewatch_relists_and_watches_from_the_relist() {
    let recording = churn();
    let served = apply(&recording, &[Perturbation::ExpireRewatch { watch: 0 }]);
    let run = run_checked(&served).await;
    let lists = run.replay.list_requests();
    assert_eq!(lists.len(), 2, "one relist: {lists:?}");
    let relist_rv = match &served.calls[3].answer {
        Answer::Page { page, .. } => page.resource_version.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(run.replay.watch_requests()[2].resource_version, relist_rv);
    assert!(
        run.watch_errors >= 1,
        "the 410 reached the watch error handler"
    );
}

#[tokio::test(start_paused = true)]
async fn rule23_and_26_a_refused_rewatch_backs_off_rewatches_from_the_same_rv_and_reaches_the_handler()
 {
    for with in [Refusal::TooManyRequests, Refusal::Unreachable] {
        let recording = churn();
        let served = apply(
            &recording,
            &[Perturbation::RefuseRewatch { watch: 0, with }],
        );
        let run = run_checked(&served).await;
        assert_eq!(run.replay.list_requests().len(), 1, "{with:?}: no relist");
        let watches = run.replay.watch_requests();
        assert_eq!(
            watches[1].resource_version, watches[2].resource_version,
            "{with:?}"
        );
        assert!(
            run.watch_errors >= 1,
            "{with:?} reached the watch error handler"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn rule24_every_bookmark_advances_the_last_synced_rv_duplicated_or_not() {
    let mut recording = churn();
    // The last, quiet watch gets a bookmark past every event.
    let end = recording.final_state().rv.parse::<u64>().unwrap() + 5;
    let last_watch = recording.calls.len() - 1;
    let at = recording.calls[last_watch].at + Duration::from_secs(1);
    if let Answer::Stream { frames, .. } = &mut recording.calls[last_watch].answer {
        frames.push(Frame::new(
            at,
            Event::Bookmark {
                rv: end.to_string(),
                initial_events_end: false,
            },
        ));
    }
    let duplicated = apply(&recording, &[Perturbation::DuplicateBookmarks { watch: 3 }]);
    assert_eq!(run_checked(&duplicated).await.last_sync, end.to_string());
    let dropped = apply(&recording, &[Perturbation::DropBookmarks { watch: 3 }]);
    assert_eq!(
        run_checked(&dropped).await.last_sync,
        (end - 5).to_string(),
        "without it, the last event's"
    );
}

/// The churn's first list and first watch as one streaming list: the objects as `ADDED`
/// events, the bookmark that ends the initial events, then the first watch's events.
fn streaming(recording: &Recording) -> Recording {
    let mut out = recording.clone();
    let Answer::Page { page, at } = out.calls[0].answer.clone() else {
        panic!()
    };
    let Request::Watch(mut request) = out.calls[1].request.clone() else {
        panic!()
    };
    let Answer::Stream { frames, end } = out.calls[1].answer.clone() else {
        panic!()
    };
    request.resource_version = String::new();
    request.send_initial_events = true;
    let mut all: Vec<Frame> = page
        .items
        .iter()
        .map(|i| Frame::new(at, Event::Added(i.clone())))
        .collect();
    all.push(Frame::new(
        at,
        Event::Bookmark {
            rv: page.resource_version.clone(),
            initial_events_end: true,
        },
    ));
    all.extend(frames);
    out.calls[1].request = Request::Watch(request);
    out.calls[1].answer = Answer::Stream { frames: all, end };
    out.calls.remove(0);
    out
}

#[tokio::test(start_paused = true)]
async fn rule25_a_streaming_list_syncs_only_at_its_end_bookmark_delayed_or_not() {
    let recording = streaming(&churn());
    let plain = run_checked(&recording).await;
    assert!(
        plain.replay.list_requests().is_empty(),
        "streamed, not listed"
    );
    assert!(plain.replay.watch_requests()[0].send_initial_events);
    // The end bookmark (frame 30) 20 s late: nothing is synced until it comes.
    let served = apply(
        &recording,
        &[Perturbation::Delay {
            watch: 0,
            frame: 30,
            by: Duration::from_secs(20),
        }],
    );
    let replay = kinformer_replay::Replay::<crate::common::Item>::new(served.clone());
    let informer = kinformer_informer_factory::SharedIndexInformer::builder(replay.clone()).build();
    let running = informer.start().unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!informer.has_synced(), "the end bookmark has not come");
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(informer.has_synced());
    running.stop().await.unwrap();
    assert_eq!(run_checked(&served).await.outcome, plain.outcome);
}

#[tokio::test(start_paused = true)]
async fn rule47_an_object_that_does_not_decode_is_skipped_alone_and_the_stream_goes_on() {
    let mut recording = churn();
    // One listed pod whose spec is of another type.
    let Answer::Page { page, .. } = &mut recording.calls[0].answer else {
        panic!()
    };
    let bad = page.items[3].clone();
    let mut value: serde_json::Value = serde_json::from_str(bad.object.get()).unwrap();
    value["spec"]["containers"] = serde_json::json!("not a list");
    page.items[3].object = serde_json::value::to_raw_value(&value).unwrap();
    let served = apply(
        &recording,
        &[Perturbation::Cut {
            watch: 0,
            frame: 10,
        }],
    );
    let run = run(&served).await;
    assert!(run.watch_errors >= 1, "reported");
    let mut want = served.final_state().versions();
    // Skipped, unless a later event replaced or deleted it.
    if want.get(&bad.key) == Some(&bad.rv) {
        want.remove(&bad.key);
    }
    assert_eq!(run.outcome.store, want, "everything else is cached");
    assert!(run.replay.divergences().is_empty());
}

#[tokio::test(start_paused = true)]
async fn rule52_a_first_list_in_pages_fills_the_cache_page_by_page_and_syncs_at_the_last() {
    let recording = churn();
    let mut served = apply(
        &recording,
        &[Perturbation::SplitPages { list: 0, size: 10 }],
    );
    // Each page a second after its call.
    for call in &mut served.calls {
        if let (Request::List(_), Answer::Page { at, .. }) = (&call.request, &mut call.answer) {
            *at = call.at + Duration::from_secs(1);
        }
    }
    let replay = kinformer_replay::Replay::<crate::common::Item>::new(served.clone());
    let informer = kinformer_informer_factory::SharedIndexInformer::builder(replay.clone()).build();
    let running = informer.start().unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let cached = informer.indexer().list().len();
    assert!((10..30).contains(&cached), "two pages in: {cached} cached");
    assert!(!informer.has_synced());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(informer.has_synced());
    running.stop().await.unwrap();
    run_checked(&served).await;
}

#[tokio::test(start_paused = true)]
async fn rule53_a_relist_of_unchanged_objects_notifies_no_one() {
    let recording = churn();
    let served = apply(&recording, &[Perturbation::ExpireRewatch { watch: 1 }]);
    let relisted = run_checked(&served).await;
    assert_eq!(relisted.replay.list_requests().len(), 2);
    assert_eq!(
        relisted.outcome.observed,
        run_checked(&recording).await.outcome.observed,
        "the relist found every object unchanged: no notification"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_relist_deletes_what_it_lacks_and_the_watch_brings_it_back() {
    let recording = churn();
    let served = apply(
        &recording,
        &[
            Perturbation::ExpireRewatch { watch: 1 },
            Perturbation::StaleList {
                list: 1,
                behind: 20,
            },
        ],
    );
    // The server said the lagging state, so those deletes are not false; the cache ends
    // where the server did.
    let run = run_checked(&served).await;
    assert_eq!(run.outcome.store, recording.final_state().versions());
    let deletes = |o: &kinformer_replay::Outcome| {
        o.observed
            .iter()
            .filter(|n| matches!(n, kinformer_replay::Observation::Delete { .. }))
            .count()
    };
    let plain = run_checked(&recording).await;
    assert!(
        deletes(&run.outcome) > deletes(&plain.outcome),
        "the stale list removed objects created in the 20 events it lags"
    );
    // Against the true stream, those deletes are false: the check catches them.
    assert!(
        check::NoFalseDelete
            .check(&recording, &run.outcome)
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn events_of_two_keys_in_the_other_order_end_the_same() {
    let recording = churn();
    let pair = (0..frames(&recording, 0).len())
        .find(|&f| {
            Perturbation::ReorderKeys { watch: 0, frame: f }
                .apply(&recording)
                .is_ok()
        })
        .unwrap();
    let served = apply(
        &recording,
        &[Perturbation::ReorderKeys {
            watch: 0,
            frame: pair,
        }],
    );
    run_checked(&served).await;
}

#[tokio::test(start_paused = true)]
async fn seeded_chaos_keeps_every_check_over_twenty_seeds() {
    let recording = churn();
    for seed in 0..20 {
        let (served, applied) = Chaos::new(seed).perturbations(4).apply(&recording);
        let run = run(&served).await;
        if let Err(failed) = check::all(&check::standard(), &served, &run.outcome) {
            panic!("seed {seed}, {applied:?}: {failed:#?}");
        }
        assert_eq!(
            run.replay.divergences(),
            Vec::<String>::new(),
            "seed {seed}, {applied:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_seeded_chaos_run_gives_the_same_outcome_100_times_out_of_100() {
    let recording = Churn::new("v1", "Pod")
        .objects(20)
        .events(150)
        .watch_len(50)
        .build();
    let (served, applied) = Chaos::new(2026).perturbations(4).apply(&recording);
    assert_eq!(applied.len(), 4);
    let first = run(&served).await.outcome;
    for n in 1..100 {
        assert_eq!(run(&served).await.outcome, first, "run {n} of {applied:?}");
    }
}
