//! The pod controller of the article this project implements
//! (`shared/reference/informer-mechanism.txt`), in Rust.
//!
//! A SharedInformerFactory for one namespace with a 30 s resync, the pod informer and its
//! lister, a rate-limited work queue, handlers that only enqueue keys (deletes through the
//! tombstone-aware key function), a wait for the cache to sync, and workers that read each
//! pod back from the lister and print its phase. Plus the article's lister queries: by
//! label selector, and by a custom `byNode` index.
//!
//! ```text
//! cargo run --example pod_controller                 # local control plane, until Ctrl-C
//! cargo run --example pod_controller -- --demo       # scripted: create, update, delete, summary
//! cargo run --example pod_controller -- --kubeconfig ~/.kube/config [--context C] [-n default]
//! cargo run --example pod_controller -- --kubeconfig K --leader-elect  # one of several replicas
//! ```
//!
//! With `--leader-elect` every replica runs the informer (its cache stays synced and its
//! queue gathers keys), and only the holder of the Lease `pod-controller` in the namespace
//! runs the workers; a standby takes over when the leader dies (after the lease duration)
//! or stops (at once: it releases the lease). See `common::Args::leader_election` for the
//! timing flags.
//!
//! `cargo xtask demo` runs the `--demo` mode; `tests/demo.rs` checks its output.
#![allow(clippy::print_stdout)]

#[path = "common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Args, BoxError, ensure_namespace, names, start, wait_for};
use k8s_openapi::api::core::v1::Pod;
use kinformer::indexer::{IndexFunc, Indexers, parse_selector};
use kinformer::informer::SharedInformerFactoryBuilder;
use kinformer::leaderelection::LeaderElector;
use kinformer::prelude::*;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

/// The custom index of the article: pods by `spec.nodeName`.
const BY_NODE: &str = "byNode";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let cluster = start(&args).await?;
    let out = Output::stdout();
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    if args.has("--demo") {
        let summary = demo(cluster.client.clone(), &namespace, &out).await?;
        out.line(summary.to_string());
        return Ok(());
    }
    let elector = args.leader_election(&cluster.client, &namespace, "pod-controller")?;
    if let Some(elector) = &elector {
        out.line(format!(
            "leader election: candidate {} for lease {namespace}/pod-controller",
            elector.identity()
        ));
    }
    let controller =
        PodController::start_elected(cluster.client.clone(), &namespace, &out, elector).await?;
    out.line("watching pods; Ctrl-C stops".to_string());
    tokio::signal::ctrl_c().await?;
    controller.stop().await
}

/// Where the program's lines go: stdout, and a copy a test can read.
#[derive(Clone, Default)]
pub struct Output {
    lines: Arc<Mutex<Vec<String>>>,
    echo: bool,
}

impl Output {
    /// Prints every line (and keeps it).
    pub fn stdout() -> Self {
        Self {
            echo: true,
            ..Self::default()
        }
    }

    /// Only keeps the lines.
    pub fn capture() -> Self {
        Self::default()
    }

    /// Writes one line.
    pub fn line(&self, line: String) {
        if self.echo {
            println!("{line}");
        }
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line);
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// What the handlers saw and what the workers did.
#[derive(Default)]
pub struct Stats {
    adds: AtomicUsize,
    updates: AtomicUsize,
    deletes: AtomicUsize,
    reconciles: AtomicUsize,
    /// The last state each key was reconciled to: its phase, or `deleted`.
    last_seen: Mutex<HashMap<String, String>>,
}

impl Stats {
    fn last_seen(&self, key: &str) -> Option<String> {
        self.last_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
    }
}

/// The article's program: factory, informer, lister, queue, handlers, workers.
pub struct PodController {
    factory: SharedInformerFactory,
    informer: SharedIndexInformer<Cached<Pod>>,
    stats: Arc<Stats>,
    cancel: CancellationToken,
    workers: tokio::task::JoinHandle<()>,
    /// Notifications the handler has not taken plus keys queued.
    backlog: Box<dyn Fn() -> usize + Send + Sync>,
}

impl PodController {
    /// Builds and starts everything, and returns once the cache has synced.
    pub async fn start(
        client: kube::Client,
        namespace: &str,
        out: &Output,
    ) -> Result<Self, BoxError> {
        Self::start_elected(client, namespace, out, None).await
    }

    /// [`start`](Self::start); with an elector the workers run only while it leads.
    pub async fn start_elected(
        client: kube::Client,
        namespace: &str,
        out: &Output,
        elector: Option<LeaderElector>,
    ) -> Result<Self, BoxError> {
        Self::start_on(
            SharedInformerFactory::builder(client),
            namespace,
            out,
            elector,
        )
        .await
    }

