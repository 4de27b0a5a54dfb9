//! One run's set-up: a namespace with pods on a control plane, the APIs a test reaches
//! them by, and a reflector over them recording what it does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::MetaObject;
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_reflector::{ListerWatcher, Reflector, ReflectorHandle, ReflectorStatus};
use kinformer_testenv::{ApiProxy, ControlPlane, eventually};
use kube::{Api, Client};

use super::counting::{Calls, Counting};
use super::errors::Errors;
use super::pods::{create_pod, create_pods};
use super::sink::StateSink;
use super::wait::MINUTE;

/// A namespace of a test's own, its pods, and how the test and the reflector reach them.
pub struct Scene {
    pub ns: String,
    /// The admin's client straight to the API server: how the test writes and reads the
    /// truth, also while the reflector's connection is cut.
    pub direct: Api<Pod>,
    /// The reflector's client (`reflector_client`), through the proxy when there is one.
    pub client: Client,
    /// The namespace's pods through [`Scene::client`]: what the reflector lists and watches.
    pub pods: Api<Pod>,
    /// The config [`Scene::client`] was made from: for more clients that reach the server
    /// the same way.
    pub config: kube::Config,
    proxy: Option<ApiProxy>,
}

impl Scene {
    /// A fresh namespace named after `prefix` holding `n` pods `p-0` .. `p-{n-1}`, reached
    /// straight by the reflector too.
    pub async fn new(cp: &ControlPlane, prefix: &str, n: usize) -> Self {
        Self::make(cp, prefix, n, false).await
    }

    /// As [`Scene::new`], but the reflector reaches the API server through a proxy the
    /// test can cut ([`Scene::proxy`]).
    pub async fn behind_proxy(cp: &ControlPlane, prefix: &str, n: usize) -> Self {
        Self::make(cp, prefix, n, true).await
    }

    async fn make(cp: &ControlPlane, prefix: &str, n: usize, behind_proxy: bool) -> Self {
        let ns = cp.create_namespace(prefix).await.expect("create namespace");
        let direct = Api::namespaced(cp.client().expect("admin client"), &ns);
        create_pods(&direct, "p", n).await;
        let proxy = behind_proxy.then(|| cp.proxy().expect("start a proxy"));
        let config = proxy
            .as_ref()
            .map_or_else(|| cp.admin_config(), ApiProxy::admin_config);
        let client = reflector_client(config.clone()).expect("reflector client");
        let pods = Api::namespaced(client.clone(), &ns);
        Self {
            ns,
            direct,
            client,
            pods,
            config,
            proxy,
        }
    }

    /// The sink's key of the pod `name` in this namespace.
    pub fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.ns)
    }

    /// The proxy between the reflector and the API server.
    pub fn proxy(&self) -> &ApiProxy {
        self.proxy
            .as_ref()
            .expect("a scene made with Scene::behind_proxy")
    }

    /// A reflector over [`Scene::pods`] that lists and watches (see [`reflect`]).
    pub fn reflect(&self) -> Run {
        self.reflect_with(|r| r)
    }

    /// A reflector over [`Scene::pods`], configured by `configure` (see [`reflect`]).
    pub fn reflect_with(&self, configure: impl FnOnce(PodBuilder) -> PodBuilder) -> Run {
        reflect(KubeListerWatcher::new(self.pods.clone()), configure)
    }

    /// Creates a pod `warmup` and waits until the reflector delivers it: its watch is on.
    pub async fn warm_up(&self, run: &Run) {
        self.warm_up_each([run]).await;
    }

    /// Creates a pod `warmup` and waits until each reflector, synced, delivers it: their
    /// watches are on (and have seen an event, so that a cut now is not a very short
    /// watch).
    pub async fn warm_up_each<'a>(&self, runs: impl IntoIterator<Item = &'a Run>) {
        create_pod(&self.direct, "warmup").await;
        let key = self.key("warmup");
        for run in runs {
            eventually("the watch to deliver", MINUTE, || {
                run.sink.adds().contains(&key)
            })
            .await;
        }
    }
}

/// A reflector before it starts, as [`reflect`] hands it to the test to configure.
pub type Builder<K, L> = Reflector<K, Counting<L>, Arc<StateSink>>;

/// The builder of a reflector over a [`Scene`]'s pods.
pub type PodBuilder = Builder<Pod, KubeListerWatcher<Pod>>;

/// A running reflector and what it did: its calls, the sink it fed, the errors it had.
pub struct Run {
    /// Every list and watch call it made.
    pub lw: Arc<Calls>,
    pub sink: Arc<StateSink>,
    pub errors: Errors,
    h: ReflectorHandle,
    started: Instant,
}

/// Starts a reflector over `lw` (counted), feeding a new [`StateSink`] and recording its
/// errors. It lists and watches (no streaming list) unless `configure`, which sets whatever
/// else the test varies, turns `watch_list` on.
pub fn reflect<K, L>(lw: L, configure: impl FnOnce(Builder<K, L>) -> Builder<K, L>) -> Run
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K> + 'static,
{
    let lw = Counting::new(lw);
    let calls = lw.calls();
    let sink = StateSink::new();
    let errors = Errors::default();
    // List+Watch unless the test asks for a streaming list (`.watch_list(true)`): most of
    // these tests are about lists, relists and their pages.
    let reflector = Reflector::new(lw, Arc::clone(&sink))
        .watch_list(false)
        .on_watch_error(errors.handler());
    let started = Instant::now();
    let h = configure(reflector).spawn().expect("spawn the reflector");
    Run {
        lw: calls,
        sink,
        errors,
        h,
        started,
    }
}

impl Run {
    pub fn status(&self) -> &ReflectorStatus {
        self.h.status()
    }

    pub fn is_finished(&self) -> bool {
        self.h.is_finished()
    }

    /// Waits for the initial sync and returns how long it took since the start.
    pub async fn synced(&self) -> Duration {
        eventually("the initial sync", MINUTE, || self.status().has_synced()).await;
        self.started.elapsed()
    }

    /// Waits until the sink was told to add `key`.
    pub async fn added(&self, key: &str) {
        eventually(&format!("the add of {key}"), MINUTE, || {
            self.sink.adds().contains(key)
        })
        .await;
    }

    /// Stops the reflector, which must not have failed.
    pub async fn stop(self) {
        self.h
            .stop()
            .await
            .expect("the reflector ran without failing");
    }
}
