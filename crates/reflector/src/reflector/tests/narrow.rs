//! A shard selection that narrows under a running watch (rule 57): the cache drops what is
//! no longer selected without a list, and the watch goes on.

use super::*;
use crate::{ShardChange, ShardKey, ShardSelector};

/// Twelve names, and the selector of shard 0 of 2 by uid (the name, for these).
fn names_and_half() -> (Vec<String>, ShardSelector) {
    let half = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
    let names: Vec<String> = [
        "web", "db", "cache", "queue", "api", "auth", "mail", "log", "metrics", "proxy", "search",
        "store",
    ]
    .map(String::from)
    .to_vec();
    let inside = names.iter().filter(|n| half.matches_value(n)).count();
    assert!(inside > 0 && inside < names.len(), "both halves hold some");
    (names, half)
}

#[tokio::test(start_paused = true)]
async fn a_narrowing_keeps_the_selected_objects_as_unchanged_drops_the_rest_and_lists_nothing() {
    let (names, half) = names_and_half();
    let cached: Vec<Obj> = names.iter().map(|n| obj(n, 3)).collect();
    let s = Setup::new();
    let listed = cached.clone();
    s.fake
        .on_list(move |_| Ok(ListPage::new(listed.clone(), "10")));
    let tx = open_watch(&s.fake);
    let h = spawn(
        s.reflector()
            .watch_list(false)
            .known_objects(Cached::with(cached)),
    );
    until("the list", || !s.sink.calls().is_empty()).await;
    tx.send(added("new", 12));
    tx.send(Ok(WatchEvent::Shard(ShardChange::Narrowed(half.clone()))));
    tx.send(added("later", 13));
    until("the event after the narrowing", || {
        s.sink.has("add later@13")
    })
    .await;

    let kept: Vec<String> = names
        .iter()
        .filter(|n| half.matches_value(n))
        .map(|n| format!("ns/{n}"))
        .collect();
    let calls = s.sink.calls();
    assert_eq!(
        calls[1..],
        [
            "add new@12".to_string(),
            format!("replace [] + unchanged [{}] @12", kept.join(",")),
            "add later@13".to_string(),
        ],
        "the selected part of the cache, as unchanged keys at the last synced version"
    );
    assert_eq!(s.fake.list_calls().len(), 1, "no list");
    assert_eq!(s.fake.watch_calls().len(), 1, "the watch went on");
    let counters = h.status().counters();
    assert_eq!(counters.narrowings, 1);
    assert!(
        counters
            .lists
            .iter()
            .all(|(why, n)| *why == "initial" || *n == 0)
    );
    assert!(s.errors.kinds().is_empty(), "{:?}", s.errors.kinds());
    h.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_the_caches_keys_a_narrowing_relists() {
    let (_, half) = names_and_half();
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(objs("o", 3), "10")));
    let tx = open_watch(&s.fake);
    let _next = open_watch(&s.fake);
    let h = spawn(s.reflector().watch_list(false));
    until("the list", || !s.sink.calls().is_empty()).await;
    tx.send(Ok(WatchEvent::Shard(ShardChange::Narrowed(half))));
    until("the relist", || s.fake.list_calls().len() == 2).await;
    let counters = h.status().counters();
    assert_eq!(counters.narrowings, 0);
    assert!(
        counters.lists.contains(&("shard_selection_changed", 1)),
        "{counters:?}"
    );
    h.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_narrowing_during_a_streaming_list_lists_again() {
    let (_, half) = names_and_half();
    let s = Setup::new();
    s.fake.serve_watch_list(true);
    let tx = open_watch(&s.fake);
    let again = open_watch(&s.fake);
    let h = spawn(s.reflector().known_objects(Cached::with(Vec::new())));
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("a", 5));
    tx.send(Ok(WatchEvent::Shard(ShardChange::Narrowed(half))));
    until("the second streaming list", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    again.send(added("b", 6));
    again.send(Ok(WatchEvent::Bookmark(Bookmark::new("7", true))));
    until("the list", || s.sink.has("replace [b] @7")).await;
    assert!(!s.sink.has("replace [a] @7"), "{:?}", s.sink.calls());
    assert_eq!(h.status().counters().narrowings, 0);
    h.stop().await.unwrap();
}
