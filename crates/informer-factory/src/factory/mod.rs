//! The SharedInformerFactory: one shared informer per resource, started and synced together.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kinformer_compact_store::Cached;
use kinformer_core::{Clock, ErrorChain, MetaObject, TokioClock};
use kinformer_indexer::IndexerWriter;
use kinformer_kube::{Compression, KubeListerWatcher, WireFormat};
use kinformer_reflector::{Backoff, ListerWatcher, ShardSelector};
use kube::core::{ClusterResourceScope, DynamicObject, ObjectMeta, Resource};
use kube::discovery::{ApiResource, Scope};
use serde::Serialize;
use serde::de::DeserializeOwned;

mod builder;
pub use builder::SharedInformerFactoryBuilder;

use crate::sync::poll_until;
use crate::{
    Error, FifoKind, InformerHandle, InformerStats, SharedIndexInformer,
    SharedIndexInformerBuilder, SnapshotOptions,
};

/// What a factory's informer watches besides its resource: the namespace and the list
/// options (client-go's `WithNamespace` and `WithTweakListOptions`). Two requests for one
/// type with equal options share one informer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InformerOptions {
    /// One namespace, or every namespace when `None`. Ignored for cluster-scoped resources.
    pub namespace: Option<String>,
    /// Only objects whose labels match (`app=web,tier!=db`).
    pub label_selector: Option<String>,
    /// Only objects whose fields match (`spec.nodeName=node-1`).
    pub field_selector: Option<String>,
    /// Only the objects of one shard (see
    /// [`SharedIndexInformerBuilder::shard`](crate::SharedIndexInformerBuilder::shard)).
    pub shard: Option<ShardSelector>,
}

impl InformerOptions {
    /// Every namespace, no selectors.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only `namespace`.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects whose labels match `selector`.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects whose fields match `selector`.
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Only the objects of the shard `selector` selects (sent as `shardSelector`, and
    /// filtered here when the server ignores it).
    #[must_use]
    pub fn shard(mut self, selector: ShardSelector) -> Self {
        self.shard = Some(selector);
        self
    }
}

/// Which informer of a factory: its Rust type, its resource and its options. Shown in
/// [`CacheSyncReport`]s and tracing spans as `pods.v1 (default)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InformerId {
    type_id: TypeId,
    type_name: &'static str,
    /// `plural.version.group` (`deployments.v1.apps`, `pods.v1`).
    resource: String,
    options: InformerOptions,
}

impl InformerId {
    fn new<K: 'static>(resource: String, options: InformerOptions) -> Self {
        Self {
            type_id: TypeId::of::<K>(),
            type_name: type_name::<K>(),
            resource,
            options,
        }
    }

    /// The resource as `plural.version.group` (`deployments.v1.apps`; `pods.v1` for the
    /// core group).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The Rust type the informer's objects have.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The namespace and selectors the informer watches with.
    pub fn options(&self) -> &InformerOptions {
        &self.options
    }
}

impl fmt::Display for InformerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.resource)?;
        let o = &self.options;
        let shard = o.shard.as_ref().map(ToString::to_string);
        let parts: Vec<&str> = [&o.namespace, &o.label_selector, &o.field_selector, &shard]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if !parts.is_empty() {
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

/// The answer of [`SharedInformerFactory::wait_for_cache_sync`]: whether each started
/// informer had synced when the wait ended (client-go's `map[reflect.Type]bool`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheSyncReport {
    informers: Vec<(InformerId, bool)>,
}

impl CacheSyncReport {
    /// Whether every informer synced (true when there was none).
    pub fn all_synced(&self) -> bool {
        self.informers.iter().all(|(_, synced)| *synced)
    }

    /// Every started informer and whether it synced, in the order they were requested.
    pub fn informers(&self) -> &[(InformerId, bool)] {
        &self.informers
    }

    /// The informers that had not synced.
    pub fn unsynced(&self) -> impl Iterator<Item = &InformerId> {
        self.informers
            .iter()
            .filter(|(_, synced)| !synced)
            .map(|(id, _)| id)
    }
}

