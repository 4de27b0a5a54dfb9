//! Differential correctness against the real API server: a varied corpus (pods with every
//! kind of field the server accepts, services, configmaps, secrets with binary data,
//! deployments, statefulsets, jobs, events with MicroTime, leases, nodes, roles, ...) listed
//! and watched twice, with `Accept: application/vnd.kubernetes.protobuf` and with JSON, at
//! the same resourceVersion. Every object decodes to the same k8s-openapi value, field by
//! field, and to the same `serde_json::Value`.

use std::fmt::Debug;

use crate::support::{first_difference, without_embedded_type_meta, without_nulls};
use futures::future::try_join_all;
use http::StatusCode;
use k8s_openapi::api::{apps, autoscaling, batch, coordination, core, events, networking};
use k8s_openapi::api::{policy, rbac, scheduling};
use k8s_openapi::{ListableResource, Resource};
use kinformer_protobuf::{EventType, FrameDecoder, Object, WatchEvent};
use kinformer_testenv::ControlPlane;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const JSON: &str = "application/json";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A GET on the API server: status, Content-Type and body.
async fn get(
    client: &kube::Client,
    path: &str,
    accept: &str,
) -> Result<(StatusCode, String, Vec<u8>), BoxError> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = resp.into_body().collect_bytes().await?;
    Ok((status, content_type, body.to_vec()))
}

/// The collection path of `K`, in `ns` when it is namespaced.
fn collection<K: Resource>(ns: Option<&str>) -> String {
    let base = if K::GROUP.is_empty() {
        format!("/api/{}", K::VERSION)
    } else {
        format!("/apis/{}/{}", K::GROUP, K::VERSION)
    };
    match ns {
        Some(ns) => format!("{base}/namespaces/{ns}/{}", K::URL_PATH_SEGMENT),
        None => format!("{base}/{}", K::URL_PATH_SEGMENT),
    }
}

/// Where two decodes of the same object differ, field by field.
fn diff<K: Serialize + PartialEq + Debug>(from_pb: &K, from_json: &K) -> Option<String> {
    if from_pb == from_json {
        return None;
    }
    let (a, b) = (
        serde_json::to_value(from_pb).unwrap_or_default(),
        serde_json::to_value(from_json).unwrap_or_default(),
    );
    Some(first_difference(&a, &b, "").unwrap_or_else(|| format!("{from_pb:?} vs {from_json:?}")))
}

trait Kind: Resource + ListableResource + DeserializeOwned + Serialize + PartialEq + Debug {}
impl<K: Resource + ListableResource + DeserializeOwned + Serialize + PartialEq + Debug> Kind for K {}

/// Lists `K` as JSON, then as protobuf at exactly the same resourceVersion, and compares
/// every item, typed and as JSON values. Returns (items, resourceVersion).
async fn compare_list<K: Kind>(
    client: &kube::Client,
    ns: Option<&str>,
) -> Result<(usize, String), BoxError> {
    let path = collection::<K>(ns);
    let (status, _, json) = get(client, &path, JSON).await?;
    assert_eq!(status, StatusCode::OK, "{path}");
    let from_json: k8s_openapi::List<K> = serde_json::from_slice(&json)?;
    let rv = from_json
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let exact = format!("{path}?resourceVersion={rv}&resourceVersionMatch=Exact");
    let (status, content_type, pb) = get(client, &exact, PROTOBUF).await?;
    assert_eq!(status, StatusCode::OK, "{exact}");
    assert_eq!(
        content_type, PROTOBUF,
        "{path}: the server answers protobuf"
    );

    let list = Object::from_bytes(&pb)?.list()?;
    assert_eq!(list.kind(), format!("{}List", K::KIND));
    assert_eq!(list.meta().resource_version, rv, "{path}");
    let items: Vec<K> = list.items().collect::<Result<_, _>>()?;
    assert_eq!(items.len(), from_json.items.len(), "{path}");
    for (a, b) in items.iter().zip(&from_json.items) {
        if let Some(d) = diff(a, b) {
            panic!("{path}: an item differs (protobuf vs JSON) at {d}");
        }
    }
    // The whole list as JSON values: every key, every kind of number.
    let pb_value: Value = kinformer_protobuf::from_slice(&pb)?;
    let json_value: Value = serde_json::from_slice(&json)?;
    let normal = |v| without_embedded_type_meta(without_nulls(v));
    if let Some(d) = first_difference(&normal(pb_value), &normal(json_value), "") {
        panic!("{path}: the list differs as JSON values (protobuf vs JSON) at {d}");
    }
    Ok((items.len(), rv))
}

