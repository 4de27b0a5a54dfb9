//! What feeds a controller's queue: the handlers that turn informer events into keys, and
//! the controller methods that register them.

#[cfg(feature = "kube")]
use std::any::TypeId;
#[cfg(feature = "kube")]
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
#[cfg(feature = "kube")]
use std::sync::{Mutex, MutexGuard, PoisonError};

#[cfg(feature = "kube")]
use kinformer_compact_store::{Cached, KubeObject, OwnerRef};

use kinformer_core::{
    DeletedObject, ErrorChain, MetaObject, ObjectKey, deletion_handling_key, meta_namespace_key,
};
#[cfg(feature = "kube")]
use kinformer_indexer::Indexer;
use kinformer_informer_factory::{
    FilteringResourceEventHandler, HandlerOptions, HandlerRegistration, ResourceEventHandler,
    SharedInformer,
};
use kinformer_workqueue::{LOW_PRIORITY, Queue, RateLimitingQueue};

use super::Controller;
use crate::predicates::Predicate;

/// The event handler of most controllers: it only enqueues the object's key
/// (`namespace/name`), the tombstone-aware way on delete (client-go's
/// `MetaNamespaceKeyFunc` and `DeletionHandlingMetaNamespaceKeyFunc`). An object without
/// a name is logged and skipped.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_controller::controller::{Controller, EnqueueKeys};
/// use kinformer_core::ObjectKey;
/// use kinformer_informer_factory::ResourceEventHandler;
/// use kinformer_workqueue::Queue;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let controller = Controller::<ObjectKey>::new("pods");
/// let handler = EnqueueKeys::new(Arc::clone(controller.queue()));
/// let mut pod = Pod::default();
/// pod.metadata.namespace = Some("default".into());
/// pod.metadata.name = Some("web-0".into());
/// ResourceEventHandler::<Pod>::on_add(&handler, &Arc::new(pod), true);
/// assert_eq!(controller.queue().len(), 1);
/// // informer.add_event_handler(handler)?;
/// ```
pub struct EnqueueKeys<Q> {
    queue: Arc<Q>,
}

impl<Q> EnqueueKeys<Q> {
    /// A handler adding keys to `queue`.
    pub fn new(queue: Arc<Q>) -> Self {
        Self { queue }
    }
}

impl<Q> fmt::Debug for EnqueueKeys<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnqueueKeys").finish_non_exhaustive()
    }
}

/// The priority of an event's key, as controller-runtime v0.23's handlers give it: objects
/// of the initial list and resyncs (an update whose resourceVersion did not change) at
/// [`LOW_PRIORITY`], so that real changes queued behind them go first; the rest at 0. A
/// queue without priorities ignores it.
fn priority(low: bool) -> i32 {
    if low { LOW_PRIORITY } else { 0 }
}

/// Whether an update is a resync: the same resourceVersion on both sides.
fn is_resync<K: MetaObject>(old: &K, new: &K) -> bool {
    old.object_resource_version() == new.object_resource_version()
}

/// Adds `key` to `queue` at `priority`, or logs why there is none.
fn enqueue<Q: Queue<ObjectKey>>(
    queue: &Q,
    key: Result<ObjectKey, kinformer_core::Error>,
    priority: i32,
) {
    match key {
        Ok(key) => queue.add_with_priority(key, priority),
        Err(err) => {
            tracing::warn!(error = %ErrorChain(&err), "object without a key: not enqueued")
        }
    }
}

impl<K, Q> ResourceEventHandler<K> for EnqueueKeys<Q>
where
    K: MetaObject,
    Q: Queue<ObjectKey>,
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        enqueue(
            &*self.queue,
            meta_namespace_key(&**obj),
            priority(is_in_initial_list),
        );
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let low = is_resync(&**old, &**new);
        enqueue(&*self.queue, meta_namespace_key(&**new), priority(low));
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        enqueue(&*self.queue, deletion_handling_key(obj), 0);
    }
}

/// The keys an object of a related resource stands for: see [`Controller::watches`].
type MapFn<K> = Arc<dyn Fn(&K) -> Vec<ObjectKey> + Send + Sync>;

/// A handler that enqueues the keys a function maps each object to (controller-runtime's
/// `EnqueueRequestsFromMapFunc`): for an update, the keys of the old and of the new object
/// (so a child that changes owner reaches both); for a delete, the keys of the last known
/// state, tombstones included.
pub struct EnqueueMapped<K, Q> {
    queue: Arc<Q>,
    map: MapFn<K>,
}

impl<K, Q> fmt::Debug for EnqueueMapped<K, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnqueueMapped").finish_non_exhaustive()
    }
}

