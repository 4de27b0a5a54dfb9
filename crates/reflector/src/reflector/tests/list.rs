//! Rule 21: the first list (paged, at resourceVersion 0) and the watch after it.

use super::*;

// ---------------------------------------------------------------- rule 21

#[tokio::test(start_paused = true)]
async fn first_list_is_at_rv_0_in_pages_of_500_with_continue_tokens_then_watches_from_its_rv() {
    let s = Setup::new();
    s.fake.on_list(|o| {
        Ok(match o.continue_token.as_deref() {
            None => ListPage::new(objs("a", 500), "100").with_continue("c1"),
            Some("c1") => ListPage::new(objs("b", 500), "999").with_continue("c2"),
            Some(_) => ListPage::new(objs("c", 200), "999"),
        })
    });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;

    let lists = s.fake.list_calls();
    let got: Vec<_> = lists
        .iter()
        .map(|o| {
            (
                o.resource_version.as_str(),
                o.limit,
                o.continue_token.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("0", Some(500), None),
            // The RV is cleared on continue pages: the server refuses both at once.
            ("", Some(500), Some("c1")),
            ("", Some(500), Some("c2")),
        ]
    );
    // Each page as it comes, the list's end at the first page's RV.
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 500 items",
            "part 500 items",
            "replace 200 items @100"
        ]
    );
    let w = &s.fake.watch_calls()[0];
    assert_eq!(w.resource_version, "100");
    assert!(w.allow_bookmarks && !w.send_initial_events);
    assert!(
        w.timeout >= Duration::from_secs(300) && w.timeout <= Duration::from_secs(600),
        "{:?}",
        w.timeout
    );
    assert_eq!(h.status().last_sync_resource_version(), "100");
    assert!(h.status().has_synced());
    assert_eq!(h.status().syncs(), 1);
}

/// Rule 52: the sink gets every page but the last as soon as it is decoded, and the last
/// page ends the list.
#[tokio::test(start_paused = true)]
async fn rule52_a_paged_list_reaches_the_sink_page_by_page() {
    let s = Setup::new();
    s.fake.on_list(|o| {
        Ok(match o.continue_token.as_deref() {
            None => ListPage::new(objs("a", 500), "100").with_continue("c1"),
            Some("c1") => ListPage::new(objs("b", 500), "999").with_continue("c2"),
            Some(_) => ListPage::new(objs("c", 200), "999"),
        })
    });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 500 items",
            "part 500 items",
            "replace 200 items @100"
        ]
    );
    assert_eq!(s.fake.watch_calls()[0].resource_version, "100");
    assert!(h.status().has_synced());
}

