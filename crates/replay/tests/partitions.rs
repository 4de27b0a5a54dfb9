//! Network partitions of a real API server, replayed: `recordings/*.jsonl` were recorded
//! from the local control plane by `examples/record_scenarios.rs` (an informer through a
//! proxy that cuts its connection while pods change). Replayed on a paused clock they run
//! in milliseconds what took seconds live, and the same every time; the live scenarios stay
//! covered per wire format by `kinformer-kube`'s `wire_format` end-to-end tests.
//!
//! Rule 23 (a partition healed resumes the watch from its RV, no relist) and rule 22 (a
//! compaction during the partition: the re-watch gets `410`, one relist, the deletions
//! missed reach the handlers).

use crate::common::run_checked;
use kinformer_replay::format::{Event, Request};
use kinformer_replay::{Chaos, Observation, Recording, check};

fn recording(name: &str) -> Recording {
    let path = format!(
        "{}/tests/recordings/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    Recording::load(path).unwrap()
}

/// The calls that (re)list: a list, or a streaming list.
fn lists(requests: &[Request]) -> usize {
    requests
        .iter()
        .filter(|r| match r {
            Request::List(l) => l.continue_token.is_none(),
            Request::Watch(w) => w.send_initial_events,
        })
        .count()
}

fn deleted(observed: &[Observation], name: &str) -> bool {
    observed
        .iter()
        .any(|o| matches!(o, Observation::Delete { key } if key.ends_with(&format!("/{name}"))))
}

#[tokio::test(start_paused = true)]
async fn rule23_a_partition_healed_resumes_the_watch_from_its_rv_without_a_relist() {
    let recorded = recording("partition_heal");
    let run = run_checked(&recorded).await;
    let requests = run.replay.requests();
    assert_eq!(lists(&requests), 1, "no relist: {requests:?}");
    // Every re-watch, refused or not, from the RV the watch had reached at the cut.
    let rewatches: Vec<_> = run.replay.watch_requests().into_iter().skip(1).collect();
    assert!(rewatches.len() >= 2, "{rewatches:?}");
    let at_cut = rewatches[0].resource_version.clone();
    assert!(
        rewatches.iter().all(|w| w.resource_version == at_cut),
        "{rewatches:?}"
    );
    assert!(run.watch_errors >= 1, "the refusals reached the handler");
    // The deletions made during the partition arrive as deletes.
    assert!(deleted(&run.outcome.observed, "p-1") && deleted(&run.outcome.observed, "p-2"));
}

#[tokio::test(start_paused = true)]
async fn rule22_a_compaction_during_a_partition_relists_once_and_the_missed_deletions_reach_the_handlers()
 {
    let recorded = recording("partition_compacted");
    let expired = recorded.frames().any(|f| {
        matches!(
            &f.event,
            Event::Error(kinformer_replay::format::RecordedError::Api { code: 410, .. })
        )
    });
    assert!(expired, "the recording has the server's 410");
    let run = run_checked(&recorded).await;
    assert_eq!(lists(&run.replay.requests()), 2, "exactly one relist");
    assert!(
        run.watch_errors >= 2,
        "the refusals and the 410 reached the handler"
    );
    // Deleted while nobody watched: missing from the relist, delivered as deletes.
    assert!(deleted(&run.outcome.observed, "p-1") && deleted(&run.outcome.observed, "p-2"));
    assert!(run.outcome.store.keys().any(|k| k.ends_with("/new-1")));
}

#[tokio::test(start_paused = true)]
async fn the_real_partitions_keep_every_check_under_twenty_seeded_faults_each() {
    for name in ["partition_heal", "partition_compacted"] {
        let recorded = recording(name);
        for seed in 0..20 {
            let (served, applied) = Chaos::new(seed).perturbations(3).apply(&recorded);
            let run = crate::common::run(&served).await;
            if let Err(failed) = check::all(&check::standard(), &served, &run.outcome) {
                panic!("{name}, seed {seed}, {applied:?}: {failed:#?}");
            }
            assert_eq!(
                run.replay.divergences(),
                Vec::<String>::new(),
                "{name}, seed {seed}, {applied:?}"
            );
        }
    }
}
