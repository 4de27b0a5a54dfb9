//! The reference article's lister queries and custom `byNode` index, on an in-memory store
//! of k8s-openapi Pods (no cluster needed): `cargo run -p kinformer-indexer --example in_memory_index`.
//!
//! In a controller the informer fills the store from the API server; here we add pods by
//! hand, then query the way the article does:
//!
//! ```go
//! pods, err := lister.Pods("default").List(labels.Everything())
//! pods, err := lister.Pods("default").List(labels.SelectorFromSet(labels.Set{"app": "nginx"}))
//! pod, err := lister.Pods("default").Get("my-pod")
//! informer.AddIndexers(cache.Indexers{"byNode": func(obj interface{}) ([]string, error) { ... }})
//! objs, err := informer.GetIndexer().ByIndex("byNode", "node1")
//! ```
#![allow(clippy::print_stdout, reason = "an example prints what it finds")]

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kinformer_indexer::{
    Error, IndexFunc, Indexer, IndexerWriter, Indexers, Lister, Selector, ThreadSafeStore,
    everything, namespace_indexers, parse_selector,
};
use kube_core::ObjectMeta;

fn pod(name: &str, app: &str, node: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            ..PodSpec::default()
        }),
        status: None,
    })
}

fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
    let mut names: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    names.sort_unstable();
    names
}

fn main() -> Result<(), Error> {
    // The store an informer keeps: indexed by namespace, as client-go's informers are.
    let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
    for p in [
        pod("my-pod", "nginx", "node1"),
        pod("nginx-2", "nginx", "node2"),
        pod("redis-1", "redis", "node1"),
    ] {
        store.add(p)?;
    }

    // Listers read the cache, never the API server.
    let lister = Lister::new(Arc::clone(&store));
    let all = lister.namespaced("default").list(&everything());
    println!("all pods in default: {:?}", names(&all));

    // labels.SelectorFromSet(labels.Set{"app": "nginx"}), or the string form.
    let from_set: Selector = [("app", "nginx")].into_iter().collect();
    let nginx = lister.namespaced("default").list(&from_set);
    println!("app=nginx: {:?}", names(&nginx));
    let not_nginx = lister
        .namespaced("default")
        .list(&parse_selector("app notin (nginx)")?);
    println!("app notin (nginx): {:?}", names(&not_nginx));

    let my_pod = lister.namespaced("default").get("my-pod")?;
    println!(
        "got {} on {:?}",
        my_pod.metadata.name.as_deref().unwrap_or(""),
        my_pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
    );
    match lister.namespaced("default").get("gone") {
        Err(e) if e.is_not_found() => println!("gone: {e}"),
        other => println!("unexpected: {other:?}"),
    }

    // The custom index: pods by `spec.nodeName`, added to a store that already has pods
    // (they are indexed on the spot).
    let mut by_node = Indexers::new();
    by_node.insert(
        "byNode".to_owned(),
        IndexFunc::single(|pod: &Pod| pod.spec.as_ref()?.node_name.as_deref()),
    );
    store.add_indexers(by_node)?;
    let on_node1 = store.by_index("byNode", "node1")?;
    println!("on node1: {:?}", names(&on_node1));
    println!(
        "nodes with pods: {:?}",
        store.list_index_func_values("byNode")
    );

    // Same answers after the pod moves: indices follow every update.
    store.update(pod("redis-1", "redis", "node2"))?;
    println!(
        "on node1 after redis-1 moved: {:?}",
        names(&store.by_index("byNode", "node1")?)
    );

    // Reads hand out the stored allocation, not a copy.
    let again = lister.namespaced("default").get("my-pod")?;
    println!(
        "same allocation as before: {}",
        Arc::ptr_eq(&my_pod, &again)
    );
    Ok(())
}
