//! [`SharedInformerFactoryBuilder`]: what every informer of a factory shares (namespace,
//! list options, resyncs, stores, lister-watchers, transform, FIFO, backoff, clock, wire
//! format, snapshots).

use std::any::TypeId;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinformer_core::{Clock, MetaObject};
use kinformer_indexer::IndexerWriter;
use kinformer_kube::{Compression, WireFormat};
use kinformer_reflector::{Backoff, ListerWatcher, ShardSelector};
use kube::core::ObjectMeta;

use super::{
    Config, FactoryInner, InformerId, InformerOptions, ListerWatcherMaker, SharedInformerFactory,
    State, StoreMaker,
};
use crate::{FifoKind, SnapshotOptions};

/// Builds a [`SharedInformerFactory`]; see [`SharedInformerFactory::builder`]. Cloning it
/// makes several factories alike (one per shard, say).
#[derive(Clone)]
pub struct SharedInformerFactoryBuilder {
    pub(super) config: Config,
}

impl fmt::Debug for SharedInformerFactoryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedInformerFactoryBuilder")
            .field("options", &self.config.options)
            .field("default_resync", &self.config.default_resync)
            .field("fifo", &self.config.fifo)
            .finish_non_exhaustive()
    }
}

impl SharedInformerFactoryBuilder {
    /// Watch only `namespace` (client-go's `WithNamespace`); default: every namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config.options.namespace = Some(namespace.into());
        self
    }

    /// The list options every informer of the factory lists and watches with (client-go's
    /// `WithTweakListOptions`): a label selector, a field selector.
    #[must_use]
    pub fn tweak_list_options(mut self, tweak: impl FnOnce(&mut InformerOptions)) -> Self {
        tweak(&mut self.config.options);
        self
    }

    /// Only the objects of the shard `selector` selects, for every informer of the factory
    /// (the same as [`InformerOptions::shard`] in
    /// [`tweak_list_options`](Self::tweak_list_options)). An informer asked for with
    /// [`SharedInformerFactory::informer_with`] and other options is not sharded unless they
    /// say so.
    #[must_use]
    pub fn shard(mut self, selector: ShardSelector) -> Self {
        self.config.options.shard = Some(selector);
        self
    }

    /// The resync period of every informer's default handlers (zero: none). client-go's
    /// `defaultResync`; 30 s to 5 min is the usual choice.
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.config.default_resync = period;
        self
    }

    /// A resync period for the informers of the resource type `K` only (client-go's
    /// `WithCustomResyncConfig`): `Pod` for [`informer::<Pod>`](SharedInformerFactory::informer)
    /// and [`decoded_informer::<Pod>`](SharedInformerFactory::decoded_informer) alike.
    #[must_use]
    pub fn resync_for<K: 'static>(mut self, period: Duration) -> Self {
        self.config.custom_resync.insert(TypeId::of::<K>(), period);
        self
    }

    /// The cache of the informers whose objects are `T` (client-go has no such option: its
    /// store is fixed): `make` is called once per informer of `T` (one per distinct
    /// [`InformerOptions`]) and its store replaces the default
    /// [`ThreadSafeStore`](kinformer_indexer::ThreadSafeStore), as
    /// [`SharedIndexInformerBuilder::store`](crate::SharedIndexInformerBuilder::store) does
    /// for one informer. `T` is `Cached<K>` for [`informer::<K>`](SharedInformerFactory::informer),
    /// `K` for [`decoded_informer::<K>`](SharedInformerFactory::decoded_informer),
    /// `Cached<DynamicObject>` for every [`dynamic_informer`](SharedInformerFactory::dynamic_informer).
    /// Give the store the namespace index
    /// ([`namespace_indexers`](kinformer_indexer::namespace_indexers)): listers need it.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    /// use kinformer_indexer::{namespace_indexers, IndexFunc, ThreadSafeStore};
    /// use kinformer_informer_factory::SharedInformerFactory;
    ///
    /// # async fn run(client: kube::Client) {
    /// // Here the default store with an index by node besides the namespace index; a
    /// // store of your own goes in the same way.
    /// let factory = SharedInformerFactory::builder(client)
    ///     .store_for::<Cached<Pod>, _>(|| {
    ///         let mut indexers = namespace_indexers();
    ///         indexers.insert("byNode".into(), IndexFunc::single(|p: &Cached<Pod>| p.spec()?.node_name()));
    ///         ThreadSafeStore::new(indexers)
    ///     })
    ///     .build();
    /// let pods = factory.informer::<Pod>();
    /// # let _ = pods;
    /// # }
    /// ```
    #[must_use]
    pub fn store_for<T, S>(mut self, make: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        T: MetaObject + Send + Sync + 'static,
        S: IndexerWriter<T> + 'static,
    {
        let make: StoreMaker<T> = Arc::new(move || Arc::new(make()) as Arc<dyn IndexerWriter<T>>);
        self.config.stores.insert(TypeId::of::<T>(), Arc::new(make));
        self
    }

    /// What the informers whose objects are `T` list and watch through: `wrap` gets each
    /// one's id and the lister-watcher the factory made for it (a `KubeListerWatcher` over
    /// the factory's client), and returns the one the informer uses: that one decorated (a
    /// kinformer-replay `Recorder` that records the stream, a counter, a rate limit), or
    /// another altogether (a kinformer-replay `Replay` serving a recording, a fake). The rest
    /// of the factory stays as it is: the same informers, options, stores and resyncs, so
    /// a controller built on a factory runs unchanged over a recorded stream. `T` is as in
    /// [`store_for`](Self::store_for).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    /// use kinformer_informer_factory::SharedInformerFactory;
    /// use kinformer_reflector::ListerWatcher;
    ///
    /// # async fn run(client: kube::Client, script: Arc<dyn ListerWatcher<Cached<Pod>>>) {
    /// // Pods from `script` (say, a replay of a recorded stream), everything else as usual.
    /// let factory = SharedInformerFactory::builder(client)
    ///     .lister_watcher_for::<Cached<Pod>>(move |_id, _cluster| Arc::clone(&script))
    ///     .build();
    /// # let _ = factory;
    /// # }
    /// ```
    #[must_use]
    pub fn lister_watcher_for<T>(
        mut self,
        wrap: impl Fn(&InformerId, Arc<dyn ListerWatcher<T>>) -> Arc<dyn ListerWatcher<T>>
        + Send
        + Sync
        + 'static,
    ) -> Self
    where
        T: MetaObject + Send + Sync + 'static,
    {
        let wrap: ListerWatcherMaker<T> = Arc::new(wrap);
        self.config
            .lister_watchers
            .insert(TypeId::of::<T>(), Arc::new(wrap));
        self
    }

    /// A transform of every object's metadata before it is cached, for every informer of
    /// the factory (client-go's `WithTransform`), e.g. dropping `managedFields`. It runs as
    /// each object is decoded ([`KubeListerWatcher::modify`](kinformer_kube::KubeListerWatcher::modify)), so even the initial list
    /// never holds every object with those fields at once. It needs the decoded object:
    /// the default informers then decode, change and encode each object instead of
    /// transcoding it from protobuf, which costs more CPU than the bytes it saves in a
    /// cache that keeps `managedFields` as their JSON text. Per-type transforms: call
    /// [`SharedIndexInformer::set_transform`](crate::SharedIndexInformer::set_transform) on the informer before starting it.
    #[must_use]
    pub fn transform_meta(
        mut self,
        transform: impl Fn(&mut ObjectMeta) + Send + Sync + 'static,
    ) -> Self {
        self.config.transform = Some(Arc::new(transform));
        self
    }

    /// Leaves `managedFields` out of every informer's objects: asked of the server (KEP-5958,
    /// which ignores the request where it is not served), stripped as each object is
    /// transcoded where they come anyway (see [`KubeListerWatcher::drop_managed_fields`](kinformer_kube::KubeListerWatcher::drop_managed_fields)).
    /// The way to drop them: unlike a [`transform_meta`](Self::transform_meta) doing the
    /// same, it keeps the default informers' transcoding, and costs less than keeping them.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kinformer_informer_factory::SharedInformerFactory;
    /// # fn f(client: kube::Client) {
    /// let factory = SharedInformerFactory::builder(client).drop_managed_fields().build();
    /// let pods = factory.informer::<Pod>();
    /// # let _ = pods;
    /// # }
    /// ```
    #[must_use]
    pub fn drop_managed_fields(mut self) -> Self {
        self.config.drop_managed_fields = true;
        self
    }

    /// The FIFO kind of every informer (default [`FifoKind::InOrderAtomic`], as client-go
    /// v1.36).
    #[must_use]
    pub fn fifo(mut self, kind: FifoKind) -> Self {
        self.config.fifo = kind;
        self
    }

    /// The retry spacing of every informer's reflector (default [`Backoff::default`]; see
    /// [`SharedIndexInformerBuilder::backoff`](crate::SharedIndexInformerBuilder::backoff)). [`Backoff::client_go`] is client-go's.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// The clock every informer's reflector and resyncs read and sleep on, and that
    /// [`wait_for_cache_sync`](SharedInformerFactory::wait_for_cache_sync) times out on
    /// (default [`TokioClock`](kinformer_core::TokioClock); see
    /// [`SharedIndexInformerBuilder::clock`](crate::SharedIndexInformerBuilder::clock)).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    /// The encoding every informer asks the API server for (default
    /// [`WireFormat::Auto`]: protobuf for built-in types, JSON for custom resources and
    /// [`DynamicObject`](kube::core::DynamicObject), as client-go's typed and dynamic clients).
    #[must_use]
    pub fn wire_format(mut self, format: WireFormat) -> Self {
        self.config.wire_format = format;
        self
    }

    /// Whether every informer's lists and streaming lists ask for gzip (default
    /// [`Compression::Gzip`], as client-go; see there for what it costs).
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> Self {
        self.config.compression = compression;
        self
    }

    /// The `name` label of the factory's informers in client-go 1.36's informer metrics
    /// (client-go's `WithInformerName`; empty by default). Each informer's identity there is
    /// this name and its group, version and resource ([`InformerStats::identity`](crate::InformerStats::identity)).
    #[must_use]
    pub fn informer_name(mut self, name: impl Into<String>) -> Self {
        self.config.informer_name = name.into();
        self
    }

    /// Every informer of the default cache (`informer::<K>()`, `dynamic_informer`) keeps it
    /// on disk in `options.dir` and starts from it (see [`SnapshotOptions`]): a restarted
    /// process resumes from where its caches were instead of listing everything again.
    /// Each informer's file is named after its identity: resource, type, namespace,
    /// selectors, shard, wire format, whether `managedFields` are dropped, whether a
    /// transform runs, and the cluster's URL when the factory was built
    /// [`from_config`](SharedInformerFactory::from_config) (else keep one directory per
    /// cluster). Informers of decoded objects (`decoded_informer`) have none.
    ///
    /// ```no_run
    /// # use kinformer_informer_factory::{SharedInformerFactory, SnapshotOptions};
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let factory = SharedInformerFactory::from_config(kube::Config::infer().await?)?
    ///     .snapshots(SnapshotOptions::new("/var/cache/my-controller"))
    ///     .build();
    /// # let _ = factory;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn snapshots(mut self, options: SnapshotOptions) -> Self {
        self.config.snapshots = Some(options);
        self
    }

    /// The factory.
    pub fn build(self) -> SharedInformerFactory {
        SharedInformerFactory {
            inner: Arc::new(FactoryInner {
                config: self.config,
                state: Mutex::new(State::default()),
            }),
        }
    }
}
