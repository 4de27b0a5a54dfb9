//! `/debug/diagnostics` served by the real server and fetched over HTTP: the JSON must show
//! what the test made an informer, a factory, a controller's queue, a plain queue and a
//! leader elector do, and the sections of its own.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kinformer_admin::metrics::Metrics;
use kinformer_admin::server::Server;
use kinformer_controller::controller::Controller;
use kinformer_core::{MetaObject, ObjectKey};
use kinformer_informer_factory::{SharedIndexInformer, SharedInformerFactory};
use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
use kinformer_reflector::{ApiStatus, Backoff, ListPage};
use kinformer_testenv::eventually;
use kinformer_workqueue::{
    DelayingQueue, LOW_PRIORITY, Queue, RateLimitingWorkQueue, default_controller_rate_limiter,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::metrics::{get_with_head as get, run_elector};

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

/// The entry of `section` named `name`.
fn entry<'a>(doc: &'a Value, section: &str, name: &str) -> &'a Value {
    doc[section]
        .as_array()
        .unwrap_or_else(|| panic!("no section {section}: {doc:#}"))
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {section}: {doc:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_show_informers_queues_leases_and_sections_of_ones_own() {
    // Installed first, so the controller's queue records metrics and with them the start
    // times the processing figures are read from.
    Metrics::install();

    // An informer over a scripted lister-watcher: a first list that fails, then three
    // objects at resourceVersion 7 after a 10 ms backoff.
    let fake = FakeListerWatcher::new();
    let failed = AtomicBool::new(false);
    fake.on_list(move |_| {
        if !failed.swap(true, Ordering::SeqCst) {
            return Err(kinformer_reflector::Error::Api(ApiStatus::new(
                500,
                "InternalError",
                "etcd is down",
            )));
        }
        Ok(ListPage::new(
            ["a", "b", "c"].map(|n| Obj(n.to_owned())),
            "7",
        ))
    });
    let (_watch, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let mut backoff = Backoff::default();
    backoff.initial = Duration::from_millis(10);
    backoff.jitter = 0.0;
    let informer = SharedIndexInformer::builder(fake)
        .name("diag-objs")
        .backoff(backoff)
        .build();
    let handle = informer.start().unwrap();

    // A factory with one informer it has not started (its client points nowhere).
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let factory = SharedInformerFactory::new(client);
    let pods = factory.informer::<Pod>();

    // A controller's priority queue: c (priority 0) handed out and held, a and b ready
    // at low priority, d waiting an hour.
    let controller = Controller::<ObjectKey>::new("diag-test");
    let queue = Arc::clone(controller.queue());
    for key in ["ns/a", "ns/b"] {
        queue.add_with_priority(ObjectKey::parse(key).unwrap(), LOW_PRIORITY);
    }
    queue.add(ObjectKey::parse("ns/c").unwrap());
    assert_eq!(queue.get().unwrap().name(), "c");
    queue.add_after(ObjectKey::parse("ns/d").unwrap(), Duration::from_secs(3600));
    // A queue without a name records no metrics: no processing figures.
    let plain = Arc::new(RateLimitingWorkQueue::<u32>::new(
        default_controller_rate_limiter(),
    ));
    plain.add(1);

    // A leader elector that leads, on an in-memory Lease.
    let (elector, stop, electing) = run_elector("diag-lease");

    let cancel = CancellationToken::new();
    let server = Server::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
        .diagnose_informer(&informer)
        .diagnose_factory(&factory)
        .diagnose_controller(&controller)
        .diagnose_queue("plain", Arc::clone(&plain))
        .diagnose_elector(&elector)
        // Sections of one's own: a sequence is one entry per element.
        .diagnose("shards", || {
            vec![
                json!({ "name": "s0", "held": [0, 2] }),
                json!({ "name": "s1" }),
            ]
        })
        .diagnose("build", || json!({ "name": "diag", "version": 3 }));
    let addr = server.local_addr().unwrap();
    let serving = tokio::spawn(server.run(cancel.clone()));

    eventually("the informer to sync", Duration::from_secs(20), || {
        informer.has_synced()
    })
    .await;
    eventually("the elector to lead", Duration::from_secs(20), || {
        elector.is_leader()
    })
    .await;
    // The held key's age, at least.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let (code, head, body) = tokio::task::spawn_blocking(move || get(addr, "/debug/diagnostics"))
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let doc: Value = serde_json::from_str(&body).expect("JSON");

    let objs = entry(&doc, "informers", "diag-objs");
    assert_eq!(objs["started"], true);
    assert_eq!(objs["synced"], true);
    assert_eq!(objs["objects"], 3);
    assert_eq!(objs["last_sync_resource_version"], "7");
    assert_eq!(objs["lists"]["initial"], 1);
    assert_eq!(objs["lists"]["error"], 1, "the relist after the failure");
    let failure = &objs["last_error"];
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("500 InternalError: etcd is down"),
        "{failure}"
    );
    assert_eq!(failure["backoff"], 0.01);
    assert_eq!(failure["relist_reason"], "error");
    let at: k8s_openapi::jiff::Timestamp =
        failure["time"].as_str().unwrap().parse().expect("RFC 3339");
    let age = SystemTime::now()
        .duration_since(SystemTime::from(at))
        .unwrap_or_default();
    assert!(age < Duration::from_secs(60), "failed just now: {age:?}");
    assert_eq!(objs["syncs"], 1);
    assert_eq!(objs["watches"], 1);
    assert_eq!(objs["undecodable"], 0);
    let informers = doc["informers"].as_array().unwrap();
    assert_eq!(
        informers.len(),
        2,
        "the informer and the factory's: {informers:#?}"
    );
    let pods_entry = informers.iter().find(|e| e["name"] != "diag-objs").unwrap();
    assert_eq!(pods_entry["name"], pods.stats().name);
    assert_eq!(
        (&pods_entry["started"], &pods_entry["synced"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(pods_entry["objects"], 0);
    assert_eq!(pods_entry["last_sync_resource_version"], "");
    assert_eq!(pods_entry["last_error"], Value::Null);

    let q = entry(&doc, "queues", "diag-test");
    assert_eq!(q["depth"], 2, "a and b");
    assert_eq!(
        q["depth_by_priority"],
        json!([{ "priority": LOW_PRIORITY, "depth": 2 }])
    );
    assert_eq!(q["processing"], 1, "c");
    assert_eq!(q["waiting"], 1, "d");
    assert_eq!(q["retries"], 1, "d's add_after");
    assert_eq!(q["shutting_down"], false);
    let longest = q["longest_running_processor_seconds"].as_f64().unwrap();
    assert!(
        (0.05..60.0).contains(&longest),
        "c held since before the 50 ms sleep: {longest}"
    );
    assert_eq!(
        q["unfinished_work_seconds"].as_f64(),
        Some(longest),
        "one item held"
    );
    let p = entry(&doc, "queues", "plain");
    assert_eq!(
        (&p["depth"], &p["processing"], &p["retries"]),
        (&json!(1), &json!(0), &json!(0))
    );
    assert_eq!(p["depth_by_priority"], json!([]));
    assert_eq!(p["longest_running_processor_seconds"], Value::Null);

    let l = entry(&doc, "leases", "diag-lease");
    assert_eq!(l["identity"], "me");
    assert_eq!(l["holder"], "me");
    assert_eq!((&l["is_me"], &l["held"]), (&json!(true), &json!(true)));
    assert_eq!(l["lease_duration"], 15.0);
    assert_eq!(l["transitions"], 0);
    let renew: k8s_openapi::jiff::Timestamp =
        l["renew_time"].as_str().unwrap().parse().expect("RFC 3339");
    let age = SystemTime::now()
        .duration_since(SystemTime::from(renew))
        .unwrap_or_default();
    assert!(age < Duration::from_secs(60), "renewed just now: {age:?}");
    let expires_in = l["expires_in"].as_f64().unwrap();
    assert!((10.0..=15.0).contains(&expires_in), "{expires_in}");

    assert_eq!(
        doc["shards"],
        json!([{ "name": "s0", "held": [0, 2] }, { "name": "s1" }])
    );
    assert_eq!(doc["build"], json!([{ "name": "diag", "version": 3 }]));

    // Other methods are refused, as on every route.
    let (code, _, _) = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(stream, "POST /debug/diagnostics HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let code: u16 = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, (), ())
    })
    .await
    .unwrap();
    assert_eq!(code, 405);

    stop.cancel();
    electing.await.unwrap().unwrap();
    cancel.cancel();
    serving.await.unwrap().unwrap();
    handle.stop().await.unwrap();
    queue.shut_down();
}
