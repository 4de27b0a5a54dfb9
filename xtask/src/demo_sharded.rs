//! `cargo xtask demo --replicas N`: the sharded pod controller (`examples/sharded_controller.rs`)
//! as N processes on a fresh local control plane with the gate `ShardedListAndWatch` on. They
//! split twelve shards; one is killed and its shards move; a new one starts and gets its
//! share; every pod is reconciled. Short lease timings (3 s / 2 s / 500 ms) keep it quick.
//!
//! `cargo xtask bench sharding` (`bench_sharding.rs`) runs the same processes.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kinformer_testenv::{ControlPlane, Options, create_pods};

pub(crate) const SHARDS: u32 = 12;
const PODS: usize = 60;

/// One controller process: what it printed, its reconciles kept apart.
pub(crate) struct Process {
    id: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reconciled: Arc<Mutex<BTreeSet<String>>>,
    reconciles: Arc<Mutex<Vec<Reconcile>>>,
}

/// One reconcile a process printed: `reconciled <key> shard=<i>/<n> from=<µs> to=<µs>`.
#[derive(Clone, Debug)]
pub(crate) struct Reconcile {
    pub(crate) key: String,
    pub(crate) shard: u32,
    /// When it began and ended, unix µs.
    pub(crate) from: u128,
    pub(crate) to: u128,
}

impl Reconcile {
    /// The reconcile of a line's text after `reconciled `.
    fn parse(rest: &str) -> Option<Self> {
        let mut fields = rest.split(' ');
        let key = fields.next()?.to_owned();
        let shard = fields
            .next()?
            .strip_prefix("shard=")?
            .split('/')
            .next()?
            .parse()
            .ok()?;
        let from = fields.next()?.strip_prefix("from=")?.parse().ok()?;
        let to = fields.next()?.strip_prefix("to=")?.parse().ok()?;
        Some(Self {
            key,
            shard,
            from,
            to,
        })
    }
}

impl Process {
    fn spawn(program: &Path, kubeconfig: &Path, namespace: &str, id: &str) -> anyhow::Result<Self> {
        Self::spawn_with(program, kubeconfig, namespace, id, &[], true)
    }

