//! The article's lister queries and custom index on a live informer: pods by label
//! selector through the lister, and by node through a `byNode` index (plus a multi-value
//! index of container images).
//!
//! ```text
//! cargo run --example custom_index                     # local control plane, sample pods
//! cargo run --example custom_index -- --kubeconfig ~/.kube/config -n kube-system --selector 'tier=control-plane'
//! ```
//!
//! Against the local control plane it first creates sample pods on two nodes; against
//! another cluster it only reads.
#![allow(clippy::print_stdout)]

#[path = "common/mod.rs"]
mod common;

use std::time::Duration;

use common::{Args, BoxError, ensure_namespace, names, start};
use k8s_openapi::api::core::v1::Pod;
use kinformer::indexer::{IndexFunc, everything, parse_selector};
use kinformer::prelude::*;
use kube::Api;
use kube::api::PostParams;

/// Pods by `spec.nodeName`: one value per pod, none for an unscheduled one.
pub const BY_NODE: &str = "byNode";
/// Pods by container image: one value per distinct image of the pod (a multi-value index).
pub const BY_IMAGE: &str = "byImage";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let local = args.kubeconfig.is_none();
    let cluster = start(&args).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let selector = args
        .flags
        .iter()
        .find_map(|f| f.strip_prefix("--selector=").map(str::to_owned))
        .unwrap_or_else(|| "app=nginx".into());
    for line in run(cluster.client.clone(), &namespace, &selector, local).await? {
        println!("{line}");
    }
    Ok(())
}

/// Index functions over the informer's cached pods: each reads its fields through the
/// pod's view, where they lie.
fn indexers() -> Indexers<Cached<Pod>> {
    let by_node = IndexFunc::single(|pod: &Cached<Pod>| pod.spec()?.node_name());
    let by_image = IndexFunc::new(|pod: &Cached<Pod>| {
        let spec = pod.spec();
        let containers = spec.iter().flat_map(|s| s.containers());
        let mut images: Vec<String> = containers
            .filter_map(|c| c.image().map(str::to_owned))
            .collect();
        images.sort();
        images.dedup();
        images
    });
    Indexers::from([
        (BY_NODE.to_string(), by_node),
        (BY_IMAGE.to_string(), by_image),
    ])
}

/// Syncs an informer over the pods of `namespace` (creating samples first when `create`)
/// and returns the answers to the queries, one line each.
pub async fn run(
    client: kube::Client,
    namespace: &str,
    selector: &str,
    create: bool,
) -> Result<Vec<String>, BoxError> {
    let selector = parse_selector(selector)?;
    if create {
        ensure_namespace(&client, namespace).await?;
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        for (name, app, node, images) in [
            ("web-0", "nginx", "node-a", vec!["nginx:1.27", "envoy:1.31"]),
            ("web-1", "nginx", "node-b", vec!["nginx:1.27"]),
            ("db-0", "postgres", "node-a", vec!["postgres:17"]),
        ] {
            let containers: Vec<_> = images
                .iter()
                .enumerate()
                .map(|(i, image)| serde_json::json!({ "name": format!("c{i}"), "image": image }))
                .collect();
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name, "labels": { "app": app } },
                "spec": { "nodeName": node, "containers": containers }
            }))?;
            api.create(&PostParams::default(), &pod).await?;
        }
    }

    let factory = SharedInformerFactory::builder(client)
        .namespace(namespace)
        .build();
    let informer = factory.informer::<Pod>();
    informer.add_indexers(indexers())?;
    factory.start()?;
    let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
    if !report.all_synced() {
        return Err(format!("the cache did not sync: {report}").into());
    }

    let mut lines = Vec::new();
    let lister = informer.lister();
    let pods = lister.namespaced(namespace);
    lines.push(format!(
        "{} pods in {namespace}",
        pods.list(&everything()).len()
    ));
    lines.push(format!(
        "selector {selector}: {:?}",
        names(pods.list(&selector))
    ));
    let indexer = informer.indexer();
    let mut nodes = indexer.list_index_func_values(BY_NODE);
    nodes.sort();
    for node in nodes {
        lines.push(format!(
            "{BY_NODE}={node}: {:?}",
            names(indexer.by_index(BY_NODE, &node)?)
        ));
    }
    let mut images = indexer.list_index_func_values(BY_IMAGE);
    images.sort();
    for image in images {
        lines.push(format!(
            "{BY_IMAGE}={image}: {:?}",
            names(indexer.by_index(BY_IMAGE, &image)?)
        ));
    }
    factory.shutdown().await?;
    Ok(lines)
}
