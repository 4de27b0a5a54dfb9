//! What tests create on the server: namespaces to isolate themselves, a minimal pod,
//! many pods at once, and pods shaped like those of a real cluster.

use std::sync::atomic::{AtomicU64, Ordering};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::error::{Error, kube_err};
use crate::random::random_hex;

impl ControlPlane {
    /// Creates a namespace named `<prefix>-<unique suffix>` and returns its name.
    /// (No namespace controller runs, so namespaces are never deleted.)
    ///
    /// # Errors
    /// When the API server refuses.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let clean: String = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let name = format!(
            "{}-{}-{}",
            clean.trim_matches('-'),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            random_hex(2)?
        );
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(self.client()?)
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {name}")))?;
        Ok(name)
    }
}

/// A minimal pod the API server accepts (one `busybox` container, label
/// `app=kinformer`). No scheduler runs, so it stays `Pending`.
pub fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), "kinformer".to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates `n` pods named `{prefix}-{i}` through `api`, at most 32 requests in flight,
/// and returns them as the server stored them (in no particular order).
///
/// # Errors
/// The first request the API server refuses.
pub async fn create_pods(api: &Api<Pod>, prefix: &str, n: usize) -> Result<Vec<Pod>, Error> {
    futures::stream::iter(0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &pod(&name))
                    .await
                    .map_err(kube_err(format!("creating pod {name}")))
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
}

/// The field manager of [`apply_realistic_pods`]' spec and metadata (the ReplicaSet
/// controller's, as on a real cluster).
const SPEC_MANAGER: &str = "kube-controller-manager";
/// The field manager of [`apply_realistic_pods`]' status.
const STATUS_MANAGER: &str = "kubelet";
/// The fake UID of the ReplicaSets that "own" the realistic pods (no such object exists).
const OWNER_UID: &str = "6f1c1a2e-4b7d-4c55-9a43-2f6d0b9e8c17";
/// When the realistic pods "started" (RFC 3339, as the API server writes times).
const STARTED: &str = "2025-06-02T09:14:07Z";
/// When their containers became ready.
const READY: &str = "2025-06-02T09:14:19Z";

