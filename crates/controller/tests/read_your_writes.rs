//! Read your own writes on the real API server: a controller whose cache cannot show it its
//! own write yet (the informer's connection is cut by a proxy, its writes go straight to the
//! server) acts again on the stale object without `Context::wrote`, and once with it, or
//! when it writes through the cache-reading `client::Client` (which records every write).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_controller::client::Client;
use kinformer_controller::controller::{Action, Context, Controller};
use kinformer_core::ObjectKey;
use kinformer_informer_factory::SharedIndexInformer;
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_testenv::{ControlPlane, eventually};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

struct Ctx {
    /// Writes go straight to the API server.
    api: Api<ConfigMap>,
    /// Reads come from this cache, whose watch goes through the proxy.
    cache: SharedIndexInformer<ConfigMap>,
    mode: Mode,
    /// How often the controller acted: saw the job unhandled and handled it.
    acts: Arc<AtomicUsize>,
}

/// Handles the job once: acts if the cache shows it unhandled, marks it handled, and looks
/// again shortly (as a controller polling for an outcome does).
async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, String> {
    let cached = ctx.cache.indexer().get_by_key(key.as_str());
    let handled = cached
        .as_ref()
        .and_then(|cm| cm.data.as_ref())
        .is_some_and(|d| d.get("handled").is_some_and(|v| v == "true"));
    if cached.is_none() || handled {
        return Ok(Action::Done);
    }
    ctx.acts.fetch_add(1, Ordering::SeqCst);
    let patch = json!({"data": {"handled": "true"}});
    if let Mode::Client(client) = &ctx.mode {
        // Recorded by the client itself.
        let (ns, name) = (key.namespace().unwrap_or_default(), key.name());
        let params = PatchParams::default();
        client
            .patch(&ctx, ns, name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Action::RequeueAfter(Duration::from_millis(100)));
    }
    let written = ctx
        .api
        .patch(key.name(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    if matches!(ctx.mode, Mode::Wrote) {
        ctx.wrote(&ctx.cache, &written);
    }
    Ok(Action::RequeueAfter(Duration::from_millis(100)))
}

/// How the reconcile writes.
enum Mode {
    /// Through `Api`, telling nobody.
    Without,
    /// Through `Api`, then `Context::wrote`.
    Wrote,
    /// Through the cache-reading client.
    Client(Client<ConfigMap, ConfigMap>),
}

/// How often a controller acts on one job while its cache is cut off for a second after
/// its first act.
async fn acts(mode: &str) -> usize {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("ryw").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), &ns);
    let mut job = ConfigMap::default();
    job.metadata.name = Some("job".into());
    api.create(&PostParams::default(), &job).await.unwrap();

    let proxy = cp.proxy().unwrap();
    let through: Api<ConfigMap> =
        Api::namespaced(reflector_client(proxy.admin_config()).unwrap(), &ns);
    let cache = SharedIndexInformer::builder(KubeListerWatcher::new(through)).build();
    let handle = cache.start().unwrap();
    eventually("the sync", TIMEOUT, || cache.has_synced()).await;
    proxy.partition();

    let acts = Arc::new(AtomicUsize::new(0));
    let mode_of = match mode {
        "without" => Mode::Without,
        "wrote" => Mode::Wrote,
        _ => Mode::Client(Client::new(cp.client().unwrap(), &cache)),
    };
    let ctx = Ctx {
        api,
        cache: cache.clone(),
        mode: mode_of,
        acts: Arc::clone(&acts),
    };
    let controller = Controller::<ObjectKey>::new(format!("ryw-{mode}"));
    let queue = Arc::clone(controller.queue());
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(reconcile, ctx, cancel.clone()));
    kinformer_workqueue::Queue::add(&*queue, ObjectKey::new(Some(&ns), "job").unwrap());

    // The cache stays a second behind the first write, then catches up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.heal();
    eventually("the cache to show the write", TIMEOUT, || {
        cache
            .indexer()
            .get_by_key(&format!("{ns}/job"))
            .and_then(|cm| cm.data.clone())
            .is_some_and(|d| d.contains_key("handled"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.cancel();
    run.await.unwrap();
    handle.stop().await.unwrap();
    acts.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_controller_acts_once_on_its_own_write_with_read_your_writes_and_again_without() {
    let without = acts("without").await;
    assert!(
        without >= 2,
        "without read-your-writes the stale cache is acted on again: {without}"
    );
    assert_eq!(
        acts("wrote").await,
        1,
        "with it, the key waits for the cache"
    );
    assert_eq!(
        acts("client").await,
        1,
        "a write through the client is recorded without a word"
    );
}
