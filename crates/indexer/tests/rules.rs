//! Rules 18 and 19 (ARCHITECTURE.md) and client-go's store behaviour, each test run against the
//! default `ThreadSafeStore` and against `NaiveIndexer` (a second implementation plugged
//! in through the `Indexer` trait).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{
    TestObj, by_node, implementations, keys, names, obj, relist, test_indexers, w,
};
use kinformer_core::{ListPart, MetaObject};
use kinformer_indexer::{
    Error, IndexFunc, Indexer, IndexerWriter, Indexers, Lister, ThreadSafeStore, everything,
};

/// Runs `check` once per implementation, with the test indexers registered.
fn each(check: impl Fn(&Arc<dyn IndexerWriter<TestObj>>)) {
    for (name, make) in implementations() {
        eprintln!("-- {name}");
        check(&make(test_indexers()));
    }
}

#[test]
fn rule18_indices_follow_add_update_delete() {
    each(|s| {
        s.add(obj("ns", "a").on("n1").arc()).unwrap();
        s.add(obj("ns", "b").on("n1").arc()).unwrap();
        s.add(obj("other", "c").on("n2").arc()).unwrap();
        assert_eq!(names(&s.by_index("byNode", "n1").unwrap()), ["a", "b"]);
        assert_eq!(names(&s.by_index("namespace", "ns").unwrap()), ["a", "b"]);

        s.update(obj("ns", "b").on("n2").arc()).unwrap();
        assert_eq!(names(&s.by_index("byNode", "n1").unwrap()), ["a"]);
        assert_eq!(names(&s.by_index("byNode", "n2").unwrap()), ["b", "c"]);
        assert_eq!(
            keys(&s.index_keys("byNode", "n2").unwrap()),
            ["ns/b", "other/c"]
        );

        s.delete(obj("ns", "a").arc()).unwrap();
        assert!(s.by_index("byNode", "n1").unwrap().is_empty());
        assert_eq!(names(&s.by_index("namespace", "ns").unwrap()), ["b"]);
        // Deleting what is not there changes nothing.
        s.delete(obj("ns", "a").arc()).unwrap();
        assert_eq!(s.list().len(), 2);
    });
}

#[test]
fn rule18_empty_value_sets_are_removed() {
    each(|s| {
        s.add(obj("ns", "retain").on("shared").arc()).unwrap();
        s.add(obj("ns", "delete").on("shared").arc()).unwrap();
        s.add(obj("ns", "alone").on("mine").arc()).unwrap();
        assert_eq!(s.list_index_func_values("byNode"), ["mine", "shared"]);

        s.delete(obj("ns", "delete").arc()).unwrap();
        assert_eq!(s.list_index_func_values("byNode"), ["mine", "shared"]);
        s.delete(obj("ns", "alone").arc()).unwrap();
        assert_eq!(s.list_index_func_values("byNode"), ["shared"]);
        // An update that moves the last object away empties (and drops) its old value too.
        s.update(obj("ns", "retain").on("elsewhere").arc()).unwrap();
        assert_eq!(s.list_index_func_values("byNode"), ["elsewhere"]);
        assert!(s.index_keys("byNode", "shared").unwrap().is_empty());
    });
}

#[test]
fn rule18_index_function_may_return_many_values() {
    // client-go's TestThreadSafeStoreIndexingFunctionsWithMultipleValues.
    each(|s| {
        let users = |v: &str| -> Vec<String> {
            keys(&s.index_keys("byUser", v).unwrap())
                .into_iter()
                .map(String::from)
                .collect()
        };
        s.add(obj("", "key1").users(&["foo"]).arc()).unwrap();
        s.add(obj("", "key2").users(&["bar"]).arc()).unwrap();
        assert_eq!(users("foo"), ["key1"]);
        assert_eq!(users("bar"), ["key2"]);

        s.update(obj("", "key2").users(&["foo", "bar"]).arc())
            .unwrap();
        assert_eq!(users("foo"), ["key1", "key2"]);
        assert_eq!(users("bar"), ["key2"]);

        s.update(obj("", "key1").users(&["foo", "bar"]).arc())
            .unwrap();
        s.add(obj("", "key3").users(&["foo", "bar", "baz"]).arc())
            .unwrap();
        assert_eq!(users("foo"), ["key1", "key2", "key3"]);
        assert_eq!(users("bar"), ["key1", "key2", "key3"]);
        assert_eq!(users("baz"), ["key3"]);

        s.update(obj("", "key1").users(&["foo"]).arc()).unwrap();
        s.update(obj("", "key2").users(&["bar"]).arc()).unwrap();
        assert_eq!(users("foo"), ["key1", "key3"]);
        assert_eq!(users("bar"), ["key2", "key3"]);

        s.delete(obj("", "key1").arc()).unwrap();
        s.delete(obj("", "key3").arc()).unwrap();
        assert!(users("foo").is_empty());
        assert_eq!(users("bar"), ["key2"]);
        assert!(users("baz").is_empty());
        assert_eq!(s.list_index_func_values("byUser"), ["bar"]);

        // A value listed twice files the object once; no values leave it out of the index.
        s.add(obj("", "dup").users(&["x", "x"]).arc()).unwrap();
        assert_eq!(s.by_index("byUser", "x").unwrap().len(), 1);
        s.add(obj("", "none").arc()).unwrap();
        assert_eq!(s.list_index_func_values("byUser"), ["bar", "x"]);
    });
}

