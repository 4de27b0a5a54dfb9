//! `/metrics`, `/healthz` and `/readyz` served by the real server, scraped over HTTP and
//! read with a Prometheus text parser (not string matching): the values must be what the
//! test made the controller, its queue and an informer do.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kinformer_admin::metrics::Metrics;
use kinformer_admin::server::Server;
use kinformer_controller::controller::{Action, Context, Controller};
use kinformer_core::{MetaObject, ObjectKey};
use kinformer_informer_factory::{InformerIdentity, SharedIndexInformer};
use kinformer_reflector::ListPage;
use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
use kinformer_testenv::eventually;
use prometheus_parse::{Scrape, Value};
use tokio_util::sync::CancellationToken;

/// A namespaced object with a name.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Obj(String);

impl MetaObject for Obj {
    fn object_name(&self) -> Option<&str> {
        Some(&self.0)
    }
    fn object_namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn object_resource_version(&self) -> Option<&str> {
        Some("7")
    }
}

/// A GET over plain HTTP/1.1: the status code and the body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = get_with_head(addr, path);
    (status, body)
}

/// A GET over plain HTTP/1.1: the status code, the head (lowercased) and the body.
pub(crate) fn get_with_head(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    // Bodies are small; hyper sends them with a length, not chunked.
    (status, head.to_ascii_lowercase(), body.to_owned())
}

fn scrape(addr: SocketAddr) -> Scrape {
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, 200);
    Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text")
}

