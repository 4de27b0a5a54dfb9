//! The `kube` feature: keys for k8s-openapi objects through `MetaObject`.
#![cfg(feature = "kube")]

use k8s_openapi::api::core::v1::{Node, Pod};
use kinformer_core::{MetaObject, meta_namespace_key};
use kube_core::ObjectMeta;

#[test]
fn pod_and_node_keys() {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("prod".into()),
            resource_version: Some("42".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(meta_namespace_key(&pod).unwrap().as_str(), "prod/web");
    assert_eq!(pod.object_resource_version(), Some("42"));
    assert_eq!(
        pod.object_labels()
            .and_then(|l| l.get("app"))
            .map(String::as_str),
        Some("web")
    );
    let node = Node {
        metadata: ObjectMeta {
            name: Some("n1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(meta_namespace_key(&node).unwrap().as_str(), "n1");
    assert!(meta_namespace_key(&Pod::default()).is_err());
}
