//! End-to-end: the real etcd + kube-apiserver that testenv runs, and every fault it can
//! inject. Run with `cargo xtask test` (it builds the binaries first).

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kinformer_testenv::{ControlPlane, Options, pod};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};

const STEP: Duration = Duration::from_secs(30);

async fn create(pods: &Api<Pod>, name: &str) -> Pod {
    pods.create(&PostParams::default(), &pod(name))
        .await
        .expect("create pod")
}

/// A watch of `pods` from `rv`, which the server ends after `timeout_s` seconds.
async fn watch_from(
    pods: &Api<Pod>,
    rv: &str,
    timeout_s: u32,
) -> BoxStream<'static, kube::Result<WatchEvent<Pod>>> {
    pods.watch(&WatchParams::default().timeout(timeout_s), rv)
        .await
        .expect("start a watch")
        .boxed()
}

/// The next watch event, failing the test after 30 s.
async fn next<S>(stream: &mut S) -> WatchEvent<Pod>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin,
{
    tokio::time::timeout(STEP, stream.next())
        .await
        .expect("no watch event within 30 s")
        .expect("watch stream ended")
        .expect("watch stream error")
}

fn name_of(ev: &WatchEvent<Pod>) -> (&'static str, String) {
    match ev {
        WatchEvent::Added(p) => ("ADDED", p.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(p) => ("MODIFIED", p.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Deleted(p) => ("DELETED", p.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Bookmark(_) => ("BOOKMARK", String::new()),
        WatchEvent::Error(e) => ("ERROR", e.message.clone()),
    }
}

/// Waits until a watch sees `(type, name)`, skipping bookmarks.
async fn expect_event<S>(stream: &mut S, want: (&str, &str))
where
    S: futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin,
{
    loop {
        let ev = next(stream).await;
        let (kind, name) = name_of(&ev);
        if kind == "BOOKMARK" {
            continue;
        }
        assert_eq!((kind, name.as_str()), want);
        return;
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn create_list_and_watch_a_pod_over_tls() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("crud").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);

    let list = pods.list(&ListParams::default()).await.unwrap();
    assert!(list.items.is_empty());
    let rv = list.metadata.resource_version.unwrap();
    let mut watch = watch_from(&pods, &rv, 60).await;

    create(&pods, "web").await;
    expect_event(&mut watch, ("ADDED", "web")).await;
    let patch = serde_json::json!({ "metadata": { "labels": { "app": "web" } } });
    pods.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    expect_event(&mut watch, ("MODIFIED", "web")).await;
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    // A graceful delete may first set deletionTimestamp (MODIFIED), then remove the pod.
    loop {
        let ev = next(&mut watch).await;
        match name_of(&ev) {
            ("MODIFIED" | "BOOKMARK", _) => {}
            (kind, name) => {
                assert_eq!((kind, name.as_str()), ("DELETED", "web"));
                break;
            }
        }
    }

    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty());
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn restricted_user_may_list_pods_and_gets_403_elsewhere() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("rbac").await.unwrap();
    let client = cp.restricted_client().unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.list(&ListParams::default())
        .await
        .expect("list pods is allowed");

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("want 403 on secrets, got {other:?}"),
    }
    match pods.create(&PostParams::default(), &pod("nope")).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("want 403 on create, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_watch_through_the_proxy_breaks_on_partition_and_a_new_one_works_after_heal() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("partition").await.unwrap();
    let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    let proxy = cp.proxy().unwrap();
    let through: Api<Pod> = Api::namespaced(proxy.client().unwrap(), &ns);

    let rv = through
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = watch_from(&through, &rv, 120).await;
    create(&direct, "before").await;
    expect_event(&mut watch, ("ADDED", "before")).await;

    proxy.partition();
    // The open watch ends (or fails) promptly instead of hanging.
    let end = tokio::time::timeout(STEP, async {
        loop {
            match watch.next().await {
                None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(
        end.is_ok(),
        "the watch through the proxy survived the partition"
    );
    // The test keeps writing through the direct address; the proxied client cannot read.
    create(&direct, "during").await;
    assert!(
        through.list(&ListParams::default()).await.is_err(),
        "a request got through the partition"
    );

    proxy.heal();
    let mut watch = watch_from(&through, &rv, 120).await;
    expect_event(&mut watch, ("ADDED", "before")).await;
    expect_event(&mut watch, ("ADDED", "during")).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_proxy_kubeconfig_connects_through_the_proxy() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("proxy-kubeconfig").await.unwrap();
    let proxy = cp.proxy().unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(proxy.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        config.cluster_url.to_string(),
        format!("https://{}/", proxy.tcp().addr())
    );
    let through: Api<Pod> = Api::namespaced(Client::try_from(config).unwrap(), &ns);
    through.list(&ListParams::default()).await.unwrap();
    proxy.partition();
    assert!(through.list(&ListParams::default()).await.is_err());
    proxy.heal();
    through.list(&ListParams::default()).await.unwrap();
}

/// Watches from `rv` and returns the HTTP-or-stream status code the server answered
/// with, or `None` when the watch started fine.
async fn watch_status(pods: &Api<Pod>, rv: &str) -> Option<u16> {
    match pods.watch(&WatchParams::default().timeout(5), rv).await {
        Err(kube::Error::Api(s)) => Some(s.code),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(stream) => {
            let events: Vec<_> = stream.take(1).collect().await;
            match events.first() {
                Some(Ok(WatchEvent::Error(e))) => Some(e.code),
                _ => None,
            }
        }
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn after_compact_etcd_a_watch_from_an_old_rv_gets_410_without_watch_cache() {
    // With the watch cache off every watch reaches etcd, so the 410 is deterministic.
    let cp = ControlPlane::start_with(Options::default().watch_cache(false))
        .await
        .unwrap();
    let ns = cp.create_namespace("compact").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    let old_rv = create(&pods, "a").await.metadata.resource_version.unwrap();
    // etcd keeps the compaction revision itself: two more writes put the first event
    // after `old_rv` strictly below it.
    create(&pods, "b").await;
    create(&pods, "c").await;
    assert_eq!(
        watch_status(&pods, &old_rv).await,
        None,
        "before compaction the old RV is fine"
    );

    let compacted = cp.compact_etcd().await.unwrap();
    assert!(compacted > old_rv.parse::<i64>().unwrap() + 1);
    assert_eq!(watch_status(&pods, &old_rv).await, Some(410));
    // A list at the compacted-away RV with an exact match is refused too.
    let exact = ListParams::default()
        .at(&old_rv)
        .matching(kube::api::VersionMatch::Exact);
    match pods.list(&exact).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 410, "{s:?}"),
        other => panic!("want 410 on an exact list at a compacted RV, got {other:?}"),
    }
    // The current RV still works.
    let now = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    assert_eq!(watch_status(&pods, &now).await, None);
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn two_control_planes_run_at_once_and_one_survives_the_others_apiserver_restart() {
    let (a, b) = tokio::join!(ControlPlane::start(), ControlPlane::start());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.api_addr(), b.api_addr());
    assert_ne!(a.etcd_url(), b.etcd_url());
    let tokens = std::fs::read_to_string(a.dir().join("tokens.csv")).unwrap();
    let admin_token = tokens.split(',').next().unwrap();
    assert!(
        !format!("{a:?}").contains(admin_token),
        "Debug output leaks a token"
    );

    let ns = a.create_namespace("restart").await.unwrap();
    b.create_namespace("other").await.unwrap();
    let pods_a: Api<Pod> = Api::namespaced(a.client().unwrap(), &ns);
    create(&pods_a, "kept").await;

    a.stop_apiserver().unwrap();
    assert!(!a.apiserver_running());
    assert!(
        a.stop_apiserver().is_err(),
        "stopping twice is an error, not a panic"
    );
    assert!(pods_a.list(&ListParams::default()).await.is_err());
    // The other control plane is untouched.
    Api::<Pod>::all(b.client().unwrap())
        .list(&ListParams::default())
        .await
        .unwrap();

    a.start_apiserver().await.unwrap();
    assert!(a.apiserver_running());
    // Same port, same etcd: old clients reconnect and the data is still there.
    let client: Client = a.client().unwrap();
    let pods_a: Api<Pod> = Api::namespaced(client, &ns);
    let list = pods_a.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.unwrap();
    let mut watch = watch_from(&pods_a, &rv, 60).await;
    create(&pods_a, "after-restart").await;
    expect_event(&mut watch, ("ADDED", "after-restart")).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn with_the_watch_cache_on_a_compacted_rv_is_still_served_from_memory() {
    // What the crate docs promise about the watch cache: compaction alone does not make
    // a recent resourceVersion answer 410, because the cache still holds its events.
    // If this ever fails, the API server became compaction-aware: update the docs.
    let cp = ControlPlane::shared().await.unwrap();
    assert!(cp.options().watch_cache);
    let ns = cp.create_namespace("cached").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    let old_rv = create(&pods, "a").await.metadata.resource_version.unwrap();
    create(&pods, "b").await;
    create(&pods, "c").await;
    let compacted = cp.compact_etcd().await.unwrap();
    assert!(compacted > old_rv.parse::<i64>().unwrap() + 1);
    let mut watch = watch_from(&pods, &old_rv, 10).await;
    expect_event(&mut watch, ("ADDED", "b")).await;
    expect_event(&mut watch, ("ADDED", "c")).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_proxys_kubeconfig_reaches_the_server_and_is_cut_by_a_partition() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("proxy-kubeconfig").await.unwrap();
    let proxy = cp.proxy().unwrap();
    let kc = kube::config::Kubeconfig::read_from(proxy.kubeconfig()).unwrap();
    let server = kc.clusters[0].cluster.as_ref().unwrap().server.clone();
    assert_eq!(
        server.as_deref(),
        Some(format!("https://{}", proxy.tcp().addr()).as_str())
    );
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let through: Api<Pod> = Api::namespaced(Client::try_from(config).unwrap(), &ns);
    through.list(&ListParams::default()).await.unwrap();
    proxy.partition();
    assert!(
        through.list(&ListParams::default()).await.is_err(),
        "a request got through the partition"
    );
    proxy.heal();
    through.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_restart_can_switch_the_watch_cache_off_and_on_again() {
    let cp = ControlPlane::start().await.unwrap();
    assert!(cp.watch_cache());
    let ns = cp.create_namespace("switch").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    let old_rv = create(&pods, "a").await.metadata.resource_version.unwrap();
    create(&pods, "b").await;
    create(&pods, "c").await;
    cp.compact_etcd().await.unwrap();

    // Without the cache the watch reaches etcd, which compacted the old RV away.
    cp.stop_apiserver().unwrap();
    cp.start_apiserver_with_watch_cache(false).await.unwrap();
    assert!(!cp.watch_cache());
    assert_eq!(watch_status(&pods, &old_rv).await, Some(410));
    // A plain restart keeps the choice.
    cp.stop_apiserver().unwrap();
    cp.start_apiserver().await.unwrap();
    assert!(!cp.watch_cache());
    assert_eq!(watch_status(&pods, &old_rv).await, Some(410));

    // With the cache back on, a watch from the current RV works as before.
    cp.stop_apiserver().unwrap();
    cp.start_apiserver_with_watch_cache(true).await.unwrap();
    assert!(cp.watch_cache());
    let now = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = watch_from(&pods, &now, 60).await;
    create(&pods, "d").await;
    expect_event(&mut watch, ("ADDED", "d")).await;
}