impl fmt::Display for CacheSyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (id, synced)) in self.informers.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{id}: {}", if *synced { "synced" } else { "not synced" })?;
        }
        Ok(())
    }
}

/// An informer of any type, as the factory keeps it.
trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn start(&self) -> Result<InformerHandle, Error>;
    fn has_synced(&self) -> bool;
    fn stats(&self) -> InformerStats;
}

impl<K: MetaObject + Send + Sync + 'static> AnyInformer for SharedIndexInformer<K> {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn start(&self) -> Result<InformerHandle, Error> {
        SharedIndexInformer::start(self)
    }
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
    fn stats(&self) -> InformerStats {
        SharedIndexInformer::stats(self)
    }
}

type MetaTransform = Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>;

/// Gives an informer of objects `T` its snapshot, with these options and identity (only
/// `Cached<K>` informers keep one).
type KeepSnapshot<T> =
    fn(SharedIndexInformerBuilder<T>, SnapshotOptions, String) -> SharedIndexInformerBuilder<T>;

/// Makes the cache of one informer of objects `T`; kept type-erased by `T`'s `TypeId`.
type StoreMaker<T> = Arc<dyn Fn() -> Arc<dyn IndexerWriter<T>> + Send + Sync>;
type ListerWatcherMaker<T> =
    Arc<dyn Fn(&InformerId, Arc<dyn ListerWatcher<T>>) -> Arc<dyn ListerWatcher<T>> + Send + Sync>;

struct Entry {
    id: InformerId,
    informer: Box<dyn AnyInformer>,
    /// Set once the factory has started it; `None` before, or when it was started by hand.
    started: bool,
}

#[derive(Default)]
struct State {
    /// In request order, so that reports and starts follow it.
    informers: Vec<Entry>,
    handles: Vec<InformerHandle>,
    shut_down: bool,
}

/// What the builder sets and the factory keeps.
#[derive(Clone)]
struct Config {
    client: kube::Client,
    options: InformerOptions,
    default_resync: Duration,
    /// By `TypeId` of the resource's type (`Pod`, for the informers of `Cached<Pod>` and
    /// of `Pod`).
    custom_resync: HashMap<TypeId, Duration>,
    /// A `StoreMaker<T>` by `TypeId` of the informer's objects `T`.
    stores: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    /// A `ListerWatcherMaker<T>` by `TypeId` of the informer's objects `T`.
    lister_watchers: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    transform: Option<MetaTransform>,
    drop_managed_fields: bool,
    compression: Compression,
    fifo: FifoKind,
    backoff: Backoff,
    clock: Arc<dyn Clock>,
    wire_format: WireFormat,
    /// The `name` label of the informers' client-go metrics.
    informer_name: String,
    /// Where the informers keep their caches on disk, if they do.
    snapshots: Option<SnapshotOptions>,
    /// The API server's URL, when the factory was built from a config: part of every
    /// snapshot's identity.
    cluster: Option<String>,
}

struct FactoryInner {
    config: Config,
    state: Mutex<State>,
}

/// The last clone of the factory is gone: stop the informers it started (without waiting,
/// as a drop cannot). An informer handle left alone would keep its informer running.
impl Drop for FactoryInner {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        for handle in &state.handles {
            handle.cancellation_token().cancel();
        }
    }
}

