//! Custom resources: a CRD that accepts any fields, served before the helper returns.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};

use super::wait::MINUTE;

/// Creates the namespaced CRD `{plural}.{group}` (version `v1`, any fields kept) and waits
/// until its resource is served; returns its `ApiResource`.
pub async fn create_crd(client: &Client, group: &str, kind: &str, plural: &str) -> ApiResource {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{group}") },
        "spec": {
            "group": group,
            "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase() },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true
                } }
            }]
        }
    }))
    .expect("a valid CRD");
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD");
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    let all = kube::Api::<DynamicObject>::all_with(client.clone(), &ar);
    let start = Instant::now();
    // The CRD takes a moment to be served.
    while all.list(&ListParams::default().limit(1)).await.is_err() {
        assert!(
            start.elapsed() < MINUTE,
            "the CRD {plural}.{group} was never served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ar
}