    /// [`start_elected`](Self::start_elected) on a factory of the caller's: a test hands
    /// one whose pod informer records its stream, or replays a recorded one
    /// (`lister_watcher_for`; see `tests/replay.rs`).
    pub async fn start_on(
        factory: SharedInformerFactoryBuilder,
        namespace: &str,
        out: &Output,
        elector: Option<LeaderElector>,
    ) -> Result<Self, BoxError> {
        // A factory for one namespace, resyncing every 30 s.
        let factory = factory
            .namespace(namespace)
            .resync(Duration::from_secs(30))
            .build();
        // The pod informer and its lister; the custom index before start.
        let informer = factory.informer::<Pod>();
        informer.add_indexers(by_node_index())?;
        let lister = informer.lister();

        // The rate-limited queue (client-go's DefaultControllerRateLimiter) and 2 workers.
        let controller = Controller::<ObjectKey>::new("pod-controller").workers(2);
        let stats = Arc::new(Stats::default());

        // Handlers only enqueue keys. On delete the object may be a tombstone (the
        // deletion was missed while disconnected): deletion_handling_key handles both.
        let (q_add, q_update, q_delete) = (
            Arc::clone(controller.queue()),
            Arc::clone(controller.queue()),
            Arc::clone(controller.queue()),
        );
        let (s_add, s_update, s_delete) =
            (Arc::clone(&stats), Arc::clone(&stats), Arc::clone(&stats));
        let queue = Arc::clone(controller.queue());
        let registration = informer.add_event_handler(
            ResourceEventHandlerFuncs::new()
                .add_func(move |pod: &Arc<Cached<Pod>>, _| {
                    s_add.adds.fetch_add(1, Ordering::Relaxed);
                    if let Ok(key) = meta_namespace_key(pod.as_ref()) {
                        q_add.add(key);
                    }
                })
                .update_func(move |_old, new| {
                    s_update.updates.fetch_add(1, Ordering::Relaxed);
                    if let Ok(key) = meta_namespace_key(new.as_ref()) {
                        q_update.add(key);
                    }
                })
                .delete_func(move |obj| {
                    s_delete.deletes.fetch_add(1, Ordering::Relaxed);
                    if let Ok(key) = deletion_handling_key(obj) {
                        q_delete.add(key);
                    }
                }),
        )?;

        factory.start()?;
        let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
        if !report.all_synced() {
            return Err(format!("the cache did not sync: {report}").into());
        }
        out.line(format!("cache synced: {report}"));

        // The workers: get → sync_pod → forget, or add_rate_limited on error → done. What
        // every reconcile needs travels in its context.
        let cancel = CancellationToken::new();
        let context = SyncContext {
            lister,
            stats: Arc::clone(&stats),
            out: out.clone(),
        };
        let workers = match elector {
            None => tokio::spawn(controller.run(sync_pod, context, cancel.clone())),
            Some(elector) => {
                let (cancel, out) = (cancel.clone(), out.clone());
                tokio::spawn(async move {
                    let run = controller.run_elected(&elector, sync_pod, context, cancel);
                    if let Err(e) = run.await {
                        out.line(format!("leader election failed: {e}"));
                    }
                })
            }
        };
        Ok(Self {
            factory,
            informer,
            stats,
            cancel,
            workers,
            backlog: Box::new(move || registration.pending() + queue.len()),
        })
    }

    /// The last state each key was reconciled to (its phase, or `deleted`).
    pub fn last_seen(&self) -> BTreeMap<String, String> {
        self.stats
            .last_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Notifications not yet handled plus keys waiting for a worker (not counting the ones
    /// being reconciled: [`reconciles`](Self::reconciles) moves while they are).
    pub fn backlog(&self) -> usize {
        (self.backlog)()
    }

    /// Reconciles so far.
    pub fn reconciles(&self) -> usize {
        self.stats.reconciles.load(Ordering::Relaxed)
    }

    /// The pod informer.
    pub fn informer(&self) -> &SharedIndexInformer<Cached<Pod>> {
        &self.informer
    }

    /// Stops the workers (draining the queue), then the informers.
    pub async fn stop(self) -> Result<(), BoxError> {
        self.cancel.cancel();
        self.workers.await?;
        self.factory.shutdown().await?;
        Ok(())
    }
}

/// The article's `byNode` index function, reading the node where it lies in the cached pod.
fn by_node_index() -> Indexers<Cached<Pod>> {
    let by_node = IndexFunc::single(|pod: &Cached<Pod>| pod.spec()?.node_name());
    Indexers::from([(BY_NODE.to_string(), by_node)])
}

/// What `sync_pod` reads and writes: the cache, the counters, the output.
pub struct SyncContext {
    lister: Lister<Cached<Pod>>,
    stats: Arc<Stats>,
    out: Output,
}

/// The article's `syncPod`: read the pod from the cache (never from the API server) and
/// act on it. One change: a pod that is not in the cache was deleted, which is done, not
/// an error to retry with backoff forever.
async fn sync_pod(
    key: ObjectKey,
    ctx: Context<SyncContext>,
) -> Result<Action, kinformer::indexer::Error> {
    let SyncContext { lister, stats, out } = &*ctx;
    stats.reconciles.fetch_add(1, Ordering::Relaxed);
    let namespace = key.namespace().unwrap_or_default();
    let state = match lister.namespaced(namespace).get(key.name()) {
        // The cached pod itself, read where it lies: nothing is copied or decoded.
        Ok(pod) => {
            let phase = pod.status().and_then(|s| s.phase()).unwrap_or("Unknown");
            out.line(format!("processing pod {key}, phase: {phase}"));
            phase.to_owned()
        }
        Err(e) if e.is_not_found() => {
            out.line(format!("pod {key} is gone: deleted"));
            "deleted".to_string()
        }
        Err(e) => return Err(e),
    };
    stats
        .last_seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key.to_string(), state);
    Ok(Action::Done)
}

/// What the scripted run saw.
#[derive(Debug)]
pub struct Summary {
    /// Handler notifications.
    pub adds: usize,
    /// Handler notifications.
    pub updates: usize,
    /// Handler notifications.
    pub deletes: usize,
    /// Reconcile calls.
    pub reconciles: usize,
    /// Pods per node, from the `byNode` index, after the delete.
    pub by_node: BTreeMap<String, Vec<String>>,
    /// The last state each key was reconciled to.
    pub last_seen: BTreeMap<String, String>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "summary: {} adds, {} updates, {} deletes seen by the handler; {} reconciles; pods by node: {:?}",
            self.adds, self.updates, self.deletes, self.reconciles, self.by_node
        )
    }
}

