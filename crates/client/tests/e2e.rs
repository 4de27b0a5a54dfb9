//! The layers on a client of the real etcd + kube-apiserver of kinformer-testenv: the limit
//! paces GETs and lets a watch through, the metrics count what the server answered. Run
//! with `cargo xtask test`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_client::ClientBuilder;
use kinformer_testenv::ControlPlane;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchParams};
use prometheus_client::registry::Registry;

fn samples(registry: &Registry) -> Vec<prometheus_parse::Sample> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    prometheus_parse::Scrape::parse(lines).unwrap().samples
}

/// The value of `name`'s samples with `labels` (a histogram's count), summed.
fn value(samples: &[prometheus_parse::Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            _ => 0.0,
        })
        .sum()
}

async fn config_map(cp: &ControlPlane, ns: &str, name: &str) {
    // Made by a client of its own: the metered one counts only the GETs.
    let plain = kube::Client::try_from(cp.admin_config()).unwrap();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    Api::<ConfigMap>::namespaced(plain, ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn twelve_gets_at_5_qps_in_bursts_of_2_take_2_seconds_and_are_counted() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("client-limit").await.unwrap();
    config_map(cp, &ns, "paced").await;
    let config = cp.admin_config();
    let host = config.cluster_url.authority().unwrap().to_string();
    let mut registry = Registry::default();
    let client = ClientBuilder::new(config)
        .qps(5.0)
        .burst(2)
        .metrics(&mut registry)
        .build()
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, &ns);

    let start = Instant::now();
    for _ in 0..12 {
        cms.get("paced").await.unwrap();
    }
    let took = start.elapsed();
    // Two at once, then ten 200 ms apart: 2 s (unthrottled, about 50 ms on loopback).
    assert!(took >= Duration::from_millis(1900), "took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");

    let samples = samples(&registry);
    let labels = [
        ("code", "200"),
        ("method", "GET"),
        ("host", host.as_str()),
        ("resource", "configmaps"),
    ];
    assert_eq!(value(&samples, "rest_client_requests_total", &labels), 12.0);
    assert_eq!(value(&samples, "rest_client_requests_total", &[]), 12.0);
    let timed = [
        ("verb", "GET"),
        ("host", host.as_str()),
        ("resource", "configmaps"),
    ];
    assert_eq!(
        value(&samples, "rest_client_request_duration_seconds", &timed),
        12.0
    );
    // Each GET's wait for its token: ten of them waited, about 2 s in all less the
    // requests' own time.
    assert_eq!(
        value(
            &samples,
            "rest_client_rate_limiter_duration_seconds",
            &timed
        ),
        12.0
    );
    let waited: f64 = samples
        .iter()
        .filter(|s| s.metric == "rest_client_rate_limiter_duration_seconds_sum")
        .map(|s| match s.value {
            prometheus_parse::Value::Untyped(v) | prometheus_parse::Value::Gauge(v) => v,
            _ => 0.0,
        })
        .sum();
    assert!((1.0..=2.5).contains(&waited), "waited {waited} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn on_the_reflectors_connection_a_watch_does_not_wait_for_a_token_and_a_404_is_counted() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("client-watch").await.unwrap();
    let mut registry = Registry::default();
    let client = ClientBuilder::new(cp.admin_config())
        .reflector_connection()
        .qps(0.5)
        .burst(1)
        .metrics(&mut registry)
        .build()
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, &ns);

    let start = Instant::now();
    let list = cms.list(&ListParams::default()).await.unwrap();
    // The bucket is empty now: another GET would wait 2 s; the watch starts at once.
    let watch = cms
        .watch(
            &WatchParams::default().timeout(5),
            &list.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(1), "took {took:?}");
    drop(watch);
    // The next GET waits for its token: 2 s after the list.
    assert!(cms.get_opt("absent").await.unwrap().is_none());
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(1900), "took {took:?}");

    let samples = samples(&registry);
    let requests = |labels: &[(&str, &str)]| value(&samples, "rest_client_requests_total", labels);
    assert_eq!(
        requests(&[("code", "200"), ("resource", "configmaps")]),
        2.0
    );
    assert_eq!(
        requests(&[
            ("code", "404"),
            ("method", "GET"),
            ("resource", "configmaps")
        ]),
        1.0
    );
    // Timed: the list and the 404, not the watch.
    assert_eq!(
        value(&samples, "rest_client_request_duration_seconds", &[]),
        2.0
    );
}
