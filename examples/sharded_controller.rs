//! One pod controller across several processes: the pods split into shards by the hash of
//! their uid, each shard held by one process at a time through a Lease
//! (`kinformer::sharding`), each process holding its fair share and running one informer
//! over all the shards it holds (its selection follows the shards it takes and gives up),
//! and one controller per held shard on it.
//!
//! ```text
//! cargo run --example sharded_controller -- --kubeconfig K [-n default] [--shards=12]
//!     [--replacing=16,...] [--identity=ID] [--lease-duration=15s] [--renew-deadline=10s] [--retry-period=2s]
//!     [--max-moves=2] [--move-period=15s] [--reconcile-cost=0ms] [--reconcile-cpu=0ms]
//!     [--capacity=N]
//! ```
//!
//! Start three against one cluster (`cargo xtask controlplane up` prints a kubeconfig), kill
//! one, start another: the shards move. Every line is one of:
//!
//! ```text
//! sharded controller ID: 12 shards on Leases NS/pods-shard-<i>-of-12
//! holding [0, 3, 7, 9] of 12; 3 live replicas; 0 moves
//! shard 3 held
//! reconciled NS/p-17 shard=3/12 from=<unix µs> to=<unix µs>
//! shard 3 stopped
//! received 1234567 bytes
//! ```
//!
//! `--replacing` names the shard counts this process's count replaces, when a new count
//! rolls out over running processes (`ShardingConfig::replacing`). Interrupted (SIGINT),
//! the process stops its shards' work and releases their Leases before it exits.
//!
//! Each reconcile prints its shard (index/count) and its interval (wall clock, microseconds), so that
//! `tests/scale_out.rs` can check that no pod was reconciled by two processes at once.
//! `--reconcile-cost` makes each reconcile wait that long (an I/O-bound reconcile), and
//! `--reconcile-cpu` makes each reconcile burn that much of a thread's CPU time (a
//! CPU-bound reconcile, on Tokio's blocking pool: on a runtime worker it would starve the
//! Lease renewals), and `--capacity=N` lets
//! at most N reconciles run at once in the process, whatever shards it holds (what one
//! replica can do at once): `cargo xtask bench sharding [--cpu]` drains a backlog with 1 to 6
//! processes this way.
#![allow(clippy::print_stdout)]

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Args, BoxError, parse_duration, start};
use k8s_openapi::api::core::v1::Pod;
use kinformer::leaderelection::LeaseLock;
use kinformer::prelude::*;
use kinformer::reflector::ShardKey;
use kinformer::sharding::{Shard, ShardManager, ShardingConfig};
use kube::Api;
use tokio::sync::Semaphore;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let cluster = start(&args).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let config = config(&args)?;
    let identity = args
        .value("--identity")
        .map_or_else(|| format!("sharded-{}", std::process::id()), str::to_owned);
    let cost = duration(&args, "--reconcile-cost")?.unwrap_or_default();
    let cpu = duration(&args, "--reconcile-cpu")?.unwrap_or_default();
    let capacity = args
        .value("--capacity")
        .map(|n| n.parse::<usize>().map(|n| Arc::new(Semaphore::new(n))))
        .transpose()?;

    let client = cluster.client.clone();
    let (lease_ns, me) = (namespace.clone(), identity.clone());
    let manager = Arc::new(ShardManager::new(config.clone(), move |lease: &str| {
        LeaseLock::new(client.clone(), &lease_ns, lease, &me)
    })?);
    println!(
        "sharded controller {identity}: {} shards on Leases {namespace}/{}-shard-<i>-of-{}",
        config.shards, config.name, config.shards
    );

    // What the process holds, printed when it changes.
    let watched = Arc::clone(&manager);
    tokio::spawn(async move {
        let mut last = None;
        loop {
            let now = (watched.held(), watched.live_replicas(), watched.moves());
            if last.as_ref() != Some(&now) {
                println!(
                    "holding {:?} of {}; {} live replicas; {} moves",
                    now.0,
                    watched.config().shards,
                    now.1,
                    now.2
                );
                last = Some(now);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    // One informer for every shard held: the manager widens its selection before a shard's
    // work starts and narrows it once the work has ended.
    let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(cluster.client.clone(), &namespace));
    let received = pods.clone();
    let informer = SharedIndexInformer::builder(pods)
        .shards(manager.selection(ShardKey::Uid))
        .build();
    let running = informer.start()?;
    manager
        .run(&shutdown, move |shard: Shard| {
            let (informer, capacity) = (informer.clone(), capacity.clone());
            async move {
                if let Err(e) = run_shard(&informer, &shard, (cost, cpu), capacity).await {
                    println!("shard {}: {e}", shard.index());
                }
            }
        })
        .await?;
    running.stop().await?;
    println!("received {} bytes", received.bytes_received());
    Ok(())
}

/// One held shard: a controller over the shard's objects of the replica's informer, until
/// the shard is lost.
async fn run_shard(
    informer: &SharedIndexInformer<Pod>,
    shard: &Shard,
    (cost, cpu): (Duration, Duration),
    capacity: Option<Arc<Semaphore>>,
) -> Result<(), BoxError> {
    println!("shard {} held", shard.index());
    let controller =
        Controller::<ObjectKey>::new(format!("pods-shard-{}", shard.index())).workers(2);
    let selector = shard.selector(ShardKey::Uid);
    let registration = controller.watch_where(informer, move |pod: &Pod| selector.matches(pod))?;
    let context = Cost {
        shard: (shard.index(), shard.count()),
        cost,
        cpu,
        capacity,
    };
    controller.run_shard(shard, reconcile, context).await;
    registration.remove();
    println!("shard {} stopped", shard.index());
    Ok(())
}

/// What a reconcile needs: its shard, its cost (waited, and burnt on the CPU), the
/// process's capacity.
struct Cost {
    shard: (u32, u32),
    cost: Duration,
    cpu: Duration,
    capacity: Option<Arc<Semaphore>>,
}

/// Prints the pod's key, its shard and when the reconcile ran.
async fn reconcile(key: ObjectKey, ctx: Context<Cost>) -> Result<Action, BoxError> {
    let Cost {
        shard,
        cost,
        cpu,
        capacity,
    } = &*ctx;
    let _permit = match capacity {
        Some(c) => Some(c.acquire().await?),
        None => None,
    };
    if !ctx.is_leading() {
        return Ok(Action::Done); // the shard's next holder does it
    }
    let from = micros();
    if !cost.is_zero() {
        tokio::time::sleep(*cost).await;
    }
    if !cpu.is_zero() {
        // Off the runtime's worker threads: burnt on them, it would hold up the tasks that
        // renew the shard Leases, and the process would lose its shards at their renew
        // deadline (`cargo xtask bench sharding --cpu` measured that first).
        let cpu = *cpu;
        tokio::task::spawn_blocking(move || burn(cpu)).await?;
    }
    println!(
        "reconciled {key} shard={}/{} from={from} to={}",
        shard.0,
        shard.1,
        micros()
    );
    Ok(Action::Done)
}

/// Burns `cpu` of this thread's CPU time (as a CPU-bound reconcile does). Linux counts it in `/proc/thread-self/schedstat`; elsewhere wall time stands in.
fn burn(cpu: Duration) {
    let (start, wall) = (thread_cpu(), std::time::Instant::now());
    let mut x = 0u64;
    loop {
        for i in 0..20_000u64 {
            x = x.wrapping_mul(0x0100_0000_01b3).wrapping_add(i);
        }
        std::hint::black_box(x);
        let spent = match (start, thread_cpu()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => wall.elapsed(),
        };
        if spent >= cpu {
            return;
        }
    }
}

/// This thread's time on the CPU so far (Linux).
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn duration(args: &Args, flag: &str) -> Result<Option<Duration>, BoxError> {
    args.value(flag)
        .map(|v| {
            parse_duration(v)
                .ok_or_else(|| format!("{flag}: {v:?} is not a duration like 15s or 500ms").into())
        })
        .transpose()
}

fn config(args: &Args) -> Result<ShardingConfig, BoxError> {
    let shards = args.value("--shards").map_or(Ok(12), str::parse)?;
    let mut config = ShardingConfig::new("pods", shards);
    for (flag, field) in [
        ("--lease-duration", &mut config.timing.lease_duration),
        ("--renew-deadline", &mut config.timing.renew_deadline),
        ("--retry-period", &mut config.timing.retry_period),
        ("--move-period", &mut config.move_period),
    ] {
        if let Some(d) = duration(args, flag)? {
            *field = d;
        }
    }
    if let Some(counts) = args.value("--replacing") {
        config.previous = counts
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()?;
    }
    if let Some(n) = args.value("--max-moves") {
        config.max_moves = n.parse()?;
    }
    config.validate()?;
    Ok(config)
}
