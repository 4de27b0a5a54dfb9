//! `owns` and `owns_with` without an API server: a child's event enqueues its owner only when
//! the controller's cache of owners holds that very owner (same key, same uid), and
//! `owns_with`'s predicate filters the child's updates.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_compact_store::Cached;
use kinformer_controller::controller::{Controller, OwnsError};
use kinformer_controller::owner::controller_ref;
use kinformer_controller::predicates;
use kinformer_core::{DeletedFinalStateUnknown, DeletedObject, ObjectKey, Sink};
use kinformer_workqueue::Queue;

use super::controller::{FakeInformer, FastQueue, fast_queue};

fn config_map(name: &str, uid: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("ns".into());
    cm.metadata.name = Some(name.into());
    cm.metadata.uid = Some(uid.into());
    cm
}

/// A pod in `ns` whose controller is the ConfigMap `owner` with uid `uid`.
fn child(name: &str, owner: &str, uid: &str, rv: &str) -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.name = Some(name.into());
    pod.metadata.resource_version = Some(rv.into());
    pod.metadata.owner_references = Some(vec![
        controller_ref(&config_map(owner, uid)).expect("the owner has a name and a uid"),
    ]);
    Arc::new(pod)
}

/// A controller over ConfigMaps (its primary cache holds `parent`, uid `u-1`) that owns the
/// pods of the returned informer, registered by `wire`.
fn wired(
    wire: impl FnOnce(&Controller<ObjectKey, FastQueue<ObjectKey>>, &FakeInformer<Pod>),
) -> (
    Controller<ObjectKey, FastQueue<ObjectKey>>,
    FakeInformer<Pod>,
) {
    let owners = FakeInformer::<ConfigMap>::default();
    owners
        .cache
        .add(Arc::new(config_map("parent", "u-1")))
        .expect("cache the owner");
    let controller = Controller::with_queue(fast_queue());
    controller.watch(&owners).expect("watch the owners");
    let children = FakeInformer::<Pod>::default();
    wire(&controller, &children);
    (controller, children)
}

/// The keys queued so far, taken out of the queue.
fn drain(controller: &Controller<ObjectKey, FastQueue<ObjectKey>>) -> Vec<String> {
    let queue = controller.queue();
    let mut keys = Vec::new();
    while !queue.is_empty() {
        let Some(key) = queue.get() else { break };
        queue.done(&key);
        keys.push(key.to_string());
    }
    keys
}

#[test]
fn a_child_enqueues_its_owner_only_when_the_owner_is_cached_with_the_same_uid() {
    let (controller, children) = wired(|c, pods| {
        c.owns::<ConfigMap, Pod>(pods).expect("owns");
    });
    let handlers = children.handlers.lock().unwrap();
    let on_pods = &handlers[0];

    on_pods.on_add(&child("cached", "parent", "u-1", "1"), false);
    assert_eq!(drain(&controller), ["ns/parent"], "the cached owner");

    on_pods.on_add(&child("orphaned", "gone", "u-2", "1"), false);
    on_pods.on_update(
        &child("orphaned", "gone", "u-2", "1"),
        &child("orphaned", "gone", "u-2", "2"),
    );
    assert_eq!(drain(&controller), Vec::<String>::new(), "owner not cached");

    // Same name, another uid: the child of an earlier `parent`, deleted and made again.
    on_pods.on_add(&child("stale", "parent", "u-0", "1"), false);
    on_pods.on_delete(&DeletedObject::Object(child("stale", "parent", "u-0", "1")));
    assert_eq!(drain(&controller), Vec::<String>::new(), "another uid");

    // Deletes still reach the owner, tombstones included.
    on_pods.on_delete(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
        key: ObjectKey::parse("ns/cached").unwrap(),
        obj: child("cached", "parent", "u-1", "1"),
    }));
    assert_eq!(drain(&controller), ["ns/parent"], "the tombstone");

    // A child moved from a stale owner to the cached one reaches the cached one.
    on_pods.on_update(
        &child("moved", "parent", "u-0", "1"),
        &child("moved", "parent", "u-1", "2"),
    );
    assert_eq!(drain(&controller), ["ns/parent"], "the new owner");
}

