//! A controller of a custom resource, with everything a real one has: a `Widget` owns a
//! ConfigMap (its message) and `replicas` Pods; the controller keeps them in step, writes the
//! widget's status (retrying on conflicts), records Events, serves `/metrics`, `/healthz` and
//! `/readyz`, and cleans up through a finalizer when a widget is deleted.
//!
//! ```text
//! cargo run --example widget_controller                 # local control plane, until Ctrl-C
//! cargo run --example widget_controller -- --demo       # scripted: create, scale, repair, delete
//! cargo run --example widget_controller -- --kubeconfig ~/.kube/config [-n default]
//! ```
//!
//! It installs its CustomResourceDefinition (`widgets.examples.kinformer.dev`) if missing.
//! The local control plane runs no kube-controller-manager, so nothing garbage-collects owned
//! objects there: the finalizer's cleanup deletes them, which is also what a controller does
//! for state the garbage collector cannot see.
#![allow(clippy::print_stdout)]

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use common::Output;
use common::{Args, BoxError, ensure_namespace, start};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinformer::controller::{Action, Context};
use kinformer::events::{Broadcaster, Config as EventConfig, EventType, Recorder, Reporter};
use kinformer::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use kinformer::metrics::Metrics;
use kinformer::predicates;
use kinformer::prelude::*;
use kinformer::server::Server;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What a widget asks for.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "examples.kinformer.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    schema = "disabled"
)]
pub struct WidgetSpec {
    /// Written into the widget's ConfigMap.
    pub message: String,
    /// How many Pods the widget runs.
    pub replicas: i32,
}

/// What the controller last made of a widget.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// The generation this status describes.
    pub observed_generation: Option<i64>,
    /// The widget's ConfigMap.
    pub config_map: Option<String>,
    /// How many of its Pods exist.
    pub pods: i32,
}

const FINALIZER: &str = "examples.kinformer.dev/cleanup";
const MANAGER: &str = "widget-controller";

/// Everything a reconcile reads and writes.
pub struct Ctx {
    client: kube::Client,
    widgets: Lister<Widget>,
    pods: Lister<Cached<Pod>>,
    config_maps: Lister<Cached<ConfigMap>>,
    recorder: Recorder,
    out: Output,
}

/// Why a reconcile failed (each is retried, rate limited).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A call to the API server failed.
    #[error("API call failed")]
    Kube(#[from] kube::Error),
    /// The finalizer could not be added or removed, or apply/cleanup failed.
    #[error("the finalizer step failed")]
    Finalizer(#[from] FinalizerError<kube::Error>),
    /// The cached widget has no uid (never the case for an object read from the API server).
    #[error("cannot make an owner reference to the widget")]
    OwnerRef(#[from] kinformer::owner::OwnerRefError),
}

async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, ReconcileError> {
    let ns = key.namespace().unwrap_or_default();
    let Ok(widget) = ctx.widgets.namespaced(ns).get(key.name()) else {
        return Ok(Action::Done); // gone: the finalizer already cleaned up
    };
    // What its children point back at: `owns` maps their events to this widget's key.
    let owner = controller_ref(&*widget)?;
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), ns);
    Ok(finalizer(&api, FINALIZER, widget, |event| async {
        match event {
            FinalizerEvent::Apply(w) => apply(&ctx, &w, owner).await,
            FinalizerEvent::Cleanup(w) => cleanup(&ctx, &w).await,
        }
    })
    .await?)
}

/// The Pods a widget controls, from the cache (by uid: not those of an earlier widget of
/// the same name).
fn owned_pods(ctx: &Ctx, w: &Widget) -> Vec<Arc<Cached<Pod>>> {
    let ns = w.namespace().unwrap_or_default();
    ctx.pods
        .namespaced(&ns)
        .list(&kinformer::indexer::everything())
        .into_iter()
        .filter(|p| is_controlled_by(&**p, w))
        .collect()
}

