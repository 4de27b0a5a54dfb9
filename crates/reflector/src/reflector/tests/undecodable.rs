//! Objects that do not decode, and unchanged objects on a relist (rule 53).

use super::*;

// ---------------------------------------------------------------- undecodable objects

/// A cache that hands out the allocations it holds, as the thread-safe store does.
struct Held(Vec<Arc<Obj>>);

impl KnownObjects<Obj> for Held {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .iter()
            .map(|o| ObjectKey::new(Some("ns"), &o.name).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0
            .iter()
            .find(|o| format!("ns/{}", o.name) == key)
            .cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

/// A cache that builds what it hands out (objects kept encoded, decoded on read): every
/// read is a new copy, and it cannot hand out what it holds without making one.
struct Encoded(Held);

impl KnownObjects<Obj> for Encoded {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0.get_by_key(key).map(|o| Arc::new((*o).clone()))
    }
    fn get_shared(&self, _: &str) -> Option<Arc<Obj>> {
        None
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        self.0.contains_version(key, resource_version)
    }
}

/// Rule 53: a relist compares every listed object with the cache, once, and hands on
/// those at the cached version as keys with the cache (the decoded copy dropped), in both
/// list modes, over a cache that shares what it holds (then the sink that needs the
/// object gets the cached `Arc`) and one that keeps objects encoded.
#[tokio::test(start_paused = true)]
async fn rule53_a_relist_hands_on_unchanged_objects_as_keys_with_the_cache() {
    for (watch_list, encoded) in [(false, false), (true, false), (false, true), (true, true)] {
        let s = Setup::new();
        let held = vec![Arc::new(obj("a", 3)), Arc::new(obj("b", 3))];
        let tx = open_watch(&s.fake);
        if watch_list {
            s.fake.serve_watch_list(true);
        } else {
            // a unchanged, b changed, c new.
            s.fake
                .on_list(|_| Ok(ListPage::new([obj("a", 3), obj("b", 7), obj("c", 8)], "10")));
        }
        let cache: Arc<dyn KnownObjects<Obj>> = if encoded {
            Arc::new(Encoded(Held(held.clone())))
        } else {
            Arc::new(Held(held.clone()))
        };
        let h = spawn(s.reflector().watch_list(watch_list).known_objects(cache));
        if watch_list {
            until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
            for ev in [added("a", 3), added("b", 7), added("c", 8)] {
                tx.send(ev);
            }
            tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("10", true))));
        }
        until("the replace", || !s.sink.calls().is_empty()).await;
        let case = format!("watch list: {watch_list}, encoded: {encoded}");
        assert_eq!(
            s.sink.calls(),
            ["replace [b,c] + unchanged [ns/a] @10"],
            "{case}"
        );
        let listed = s.sink.listed.lock().unwrap().clone();
        let a = listed
            .into_iter()
            .find(|l| matches!(l, Listed::Unchanged(_)))
            .and_then(Listed::into_object)
            .expect("a, read from the cache");
        assert_eq!(a.rv, "3", "{case}");
        assert_eq!(Arc::ptr_eq(&a, &held[0]), !encoded, "{case}");
        drop(h);
    }
}

fn undecodable(name: &str) -> crate::Undecodable {
    crate::Undecodable::new(ObjectKey::new(Some("ns"), name).unwrap(), "invalid type")
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_list_item_is_reported_and_kept_at_its_cached_version() {
    for known in [true, false] {
        let s = Setup::new();
        s.fake
            .on_list(|_| Ok(ListPage::new([obj("a", 5)], "10").with_undecodable(undecodable("b"))));
        let _tx = open_watch(&s.fake);
        let mut r = s.reflector().watch_list(false);
        if known {
            r = r.known_objects(Cached::with(vec![obj("b", 3)]));
        }
        let h = spawn(r);
        until("the replace", || !s.sink.calls().is_empty()).await;
        let want = if known {
            "replace [a,b] @10"
        } else {
            "replace [a] @10"
        };
        assert_eq!(s.sink.calls(), [want], "known view: {known}");
        assert_eq!(
            s.errors.kinds(),
            ["cannot decode object ns/b: invalid type"]
        );
        assert_eq!(h.status().counters().undecodable, 1);
        // Reported, not relisted: the watch goes on.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(s.fake.list_calls().len(), 1);
        drop(h);
    }
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_watch_event_is_skipped_and_its_deletion_deletes_the_cached_version() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new([obj("b", 3)], "10")));
    let tx = open_watch(&s.fake);
    let h = spawn(
        s.reflector()
            .watch_list(false)
            .known_objects(Cached::with(vec![obj("b", 3)])),
    );
    until("the list", || !s.sink.calls().is_empty()).await;
    tx.send(Err(Error::Undecodable {
        object: undecodable("b"),
        deleted: false,
    }));
    tx.send(added("c", 12));
    tx.send(Err(Error::Undecodable {
        object: undecodable("b"),
        deleted: true,
    }));
    until("the delete", || s.sink.calls().len() == 3).await;
    assert_eq!(
        s.sink.calls(),
        [
            "replace [] + unchanged [ns/b] @10",
            "add c@12",
            "delete b@3"
        ],
        "the modification is skipped, the deletion deletes the cached version"
    );
    assert_eq!(s.fake.list_calls().len(), 1, "no relist");
    assert_eq!(s.fake.watch_calls().len(), 1, "the same watch");
    assert_eq!(h.status().counters().undecodable, 2);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_object_of_a_streaming_list_is_kept_at_its_cached_version() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(
        s.reflector()
            .known_objects(Cached::with(vec![obj("b", 3), obj("c", 3)])),
    );
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("a", 5));
    for (name, deleted) in [("b", false), ("c", false), ("c", true)] {
        tx.send(Err(Error::Undecodable {
            object: undecodable(name),
            deleted,
        }));
    }
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("8", true))));
    until("the replace", || !s.sink.calls().is_empty()).await;
    // b kept at its cached version; c deleted during the list, so left out.
    assert_eq!(s.sink.calls(), ["replace [a,b] @8"]);
    assert_eq!(h.status().counters().undecodable, 3);
    drop(h);
}
