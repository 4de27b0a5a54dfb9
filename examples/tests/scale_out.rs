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
        Self::spawn_with(
            program,
            kubeconfig,
            namespace,
            id,
            &[&format!("--shards={SHARDS}")],
        )
    }

    fn spawn_with(
        program: &Path,
        kubeconfig: &Path,
        namespace: &str,
        id: &str,
        shards: &[&str],
    ) -> Self {
        let mut child = Command::new(program)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", namespace])
            .arg(format!("--identity={id}"))
            .args(shards)
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

    /// Stops it as a rolling update does (SIGINT: it releases its Leases), and waits.
    fn interrupt(&mut self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exited = self.child.wait().unwrap();
        assert!(exited.success(), "{} exited with {exited}", self.id);
    }

    /// Its reconciles: (pod key, (shard, count), from µs, to µs).
    fn reconciles(&self) -> Vec<(String, (u32, u32), u128, u128)> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("reconciled "))
            .map(|rest| {
                let f: Vec<&str> = rest.split(' ').collect();
                let field = |i: usize, name: &str| -> u128 {
                    f[i].strip_prefix(name).unwrap().parse().unwrap()
                };
                let (shard, count) = f[1]
                    .strip_prefix("shard=")
                    .and_then(|s| s.split_once('/'))
                    .unwrap();
                (
                    f[0].to_owned(),
                    (shard.parse().unwrap(), count.parse().unwrap()),
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

/// Waits until every pod in `pods` is reconciled, then checks that each reconcile was by a
/// holder of a shard containing the pod, of one of `counts`, and that no pod was reconciled
/// by two processes at once. When each pod was first reconciled (unix µs).
async fn check_reconciles(
    pods: &kube::Api<Pod>,
    ns: &str,
    everyone: &[&Process],
    counts: &[u32],
) -> BTreeMap<String, u128> {
    let listed: BTreeMap<String, Pod> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                format!("{ns}/{}", p.metadata.name.clone().unwrap_or_default()),
                p,
            )
        })
        .collect();
    until(
        "every pod reconciled",
        everyone,
        Duration::from_secs(30),
        || {
            let done: BTreeSet<String> = everyone
                .iter()
                .flat_map(|p| p.reconciles())
                .map(|r| r.0)
                .collect();
            listed.keys().all(|k| done.contains(k))
        },
    )
    .await;
    let mut by_pod: BTreeMap<String, Vec<(u128, u128, &str)>> = BTreeMap::new();
    for p in everyone {
        for (key, (shard, count), from, to) in p.reconciles() {
            let pod = listed.get(&key).expect("a pod of the test");
            assert!(
                counts.contains(&count)
                    && ShardSelector::index_of(ShardKey::Uid, shard, count)
                        .unwrap()
                        .matches(pod),
                "{key} by {} as shard {shard} of {count}",
                p.id
            );
            by_pod.entry(key).or_default().push((from, to, &p.id));
        }
    }
    let mut first = BTreeMap::new();
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
        first.insert(key, list[0].0);
    }
    first
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
    let everyone: Vec<&Process> = std::iter::once(&killed).chain(procs.iter()).collect();
    check_reconciles(&pods, &ns, &everyone, &[SHARDS]).await;
    println!(
        "scale-out: {created} pods; after the kill the shards were all held again in {:.2} s, \
         after the new start the shares were even in {:.2} s with {moves} moves",
        took.as_secs_f64(),
        took_join.as_secs_f64()
    );
}

/// The shards `processes` hold together, sorted.
fn all_held(processes: &[&Process]) -> Vec<u32> {
    let mut all: Vec<u32> = processes.iter().flat_map(|p| p.holding().0).collect();
    all.sort_unstable();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_shard_count_rolled_out_twelve_to_sixteen_to_eight_under_churn_never_overlaps() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let program = example_binary("kinformer-examples", "sharded_controller").unwrap();
    let ns = cp.create_namespace("reshard").await.unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(cp.client().unwrap(), &ns);
    let creating = tokio_util::sync::CancellationToken::new();
    // Each pod's key and when its creation returned (unix µs).
    let creator = tokio::spawn({
        let (pods, creating, ns) = (pods.clone(), creating.clone(), ns.clone());
        async move {
            let mut created = BTreeMap::new();
            while !creating.is_cancelled() {
                let name = format!("p-{}", created.len());
                pods.create(&PostParams::default(), &pod(&name))
                    .await
                    .unwrap();
                created.insert(format!("{ns}/{name}"), micros());
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            created
        }
    });
    let spawn =
        |id: &str, args: &[&str]| Process::spawn_with(&program, cp.kubeconfig(), &ns, id, args);

    let mut old: Vec<Process> = (0..3)
        .map(|i| spawn(&format!("a{i}"), &["--shards=12"]))
        .collect();
    {
        let all: Vec<&Process> = old.iter().collect();
        until("12 shards held", &all, Duration::from_secs(30), || {
            all_held(&all) == (0..12).collect::<Vec<_>>()
        })
        .await;
    }
    let mut stopped = Vec::new();
    let mut rollout_took = Vec::new();
    for (prefix, args, count) in [
        ("b", ["--shards=16", "--replacing=12"], 16u32),
        ("c", ["--shards=8", "--replacing=16"], 8),
    ] {
        // Replica by replica: the new one starts, and a few retries later an old one is
        // interrupted (it releases its Leases).
        let started = Instant::now();
        let mut new = Vec::new();
        for (i, mut o) in old.into_iter().enumerate() {
            new.push(spawn(&format!("{prefix}{i}"), &args));
            tokio::time::sleep(Duration::from_secs(2)).await;
            o.interrupt();
            stopped.push(o);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let all: Vec<&Process> = new.iter().collect();
        until(
            &format!("{count} shards held"),
            &all,
            Duration::from_secs(30),
            || all_held(&all) == (0..count).collect::<Vec<_>>(),
        )
        .await;
        rollout_took.push(started.elapsed());
        old = new;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    creating.cancel();
    let created = creator.await.unwrap();
    let everyone: Vec<&Process> = stopped.iter().chain(old.iter()).collect();
    let first = check_reconciles(&pods, &ns, &everyone, &[12, 16, 8]).await;
    // No pod waited long for an owner: at most the lease duration (3 s) after its creation,
    // plus a relist and a margin for a loaded machine.
    let waited = created
        .iter()
        .filter_map(|(key, at)| Some(first.get(key)?.saturating_sub(*at)))
        .max()
        .unwrap_or(0);
    assert!(
        waited < 8_000_000,
        "a pod waited {waited} µs for its first reconcile"
    );
    println!(
        "reshard: {} pods; 12 → 16 took {:.1} s, 16 → 8 {:.1} s (three replicas each, one \
         every 3 s); the longest wait from a pod's creation to its first reconcile {:.2} s",
        created.len(),
        rollout_took[0].as_secs_f64(),
        rollout_took[1].as_secs_f64(),
        Duration::from_micros(u64::try_from(waited).unwrap_or(u64::MAX)).as_secs_f64()
    );
}

fn micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}