/// The demo pods: name, `app` label, node.
const PODS: [(&str, &str, &str); 4] = [
    ("web-0", "nginx", "node-a"),
    ("web-1", "nginx", "node-b"),
    ("cache-0", "redis", "node-a"),
    ("cache-1", "redis", "node-b"),
];

/// The scripted run of `cargo xtask demo`: create pods on two nodes, start the controller,
/// query the lister by selector and by index, move a pod to Running, delete one, summarize.
pub async fn demo(
    client: kube::Client,
    namespace: &str,
    out: &Output,
) -> Result<Summary, BoxError> {
    demo_on(
        client.clone(),
        SharedInformerFactory::builder(client),
        namespace,
        out,
    )
    .await
}

/// [`demo`] with the controller on `factory` (one that records its stream, say); `client`
/// makes the demo's writes.
pub async fn demo_on(
    client: kube::Client,
    factory: SharedInformerFactoryBuilder,
    namespace: &str,
    out: &Output,
) -> Result<Summary, BoxError> {
    ensure_namespace(&client, namespace).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for (name, app, node) in PODS {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "app": app } },
            "spec": {
                "nodeName": node,
                "containers": [{ "name": "main", "image": format!("{app}:latest") }]
            }
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    out.line(format!(
        "created {} pods in {namespace} on node-a and node-b",
        PODS.len()
    ));

    let controller = PodController::start_on(factory, namespace, out, None).await?;
    let stats = Arc::clone(&controller.stats);
    let key = |name: &str| format!("{namespace}/{name}");
    wait_for("every pod reconciled", || {
        PODS.iter()
            .all(|(name, ..)| stats.last_seen(&key(name)).is_some())
    })
    .await?;

    // The article's lister queries: everything, by label selector, one by name.
    let lister = controller.informer.lister();
    let in_ns = lister.namespaced(namespace);
    out.line(format!(
        "lister: {} pods in {namespace}",
        in_ns.list(&kinformer::indexer::everything()).len()
    ));
    let nginx = names(in_ns.list(&parse_selector("app=nginx")?));
    out.line(format!("lister: app=nginx -> {nginx:?}"));
    let web0 = in_ns.get("web-0")?;
    out.line(format!(
        "lister: get web-0 -> node {}",
        web0.spec().and_then(|s| s.node_name()).unwrap_or("?")
    ));
    // The custom index.
    let indexer = controller.informer.indexer();
    for node in ["node-a", "node-b"] {
        let on_node = names(indexer.by_index(BY_NODE, node)?);
        out.line(format!("index byNode={node} -> {on_node:?}"));
    }

    // An update: the pod's phase, through the status subresource.
    let running = serde_json::json!({ "status": { "phase": "Running" } });
    out.line("patching web-0: status.phase=Running".to_string());
    pods.patch_status("web-0", &PatchParams::default(), &Patch::Merge(&running))
        .await?;
    wait_for("web-0 reconciled as Running", || {
        stats.last_seen(&key("web-0")).as_deref() == Some("Running")
    })
    .await?;

    // A delete.
    out.line("deleting cache-0".to_string());
    pods.delete("cache-0", &DeleteParams::default().grace_period(0))
        .await?;
    wait_for("cache-0 reconciled as deleted", || {
        stats.last_seen(&key("cache-0")).as_deref() == Some("deleted")
    })
    .await?;

    let mut by_node = BTreeMap::new();
    for node in ["node-a", "node-b"] {
        by_node.insert(node.to_string(), names(indexer.by_index(BY_NODE, node)?));
    }
    let summary = Summary {
        adds: stats.adds.load(Ordering::Relaxed),
        updates: stats.updates.load(Ordering::Relaxed),
        deletes: stats.deletes.load(Ordering::Relaxed),
        reconciles: stats.reconciles.load(Ordering::Relaxed),
        by_node,
        last_seen: controller.last_seen(),
    };
    controller.stop().await?;
    Ok(summary)
}