impl<K, Q: Queue<ObjectKey>> EnqueueMapped<K, Q> {
    /// A handler adding `map(obj)` to `queue`.
    pub fn new(queue: Arc<Q>, map: impl Fn(&K) -> Vec<ObjectKey> + Send + Sync + 'static) -> Self {
        Self {
            queue,
            map: Arc::new(map),
        }
    }

    fn enqueue(&self, obj: &K, priority: i32) {
        for key in (self.map)(obj) {
            self.queue.add_with_priority(key, priority);
        }
    }
}

impl<K: MetaObject, Q: Queue<ObjectKey>> ResourceEventHandler<K> for EnqueueMapped<K, Q> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.enqueue(obj, priority(is_in_initial_list));
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let low = priority(is_resync(&**old, &**new));
        self.enqueue(old, low);
        self.enqueue(new, low);
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        self.enqueue(obj.object(), 0);
    }
}

/// A handler that passes an update on to `inner` only when a predicate says it matters
/// (controller-runtime's predicates on update events). Adds and deletes always pass: the
/// controller must learn that an object appeared or went.
pub struct WithPredicate<K, H> {
    inner: H,
    predicate: Predicate<K>,
}

impl<K, H> WithPredicate<K, H> {
    /// `inner`, with updates filtered by `predicate`.
    pub fn new(inner: H, predicate: Predicate<K>) -> Self {
        Self { inner, predicate }
    }
}

impl<K, H> fmt::Debug for WithPredicate<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithPredicate")
            .field("predicate", &self.predicate)
            .finish_non_exhaustive()
    }
}

impl<K, H: ResourceEventHandler<K>> ResourceEventHandler<K> for WithPredicate<K, H> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.inner.on_add(obj, is_in_initial_list);
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if self.predicate.matches(old, new) {
            self.inner.on_update(old, new);
        }
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        self.inner.on_delete(obj);
    }
}

/// The result of registering a controller's handler with an informer.
pub type Registered = Result<Box<dyn HandlerRegistration>, kinformer_informer_factory::Error>;

