//! The examples, run end to end against the real etcd + kube-apiserver of
//! kinformer-testenv, each in a namespace of its own; the pod controller's `--demo` run is
//! what `cargo xtask demo` shows, and its output is checked here. Run with `cargo xtask
//! test` (or `cargo test -p kinformer-examples --test examples -- --include-ignored` once
//! the control plane is built). `cli_controller` runs as a process (its command line and its
//! signals are what it shows); its `--help` and its SIGTERM before the cache syncs need no
//! control plane.
// Each example includes the shared `common` module; here they are three modules of one crate.
#![allow(clippy::duplicate_mod)]

#[path = "../cronjob_controller.rs"]
#[allow(dead_code, unreachable_pub)]
mod cronjob_controller;
#[path = "../custom_index.rs"]
#[allow(dead_code, unreachable_pub)]
mod custom_index;
#[path = "../pod_controller.rs"]
#[allow(dead_code, unreachable_pub)]
mod pod_controller;
/// The pod controller on recorded streams (no cluster, and one recorded live).
mod replay;
#[path = "../swap_layers.rs"]
#[allow(dead_code, unreachable_pub)]
mod swap_layers;
#[path = "../widget_controller.rs"]
#[allow(dead_code, unreachable_pub)]
mod widget_controller;

use kinformer::reflector::reflector_client;
use kinformer_testenv::ControlPlane;