/// One watch, read to its end (the server closes it after `timeoutSeconds`).
async fn watch_events<K: Kind>(
    client: &kube::Client,
    query: &str,
    accept: &str,
) -> Result<Vec<(String, K)>, BoxError> {
    let (status, content_type, body) = get(client, query, accept).await?;
    assert_eq!(status, StatusCode::OK, "{query}");
    let mut out = Vec::new();
    if accept == PROTOBUF {
        assert_eq!(
            content_type,
            kinformer_protobuf::WATCH_MEDIA_TYPE,
            "{query}"
        );
        let mut frames = FrameDecoder::new();
        frames.push(&body);
        while let Some(frame) = frames.next_frame()? {
            let ev = WatchEvent::from_frame(frame)?;
            out.push((ev.event_type().to_string(), ev.object().deserialize::<K>()?));
        }
        frames.finish()?;
    } else {
        for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            #[derive(serde::Deserialize)]
            struct Event<K> {
                #[serde(rename = "type")]
                ty: String,
                object: K,
            }
            let ev: Event<K> = serde_json::from_slice(line)?;
            out.push((ev.ty, ev.object));
        }
    }
    Ok(out)
}

/// Watches `K` from `rv` in both formats and compares the events one by one. Returns the
/// event types seen.
async fn compare_watch<K: Kind>(
    client: &kube::Client,
    ns: Option<&str>,
    rv: &str,
) -> Result<Vec<String>, BoxError> {
    let query = format!(
        "{}?watch=true&resourceVersion={rv}&timeoutSeconds=2",
        collection::<K>(ns)
    );
    let (pb, json) = futures::future::try_join(
        watch_events::<K>(client, &query, PROTOBUF),
        watch_events::<K>(client, &query, JSON),
    )
    .await?;
    assert_eq!(pb.len(), json.len(), "{query}: as many events both ways");
    for ((ta, a), (tb, b)) in pb.iter().zip(&json) {
        assert_eq!(ta, tb, "{query}");
        if let Some(d) = diff(a, b) {
            panic!("{query}: a {ta} event differs (protobuf vs JSON) at {d}");
        }
    }
    Ok(pb.into_iter().map(|(t, _)| t).collect())
}

async fn create<K: Kind>(
    client: &kube::Client,
    ns: Option<&str>,
    obj: Value,
) -> Result<K, BoxError> {
    let req = http::Request::post(collection::<K>(ns))
        .header(http::header::CONTENT_TYPE, JSON)
        .body(serde_json::to_vec(&obj)?)?;
    Ok(client.request::<K>(req).await?)
}

