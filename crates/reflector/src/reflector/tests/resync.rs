//! Rule 26: the periodic resync.

use super::*;

// ---------------------------------------------------------------- rule 26

#[tokio::test(start_paused = true)]
async fn resync_runs_on_its_period_while_watching_and_asks_should_resync() {
    let s = Setup::new();
    let _tx = open_watch(&s.fake);
    let allow = Arc::new(AtomicBool::new(true));
    let a = Arc::clone(&allow);
    let h = spawn(
        s.reflector()
            .resync_period(Duration::from_secs(30))
            .should_resync(move || a.load(Ordering::SeqCst)),
    );
    until("three resyncs", || {
        s.sink.resyncs.lock().unwrap().len() == 3
    })
    .await;
    let watch_start = s.fake.watch_times()[0];
    let at: Vec<f64> = s
        .sink
        .resyncs
        .lock()
        .unwrap()
        .iter()
        .map(|t| (*t - watch_start).as_secs_f64())
        .collect();
    assert_eq!(at, [30.0, 60.0, 90.0]);

    allow.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(100)).await;
    assert_eq!(
        s.sink.resyncs.lock().unwrap().len(),
        3,
        "should_resync said no"
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn resync_keeps_its_period_through_watch_restarts_and_backoffs() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    // Watches that fail to start for a long while: the resync timer still runs.
    for _ in 0..5 {
        s.fake.push_watch(Err(status(429, "TooManyRequests")));
    }
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resync_period(Duration::from_secs(5)));
    until("the watch", || s.fake.watch_calls().len() == 6).await;
    assert!(!s.sink.resyncs.lock().unwrap().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn no_resync_without_a_period() {
    let s = Setup::new();
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resync_period(Duration::ZERO));
    tokio::time::sleep(Duration::from_secs(250)).await;
    assert!(s.sink.resyncs.lock().unwrap().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_failed_resync_goes_to_the_handler_and_relists() {
    struct FailingResync(Rec);
    impl Sink<Obj> for FailingResync {
        fn add(&self, o: Arc<Obj>) -> Result<(), SinkError> {
            self.0.add(o)
        }
        fn update(&self, o: Arc<Obj>) -> Result<(), SinkError> {
            self.0.update(o)
        }
        fn delete(&self, o: Arc<Obj>) -> Result<(), SinkError> {
            self.0.delete(o)
        }
        fn replace(&self, part: ListPart<Obj>) -> Result<(), SinkError> {
            self.0.replace(part)
        }
        fn resync(&self) -> Result<(), SinkError> {
            Err(SinkError::Other("resync failed".into()))
        }
        fn bookmark(&self, rv: &str) -> Result<(), SinkError> {
            self.0.bookmark(rv)
        }
    }
    let fake = FakeListerWatcher::<Obj>::new();
    let errors = Errors::default();
    let _tx = open_watch(&fake);
    let h = Reflector::new(fake.clone(), FailingResync(Rec::default()))
        .resync_period(Duration::from_secs(10))
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    until("the relist", || fake.list_calls().len() == 2).await;
    assert_eq!(errors.kinds()[0], "sink");
    drop(h);
}