async fn client_and_namespace(prefix: &str) -> (kube::Client, String) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace(prefix).await.unwrap();
    (reflector_client(cp.admin_config()).unwrap(), ns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_demo_sees_its_pods_queries_an_update_and_a_delete() {
    let (client, ns) = client_and_namespace("demo").await;
    let out = pod_controller::Output::capture();
    let summary = pod_controller::demo(client, &ns, &out).await.unwrap();
    let lines = out.lines();
    let has = |want: &str| {
        assert!(
            lines.iter().any(|l| l == want),
            "missing {want:?} in:\n{}",
            lines.join("\n")
        );
    };
    has(&format!("created 4 pods in {ns} on node-a and node-b"));
    has(&format!("cache synced: pods.v1 ({ns}): synced"));
    for name in ["web-0", "web-1", "cache-0", "cache-1"] {
        has(&format!("processing pod {ns}/{name}, phase: Pending"));
    }
    has(&format!("lister: 4 pods in {ns}"));
    has(r#"lister: app=nginx -> ["web-0", "web-1"]"#);
    has("lister: get web-0 -> node node-a");
    has(r#"index byNode=node-a -> ["cache-0", "web-0"]"#);
    has(r#"index byNode=node-b -> ["cache-1", "web-1"]"#);
    has(&format!("processing pod {ns}/web-0, phase: Running"));
    has(&format!("pod {ns}/cache-0 is gone: deleted"));

    assert_eq!(summary.adds, 4);
    assert!(summary.updates >= 1, "{summary}");
    assert_eq!(summary.deletes, 1);
    assert!(summary.reconciles >= 6, "{summary}");
    assert_eq!(summary.by_node["node-a"], ["web-0"]);
    assert_eq!(summary.by_node["node-b"], ["cache-1", "web-1"]);
    assert!(summary.to_string().starts_with("summary: 4 adds"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_custom_index_example_answers_by_selector_node_and_image() {
    let (client, ns) = client_and_namespace("custom-index").await;
    let lines = custom_index::run(client, &ns, "app=nginx", true)
        .await
        .unwrap();
    assert_eq!(
        lines,
        [
            format!("3 pods in {ns}"),
            r#"selector app=nginx: ["web-0", "web-1"]"#.to_string(),
            r#"byNode=node-a: ["db-0", "web-0"]"#.to_string(),
            r#"byNode=node-b: ["web-1"]"#.to_string(),
            r#"byImage=envoy:1.31: ["web-0"]"#.to_string(),
            r#"byImage=nginx:1.27: ["web-0", "web-1"]"#.to_string(),
            r#"byImage=postgres:17: ["db-0"]"#.to_string(),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_swap_layers_example_goes_through_the_custom_limiter_store_and_fifo() {
    let (client, ns) = client_and_namespace("swap").await;
    let report = swap_layers::run(client, &ns, true).await.unwrap();
    assert_eq!(report.reconciled, 3, "{report}");
    assert_eq!(
        report.limiter_retries, 3,
        "one failed first attempt per pod: {report}"
    );
    assert_eq!(
        report.queue_name, "swap-layers",
        "swapping the limiter keeps the named priority queue: {report}"
    );
    assert!(report.store_writes >= 1, "{report}");
    assert!(report.fifo_writes >= 1, "{report}");
}

/// Issue 38's CronJob controller, the Kubebuilder book's scenario: a run, Forbid holding
/// the next one back while it runs, `status.active` following, history pruned to the limit,
/// suspend stopping new runs. Its Job for a run is never created twice: read-your-writes
/// holds the next reconcile back until the Job cache has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_cronjob_controller_runs_forbids_prunes_and_suspends() {
    let (client, ns) = client_and_namespace("cronjob").await;
    let out = cronjob_controller::Output::capture();
    if let Err(e) = cronjob_controller::demo(client, &ns, &out).await {
        panic!("{e}; output so far:\n{}", out.lines().join("\n"));
    }
    let lines = out.lines();
    for want in [
        "first run: job ",
        "forbid: 5 s later, still one job",
        "first job complete: second run ",
        "second job complete: third run started; first job deleted (history limit 1)",
        "suspended: third job complete, status.active = [], no run in 5 s",
        "backup: run of ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "missing {want:?} in:\n{}",
            lines.join("\n")
        );
    }
    let created = lines
        .iter()
        .filter(|l| l.contains(": job backup-") && l.ends_with(" created"))
        .count();
    assert_eq!(created, 3, "one job per run:\n{}", lines.join("\n"));
    assert!(
        !lines.iter().any(|l| l.ends_with(" already exists")),
        "a run's job was created twice:\n{}",
        lines.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_widget_controller_creates_scales_repairs_and_cleans_up() {
    let (client, ns) = client_and_namespace("widget").await;
    let out = widget_controller::Output::capture();
    if let Err(e) = widget_controller::demo(client, &ns, &out).await {
        panic!("{e}; output so far:\n{}", out.lines().join("\n"));
    }
    let lines = out.lines();
    for want in [
        "creating widget demo (2 replicas)",
        "demo: config map demo-config written",
        "demo: pod demo-0 created",
        "demo: pod demo-1 created",
        r#"status: 2 pods; config map says "hello""#,
        "demo: pod demo-2 created",
        "status: 3 pods",
        "pod demo-1 is back (the owner was reconciled)",
        "demo: cleaned up",
        "widget demo is gone; pods gone; config map gone: true",
        "metrics: 4 or more reconciles counted",
        "readyz: ok",
        r#"events recorded for demo: {"CleanedUp", "Reconciled"}"#,
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "missing {want:?} in:\n{}",
            lines.join("\n")
        );
    }
}

/// `examples/cli_controller.rs` as a process: its stdout lines, read on a thread.
struct CliController {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl CliController {
    fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let program =
            kinformer_testenv::example_binary("kinformer-examples", "cli_controller").unwrap();
        let mut child = std::process::Command::new(program)
            .args(args)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines() {
                if tx.send(line.unwrap_or_default()).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits up to 60 s for a line that contains every one of `parts`.
    fn wait_for(&mut self, parts: &[&str]) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            let found = parts.iter().all(|part| line.contains(part));
            self.seen.push(line);
            if found {
                return;
            }
        }
        let _ = self.child.kill();
        panic!("no line with {parts:?} in:\n{}", self.seen.join("\n"));
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Its exit status, within 60 s.
    fn wait(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.seen.extend(self.lines.try_iter());
                return (status, self.seen);
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running:\n{}", self.seen.join("\n"));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn cli_controller_help_lists_its_flags_and_kinformer_runtimes() {
    let program =
        kinformer_testenv::example_binary("kinformer-examples", "cli_controller").unwrap();
    let out = std::process::Command::new(program)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "Watches the pods of a namespace",
        "--workers <WORKERS>",
        "--sync-timeout <DURATION>",
        "--kubeconfig <PATH>",
        "--namespace <NS>",
        "--kube-api-qps <QPS>",
        "--leader-elect",
        "--leader-election-lease-duration <DURATION>",
        "--admin-addr <ADDR>",
        "--log-format <FORMAT>",
        "--log-level <FILTER>",
    ] {
        assert!(help.contains(flag), "{flag:?} missing in:\n{help}");
    }
}

#[test]
fn cli_controller_stops_cleanly_on_sigterm_while_its_cache_cannot_sync() {
    // A cluster nobody serves: the informer retries, the cache never syncs.
    let dir = std::env::temp_dir().join(format!("cli-controller-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n\
         clusters: [{name: nowhere, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody, namespace: idle}}]\n\
         users: [{name: nobody, user: {token: unused}}]\n",
    )
    .unwrap();
    let mut program = CliController::start(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--admin-addr",
        "127.0.0.1:0",
        "--log-level",
        "info",
    ]);
    program.wait_for(&["connecting", "namespace=idle"]);
    program.wait_for(&["waiting for the cache to sync"]);
    program.signal("-TERM");
    program.wait_for(&["shutdown before the cache synced"]);
    let (status, lines) = program.wait();
    assert!(status.success(), "{status}:\n{}", lines.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn cli_controller_reconciles_then_drains_on_sigterm() {
    use k8s_openapi::api::core::v1::Pod;
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("cli").await.unwrap();
    let kubeconfig = cp.kubeconfig().to_str().unwrap().to_owned();
    let mut program = CliController::start(&[
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        &ns,
        "--admin-addr",
        "127.0.0.1:0",
    ]);
    program.wait_for(&["cache synced"]);
    let pods: kube::Api<Pod> =
        kube::Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "web-0" },
        "spec": { "containers": [{ "name": "main", "image": "nginx" }] }
    }))
    .unwrap();
    pods.create(&kube::api::PostParams::default(), &pod)
        .await
        .unwrap();
    program.wait_for(&["reconciled pod", &format!("{ns}/web-0")]);
    program.signal("-TERM");
    program.wait_for(&["drained; stopping the informers"]);
    program.wait_for(&["cli_controller: stopped"]);
    let (status, lines) = tokio::task::spawn_blocking(move || program.wait())
        .await
        .unwrap();
    assert!(status.success(), "{status}:\n{}", lines.join("\n"));
}