/// Makes the ConfigMap and the Pods match the widget, then writes its status. `owner` is
/// the controller reference to `w` its children carry.
async fn apply(ctx: &Ctx, w: &Widget, owner: OwnerReference) -> Result<Action, kube::Error> {
    let ns = w.namespace().unwrap_or_default();
    let name = w.name_any();

    // The ConfigMap: server-side apply is create-or-update in one idempotent call.
    let cm_name = format!("{name}-config");
    let wanted = BTreeMap::from([("message".to_owned(), w.spec.message.clone())]);
    // The cached ConfigMap's data, read where it lies and compared with what it should say.
    let current = ctx.config_maps.namespaced(&ns).get(&cm_name).ok();
    let data = current.as_ref().and_then(|c| c.data());
    let up_to_date = data.is_some_and(|d| {
        d.len() == wanted.len() && wanted.iter().all(|(k, v)| d.get(k) == Some(v.as_str()))
    });
    if !up_to_date {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm_name, "ownerReferences": [owner]},
            "data": wanted,
        });
        let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
        cms.patch(
            &cm_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&cm),
        )
        .await?;
        ctx.out
            .line(format!("{name}: config map {cm_name} written"));
    }

    // The Pods: create the missing ones, delete the extra ones.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let have = owned_pods(ctx, w);
    let replicas = usize::try_from(w.spec.replicas).unwrap_or(0);
    for i in 0..replicas {
        let pod_name = format!("{name}-{i}");
        if have
            .iter()
            .any(|p| p.object_name() == Some(pod_name.as_str()))
        {
            continue;
        }
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": pod_name, "labels": {"widget": name}},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]},
        }))
        .map_err(kube::Error::SerdeError)?;
        pod.metadata.owner_references = Some(vec![owner.clone()]);
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => ctx.out.line(format!("{name}: pod {pod_name} created")),
            // Made by an earlier attempt the cache has not seen yet.
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(e),
        }
    }
    for extra in have
        .iter()
        .filter_map(|p| p.object_name())
        .filter(|n| !(0..replicas).any(|i| *n == format!("{name}-{i}")))
    {
        pods.delete(extra, &DeleteParams::default().grace_period(0))
            .await?;
        ctx.out.line(format!("{name}: pod {extra} deleted"));
    }

    write_status(ctx, w, &cm_name, w.spec.replicas).await?;
    let note = format!("{} pods, config map {cm_name}", w.spec.replicas);
    // Never blocks or fails the reconcile: written in the background, folded into series.
    let _ = ctx
        .recorder
        .publish_for(w, EventType::Normal, "Reconciled", "Reconcile", &note);
    Ok(Action::Done)
}

/// Writes the status, re-reading the widget when someone else wrote in between (the patch
/// carries the resourceVersion it was computed from, so the server refuses a stale one).
async fn write_status(ctx: &Ctx, w: &Widget, cm: &str, pods: i32) -> Result<(), kube::Error> {
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &w.namespace().unwrap_or_default());
    let status = WidgetStatus {
        observed_generation: w.metadata.generation,
        config_map: Some(cm.to_owned()),
        pods,
    };
    if w.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut rv = w.resource_version();
    let mut attempts = 0;
    loop {
        let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
        match api
            .patch_status(
                &w.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            // Someone wrote in between: take the current version and write again, a few
            // times; after that the reconcile fails and is retried with backoff.
            Err(kube::Error::Api(s)) if s.code == 409 && attempts < 5 => {
                attempts += 1;
                rv = api.get(&w.name_any()).await?.resource_version();
            }
            Err(e) => return Err(e),
        }
    }
}

/// Deletes what the widget owns; the finalizer is removed after this returns.
async fn cleanup(ctx: &Ctx, w: &Widget) -> Result<Action, kube::Error> {
    let ns = w.namespace().unwrap_or_default();
    let name = w.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for pod in owned_pods(ctx, w) {
        let Some(pod_name) = pod.object_name() else {
            continue;
        };
        match pods
            .delete(pod_name, &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    match cms
        .delete(&format!("{name}-config"), &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(e),
    }
    ctx.out.line(format!("{name}: cleaned up"));
    let _ = ctx.recorder.publish_for(
        w,
        EventType::Normal,
        "CleanedUp",
        "Delete",
        "owned objects deleted",
    );
    Ok(Action::Done)
}

/// Installs the CRD unless it exists, and waits until it is served.
pub async fn install_crd(client: &kube::Client) -> Result<(), BoxError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.examples.kinformer.dev"},
        "spec": {
            "group": "examples.kinformer.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "message": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 0}
                        }},
                        "status": {"type": "object", "properties": {
                            "observedGeneration": {"type": "integer"},
                            "configMap": {"type": "string"},
                            "pods": {"type": "integer"}
                        }}
                    }
                }}
            }]
        }
    }))?;
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    let widgets: Api<Widget> = Api::all(client.clone());
    common::wait_for_async("the Widget CRD to be served", || {
        let widgets = widgets.clone();
        async move { widgets.list(&Default::default()).await.is_ok() }
    })
    .await
}