#[test]
fn rule18_index_returns_objects_sharing_any_value() {
    // client-go's TestMultiIndexKeys, through Indexer::index.
    each(|s| {
        s.add(obj("", "one").users(&["ernie", "bert"]).arc())
            .unwrap();
        s.add(obj("", "two").users(&["bert", "oscar"]).arc())
            .unwrap();
        s.add(obj("", "tre").users(&["ernie", "elmo"]).arc())
            .unwrap();
        let query = |u: &[&str]| names(&s.index("byUser", &obj("", "q").users(u)).unwrap());
        assert_eq!(query(&["ernie"]), ["one", "tre"]);
        assert_eq!(query(&["bert", "elmo"]), ["one", "tre", "two"]);
        assert!(query(&["elmo1"]).is_empty());
        assert!(query(&[]).is_empty());
    });
}

#[test]
fn rule18_unknown_index_name_is_an_error() {
    each(|s| {
        s.add(obj("ns", "a").arc()).unwrap();
        assert!(matches!(s.by_index("nope", "x"), Err(Error::UnknownIndex(n)) if n == "nope"));
        assert!(matches!(
            s.index_keys("nope", "x"),
            Err(Error::UnknownIndex(_))
        ));
        assert!(matches!(
            s.index("nope", &obj("ns", "a")),
            Err(Error::UnknownIndex(_))
        ));
        // As in client-go, listing the values of an unknown index is just empty.
        assert!(s.list_index_func_values("nope").is_empty());
        // A known index without the value is not an error.
        assert!(s.by_index("byNode", "no-such-node").unwrap().is_empty());
    });
}

#[test]
fn rule18_add_indexers_backfills_existing_items() {
    for (name, make) in implementations() {
        eprintln!("-- {name}");
        let s = make(Indexers::new());
        s.add(obj("ns", "a").on("n1").arc()).unwrap();
        s.add(obj("ns", "b").on("n2").arc()).unwrap();
        let mut more = Indexers::new();
        more.insert("byNode".to_owned(), by_node());
        s.add_indexers(more).unwrap();
        assert_eq!(names(&s.by_index("byNode", "n1").unwrap()), ["a"]);
        assert_eq!(s.list_index_func_values("byNode"), ["n1", "n2"]);
        assert_eq!(s.get_indexers().keys().collect::<Vec<_>>(), ["byNode"]);
        // ...and keeps the new index up to date afterwards.
        s.update(obj("ns", "a").on("n2").arc()).unwrap();
        assert_eq!(names(&s.by_index("byNode", "n2").unwrap()), ["a", "b"]);
    }
}

#[test]
fn rule18_add_indexers_rejects_a_duplicate_name_and_adds_nothing() {
    each(|s| {
        s.add(obj("ns", "a").on("n1").arc()).unwrap();
        let mut more = Indexers::new();
        more.insert("byNode".to_owned(), by_node());
        more.insert("fresh".to_owned(), by_node());
        match s.add_indexers(more) {
            Err(Error::IndexerConflict(names)) => assert_eq!(names, ["byNode"]),
            other => panic!("{other:?}"),
        }
        assert!(!s.get_indexers().contains_key("fresh"));
        assert!(matches!(
            s.by_index("fresh", "n1"),
            Err(Error::UnknownIndex(_))
        ));
    });
}

