//! Agreement with the API server: for pods with many uids in many namespaces, the shard
//! membership kinformer computes (the server's FNV-1a 64 and bounds) equals what a 1.36 API
//! server with the gate `ShardedListAndWatch` returns for each selector — lists (paged, in
//! JSON and protobuf), watches and streaming lists — and a server without the gate ignores
//! the selector (no `shardInfo`, every object).
//!
//! Run with `cargo xtask test`, or `cargo test -p kinformer-reflector --test integration
//! shard:: -- --include-ignored` once the control plane is built.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_kube::{KubeListerWatcher, WireFormat, reflector_client};
use kinformer_reflector::{
    ListOptions, ListerWatcher, ShardKey, ShardRange, ShardSelector, WatchEvent, WatchOptions,
};
use kinformer_testenv::{ControlPlane, Options, create_pods};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

/// Namespaces of the test, and pods in each: 12 × 25 = 300 uids, 12 namespaces.
const NAMESPACES: usize = 12;
const PODS_PER_NAMESPACE: usize = 25;

/// A pod as membership sees it: (namespace, name) and its shard keys.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Member {
    key: (String, String),
    uid: String,
}

fn member(p: &Pod) -> Member {
    Member {
        key: (
            p.metadata.namespace.clone().unwrap_or_default(),
            p.metadata.name.clone().unwrap_or_default(),
        ),
        uid: p.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The pods of `ns_prefix`'s namespaces that kinformer says `shard` selects.
fn expected(all: &BTreeSet<(Member, String)>, shard: &ShardSelector) -> BTreeSet<Member> {
    all.iter()
        .filter(|(m, ns)| match shard.key() {
            ShardKey::Uid => shard.matches_value(&m.uid),
            _ => shard.matches_value(ns),
        })
        .map(|(m, _)| m.clone())
        .collect()
}

/// The selectors checked: index-of-count for 1, 3 and 5 shards, and explicit ranges (OR-ed,
/// uneven, one ending at 2^64), for both keys.
fn selectors() -> Vec<ShardSelector> {
    let mut out = Vec::new();
    for key in [ShardKey::Uid, ShardKey::Namespace] {
        for count in [1, 3, 5] {
            for i in 0..count {
                out.push(ShardSelector::index_of(key, i, count).unwrap());
            }
        }
        let ranges = [
            ShardRange::new(0x0123_4567_89ab_cdef, 0x3000_0000_0000_0000).unwrap(),
            ShardRange::new(0x7fff_ffff_ffff_ffff, 0x9000_0000_0000_0001).unwrap(),
            ShardRange::new(0xd000_0000_0000_0000, 1 << 64).unwrap(),
        ];
        out.push(ShardSelector::ranges(key, ranges).unwrap());
    }
    out
}

/// Every page of a list with `shard` sent as is (no client-side filtering: what the server
/// returned), in pages of `limit`, and the `shardInfo` of each page.
async fn server_list(
    lw: &KubeListerWatcher<Pod>,
    shard: &ShardSelector,
    limit: u32,
) -> (BTreeSet<Member>, Vec<Option<String>>, String) {
    let mut options = ListOptions::new("", Some(limit));
    options.shard = Some(shard.clone());
    let (mut members, mut infos) = (BTreeSet::new(), Vec::new());
    loop {
        let page = lw.list(&options).await.unwrap();
        members.extend(page.items.iter().map(|p| member(p)));
        infos.push(page.shard_selector.clone());
        match page.continue_token {
            Some(token) => {
                options.continue_token = Some(token);
                options.resource_version.clear();
            }
            None => return (members, infos, page.resource_version),
        }
    }
}

/// Creates the namespaces and pods; returns every pod with its namespace, and the API.
async fn populate(cp: &ControlPlane) -> (BTreeSet<(Member, String)>, Vec<String>) {
    let client = cp.client().unwrap();
    let mut all = BTreeSet::new();
    let mut namespaces = Vec::new();
    for i in 0..NAMESPACES {
        let ns = cp.create_namespace(&format!("agree-{i}")).await.unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for p in create_pods(&pods, "p", PODS_PER_NAMESPACE).await.unwrap() {
            all.insert((member(&p), ns.clone()));
        }
        namespaces.push(ns);
    }
    (all, namespaces)
}

/// Only the test's namespaces (the shared cluster has others).
fn ours(members: BTreeSet<Member>, namespaces: &[String]) -> BTreeSet<Member> {
    members
        .into_iter()
        .filter(|m| namespaces.contains(&m.key.0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn shard_membership_equals_the_gated_api_servers_for_lists_watches_and_streaming_lists() {
    let cp = ControlPlane::start_with(Options::default().sharded_list_and_watch(true))
        .await
        .unwrap();
    let (all, namespaces) = populate(&cp).await;
    let client = reflector_client(cp.admin_config()).unwrap();

    // Lists, paged (the selector goes with every page), in both wire formats.
    let mut checked = 0;
    for format in [WireFormat::Protobuf, WireFormat::Json] {
        let lw = KubeListerWatcher::new(Api::<Pod>::all(client.clone())).wire_format(format);
        for shard in selectors() {
            let (got, infos, _) = server_list(&lw, &shard, 40).await;
            let got = ours(got, &namespaces);
            let want = expected(&all, &shard);
            assert_eq!(got, want, "{format:?} {shard}");
            assert!(
                infos
                    .iter()
                    .all(|i| i.as_deref() == Some(&shard.to_string()[..])),
                "{format:?}: every page echoes the selector in shardInfo: {infos:?}"
            );
            checked += got.len();
        }
    }
    assert!(checked > 2 * all.len(), "the selectors selected something");
    // Shards of one count partition the set.
    for key in [ShardKey::Uid, ShardKey::Namespace] {
        let mut seen = BTreeMap::new();
        for i in 0..5 {
            for m in expected(&all, &ShardSelector::index_of(key, i, 5).unwrap()) {
                *seen.entry(m).or_insert(0) += 1;
            }
        }
        assert_eq!(seen.len(), all.len());
        assert!(seen.values().all(|n| *n == 1));
    }

    // Watches: one per shard of 3 (both keys) from one resourceVersion, then changes.
    let lw = KubeListerWatcher::new(Api::<Pod>::all(client.clone()));
    let (_, _, rv) = server_list(
        &lw,
        &ShardSelector::index_of(ShardKey::Uid, 0, 1).unwrap(),
        500,
    )
    .await;
    let shards: Vec<ShardSelector> = [ShardKey::Uid, ShardKey::Namespace]
        .into_iter()
        .flat_map(|k| (0..3).map(move |i| ShardSelector::index_of(k, i, 3).unwrap()))
        .collect();
    let mut watches = Vec::new();
    for shard in &shards {
        let mut o = WatchOptions::new(rv.clone(), Duration::from_secs(60));
        o.shard = Some(shard.clone());
        watches.push(lw.watch(&o).await.unwrap());
    }
    let direct = cp.client().unwrap();
    let mut changed = BTreeSet::new();
    for (i, ns) in namespaces.iter().enumerate() {
        let pods: Api<Pod> = Api::namespaced(direct.clone(), ns);
        for p in create_pods(&pods, "w", 5).await.unwrap() {
            changed.insert((member(&p), ns.clone()));
        }
        let name = format!("p-{i}");
        let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
        pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        let deleted = pods
            .delete(
                &format!("p-{}", i + 1),
                &DeleteParams::default().grace_period(0),
            )
            .await
            .unwrap();
        let _ = deleted;
    }
    let touched: BTreeSet<(Member, String)> = all
        .iter()
        .filter(|(m, ns)| {
            let i = namespaces.iter().position(|n| n == ns).unwrap();
            m.key.1 == format!("p-{i}") || m.key.1 == format!("p-{}", i + 1)
        })
        .cloned()
        .collect();
    changed.extend(touched);
    // Each shard's watch delivers exactly the changed pods of its shard (each created pod
    // once, each touched pod once: a patch or a delete).
    for (shard, watch) in shards.iter().zip(watches.iter_mut()) {
        let want = expected(&changed, shard);
        let mut got = BTreeSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while got.len() < want.len() {
            let event = tokio::time::timeout_at(deadline, watch.next())
                .await
                .unwrap_or_else(|_| panic!("{shard}: {} of {} events", got.len(), want.len()))
                .unwrap()
                .unwrap();
            match event {
                WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
                    let m = member(&p);
                    if namespaces.contains(&m.key.0) {
                        assert!(want.contains(&m), "{shard}: {m:?} is not in the shard");
                        got.insert(m);
                    }
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Shard(change) => panic!("{shard}: the selection is fixed: {change:?}"),
            }
        }
        assert_eq!(got, want, "{shard}");
    }

    // A streaming list (sendInitialEvents) with a selector: its initial events are the shard.
    let now: BTreeSet<(Member, String)> = {
        let lw = KubeListerWatcher::new(Api::<Pod>::all(client.clone()));
        let (got, _, _) = server_list(
            &lw,
            &ShardSelector::index_of(ShardKey::Uid, 0, 1).unwrap(),
            500,
        )
        .await;
        ours(got, &namespaces)
            .into_iter()
            .map(|m| {
                let ns = m.key.0.clone();
                (m, ns)
            })
            .collect()
    };
    for shard in &shards {
        let mut o = WatchOptions::new("", Duration::from_secs(60));
        o.send_initial_events = true;
        o.shard = Some(shard.clone());
        let mut stream = lw.watch(&o).await.unwrap();
        let mut got = BTreeSet::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), stream.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            match event {
                WatchEvent::Added(p) => {
                    let m = member(&p);
                    if namespaces.contains(&m.key.0) {
                        got.insert(m);
                    }
                }
                WatchEvent::Bookmark(b) if b.initial_events_end => break,
                _ => {}
            }
        }
        assert_eq!(got, expected(&now, shard), "streaming list {shard}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_server_without_the_gate_ignores_the_selector_and_says_nothing() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("ungated").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    let created = create_pods(&pods, "p", 30).await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let shard = ShardSelector::index_of(ShardKey::Uid, 0, 4).unwrap();
    for format in [WireFormat::Protobuf, WireFormat::Json] {
        let lw =
            KubeListerWatcher::new(Api::<Pod>::namespaced(client.clone(), &ns)).wire_format(format);
        let (got, infos, _) = server_list(&lw, &shard, 500).await;
        assert_eq!(got.len(), created.len(), "every pod, whatever the shard");
        assert_eq!(infos, [None], "no shardInfo");
        // The sharded lister-watcher keeps the shard's on the client.
        let sharded = lw.sharded(shard.clone());
        let page = sharded.list(&ListOptions::new("", None)).await.unwrap();
        let want: BTreeSet<String> = created
            .iter()
            .filter(|p| shard.matches(*p as &Pod))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let got: BTreeSet<String> = page
            .items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            sharded.filtering(),
            kinformer_reflector::ShardFiltering::Client
        );
    }
}
