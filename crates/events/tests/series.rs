//! What is folded into a series and when it is written, on a fake clock: client-go's
//! `tools/events` broadcaster, step by step.

use crate::common::*;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kinformer_events::{EventType, Reporter};
use serde_json::json;
use std::time::{SystemTime, UNIX_EPOCH};

fn micro(t: SystemTime) -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::try_from(t).unwrap())
}

fn micro_json(t: SystemTime) -> String {
    serde_json::to_value(micro(t))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

fn nanos_hex(t: SystemTime) -> String {
    format!("{:x}", t.duration_since(UNIX_EPOCH).unwrap().as_nanos())
}

/// The event every test repeats: a pod's Normal Scheduled/Bind.
fn publish(h: &Harness, note: &str) {
    h.recorder
        .publish(
            &pod("web-0"),
            None,
            EventType::Normal,
            "Scheduled",
            "Bind",
            note,
        )
        .unwrap();
}

/// The event, and its repeat a second later: a create and a series of 2.
async fn start_a_series(h: &mut Harness) {
    publish(h, "");
    h.step(secs(1));
    publish(h, "");
    assert_eq!(h.settle().await.len(), 2);
}

#[tokio::test]
async fn the_first_event_is_created_with_client_gos_fields() {
    let mut h = Harness::new();
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("node-1".into()),
        ..ObjectReference::default()
    };
    h.recorder
        .publish(
            &pod("web-0"),
            Some(&node),
            EventType::Normal,
            "Scheduled",
            "Bind",
            "assigned default/web-0 to node-1",
        )
        .unwrap();
    let calls = h.settle().await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].verb, Verb::Create);
    let e = &calls[0].event;
    assert_eq!(
        e.metadata.name.as_deref(),
        Some(format!("web-0.{}", nanos_hex(start())).as_str()),
        "named <object>.<publish time in unix nanos, hex>"
    );
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(e.event_time, Some(micro(start())));
    assert_eq!(e.reporting_controller.as_deref(), Some(CONTROLLER));
    assert_eq!(e.reporting_instance.as_deref(), Some(INSTANCE));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.reason.as_deref(), Some("Scheduled"));
    assert_eq!(e.action.as_deref(), Some("Bind"));
    assert_eq!(e.note.as_deref(), Some("assigned default/web-0 to node-1"));
    assert_eq!(e.regarding, Some(pod("web-0")));
    assert_eq!(e.related, Some(node));
    assert!(e.series.is_none());
    assert!(e.deprecated_count.is_none() && e.deprecated_source.is_none());
    assert!(e.metadata.resource_version.is_none());
}

#[tokio::test]
async fn an_empty_note_is_left_out() {
    let mut h = Harness::new();
    publish(&h, "");
    let calls = h.settle().await;
    assert_eq!(calls[0].event.note, None);
}

#[tokio::test]
async fn a_cluster_scoped_object_gets_its_event_in_default() {
    let mut h = Harness::new();
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("node-1".into()),
        uid: Some("uid-node-1".into()),
        ..ObjectReference::default()
    };
    h.recorder
        .publish(&node, None, EventType::Warning, "NotReady", "Check", "")
        .unwrap();
    let calls = h.settle().await;
    assert_eq!(
        calls[0].event.metadata.namespace.as_deref(),
        Some("default")
    );
    assert_eq!(calls[0].event.regarding.as_ref().unwrap().namespace, None);
}

#[tokio::test]
async fn an_object_name_that_makes_no_valid_event_name_gets_a_uuid() {
    let mut h = Harness::new();
    let mut odd = pod("web-0");
    odd.name = Some("Web_0".into());
    h.recorder
        .publish(&odd, None, EventType::Normal, "Scheduled", "Bind", "")
        .unwrap();
    let calls = h.settle().await;
    let name = calls[0].event.metadata.name.clone().unwrap();
    let groups: Vec<usize> = name.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "a UUID: {name}");
}

#[tokio::test]
async fn the_second_isomorphic_event_patches_a_series_of_two_onto_the_first() {
    let mut h = Harness::new();
    publish(&h, "first");
    let created = h.settle().await;
    h.step(secs(1));
    publish(&h, "second");
    let calls = h.settle().await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    let patch = &calls[0];
    assert_eq!(patch.verb, Verb::Patch);
    assert_eq!(patch.event.metadata.name, created[0].event.metadata.name);
    assert_eq!(
        patch.patch,
        Some(json!({"series": {"count": 2, "lastObservedTime": micro_json(start() + secs(1))}})),
        "a strategic-merge patch of the series alone"
    );
    assert_eq!(
        patch.event.event_time,
        Some(micro(start())),
        "the first event's time stays"
    );
    assert_eq!(patch.answer, Ok(()));
}

