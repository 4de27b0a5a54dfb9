//! `cargo xtask bench sharding --handover [--pods N] [--gate on|off]`: a shard handover
//! under churn, at size. Three replicas of the sharded example (built optimised) share 12
//! shards of N pods as clusters hold them; while pods are patched ([`CHURN_PER_SEC`] a
//! second), one replica is killed (SIGKILL: its Leases expire, nothing is released). For each
//! shard it held, measured from the moment its Lease expired (the last renewal the Lease
//! records plus the lease duration): when the new holder's Lease was acquired, its first
//! reconcile of a key of the shard, and when every key of the shard had been reconciled by it.
//! Then every reconcile of every replica is checked: no key reconciled by two replicas at once.
//!
//! A shard's keys are those the killed replica reconciled as that shard (it reconciled every
//! pod once before the kill; the churn patches pods, it creates none).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use kinformer_testenv::ControlPlane;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::bench_sharding::{pods_and_gates, spread, spread_to, with_pods};
use crate::demo_sharded::{Process, Reconcile, SHARDS, balanced, build, until};

/// Pod patches a second while the replica is killed and its shards move.
const CHURN_PER_SEC: u64 = 20;

/// Replicas before the kill.
const REPLICAS: usize = 3;

/// What one handover measured, for the table.
struct Row {
    gate: &'static str,
    moved: Vec<u32>,
    /// Per moved shard, seconds after its Lease expired: acquired by the new holder, its
    /// first reconcile of a key of the shard, every key of the shard reconciled.
    acquired: Vec<f64>,
    first: Vec<f64>,
    every: Vec<f64>,
    /// Keys reconciled by two replicas at once (must be none).
    overlaps: usize,
    patched: u64,
    rss: Vec<f64>,
    received: Vec<f64>,
}

/// Runs the handover on a control plane with each gate asked for.
pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let (pods, gates) = pods_and_gates("--handover", args)?;
    let program = build(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut rows = Vec::new();
        for gated in gates {
            let (cp, ns) = with_pods(gated, pods, "bench-handover").await?;
            let row = handover(&program, &cp, &ns, pods, if gated { "on" } else { "off" }).await?;
            rows.push(row);
        }
        println!();
        println!(
            "{pods} pods, {SHARDS} shards over {REPLICAS} replicas, one killed under {CHURN_PER_SEC} \
             pod patches/s; leases 3 s / 2 s / 500 ms; seconds after each moved shard's Lease \
             expired: mean (min–max) over the moved shards"
        );
        println!(
            "| gate | moved shards | new holder's Lease acquired | its first reconcile of the shard | every key of the shard reconciled | keys reconciled by two replicas at once | survivors' peak RSS MiB | survivors' received MiB |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        for r in &rows {
            println!(
                "| {} | {:?} | {} | {} | {} | {} | {} | {} |",
                r.gate,
                r.moved,
                spread_to(&r.acquired, 2),
                spread_to(&r.first, 2),
                spread_to(&r.every, 2),
                r.overlaps,
                spread(&r.rss),
                spread(&r.received),
            );
        }
        for r in &rows {
            println!("gate {}: {} pods patched during the handover", r.gate, r.patched);
        }
        anyhow::ensure!(
            rows.iter().all(|r| r.overlaps == 0),
            "a key was reconciled by two replicas at once"
        );
        anyhow::Ok(())
    })
}

