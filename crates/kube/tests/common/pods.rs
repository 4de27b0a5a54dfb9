//! Writing pods through the API server, and reading what it holds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

pub use kinformer_testenv::pod;

use super::sink::{key, rv};

/// Creates `n` pods named `{prefix}-{i}`.
pub async fn create_pods(api: &Api<Pod>, prefix: &str, n: usize) {
    kinformer_testenv::create_pods(api, prefix, n)
        .await
        .expect("create pods");
}

pub async fn create_pod(api: &Api<Pod>, name: &str) -> Pod {
    api.create(&PostParams::default(), &pod(name))
        .await
        .expect("create pod")
}

pub async fn delete_pod(api: &Api<Pod>, name: &str) {
    api.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
}

pub async fn label_pod(api: &Api<Pod>, name: &str, value: &str) {
    let patch = serde_json::json!({ "metadata": { "labels": { "touched": value } } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch pod");
}

/// What the API server holds now: key -> resourceVersion.
pub async fn truth(api: &Api<Pod>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .iter()
        .map(|p| (key(p).unwrap(), rv(p)))
        .collect()
}