impl<Q> Controller<ObjectKey, Q>
where
    Q: RateLimitingQueue<ObjectKey> + Send + Sync + 'static,
{
    /// An [`EnqueueKeys`] handler feeding this controller's queue.
    pub fn enqueue_handler(&self) -> EnqueueKeys<Q> {
        EnqueueKeys::new(Arc::clone(&self.queue))
    }

    /// Reconciles the objects of `informer` (the primary resource): each event enqueues the
    /// object's key, deletes through the tombstone-aware key function. The handler gets the
    /// informer's default resync period (the factory's, for a factory's informer), as
    /// `add_event_handler` does, and a buffer that coalesces by key
    /// ([`HandlerOptions::coalesce_by_key`]): a key enqueuer loses nothing by it, and a
    /// stuck queue holds at most one notification per object. Works with any
    /// [`SharedInformer`]: a
    /// [`SharedIndexInformer`](kinformer_informer_factory::SharedIndexInformer), or a fake in
    /// a test.
    ///
    /// # Errors
    /// The informer's refusal (for example: it has stopped).
    pub fn watch<K: MetaObject + 'static>(&self, informer: &dyn SharedInformer<K>) -> Registered {
        let registered = informer
            .add_event_handler_with_options(Box::new(self.enqueue_handler()), enqueuing())?;
        self.register_primary(informer);
        Ok(registered)
    }

    /// As [`watch`](Self::watch), with updates passed on only when `predicate` says they
    /// matter (e.g. [`predicates::generation_changed`](crate::predicates::generation_changed)
    /// to skip status-only updates). Adds and deletes always pass.
    ///
    /// # Errors
    /// As [`watch`](Self::watch).
    pub fn watch_with<K: MetaObject + 'static>(
        &self,
        informer: &dyn SharedInformer<K>,
        predicate: Predicate<K>,
    ) -> Registered {
        let handler = WithPredicate::new(self.enqueue_handler(), predicate);
        let registered = informer.add_event_handler_with_options(Box::new(handler), enqueuing())?;
        self.register_primary(informer);
        Ok(registered)
    }

    /// As [`watch`](Self::watch), for the objects `filter` keeps only (a shard's selector, a
    /// label): client-go's `FilteringResourceEventHandler`,
    /// so an update that takes an object out of the set enqueues it as a delete would, and
    /// one that brings it in as an add. The way to run one shard's controller on an
    /// informer over all the shards a replica holds (kinformer-sharding's
    /// `ShardManager::selection`): filter by the shard's selector, and
    /// [`remove`](kinformer_informer_factory::HandlerRegistration::remove) the returned
    /// registration when the shard's term ends.
    ///
    /// # Errors
    /// As [`watch`](Self::watch).
    pub fn watch_where<K: MetaObject + 'static>(
        &self,
        informer: &dyn SharedInformer<K>,
        filter: impl Fn(&K) -> bool + Send + Sync + 'static,
    ) -> Registered {
        let handler = FilteringResourceEventHandler::new(filter, self.enqueue_handler());
        let registered = informer.add_event_handler_with_options(Box::new(handler), enqueuing())?;
        self.register_primary(informer);
        Ok(registered)
    }

    /// Remembers `informer`'s cache as one holding this controller's primary objects, for
    /// [`owns`](Self::owns) to look owners up in (feature `kube`; nothing without it).
    fn register_primary<K: MetaObject + 'static>(&self, informer: &dyn SharedInformer<K>) {
        #[cfg(feature = "kube")]
        self.primaries.register::<K>(informer.indexer());
        #[cfg(not(feature = "kube"))]
        let _ = informer;
    }

    /// Reconciles the keys `map` gives for each object of a related resource
    /// (kube-runtime's `watches`, controller-runtime's `EnqueueRequestsFromMapFunc`): an
    /// update enqueues the keys of the old and the new object, a delete those of the last
    /// known state (tombstones included). Use a shared informer from the factory: one watch
    /// per type, however many controllers map it. The buffer coalesces by key, as
    /// [`watch`](Self::watch)'s: an object that changed several times while the queue was
    /// stuck maps its first and last state, not the ones in between.
    ///
    /// ```
    /// use kinformer_controller::controller::Controller;
    /// use kinformer_core::ObjectKey;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    ///
    /// /// Pods name the ConfigMap they read in an annotation: a ConfigMap change reconciles
    /// /// nothing by itself here; the other way round, a pod's change reconciles its ConfigMap.
    /// fn config_of(pod: &Pod) -> Vec<ObjectKey> {
    ///     let ns = pod.metadata.namespace.as_deref();
    ///     let annotations = pod.metadata.annotations.iter().flatten();
    ///     annotations
    ///         .filter(|(k, _)| *k == "example.com/config")
    ///         .filter_map(|(_, name)| ObjectKey::new(ns, name).ok())
    ///         .collect()
    /// }
    /// # fn wire(controller: &Controller<ObjectKey>, pods: &SharedIndexInformer<Pod>) -> Result<(), kinformer_informer_factory::Error> {
    /// controller.watches(pods, config_of)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`watch`](Self::watch).
    pub fn watches<K: MetaObject + 'static>(
        &self,
        informer: &dyn SharedInformer<K>,
        map: impl Fn(&K) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Registered {
        let handler = EnqueueMapped::new(Arc::clone(&self.queue), map);
        informer.add_event_handler_with_options(Box::new(handler), enqueuing())
    }
}

