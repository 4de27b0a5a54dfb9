//! Rule 34 (ARCHITECTURE.md): listers get and list by label selector, namespaced lists go through
//! the namespace index, and not found is a typed error — for k8s-openapi types, CRDs and
//! `DynamicObject`.

use crate::common;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::{Node, Pod};
use kinformer_core::{KnownObjects, MetaObject, ObjectKey, Sink};
use kinformer_indexer::{
    Error, Indexer, Indexers, Lister, ThreadSafeStore, everything, namespace_indexers,
    parse_selector,
};
use kube::CustomResource;
use kube_core::{ApiResource, DynamicObject, GroupVersionKind, ObjectMeta};
use serde::{Deserialize, Serialize};

fn meta(ns: Option<&str>, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: ns.map(str::to_owned),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

fn pod(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: meta(Some(ns), name, labels),
        ..Pod::default()
    })
}

fn pod_names(pods: &[Arc<Pod>]) -> Vec<String> {
    let mut n: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    n.sort();
    n
}

fn pod_lister() -> Lister<Pod> {
    let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
    for p in [
        pod("default", "web-1", &[("app", "nginx"), ("tier", "web")]),
        pod(
            "default",
            "web-2",
            &[("app", "nginx"), ("tier", "web"), ("canary", "true")],
        ),
        pod("default", "db-1", &[("app", "postgres"), ("tier", "db")]),
        pod("prod", "web-1", &[("app", "nginx"), ("tier", "web")]),
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some("unlabelled".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }),
    ] {
        store.add(p).unwrap();
    }
    Lister::new(store)
}

#[test]
fn rule34_namespaced_get_and_list_by_label_selector() {
    let lister = pod_lister();
    let default = lister.namespaced("default");
    let sel = |s: &str| parse_selector(s).unwrap();

    assert_eq!(
        pod_names(&default.list(&sel("app=nginx"))),
        ["web-1", "web-2"]
    );
    assert_eq!(
        pod_names(&default.list(&sel("app=nginx,!canary"))),
        ["web-1"]
    );
    assert_eq!(
        pod_names(&default.list(&sel("tier in (web,db)"))),
        ["db-1", "web-1", "web-2"]
    );
    assert_eq!(
        pod_names(&default.list(&sel("app notin (nginx)"))),
        ["db-1", "unlabelled"]
    );
    assert_eq!(
        pod_names(&default.list(&sel("app!=nginx"))),
        ["db-1", "unlabelled"]
    );
    assert_eq!(pod_names(&default.list(&sel("canary"))), ["web-2"]);
    assert_eq!(default.list(&everything()).len(), 4);
    assert_eq!(
        pod_names(&lister.namespaced("prod").list(&sel("app=nginx"))),
        ["web-1"]
    );
    assert!(lister.namespaced("nowhere").list(&everything()).is_empty());

    // Across namespaces: the lister, or a namespaced lister for "" (client-go's NamespaceAll).
    assert_eq!(lister.list(&sel("app=nginx")).len(), 3);
    assert_eq!(lister.namespaced("").list(&sel("app=nginx")).len(), 3);
    assert_eq!(lister.list(&everything()).len(), 5);

    let got = default.get("web-2").unwrap();
    assert_eq!(got.metadata.labels.as_ref().unwrap()["canary"], "true");
    assert_eq!(
        lister
            .namespaced("prod")
            .get("web-1")
            .unwrap()
            .metadata
            .namespace
            .as_deref(),
        Some("prod")
    );
}

#[test]
fn rule34_not_found_is_a_typed_error() {
    let lister = pod_lister();
    match lister.namespaced("prod").get("db-1") {
        Err(Error::NotFound { namespace, name }) => {
            assert_eq!(
                (namespace.as_deref(), name.as_str()),
                (Some("prod"), "db-1")
            );
        }
        other => panic!("{other:?}"),
    }
    let err = lister.get("web-1").unwrap_err(); // pods are namespaced: no cluster-scoped "web-1"
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), "web-1 not found");
    assert_eq!(
        lister.namespaced("prod").get("x").unwrap_err().to_string(),
        "prod/x not found"
    );
}

