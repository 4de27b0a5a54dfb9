//! A custom resource as clusters hold it: KEDA's `ScaledObject`, its CRD with a structural
//! schema and a status subresource, and objects written the way an operator's CRs are.

use futures::{StreamExt, TryStreamExt};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::crd::{Crd, CrdVersion};
use crate::error::{Error, kube_err};

/// The group of [`create_scaled_object_crd`]'s resource (KEDA's).
pub const SCALED_OBJECT_GROUP: &str = "keda.sh";
/// Its version.
pub const SCALED_OBJECT_VERSION: &str = "v1alpha1";
/// Its kind.
pub const SCALED_OBJECT_KIND: &str = "ScaledObject";
/// Its plural (the resource's name in URLs).
pub const SCALED_OBJECT_PLURAL: &str = "scaledobjects";

/// The field manager of [`apply_realistic_scaled_objects`]' spec and metadata: Helm 4,
/// which applies a chart's objects server-side.
const SPEC_MANAGER: &str = "helm";
/// The field manager of their status: the operator.
const STATUS_MANAGER: &str = "keda-operator";
/// When the scaled objects' triggers were last active (RFC 3339, as the API server writes times).
const LAST_ACTIVE: &str = "2025-06-02T09:31:44Z";

/// The `ApiResource` of KEDA's `ScaledObject` (`keda.sh/v1alpha1`, `scaledobjects`).
pub fn scaled_object_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            SCALED_OBJECT_GROUP,
            SCALED_OBJECT_VERSION,
            SCALED_OBJECT_KIND,
        ),
        SCALED_OBJECT_PLURAL,
    )
}

/// Creates the CRD of KEDA's `ScaledObject` (`scaledobjects.keda.sh`, namespaced, version
/// `v1alpha1`) unless it exists, waits until it is served, and returns its `ApiResource`.
///
/// Its schema is structural, as an operator's CRD is (no `x-kubernetes-preserve-unknown-fields`:
/// the API server prunes what it does not name): a subset of KEDA's own schema covering
/// every field [`apply_realistic_scaled_objects`] writes — typed integers, booleans and
/// strings, nested objects (`scaleTargetRef`, `advanced` down to the HPA's scaling
/// policies), a list of objects (`triggers`, each with a map of strings and an
/// authentication reference), and a status (conditions, metric names, the target's
/// group-version-kind-resource) served by its own `status` subresource.
///
/// # Errors
/// As [`Crd::create`].
pub async fn create_scaled_object_crd(client: &kube::Client) -> Result<ApiResource, Error> {
    Crd::new(
        SCALED_OBJECT_GROUP,
        SCALED_OBJECT_KIND,
        SCALED_OBJECT_PLURAL,
    )
    .version(
        CrdVersion::new(SCALED_OBJECT_VERSION)
            .schema(scaled_object_schema())
            .status_subresource(true),
    )
    .create(client)
    .await
}

/// A 32-bit integer.
fn int32() -> Value {
    json!({ "type": "integer", "format": "int32" })
}

/// A string.
fn string() -> Value {
    json!({ "type": "string" })
}

/// An object of the given properties.
fn object(properties: Value) -> Value {
    json!({ "type": "object", "properties": properties })
}