#[cfg(feature = "kube")]
impl<Q> Controller<ObjectKey, Q>
where
    Q: RateLimitingQueue<ObjectKey> + Send + Sync + 'static,
{
    /// Reconciles the owner of each object of `informer` whose controller owner reference
    /// is of kind `P` (controller-runtime's `Owns`, kube-runtime's `owns`): children `C`
    /// edited, created or deleted (tombstones included) enqueue their owner's key. The owner
    /// is looked up in the child's namespace, or by name alone when `P` is cluster-scoped;
    /// references match on API group and kind, whatever the version.
    ///
    /// Only owners this controller has in its cache are enqueued, as client-go's
    /// sample-controller does in `handleObject`: the owner must be in the cache of an
    /// informer of `P` given to [`watch`](Self::watch) or [`watch_with`](Self::watch_with)
    /// (so call one of them first), **and its uid must be the reference's uid**. A child
    /// whose owner is not cached (gone, never seen, or outside the informer's namespace or
    /// selector) enqueues nothing: its owner's own events reconcile it if it comes. The uid
    /// check goes beyond client-go, which compares names only: an owner deleted and created
    /// again under the same name is another object, and the first one's children (waiting
    /// for the garbage collector) do not reconcile it. Each child event reads the owner's uid
    /// from the cache, and the child's owner references in place: nothing is decoded.
    ///
    /// ```no_run
    /// use kinformer_controller::controller::Controller;
    /// use kinformer_core::ObjectKey;
    /// use kinformer_informer_factory::SharedInformerFactory;
    /// use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    ///
    /// # fn wire(factory: &SharedInformerFactory) -> Result<(), Box<dyn std::error::Error>> {
    /// let controller = Controller::<ObjectKey>::new("deployments");
    /// controller.watch(&factory.informer::<Deployment>())?; // the owners' cache
    /// controller.owns::<Deployment, _>(&factory.informer::<ReplicaSet>())?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`OwnsError::OwnerNotWatched`] when no informer of `P` was given to `watch` or
    /// `watch_with` before; [`OwnsError::Informer`] as [`watch`](Self::watch).
    pub fn owns<P, C>(&self, informer: &dyn SharedInformer<C>) -> Owned
    where
        P: kube_core::Resource<DynamicType = ()> + 'static,
        P::Scope: 'static,
        C: KubeObject + 'static,
    {
        let handler = self.owner_handler::<P, C>()?;
        Ok(informer.add_event_handler_with_options(Box::new(handler), enqueuing())?)
    }

    /// As [`owns`](Self::owns), with the child's updates passed on only when `predicate`
    /// says they matter: for example
    /// [`predicates::resource_version_changed`](crate::predicates::resource_version_changed)
    /// to skip the children's resyncs, or
    /// [`predicates::generation_changed`](crate::predicates::generation_changed) to skip
    /// their status updates. Adds and deletes always pass.
    ///
    /// ```no_run
    /// use kinformer_controller::controller::Controller;
    /// use kinformer_controller::predicates;
    /// use kinformer_core::ObjectKey;
    /// use kinformer_informer_factory::SharedInformerFactory;
    /// use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    ///
    /// # fn wire(factory: &SharedInformerFactory) -> Result<(), Box<dyn std::error::Error>> {
    /// let controller = Controller::<ObjectKey>::new("deployments");
    /// controller.watch(&factory.informer::<Deployment>())?;
    /// let replica_sets = factory.informer::<ReplicaSet>();
    /// controller.owns_with::<Deployment, _>(&replica_sets, predicates::resource_version_changed())?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`owns`](Self::owns).
    pub fn owns_with<P, C>(
        &self,
        informer: &dyn SharedInformer<C>,
        predicate: Predicate<C>,
    ) -> Owned
    where
        P: kube_core::Resource<DynamicType = ()> + 'static,
        P::Scope: 'static,
        C: KubeObject + 'static,
    {
        let handler = WithPredicate::new(self.owner_handler::<P, C>()?, predicate);
        Ok(informer.add_event_handler_with_options(Box::new(handler), enqueuing())?)
    }

    /// The handler mapping children `C` to their cached owner `P`.
    fn owner_handler<P, C>(&self) -> Result<EnqueueMapped<C, Q>, OwnsError>
    where
        P: kube_core::Resource<DynamicType = ()> + 'static,
        P::Scope: 'static,
        C: KubeObject + 'static,
    {
        let owners = self.primaries.of::<P>();
        if owners.is_empty() {
            return Err(OwnsError::OwnerNotWatched {
                kind: P::kind(&()).into_owned(),
            });
        }
        Ok(EnqueueMapped::new(
            Arc::clone(&self.queue),
            move |child: &C| cached_owner_keys::<P, C>(child, &owners),
        ))
    }
}

/// What [`Controller::owns`] and [`Controller::owns_with`] return.
#[cfg(feature = "kube")]
pub type Owned = Result<Box<dyn HandlerRegistration>, OwnsError>;

/// Why [`Controller::owns`] registered nothing.
#[cfg(feature = "kube")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwnsError {
    /// The controller has no cache of the owner's kind to look owners up in: give the
    /// owners' informer to [`watch`](Controller::watch) or
    /// [`watch_with`](Controller::watch_with) before `owns`.
    #[error(
        "the controller watches no {kind} informer: call watch or watch_with with the owners' informer before owns"
    )]
    OwnerNotWatched {
        /// The owner's kind.
        kind: String,
    },
    /// The child informer refused the handler (for example: it has stopped).
    #[error(transparent)]
    Informer(#[from] kinformer_informer_factory::Error),
}

/// Whether a cache holds an object under a key (`namespace/name`) with a uid.
#[cfg(feature = "kube")]
type HoldsOwner = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The caches of a controller's primary resource, by the type of their objects: every
/// informer given to `watch` or `watch_with`, for `owns` to look owners up in, each as a
/// look-up of an owner's key and uid.
#[cfg(feature = "kube")]
#[derive(Default)]
pub(crate) struct Primaries(Mutex<HashMap<TypeId, Vec<HoldsOwner>>>);