#[test]
fn rule34_cluster_scoped_get_by_name() {
    let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
    store
        .add(Arc::new(Node {
            metadata: meta(None, "node-1", &[("zone", "a")]),
            ..Node::default()
        }))
        .unwrap();
    let lister = Lister::new(store);
    assert_eq!(
        lister.get("node-1").unwrap().metadata.name.as_deref(),
        Some("node-1")
    );
    assert!(lister.get("node-2").unwrap_err().is_not_found());
    assert_eq!(lister.list(&parse_selector("zone=a").unwrap()).len(), 1);
    // A namespaced lister for "" looks up the bare name, as client-go's does (its key is
    // the name alone), not the impossible key "/node-1".
    assert_eq!(
        lister
            .namespaced("")
            .get("node-1")
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some("node-1")
    );
    match lister.namespaced("").get("node-2") {
        Err(Error::NotFound { namespace, name }) => {
            assert_eq!((namespace, name.as_str()), (None, "node-2"));
        }
        other => panic!("{other:?}"),
    }
}

/// Counts the calls a lister makes, then delegates to a `ThreadSafeStore`: shows which
/// trait methods a query goes through, and that any `Indexer` can sit behind a lister.
struct Counting<I> {
    inner: I,
    by_index: AtomicUsize,
    list: AtomicUsize,
}

impl<I> Counting<I> {
    fn new(inner: I) -> Self {
        Self {
            inner,
            by_index: AtomicUsize::new(0),
            list: AtomicUsize::new(0),
        }
    }
}

impl<K, I: Indexer<K>> KnownObjects<K> for Counting<I> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.get_by_key(key)
    }

    fn get_shared(&self, key: &str) -> Option<Arc<K>> {
        self.inner.get_shared(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        self.inner.contains_version(key, resource_version)
    }
}

impl<K, I: Indexer<K>> Indexer<K> for Counting<I> {
    fn list(&self) -> Vec<Arc<K>> {
        self.list.fetch_add(1, Ordering::Relaxed);
        self.inner.list()
    }
    fn last_sync_resource_version(&self) -> String {
        self.inner.last_sync_resource_version()
    }
    fn index(&self, name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        self.inner.index(name, obj)
    }
    fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        self.inner.index_keys(name, value)
    }
    fn list_index_func_values(&self, name: &str) -> Vec<String> {
        self.inner.list_index_func_values(name)
    }
    fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        self.by_index.fetch_add(1, Ordering::Relaxed);
        self.inner.by_index(name, value)
    }
    fn get_indexers(&self) -> Indexers<K> {
        self.inner.get_indexers()
    }
}

#[test]
fn rule34_namespaced_list_goes_through_the_namespace_index() {
    let counting = Arc::new(Counting::new(ThreadSafeStore::new(namespace_indexers())));
    for p in [
        pod("a", "x", &[("app", "1")]),
        pod("b", "y", &[("app", "1")]),
    ] {
        counting.inner.add(p).unwrap();
    }
    let lister = Lister::new(Arc::clone(&counting));
    assert_eq!(
        pod_names(
            &lister
                .namespaced("a")
                .list(&parse_selector("app=1").unwrap())
        ),
        ["x"]
    );
    assert_eq!(counting.by_index.load(Ordering::Relaxed), 1);
    assert_eq!(
        counting.list.load(Ordering::Relaxed),
        0,
        "a namespaced list must not scan everything"
    );
}

#[test]
fn namespaced_list_without_a_namespace_index_scans_everything() {
    // As client-go: no namespace index is not an error, only slower.
    let counting = Arc::new(Counting::new(ThreadSafeStore::new(Indexers::new())));
    for p in [
        pod("a", "x", &[("app", "1")]),
        pod("b", "y", &[("app", "1")]),
        pod("a", "z", &[]),
    ] {
        counting.inner.add(p).unwrap();
    }
    let lister = Lister::new(Arc::clone(&counting));
    assert_eq!(
        pod_names(
            &lister
                .namespaced("a")
                .list(&parse_selector("app=1").unwrap())
        ),
        ["x"]
    );
    assert_eq!(
        pod_names(&lister.namespaced("a").list(&everything())),
        ["x", "z"]
    );
    assert_eq!(counting.list.load(Ordering::Relaxed), 2);
}

