//! The Rust subject of `cargo xtask soak`: a pod informer of kinformer's
//! `SharedInformerFactory` over one namespace, run as its own process while the driver
//! churns pods and injects faults, so that its RSS, fds, threads and tasks are its own.
//!
//! ```text
//! kinformer-soak --kubeconfig PATH --namespace NS --fifo delta-fifo|in-order|in-order-atomic [--sample-ms MS] [--snapshot-dir DIR]
//! ```
//!
//! The informer has three handlers, each on its own listener:
//!
//! 1. a recorder, which notes every notification and hands it to a writer thread (so that
//!    printing never slows the handler);
//! 2. one that panics on every 7th event (the informer catches it and the listener goes
//!    on);
//! 3. one that sleeps 50 ms per event.
//!
//! It prints JSON lines on stdout, one object each, told apart by `"type"` (the Go peer,
//! `xtask/go/cmd/soak-peer`, prints the same):
//!
//! - `{"type":"synced","unix_ns"}` once the informer has synced;
//! - `{"type":"event","op":"add"|"update"|"delete","name","rv","tombstone","unix_ns"}` per
//!   notification the recorder got (`unix_ns`: when it got it);
//! - every `--sample-ms` (2000): `{"type":"sample","unix_ns","rss_kib","fds","threads",
//!   "tasks","recorded","panicky","slow","panics","lists","relists","watches"}`: `VmRSS`
//!   and `Threads` from `/proc/self/status`, the entries of `/proc/self/fd`, the Tokio
//!   runtime's alive tasks, the events each handler got, the panics thrown, and the
//!   reflector's lists (relists: lists after the first) and watches;
//! - on a `dump` line on stdin: `{"type":"dump","unix_ns","store":{name: rv},
//!   "last_sync_rv","relists","lists_by_reason":{reason: n},"recorded","panicky","slow",
//!   "panics"}`.
//!
//! With `--snapshot-dir` the factory keeps the informer's cache there (written every second
//! and at shutdown) and starts from it, its handlers told only what changed since
//! (`SnapshotStart::ChangesOnly`): the driver kills this subject at random and starts it
//! again (issue 40's chaos).
//!
//! On EOF on stdin it shuts the factory down and exits 0.

mod args;
mod handlers;
mod output;
mod proc_stats;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kinformer::compact_store::Cached;
use kinformer::core::MetaObject;
use kinformer::indexer::Indexer as _;
use kinformer::informer::{
    SharedIndexInformer, SharedInformerFactory, SnapshotOptions, SnapshotStart,
};
use serde_json::json;

use crate::args::Args;
use crate::handlers::{Counts, Recorder, panicky, slow};
use crate::output::{Out, unix_nanos};

/// How long the informer may take to sync at start.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// What the stdin thread asks of the main task.
enum Command {
    Dump,
    Exit,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    handlers::quiet_deliberate_panics();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (out, writer) = output::spawn_writer();
    let result = rt.block_on(run(args, out));
    // Every sender is gone once `run` returned: the writer drains and ends.
    if writer.join().is_err() {
        anyhow::bail!("the stdout writer thread panicked");
    }
    result
}

async fn run(args: Args, out: Out) -> anyhow::Result<()> {
    let kc = kube::config::Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    let mut factory = SharedInformerFactory::from_config(config)?
        .namespace(args.namespace.clone())
        .fifo(args.fifo);
    if let Some(dir) = &args.snapshot_dir {
        factory = factory.snapshots(
            SnapshotOptions::new(dir)
                .period(Duration::from_secs(1))
                .start(SnapshotStart::ChangesOnly),
        );
    }
    let factory = factory.build();
    let informer = factory.informer::<Pod>();
    let counts = Arc::new(Counts::default());
    informer.add_event_handler(Recorder::new(out.clone(), Arc::clone(&counts)))?;
    informer.add_event_handler(panicky(Arc::clone(&counts)))?;
    informer.add_event_handler(slow(Arc::clone(&counts)))?;
    factory.start()?;
    let report = factory.wait_for_cache_sync(SYNC_TIMEOUT).await;
    if !report.all_synced() {
        anyhow::bail!("the pod informer did not sync within {SYNC_TIMEOUT:?}: {report}");
    }
    out.send(json!({"type": "synced", "unix_ns": unix_nanos()}));

    let (commands, mut command_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                match line {
                    Ok(l) if l.trim() == "dump" => {
                        let _ = commands.send(Command::Dump);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            let _ = commands.send(Command::Exit);
        })
        .context("starting the stdin thread")?;

    let mut tick = tokio::time::interval(args.sample);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => out.send(sample(&informer, &counts)),
            command = command_rx.recv() => match command {
                Some(Command::Dump) => out.send(dump(&informer, &counts)),
                Some(Command::Exit) | None => break,
            },
        }
    }
    factory.shutdown().await?;
    Ok(())
}

/// Lists after the first, and lists by reason, from the informer's reflector counters.
fn lists(informer: &SharedIndexInformer<Cached<Pod>>) -> (u64, BTreeMap<&'static str, u64>) {
    let by_reason: BTreeMap<_, _> = informer.stats().reflector.lists.into_iter().collect();
    let total: u64 = by_reason.values().sum();
    (total.saturating_sub(1), by_reason)
}

fn sample(informer: &SharedIndexInformer<Cached<Pod>>, counts: &Counts) -> serde_json::Value {
    let status = proc_stats::status();
    let (relists, by_reason) = lists(informer);
    json!({
        "type": "sample",
        "unix_ns": unix_nanos(),
        "rss_kib": status.rss_kib,
        "fds": proc_stats::open_fds(),
        "threads": status.threads,
        "tasks": tokio::runtime::Handle::current().metrics().num_alive_tasks(),
        "recorded": counts.recorded(),
        "panicky": counts.panicky(),
        "slow": counts.slow(),
        "panics": counts.panics(),
        "lists": by_reason.values().sum::<u64>(),
        "relists": relists,
        "watches": informer.stats().reflector.watches,
    })
}

fn dump(informer: &SharedIndexInformer<Cached<Pod>>, counts: &Counts) -> serde_json::Value {
    let store: BTreeMap<String, String> = informer
        .indexer()
        .list()
        .iter()
        .map(|p| {
            (
                p.object_name().unwrap_or_default().to_owned(),
                p.object_resource_version().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let (relists, by_reason) = lists(informer);
    json!({
        "type": "dump",
        "unix_ns": unix_nanos(),
        "store": store,
        "last_sync_rv": informer.last_sync_resource_version(),
        "relists": relists,
        "lists_by_reason": by_reason,
        "recorded": counts.recorded(),
        "panicky": counts.panicky(),
        "slow": counts.slow(),
        "panics": counts.panics(),
    })
}