/// Rule 52: the full list after an expired continue token starts the list over, so a sink
/// that had parts takes it whole.
#[tokio::test(start_paused = true)]
async fn rule52_an_expired_continue_token_starts_a_list_in_parts_over() {
    let s = Setup::new();
    s.fake
        .on_list(|o| match (o.continue_token.as_deref(), o.limit) {
            (None, Some(500)) => Ok(ListPage::new(objs("a", 2), "10").with_continue("c1")),
            (Some("c1"), _) => Err(status(410, "Expired")),
            (None, None) => Ok(ListPage::new(objs("full", 3), "12")),
            other => panic!("unexpected list {other:?}"),
        });
    let _tx = open_watch(&s.fake);
    let _h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 2 items",
            "begin",
            "replace [full0,full1,full2] @12"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_falls_back_to_one_full_list_at_the_same_rv() {
    let s = Setup::new();
    s.fake
        .on_list(|o| match (o.continue_token.as_deref(), o.limit) {
            (None, Some(500)) => Ok(ListPage::new(objs("a", 2), "10").with_continue("c1")),
            (Some("c1"), _) => Err(status(410, "Expired")),
            (None, None) => Ok(ListPage::new(objs("full", 3), "12")),
            other => panic!("unexpected list {other:?}"),
        });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;

    let got: Vec<_> = s
        .fake
        .list_calls()
        .iter()
        .map(|o| {
            (
                o.resource_version.clone(),
                o.limit,
                o.continue_token.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("0".into(), Some(500), None),
            (String::new(), Some(500), Some("c1".into())),
            ("0".into(), None, None),
        ]
    );
    // The full list starts the list over: the sink drops the first page.
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 2 items",
            "begin",
            "replace [full0,full1,full2] @12"
        ]
    );
    assert_eq!(s.fake.watch_calls()[0].resource_version, "12");
    // The fallback is the pager's business: no error for the handler.
    assert!(s.errors.kinds().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_relist_at_a_known_rv_is_unpaged_unless_the_first_list_came_back_paged() {
    for paged in [false, true] {
        let s = Setup::new();
        let calls = AtomicUsize::new(0);
        s.fake.on_list(move |o| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            Ok(match (n, paged) {
                (0, true) => ListPage::new(objs("a", 1), "10").with_continue("c"),
                (0, false) => ListPage::new(objs("a", 1), "10"),
                _ if o.continue_token.is_some() => ListPage::new(Vec::new(), "10"),
                _ => ListPage::new(objs("a", 1), "20"),
            })
        });
        // The first watch fails with 410: a relist at the last RV follows.
        s.fake.push_watch(Ok(watch_of(vec![
            added("b", 11),
            Err(status(410, "Expired")),
        ])));
        let _tx = open_watch(&s.fake);
        let h = spawn(s.reflector());
        until("the second watch", || s.fake.watch_calls().len() == 2).await;

        let relist = s
            .fake
            .list_calls()
            .into_iter()
            .rfind(|o| o.continue_token.is_none())
            .unwrap();
        // A watch 410 relists at the last RV seen (not ""): "not older than" is safe.
        assert_eq!(relist.resource_version, "11", "paged={paged}");
        let want = if paged { Some(500) } else { None };
        assert_eq!(relist.limit, want, "paged={paged}");
        assert_eq!(h.status().syncs(), 2);
        assert_eq!(s.errors.kinds(), ["api 410"]);
    }
}

#[tokio::test(start_paused = true)]
async fn page_size_zero_lists_unpaged_and_a_custom_size_is_used_as_is() {
    for (size, want) in [(0, None), (50, Some(50))] {
        let s = Setup::new();
        let _tx = open_watch(&s.fake);
        let h = spawn(s.reflector().page_size(size));
        until("the watch", || !s.fake.watch_calls().is_empty()).await;
        assert_eq!(s.fake.list_calls()[0].limit, want);
        drop(h);
    }
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_random_between_5_and_10_minutes() {
    let s = Setup::new();
    let n = AtomicUsize::new(0);
    // Each watch sends one bookmark and closes: the reflector re-watches at once.
    s.fake.on_watch(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) < 30 {
            Ok(watch_of(vec![bookmark(5)]))
        } else {
            Ok(Box::pin(futures::stream::pending()))
        }
    });
    let h = spawn(s.reflector());
    until("31 watches", || s.fake.watch_calls().len() > 30).await;
    let timeouts: Vec<_> = s.fake.watch_calls().iter().map(|w| w.timeout).collect();
    assert!(
        timeouts
            .iter()
            .all(|t| *t >= Duration::from_secs(300) && *t <= Duration::from_secs(600)),
        "{timeouts:?}"
    );
    assert!(timeouts.iter().any(|t| *t != timeouts[0]), "not randomized");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_watch_the_server_never_ends_is_ended_after_its_timeout() {
    let s = Setup::new();
    let _tx1 = open_watch(&s.fake);
    let _tx2 = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the first watch", || s.fake.watch_calls().len() == 1).await;
    let timeout = s.fake.watch_calls()[0].timeout;
    until("the second watch", || s.fake.watch_calls().len() == 2).await;
    let t = s.fake.watch_times();
    let open = t[1] - t[0];
    assert!(
        open >= timeout && open <= timeout + Duration::from_secs(31),
        "{open:?}"
    );
    assert_eq!(s.fake.list_calls().len(), 1, "no relist");
    drop(h);
}
