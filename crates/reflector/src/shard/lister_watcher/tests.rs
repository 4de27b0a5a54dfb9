//! The sharded lister-watcher's tests: filtering, the probe, and following a selection.

use std::time::Duration;

use super::*;
use crate::fake::{FakeListerWatcher, watch_channel};
use crate::{Bookmark, ShardKey, ShardRange};

/// An object with a uid and a namespace.
#[derive(Clone, Debug, PartialEq)]
struct Obj {
    uid: String,
    ns: &'static str,
}

impl MetaObject for Obj {
    fn object_name(&self) -> Option<&str> {
        Some(&self.uid)
    }
    fn object_namespace(&self) -> Option<&str> {
        Some(self.ns)
    }
    fn object_resource_version(&self) -> Option<&str> {
        None
    }
    fn object_uid(&self) -> Option<&str> {
        Some(&self.uid)
    }
}

/// `n` objects with random uids (as the API server's: sequential strings differ only
/// in their last bytes, which FNV-1a spreads poorly over the top bits).
fn objs(n: usize) -> Vec<Obj> {
    let mut rng = fastrand::Rng::with_seed(3);
    (0..n)
        .map(|i| Obj {
            uid: (0..32).map(|_| rng.digit(16)).collect(),
            ns: if i % 2 == 0 { "a" } else { "default" },
        })
        .collect()
}

fn uids(items: &[Arc<Obj>]) -> Vec<String> {
    items.iter().map(|o| o.uid.clone()).collect()
}

#[tokio::test]
async fn a_list_the_server_filtered_passes_and_says_so_one_that_it_did_not_is_filtered_here() {
    let shard = ShardSelector::index_of(ShardKey::Uid, 1, 3).unwrap();
    let mine: Vec<Obj> = objs(60).into_iter().filter(|o| shard.matches(o)).collect();
    assert!(!mine.is_empty() && mine.len() < 60);

    // A gated server: only the shard, and shardInfo echoing the selector.
    let fake = FakeListerWatcher::new();
    let (wire, answer) = (shard.to_string(), mine.clone());
    fake.on_list(move |_| Ok(ListPage::new(answer.clone(), "5").with_shard_info(wire.clone())));
    let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
    assert_eq!(lw.filtering(), ShardFiltering::Unknown);
    let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
    assert_eq!(page.items.len(), mine.len());
    assert_eq!(lw.filtering(), ShardFiltering::Server);
    assert_eq!(fake.list_calls()[0].shard.as_ref(), Some(&shard));

    // A server without the gate: everything, no shardInfo.
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| Ok(ListPage::new(objs(60), "5")));
    let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
    let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
    let want: Vec<String> = mine.iter().map(|o| o.uid.clone()).collect();
    assert_eq!(uids(&page.items), want);
    assert_eq!(lw.filtering(), ShardFiltering::Client);
    // A later page cannot turn it back.
    let fake2 = fake.clone();
    fake2.on_list(move |_| Ok(ListPage::new(Vec::new(), "6").with_shard_info(shard.to_string())));
    lw.list(&ListOptions::new("6", None)).await.unwrap();
    assert_eq!(lw.filtering_handle().get(), ShardFiltering::Client);
}

#[tokio::test]
async fn without_the_gate_a_page_asks_for_as_many_objects_as_hold_a_page_of_the_shard() {
    let limits = |fake: &FakeListerWatcher<Obj>| -> Vec<Option<u32>> {
        fake.list_calls().iter().map(|o| o.limit).collect()
    };
    // A server without the gate: the first page tells, the next ones ask for more.
    for (shard, want) in [
        (ShardSelector::index_of(ShardKey::Uid, 1, 3).unwrap(), 1500),
        // Two ranges of 12: a sixth of the space.
        (
            ShardSelector::ranges(
                ShardKey::Uid,
                [
                    ShardRange::index_of(0, 12).unwrap(),
                    ShardRange::index_of(5, 12).unwrap(),
                ],
            )
            .unwrap(),
            3000,
        ),
        // One of 40: at most 16 times the page.
        (ShardSelector::index_of(ShardKey::Uid, 7, 40).unwrap(), 8000),
    ] {
        let fake = FakeListerWatcher::new();
        fake.on_list(|_| Ok(ListPage::new(objs(60), "5")));
        let lw = ShardedListerWatcher::new(fake.clone(), shard);
        lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        lw.list(&ListOptions::new("5", Some(500))).await.unwrap();
        lw.list(&ListOptions::new("5", None)).await.unwrap();
        assert_eq!(limits(&fake), [Some(500), Some(want), None]);
    }

    // A gated server: the page asked for.
    let shard = ShardSelector::index_of(ShardKey::Uid, 1, 3).unwrap();
    let mine: Vec<Obj> = objs(60).into_iter().filter(|o| shard.matches(o)).collect();
    let fake = FakeListerWatcher::new();
    let wire = shard.to_string();
    fake.on_list(move |_| Ok(ListPage::new(mine.clone(), "5").with_shard_info(wire.clone())));
    let lw = ShardedListerWatcher::new(fake.clone(), shard);
    lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
    lw.list(&ListOptions::new("5", Some(500))).await.unwrap();
    assert_eq!(limits(&fake), [Some(500), Some(500)]);
}