/// A pod with every kind of field the API server accepts without a kubelet.
fn rich_pod(owner_uid: &str) -> Value {
    json!({
        "metadata": {
            "name": "rich",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"example.com/note": "ünïcødé ✓", "empty": ""},
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid,
                "controller": true, "blockOwnerDeletion": false
            }],
            "finalizers": ["example.com/keep"]
        },
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
            "containers": [{
                "name": "app",
                "image": "registry.example.com/web:2.7.1",
                "command": ["/bin/web"],
                "args": ["--port=8080", ""],
                "workingDir": "/srv",
                "ports": [
                    {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                    {"containerPort": 9090, "hostPort": 0, "protocol": "UDP"}
                ],
                "env": [
                    {"name": "PLAIN", "value": "x"},
                    {"name": "EMPTY", "value": ""},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": true}}}
                ],
                "envFrom": [{"prefix": "CM_", "configMapRef": {"name": "cm"}}],
                "resources": {
                    "requests": {"cpu": "250m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
                    "limits": {"cpu": "1.5", "memory": "0.5Gi", "example.com/gpu": "1"}
                },
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/app", "readOnly": true},
                    {"name": "data", "mountPath": "/data", "subPath": "x"}
                ],
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": "http", "httpHeaders": [{"name": "X-A", "value": "b"}]},
                    "initialDelaySeconds": 5, "periodSeconds": 10, "failureThreshold": 3
                },
                "readinessProbe": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 2},
                "startupProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1},
                "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                "securityContext": {
                    "runAsUser": 1000, "runAsNonRoot": true, "readOnlyRootFilesystem": true,
                    "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
                },
                "stdin": false, "tty": false
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "cm", "defaultMode": 420, "items": [{"key": "a", "path": "a.txt", "mode": 256}]}},
                {"name": "secret", "secret": {"secretName": "s", "optional": false}},
                {"name": "data", "emptyDir": {"medium": "Memory", "sizeLimit": "128Mi"}},
                {"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600, "audience": "api"}},
                    {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
                ]}},
                {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}}
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
            ],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, "topologyKey": "kubernetes.io/hostname"}
            }]}},
            "nodeSelector": {"disk": "ssd"},
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "serviceAccountName": "web",
            "activeDeadlineSeconds": 600,
            "dnsPolicy": "ClusterFirst",
            "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
            "hostAliases": [{"ip": "10.0.0.9", "hostnames": ["db"]}],
            "securityContext": {"fsGroup": 2000, "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]},
            "priority": 0,
            "enableServiceLinks": false,
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
            "readinessGates": [{"conditionType": "example.com/ready"}]
        }
    })
}

