//! k8s-openapi objects go through both FIFOs keyed `namespace/name` by default.

use kinformer_core::{ListPart, Sink};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo, Item};

fn pod(ns: &str, name: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        ..Default::default()
    })
}

#[test]
fn pods_are_keyed_by_namespace_and_name() {
    let fifo = DeltaFifo::<Pod>::new(None);
    fifo.add(pod("prod", "web")).unwrap();
    assert_eq!(fifo.queued_keys()[0].as_str(), "prod/web");
    assert!(matches!(
        fifo.add(Arc::new(Pod::default())),
        Err(kinformer_core::Error::MissingName)
    ));

    let fifo = InOrderFifo::<Pod>::atomic();
    fifo.replace(ListPart::whole(
        vec![pod("prod", "web"), pod("dev", "db")],
        "7",
    ))
    .unwrap();
    let Item::ReplacedAll { objects, .. } = fifo.pop().unwrap().finish() else {
        panic!()
    };
    let keys: Vec<_> = objects.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["prod/web", "dev/db"]);
}