#[tokio::test]
async fn watch_events_outside_the_shard_are_dropped_bookmarks_and_errors_pass() {
    let shard = ShardSelector::index_of(ShardKey::Namespace, 0, 2).unwrap();
    // "a" (0xaf63…) is in shard 1 of 2, "default" (0xebad…) too; "ns-07" (0x7e7e…) in 0.
    let inside = Obj {
        uid: "x".into(),
        ns: "ns-07",
    };
    let outside = Obj {
        uid: "y".into(),
        ns: "default",
    };
    let fake = FakeListerWatcher::new();
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
    let mut watch = lw
        .watch(&WatchOptions::new("5", Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(fake.watch_calls()[0].shard.as_ref(), Some(&shard));
    tx.send(Ok(WatchEvent::Added(outside.clone())));
    tx.send(Ok(WatchEvent::Added(inside.clone())));
    tx.send(Ok(WatchEvent::Modified(outside.clone())));
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("9", false))));
    tx.send(Err(Error::VeryShortWatch));
    tx.send(Ok(WatchEvent::Deleted(outside)));
    tx.send(Ok(WatchEvent::Deleted(inside.clone())));
    drop(tx);
    let mut seen = Vec::new();
    while let Some(item) = watch.next().await {
        seen.push(item);
    }
    assert!(matches!(&seen[0], Ok(WatchEvent::Added(o)) if *o == inside));
    assert!(matches!(&seen[1], Ok(WatchEvent::Bookmark(b)) if b.resource_version == "9"));
    assert!(matches!(&seen[2], Err(Error::VeryShortWatch)));
    assert!(matches!(&seen[3], Ok(WatchEvent::Deleted(o)) if *o == inside));
    assert_eq!(seen.len(), 4);
    assert_eq!(lw.filtering(), ShardFiltering::Client);
}

#[tokio::test]
async fn before_the_first_streaming_list_one_object_is_listed_to_learn_what_the_server_does() {
    let shard = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
    let fake = FakeListerWatcher::new();
    let wire = shard.to_string();
    fake.on_list(move |_| Ok(ListPage::new(Vec::<Obj>::new(), "5").with_shard_info(&*wire)));
    let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
    let mut streaming = WatchOptions::new("", Duration::from_secs(60));
    streaming.send_initial_events = true;
    for _ in 0..2 {
        let (_tx, stream) = watch_channel::<Obj>();
        fake.push_watch(Ok(stream));
        drop(lw.watch(&streaming).await.unwrap());
    }
    // One probe, a consistent read of one object of the shard; none once known.
    let probes = fake.list_calls();
    assert_eq!(probes.len(), 1);
    assert_eq!(probes[0].resource_version, "");
    assert_eq!(probes[0].limit, Some(1));
    assert_eq!(probes[0].shard.as_ref(), Some(&shard));
    assert_eq!(lw.filtering(), ShardFiltering::Server);

    // A plain watch (after a list) never probes; nor does a failed probe fail the watch.
    let fake = FakeListerWatcher::<Obj>::new();
    fake.on_list(|_| Err(Error::VeryShortWatch));
    let lw = ShardedListerWatcher::new(fake.clone(), shard);
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    drop(
        lw.watch(&WatchOptions::new("5", Duration::from_secs(60)))
            .await
            .unwrap(),
    );
    assert!(fake.list_calls().is_empty());
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    drop(lw.watch(&streaming).await.unwrap());
    assert_eq!(fake.list_calls().len(), 1);
    assert_eq!(lw.filtering(), ShardFiltering::Unknown);
}