/// The OpenAPI v3 schema of the `ScaledObject`s written here (KEDA's, the fields they use).
fn scaled_object_schema() -> Value {
    let scaling_rules = object(json!({
        "stabilizationWindowSeconds": int32(),
        "selectPolicy": string(),
        "policies": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "value", "periodSeconds"],
                "properties": { "type": string(), "value": int32(), "periodSeconds": int32() },
            },
        },
    }));
    let spec = json!({
        "type": "object",
        "required": ["scaleTargetRef", "triggers"],
        "properties": {
            "scaleTargetRef": {
                "type": "object",
                "required": ["name"],
                "properties": { "apiVersion": string(), "kind": string(), "name": string() },
            },
            "pollingInterval": int32(),
            "cooldownPeriod": int32(),
            "minReplicaCount": int32(),
            "maxReplicaCount": int32(),
            "advanced": object(json!({
                "restoreToOriginalReplicaCount": { "type": "boolean" },
                "horizontalPodAutoscalerConfig": object(json!({
                    "name": string(),
                    "behavior": object(json!({ "scaleDown": scaling_rules, "scaleUp": scaling_rules })),
                })),
            })),
            "triggers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type", "metadata"],
                    "properties": {
                        "type": string(),
                        "name": string(),
                        "metricType": string(),
                        "metadata": { "type": "object", "additionalProperties": string() },
                        "authenticationRef": {
                            "type": "object",
                            "required": ["name"],
                            "properties": { "name": string(), "kind": string() },
                        },
                    },
                },
            },
        },
    });
    let status = object(json!({
        "scaleTargetKind": string(),
        "scaleTargetGVKR": {
            "type": "object",
            "required": ["group", "kind", "resource", "version"],
            "properties": {
                "group": string(), "kind": string(), "resource": string(), "version": string(),
            },
        },
        "originalReplicaCount": int32(),
        "lastActiveTime": { "type": "string", "format": "date-time" },
        "externalMetricNames": { "type": "array", "items": string() },
        "resourceMetricNames": { "type": "array", "items": string() },
        "hpaName": string(),
        "conditions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "properties": {
                    "type": string(), "status": string(), "reason": string(), "message": string(),
                },
            },
        },
    }));
    json!({
        "type": "object",
        "properties": {
            "apiVersion": string(),
            "kind": string(),
            "metadata": { "type": "object" },
            "spec": spec,
            "status": status,
        },
    })
}

/// Creates `n` KEDA `ScaledObject`s named `{prefix}-{i}` through `api` (made with
/// [`scaled_object_resource`], in a namespace, after [`create_scaled_object_crd`]) the way
/// a cluster holds an operator's custom resources, at most 32 objects in flight, and
/// returns them as the server stored them after their status (in no particular order).
///
/// What it models: the autoscaling rule of one Deployment of a Helm release, as a
/// cluster running KEDA holds hundreds or thousands of them: a typical operator's custom
/// resource, about 2.8 KB of JSON each with its `managedFields` (the bytes on the wire
/// are measured by `cargo xtask bench informer --crd-only`). Each is made by two
/// server-side applies, so that its `managedFields` have the two entries of a custom
/// resource a controller manages:
///
/// - by field manager `helm` (Helm 4 applies a chart's objects server-side): three
///   `app.kubernetes.io` labels, Helm's release annotation, and a spec with the target
///   Deployment (`scaleTargetRef`), polling and cooldown periods, minimum and maximum
///   replicas, whether to restore the original replica count and the HPA's scale-down
///   policy (`advanced.horizontalPodAutoscalerConfig.behavior.scaleDown`), and two triggers: a
///   Prometheus query with an authentication reference, and CPU utilization;
/// - by field manager `keda-operator` on the `status` subresource: the target's kind and
///   group-version-kind-resource, the original replica count, the last active time, the
///   external and resource metric names, the HPA's name and three of the conditions KEDA
///   reports (`Ready`, `Active`, `Fallback`).
///
/// Objects of one `prefix` share their labels, as the objects of one Helm release do; the
/// numbers and names that differ between Deployments differ with `i`.
///
/// # Errors
/// The first request the API server refuses.
pub async fn apply_realistic_scaled_objects(
    api: &Api<DynamicObject>,
    prefix: &str,
    n: usize,
) -> Result<Vec<DynamicObject>, Error> {
    let spec_params = PatchParams::apply(SPEC_MANAGER).force();
    let status_params = PatchParams::apply(STATUS_MANAGER).force();
    futures::stream::iter(0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            let (spec_params, status_params) = (&spec_params, &status_params);
            async move {
                api.patch(
                    &name,
                    spec_params,
                    &Patch::Apply(realistic_scaled_object(&name, prefix, i)),
                )
                .await
                .map_err(kube_err(format!("applying scaled object {name}")))?;
                api.patch_status(&name, status_params, &Patch::Apply(realistic_status(&name)))
                    .await
                    .map_err(kube_err(format!(
                        "applying the status of scaled object {name}"
                    )))
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
}

/// The `apiVersion` of the scaled objects.
fn api_version() -> String {
    format!("{SCALED_OBJECT_GROUP}/{SCALED_OBJECT_VERSION}")
}

/// The metadata and spec of realistic scaled object `i` of release `release`, as Helm
/// applies them.
fn realistic_scaled_object(name: &str, release: &str, i: usize) -> Value {
    let deployment = format!("worker-{i}");
    let query = format!("sum(rate(http_requests_total{{deployment=\"{deployment}\"}}[2m]))");
    json!({
        "apiVersion": api_version(),
        "kind": SCALED_OBJECT_KIND,
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/name": "worker",
                "app.kubernetes.io/instance": release,
                "app.kubernetes.io/managed-by": "Helm",
            },
            "annotations": { "meta.helm.sh/release-name": release },
        },
        "spec": {
            "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": deployment },
            "pollingInterval": 30,
            "cooldownPeriod": 300,
            "minReplicaCount": 1 + i % 3,
            "maxReplicaCount": 10 + i % 40,
            "advanced": {
                "restoreToOriginalReplicaCount": false,
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": 300,
                            "policies": [{ "type": "Percent", "value": 50, "periodSeconds": 60 }],
                        },
                    },
                },
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                        "query": query,
                        "threshold": (50 + 10 * (i % 10)).to_string(),
                    },
                    "authenticationRef": { "name": "keda-prometheus-auth" },
                },
                {
                    "type": "cpu",
                    "metricType": "Utilization",
                    "metadata": { "value": "75" },
                },
            ],
        },
    })
}

