//! The pod controller under leader election, kinformer's (`examples/pod_controller.rs
//! --leader-elect`) and client-go's (`xtask/go/cmd/controller-peer`) side by side on the real
//! API server, with client-go's default timings (lease 15 s, renew deadline 10 s, retry 2 s):
//! three replicas each (in a namespace of their own, one Lease each), only the leader
//! reconciles, the leader is killed (SIGKILL: no release), and a standby whose cache was
//! synced long before takes over. The time from the kill to the new leader's first reconcile
//! is printed for both.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_testenv::{ControlPlane, create_pods, example_binary, peer_binary};

/// Pods per namespace: the new leader must reconcile every one of them.
const PODS: usize = 20;

/// One replica process and the lines it printed, each with when it was read.
struct Replica {
    id: String,
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl Replica {
    fn spawn(program: &Path, kubeconfig: &Path, namespace: &str, id: &str) -> Self {
        let mut child = Command::new(program)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", namespace, "--leader-elect"])
            .arg(format!("--leader-elect-identity={id}"))
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
                    .push((Instant::now(), line));
            }
        });
        Self {
            id: id.to_owned(),
            child,
            lines,
        }
    }

    /// When it first printed a line containing `text`.
    fn first(&self, text: &str) -> Option<Instant> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(_, l)| l.contains(text))
            .map(|(t, _)| *t)
    }

    /// The pods it reconciled after `since`.
    fn reconciled_since(&self, since: Instant) -> Vec<String> {
        let mut pods: Vec<String> = self
            .lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(t, _)| *t >= since)
            .filter_map(|(_, l)| l.strip_prefix("processing pod "))
            .filter_map(|rest| rest.split(',').next())
            .map(str::to_owned)
            .collect();
        pods.sort();
        pods.dedup();
        pods
    }

    fn output(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three replicas of one implementation, in their namespace.
struct Side {
    name: &'static str,
    replicas: Vec<Replica>,
}

impl Side {
    fn leader(&self) -> Option<usize> {
        let leading: Vec<usize> = (0..self.replicas.len())
            .filter(|&i| {
                let r = &self.replicas[i];
                r.first("leader election: started leading").is_some()
                    && r.first("leader election: stopped leading").is_none()
            })
            .collect();
        assert!(leading.len() <= 1, "{}: two leaders at once", self.name);
        leading.first().copied()
    }

    fn dump(&self) -> String {
        self.replicas
            .iter()
            .map(|r| format!("--- {} ---\n{}", r.id, r.output()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

async fn until(what: &str, sides: &[&Side], timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > timeout {
            let dumps: Vec<String> = sides.iter().map(|s| s.dump()).collect();
            panic!("timed out waiting for {what}:\n{}", dumps.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn side(cp: &ControlPlane, name: &'static str, program: &Path) -> Side {
    let namespace = cp
        .create_namespace(&format!("failover-{name}"))
        .await
        .unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(cp.client().unwrap(), &namespace);
    create_pods(&pods, "p", PODS).await.unwrap();
    let replicas = (0..3)
        .map(|i| Replica::spawn(program, cp.kubeconfig(), &namespace, &format!("{name}-{i}")))
        .collect();
    Side { name, replicas }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_standby_with_a_synced_cache_takes_over_from_a_killed_leader() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let rust: PathBuf = example_binary("kinformer-examples", "pod_controller").unwrap();
    let go: PathBuf = peer_binary("controller-peer").unwrap();
    let mut sides = [
        side(cp, "kinformer", &rust).await,
        side(cp, "client-go", &go).await,
    ];

    // Every replica syncs its cache; one per side leads and reconciles every pod; the
    // standbys reconcile nothing.
    {
        let [k, c] = &sides;
        until(
            "every cache synced and a leader per side that reconciled every pod",
            &[k, c],
            Duration::from_secs(60),
            || {
                sides.iter().all(|s| {
                    s.replicas.iter().all(|r| r.first("cache synced").is_some())
                        && s.leader().is_some_and(|i| {
                            s.replicas[i]
                                .reconciled_since(Instant::now() - Duration::from_secs(3600))
                                .len()
                                == PODS
                        })
                })
            },
        )
        .await;
    }
    for s in &sides {
        let leader = s.leader().unwrap();
        for (i, r) in s.replicas.iter().enumerate() {
            if i != leader {
                assert!(
                    r.first("processing pod").is_none(),
                    "{}: standby {} reconciled\n{}",
                    s.name,
                    r.id,
                    s.dump()
                );
            }
        }
    }

    // Let the standbys sit a while (warm), then kill both leaders at the same moment.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed: Vec<usize> = sides.iter().map(|s| s.leader().unwrap()).collect();
    let kill = Instant::now();
    for (s, &i) in sides.iter_mut().zip(&killed) {
        let r = &mut s.replicas[i];
        r.child.kill().unwrap();
        r.child.wait().unwrap();
    }

    let new_leader = |s: &Side, killed: usize| {
        (0..3).find(|&i| {
            i != killed
                && s.replicas[i]
                    .first("leader election: started leading")
                    .is_some()
        })
    };
    {
        let [k, c] = &sides;
        until(
            "a new leader per side that reconciled every pod",
            &[k, c],
            Duration::from_secs(60),
            || {
                sides.iter().zip(&killed).all(|(s, &dead)| {
                    new_leader(s, dead)
                        .is_some_and(|i| s.replicas[i].reconciled_since(kill).len() == PODS)
                })
            },
        )
        .await;
    }

    let mut report = Vec::new();
    for (s, &dead) in sides.iter().zip(&killed) {
        let i = new_leader(s, dead).unwrap();
        let r = &s.replicas[i];
        let synced = r.first("cache synced").unwrap();
        let leading = r.first("leader election: started leading").unwrap();
        let first = r
            .lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(t, l)| *t >= kill && l.starts_with("processing pod "))
            .map(|(t, _)| *t)
            .unwrap();
        // The cache was warm: synced before the leader died, not after the takeover.
        assert!(
            synced < kill,
            "{}: {} synced only after the kill",
            s.name,
            r.id
        );
        // Not before the lease could expire (15 s after the last renewal, which was at most
        // one retry period, 2 s, before the kill, less a request's latency), not much after
        // it either (the retry period with jitter, 4.4 s, plus scheduling).
        let took = first - kill;
        assert!(took >= Duration::from_secs(12), "{}: {took:?}", s.name);
        assert!(
            took <= Duration::from_secs(25),
            "{}: {took:?}\n{}",
            s.name,
            s.dump()
        );
        report.push(format!(
            "{:<10} kill → leading {:>6.2} s, kill → first reconcile {:>6.2} s, {PODS} pods reconciled by {} (cache synced {:.1} s before the kill)",
            s.name,
            (leading - kill).as_secs_f64(),
            took.as_secs_f64(),
            r.id,
            (kill - synced).as_secs_f64(),
        ));
    }
    println!(
        "failover with client-go's default timings (lease 15 s, renew deadline 10 s, retry 2 s):"
    );
    for line in report {
        println!("  {line}");
    }
}