/// Creates `n` pods named `{prefix}-{i}` through `api` the way a cluster holds them, at
/// most 32 pods in flight, and returns them as the server stored them after their status
/// (in no particular order).
///
/// Each pod is made by two server-side applies, so that its `managedFields` have the two
/// entries and the size real ones have:
///
/// - by field manager `kube-controller-manager` (as the ReplicaSet controller creates
///   pods): labels `app` and `pod-template-hash`, two annotations, an owner reference to a
///   ReplicaSet (`controller`, `blockOwnerDeletion`, a fixed fake UID), a node name, and a
///   spec as an API server defaults a Deployment's template: one container with image,
///   args, 3 environment variables (two from the downward API), 2 ports, requests and
///   limits, a readiness probe and two volume mounts; a ConfigMap volume and the projected
///   service-account token volume the `ServiceAccount` admission plugin adds, the two
///   tolerations `DefaultTolerationSeconds` adds, DNS and restart policies, scheduler
///   name, termination grace period;
/// - by field manager `kubelet` on the `status` subresource: phase `Running`, the five
///   conditions a 1.36 kubelet reports, host and pod IPs, start time and one container
///   status (image ID, container ID, ready, started, running since).
///
/// Pods of one `prefix` share their labels and owner, as the pods of one ReplicaSet do.
///
/// # Errors
/// The first request the API server refuses.
pub async fn apply_realistic_pods(
    api: &Api<Pod>,
    prefix: &str,
    n: usize,
) -> Result<Vec<Pod>, Error> {
    let hash = template_hash(prefix);
    let spec_params = PatchParams::apply(SPEC_MANAGER).force();
    let status_params = PatchParams::apply(STATUS_MANAGER).force();
    futures::stream::iter(0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            let (spec_params, status_params) = (&spec_params, &status_params);
            let hash = &hash;
            async move {
                api.patch(
                    &name,
                    spec_params,
                    &Patch::Apply(realistic_pod(&name, hash, i)),
                )
                .await
                .map_err(kube_err(format!("applying pod {name}")))?;
                api.patch_status(
                    &name,
                    status_params,
                    &Patch::Apply(realistic_status(&name, i)),
                )
                .await
                .map_err(kube_err(format!("applying the status of pod {name}")))
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
}

/// A `pod-template-hash` for `prefix`: 10 characters of the alphabet Kubernetes uses.
fn template_hash(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = fnv(prefix.as_bytes());
    (0..10)
        .map(|_| {
            let c = ALPHABET[usize::try_from(h % 27).unwrap_or_default()];
            h /= 27;
            char::from(c)
        })
        .collect()
}

/// 64-bit FNV-1a.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// 64 hex digits derived from `seed` (a container or image digest).
fn digest(seed: &str) -> String {
    (0..4u8)
        .map(|k| format!("{:016x}", fnv(format!("{seed}/{k}").as_bytes())))
        .collect()
}

/// The spec and metadata of realistic pod `i`, as the ReplicaSet controller applies them.
fn realistic_pod(name: &str, hash: &str, i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": { "app": "web", "pod-template-hash": hash },
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": format!("web-{hash}"),
                "uid": OWNER_UID,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "nodeName": format!("node-{}", i % 64),
            "containers": [{
                "name": "web",
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "imagePullPolicy": "IfNotPresent",
                "args": ["netexec", "--http-port=8080", "--udp-port=-1"],
                "env": [
                    { "name": "LOG_LEVEL", "value": "info" },
                    { "name": "POD_NAME", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.name" } } },
                    { "name": "POD_IP", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "status.podIP" } } },
                ],
                "ports": [
                    { "name": "http", "containerPort": 8080, "protocol": "TCP" },
                    { "name": "metrics", "containerPort": 9090, "protocol": "TCP" },
                ],
                "resources": {
                    "requests": { "cpu": "100m", "memory": "128Mi" },
                    "limits": { "cpu": "500m", "memory": "256Mi" },
                },
                "readinessProbe": {
                    "httpGet": { "path": "/healthz", "port": 8080, "scheme": "HTTP" },
                    "initialDelaySeconds": 5,
                    "periodSeconds": 10,
                    "timeoutSeconds": 1,
                    "successThreshold": 1,
                    "failureThreshold": 3,
                },
                "volumeMounts": [
                    { "name": "config", "mountPath": "/etc/web", "readOnly": true },
                    { "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true },
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }],
            "volumes": [
                { "name": "config", "configMap": { "name": "web-config", "defaultMode": 420 } },
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                            { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                            { "downwardAPI": { "items": [{ "path": "namespace", "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } }] } },
                        ],
                    },
                },
            ],
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
            ],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccountName": "default",
            "enableServiceLinks": true,
            "terminationGracePeriodSeconds": 30,
        },
    })
}

/// The status of realistic pod `i`, as its kubelet applies it.
fn realistic_status(name: &str, i: usize) -> Value {
    let node = i % 64;
    let host_ip = format!("10.0.{}.{}", node / 250, node % 250 + 10);
    let pod_ip = format!("10.{}.{}.{}", 64 + i / 62_500, i / 250 % 250, i % 250 + 2);
    let condition =
        |kind: &str, at: &str| json!({ "type": kind, "status": "True", "lastTransitionTime": at });
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "status": {
            "phase": "Running",
            "conditions": [
                condition("PodReadyToStartContainers", STARTED),
                condition("Initialized", STARTED),
                condition("Ready", READY),
                condition("ContainersReady", READY),
                condition("PodScheduled", STARTED),
            ],
            "hostIP": host_ip,
            "hostIPs": [{ "ip": host_ip }],
            "podIP": pod_ip,
            "podIPs": [{ "ip": pod_ip }],
            "startTime": STARTED,
            "containerStatuses": [{
                "name": "web",
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "imageID": format!("registry.k8s.io/e2e-test-images/agnhost@sha256:{}", digest("agnhost")),
                "containerID": format!("containerd://{}", digest(name)),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": { "running": { "startedAt": STARTED } },
            }],
        },
    })
}

/// Each `managedFields` entry's manager and subresource: what the realistic fixtures' tests
/// check.
#[cfg(test)]
pub(crate) fn managers(meta: &ObjectMeta) -> Vec<(&str, Option<&str>)> {
    meta.managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.as_deref().unwrap_or(""), m.subresource.as_deref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn realistic_pods_have_two_managers_and_a_running_status() {
        let cp = ControlPlane::shared().await.unwrap();
        let ns = cp.create_namespace("realistic").await.unwrap();
        let api = Api::<Pod>::namespaced(cp.client().unwrap(), &ns);
        let pods = apply_realistic_pods(&api, "web", 3).await.unwrap();
        assert_eq!(pods.len(), 3);
        for p in &pods {
            assert_eq!(
                managers(&p.metadata),
                [(SPEC_MANAGER, None), (STATUS_MANAGER, Some("status"))]
            );
            let status = p.status.as_ref().unwrap();
            assert_eq!(status.phase.as_deref(), Some("Running"));
            assert_eq!(status.conditions.as_ref().unwrap().len(), 5);
            assert!(status.container_statuses.as_ref().unwrap()[0].ready);
            let spec = p.spec.as_ref().unwrap();
            assert_eq!(spec.containers[0].env.as_ref().unwrap().len(), 3);
            assert_eq!(
                p.metadata.owner_references.as_ref().unwrap()[0].uid,
                OWNER_UID
            );
        }
    }
}
