//! Measured side by side: what kinformer's reflector and kube-runtime's `watcher` (5.0)
//! deliver for pods deleted during an outage, on the same faults, through the same
//! partitioned proxy of one real API server (watch cache off, so compaction gives a
//! deterministic `410`).
//!
//! - Partition, writes, heal: both resume their watch from the last resourceVersion and
//!   both deliver the deletions as delete events.
//! - Partition, writes, etcd compacted, heal: both get `410` and list again. The reflector
//!   hands the sink `replace(list)` without the deleted pods, which a DeltaFIFO turns into
//!   `DeletedFinalStateUnknown` tombstones for the handlers. kube-runtime's watcher emits
//!   `Init`, an `InitApply` per pod that still exists and `InitDone`: the deleted pods are
//!   only *absent*, with no event naming them; a consumer must diff against its own state
//!   (kube-runtime's reflector store does, silently) to learn of the deletions.
//!
//! The test prints the table it measured and asserts it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_testenv::{ControlPlane, Options, eventually};
use kube::Api;
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher::{self, Event};

/// What kube-runtime's watcher emitted, one line per event.
#[derive(Clone, Default)]
struct Emitted(Arc<Mutex<Vec<String>>>);

impl Emitted {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn count(&self, line: &str) -> usize {
        self.all().iter().filter(|l| *l == line).count()
    }
    /// The pods applied in the last Init .. InitDone.
    fn last_init(&self) -> BTreeSet<String> {
        let all = self.all();
        let start = all.iter().rposition(|l| l == "init").unwrap_or(0);
        all[start..]
            .iter()
            .filter_map(|l| l.strip_prefix("init_apply ").map(str::to_owned))
            .collect()
    }
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// One row of the comparison.
#[derive(Debug)]
struct Row {
    scenario: &'static str,
    ours_deletes: usize,
    ours_relists: u64,
    ours_absent_from_replace: bool,
    theirs_deletes: usize,
    theirs_relists: usize,
    theirs_absent_from_init: bool,
}

async fn scenario(cp: &ControlPlane, compact: bool) -> Row {
    let prefix = if compact {
        "kr-compact"
    } else {
        "kr-partition"
    };
    let scene = Scene::behind_proxy(cp, prefix, 4).await;
    let direct = &scene.direct;
    let proxy = scene.proxy();

    // kinformer
    let run = scene.reflect();

    // kube-runtime, with its recommended backoff, through the same proxy
    let theirs: Api<Pod> = Api::namespaced(proxy.client().unwrap(), &scene.ns);
    let emitted = Emitted::default();
    let e = emitted.clone();
    let task = tokio::spawn(async move {
        let mut s = watcher::watcher(theirs, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = s.next().await {
            e.push(match ev {
                Ok(Event::Init) => "init".into(),
                Ok(Event::InitApply(p)) => format!("init_apply {}", name(&p)),
                Ok(Event::InitDone) => "init_done".into(),
                Ok(Event::Apply(p)) => format!("apply {}", name(&p)),
                Ok(Event::Delete(p)) => format!("delete {}", name(&p)),
                Err(_) => "error".into(),
            });
        }
    });

    eventually("both synced", MINUTE, || {
        run.status().has_synced() && emitted.count("init_done") == 1
    })
    .await;
    create_pod(direct, "warmup").await;
    let warm = scene.key("warmup");
    eventually("both watching", MINUTE, || {
        run.sink.adds().contains(&warm) && emitted.all().contains(&"apply warmup".to_string())
    })
    .await;

    proxy.partition();
    let rv_at_cut: i64 = run.status().last_sync_resource_version().parse().unwrap();
    delete_pod(direct, "p-1").await;
    delete_pod(direct, "p-2").await;
    create_pod(direct, "new").await;
    if compact {
        let rev = cp.compact_etcd().await.unwrap();
        assert!(rev > rv_at_cut + 1);
    }
    // Let both notice the cut and fail at least once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.heal();

    converge(&run.sink, direct, 2 * MINUTE).await;
    let gone = ["p-1", "p-2"];
    eventually("kube-runtime to catch up", 2 * MINUTE, || {
        let all = emitted.all();
        let deleted = gone.iter().all(|g| all.contains(&format!("delete {g}")));
        let relisted = emitted.count("init_done") >= 2 && emitted.last_init().contains("new");
        deleted || relisted
    })
    .await;
    // Anything still in flight lands.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let our_deletes = gone
        .iter()
        .filter(|g| run.sink.deletes().contains(&scene.key(g)))
        .count();
    let last_replace = run.sink.replaces().last().cloned().unwrap_or_default().0;
    let their_deletes = gone
        .iter()
        .map(|g| emitted.count(&format!("delete {g}")))
        .sum();
    let their_init = emitted.last_init();
    let row = Row {
        scenario: if compact {
            "partition + etcd compacted, heal"
        } else {
            "partition, heal"
        },
        ours_deletes: our_deletes,
        ours_relists: run.status().syncs() - 1,
        ours_absent_from_replace: gone.iter().all(|g| !last_replace.contains(&scene.key(g))),
        theirs_deletes: their_deletes,
        theirs_relists: emitted.count("init_done") - 1,
        theirs_absent_from_init: gone.iter().all(|g| !their_init.contains(*g)),
    };
    task.abort();
    run.stop().await;
    row
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn deletions_during_an_outage_kinformer_reflector_vs_kube_runtime_watcher() {
    init_tracing();
    let cp = ControlPlane::start_with(Options::default().watch_cache(false))
        .await
        .unwrap();
    let partition = scenario(&cp, false).await;
    let compacted = scenario(&cp, true).await;

    eprintln!(
        "| fault | kinformer: delete events | kinformer: relists | kinformer: gone from replace | kube-runtime: Delete events | kube-runtime: re-inits | kube-runtime: gone from re-init |"
    );
    eprintln!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in [&partition, &compacted] {
        let shown = |relists: u64, absent: bool| {
            if relists == 0 {
                "no relist".to_string()
            } else {
                absent.to_string()
            }
        };
        eprintln!(
            "| {} | {}/2 | {} | {} | {}/2 | {} | {} |",
            r.scenario,
            r.ours_deletes,
            r.ours_relists,
            shown(r.ours_relists, r.ours_absent_from_replace),
            r.theirs_deletes,
            r.theirs_relists,
            shown(r.theirs_relists as u64, r.theirs_absent_from_init)
        );
    }

    // Partition only: both resume from the last RV and deliver real deletes, no relist.
    assert_eq!(partition.ours_deletes, 2, "{partition:?}");
    assert_eq!(partition.ours_relists, 0, "{partition:?}");
    assert_eq!(partition.theirs_deletes, 2, "{partition:?}");
    assert_eq!(partition.theirs_relists, 0, "{partition:?}");
    // Compacted: both relist once; neither gets delete events for the missed deletions.
    // kinformer's replace lacks them (tombstones downstream); kube-runtime only omits them.
    assert_eq!(compacted.ours_deletes, 0, "{compacted:?}");
    assert_eq!(compacted.ours_relists, 1, "{compacted:?}");
    assert!(compacted.ours_absent_from_replace, "{compacted:?}");
    assert_eq!(compacted.theirs_deletes, 0, "{compacted:?}");
    assert_eq!(compacted.theirs_relists, 1, "{compacted:?}");
    assert!(compacted.theirs_absent_from_init, "{compacted:?}");
}
