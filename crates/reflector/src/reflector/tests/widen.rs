//! A shard selection that gains shards under a running watch (rule 57): only the gained
//! shards are listed, at exactly the version the watch had reached, and the watch goes on
//! from there; what cannot be listed so is relisted.

use super::*;
use crate::{ListOptions, ShardChange, ShardKey, ShardRange, ShardSelector};

/// Twelve names, split by the two halves of the uid space (the name, for these).
fn halves() -> (Vec<String>, Vec<String>, ShardSelector, ShardSelector) {
    let first = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
    let second = ShardSelector::index_of(ShardKey::Uid, 1, 2).unwrap();
    let names = [
        "web", "db", "cache", "queue", "api", "auth", "mail", "log", "metrics", "proxy", "search",
        "store",
    ];
    let (a, b): (Vec<String>, Vec<String>) = names
        .iter()
        .map(|n| (*n).to_owned())
        .partition(|n| first.matches_value(n));
    assert!(!a.is_empty() && !b.is_empty(), "both halves hold some");
    (a, b, first, second)
}

fn everything() -> ShardSelector {
    ShardSelector::range(ShardKey::Uid, ShardRange::new(0, 1 << 64).unwrap())
}

/// A reflector whose cache and first list hold `kept` (rv 3), listed at "10"; the second
/// list answers `gained`. The watch reaches rv 12, then the selection gains `added`.
async fn gain(
    kept: &[String],
    added: &ShardSelector,
    gained: impl FnMut(&ListOptions) -> Result<ListPage<Obj>, Error> + Send + 'static,
) -> (Setup, ReflectorHandle, WatchSender<Obj>) {
    let cached: Vec<Obj> = kept.iter().map(|n| obj(n, 3)).collect();
    let s = Setup::new();
    let first = cached.clone();
    let mut gained = gained;
    s.fake.on_list(move |o| {
        if o.shard.is_none() && !o.exact && o.resource_version != "12" {
            Ok(ListPage::new(first.clone(), "10"))
        } else {
            gained(o)
        }
    });
    let tx = open_watch(&s.fake);
    let next = open_watch(&s.fake);
    let h = spawn(
        s.reflector()
            .watch_list(false)
            .known_objects(Cached::with(cached)),
    );
    until("the list", || !s.sink.calls().is_empty()).await;
    tx.send(bookmark(12));
    tx.send(Ok(WatchEvent::Shard(ShardChange::Widened {
        selector: everything(),
        added: added.clone(),
    })));
    (s, h, next)
}

#[tokio::test(start_paused = true)]
async fn a_gain_lists_only_the_gained_shards_at_the_version_watched_and_watches_on_from_it() {
    let (a, b, _, second) = halves();
    let listed: Vec<Obj> = b.iter().map(|n| obj(n, 7)).collect();
    let (s, h, next) = gain(&a, &second, move |_| {
        Ok(ListPage::new(listed.clone(), "12"))
    })
    .await;
    until("the watch after the gain", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    next.send(added("late", 13));
    until("the event after the gain", || s.sink.has("add late@13")).await;

    let lists = s.fake.list_calls();
    assert_eq!(lists.len(), 2);
    assert_eq!(
        (
            lists[1].resource_version.as_str(),
            lists[1].exact,
            lists[1].shard.as_ref(),
            lists[1].limit
        ),
        ("12", true, Some(&second), Some(500)),
        "only the gained shards, at exactly the version the watch had reached, in pages"
    );
    assert_eq!(
        s.fake.watch_calls()[1].resource_version,
        "12",
        "no event missed or repeated"
    );
    let calls = s.sink.calls();
    assert_eq!(
        calls[1..],
        [
            "bookmark 12".to_string(),
            "begin".to_string(),
            format!("part {} items", a.len()),
            format!("replace [{}] @12", b.join(",")),
            "add late@13".to_string(),
        ],
        "the kept objects as unchanged, then the gained ones, one list at the version watched"
    );
    let counters = h.status().counters();
    assert_eq!(counters.widenings, 1);
    assert!(
        counters
            .lists
            .iter()
            .all(|(why, n)| *why == "initial" || *n == 0),
        "{counters:?}"
    );
    assert!(s.errors.kinds().is_empty(), "{:?}", s.errors.kinds());
    h.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_gain_that_cannot_be_listed_at_the_version_watched_relists() {
    let (a, _, _, second) = halves();
    let answers = [
        // Compacted away.
        vec![Err(status(410, "Expired"))],
        // A lister-watcher that ignored `exact` and listed newer.
        vec![Ok(ListPage::new(Vec::new(), "15"))],
        // A continue token that expired: the list cannot start over without what it kept.
        vec![
            Ok(ListPage::new(vec![obj("x", 7)], "12").with_continue("more")),
            Err(status(410, "Expired")),
        ],
    ];
    for answers in answers {
        let exact_lists = answers.len();
        let answers = Mutex::new(answers.into_iter());
        let (s, h, _next) = gain(&a, &second, move |o| {
            if o.exact {
                answers.lock().unwrap().next().unwrap()
            } else {
                Ok(ListPage::new(Vec::new(), "20"))
            }
        })
        .await;
        until("the relist", || {
            s.fake.list_calls().len() == 2 + exact_lists
        })
        .await;
        let relist = s.fake.list_calls().last().unwrap().clone();
        assert!(relist.shard.is_none() && !relist.exact, "{relist:?}");
        let counters = h.status().counters();
        assert_eq!(counters.widenings, 0);
        assert!(
            counters.lists.contains(&("shard_selection_changed", 1)),
            "{counters:?}"
        );
        h.stop().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn without_the_caches_keys_a_gain_relists() {
    let (_, _, _, second) = halves();
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(objs("o", 3), "10")));
    let tx = open_watch(&s.fake);
    let _next = open_watch(&s.fake);
    let h = spawn(s.reflector().watch_list(false));
    until("the list", || !s.sink.calls().is_empty()).await;
    tx.send(Ok(WatchEvent::Shard(ShardChange::Widened {
        selector: everything(),
        added: second,
    })));
    until("the relist", || s.fake.list_calls().len() == 2).await;
    assert!(s.fake.list_calls()[1].shard.is_none());
    assert!(
        h.status()
            .counters()
            .lists
            .contains(&("shard_selection_changed", 1))
    );
    h.stop().await.unwrap();
}