#[tokio::test]
async fn a_selection_change_ends_the_watch_and_refuses_a_page_or_a_watch_of_the_old_one() {
    let (zero, one) = (
        ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap(),
        ShardSelector::index_of(ShardKey::Uid, 1, 2).unwrap(),
    );
    let all = objs(40);
    let fake = FakeListerWatcher::new();
    let answer = all.clone();
    fake.on_list(move |o| {
        let page = ListPage::new(answer.clone(), "5");
        Ok(if o.continue_token.is_none() {
            page.with_continue("more")
        } else {
            page
        })
    });
    let selection = ShardSelection::new(Some(zero.clone()));
    let lw = ShardedListerWatcher::selected(fake.clone(), selection.clone());

    // A list begun under shard 0 cannot go on under shard 1.
    let first = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
    assert!(first.items.iter().all(|o| zero.matches(&**o)));
    selection.set(Some(one.clone()));
    let mut next = ListOptions::new("", Some(500));
    next.continue_token = Some("more".into());
    assert!(matches!(
        lw.list(&next).await,
        Err(Error::ShardSelectionChanged)
    ));
    // Nor can a watch follow that list: shard 1's objects were never listed.
    let watch_opts = WatchOptions::new("5", Duration::from_secs(60));
    assert!(matches!(
        lw.watch(&watch_opts).await,
        Err(Error::ShardSelectionChanged)
    ));
    assert!(fake.watch_calls().is_empty());

    // Relisted under shard 1: its objects, then a watch under it, until the next change.
    let page = lw.list(&ListOptions::new("5", Some(500))).await.unwrap();
    assert!(!page.items.is_empty() && page.items.iter().all(|o| one.matches(&**o)));
    assert_eq!(fake.list_calls().last().unwrap().shard.as_ref(), Some(&one));
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let mut watch = lw.watch(&watch_opts).await.unwrap();
    assert_eq!(fake.watch_calls()[0].shard.as_ref(), Some(&one));
    let (mine, other) = (
        all.iter().find(|o| one.matches(*o)).unwrap().clone(),
        all.iter().find(|o| zero.matches(*o)).unwrap().clone(),
    );
    tx.send(Ok(WatchEvent::Added(other)));
    tx.send(Ok(WatchEvent::Added(mine.clone())));
    assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(o))) if o == mine));
    selection.set(Some(one.clone())); // the same selector: no change
    selection.set(None);
    assert!(matches!(
        watch.next().await,
        Some(Ok(WatchEvent::Shard(ShardChange::Relist)))
    ));
    assert!(watch.next().await.is_none(), "the watch ends at the change");
}