/// The value of the sample named `metric` whose labels include every pair of `labels`.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(h) => h.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => f64::NAN,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_over_http() {
    let metrics = Metrics::install();
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| {
        Ok(ListPage::new(
            ["a", "b", "c"].map(|n| Obj(n.to_owned())),
            "7",
        ))
    });
    let (_watch, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let informer = SharedIndexInformer::builder(fake)
        .name("objs")
        .identity(InformerIdentity::new(
            "metrics-test",
            "example.com",
            "v1",
            "objs",
        ))
        .build();
    metrics.register_informer(&informer);

    let alive = Arc::new(AtomicBool::new(true));
    let cancel = CancellationToken::new();
    let server = Server::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
        .ready_when("informers", {
            let informer = informer.clone();
            move || informer.has_synced()
        })
        .healthy_when("test-switch", {
            let alive = Arc::clone(&alive);
            move || alive.load(Ordering::SeqCst)
        });
    let addr = server.local_addr().unwrap();
    let serving = tokio::spawn(server.run(cancel.clone()));

    let (code, body) = tokio::task::spawn_blocking(move || get(addr, "/readyz"))
        .await
        .unwrap();
    assert_eq!(
        (code, body.as_str()),
        (503, "[-]informers failed\n"),
        "not ready before sync"
    );

    // A controller whose reconciles end in each way.
    let controller = Controller::<ObjectKey>::new("metrics-test").workers(3);
    controller.watch(&informer).unwrap();
    let handle = informer.start().unwrap();
    eventually("the informer to sync", Duration::from_secs(20), || {
        informer.has_synced()
    })
    .await;
    let (code, _) = tokio::task::spawn_blocking(move || get(addr, "/readyz"))
        .await
        .unwrap();
    assert_eq!(code, 200, "ready after sync");

    let failed_once = Arc::new(AtomicBool::new(false));
    let run = tokio::spawn(controller.run(
        move |key: ObjectKey, ctx: Context<Arc<AtomicBool>>| async move {
            match key.name() {
                "a" => Ok(Action::Done),
                "b" if !ctx.swap(true, Ordering::SeqCst) => Err("fails once"),
                "b" => Ok(Action::Done),
                _ => Ok(Action::RequeueAfter(Duration::from_secs(3600))),
            }
        },
        Arc::clone(&failed_once),
        cancel.clone(),
    ));
    let reconciled = |s: &Scrape, result| {
        value(
            s,
            "controller_runtime_reconcile_total",
            &[("controller", "metrics-test"), ("result", result)],
        )
    };
    let mut last = None;
    for _ in 0..200 {
        let s = tokio::task::spawn_blocking(move || scrape(addr))
            .await
            .unwrap();
        let done = reconciled(&s, "success") == Some(2.0);
        last = Some(s);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = last.expect("scraped");
    let c = [("controller", "metrics-test")];
    assert_eq!(
        reconciled(&s, "success"),
        Some(2.0),
        "a, and b on its retry"
    );
    assert_eq!(reconciled(&s, "error"), Some(1.0), "b's first attempt");
    assert_eq!(reconciled(&s, "requeue_after"), Some(1.0), "c");
    assert_eq!(
        value(&s, "controller_runtime_reconcile_errors_total", &c),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "controller_runtime_reconcile_panics_total", &c),
        None
    );
    assert_eq!(
        value(&s, "controller_runtime_max_concurrent_reconciles", &c),
        Some(3.0)
    );
    assert_eq!(
        value(&s, "controller_runtime_active_workers", &c),
        Some(0.0)
    );
    assert_eq!(
        value(&s, "controller_runtime_reconcile_time_seconds_count", &c),
        Some(4.0),
        "one observation per reconcile"
    );
    // The controller's queue is named after it.
    let q = [("name", "metrics-test")];
    assert_eq!(
        value(&s, "workqueue_adds_total", &q),
        Some(4.0),
        "a, b, c, and b's retry"
    );
    // client-go counts every add_after as a retry: b's rate-limited one and c's requeue.
    assert_eq!(value(&s, "workqueue_retries_total", &q), Some(2.0));
    // The informer, read at scrape time.
    let i = [("informer", "objs")];
    assert_eq!(value(&s, "kinformer_informer_synced", &i), Some(1.0));
    assert_eq!(value(&s, "kinformer_informer_objects", &i), Some(3.0));
    assert_eq!(
        value(&s, "kinformer_informer_last_sync_resource_version", &i),
        Some(7.0)
    );
    assert_eq!(
        value(
            &s,
            "kinformer_reflector_lists_total",
            &[("informer", "objs"), ("reason", "initial")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "kinformer_reflector_watches_total", &i),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "kinformer_reflector_undecodable_objects_total", &i),
        Some(0.0)
    );
    // client-go 1.36's informer families, under its identity.
    let id = [
        ("name", "metrics-test"),
        ("group", "example.com"),
        ("version", "v1"),
        ("resource", "objs"),
    ];
    assert_eq!(
        value(&s, "informer_queued_items", &id),
        Some(0.0),
        "all applied"
    );
    assert_eq!(value(&s, "informer_store_resource_version", &id), Some(7.0));
    assert!(
        value(&s, "informer_processing_latency_seconds_count", &id).is_some_and(|n| n >= 1.0),
        "the initial list's entries were popped and timed"
    );

    // A leader elector built after `install` reports through it, under client-go's names.
    // A name of its own: the metrics are the process's, and other tests of this binary run
    // electors (on leases named alike) once anything has installed them.
    let (elector, stop, electing) = run_elector("metrics-test");
    eventually("the elector to lead", Duration::from_secs(20), || {
        elector.is_leader()
    })
    .await;
    let s = tokio::task::spawn_blocking(move || scrape(addr))
        .await
        .unwrap();
    let name = [("name", elector.name())];
    assert_eq!(value(&s, "leader_election_master_status", &name), Some(1.0));
    assert_eq!(
        value(&s, "leader_election_transitions_total", &name),
        Some(1.0)
    );
    stop.cancel();
    electing.await.unwrap().unwrap();

    let (code, _) = tokio::task::spawn_blocking(move || get(addr, "/healthz"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    alive.store(false, Ordering::SeqCst);
    let (code, body) = tokio::task::spawn_blocking(move || get(addr, "/healthz"))
        .await
        .unwrap();
    assert_eq!((code, body.as_str()), (503, "[-]test-switch failed\n"));
    let (code, _) = tokio::task::spawn_blocking(move || get(addr, "/nope"))
        .await
        .unwrap();
    assert_eq!(code, 404);

    cancel.cancel();
    run.await.unwrap();
    serving.await.unwrap().unwrap();
    handle.stop().await.unwrap();
}

/// An elector named `name` on an in-memory Lease, running (and leading until it loses)
/// until `stop` is cancelled: the elector, `stop` and its task.
pub(crate) fn run_elector(
    name: &str,
) -> (
    kinformer_leaderelection::LeaderElector,
    CancellationToken,
    tokio::task::JoinHandle<
        Result<kinformer_leaderelection::TermEnd, kinformer_leaderelection::Error>,
    >,
) {
    let lease = kinformer_leaderelection::testing::MemoryLease::new();
    let elector = kinformer_leaderelection::LeaderElector::new(
        kinformer_leaderelection::LeaderElectionConfig {
            name: name.into(),
            ..Default::default()
        },
        lease.lock("me"),
    )
    .unwrap();
    let stop = CancellationToken::new();
    let electing = tokio::spawn({
        let (elector, stop) = (elector.clone(), stop.clone());
        async move {
            elector
                .run(&stop, |leading| async move { leading.lost().await })
                .await
        }
    });
    (elector, stop, electing)
}

/// A reconcile put off by read-your-writes is counted twice: as kinformer's
/// `kinformer_reconcile_stale_cache_skips_total{controller}` and under the name Kubernetes
/// 1.36's own controllers use (KEP-5647), `stale_sync_skips_total`, labelled with the group and
/// resource of the cache that was behind (from its informer's identity).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_cache_skips_are_counted_under_kep_5647s_name() {
    let _metrics = Metrics::install();
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| Ok(ListPage::new([Obj("a".to_owned())], "7")));
    let (watch, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let informer = SharedIndexInformer::builder(fake)
        .name("stale")
        .identity(InformerIdentity::new(
            "stale-test",
            "example.com",
            "v1",
            "objs",
        ))
        .build();
    let handle = informer.start().unwrap();
    eventually("the sync", Duration::from_secs(20), || {
        informer.has_synced()
    })
    .await;

    let controller = Controller::<ObjectKey>::new("stale-test");
    controller.watch(&informer).unwrap();
    let queue = Arc::clone(controller.queue());
    let cache = informer.clone();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |_key: ObjectKey, ctx: Context<()>| {
            let cache = cache.clone();
            async move {
                // A write the cache (at 7) has not shown: the key waits for it.
                ctx.wrote_version(&cache, "8");
                Ok::<_, String>(Action::Done)
            }
        },
        (),
        cancel.clone(),
    ));
    let server = Server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = server.local_addr().unwrap();
    let serving = tokio::spawn(server.run(cancel.clone()));
    let labels = [
        ("controller", "stale-test"),
        ("group", "example.com"),
        ("resource", "objs"),
    ];
    let skipped = move || {
        let s = scrape(addr);
        value(&s, "stale_sync_skips_total", &labels).is_some_and(|n| n >= 1.0)
            && value(
                &s,
                "kinformer_reconcile_stale_cache_skips_total",
                &[("controller", "stale-test")],
            )
            .is_some_and(|n| n >= 1.0)
    };
    // The key queued again while its write is pending is what gets skipped.
    let key = ObjectKey::new(Some("ns"), "a").unwrap();
    eventually(
        "a skip counted under both names",
        Duration::from_secs(20),
        || {
            kinformer_workqueue::Queue::add(&*queue, key.clone());
            std::thread::spawn(skipped).join().unwrap()
        },
    )
    .await;
    drop(watch);
    cancel.cancel();
    run.await.unwrap();
    serving.await.unwrap().unwrap();
    handle.stop().await.unwrap();
}