/// A running widget controller.
pub struct WidgetController {
    factory: SharedInformerFactory,
    broadcaster: Broadcaster,
    cancel: CancellationToken,
    workers: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub metrics_addr: std::net::SocketAddr,
    /// The widget cache, for the demo's checks.
    pub widgets: SharedIndexInformer<Widget>,
}

impl WidgetController {
    /// Installs the CRD, starts informers, the metrics server and two workers, and returns
    /// once the caches have synced.
    pub async fn start(
        client: kube::Client,
        namespace: &str,
        out: &Output,
    ) -> Result<Self, BoxError> {
        install_crd(&client).await?;
        let metrics = Metrics::install();
        let factory = SharedInformerFactory::builder(client.clone())
            .namespace(namespace)
            .resync(Duration::from_secs(300))
            .build();
        metrics.register_factory(&factory);
        // A custom resource has no generated views: its few objects are kept decoded, to
        // be read as the typed struct. Pods and ConfigMaps are cached and read in place.
        let widgets = factory.decoded_informer::<Widget>();
        let pods = factory.informer::<Pod>();
        let config_maps = factory.informer::<ConfigMap>();

        // A reconcile stuck on a call that never answers is dropped after a minute and
        // retried, instead of holding its widget and a worker for ever.
        let controller = Controller::<ObjectKey>::new("widget-controller")
            .workers(2)
            .reconcile_timeout(Duration::from_secs(60));
        // Status writes move the resourceVersion, not the generation: skip them.
        controller.watch_with(&widgets, predicates::generation_changed())?;
        // A child's change reconciles its widget, if the widget cache holds that widget
        // (so `watch_with` comes first). Pods: not their resyncs, which change nothing.
        controller.owns_with::<Widget, _>(&pods, predicates::resource_version_changed())?;
        controller.owns::<Widget, _>(&config_maps)?;

        let cancel = CancellationToken::new();
        let server = Server::bind("127.0.0.1:0".parse()?)
            .await?
            .ready_when("informers", {
                let factory = factory.clone();
                move || factory.all_synced()
            });
        let metrics_addr = server.local_addr()?;
        let server = tokio::spawn(server.run(cancel.clone()));

        factory.start()?;
        let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
        if !report.all_synced() {
            return Err(format!("the caches did not sync: {report}").into());
        }
        out.line(format!(
            "caches synced: {} informers",
            report.informers().len()
        ));

        let broadcaster = Broadcaster::new(client.clone(), EventConfig::default())?;
        let ctx = Ctx {
            client,
            widgets: widgets.lister(),
            pods: pods.lister(),
            config_maps: config_maps.lister(),
            recorder: broadcaster.recorder(Reporter::new(MANAGER)),
            out: out.clone(),
        };
        let workers = tokio::spawn(controller.run(reconcile, ctx, cancel.clone()));
        Ok(Self {
            factory,
            broadcaster,
            cancel,
            workers,
            server,
            metrics_addr,
            widgets,
        })
    }