#[tokio::test]
async fn a_narrowing_goes_on_under_the_narrower_selector_and_a_gain_ends_the_watch_saying_what_is_new()
 {
    let quarter = |i| ShardSelector::index_of(ShardKey::Uid, i, 4).unwrap();
    let half = ShardSelector::range(
        ShardKey::Uid,
        ShardRange::new(
            quarter(0).range_list()[0].start(),
            quarter(1).range_list()[0].end(),
        )
        .unwrap(),
    );
    let all = objs(80);
    let of = |q: u32| all.iter().find(|o| quarter(q).matches(*o)).unwrap().clone();
    let fake = FakeListerWatcher::new();
    let wire = half.to_string();
    fake.on_list(move |_| Ok(ListPage::new(Vec::<Obj>::new(), "5").with_shard_info(&*wire)));
    let selection = ShardSelection::new(Some(half.clone()));
    let lw = ShardedListerWatcher::selected(fake.clone(), selection.clone());
    lw.list(&ListOptions::new("0", None)).await.unwrap();
    assert_eq!(lw.filtering(), ShardFiltering::Server);
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let watch_opts = WatchOptions::new("5", Duration::from_secs(60));
    let mut watch = lw.watch(&watch_opts).await.unwrap();

    tx.send(Ok(WatchEvent::Added(of(1))));
    assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(o))) if o == of(1)));
    // Shard 1 given up: the watch says so and goes on with shard 0 alone.
    selection.set(Some(quarter(0)));
    assert!(matches!(
        watch.next().await,
        Some(Ok(WatchEvent::Shard(ShardChange::Narrowed(s)))) if s == quarter(0)
    ));
    // The server still sends shard 1 (the selector it was given): dropped here, and
    // that is no sign of a server that ignores selectors.
    tx.send(Ok(WatchEvent::Modified(of(1))));
    tx.send(Ok(WatchEvent::Added(of(0))));
    assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(o))) if o == of(0)));
    assert_eq!(lw.filtering(), ShardFiltering::Server);
    // A change and back is no change.
    selection.set(Some(quarter(3)));
    selection.set(Some(quarter(0)));
    tx.send(Ok(WatchEvent::Deleted(of(0))));
    assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Deleted(o))) if o == of(0)));
    // Nothing new needs listing: a watch after this one starts without a relist.
    drop(watch);
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let mut watch = lw.watch(&watch_opts).await.unwrap();
    assert_eq!(fake.watch_calls()[1].shard.as_ref(), Some(&quarter(0)));
    assert_eq!(fake.list_calls().len(), 1);
    // Shard 2 taken: its objects were never listed, the watch ends saying what is new.
    let two = ShardSelector::ranges(
        ShardKey::Uid,
        [quarter(0).range_list()[0], quarter(2).range_list()[0]],
    )
    .unwrap();
    selection.set(Some(two.clone()));
    tx.send(Ok(WatchEvent::Added(of(0))));
    assert!(matches!(
        watch.next().await,
        Some(Ok(WatchEvent::Shard(ShardChange::Widened { selector, added }))) if selector == two && added == quarter(2)
    ));
    assert!(watch.next().await.is_none());
    // A list of another part is refused; a list of what is new is a list of the new
    // selection, and a watch of it follows without a relist.
    let mut part = ListOptions::new("6", None);
    part.exact = true;
    part.shard = Some(quarter(3));
    assert!(matches!(
        lw.list(&part).await,
        Err(Error::ShardSelectionChanged)
    ));
    part.shard = Some(quarter(2));
    lw.list(&part).await.unwrap();
    let call = fake.list_calls()[1].clone();
    assert_eq!(
        (call.resource_version.as_str(), call.exact, call.shard),
        ("6", true, Some(quarter(2)))
    );
    let (_tx, stream) = watch_channel::<Obj>();
    fake.push_watch(Ok(stream));
    let mut watch = lw
        .watch(&WatchOptions::new("6", Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(fake.watch_calls()[2].shard.as_ref(), Some(&two));
    // A narrowing to nothing ends the watch: with nothing selected nothing is watched.
    selection.set(None);
    assert!(matches!(
        watch.next().await,
        Some(Ok(WatchEvent::Shard(ShardChange::Relist)))
    ));
}

#[tokio::test]
async fn with_nothing_selected_one_object_is_listed_for_a_version_and_nothing_is_watched() {
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| Ok(ListPage::new(objs(1), "7").with_continue("more")));
    let selection = ShardSelection::new(None);
    let lw = ShardedListerWatcher::selected(fake.clone(), selection.clone());
    let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
    assert!(page.items.is_empty());
    assert_eq!(page.resource_version, "7");
    assert_eq!(page.continue_token, None, "one page");
    let call = &fake.list_calls()[0];
    assert_eq!(
        (call.resource_version.as_str(), call.limit, &call.shard),
        ("", Some(1), &None)
    );

    let mut watch = lw
        .watch(&WatchOptions::new("7", Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(fake.watch_calls().is_empty(), "no watch is opened");
    let waiting = tokio::time::timeout(Duration::from_millis(50), watch.next()).await;
    assert!(waiting.is_err(), "the watch waits for a selection");
    let half = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
    selection.set(Some(half.clone()));
    assert!(matches!(
        watch.next().await,
        Some(Ok(WatchEvent::Shard(ShardChange::Widened { selector, added }))) if selector == half && added == half
    ));

    // A streaming list of nothing: its end at once, at a version listed for it.
    selection.set(None);
    let mut streaming = WatchOptions::new("", Duration::from_secs(60));
    streaming.send_initial_events = true;
    let mut watch = lw.watch(&streaming).await.unwrap();
    assert!(matches!(watch.next().await,
        Some(Ok(WatchEvent::Bookmark(b))) if b.resource_version == "7" && b.initial_events_end));
    assert!(fake.watch_calls().is_empty());
}

#[tokio::test]
async fn another_shards_undecodable_objects_are_left_to_that_shard() {
    let undecodable = |ns: &str, uid: Option<&str>| {
        let u = crate::Undecodable::new(
            kinformer_core::ObjectKey::new(Some(ns), "x").unwrap(),
            "bad",
        );
        match uid {
            Some(uid) => u.with_uid(uid),
            None => u,
        }
    };
    // By namespace: "ns-07" is in shard 0 of 2, "default" in shard 1.
    let shard = ShardSelector::index_of(ShardKey::Namespace, 0, 2).unwrap();
    let fake = FakeListerWatcher::<Obj>::new();
    fake.on_list(move |_| {
        let mut page = ListPage::new(Vec::new(), "5");
        page.undecodable = vec![undecodable("ns-07", None), undecodable("default", None)];
        Ok(page)
    });
    let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
    let page = lw.list(&ListOptions::new("0", None)).await.unwrap();
    assert_eq!(page.undecodable, [undecodable("ns-07", None)]);
    assert_eq!(lw.filtering(), ShardFiltering::Client);

    // By uid: by the uid when the metadata had one, kept when not.
    let shard = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
    let (inside, outside) = ("ns-07", "default"); // hashes as above, as uids
    let fake = FakeListerWatcher::<Obj>::new();
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let lw = ShardedListerWatcher::new(fake.clone(), shard);
    let mut watch = lw
        .watch(&WatchOptions::new("5", Duration::from_secs(60)))
        .await
        .unwrap();
    for uid in [Some(outside), Some(inside), None] {
        tx.send(Err(Error::Undecodable {
            object: undecodable("a", uid),
            deleted: false,
        }));
    }
    drop(tx);
    let mut seen = Vec::new();
    while let Some(item) = watch.next().await {
        match item {
            Err(Error::Undecodable { object, .. }) => seen.push(object.uid),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, [Some(inside.to_owned()), None]);
    assert_eq!(lw.filtering(), ShardFiltering::Client);
}