fn failing_on_bad() -> IndexFunc<TestObj> {
    IndexFunc::fallible(|o: &TestObj| {
        if o.node == "bad" {
            Err(format!("cannot index {:?}", o.name))
        } else {
            Ok(vec![o.node.clone()])
        }
    })
}

#[test]
fn index_function_error_is_returned_and_changes_nothing() {
    for (name, make) in implementations() {
        eprintln!("-- {name}");
        let mut ix = test_indexers();
        ix.insert("strict".into(), failing_on_bad());
        let s = make(ix);
        s.add(obj("ns", "a").on("n1").rv("1").arc()).unwrap();

        let mut results = vec![
            w(s.add(obj("ns", "b").on("bad").rv("2").arc())),
            w(s.update(obj("ns", "a").on("bad").rv("2").arc())),
            w(s.replace(ListPart::whole(
                vec![
                    obj("ns", "c").on("n1").arc(),
                    obj("ns", "d").on("bad").arc(),
                ],
                "9",
            ))),
        ];
        results.push(w(s.replace(relist(
            &s,
            vec![obj("ns", "d").on("bad").arc()],
            &["ns/a"],
            "9",
        ))));
        for result in results {
            match result {
                Err(Error::IndexFunc { index, key, source }) => {
                    assert_eq!(index, "strict");
                    assert!(key.is_some());
                    assert!(source.to_string().starts_with("cannot index"));
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(names(&s.list()), ["a"]);
        assert_eq!(s.get_by_key("ns/a").unwrap().node, "n1");
        assert_eq!(names(&s.by_index("byNode", "n1").unwrap()), ["a"]);
        assert!(s.by_index("strict", "bad").unwrap().is_empty());
        assert_eq!(s.last_sync_resource_version(), "1");

        // Back-filling a failing function fails as a whole.
        let s2 = make(Indexers::new());
        s2.add(obj("ns", "x").on("bad").arc()).unwrap();
        let mut more = Indexers::new();
        more.insert("strict".into(), failing_on_bad());
        assert!(matches!(
            s2.add_indexers(more),
            Err(Error::IndexFunc { .. })
        ));
        assert!(s2.get_indexers().is_empty());
    }
}

#[test]
fn store_add_get_update_delete_list_replace() {
    // client-go's doTestStore.
    each(|s| {
        s.add(obj("", "foo").label("val", "bar").arc()).unwrap();
        assert_eq!(s.get_by_key("foo").unwrap().labels["val"], "bar");
        s.update(obj("", "foo").label("val", "baz").arc()).unwrap();
        assert_eq!(s.get_by_key("foo").unwrap().labels["val"], "baz");
        s.delete(obj("", "foo").arc()).unwrap();
        assert!(s.get_by_key("foo").is_none());

        for n in ["a", "c", "e"] {
            s.add(obj("", n).arc()).unwrap();
        }
        assert_eq!(names(&s.list()), ["a", "c", "e"]);
        let mut k = s.list_keys();
        k.sort();
        assert_eq!(keys(&k), ["a", "c", "e"]);

        s.replace(ListPart::whole(
            vec![obj("", "foo").arc(), obj("", "bar").arc()],
            "0",
        ))
        .unwrap();
        assert_eq!(names(&s.list()), ["bar", "foo"]);
        assert!(s.resync().is_ok());
    });
}

#[test]
fn replace_rebuilds_indices_and_a_later_duplicate_wins() {
    each(|s| {
        s.add(obj("ns", "old").on("n0").arc()).unwrap();
        s.replace(ListPart::whole(
            vec![
                obj("ns", "a").on("n1").arc(),
                obj("ns", "b").on("n1").arc(),
                obj("ns", "a").on("n2").arc(),
            ],
            "7",
        ))
        .unwrap();
        assert_eq!(names(&s.list()), ["a", "b"]);
        assert_eq!(s.list_index_func_values("byNode"), ["n1", "n2"]);
        assert_eq!(names(&s.by_index("byNode", "n2").unwrap()), ["a"]);
        assert_eq!(s.last_sync_resource_version(), "7");
        s.replace(ListPart::whole(Vec::new(), "8")).unwrap();
        assert!(s.list().is_empty());
        assert!(s.list_index_func_values("namespace").is_empty());
    });
}

/// Rule 53: a list whose unchanged objects come as keys replaces with the listed objects
/// and keeps what the store holds under those keys, indices included; a kept key it does
/// not hold is left out.
#[test]
fn rule53_replace_keeping_keeps_what_is_held_under_the_kept_keys() {
    each(|s| {
        for name in ["kept", "changed", "gone"] {
            let node = if name == "gone" { "n2" } else { "n1" };
            s.add(obj("ns", name).on(node).rv("1").arc()).unwrap();
        }
        let kept = s.get_by_key("ns/kept").unwrap();
        w(s.replace(relist(
            s,
            vec![
                obj("ns", "changed").on("n3").rv("2").arc(),
                obj("ns", "new").on("n3").rv("2").arc(),
            ],
            &["ns/kept", "ns/absent"],
            "9",
        )))
        .unwrap();
        assert_eq!(names(&s.list()), ["changed", "kept", "new"]);
        assert_eq!(
            names(&s.by_index("byNode", "n3").unwrap()),
            ["changed", "new"]
        );
        assert_eq!(names(&s.by_index("byNode", "n1").unwrap()), ["kept"]);
        assert!(s.by_index("byNode", "n2").unwrap().is_empty());
        assert_eq!(s.list_index_func_values("byNode"), ["n1", "n3"]);
        assert_eq!(*s.get_by_key("ns/kept").unwrap(), *kept);
        assert_eq!(s.last_sync_resource_version(), "9");
    });
}

#[test]
fn resource_version_follows_writes_deletes_replace_and_bookmarks() {
    // client-go's TestThreadSafeStoreRV (with the AtomicFIFO gate on).
    each(|s| {
        assert_eq!(s.last_sync_resource_version(), "");
        s.add(obj("", "key1").rv("10").arc()).unwrap();
        assert_eq!(s.last_sync_resource_version(), "10");
        s.add(obj("", "key4").rv("20").arc()).unwrap();
        assert_eq!(s.last_sync_resource_version(), "20");
        s.delete(obj("", "key4").rv("30").arc()).unwrap();
        assert_eq!(s.last_sync_resource_version(), "30");
        // An older version is still taken: the store trusts the order it is fed in.
        s.update(obj("", "key1").rv("25").arc()).unwrap();
        assert_eq!(s.last_sync_resource_version(), "25");
        s.bookmark("40").unwrap();
        assert_eq!(s.last_sync_resource_version(), "40");
        s.replace(ListPart::whole(vec![obj("", "key2").rv("30").arc()], "50"))
            .unwrap();
        assert_eq!(s.last_sync_resource_version(), "50");
    });
}

#[test]
fn rule19_keys_are_namespace_slash_name_or_name() {
    each(|s| {
        s.add(obj("prod", "web").arc()).unwrap();
        s.add(obj("", "node-1").arc()).unwrap();
        let mut k = s.list_keys();
        k.sort();
        assert_eq!(keys(&k), ["node-1", "prod/web"]);
        assert!(s.get_by_key("prod/web").is_some());
        assert!(s.get_by_key("web").is_none());
        assert!(s.get_by_key("a/b/c").is_none());
        // Cluster-scoped objects sit under "" in the namespace index, as in client-go.
        assert_eq!(names(&s.by_index("namespace", "").unwrap()), ["node-1"]);
    });
}

#[test]
fn an_object_without_a_valid_key_is_a_typed_error() {
    each(|s| {
        let nameless = TestObj {
            namespace: Some("ns".into()),
            ..TestObj::default()
        };
        assert!(matches!(
            w(s.add(Arc::new(nameless.clone()))),
            Err(Error::Key(kinformer_core::Error::MissingName))
        ));
        assert!(matches!(
            w(s.delete(Arc::new(nameless.clone()))),
            Err(Error::Key(_))
        ));
        assert!(matches!(
            w(s.add(obj("ns", "a/b").arc())),
            Err(Error::Key(kinformer_core::Error::SlashInName { .. }))
        ));
        assert!(matches!(
            w(s.replace(ListPart::whole(
                vec![obj("ns", "ok").arc(), Arc::new(nameless)],
                "1"
            ))),
            Err(Error::Key(_))
        ));
        assert!(s.list().is_empty());
    });
}

/// Every store but the adapter over `Cached` objects, which decodes what it hands out (the
/// store behind it shares its `Cached` allocations as every `ThreadSafeStore` does).
#[test]
fn reads_share_the_stored_allocation() {
    for (name, make) in implementations() {
        if name.contains("Cached") {
            continue;
        }
        eprintln!("-- {name}");
        let s = make(test_indexers());
        let a = obj("ns", "a").on("n1").arc();
        s.add(Arc::clone(&a)).unwrap();
        assert!(Arc::ptr_eq(&s.get_by_key("ns/a").unwrap(), &a));
        assert!(Arc::ptr_eq(&s.list()[0], &a));
        assert!(Arc::ptr_eq(&s.by_index("byNode", "n1").unwrap()[0], &a));
        let lister = Lister::from_dyn(Arc::new(ShareCheck(s.list())));
        assert!(Arc::ptr_eq(&lister.list(&everything())[0], &a));
    }
}

/// The smallest possible `Indexer`: a fixed list, no indices.
struct ShareCheck(Vec<Arc<TestObj>>);

impl kinformer_core::KnownObjects<TestObj> for ShareCheck {
    fn list_keys(&self) -> Vec<kinformer_core::ObjectKey> {
        Vec::new()
    }
    fn get_by_key(&self, _: &str) -> Option<Arc<TestObj>> {
        None
    }

    fn get_shared(&self, key: &str) -> Option<Arc<TestObj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl Indexer<TestObj> for ShareCheck {
    fn list(&self) -> Vec<Arc<TestObj>> {
        self.0.clone()
    }
    fn last_sync_resource_version(&self) -> String {
        String::new()
    }
    fn index(&self, n: &str, _: &TestObj) -> Result<Vec<Arc<TestObj>>, Error> {
        Err(Error::UnknownIndex(n.into()))
    }
    fn index_keys(&self, n: &str, _: &str) -> Result<Vec<kinformer_core::ObjectKey>, Error> {
        Err(Error::UnknownIndex(n.into()))
    }
    fn list_index_func_values(&self, _: &str) -> Vec<String> {
        Vec::new()
    }
    fn by_index(&self, n: &str, _: &str) -> Result<Vec<Arc<TestObj>>, Error> {
        Err(Error::UnknownIndex(n.into()))
    }
    fn get_indexers(&self) -> Indexers<TestObj> {
        Indexers::new()
    }
}

#[test]
fn custom_key_func_is_used_for_every_operation() {
    let by_node_key: kinformer_indexer::KeyFunc<TestObj> =
        Arc::new(|o: &TestObj| kinformer_core::ObjectKey::new(None, &o.node));
    let s = ThreadSafeStore::with_key_func(by_node_key, Indexers::new());
    use kinformer_core::KnownObjects;
    s.add(obj("ns", "a").on("n1").arc()).unwrap();
    s.add(obj("ns", "b").on("n1").arc()).unwrap(); // same key: replaces "a"
    assert_eq!(s.len(), 1);
    assert_eq!(s.get_by_key("n1").unwrap().object_name(), Some("b"));
    s.delete(obj("other", "whatever").on("n1").arc()).unwrap();
    assert!(s.is_empty());
    assert!(matches!(s.add(obj("ns", "c").arc()), Err(Error::Key(_)))); // empty node: no key
    assert!(matches!(s.get(&obj("ns", "c")), Err(Error::Key(_))));
    assert_eq!(s.get(&obj("elsewhere", "x").on("n1")).unwrap(), None);
}

#[test]
fn get_indexers_returns_what_was_registered() {
    each(|s| {
        let got: BTreeMap<String, bool> = s
            .get_indexers()
            .into_iter()
            .map(|(n, f)| (n, f.is_namespace()))
            .collect();
        assert_eq!(
            got,
            BTreeMap::from([
                ("byNode".into(), false),
                ("byUser".into(), false),
                ("namespace".into(), true)
            ])
        );
    });
}

#[test]
fn the_store_is_the_fifos_view_of_known_objects() {
    use kinformer_core::KnownObjects;
    let store = ThreadSafeStore::new(test_indexers());
    let a = obj("ns", "a").on("node-1").arc();
    store.add(Arc::clone(&a)).unwrap();
    let known: &dyn KnownObjects<TestObj> = &store;
    assert_eq!(keys(&known.list_keys()), ["ns/a"]);
    assert!(Arc::ptr_eq(&known.get_by_key("ns/a").unwrap(), &a));
    assert!(known.get_by_key("ns/b").is_none());
}
