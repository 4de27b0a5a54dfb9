//! Recording and replaying: the file format, redaction, and a replay into the default
//! informer that ends as the recorded server did.

mod common;

use common::{run, run_checked};
use kinformer_replay::synthetic::Churn;
use kinformer_replay::{Chaos, Recording};

#[tokio::test(start_paused = true)]
async fn a_churn_replays_into_the_informer_and_keeps_every_check() {
    let recording = Churn::new("v1", "Pod")
        .objects(40)
        .events(600)
        .watch_len(200)
        .build();
    let run = run_checked(&recording).await;
    assert_eq!(
        run.outcome.store.len(),
        recording.final_state().objects.len()
    );
    assert_eq!(run.replay.left(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_seeded_chaos_run_keeps_every_check() {
    let recording = Churn::new("v1", "Pod")
        .objects(30)
        .events(400)
        .watch_len(100)
        .build();
    for seed in 0..10 {
        let (served, applied) = Chaos::new(seed).perturbations(3).apply(&recording);
        assert!(!applied.is_empty());
        let run = run(&served).await;
        if let Err(failed) = kinformer_replay::check::all(
            &kinformer_replay::check::standard(),
            &served,
            &run.outcome,
        ) {
            panic!("seed {seed}, {applied:?}: {failed:#?}");
        }
    }
}

#[test]
fn a_recording_round_trips_through_the_file_format() {
    let recording = Churn::new("v1", "Pod").objects(5).events(50).build();
    let mut bytes = Vec::new();
    recording.write(&mut bytes).unwrap();
    let again = Recording::parse(bytes.as_slice()).unwrap();
    let mut bytes_again = Vec::new();
    again.write(&mut bytes_again).unwrap();
    assert_eq!(bytes, bytes_again);
}
