//! The examples, run end to end against the real etcd + kube-apiserver of
//! kinformer-testenv, each in a namespace of its own; the pod controller's `--demo` run is
//! what `cargo xtask demo` shows, and its output is checked here. Run with `cargo xtask
//! test` (or `cargo test -p kinformer-examples --test examples -- --include-ignored` once
//! the control plane is built).
// Each example includes the shared `common` module; here they are three modules of one crate.
#![allow(clippy::duplicate_mod)]

#[path = "../custom_index.rs"]
#[allow(dead_code, unreachable_pub)]
mod custom_index;
#[path = "../pod_controller.rs"]
#[allow(dead_code, unreachable_pub)]
mod pod_controller;
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
    assert!(report.store_writes >= 1, "{report}");
    assert!(report.fifo_writes >= 1, "{report}");
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