#[tokio::test]
async fn later_repeats_only_count_until_the_series_is_written() {
    let mut h = Harness::new();
    for i in 0..5 {
        h.step(secs(1));
        publish(&h, &format!("try {i}"));
    }
    let calls = h.settle().await;
    let seen: Vec<_> = calls.iter().map(|c| (c.verb, c.count())).collect();
    assert_eq!(seen, [(Verb::Create, None), (Verb::Patch, Some(2))]);

    h.step(mins(12));
    let calls = h.settle().await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].verb, Verb::Patch);
    assert_eq!(
        calls[0].patch,
        Some(json!({"series": {"count": 5, "lastObservedTime": micro_json(start() + secs(5))}}))
    );
}

#[tokio::test]
async fn the_note_is_not_part_of_the_key_and_the_first_note_stays() {
    let mut h = Harness::new();
    publish(&h, "first note");
    h.step(secs(1));
    publish(&h, "another note");
    let calls = h.settle().await;
    assert_eq!(calls[1].verb, Verb::Patch);
    assert_eq!(calls[1].event.note.as_deref(), Some("first note"));
}

#[tokio::test]
async fn events_that_differ_in_any_part_of_the_key_are_not_folded() {
    let mut h = Harness::new();
    let base = pod("web-0");
    let changed = |change: fn(&mut ObjectReference)| {
        let mut r = base.clone();
        change(&mut r);
        r
    };
    let other_instance = h
        .broadcaster
        .recorder(Reporter::with_instance(CONTROLLER, "widget-controller-1"));
    let other_controller = h
        .broadcaster
        .recorder(Reporter::with_instance("other-controller", INSTANCE));
    let (n, w) = (EventType::Normal, EventType::Warning);

    h.recorder
        .publish(&base, None, n, "Scheduled", "Bind", "")
        .unwrap();
    // Each differs from the first in one part of the key:
    // (who publishes, regarding, related, type, reason, action).
    let variants = [
        (&h.recorder, base.clone(), None, w, "Scheduled", "Bind"),
        (&h.recorder, base.clone(), None, n, "Failed", "Bind"),
        (&h.recorder, base.clone(), None, n, "Scheduled", "Unbind"),
        (
            &h.recorder,
            base.clone(),
            Some(pod("web-1")),
            n,
            "Scheduled",
            "Bind",
        ),
        (
            &h.recorder,
            changed(|r| r.resource_version = Some("2".into())),
            None,
            n,
            "Scheduled",
            "Bind",
        ),
        (
            &h.recorder,
            changed(|r| r.uid = Some("uid-new".into())),
            None,
            n,
            "Scheduled",
            "Bind",
        ),
        (
            &h.recorder,
            changed(|r| r.field_path = Some("spec.containers{app}".into())),
            None,
            n,
            "Scheduled",
            "Bind",
        ),
        (
            &h.recorder,
            changed(|r| r.kind = Some("Other".into())),
            None,
            n,
            "Scheduled",
            "Bind",
        ),
        (&h.recorder, pod("web-2"), None, n, "Scheduled", "Bind"),
        (&other_instance, base.clone(), None, n, "Scheduled", "Bind"),
        (
            &other_controller,
            base.clone(),
            None,
            n,
            "Scheduled",
            "Bind",
        ),
    ];
    let expected = 1 + variants.len();
    for (recorder, regarding, related, type_, reason, action) in variants {
        // Distinct events about one object published at one instant would share a name.
        h.step(secs(1));
        recorder
            .publish(&regarding, related.as_ref(), type_, reason, action, "")
            .unwrap();
    }
    let calls = h.settle().await;
    assert_eq!(calls.len(), expected);
    assert!(
        calls
            .iter()
            .all(|c| c.verb == Verb::Create && c.answer.is_ok()),
        "{calls:?}"
    );

    // The first is still cached: its repeat starts a series.
    h.step(secs(1));
    h.recorder
        .publish(&base, None, n, "Scheduled", "Bind", "")
        .unwrap();
    let calls = h.settle().await;
    assert_eq!((calls[0].verb, calls[0].count()), (Verb::Patch, Some(2)));
}

#[tokio::test]
async fn absent_and_empty_reference_fields_are_the_same_key() {
    let mut h = Harness::new();
    publish(&h, "");
    let mut same = pod("web-0");
    same.field_path = Some(String::new());
    h.step(secs(1));
    h.recorder
        .publish(&same, None, EventType::Normal, "Scheduled", "Bind", "")
        .unwrap();
    let calls = h.settle().await;
    assert_eq!(
        calls[1].verb,
        Verb::Patch,
        "as Go's zero values compare equal"
    );
}