/// One shared informer per resource, type, namespace and selectors; started, synced and
/// shut down together (client-go's `SharedInformerFactory`).
///
/// Controllers of one program that watch the same resource should share one informer: one
/// list and one watch on the API server, one cache in memory, however many handlers.
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact_store::Cached;
/// use kinformer_informer_factory::{ResourceEventHandlerFuncs, SharedInformerFactory};
/// use kinformer_kube::reflector_client;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = reflector_client(kube::Config::infer().await?)?;
/// let factory = SharedInformerFactory::builder(client)
///     .namespace("default")
///     .resync(Duration::from_secs(30))
///     .build();
/// let pods = factory.informer::<Pod>();
/// assert!(pods.is_same(&factory.informer::<Pod>())); // shared
/// // Handlers get the cached pod itself, read where it lies.
/// pods.add_event_handler(ResourceEventHandlerFuncs::new().add_func(|pod: &std::sync::Arc<Cached<Pod>>, _| {
///     println!("{:?} on {:?}", pod.metadata().name(), pod.spec().and_then(|s| s.node_name()));
/// }))?;
/// factory.start()?;
/// let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
/// assert!(report.all_synced(), "{report}");
/// // ... read pods.lister() ...
/// factory.shutdown().await?;
/// # Ok(())
/// # }
/// ```
///
/// # Lifecycle
///
/// - [`start`](Self::start) starts every informer requested so far that it has not started;
///   call it again after requesting more. An informer the caller started by hand is left
///   alone.
/// - [`wait_for_cache_sync`](Self::wait_for_cache_sync) waits for the informers the factory
///   started and reports on each.
/// - [`shutdown`](Self::shutdown) stops every informer it started and waits until each has
///   ended; `start` does nothing after it. Dropping the last clone of the factory stops its
///   informers too, without waiting.
///
/// # Types
///
/// Any k8s-openapi type, any `#[derive(CustomResource)]` type, any projection struct
/// ([`informer`](Self::informer): kept as [`Cached<K>`], read in place through views, the
/// metadata of any type through [`Cached::meta`]; [`decoded_informer`](Self::decoded_informer):
/// decoded `K`s, client-go's cache), and [`DynamicObject`] by its [`ApiResource`]
/// ([`dynamic_informer`](Self::dynamic_informer)). Cluster-scoped types ignore the
/// namespace.
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<FactoryInner>,
}

impl fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("SharedInformerFactory")
            .field("options", &self.inner.config.options)
            .field("default_resync", &self.inner.config.default_resync)
            .field(
                "informers",
                &state
                    .informers
                    .iter()
                    .map(|e| e.id.to_string())
                    .collect::<Vec<_>>(),
            )
            .field("shut_down", &state.shut_down)
            .finish_non_exhaustive()
    }
}

impl SharedInformerFactory {
    /// A factory over every namespace without resync (client-go's
    /// `NewSharedInformerFactory(client, 0)`). Build the client with
    /// [`reflector_client`](kinformer_kube::reflector_client) (or use
    /// [`from_config`](Self::from_config)): a plain `kube::Client` retries `429` and `504`
    /// inside itself, hidden from the reflector's backoff and relist logic.
    pub fn new(client: kube::Client) -> Self {
        Self::builder(client).build()
    }

    /// A builder whose informers talk to the cluster `config` describes, through the client
    /// a reflector needs ([`reflector_client`](kinformer_kube::reflector_client): no
    /// hidden retries, `TCP_NODELAY`). The way to build a factory when you have a
    /// `kube::Config` (`kube::Config::infer().await?`).
    ///
    /// # Errors
    /// [`Error::Reflector`] when no client can be built from `config`.
    pub fn from_config(config: kube::Config) -> Result<SharedInformerFactoryBuilder, Error> {
        let cluster = config.cluster_url.to_string();
        let client = kinformer_kube::reflector_client(config).map_err(|e| {
            Error::Reflector(kinformer_reflector::Error::Client { source: e.into() })
        })?;
        let mut builder = Self::builder(client);
        builder.config.cluster = Some(cluster);
        Ok(builder)
    }

