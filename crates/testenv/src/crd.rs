//! Custom resources for tests: a CRD created and served before the helper returns.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::Value;

use crate::error::{Error, kube_err};

/// How long a new CRD may take to be served.
const SERVED_WITHIN: Duration = Duration::from_secs(60);

/// Creates the namespaced custom resource `{plural}.{group}` (version `v1`) unless it
/// exists, with `schema` as its OpenAPI v3 schema (`None`: an object that keeps any
/// fields), waits until its resource is served, and returns its `ApiResource`.
///
/// # Errors
/// When the API server refuses the CRD, or does not serve it within a minute.
pub async fn create_crd(
    client: &Client,
    group: &str,
    kind: &str,
    plural: &str,
    schema: Option<serde_json::Value>,
) -> Result<ApiResource, Error> {
    let schema = schema.unwrap_or_else(
        || serde_json::json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }),
    );
    let version = serde_json::json!({
        "name": "v1", "served": true, "storage": true,
        "schema": { "openAPIV3Schema": schema }
    });
    install_crd(
        client,
        &GroupVersionKind::gvk(group, "v1", kind),
        plural,
        version,
    )
    .await
}

/// Creates the namespaced CRD of `gvk` (`plural`) with one served and stored `version`
/// (its entry of `spec.versions`: name, schema, subresources) unless it exists, and waits
/// until it is served.
pub(crate) async fn install_crd(
    client: &Client,
    gvk: &GroupVersionKind,
    plural: &str,
    version: Value,
) -> Result<ApiResource, Error> {
    let group = &gvk.group;
    let kind = &gvk.kind;
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{group}") },
        "spec": {
            "group": group,
            "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase() },
            "scope": "Namespaced",
            "versions": [version]
        }
    }))
    .map_err(|e| Error::Kubeconfig(format!("building the CRD: {e}")))?;
    match kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => return Err(kube_err(format!("creating the CRD {plural}.{group}"))(e)),
    }
    let ar = ApiResource::from_gvk_with_plural(gvk, plural);
    let all = kube::Api::<DynamicObject>::all_with(client.clone(), &ar);
    let start = Instant::now();
    // A new CRD takes a moment to be served.
    while all.list(&ListParams::default().limit(1)).await.is_err() {
        if start.elapsed() > SERVED_WITHIN {
            return Err(Error::State("a CRD was not served within a minute"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(ar)
}