/// The status of a realistic scaled object, as the operator applies it.
fn realistic_status(name: &str) -> Value {
    let condition = |kind: &str, status: &str, reason: &str, message: &str| json!({ "type": kind, "status": status, "reason": reason, "message": message });
    json!({
        "apiVersion": api_version(),
        "kind": SCALED_OBJECT_KIND,
        "metadata": { "name": name },
        "status": {
            "scaleTargetKind": "apps/v1.Deployment",
            "scaleTargetGVKR": { "group": "apps", "kind": "Deployment", "resource": "deployments", "version": "v1" },
            "originalReplicaCount": 2,
            "lastActiveTime": LAST_ACTIVE,
            "externalMetricNames": ["s0-prometheus"],
            "resourceMetricNames": ["cpu"],
            "hpaName": format!("keda-hpa-{name}"),
            "conditions": [
                condition("Ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling"),
                condition("Active", "True", "ScalerActive", "Scaling is performed because triggers are active"),
                condition("Fallback", "False", "NoFallbackFound", "No fallbacks are active on this scaled object"),
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ControlPlane;

    #[test]
    fn a_realistic_scaled_object_is_an_operators_cr_in_size() {
        let spec = serde_json::to_vec(&realistic_scaled_object("web-12", "web", 12)).unwrap();
        let status = serde_json::to_vec(&realistic_status("web-12")).unwrap();
        // Without managedFields and the metadata the server sets; with them about 2.8 KB.
        let bytes = spec.len() + status.len();
        assert!((1500..2000).contains(&bytes), "{bytes} bytes");
    }

    #[tokio::test]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn realistic_scaled_objects_have_two_managers_a_status_and_their_fields() {
        let cp = ControlPlane::shared().await.unwrap();
        let client = cp.client().unwrap();
        let ar = create_scaled_object_crd(&client).await.unwrap();
        let ns = cp.create_namespace("realistic-so").await.unwrap();
        let api = Api::<DynamicObject>::namespaced_with(client, &ns, &ar);
        let objects = apply_realistic_scaled_objects(&api, "web", 3)
            .await
            .unwrap();
        assert_eq!(objects.len(), 3);
        for o in &objects {
            assert_eq!(
                crate::fixtures::managers(&o.metadata),
                [(SPEC_MANAGER, None), (STATUS_MANAGER, Some("status"))]
            );
            // Nothing was pruned: the schema names every field written.
            let i: usize = o.metadata.name.as_deref().unwrap()[4..].parse().unwrap();
            let name = o.metadata.name.as_deref().unwrap();
            assert_eq!(
                o.data["spec"],
                realistic_scaled_object(name, "web", i)["spec"]
            );
            assert_eq!(o.data["status"], realistic_status(name)["status"]);
            let json = serde_json::to_vec(o).unwrap();
            assert!((1000..3000).contains(&json.len()), "{} bytes", json.len());
        }
    }
}
