//! Recording and replaying: the file format, redaction, and a replay into the default
//! informer that ends as the recorded server did.

use crate::common::{run, run_checked};
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

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kinformer_compact_store::Cached;
use kinformer_reflector::fake::{FakeListerWatcher, watch_of};
use kinformer_reflector::{
    ApiStatus, Error, ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions,
};
use kinformer_replay::format::{Answer, End, Event, FormatError, Request};
use kinformer_replay::{RecordOptions, Recorder, Replay};

fn secret() -> Secret {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "ns", "resourceVersion": "7",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"aHVudGVyMg==\"}}"}},
        "data": {"password": "aHVudGVyMg=="},
    }))
    .unwrap()
}

async fn recorded_text(options: RecordOptions) -> String {
    let fake = FakeListerWatcher::<Cached<Secret>>::new();
    fake.on_list(|_| Ok(ListPage::new(vec![Cached::new(&secret()).unwrap()], "7")));
    let recorder = Recorder::in_memory(fake, options);
    let tape = recorder.tape();
    recorder
        .list(&ListOptions::new("0", Some(500)))
        .await
        .unwrap();
    let mut text = Vec::new();
    tape.recording().unwrap().write(&mut text).unwrap();
    String::from_utf8(text).unwrap()
}

#[tokio::test]
async fn secrets_are_redacted_unless_kept() {
    let text = recorded_text(RecordOptions::new("secrets")).await;
    assert!(!text.contains("aHVudGVyMg"), "{text}");
    assert!(text.contains("\"password\""), "the keys stay");
    // Still a Secret that decodes, with the key and a redacted value.
    let recording = Recording::parse(text.as_bytes()).unwrap();
    assert!(recording.header.redacted);
    let page = Replay::<Cached<Secret>>::new(recording)
        .list(&ListOptions::new("0", None))
        .await
        .unwrap();
    let decoded = page.items[0].decode().unwrap();
    assert_eq!(decoded.data.unwrap()["password"].0, b"redacted");
    let kept = recorded_text(RecordOptions::new("secrets").keep_secrets()).await;
    assert!(kept.contains("aHVudGVyMg=="));
}

#[test]
fn a_cut_last_line_is_left_out_and_another_version_refused() {
    let recording = Churn::new("v1", "Pod").objects(3).events(10).build();
    let mut bytes = Vec::new();
    recording.write(&mut bytes).unwrap();
    let cut = &bytes[..bytes.len() - 40];
    let read = Recording::parse(cut).unwrap();
    // The last line (the last watch call), cut, is left out; the rest is read.
    assert_eq!(read.calls.len(), recording.calls.len() - 1);
    assert_eq!(read.event_count(), 10);
    // A bad line that is not the last is an error with its number.
    let text = String::from_utf8(bytes.clone()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2, "{\"t\":1,\"call\":0,\"nonsense\":{}}");
    let err = Recording::parse(lines.join("\n").as_bytes()).unwrap_err();
    assert!(matches!(err, FormatError::Line { line: 3, .. }), "{err}");
    let other = text.replacen("\"version\":1", "\"version\":2", 1);
    assert!(matches!(
        Recording::parse(other.as_bytes()),
        Err(FormatError::Version { found: 2 })
    ));
    assert!(matches!(
        Recording::parse(&b"{}\n"[..]),
        Err(FormatError::NotARecording)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_recorder_writes_errors_refusals_and_how_each_watch_ended_and_passes_all_on() {
    let churn = Churn::new("v1", "Pod").objects(3).events(5).build();
    let pod = |n: usize| -> Cached<k8s_openapi::api::core::v1::Pod> {
        let Answer::Page { page, .. } = &churn.calls[0].answer else {
            panic!()
        };
        serde_json::from_str(page.items[n].object.get()).unwrap()
    };
    let fake = FakeListerWatcher::new();
    let listed = vec![pod(0), pod(1)];
    fake.on_list(move |_| Ok(ListPage::new(listed.clone(), "10")));
    fake.push_watch(Err(Error::Api(ApiStatus::new(
        429,
        "TooManyRequests",
        "slow down",
    ))));
    fake.push_watch(Ok(watch_of(vec![
        Ok(WatchEvent::Added(pod(2))),
        Err(Error::Api(ApiStatus::new(410, "Expired", "too old"))),
    ])));
    fake.push_watch(Ok(watch_of(vec![Ok(WatchEvent::Modified(pod(0)))])));
    let recorder = Recorder::in_memory(fake, RecordOptions::new("pods"));
    let tape = recorder.tape();
    recorder
        .list(&ListOptions::new("0", Some(500)))
        .await
        .unwrap();
    let options = WatchOptions::new("10", Duration::from_secs(300));
    assert!(
        recorder.watch(&options).await.is_err(),
        "the refusal is passed on"
    );
    let mut second = recorder.watch(&options).await.unwrap();
    assert!(matches!(
        second.next().await,
        Some(Ok(WatchEvent::Added(_)))
    ));
    assert!(matches!(second.next().await, Some(Err(e)) if e.is_expired()));
    assert!(second.next().await.is_none());
    let mut third = recorder.watch(&options).await.unwrap();
    assert!(third.next().await.is_some());
    drop(third); // the client moves on before the server closes it
    let recording = tape.recording().unwrap();
    assert_eq!(tape.error(), None);
    assert_eq!(recording.calls.len(), 4);
    assert!(matches!(&recording.calls[0].request, Request::List(l) if l.resource_version == "0"));
    assert!(
        matches!(&recording.calls[1].answer, Answer::Failed { error, .. } if error.to_error().is_too_many_requests())
    );
    let Answer::Stream { frames, end } = &recording.calls[2].answer else {
        panic!()
    };
    assert!(matches!(&frames[1].event, Event::Error(e) if e.to_error().is_expired()));
    assert_eq!(end.map(|(_, how)| how), Some(End::Closed));
    let Answer::Stream { end, .. } = &recording.calls[3].answer else {
        panic!()
    };
    assert_eq!(end.map(|(_, how)| how), Some(End::Dropped));

    // Replayed, the same answers come back in the same order.
    let replay = Replay::<Cached<k8s_openapi::api::core::v1::Pod>>::new(recording);
    assert_eq!(
        replay
            .list(&ListOptions::new("0", Some(500)))
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    assert!(
        replay
            .watch(&options)
            .await
            .is_err_and(|e| e.is_too_many_requests())
    );
    let events: Vec<_> = replay.watch(&options).await.unwrap().collect().await;
    assert!(matches!(&events[..], [Ok(WatchEvent::Added(_)), Err(e)] if e.is_expired()));
    let mut third = replay.watch(&options).await.unwrap();
    assert!(matches!(
        third.next().await,
        Some(Ok(WatchEvent::Modified(_)))
    ));
    replay.finished().await;
    assert!(replay.divergences().is_empty());
}
