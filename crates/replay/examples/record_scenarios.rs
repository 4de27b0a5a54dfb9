//! Records the two partition scenarios that `tests/partitions.rs` replays, from the real
//! API server of the local control plane, into `tests/recordings/`:
//!
//! - `partition_heal.jsonl`: an informer's connection is cut (a network partition) while
//!   pods are created, changed and deleted; it heals; the informer catches up.
//! - `partition_compacted.jsonl`: the same on an API server without the watch cache, with
//!   etcd compacted before the heal: the re-watch gets `410 Gone` and the informer lists.
//!
//! ```text
//! cargo run -p kinformer-replay --example record_scenarios
//! ```
//!
//! It needs the control plane's binaries (`cargo xtask test` builds them; or set
//! `KINFORMER_CONTROLPLANE_BIN`). Record anew when the API server's behaviour changes: the
//! replays then check the informer against the new streams.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_core::MetaObject;
use kinformer_informer_factory::SharedIndexInformer;
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_replay::{RecordOptions, Recorder, Recording};
use kinformer_testenv::{ControlPlane, Options, create_pods, eventually, eventually_async, pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(120);

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn truth(api: &Api<Pod>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap(),
                p.metadata.resource_version.unwrap(),
            )
        })
        .collect()
}

fn cached(informer: &SharedIndexInformer<Cached<Pod>>) -> BTreeMap<String, String> {
    informer
        .indexer()
        .list()
        .iter()
        .map(|p| {
            (
                p.object_name().unwrap().to_owned(),
                p.object_resource_version().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Five pods, an informer through a proxy, one change seen, the partition, changes (and a
/// compaction), the heal, the catch-up.
async fn scenario(cp: &ControlPlane, name: &str, compact: bool) -> Result<Recording, Error> {
    let ns = cp.create_namespace(name).await?;
    let direct: Api<Pod> = Api::namespaced(cp.client()?, &ns);
    create_pods(&direct, "p", 5).await?;
    let proxy = cp.proxy()?;
    let through: Api<Pod> = Api::namespaced(reflector_client(proxy.admin_config())?, &ns);
    let recorder = Recorder::in_memory(
        KubeListerWatcher::new(through).cached(),
        RecordOptions::new(format!("pods: {name}")),
    );
    let tape = recorder.tape();
    let informer = SharedIndexInformer::builder(recorder).build();
    let running = informer.start()?;
    eventually("synced", TIMEOUT, || informer.has_synced()).await;
    let label = |value: &str| serde_json::json!({"metadata": {"labels": {"during": value}}});
    direct
        .patch(
            "p-0",
            &PatchParams::default(),
            &Patch::Merge(&label("warm-up")),
        )
        .await?;
    let api = direct.clone();
    eventually_async("the warm-up seen", TIMEOUT, || {
        let (api, informer) = (api.clone(), informer.clone());
        async move { cached(&informer) == truth(&api).await }
    })
    .await;

    proxy.partition();
    let grace = DeleteParams::default().grace_period(0);
    direct.delete("p-1", &grace).await?;
    direct.delete("p-2", &grace).await?;
    direct.create(&PostParams::default(), &pod("new-1")).await?;
    direct
        .patch(
            "p-0",
            &PatchParams::default(),
            &Patch::Merge(&label("partitioned")),
        )
        .await?;
    if compact {
        cp.compact_etcd().await?;
    }
    // Long enough for the cut to be noticed and a few re-watches refused.
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.heal();
    eventually_async("the catch-up", TIMEOUT, || {
        let (api, informer) = (direct.clone(), informer.clone());
        async move { cached(&informer) == truth(&api).await }
    })
    .await;
    running.stop().await?;
    if let Some(e) = tape.error() {
        return Err(e.into());
    }
    Ok(tape.recording()?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings");
    let cp = ControlPlane::start().await?;
    let heal = scenario(&cp, "partition-heal", false).await?;
    heal.save(dir.join("partition_heal.jsonl"))?;
    println!(
        "partition_heal.jsonl: {} calls, {} events",
        heal.calls.len(),
        heal.event_count()
    );
    let no_cache = ControlPlane::start_with(Options::default().watch_cache(false)).await?;
    let compacted = scenario(&no_cache, "partition-compacted", true).await?;
    compacted.save(dir.join("partition_compacted.jsonl"))?;
    println!(
        "partition_compacted.jsonl: {} calls, {} events",
        compacted.calls.len(),
        compacted.event_count()
    );
    Ok(())
}
