//! The shared workload of the indexer benches: 100k pods across 100 namespaces and 1000
//! nodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube_core::ObjectMeta;

pub(crate) const PODS: usize = 100_000;
pub(crate) const NAMESPACES: usize = 100;
pub(crate) const NODES: usize = 1000;

/// Pod `i` is `ns-{i % 100}/pod-{i}` on `node-{(i / 100) % 1000}`, labelled
/// `app=app-{i % 50}` and `tier={web,db,cache}[i % 3]`, resourceVersion `i + 1`.
pub(crate) fn pods() -> Vec<Arc<Pod>> {
    versions(0)
}

/// Each pod of [`pods`] once more, as a separate allocation with resourceVersion
/// `100_000 + i + 1` (the same labels and node, as after a status update): what an update
/// replaces the stored version with.
pub(crate) fn next_versions() -> Vec<Arc<Pod>> {
    versions(PODS)
}

fn versions(rv_base: usize) -> Vec<Arc<Pod>> {
    let tiers = ["web", "db", "cache"];
    (0..PODS)
        .map(|i| {
            Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(format!("pod-{i}")),
                    namespace: Some(format!("ns-{}", i % NAMESPACES)),
                    resource_version: Some((rv_base + i + 1).to_string()),
                    labels: Some(BTreeMap::from([
                        ("app".to_owned(), format!("app-{}", i % 50)),
                        ("tier".to_owned(), tiers[i % 3].to_owned()),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    node_name: Some(format!("node-{}", (i / 100) % NODES)),
                    ..PodSpec::default()
                }),
                status: None,
            })
        })
        .collect()
}

/// The key of pod `i`.
pub(crate) fn keys() -> Vec<String> {
    (0..PODS)
        .map(|i| format!("ns-{}/pod-{i}", i % NAMESPACES))
        .collect()
}

pub(crate) fn nodes() -> Vec<String> {
    (0..NODES).map(|i| format!("node-{i}")).collect()
}

pub(crate) fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}