async fn handover(
    program: &std::path::Path,
    cp: &ControlPlane,
    ns: &str,
    pods: usize,
    gate: &'static str,
) -> anyhow::Result<Row> {
    let mut procs = (0..REPLICAS)
        .map(|i| Process::spawn_with(program, cp.kubeconfig(), ns, &format!("h{i}"), &[], false))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let synced = until(
        "every pod reconciled, the shards split evenly",
        Duration::from_secs(900),
        || {
            balanced(&procs) && {
                let done: BTreeSet<String> = procs.iter().flat_map(Process::reconciled).collect();
                done.len() >= pods
            }
        },
    )
    .await?;
    println!(
        "  {REPLICAS} replicas hold 4 shards each and reconciled every pod in {:.1} s",
        synced.as_secs_f64()
    );

    let api: Api<Pod> = Api::namespaced(cp.client()?, ns);
    let stop = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn(churn(api, pods, Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_secs(5)).await;

    let moved = procs[0].held();
    let victim = procs[0].id().to_owned();
    procs[0].kill()?;
    let killed_at = micros();
    let leases: Api<Lease> = Api::namespaced(cp.client()?, ns);
    let mut expired = BTreeMap::new();
    for &shard in &moved {
        let spec = lease(&leases, shard).await?;
        anyhow::ensure!(
            spec.holder_identity.as_deref() == Some(victim.as_str()),
            "shard {shard}'s Lease had moved before the kill was seen (holder {:?})",
            spec.holder_identity
        );
        let renewed = spec.renew_time.context("a held Lease without renewTime")?;
        let duration = spec
            .lease_duration_seconds
            .context("a Lease without a duration")?;
        let at = renewed.0.as_microsecond() + i64::from(duration) * 1_000_000;
        expired.insert(shard, u128::try_from(at)?);
    }
    println!("  killed {victim} (SIGKILL), which held shards {moved:?}");

    // Each moved shard's keys: those the victim reconciled as that shard.
    let mut keys: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for r in procs[0].reconciles_since(0) {
        if moved.contains(&r.shard) {
            keys.entry(r.shard).or_default().insert(r.key);
        }
    }
    let survivors = &procs[1..];
    let taken = until(
        "the survivors hold every shard",
        Duration::from_secs(120),
        || balanced(survivors),
    )
    .await?;
    println!(
        "  the survivors hold every shard {:.1} s after the kill",
        taken.as_secs_f64()
    );
    let wanted: usize = keys.values().map(BTreeSet::len).sum();
    let since = |p: &Process| p.reconciles_since(killed_at);
    let moved_done = || {
        survivors
            .iter()
            .flat_map(since)
            .filter(|r| keys.get(&r.shard).is_some_and(|k| k.contains(&r.key)))
            .map(|r| r.key)
            .collect::<BTreeSet<_>>()
            .len()
            >= wanted
    };
    until(
        "every key of the moved shards reconciled again",
        Duration::from_secs(600),
        moved_done,
    )
    .await?;
    stop.store(true, Ordering::SeqCst);
    let patched = churn.await??;

    let (mut acquired, mut first, mut every) = (Vec::new(), Vec::new(), Vec::new());
    for &shard in &moved {
        let spec = lease(&leases, shard).await?;
        let holder = spec.holder_identity.unwrap_or_default();
        let owner = survivors
            .iter()
            .find(|p| p.id() == holder)
            .with_context(|| format!("shard {shard} is held by {holder:?}, not a survivor"))?;
        let at = |t: u128| (t as f64 - expired[&shard] as f64) / 1e6;
        let acquire = spec
            .acquire_time
            .context("a held Lease without acquireTime")?;
        acquired.push(at(u128::try_from(acquire.0.as_microsecond())?));
        let theirs: Vec<Reconcile> = since(owner)
            .into_iter()
            .filter(|r| r.shard == shard)
            .collect();
        let earliest = theirs
            .iter()
            .map(|r| r.from)
            .min()
            .context("no reconcile of the shard")?;
        first.push(at(earliest));
        // Every key's first reconcile by the new holder; the last of those.
        let mut by_key: BTreeMap<&str, u128> = BTreeMap::new();
        for r in &theirs {
            let t = by_key.entry(&r.key).or_insert(r.from);
            *t = (*t).min(r.from);
        }
        let last = keys[&shard]
            .iter()
            .filter_map(|k| by_key.get(k.as_str()))
            .max()
            .copied()
            .unwrap_or(earliest);
        every.push(at(last));
    }
    let overlaps = overlapping_keys(&procs);
    let rss = survivors.iter().filter_map(Process::peak_rss_mib).collect();
    let mut received = Vec::new();
    for p in &mut procs[1..] {
        received.push(p.interrupt()? as f64 / (1024.0 * 1024.0));
    }
    Ok(Row {
        gate,
        moved,
        acquired,
        first,
        every,
        overlaps,
        patched,
        rss,
        received,
    })
}

/// How many keys two processes reconciled at overlapping times.
fn overlapping_keys(procs: &[Process]) -> usize {
    let mut by_key: BTreeMap<String, Vec<(u128, u128, usize)>> = BTreeMap::new();
    for (i, p) in procs.iter().enumerate() {
        for r in p.reconciles_since(0) {
            by_key.entry(r.key).or_default().push((r.from, r.to, i));
        }
    }
    by_key
        .into_values()
        .map(|mut list| {
            list.sort_unstable();
            list
        })
        .filter(|list| list.windows(2).any(|w| w[0].2 != w[1].2 && w[0].1 > w[1].0))
        .count()
}

/// Patches pods round-robin, [`CHURN_PER_SEC`] a second, until `stop`; how many it patched.
async fn churn(api: Api<Pod>, pods: usize, stop: Arc<AtomicBool>) -> anyhow::Result<u64> {
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / CHURN_PER_SEC));
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let name = format!("p-{}", n as usize % pods.max(1));
        let patch = serde_json::json!({"metadata": {"annotations": {"churn": n.to_string()}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patching {name}"))?;
        n += 1;
    }
    Ok(n)
}

/// The Lease of shard `i` of the example (`pods-shard-<i>-of-<n>`), as it is now.
async fn lease(leases: &Api<Lease>, i: u32) -> anyhow::Result<LeaseSpec> {
    let lease = leases.get(&format!("pods-shard-{i}-of-{SHARDS}")).await?;
    Ok(lease.spec.unwrap_or_default())
}

fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}
