//! The manager on the real API server: the caches synced before the controllers start,
//! two controllers under one lease, `/readyz`, Events, and a shutdown that stops everything
//! in order (the lease released, the Events written, the admin server last).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kinformer::compact_store::Cached;
use kinformer::controller::{Action, Context, Controller};
use kinformer::events::{EventType, Recorder, Reporter};
use kinformer::leaderelection::{LeaderElectionConfig, LeaderElector, LeaseLock};
use kinformer::manager::Manager;
use kinformer::prelude::*;
use kinformer::reflector::reflector_client;
use kinformer::server::Server;
use kinformer_testenv::{ControlPlane, eventually, eventually_async};
use kube::Api;
use kube::api::PostParams;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What one controller reconciled, and the cache it reads.
struct Ctx {
    seen: Arc<Mutex<BTreeSet<String>>>,
    cache: kinformer::informer::SharedIndexInformer<Cached<ConfigMap>>,
    recorder: Option<Recorder>,
}

async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, String> {
    ctx.seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key.name().to_owned());
    if let (Some(recorder), Some(cm)) =
        (&ctx.recorder, ctx.cache.indexer().get_by_key(key.as_str()))
    {
        recorder
            .publish_for(
                &*cm,
                EventType::Normal,
                "Seen",
                "Reconcile",
                "seen by the manager test",
            )
            .map_err(|e| e.to_string())?;
    }
    Ok(Action::Done)
}

/// The body of `GET path` on `addr`, or `None` when nothing answers.
async fn get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.ok()?;
    Some(raw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_manager_syncs_runs_its_controllers_under_one_lease_and_stops_in_order() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("manager").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let lock = LeaseLock::new(client.clone(), &ns, "manager-test", "replica-a");
    let config = LeaderElectionConfig {
        release_on_cancel: true,
        ..LeaderElectionConfig::default()
    };
    let elector = LeaderElector::new(config, lock).unwrap();
    let server = Server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let admin = server.local_addr().unwrap();
    let mut manager = Manager::builder(client.clone())
        .namespace(&ns)
        .leader_election(elector)
        .admin(server)
        .build();

    let config_maps = manager.factory().informer::<ConfigMap>();
    let recorder = manager.recorder(Reporter::new("manager-test")).unwrap();
    let (first, second) = (Arc::default(), Arc::default());
    for (name, seen, recorder) in [("first", &first, Some(recorder)), ("second", &second, None)] {
        let controller = Controller::<ObjectKey>::new(name);
        controller.watch(&config_maps).unwrap();
        let ctx = Ctx {
            seen: Arc::clone(seen),
            cache: config_maps.clone(),
            recorder,
        };
        manager.add(controller.into_runnable(reconcile, ctx));
    }
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), &ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("before-start".into());
    api.create(&PostParams::default(), &cm).await.unwrap();

    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    let seen_by = |seen: &Arc<Mutex<BTreeSet<String>>>, name: &str| {
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(name)
    };
    eventually(
        "both controllers to reconcile the listed one",
        TIMEOUT,
        || seen_by(&first, "before-start") && seen_by(&second, "before-start"),
    )
    .await;
    cm.metadata.name = Some("after-start".into());
    api.create(&PostParams::default(), &cm).await.unwrap();
    eventually("both controllers to reconcile the new one", TIMEOUT, || {
        seen_by(&first, "after-start") && seen_by(&second, "after-start")
    })
    .await;
    assert!(config_maps.has_synced());
    let readyz = get(admin, "/readyz")
        .await
        .expect("the admin server answers");
    assert!(readyz.starts_with("HTTP/1.1 200"), "{readyz}");
    let leases: Api<Lease> = Api::namespaced(cp.client().unwrap(), &ns);
    let holder = |lease: Lease| {
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default()
    };
    assert_eq!(
        holder(leases.get("manager-test").await.unwrap()),
        "replica-a"
    );

    shutdown.cancel();
    tokio::time::timeout(TIMEOUT, run)
        .await
        .expect("the manager stops")
        .unwrap()
        .unwrap();
    assert_eq!(
        holder(leases.get("manager-test").await.unwrap()),
        "",
        "the lease is released on shutdown"
    );
    assert!(
        get(admin, "/healthz").await.is_none(),
        "the admin server stopped last"
    );
    let events: Api<Event> = Api::namespaced(cp.client().unwrap(), &ns);
    eventually_async("the Events recorded before shutdown", TIMEOUT, || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("Seen"))
                .count()
                >= 2
        })
    })
    .await;
}