/// Creates the corpus in `ns` (and a few cluster-scoped objects named after it).
async fn create_corpus(client: &kube::Client, ns: &str) -> Result<(), BoxError> {
    let n = Some(ns);
    let owner: core::v1::ConfigMap = create(
        client,
        n,
        json!({"metadata": {"name": "owner"}, "data": {"a": "1"}}),
    )
    .await?;
    let uid = owner.metadata.uid.unwrap_or_default();
    create::<core::v1::Pod>(client, n, rich_pod(&uid)).await?;
    for i in 0..3 {
        create::<core::v1::Pod>(
            client,
            n,
            json!({"metadata": {"name": format!("plain-{i}")}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .await?;
    }
    create::<core::v1::ConfigMap>(
        client,
        n,
        json!({
            "metadata": {"name": "cm"},
            "data": {"a": "text", "empty": "", "multi": "line 1\nline 2\n"},
            "binaryData": {"bin": "AAH/gIA=", "empty-bin": ""}
        }),
    )
    .await?;
    create::<core::v1::Secret>(
        client,
        n,
        json!({
            "metadata": {"name": "s"},
            "type": "Opaque",
            "data": {"k": "c2VjcmV0", "binary": "/+7dzLuqmYh3ZlVEMyIRAA==", "none": ""},
            "stringData": {"from-string": "plain text"}
        }),
    )
    .await?;
    create::<core::v1::Service>(
        client,
        n,
        json!({
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [
                    {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                    {"name": "metrics", "port": 9100, "targetPort": 9100, "appProtocol": "http"}
                ],
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}
            }
        }),
    )
    .await?;
    create::<core::v1::Service>(client, n, json!({
        "metadata": {"name": "nodeport"},
        "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 443, "targetPort": 8443}], "externalTrafficPolicy": "Local"}
    })).await?;
    create::<core::v1::ServiceAccount>(
        client,
        n,
        json!({"metadata": {"name": "web"}, "automountServiceAccountToken": false}),
    )
    .await?;
    create::<apps::v1::Deployment>(client, n, json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "progressDeadlineSeconds": 600,
            "revisionHistoryLimit": 0,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}
            }
        }
    })).await?;
    create::<apps::v1::StatefulSet>(client, n, json!({
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "replicas": 0,
            "selector": {"matchLabels": {"app": "db"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": "50%"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}]
        }
    })).await?;
    create::<batch::v1::Job>(client, n, json!({
        "metadata": {"name": "once"},
        "spec": {
            "backoffLimit": 0, "completions": 1, "parallelism": 1, "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
        }
    })).await?;
    create::<batch::v1::CronJob>(client, n, json!({
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "0 3 * * *", "suspend": true, "successfulJobsHistoryLimit": 0,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}
        }
    })).await?;
    create::<events::v1::Event>(
        client,
        n,
        json!({
            "metadata": {"name": "ev"},
            "eventTime": "2025-03-14T09:26:53.123456Z",
            "reportingController": "example.com/controller",
            "reportingInstance": "controller-0",
            "action": "Scheduling",
            "reason": "Tested",
            "note": "a note",
            "type": "Normal",
            "regarding": {"kind": "Pod", "namespace": ns, "name": "rich", "apiVersion": "v1"},
            "series": {"count": 2, "lastObservedTime": "2025-03-14T09:27:00.654321Z"}
        }),
    )
    .await?;
    create::<core::v1::Event>(
        client,
        n,
        json!({
            "metadata": {"name": "core-ev"},
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": "rich"},
            "reason": "Started", "message": "m", "type": "Warning", "count": 4,
            "firstTimestamp": "2025-03-14T09:00:00Z", "lastTimestamp": "2025-03-14T09:05:00Z",
            "source": {"component": "kubelet", "host": "node-3"}
        }),
    )
    .await?;
    create::<coordination::v1::Lease>(client, n, json!({
        "metadata": {"name": "leader"},
        "spec": {
            "holderIdentity": "controller-0", "leaseDurationSeconds": 15, "leaseTransitions": 0,
            "acquireTime": "2025-03-14T09:26:53.000001Z", "renewTime": "2025-03-14T09:27:08.999999Z"
        }
    })).await?;
    create::<rbac::v1::Role>(client, n, json!({
        "metadata": {"name": "reader"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"], "verbs": ["get"]}
        ]
    })).await?;
    create::<rbac::v1::RoleBinding>(client, n, json!({
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": ns}, {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]
    })).await?;
    create::<networking::v1::NetworkPolicy>(client, n, json!({
        "metadata": {"name": "deny"},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}], "ports": [{"port": "http"}, {"port": 5000, "endPort": 5010, "protocol": "TCP"}]}]
        }
    })).await?;
    create::<policy::v1::PodDisruptionBudget>(
        client,
        n,
        json!({
            "metadata": {"name": "web"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}
        }),
    )
    .await?;
    create::<autoscaling::v2::HorizontalPodAutoscaler>(client, n, json!({
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1500m"}}}
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}
        }
    })).await?;
    create::<core::v1::Node>(client, None, json!({
        "metadata": {"name": format!("node-{ns}"), "labels": {"kubernetes.io/hostname": format!("node-{ns}")}},
        "spec": {
            "podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"], "unschedulable": true,
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]
        }
    })).await?;
    create::<rbac::v1::ClusterRole>(
        client,
        None,
        json!({
            "metadata": {"name": format!("agg-{ns}")},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate": ns}}]},
            "rules": []
        }),
    )
    .await?;
    create::<scheduling::v1::PriorityClass>(
        client,
        None,
        json!({
            "metadata": {"name": format!("prio-{ns}")},
            "value": 0, "globalDefault": false, "description": "", "preemptionPolicy": "Never"
        }),
    )
    .await?;
    Ok(())
}