#[test]
fn owns_with_filters_the_childs_updates_by_its_predicate() {
    let (controller, children) = wired(|c, pods| {
        c.owns::<ConfigMap, Pod>(pods).expect("owns");
        c.owns_with::<ConfigMap, Pod>(pods, predicates::resource_version_changed())
            .expect("owns_with");
    });
    let handlers = children.handlers.lock().unwrap();
    let (plain, filtered) = (&handlers[0], &handlers[1]);
    let (v1, v2) = (
        child("web", "parent", "u-1", "1"),
        child("web", "parent", "u-1", "2"),
    );

    // A resync: the same resourceVersion. `owns` passes it on, `owns_with` does not.
    plain.on_update(&v1, &Arc::clone(&v1));
    assert_eq!(drain(&controller), ["ns/parent"]);
    filtered.on_update(&v1, &Arc::clone(&v1));
    assert_eq!(drain(&controller), Vec::<String>::new(), "resync filtered");

    // A real change, an add and a delete pass.
    filtered.on_update(&v1, &v2);
    assert_eq!(drain(&controller), ["ns/parent"], "changed");
    filtered.on_add(&v2, false);
    assert_eq!(drain(&controller), ["ns/parent"], "added");
    filtered.on_delete(&DeletedObject::Object(Arc::clone(&v2)));
    assert_eq!(drain(&controller), ["ns/parent"], "deleted");
}

/// With the default informers, owners and children are `Cached` objects: the children's
/// owner references and the owners' uids are read in place, and the owners' cache of
/// either kind (cached or decoded) is searched.
#[test]
fn owns_reads_cached_children_and_finds_cached_owners() {
    let cached = |o: &ConfigMap| Arc::new(Cached::new(o).unwrap());
    let owners = FakeInformer::<Cached<ConfigMap>>::default();
    owners
        .cache
        .add(cached(&config_map("parent", "u-1")))
        .expect("cache the owner");
    let controller = Controller::<ObjectKey, _>::with_queue(fast_queue());
    controller.watch(&owners).expect("watch the owners");
    let children = FakeInformer::<Cached<Pod>>::default();
    controller
        .owns_with::<ConfigMap, _>(&children, predicates::generation_changed())
        .expect("owns_with");
    let handlers = children.handlers.lock().unwrap();
    let pod = |name, owner, uid, rv| Arc::new(Cached::new(&*child(name, owner, uid, rv)).unwrap());

    handlers[0].on_add(&pod("web", "parent", "u-1", "1"), false);
    assert_eq!(drain(&controller), ["ns/parent"], "the cached owner");
    handlers[0].on_add(&pod("stale", "parent", "u-0", "1"), false);
    assert_eq!(drain(&controller), Vec::<String>::new(), "another uid");
}

#[test]
fn owns_with_still_ignores_owners_not_cached() {
    let (controller, children) = wired(|c, pods| {
        c.owns_with::<ConfigMap, Pod>(pods, predicates::resource_version_changed())
            .expect("owns_with");
    });
    let handlers = children.handlers.lock().unwrap();
    handlers[0].on_update(
        &child("web", "other", "u-5", "1"),
        &child("web", "other", "u-5", "2"),
    );
    assert_eq!(drain(&controller), Vec::<String>::new());
}

#[test]
fn owns_needs_the_owners_informer_watched_first() {
    let controller = Controller::<ObjectKey, _>::with_queue(fast_queue());
    let pods = FakeInformer::<Pod>::default();
    let Err(err) = controller.owns::<ConfigMap, Pod>(&pods) else {
        panic!("owns registered with no ConfigMap informer watched");
    };
    assert!(
        matches!(&err, OwnsError::OwnerNotWatched { kind } if kind == "ConfigMap"),
        "{err:?}"
    );
    assert!(
        pods.handlers.lock().unwrap().is_empty(),
        "nothing registered"
    );

    // An informer of another kind is not a cache of owners either.
    controller
        .watch(&FakeInformer::<Pod>::default())
        .expect("watch pods");
    assert!(controller.owns::<ConfigMap, Pod>(&pods).is_err());
}

#[test]
fn every_watched_informer_of_the_owner_kind_is_searched() {
    // Two ConfigMap informers (say, two label selectors); the owner is in the second.
    let first = FakeInformer::<ConfigMap>::default();
    let second = FakeInformer::<ConfigMap>::default();
    second
        .cache
        .add(Arc::new(config_map("parent", "u-1")))
        .unwrap();
    let controller = Controller::<ObjectKey, _>::with_queue(fast_queue());
    controller.watch(&first).unwrap();
    controller
        .watch_with(&second, predicates::labels_changed())
        .unwrap();
    let pods = FakeInformer::<Pod>::default();
    controller.owns::<ConfigMap, Pod>(&pods).unwrap();
    pods.handlers.lock().unwrap()[0].on_add(&child("web", "parent", "u-1", "1"), false);
    assert_eq!(drain(&controller), ["ns/parent"]);
}
