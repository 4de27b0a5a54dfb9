//! The sharded pod controller (`examples/sharded_controller.rs`) scaled out over processes on
//! the real API server: three processes share twelve shards while pods are created all along;
//! one is killed (SIGKILL: its Leases expire, nothing is released) and later a new one
//! starts. Every pod is reconciled, each only by a holder of its shard, no pod is reconciled
//! by two processes at once (each reconcile prints its shard and its interval), the killed
//! process's shards are taken within the lease duration plus a few retries, and the new
//! process gets its share with exactly the moves it needs, no more.
//!
//! Short timings keep it quick: lease 3 s, renew deadline 2 s, retry 500 ms, one move per
//! second per process.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer::reflector::{ShardKey, ShardSelector};
use kinformer_testenv::{ControlPlane, example_binary, pod};
use kube::api::{ListParams, PostParams};

const SHARDS: u32 = 12;

/// One process and the lines it printed.
struct Process {
    id: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Process {
    fn spawn(program: &Path, kubeconfig: &Path, namespace: &str, id: &str) -> Self {
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
                "--reconcile-cost=2ms",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("piped stdout");
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        Self {
            id: id.to_owned(),
            child,
            lines,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The shards it holds and the moves it made, from its last `holding` line.
    fn holding(&self) -> (Vec<u32>, u64) {
        let lines = self.lines();
        let Some(last) = lines.iter().rev().find(|l| l.starts_with("holding [")) else {
            return (Vec::new(), 0);
        };
        let inside = &last["holding [".len()..last.find(']').unwrap_or(0)];
        let held = inside
            .split(", ")
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        let moves = last
            .rsplit("; ")
            .next()
            .and_then(|s| s.strip_suffix(" moves"))
            .map_or(0, |n| n.parse().unwrap());
        (held, moves)
    }

    /// Its reconciles: (pod key, shard, from µs, to µs).
    fn reconciles(&self) -> Vec<(String, u32, u128, u128)> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("reconciled "))
            .map(|rest| {
                let f: Vec<&str> = rest.split(' ').collect();
                let field = |i: usize, name: &str| -> u128 {
                    f[i].strip_prefix(name).unwrap().parse().unwrap()
                };
                (
                    f[0].to_owned(),
                    u32::try_from(field(1, "shard=")).unwrap(),
                    field(2, "from="),
                    field(3, "to="),
                )
            })
            .collect()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every shard held by exactly one of `processes`, `share` each (sorted).
fn balanced(processes: &[&Process], share: &[usize]) -> bool {
    let held: Vec<Vec<u32>> = processes.iter().map(|p| p.holding().0).collect();
    let mut all: Vec<u32> = held.iter().flatten().copied().collect();
    all.sort_unstable();
    let mut sizes: Vec<usize> = held.iter().map(Vec::len).collect();
    sizes.sort_unstable();
    all == (0..SHARDS).collect::<Vec<_>>() && sizes == share
}

async fn until(
    what: &str,
    processes: &[&Process],
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> Duration {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > timeout {
            let dump: Vec<String> = processes
                .iter()
                .map(|p| {
                    let lines = p.lines();
                    let tail: Vec<&String> = lines
                        .iter()
                        .filter(|l| !l.starts_with("reconciled "))
                        .collect();
                    format!("--- {} ---\n{tail:#?}", p.id)
                })
                .collect();
            panic!("timed out waiting for {what}:\n{}", dump.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn three_processes_share_twelve_shards_through_a_kill_and_a_new_start() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let program = example_binary("kinformer-examples", "sharded_controller").unwrap();
    let ns = cp.create_namespace("scale-out").await.unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(cp.client().unwrap(), &ns);

    let creating = tokio_util::sync::CancellationToken::new();
    let creator = tokio::spawn({
        let (pods, creating) = (pods.clone(), creating.clone());
        async move {
            let mut n = 0;
            while !creating.is_cancelled() {
                pods.create(&PostParams::default(), &pod(&format!("p-{n}")))
                    .await
                    .unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            n
        }
    });

    let mut procs: Vec<Process> = (0..3)
        .map(|i| Process::spawn(&program, cp.kubeconfig(), &ns, &format!("r{i}")))
        .collect();
    {
        let all: Vec<&Process> = procs.iter().collect();
        until("4/4/4", &all, Duration::from_secs(30), || {
            balanced(&all, &[4, 4, 4])
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Kill r0: its shards expire (3 s after its last renewal) and r1, r2 take them.
    let mut killed = procs.remove(0);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let moves_before: u64 = procs.iter().map(|p| p.holding().1).sum();
    let took = {
        let all: Vec<&Process> = procs.iter().collect();
        until("6/6 after the kill", &all, Duration::from_secs(15), || {
            balanced(&all, &[6, 6])
        })
        .await
    };
    // The lease duration plus a few retries of 500 ms.
    assert!(took < Duration::from_secs(3 + 3), "took {took:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // r3 starts: r1 and r2 give up two shards each, one per second at most.
    procs.push(Process::spawn(&program, cp.kubeconfig(), &ns, "r3"));
    let took_join = {
        let all: Vec<&Process> = procs.iter().collect();
        until(
            "4/4/4 after r3 joined",
            &all,
            Duration::from_secs(20),
            || balanced(&all, &[4, 4, 4]),
        )
        .await
    };
    let moves: u64 = procs.iter().map(|p| p.holding().1).sum::<u64>() - moves_before;
    assert_eq!(moves, 4, "exactly the moves needed");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Every pod reconciled, by a holder of its shard, never by two processes at once.
    creating.cancel();
    let created = creator.await.unwrap();
    let listed = pods.list(&ListParams::default()).await.unwrap().items;
    let shard_of: BTreeMap<String, u32> = listed
        .iter()
        .map(|p| {
            let key = format!("{ns}/{}", p.metadata.name.clone().unwrap_or_default());
            let shard = (0..SHARDS)
                .find(|i| {
                    ShardSelector::index_of(ShardKey::Uid, *i, SHARDS)
                        .unwrap()
                        .matches(p)
                })
                .unwrap();
            (key, shard)
        })
        .collect();
    let everyone: Vec<&Process> = std::iter::once(&killed).chain(procs.iter()).collect();
    until(
        "every pod reconciled",
        &everyone,
        Duration::from_secs(20),
        || {
            let done: BTreeSet<String> = everyone
                .iter()
                .flat_map(|p| p.reconciles())
                .map(|r| r.0)
                .collect();
            shard_of.keys().all(|k| done.contains(k))
        },
    )
    .await;
    let mut by_pod: BTreeMap<String, Vec<(u128, u128, &str)>> = BTreeMap::new();
    for p in &everyone {
        for (key, shard, from, to) in p.reconciles() {
            assert_eq!(
                shard_of.get(&key),
                Some(&shard),
                "{key} by {} as shard {shard}",
                p.id
            );
            by_pod.entry(key).or_default().push((from, to, &p.id));
        }
    }
    for (key, mut list) in by_pod {
        list.sort_unstable();
        for w in list.windows(2) {
            assert!(
                w[0].2 == w[1].2 || w[0].1 <= w[1].0,
                "{key} reconciled by {} and {} at once: {w:?}",
                w[0].2,
                w[1].2
            );
        }
    }
    println!(
        "scale-out: {created} pods; after the kill the shards were all held again in {:.2} s, \
         after the new start the shares were even in {:.2} s with {moves} moves",
        took.as_secs_f64(),
        took_join.as_secs_f64()
    );
}