/// The resourceVersion of the cluster right now (from a cheap list).
async fn current_rv(client: &kube::Client) -> Result<String, BoxError> {
    let (_, _, body) = get(client, "/api/v1/namespaces?limit=1", JSON).await?;
    let v: Value = serde_json::from_slice(&body)?;
    Ok(v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

macro_rules! each_kind {
    ($client:expr, $ns:expr, $f:ident $(, $arg:expr)*) => {{
        let (c, ns): (&kube::Client, Option<&str>) = ($client, Some($ns));
        try_join_all(vec![
            Box::pin($f::<core::v1::Pod>(c, ns $(, $arg)*)) as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>>,
            Box::pin($f::<core::v1::ConfigMap>(c, ns $(, $arg)*)),
            Box::pin($f::<core::v1::Secret>(c, ns $(, $arg)*)),
            Box::pin($f::<core::v1::Service>(c, ns $(, $arg)*)),
            Box::pin($f::<core::v1::ServiceAccount>(c, ns $(, $arg)*)),
            Box::pin($f::<core::v1::Event>(c, ns $(, $arg)*)),
            Box::pin($f::<apps::v1::Deployment>(c, ns $(, $arg)*)),
            Box::pin($f::<apps::v1::StatefulSet>(c, ns $(, $arg)*)),
            Box::pin($f::<batch::v1::Job>(c, ns $(, $arg)*)),
            Box::pin($f::<batch::v1::CronJob>(c, ns $(, $arg)*)),
            Box::pin($f::<events::v1::Event>(c, ns $(, $arg)*)),
            Box::pin($f::<coordination::v1::Lease>(c, ns $(, $arg)*)),
            Box::pin($f::<rbac::v1::Role>(c, ns $(, $arg)*)),
            Box::pin($f::<rbac::v1::RoleBinding>(c, ns $(, $arg)*)),
            Box::pin($f::<networking::v1::NetworkPolicy>(c, ns $(, $arg)*)),
            Box::pin($f::<policy::v1::PodDisruptionBudget>(c, ns $(, $arg)*)),
            Box::pin($f::<autoscaling::v2::HorizontalPodAutoscaler>(c, ns $(, $arg)*)),
            Box::pin($f::<core::v1::Node>(c, None $(, $arg)*)),
            Box::pin($f::<core::v1::Namespace>(c, None $(, $arg)*)),
            Box::pin($f::<rbac::v1::ClusterRole>(c, None $(, $arg)*)),
            Box::pin($f::<scheduling::v1::PriorityClass>(c, None $(, $arg)*)),
        ])
        .await
    }};
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn lists_and_watches_decode_from_protobuf_as_from_json() -> Result<(), BoxError> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.create_namespace("proto").await?;
    let before = current_rv(&client).await?;
    create_corpus(&client, &ns).await?;

    // A MODIFIED and a DELETED event for the watches.
    let cms: kube::Api<core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), &ns);
    let patch = json!({"data": {"added": "later"}});
    cms.patch("cm", &Default::default(), &kube::api::Patch::Merge(&patch))
        .await?;
    let pods: kube::Api<core::v1::Pod> = kube::Api::namespaced(client.clone(), &ns);
    pods.delete("plain-2", &Default::default()).await?;

    let lists = each_kind!(&client, &ns, compare_list)?;
    let items: usize = lists.iter().map(|(n, _)| n).sum();
    assert!(items >= 30, "the corpus was listed ({items} items)");
    eprintln!(
        "{items} listed objects of {} kinds decode the same both ways",
        lists.len()
    );

    // Watch every kind from before the corpus was created: every creation is an event.
    let events: Vec<String> = each_kind!(&client, &ns, compare_watch, &before)?
        .into_iter()
        .flatten()
        .collect();
    for ty in ["ADDED", "MODIFIED", "DELETED"] {
        assert!(events.iter().any(|t| t == ty), "a {ty} event was watched");
    }
    assert!(
        events.len() >= 30,
        "the corpus was watched ({} events)",
        events.len()
    );
    eprintln!("{} watch events decode the same both ways", events.len());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_streaming_list_ends_with_the_initial_events_end_bookmark_in_protobuf()
-> Result<(), BoxError> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.create_namespace("proto-wl").await?;
    for i in 0..5 {
        create::<core::v1::Pod>(
            &client,
            Some(&ns),
            json!({"metadata": {"name": format!("p-{i}")}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .await?;
    }
    let query = format!(
        "{}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2",
        collection::<core::v1::Pod>(Some(&ns))
    );
    let (status, content_type, body) = get(&client, &query, PROTOBUF).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, kinformer_protobuf::WATCH_MEDIA_TYPE);
    let mut frames = FrameDecoder::new();
    frames.push(&body);
    let (mut added, mut end_rv) = (Vec::new(), None);
    while let Some(frame) = frames.next_frame()? {
        let ev = WatchEvent::from_frame(frame)?;
        match ev.event_type() {
            EventType::Added => {
                let pod: core::v1::Pod = ev.object().deserialize()?;
                added.push(pod.metadata.name.unwrap_or_default());
            }
            EventType::Bookmark => {
                // What the reflector reads of a bookmark.
                #[derive(serde::Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Meta {
                    resource_version: String,
                    #[serde(default)]
                    annotations: std::collections::BTreeMap<String, String>,
                }
                #[derive(serde::Deserialize)]
                struct Bookmark {
                    metadata: Meta,
                }
                let b: Bookmark = ev.object().deserialize()?;
                if b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str)
                    == Some("true")
                {
                    end_rv = Some(b.metadata.resource_version);
                }
            }
            other => panic!("unexpected {other} event"),
        }
    }
    frames.finish()?;
    added.sort();
    assert_eq!(added, ["p-0", "p-1", "p-2", "p-3", "p-4"]);
    assert!(
        end_rv.is_some_and(|rv| !rv.is_empty()),
        "the initial-events-end bookmark"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn metadata_only_lists_decode_from_protobuf_as_from_json() -> Result<(), BoxError> {
    use kube::core::PartialObjectMeta;
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.create_namespace("proto-meta").await?;
    let owner: core::v1::ConfigMap =
        create(&client, Some(&ns), json!({"metadata": {"name": "owner"}})).await?;
    create::<core::v1::Pod>(
        &client,
        Some(&ns),
        rich_pod(&owner.metadata.uid.unwrap_or_default()),
    )
    .await?;
    let path = collection::<core::v1::Pod>(Some(&ns));
    let as_meta = ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let (_, content_type, pb) = get(&client, &path, &format!("{PROTOBUF}{as_meta}")).await?;
    assert!(content_type.starts_with(PROTOBUF), "{content_type}");
    let (_, _, json) = get(&client, &path, &format!("{JSON}{as_meta}")).await?;

    let list = Object::from_bytes(&pb)?.list()?;
    assert_eq!(
        (list.api_version(), list.kind()),
        ("meta.k8s.io/v1", "PartialObjectMetadataList")
    );
    let from_pb: Vec<PartialObjectMeta<core::v1::Pod>> = list.items().collect::<Result<_, _>>()?;
    #[derive(serde::Deserialize)]
    struct JsonList {
        items: Vec<PartialObjectMeta<core::v1::Pod>>,
    }
    let from_json: JsonList = serde_json::from_slice(&json)?;
    assert_eq!(from_pb.len(), 1);
    assert_eq!(from_pb[0].metadata, from_json.items[0].metadata);
    assert_eq!(
        from_pb[0].types, from_json.items[0].types,
        "items carry their type as in JSON"
    );

    let pb_value: Value = kinformer_protobuf::from_slice(&pb)?;
    let json_value: Value = serde_json::from_slice(&json)?;
    let (a, b) = (without_nulls(pb_value), without_nulls(json_value));
    assert_eq!(first_difference(&a, &b, ""), None);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn error_bodies_are_protobuf_statuses() -> Result<(), BoxError> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    let ns = cp.create_namespace("proto-err").await?;
    let path = format!("{}/missing", collection::<core::v1::Pod>(Some(&ns)));
    let (status, content_type, body) = get(&client, &path, PROTOBUF).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(content_type, PROTOBUF);
    let object = Object::from_bytes(&body)?;
    assert_eq!(object.kind(), "Status");
    let s: kube::core::Status = object.deserialize()?;
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    let (_, _, json) = get(&client, &path, JSON).await?;
    let from_json: kube::core::Status = serde_json::from_slice(&json)?;
    assert_eq!(s, from_json);
    Ok(())
}