#[tokio::test]
async fn a_series_quiet_for_six_minutes_is_written_a_last_time_and_forgotten() {
    let mut h = Harness::new();
    start_a_series(&mut h).await;

    // The check at 6 minutes: last observed 5:59 ago, not yet quiet for 6.
    h.step(mins(6) - secs(1));
    assert!(h.settle().await.is_empty());

    // The check at 12 minutes: the series is written once more, and forgotten.
    h.step(mins(6));
    let calls = h.settle().await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!((calls[0].verb, calls[0].count()), (Verb::Patch, Some(2)));

    // So a repeat now starts a new event.
    publish(&h, "");
    let calls = h.settle().await;
    assert_eq!((calls[0].verb, calls[0].count()), (Verb::Create, None));
    assert_eq!(
        calls[0].event.metadata.name.as_deref(),
        Some(format!("web-0.{}", nanos_hex(start() + mins(12))).as_str())
    );
}

#[tokio::test]
async fn a_single_event_is_still_folded_six_minutes_after_it_was_published() {
    let mut h = Harness::new();
    publish(&h, "");
    assert_eq!(h.settle().await.len(), 1);
    h.step(mins(6));
    publish(&h, "");
    let calls = h.settle().await;
    assert_eq!(
        calls[0].verb,
        Verb::Patch,
        "not older than 6 minutes at the check"
    );
}

#[tokio::test]
async fn a_single_event_older_than_six_minutes_is_forgotten_at_the_next_check() {
    let mut h = Harness::new();
    publish(&h, "");
    assert_eq!(h.settle().await.len(), 1);
    h.step(mins(6) + secs(1));
    // The check runs before the repeat is taken (both are due when the task wakes).
    publish(&h, "");
    let calls = h.settle().await;
    let seen: Vec<_> = calls.iter().map(|c| c.verb).collect();
    assert_eq!(
        seen,
        [Verb::Create],
        "forgotten without a write, so created anew"
    );
}

#[tokio::test]
async fn open_series_are_written_every_thirty_minutes() {
    let mut h = Harness::new();
    start_a_series(&mut h).await;
    // A repeat every 5 minutes keeps the series open through the 6-minute checks.
    for _ in 0..5 {
        h.step(mins(5));
        publish(&h, "");
        assert!(h.settle().await.is_empty());
    }
    h.step(mins(5));
    let calls = h.settle().await;
    assert_eq!(calls.len(), 1, "the 30-minute heartbeat: {calls:?}");
    assert_eq!(
        calls[0].patch,
        Some(
            json!({"series": {"count": 7, "lastObservedTime": micro_json(start() + secs(1) + mins(25))}})
        )
    );

    // Refreshed, not finished: a repeat is still only counted.
    publish(&h, "");
    assert!(h.settle().await.is_empty());
}

#[tokio::test]
async fn publish_for_references_the_object_as_client_gos_get_reference() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    let mut h = Harness::new();
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            namespace: Some("apps".into()),
            uid: Some("uid-1".into()),
            resource_version: Some("42".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    h.recorder
        .publish_for(&cm, EventType::Normal, "Synced", "Sync", "")
        .unwrap();
    let calls = h.settle().await;
    let e = &calls[0].event;
    assert_eq!(e.metadata.namespace.as_deref(), Some("apps"));
    assert_eq!(
        e.regarding,
        Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some("apps".into()),
            name: Some("settings".into()),
            uid: Some("uid-1".into()),
            resource_version: Some("42".into()),
            field_path: None,
        })
    );
    assert_eq!(e.related, None);
}

#[test]
fn the_default_instance_is_the_controller_and_the_hostname() {
    // What Go's os.Hostname reads first on Linux.
    let Ok(hostname) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return;
    };
    let reporter = Reporter::new("widget-controller");
    assert_eq!(reporter.controller(), "widget-controller");
    assert_eq!(
        reporter.instance(),
        format!("widget-controller-{}", hostname.trim())
    );
}

#[tokio::test]
async fn shutdown_writes_each_series_counted_past_its_last_write() {
    let mut h = Harness::new();
    start_a_series(&mut h).await;
    for _ in 0..3 {
        h.step(secs(1));
        publish(&h, "");
    }
    // A second series, written with its count of 2 and not counted since.
    for _ in 0..2 {
        h.recorder
            .publish(
                &pod("web-1"),
                None,
                EventType::Normal,
                "Scheduled",
                "Bind",
                "",
            )
            .unwrap();
    }
    assert_eq!(h.settle().await.len(), 2, "web-1's create and series of 2");
    let Harness {
        broadcaster, sink, ..
    } = h;
    broadcaster.shutdown().await;
    let mut counts: Vec<_> = sink
        .stored()
        .iter()
        .map(|e| {
            let name = e.regarding.as_ref().and_then(|r| r.name.clone()).unwrap();
            (name, e.series.as_ref().map(|s| s.count))
        })
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        [("web-0".to_owned(), Some(5)), ("web-1".to_owned(), Some(2))],
        "client-go would leave web-0 at 2"
    );
}
