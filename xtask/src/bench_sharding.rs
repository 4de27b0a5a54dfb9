//! `cargo xtask bench sharding`: the sharded pod controller (`examples/sharded_controller.rs`)
//! as processes on the local control plane.
//!
//! - Without options: 1, 2, 3, 4 and 6 processes drain a backlog of pods, each reconcile
//!   waiting a fixed time and each process running a fixed number of reconciles at once; prints
//!   the time to drain. `--cpu`: each reconcile burns that time on the CPU instead of waiting.
//! - `--replicas [--pods N] [--gate on|off]` (10,000 by default, both gates): N pods as clusters hold them (server-side
//!   applied, two field managers), created once per control plane and shared by every run;
//!   1 to 4 replicas (the example built optimised) share 12 shards on a server with the gate
//!   `ShardedListAndWatch` and on one without (`--gate`: only one of them); each run reports the time until every pod was
//!   reconciled once, each replica's peak RSS, the bytes its informer received (its
//!   lister-watcher's count, relists included) and the pod watches the
//!   API server serves to the replicas.
//! - `--handover [--pods N] [--gate on|off]`: one of three replicas killed under churn
//!   (`bench_handover.rs`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_testenv::{ControlPlane, Options, apply_realistic_pods, create_pods};

use crate::demo_sharded::{Process, SHARDS, balanced, build, until};

/// The bench's name: `cargo xtask bench sharding`.
pub(crate) const BENCH: &str = "sharding";

/// Pods in the backlog, each reconcile's wait, reconciles at once per process.
const BACKLOG: usize = 1000;
const COST_MS: u64 = 20;
const CAPACITY: usize = 4;

/// `cargo xtask bench sharding [--cpu | --replicas | --handover [--pods N] [--gate on|off]]`.
pub(crate) fn bench(args: &[String]) -> anyhow::Result<()> {
    let cpu = match args {
        [] => false,
        [flag] if flag == "--cpu" => true,
        [flag, rest @ ..] if flag == "--replicas" => return replicas(rest),
        [flag, rest @ ..] if flag == "--handover" => return crate::bench_handover::run(rest),
        _ => {
            anyhow::bail!(
                "the sharding bench takes --cpu, or --replicas or --handover [--pods N] [--gate on|off] (got {args:?})"
            )
        }
    };
    let cost_flag = if cpu {
        "--reconcile-cpu"
    } else {
        "--reconcile-cost"
    };
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let program = build(false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        println!("starting etcd and kube-apiserver with the feature gate ShardedListAndWatch");
        let cp = ControlPlane::start_with(Options::default().sharded_list_and_watch(true)).await?;
        let what = if cpu { "burns on the CPU" } else { "waits" };
        println!(
            "{BACKLOG} pods per run, {SHARDS} shards, each reconcile {what} {COST_MS} ms, \
             {CAPACITY} reconciles at once per process, {cores} cores"
        );
        if cpu {
            println!("| processes | time to drain | pods/s | ideal (backlog × cost ÷ min(capacity × processes, cores)) | peak RSS per process | shards lost at their renew deadline |");
        } else {
            println!("| processes | time to drain | pods/s | ideal (backlog × cost ÷ (capacity × processes)) | peak RSS per process | shards lost at their renew deadline |");
        }
        println!("| --- | --- | --- | --- | --- | --- |");
        for n in [1, 2, 3, 4, 6] {
            let ns = cp.create_namespace("bench-sharding").await?;
            let pods: kube::Api<Pod> = kube::Api::namespaced(cp.client()?, &ns);
            create_pods(&pods, "p", BACKLOG).await?;
            let extra = [
                format!("{cost_flag}={COST_MS}ms"),
                format!("--capacity={CAPACITY}"),
            ];
            let procs = (0..n)
                .map(|i| Process::spawn_with(&program, cp.kubeconfig(), &ns, &format!("b{n}-{i}"), &extra, false))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let drained = until("the backlog drained", Duration::from_secs(120), || {
                let done: BTreeSet<String> = procs.iter().flat_map(Process::reconciled).collect();
                done.len() >= BACKLOG
            })
            .await;
            let rss: Vec<f64> = procs.iter().filter_map(Process::peak_rss_mib).collect();
            let rss = rss.iter().sum::<f64>() / rss.len().max(1) as f64;
            // Shards a process lost at their renew deadline (its renewals were late).
            let lost: usize = procs.iter().map(Process::leases_lost).sum();
            let done = procs.iter().flat_map(Process::reconciled).collect::<BTreeSet<_>>().len();
            drop(procs);
            let at_once = if cpu { (CAPACITY * n).min(cores) } else { CAPACITY * n };
            let ideal = (BACKLOG as f64) * (COST_MS as f64 / 1000.0) / (at_once as f64);
            match drained {
                Ok(took) => {
                    let secs = took.as_secs_f64();
                    println!(
                        "| {n} | {secs:.2} s | {:.0} | {ideal:.2} s | {rss:.1} MiB | {lost} |",
                        BACKLOG as f64 / secs
                    );
                }
                Err(_) => println!(
                    "| {n} | not within 120 s ({done} of {BACKLOG}) | – | {ideal:.2} s | {rss:.1} MiB | {lost} |"
                ),
            }
        }
        anyhow::Ok(())
    })
}