    /// A builder: namespace, list options, resyncs, transform, FIFO kind. The client
    /// should come from [`reflector_client`](kinformer_kube::reflector_client) (see
    /// [`new`](Self::new)); [`from_config`](Self::from_config) builds it for you.
    pub fn builder(client: kube::Client) -> SharedInformerFactoryBuilder {
        SharedInformerFactoryBuilder {
            config: Config {
                client,
                options: InformerOptions::default(),
                default_resync: Duration::ZERO,
                custom_resync: HashMap::new(),
                stores: HashMap::new(),
                lister_watchers: HashMap::new(),
                transform: None,
                drop_managed_fields: false,
                compression: Compression::default(),
                fifo: FifoKind::default(),
                backoff: Backoff::default(),
                clock: Arc::new(TokioClock),
                wire_format: WireFormat::default(),
                informer_name: String::new(),
                snapshots: None,
                cluster: None,
            },
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The informer of `K` with the factory's namespace and list options: the same one
    /// on every call. Its objects are kept encoded and read in place
    /// ([`Cached<K>`]: `pod.spec()?.node_name()`; `decode()` for the `K`), the default:
    /// reads at client-go's cost, a cache at a fraction of its memory (see the crate docs).
    pub fn informer<K>(&self) -> SharedIndexInformer<Cached<K>>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        self.informer_with::<K>(self.inner.config.options.clone())
    }

    /// The informer of `K` with other `options` than the factory's (another namespace,
    /// other selectors): one per distinct options.
    pub fn informer_with<K>(&self, options: InformerOptions) -> SharedIndexInformer<Cached<K>>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let cluster_scoped = TypeId::of::<K::Scope>() == TypeId::of::<ClusterResourceScope>();
        self.get_or_create(
            &K::DynamicType::default(),
            cluster_scoped,
            options,
            KubeListerWatcher::cached,
            |b, options, identity| b.snapshot(options, identity),
        )
    }