/// An object whose labels count how often they are read.
struct Watched {
    name: String,
    labels: BTreeMap<String, String>,
    reads: Arc<AtomicUsize>,
}

impl MetaObject for Watched {
    fn object_name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn object_namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn object_resource_version(&self) -> Option<&str> {
        None
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Some(&self.labels)
    }
}

#[test]
fn everything_skips_label_matching() {
    let reads = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
    for name in ["a", "b", "c"] {
        store
            .add(Arc::new(Watched {
                name: name.into(),
                labels: BTreeMap::from([("k".into(), name.into())]),
                reads: Arc::clone(&reads),
            }))
            .unwrap();
    }
    let lister = Lister::new(store);
    assert_eq!(lister.list(&everything()).len(), 3);
    assert_eq!(lister.namespaced("ns").list(&everything()).len(), 3);
    assert_eq!(reads.load(Ordering::Relaxed), 0);
    assert_eq!(
        lister
            .namespaced("ns")
            .list(&parse_selector("k=b").unwrap())
            .len(),
        1
    );
    assert_eq!(reads.load(Ordering::Relaxed), 3);
}

#[test]
fn a_lister_works_over_a_custom_indexer() {
    let naive = Arc::new(common::NaiveIndexer::new(common::test_indexers()));
    for o in [
        common::obj("ns", "a").label("app", "x"),
        common::obj("ns", "b").label("app", "y"),
        common::obj("other", "c").label("app", "x"),
    ] {
        naive.add(o.arc()).unwrap();
    }
    let lister = Lister::new(naive);
    let x = parse_selector("app=x").unwrap();
    assert_eq!(common::names(&lister.namespaced("ns").list(&x)), ["a"]);
    assert_eq!(common::names(&lister.list(&x)), ["a", "c"]);
    assert!(lister.namespaced("ns").get("c").unwrap_err().is_not_found());
}

/// A CRD, as users write them.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    schema = "disabled"
)]
struct WidgetSpec {
    size: u32,
}

#[test]
fn a_typed_lister_works_for_a_crd() {
    let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
    for (name, size, color) in [("small", 1, "red"), ("big", 9, "blue")] {
        let mut w = Widget::new(name, WidgetSpec { size });
        w.metadata.namespace = Some("shop".into());
        w.metadata.labels = Some(BTreeMap::from([("color".into(), color.into())]));
        store.add(Arc::new(w)).unwrap();
    }
    let lister: Lister<Widget> = Lister::new(store);
    let blue = lister
        .namespaced("shop")
        .list(&parse_selector("color=blue").unwrap());
    assert_eq!(blue.len(), 1);
    assert_eq!(blue[0].spec.size, 9);
    assert_eq!(lister.namespaced("shop").get("small").unwrap().spec.size, 1);
    assert!(
        lister
            .namespaced("shop")
            .get("medium")
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn a_lister_works_for_dynamic_objects() {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
    for (name, color) in [("a", "red"), ("b", "blue")] {
        let mut o = DynamicObject::new(name, &ar)
            .within("shop")
            .data(serde_json::json!({ "spec": { "size": 3 } }));
        o.metadata.labels = Some(BTreeMap::from([("color".into(), color.into())]));
        store.add(Arc::new(o)).unwrap();
    }
    let lister = Lister::new(store);
    let red = lister
        .namespaced("shop")
        .list(&parse_selector("color in (red)").unwrap());
    assert_eq!(red.len(), 1);
    assert_eq!(red[0].data["spec"]["size"], 3);
    assert!(lister.namespaced("shop").get("b").is_ok());
    assert!(
        lister
            .namespaced("other")
            .get("b")
            .unwrap_err()
            .is_not_found()
    );
}