    pub(crate) fn spawn_with(
        program: &Path,
        kubeconfig: &Path,
        namespace: &str,
        id: &str,
        extra: &[String],
        echo: bool,
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(program)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", namespace])
            .arg(format!("--identity={id}"))
            .arg(format!("--shards={SHARDS}"))
            .args([
                "--lease-duration=3s",
                "--renew-deadline=2s",
                "--retry-period=500ms",
                "--max-moves=1",
                "--move-period=1s",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdout = child.stdout.take().context("the child's stdout")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reconciled = Arc::new(Mutex::new(BTreeSet::new()));
        let reconciles = Arc::new(Mutex::new(Vec::new()));
        let (sink, done, who) = (Arc::clone(&lines), Arc::clone(&reconciled), id.to_owned());
        let each = Arc::clone(&reconciles);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("reconciled ") {
                    if let Some(r) = Reconcile::parse(rest) {
                        done.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(r.key.clone());
                        each.lock().unwrap_or_else(PoisonError::into_inner).push(r);
                    }
                    continue;
                }
                if echo && (line.starts_with("holding [") || line.starts_with("sharded controller"))
                {
                    println!("  [{who}] {line}");
                }
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        if echo {
            println!("started {id}");
        }
        Ok(Self {
            id: id.to_owned(),
            child,
            lines,
            reconciled,
            reconciles,
        })
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Kills it (SIGKILL: its Leases expire, nothing is released) and waits for it.
    pub(crate) fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Interrupts it (SIGINT: it releases its Leases and prints the bytes its informer
    /// received) and waits for it to exit; those bytes.
    pub(crate) fn interrupt(&mut self) -> anyhow::Result<u64> {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .context("running kill")?;
        anyhow::ensure!(status.success(), "kill -INT {} failed", self.id);
        let exited = self.child.wait()?;
        anyhow::ensure!(exited.success(), "{} exited with {exited}", self.id);
        // The reader thread may still be on the last lines.
        let start = Instant::now();
        loop {
            let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
            let received = lines.iter().rev().find_map(|l| {
                l.strip_prefix("received ")?
                    .strip_suffix(" bytes")?
                    .parse()
                    .ok()
            });
            if let Some(bytes) = received {
                return Ok(bytes);
            }
            drop(lines);
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(5),
                "{} printed no `received N bytes` line",
                self.id
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process's peak RSS so far (`VmHWM`), in MiB (Linux).
    pub(crate) fn peak_rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }

    /// How many Leases it lost (its log's `Lease lost` warnings).
    pub(crate) fn leases_lost(&self) -> usize {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().filter(|l| l.contains("Lease lost")).count()
    }

    /// The shards it holds, from its last `holding` line.
    pub(crate) fn held(&self) -> Vec<u32> {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("holding ["))
            .and_then(|rest| rest.split(']').next())
            .map(|inside| inside.split(", ").filter_map(|s| s.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Its reconciles that began after `since` (unix µs), in the order it printed them.
    pub(crate) fn reconciles_since(&self, since: u128) -> Vec<Reconcile> {
        let all = self
            .reconciles
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Printed as each ended, so the newest are last: look back only as far as `since`.
        let mut recent: Vec<Reconcile> = all
            .iter()
            .rev()
            .take_while(|r| r.to > since)
            .filter(|r| r.from > since)
            .cloned()
            .collect();
        recent.reverse();
        recent
    }

    pub(crate) fn reconciled(&self) -> BTreeSet<String> {
        self.reconciled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every shard held by exactly one process, and shares that differ by one at most.
pub(crate) fn balanced(processes: &[Process]) -> bool {
    let held: Vec<Vec<u32>> = processes.iter().map(Process::held).collect();
    let mut all: Vec<u32> = held.iter().flatten().copied().collect();
    all.sort_unstable();
    let sizes = held.iter().map(Vec::len);
    let (min, max) = (sizes.clone().min(), sizes.max());
    all == (0..SHARDS).collect::<Vec<_>>() && max.zip(min).is_some_and(|(a, b)| a - b <= 1)
}

pub(crate) async fn until(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > timeout {
            anyhow::bail!("{what}: not within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(start.elapsed())
}

/// Builds the control plane and the example (optimised with `release`); the example's path.
pub(crate) fn build(release: bool) -> anyhow::Result<std::path::PathBuf> {
    crate::controlplane::build(&crate::controlplane::CONTROL_PLANE, false)?;
    println!("building the sharded pod controller (examples/sharded_controller.rs)");
    let mut args = vec![
        "build",
        "--package",
        "kinformer-examples",
        "--example",
        "sharded_controller",
    ];
    if release {
        args.push("--release");
    }
    let status = crate::cargo::command(&args)
        .status()
        .context("running cargo")?;
    anyhow::ensure!(status.success(), "building the example failed ({status})");
    Ok(crate::cargo::target_dir()
        .join(if release { "release" } else { "debug" })
        .join("examples")
        .join("sharded_controller"))
}

/// Runs the demo with `replicas` processes.
pub(crate) fn run(replicas: usize) -> anyhow::Result<()> {
    anyhow::ensure!(replicas >= 1, "at least one replica");
    let program = build(false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(demo(&program, replicas))
}

async fn demo(program: &Path, replicas: usize) -> anyhow::Result<()> {
    println!("starting etcd and kube-apiserver with the feature gate ShardedListAndWatch");
    let cp = ControlPlane::start_with(Options::default().sharded_list_and_watch(true)).await?;
    let ns = cp.create_namespace("demo-sharding").await?;
    let pods: kube::Api<Pod> = kube::Api::namespaced(cp.client()?, &ns);
    create_pods(&pods, "a", PODS).await?;
    println!(
        "created {PODS} pods in {ns}; starting {replicas} controller processes over {SHARDS} shards"
    );
    let mut procs = Vec::new();
    for i in 0..replicas {
        procs.push(Process::spawn(
            program,
            cp.kubeconfig(),
            &ns,
            &format!("r{i}"),
        )?);
    }
    let took = until("the shards split evenly", Duration::from_secs(60), || {
        balanced(&procs)
    })
    .await?;
    println!("the shards are split evenly ({:.1} s)", took.as_secs_f64());
    create_pods(&pods, "b", PODS).await?;
    println!("created {PODS} more pods");
    let all_reconciled = |procs: &[Process], dead: &[Process]| {
        let done: BTreeSet<String> = procs
            .iter()
            .chain(dead)
            .flat_map(Process::reconciled)
            .collect();
        done.len() >= 2 * PODS
    };
    until("every pod reconciled", Duration::from_secs(30), || {
        all_reconciled(&procs, &[])
    })
    .await?;
    println!("every pod reconciled");

    let mut dead = Vec::new();
    if procs.len() >= 2 {
        let mut killed = procs.remove(0);
        killed.kill()?;
        println!(
            "killed {} (SIGKILL: its Leases expire after 3 s, nothing is released)",
            killed.id
        );
        dead.push(killed);
        let took = until(
            "the killed process's shards taken",
            Duration::from_secs(30),
            || balanced(&procs),
        )
        .await?;
        println!("its shards were taken over in {:.1} s", took.as_secs_f64());
    }
    procs.push(Process::spawn(
        program,
        cp.kubeconfig(),
        &ns,
        &format!("r{replicas}"),
    )?);
    let took = until("the new process's share", Duration::from_secs(30), || {
        balanced(&procs)
    })
    .await?;
    println!(
        "r{replicas} got its share in {:.1} s (at most one shard given up per process per second)",
        took.as_secs_f64()
    );
    let summary: Vec<String> = procs
        .iter()
        .chain(&dead)
        .map(|p| format!("{} {}", p.id, p.reconciled().len()))
        .collect();
    println!("pods reconciled per process: {}", summary.join(", "));
    Ok(())
}