#[cfg(feature = "kube")]
impl Primaries {
    /// Adds a cache of `T` objects.
    pub(crate) fn register<T: MetaObject + 'static>(&self, cache: Arc<dyn Indexer<T>>) {
        let holds: HoldsOwner = Arc::new(move |key, uid| {
            cache
                .get_by_key(key)
                .is_some_and(|owner| owner.object_uid() == Some(uid))
        });
        self.lock()
            .entry(TypeId::of::<T>())
            .or_default()
            .push(holds);
    }

    /// Every cache of objects of the resource `P` registered so far, kept as `Cached<P>`
    /// (the default) or decoded.
    pub(crate) fn of<P: 'static>(&self) -> Vec<HoldsOwner> {
        let map = self.lock();
        [TypeId::of::<Cached<P>>(), TypeId::of::<P>()]
            .iter()
            .filter_map(|t| map.get(t))
            .flatten()
            .cloned()
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<TypeId, Vec<HoldsOwner>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How the controller's key-enqueuing handlers are registered: the informer's default
/// resync, a buffer that coalesces by key.
fn enqueuing() -> HandlerOptions {
    HandlerOptions::new().coalesce_by_key()
}

/// The keys of `child`'s controller owners of kind `P` that one of `owners` holds, with
/// the uid the reference names.
#[cfg(feature = "kube")]
fn cached_owner_keys<P, C>(child: &C, owners: &[HoldsOwner]) -> Vec<ObjectKey>
where
    P: kube_core::Resource<DynamicType = ()> + 'static,
    P::Scope: 'static,
    C: KubeObject,
{
    owner_refs::<P, C>(child)
        .filter(|(key, reference)| {
            owners
                .iter()
                .any(|holds| holds(key.as_str(), reference.uid))
        })
        .map(|(key, _)| key)
        .collect()
}

/// `child`'s controller owner references of kind `P`, each with the key its owner has in
/// a cache of `P`.
#[cfg(feature = "kube")]
fn owner_refs<P, C>(child: &C) -> impl Iterator<Item = (ObjectKey, OwnerRef<'_>)>
where
    P: kube_core::Resource<DynamicType = ()> + 'static,
    P::Scope: 'static,
    C: KubeObject,
{
    let group = P::group(&());
    let kind = P::kind(&());
    let namespaced = TypeId::of::<P::Scope>() == TypeId::of::<kube_core::NamespaceResourceScope>();
    let namespace = namespaced.then(|| child.object_namespace()).flatten();
    child
        .owner_references()
        .filter(move |r| r.controller == Some(true) && r.kind == kind)
        .filter(move |r| api_group(r.api_version) == group)
        .filter_map(move |r| Some((ObjectKey::new(namespace, r.name).ok()?, r)))
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group `""`).
#[cfg(feature = "kube")]
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

#[cfg(all(test, feature = "kube"))]
mod tests {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn owned(owners: &[(&str, &str, &str, Option<bool>)]) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.namespace = Some("ns".into());
        rs.metadata.name = Some("child".into());
        rs.metadata.owner_references = Some(
            owners
                .iter()
                .map(|(api_version, kind, name, controller)| OwnerReference {
                    api_version: (*api_version).into(),
                    kind: (*kind).into(),
                    name: (*name).into(),
                    controller: *controller,
                    ..OwnerReference::default()
                })
                .collect(),
        );
        rs
    }

    /// The keys of `rs`'s controller owners of kind `P`, cached or not.
    fn keys<P>(rs: &ReplicaSet) -> Vec<String>
    where
        P: kube_core::Resource<DynamicType = ()> + 'static,
        P::Scope: 'static,
    {
        owner_refs::<P, _>(rs).map(|(k, _)| k.to_string()).collect()
    }

    #[test]
    fn only_the_controller_reference_of_the_owner_kind_and_group_counts() {
        let rs = owned(&[
            ("apps/v1", "Deployment", "web", Some(true)),
            ("apps/v1", "Deployment", "not-controller", Some(false)),
            ("example.com/v1", "Deployment", "other-group", Some(true)),
            ("apps/v1beta2", "Deployment", "old-version", Some(true)),
            ("v1", "Pod", "other-kind", Some(true)),
        ]);
        assert_eq!(keys::<Deployment>(&rs), ["ns/web", "ns/old-version"]);
        assert_eq!(keys::<Pod>(&rs), ["ns/other-kind"]);
    }

    #[test]
    fn a_cluster_scoped_owner_is_keyed_by_name_alone() {
        let rs = owned(&[("v1", "Namespace", "ns", Some(true))]);
        assert_eq!(keys::<Namespace>(&rs), ["ns"]);
    }

    #[test]
    fn api_groups_of_core_and_named_groups() {
        assert_eq!(api_group("v1"), "");
        assert_eq!(api_group("apps/v1"), "apps");
        assert_eq!(api_group("kinformer.dev/v1alpha1"), "kinformer.dev");
    }
}