    /// The informer of `K` that keeps decoded objects, shared as `Arc<K>`: client-go's
    /// cache, for programs that want the decoded objects themselves (every read returns the
    /// same allocation, with no view to go through), at several times the memory of
    /// [`informer`](Self::informer)'s and with every object decoded during the sync.
    /// Another informer than `informer::<K>()`'s: asking for both lists and watches twice.
    pub fn decoded_informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        self.decoded_informer_with::<K>(self.inner.config.options.clone())
    }

    /// [`decoded_informer`](Self::decoded_informer) with other `options`.
    pub fn decoded_informer_with<K>(&self, options: InformerOptions) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let cluster_scoped = TypeId::of::<K::Scope>() == TypeId::of::<ClusterResourceScope>();
        self.get_or_create(
            &K::DynamicType::default(),
            cluster_scoped,
            options,
            |lw| lw,
            // Decoded objects have no snapshot: the informer lists on every start.
            |b, _, _| b,
        )
    }

    /// The informer of the resource `resource` as [`DynamicObject`]s (kept encoded, read
    /// through [`Cached::meta`] and [`Cached::object`]), with the factory's namespace and
    /// list options. `scope` (from discovery, or a CRD's `spec.scope`) tells whether the
    /// namespace applies.
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        scope: &Scope,
    ) -> SharedIndexInformer<Cached<DynamicObject>> {
        self.dynamic_informer_with(resource, scope, self.inner.config.options.clone())
    }

    /// [`dynamic_informer`](Self::dynamic_informer) with other `options`.
    pub fn dynamic_informer_with(
        &self,
        resource: &ApiResource,
        scope: &Scope,
        options: InformerOptions,
    ) -> SharedIndexInformer<Cached<DynamicObject>> {
        self.get_or_create(
            resource,
            *scope == Scope::Cluster,
            options,
            KubeListerWatcher::cached,
            |b, options, identity| b.snapshot(options, identity),
        )
    }

    /// The informer of `K`'s resource whose objects `T` the lister-watcher made by `lw`
    /// yields: one per `T`, resource and options.
    fn get_or_create<K, T>(
        &self,
        dyntype: &K::DynamicType,
        cluster_scoped: bool,
        mut options: InformerOptions,
        lw: fn(KubeListerWatcher<K>) -> KubeListerWatcher<T>,
        snapshot: KeepSnapshot<T>,
    ) -> SharedIndexInformer<T>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        T: MetaObject + DeserializeOwned + Send + Sync + 'static,
    {
        if cluster_scoped {
            options.namespace = None;
        }
        let resource = resource_name::<K>(dyntype);
        let id = InformerId::new::<T>(resource, options);
        let mut state = self.state();
        if let Some(existing) = state
            .informers
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.informer.as_any().downcast_ref::<SharedIndexInformer<T>>())
        {
            return existing.clone();
        }
        let informer = self.new_informer::<K, T>(dyntype, &id, lw, snapshot);
        state.informers.push(Entry {
            id,
            informer: Box::new(informer.clone()),
            started: false,
        });
        informer
    }

    fn new_informer<K, T>(
        &self,
        dyntype: &K::DynamicType,
        id: &InformerId,
        make: fn(KubeListerWatcher<K>) -> KubeListerWatcher<T>,
        snapshot: KeepSnapshot<T>,
    ) -> SharedIndexInformer<T>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
        T: MetaObject + DeserializeOwned + Send + Sync + 'static,
    {
        let mut lw = KubeListerWatcher::<K>::scoped(
            self.inner.config.client.clone(),
            dyntype,
            id.options.namespace.as_deref(),
        )
        .wire_format(self.inner.config.wire_format)
        .compression(self.inner.config.compression);
        if let Some(l) = &id.options.label_selector {
            lw = lw.labels(l);
        }
        if let Some(f) = &id.options.field_selector {
            lw = lw.fields(f);
        }
        if self.inner.config.drop_managed_fields {
            lw = lw.drop_managed_fields();
        }
        if let Some(t) = self.inner.config.transform.clone() {
            // While decoding, object by object: a list never holds every object with the
            // fields the transform drops (see `KubeListerWatcher::modify`). Only there:
            // each object goes through it exactly once, so it need not be idempotent.
            lw = lw.modify(move |obj: &mut K| t(obj.meta_mut()));
        }
        let config = &self.inner.config;
        let resync = config
            .custom_resync
            .get(&TypeId::of::<K>())
            .copied()
            .unwrap_or(config.default_resync);
        let identity = crate::InformerIdentity::new(
            config.informer_name.clone(),
            K::group(dyntype),
            K::version(dyntype),
            K::plural(dyntype),
        );
        let mut lw: Arc<dyn ListerWatcher<T>> = Arc::new(make(lw));
        if let Some(wrap) = config
            .lister_watchers
            .get(&TypeId::of::<T>())
            .and_then(|m| m.downcast_ref::<ListerWatcherMaker<T>>())
        {
            lw = wrap(id, lw);
        }
        let mut builder = SharedIndexInformer::builder(lw)
            .name(id.to_string())
            .identity(identity)
            .resync_period(resync)
            .fifo(config.fifo)
            .backoff(config.backoff.clone())
            .clock(Arc::clone(&config.clock));
        if let Some(shard) = &id.options.shard {
            builder = builder.shard(shard.clone());
        }
        if let Some(make) = config
            .stores
            .get(&TypeId::of::<T>())
            .and_then(|m| m.downcast_ref::<StoreMaker<T>>())
        {
            builder = builder.store_arc(make());
        }
        if let Some(options) = &config.snapshots {
            let identity = format!(
                "{}/{}/{} {} ns={} labels={} fields={} shard={} wire={:?} managedFields={} transform={} cluster={}",
                K::group(dyntype),
                K::version(dyntype),
                K::plural(dyntype),
                std::any::type_name::<T>(),
                id.options.namespace.as_deref().unwrap_or(""),
                id.options.label_selector.as_deref().unwrap_or(""),
                id.options.field_selector.as_deref().unwrap_or(""),
                id.options
                    .shard
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                config.wire_format,
                if config.drop_managed_fields {
                    "dropped"
                } else {
                    "kept"
                },
                if config.transform.is_some() {
                    "meta"
                } else {
                    "none"
                },
                config.cluster.as_deref().unwrap_or(""),
            );
            builder = snapshot(builder, options.clone(), identity);
        }
        builder.build()
    }

    /// Starts every informer requested so far that is not started yet, each on a Tokio
    /// task. Informers requested later are started by the next call.
    ///
    /// # Errors
    /// [`Error::Stopped`] after [`shutdown`](Self::shutdown); [`Error::Reflector`] outside
    /// a Tokio runtime. The informers started before an error stay started.
    pub fn start(&self) -> Result<(), Error> {
        let mut state = self.state();
        if state.shut_down {
            return Err(Error::Stopped);
        }
        let State {
            informers, handles, ..
        } = &mut *state;
        for entry in informers.iter_mut().filter(|e| !e.started) {
            match entry.informer.start() {
                Ok(handle) => handles.push(handle),
                // Started by its owner: the factory leaves it to them, and waits for it.
                Err(Error::AlreadyStarted) => {}
                Err(e) => return Err(e),
            }
            entry.started = true;
            tracing::debug!(informer = %entry.id, "informer started");
        }
        Ok(())
    }

    /// Waits until every informer the factory has started has synced, or `timeout` has
    /// passed on the factory's clock, and reports on each.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> CacheSyncReport {
        self.wait_for_cache_sync_until(self.inner.config.clock.sleep(timeout))
            .await
    }

    /// Waits until every informer the factory has started has synced, or `stop` resolves,
    /// and reports on each (client-go's `WaitForCacheSync(stopCh)`): `stop` is a
    /// cancellation token's `cancelled()` for a wait as long as the program runs.
    ///
    /// ```no_run
    /// # async fn f(factory: kinformer_informer_factory::SharedInformerFactory) {
    /// let shutdown = tokio_util::sync::CancellationToken::new();
    /// let report = factory.wait_for_cache_sync_until(shutdown.cancelled()).await;
    /// if !report.all_synced() {
    ///     return; // shutting down before the caches synced
    /// }
    /// # }
    /// ```
    pub async fn wait_for_cache_sync_until(
        &self,
        stop: impl Future<Output = ()>,
    ) -> CacheSyncReport {
        poll_until(|| self.sync_report().all_synced(), stop).await;
        self.sync_report()
    }

    /// A snapshot of every informer the factory handed out, in request order: for
    /// metrics and health checks.
    pub fn informer_stats(&self) -> Vec<InformerStats> {
        let state = self.state();
        state.informers.iter().map(|e| e.informer.stats()).collect()
    }

    /// Whether every informer the factory started has synced (and at least one was
    /// started): what a readiness check asks.
    pub fn all_synced(&self) -> bool {
        let report = self.sync_report();
        !report.informers.is_empty() && report.all_synced()
    }

    fn sync_report(&self) -> CacheSyncReport {
        let state = self.state();
        CacheSyncReport {
            informers: state
                .informers
                .iter()
                .filter(|e| e.started)
                .map(|e| (e.id.clone(), e.informer.has_synced()))
                .collect(),
        }
    }

    /// Stops every informer the factory started and waits until each has ended; from then
    /// on [`start`](Self::start) refuses. Calling it again waits for nothing.
    ///
    /// # Errors
    /// The first error an informer stopped with (every informer is stopped regardless;
    /// the others are logged).
    pub async fn shutdown(&self) -> Result<(), Error> {
        let handles = {
            let mut state = self.state();
            state.shut_down = true;
            std::mem::take(&mut state.handles)
        };
        for h in &handles {
            h.cancellation_token().cancel();
        }
        let mut first = None;
        for h in handles {
            if let Err(e) = h.stop().await {
                tracing::warn!(error = %ErrorChain(&e), "an informer stopped with an error");
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Every informer requested so far.
    pub fn informer_ids(&self) -> Vec<InformerId> {
        self.state()
            .informers
            .iter()
            .map(|e| e.id.clone())
            .collect()
    }
}

/// `plural.version.group`, as kubectl prints a resource (`deployments.v1.apps`, `pods.v1`).
fn resource_name<K: Resource>(dyntype: &K::DynamicType) -> String {
    let group = K::group(dyntype);
    let mut name = format!("{}.{}", K::plural(dyntype), K::version(dyntype));
    if !group.is_empty() {
        name.push('.');
        name.push_str(&group);
    }
    name
}
