//! A partition of the set: sharded informers over one resource, under churn (creates,
//! updates, deletes), with a network partition and an etcd compaction in the middle, end with
//! every object in exactly one shard's cache, and the union of the caches equals a fresh
//! list — on an API server with the gate `ShardedListAndWatch` (the server filters), on one
//! with the gate but without its watch cache (the server filters lists but not watches, so
//! the informers filter), and on one without the gate (the informers filter); the last two
//! without the watch cache, so that the compaction's `410 Gone` makes every shard relist.
//!
//! Run with `cargo xtask test`, or `cargo test -p kinformer-informer-factory --test integration
//! sharded:: -- --include-ignored` once the control plane is built.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::MetaObject;
use kinformer_informer_factory::{
    InformerOptions, ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_reflector::{ShardFiltering, ShardKey, ShardRange, ShardSelection, ShardSelector};
use kinformer_testenv::{ControlPlane, Options, create_pods, eventually, pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

/// Shards of the test.
const SHARDS: u32 = 4;

/// name → resourceVersion.
type Snapshot = BTreeMap<String, String>;

fn snapshot<T: MetaObject + Send + Sync + 'static>(informer: &SharedIndexInformer<T>) -> Snapshot {
    informer
        .indexer()
        .list()
        .iter()
        .map(|p| {
            (
                p.object_name().unwrap_or_default().to_owned(),
                p.object_resource_version().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Creates, label updates and deletes, one at a time, until told to stop.
async fn churn(pods: Api<Pod>, seed: u64, stop: tokio_util::sync::CancellationToken) -> usize {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut live: Vec<String> = (0..60).map(|i| format!("p-{i}")).collect();
    let mut next = 0;
    let mut ops = 0;
    while !stop.is_cancelled() {
        match rng.u8(0..3) {
            0 => {
                let name = format!("c-{next}");
                next += 1;
                if pods
                    .create(&PostParams::default(), &pod(&name))
                    .await
                    .is_ok()
                {
                    live.push(name);
                }
            }
            1 if !live.is_empty() => {
                let name = &live[rng.usize(0..live.len())];
                let patch = serde_json::json!({"metadata": {"labels": {"n": ops.to_string()}}});
                let _ = pods
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
            _ if !live.is_empty() => {
                let name = live.swap_remove(rng.usize(0..live.len()));
                let _ = pods
                    .delete(&name, &DeleteParams::default().grace_period(0))
                    .await;
            }
            _ => {}
        }
        ops += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ops
}

/// The run: `SHARDS` informers by uid (three from one factory each, one built by hand)
/// through a proxy, churn, a partition with a compaction, then the checks.
async fn partition_under_churn(cp: &ControlPlane, want: ShardFiltering) -> Vec<u64> {
    let ns = cp.create_namespace("sharded").await.unwrap();
    let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    create_pods(&direct, "p", 60).await.unwrap();
    let proxy = cp.proxy().unwrap();
    let through = reflector_client(proxy.admin_config()).unwrap();

    let shards: Vec<ShardSelector> = (0..SHARDS)
        .map(|i| ShardSelector::index_of(ShardKey::Uid, i, SHARDS).unwrap())
        .collect();
    // Shard 0 through the informer builder, the others each from a factory of its own.
    let mut informers = vec![
        SharedIndexInformer::builder(
            KubeListerWatcher::new(Api::<Pod>::namespaced(through.clone(), &ns)).cached(),
        )
        .shard(shards[0].clone())
        .build(),
    ];
    let mut factories = Vec::new();
    for shard in &shards[1..] {
        let factory = SharedInformerFactory::builder(through.clone())
            .namespace(ns.clone())
            .shard(shard.clone())
            .build();
        informers.push(factory.informer::<Pod>());
        factories.push(factory);
    }
    let handle = informers[0].start().unwrap();
    for f in &factories {
        f.start().unwrap();
    }
    eventually("the informers to sync", Duration::from_secs(30), || {
        informers.iter().all(SharedIndexInformer::has_synced)
    })
    .await;

    let stop = tokio_util::sync::CancellationToken::new();
    let churning = tokio::spawn(churn(direct.clone(), 16, stop.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.partition();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cp.compact_etcd().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.heal();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let ops = churning.await.unwrap();
    assert!(ops > 100, "only {ops} changes");

    // Converged: each cache is the shard of a fresh list, by name and resourceVersion.
    let fresh: Vec<Pod> = direct.list(&ListParams::default()).await.unwrap().items;
    let want_of = |shard: &ShardSelector| -> Snapshot {
        fresh
            .iter()
            .filter(|p| shard.matches(*p as &Pod))
            .map(|p| {
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    p.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    eventually(
        "the caches to converge to the shards of a fresh list",
        Duration::from_secs(30),
        || {
            informers
                .iter()
                .zip(&shards)
                .all(|(inf, shard)| snapshot(inf) == want_of(shard))
        },
    )
    .await;
    let mut union = Snapshot::new();
    let mut sizes = Vec::new();
    for inf in &informers {
        let snap = snapshot(inf);
        sizes.push(snap.len());
        for (name, rv) in snap {
            assert!(
                union.insert(name.clone(), rv).is_none(),
                "{name} is in two shards"
            );
        }
    }
    let all: BTreeSet<&String> = union.keys().collect();
    let listed: BTreeSet<&String> = fresh
        .iter()
        .filter_map(|p| p.metadata.name.as_ref())
        .collect();
    assert_eq!(all, listed, "the union of the shards is the fresh list");
    assert!(
        sizes.iter().all(|n| *n > 0),
        "every shard holds some: {sizes:?}"
    );
    for inf in &informers {
        assert_eq!(inf.shard_filtering(), Some(want));
    }
    assert_eq!(
        factories[0].informer_ids()[0].options(),
        &InformerOptions::new()
            .namespace(ns.clone())
            .shard(shards[1].clone())
    );
    // Relists after the partition, by shard. Without the watch cache the compaction leaves
    // no way back but a relist: `410 Gone` on the re-watch, or, when the proxy cut a watch
    // the moment it opened, a relist for a very short watch that then failed while the
    // partition lasted (reason `error`): which one depends on timing, the relist does not.
    let relists: Vec<u64> = informers
        .iter()
        .map(|inf| {
            let lists = inf.stats().reflector.lists;
            lists
                .iter()
                .filter(|(why, _)| *why != "initial")
                .map(|(_, n)| *n)
                .sum()
        })
        .collect();
    handle.stop().await.unwrap();
    for f in &factories {
        f.shutdown().await.unwrap();
    }
    relists
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn shards_partition_the_set_under_churn_a_partition_and_a_compaction_on_a_gated_server() {
    let cp = ControlPlane::start_with(Options::default().sharded_list_and_watch(true))
        .await
        .unwrap();
    partition_under_churn(&cp, ShardFiltering::Server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_gated_server_without_its_watch_cache_filters_watches_too() {
    // kube-apiserver 1.36 without the watch cache filtered lists by shard but not watches:
    // its etcd3 watcher dropped a predicate without label or field selectors
    // (`SelectionPredicate.Empty` ignored the shard selector), and the informers filtered.
    // 1.37 counts the shard selector in `Empty` (k8s.io/apiserver v0.37.2,
    // `pkg/storage/selection_predicate.go`): the server filters watches too. The compaction
    // makes every shard's re-watch answer 410 and relist: the sharded relist is exercised
    // too. (A server that ignores the selector is the gate-off case below.)
    let options = Options::default()
        .sharded_list_and_watch(true)
        .watch_cache(false);
    let cp = ControlPlane::start_with(options).await.unwrap();
    let relists = partition_under_churn(&cp, ShardFiltering::Server).await;
    assert!(
        relists.iter().all(|n| *n >= 1),
        "relists after the compaction, by shard: {relists:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn shards_partition_the_set_under_churn_on_a_server_without_the_gate_filtering_here() {
    // Without the watch cache, so that the compaction makes every shard's re-watch answer
    // 410 and relist: the relist of a client-filtered shard is exercised too.
    let cp = ControlPlane::start_with(Options::default().watch_cache(false))
        .await
        .unwrap();
    let relists = partition_under_churn(&cp, ShardFiltering::Client).await;
    assert!(
        relists.iter().all(|n| *n >= 1),
        "relists after the compaction, by shard: {relists:?}"
    );
}

/// One informer over a selection of shards that grows and shrinks under churn, as a
/// replica's does when it takes and gives up shards: after each change its cache holds only
/// the selected shards, every object of a shard given up reached the handler as a delete,
/// every object of a shard taken as an add, each change that selects more lists only what it
/// adds (at the version the watch had reached, then the watch goes on from there), each that
/// only selects less lists nothing (the watch goes on, and the cache drops the rest), none
/// relists, and once the churn stops the cache is the selected shards of a fresh list.
async fn a_moving_selection(cp: &ControlPlane) {
    let ns = cp.create_namespace("selection").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    create_pods(&pods, "p", 60).await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let union = |held: &[u32]| {
        let ranges = held
            .iter()
            .map(|&i| ShardRange::index_of(i, SHARDS).unwrap());
        ShardSelector::ranges(ShardKey::Uid, ranges).ok()
    };
    let selection = ShardSelection::new(None);
    let informer =
        SharedIndexInformer::builder(KubeListerWatcher::new(Api::<Pod>::namespaced(client, &ns)))
            .shards(selection.clone())
            .build();
    // name → whether the last notification was an add (true) or a delete (false).
    let seen = Arc::new(Mutex::new(BTreeMap::<String, bool>::new()));
    let (a, d) = (Arc::clone(&seen), Arc::clone(&seen));
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    informer
        .add_event_handler(Box::new(
            ResourceEventHandlerFuncs::<Pod>::new()
                .add_func(move |p, _| {
                    a.lock().unwrap().insert(name(p), true);
                })
                .delete_func(move |p| {
                    d.lock().unwrap().insert(name(p.object()), false);
                }),
        ))
        .unwrap();
    let running = informer.start().unwrap();
    eventually("the informer to sync", Duration::from_secs(30), || {
        informer.has_synced()
    })
    .await;
    assert!(
        snapshot(&informer).is_empty(),
        "nothing selected, nothing cached"
    );

    let relists = || {
        informer
            .stats()
            .reflector
            .lists
            .iter()
            .find(|(why, _)| *why == "shard_selection_changed")
            .map_or(0, |(_, n)| *n)
    };
    let narrowings = || informer.stats().reflector.narrowings;
    let widenings = || informer.stats().reflector.widenings;
    let stop = tokio_util::sync::CancellationToken::new();
    let churning = tokio::spawn(churn(pods.clone(), 23, stop.clone()));
    // Wider, wider, narrower (shards 0 and 3 given up), wider.
    let steps = [vec![0], vec![0, 1, 3], vec![1], vec![1, 2]];
    for (step, held) in steps.iter().enumerate() {
        let selector = union(held).unwrap();
        let before = snapshot(&informer);
        selection.set(Some(selector.clone()));
        eventually(
            "the cache under the new selection",
            Duration::from_secs(30),
            || {
                let cached = informer.indexer().list();
                // Every shard holds some of the pods: an empty cache is a relist not done yet.
                // Every relist ended (the first list and each relist reached the sink).
                let counters = informer.stats().reflector;
                relists() + narrowings() + widenings() > step as u64
                    && counters.syncs == 1 + relists()
                    && !cached.is_empty()
                    && cached.iter().all(|p| selector.matches(&**p))
            },
        )
        .await;
        // The handler sees the cache: what is cached was last added, what left it (given
        // up, or deleted by the churn) was last deleted.
        eventually(
            "the handler to see the new cache",
            Duration::from_secs(30),
            || {
                let seen = seen.lock().unwrap();
                let cached = snapshot(&informer);
                cached.keys().all(|n| seen.get(n) == Some(&true))
                    && before
                        .keys()
                        .filter(|n| !cached.contains_key(*n))
                        .all(|n| seen.get(n) == Some(&false))
            },
        )
        .await;
    }
    stop.cancel();
    churning.await.unwrap();
    // Quiet now: the cache converges to exactly the selected shards of a fresh list.
    let selector = union(steps.last().unwrap()).unwrap();
    let fresh: Vec<Pod> = pods.list(&ListParams::default()).await.unwrap().items;
    let want: Snapshot = fresh
        .iter()
        .filter(|p| selector.matches(*p))
        .map(|p| {
            (
                name(p),
                p.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    eventually("the cache to converge", Duration::from_secs(30), || {
        snapshot(&informer) == want
    })
    .await;
    assert_eq!(
        (relists(), widenings(), narrowings()),
        (0, 3, 1),
        "no relist: a list of what each change that selects more adds, nothing for the one that selects less"
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_selection_that_moves_under_churn_lists_only_what_it_adds_on_a_gated_server() {
    let cp = ControlPlane::start_with(Options::default().sharded_list_and_watch(true))
        .await
        .unwrap();
    a_moving_selection(&cp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_selection_that_moves_under_churn_lists_only_what_it_adds_without_the_gate() {
    let cp = ControlPlane::start().await.unwrap();
    a_moving_selection(&cp).await;
}