    /// Stops the workers (draining the queue), the server, the Events and the informers.
    pub async fn stop(self) -> Result<(), BoxError> {
        self.cancel.cancel();
        self.workers.await?;
        self.server.await??;
        self.broadcaster.shutdown().await;
        self.factory.shutdown().await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let cluster = start(&args).await?;
    let out = Output::stdout();
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    if args.has("--demo") {
        demo(cluster.client.clone(), &namespace, &out).await?;
        return Ok(());
    }
    let controller = WidgetController::start(cluster.client.clone(), &namespace, &out).await?;
    out.line(format!(
        "watching widgets in {namespace}; metrics on http://{}/metrics; Ctrl-C stops",
        controller.metrics_addr
    ));
    tokio::signal::ctrl_c().await?;
    controller.stop().await
}

/// The scripted run: create a widget, scale it, delete one of its pods, delete it.
pub async fn demo(client: kube::Client, namespace: &str, out: &Output) -> Result<(), BoxError> {
    ensure_namespace(&client, namespace).await?;
    let controller = WidgetController::start(client.clone(), namespace, out).await?;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let pods_of = |n: usize| {
        let pods = pods.clone();
        move || {
            let pods = pods.clone();
            async move {
                let lp = kube::api::ListParams::default().labels("widget=demo");
                pods.list(&lp).await.is_ok_and(|l| l.items.len() == n)
            }
        }
    };
    let status_pods = |n: i32| {
        let widgets = widgets.clone();
        move || {
            let widgets = widgets.clone();
            async move {
                widgets
                    .get_opt("demo")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|w| w.status)
                    .is_some_and(|s| s.pods == n)
            }
        }
    };

    out.line("creating widget demo (2 replicas)".into());
    let widget = Widget::new(
        "demo",
        WidgetSpec {
            message: "hello".into(),
            replicas: 2,
        },
    );
    widgets.create(&PostParams::default(), &widget).await?;
    common::wait_for_async("2 pods", pods_of(2)).await?;
    common::wait_for_async("status pods=2", status_pods(2)).await?;
    let cm = cms.get("demo-config").await?;
    out.line(format!(
        "status: 2 pods; config map says {:?}",
        cm.data
            .unwrap_or_default()
            .get("message")
            .cloned()
            .unwrap_or_default()
    ));

    out.line("scaling demo to 3 replicas".into());
    let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
    widgets
        .patch("demo", &PatchParams::default(), &scale)
        .await?;
    common::wait_for_async("3 pods", pods_of(3)).await?;
    common::wait_for_async("status pods=3", status_pods(3)).await?;
    out.line("status: 3 pods".into());

    out.line("deleting pod demo-1 behind the controller's back".into());
    let old_uid = pods.get("demo-1").await?.metadata.uid;
    pods.delete("demo-1", &DeleteParams::default().grace_period(0))
        .await?;
    common::wait_for_async("demo-1 recreated", || {
        let pods = pods.clone();
        let old_uid = old_uid.clone();
        async move {
            pods.get_opt("demo-1")
                .await
                .ok()
                .flatten()
                .is_some_and(|p| p.metadata.uid != old_uid)
        }
    })
    .await?;
    out.line("pod demo-1 is back (the owner was reconciled)".into());

    out.line("deleting widget demo".into());
    widgets.delete("demo", &DeleteParams::default()).await?;
    common::wait_for_async("the widget to go", || {
        let widgets = widgets.clone();
        async move { widgets.get_opt("demo").await.is_ok_and(|w| w.is_none()) }
    })
    .await?;
    common::wait_for_async("its pods to go", pods_of(0)).await?;
    let cm_gone = cms.get_opt("demo-config").await?.is_none();
    out.line(format!(
        "widget demo is gone; pods gone; config map gone: {cm_gone}"
    ));

    let metrics = common::http_get(controller.metrics_addr, "/metrics").await?;
    let reconciles: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("controller_runtime_reconcile_total{")
                && l.contains(r#"controller="widget-controller""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    out.line(format!(
        "metrics: {} reconciles counted",
        if reconciles >= 4.0 {
            "4 or more"
        } else {
            "fewer than 4"
        }
    ));
    let ready = common::http_get(controller.metrics_addr, "/readyz").await?;
    out.line(format!("readyz: {}", ready.trim()));
    controller.stop().await?;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, namespace);
    let reasons: std::collections::BTreeSet<String> = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("demo"))
        .filter_map(|e| e.reason)
        .collect();
    out.line(format!("events recorded for demo: {reasons:?}"));
    Ok(())
}