/// `--replicas [--pods N]`: the per-replica figures of 1 to 4 replicas, gated and not.
fn replicas(args: &[String]) -> anyhow::Result<()> {
    let (pods, gates) = pods_and_gates("--replicas", args)?;
    let program = build(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut rows = Vec::new();
        for gated in gates {
            let gate = if gated { "on" } else { "off" };
            let (cp, ns) = with_pods(gated, pods, "bench-replicas").await?;
            for n in 1..=4usize {
                // Pod watches open before the replicas start (none of theirs).
                let before = pod_watches(&cp).await?;
                let procs = (0..n)
                    .map(|i| {
                        Process::spawn_with(&program, cp.kubeconfig(), &ns, &format!("r{n}-{i}"), &[], false)
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let took = until("every pod reconciled", Duration::from_secs(900), || {
                    balanced(&procs) && {
                        let done: BTreeSet<String> = procs.iter().flat_map(Process::reconciled).collect();
                        done.len() >= pods
                    }
                })
                .await?;
                // The watches open once the last selection change has relisted.
                tokio::time::sleep(Duration::from_secs(2)).await;
                let watches = pod_watches(&cp).await?.saturating_sub(before);
                let rss: Vec<f64> = procs.iter().filter_map(Process::peak_rss_mib).collect();
                let mut received = Vec::new();
                for mut p in procs {
                    received.push(p.interrupt()? as f64 / (1024.0 * 1024.0));
                }
                let row = format!(
                    "| {gate} | {n} | {:.1} s | {} | {} | {watches} |",
                    took.as_secs_f64(),
                    spread(&rss),
                    spread(&received),
                );
                println!("{row}");
                rows.push(row);
            }
        }
        println!();
        println!(
            "{pods} pods, {SHARDS} shards, leases 3 s / 2 s / 500 ms; per replica: mean (min–max)"
        );
        println!("| gate | replicas | all reconciled after | peak RSS MiB | received MiB | replicas' pod watches on the API server |");
        println!("| --- | --- | --- | --- | --- | --- |");
        for row in rows {
            println!("{row}");
        }
        anyhow::Ok(())
    })
}

/// A control plane with the gate `ShardedListAndWatch` on or off, and a namespace named
/// after `prefix` holding `pods` pods as clusters hold them.
pub(crate) async fn with_pods(
    gated: bool,
    pods: usize,
    prefix: &str,
) -> anyhow::Result<(ControlPlane, String)> {
    let gate = if gated { "on" } else { "off" };
    println!("starting etcd and kube-apiserver, gate ShardedListAndWatch {gate}");
    let cp = ControlPlane::start_with(Options::default().sharded_list_and_watch(gated)).await?;
    let ns = cp.create_namespace(prefix).await?;
    let api: kube::Api<Pod> = kube::Api::namespaced(cp.client()?, &ns);
    let started = Instant::now();
    println!("creating {pods} pods as clusters hold them (two server-side applies each)");
    apply_realistic_pods(&api, "p", pods).await?;
    println!("  created in {:.0} s", started.elapsed().as_secs_f64());
    Ok((cp, ns))
}

/// `[--pods N] [--gate on|off]` after `mode`: N (10,000 by default) and the gates to run
/// (both by default).
pub(crate) fn pods_and_gates(mode: &str, args: &[String]) -> anyhow::Result<(usize, Vec<bool>)> {
    let (mut pods, mut gates) = (10_000, vec![true, false]);
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match (flag.as_str(), value.as_str()) {
            ("--pods", n) => pods = n.parse()?,
            ("--gate", "on") => gates = vec![true],
            ("--gate", "off") => gates = vec![false],
            _ => anyhow::bail!("{mode} takes --pods N and --gate on|off (got {args:?})"),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        anyhow::bail!("{mode} takes --pods N and --gate on|off (got {args:?})");
    }
    Ok((pods, gates))
}

/// `mean (min–max)` of `values`, to one decimal.
pub(crate) fn spread(values: &[f64]) -> String {
    spread_to(values, 1)
}

/// `mean (min–max)` of `values`, to `decimals` places.
pub(crate) fn spread_to(values: &[f64], decimals: usize) -> String {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() > 1 {
        format!("{mean:.decimals$} ({min:.decimals$}–{max:.decimals$})")
    } else {
        format!("{mean:.decimals$}")
    }
}

/// The pod watches the API server serves now (`apiserver_longrunning_requests`).
async fn pod_watches(cp: &ControlPlane) -> anyhow::Result<u64> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = cp.client()?.request_text(req).await?;
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{")
                && l.contains("resource=\"pods\"")
                && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}
