//! The Controller runner's worker loop, without an API server: forget on success, rate
//! limited retries on error and panic, parallel workers that never share a key, a draining
//! shutdown, and the retry limit.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use kinformer_controller::controller::{Action, Context, Controller};
use kinformer_core::{DeletedFinalStateUnknown, DeletedObject, MetaObject, ObjectKey};
use kinformer_indexer::Indexer;
use kinformer_informer_factory::ResourceEventHandler;
use kinformer_testenv::eventually;
use kinformer_workqueue::{
    ItemExponentialFailureRateLimiter, PriorityWorkQueue, Queue, QueueConfig, RateLimitingQueue,
    RateLimitingWorkQueue,
};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio_util::sync::CancellationToken;

/// What the adapted reconcile functions return.
type Reconciled<E> = Pin<Box<dyn Future<Output = Result<Action, E>> + Send>>;

/// The reconcile functions of these tests return `Result<(), E>`: `Ok(())` is `Action::Done`.
fn plain<T, F, Fut, E>(f: F) -> impl Fn(T, Context<()>) -> Reconciled<E> + Send + Sync + 'static
where
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: 'static,
{
    move |key, _ctx| Box::pin(f(key).map(|r| r.map(|()| Action::Done)))
}

/// Generous: only a broken controller waits this long.
const TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) type FastQueue<T> = RateLimitingWorkQueue<T, ItemExponentialFailureRateLimiter<T>>;

/// A queue whose retries wait 1 ms, 2 ms, 4 ms … at most 10 ms: quick tests.
pub(crate) fn fast_queue<T: kinformer_workqueue::Item>() -> FastQueue<T> {
    RateLimitingWorkQueue::new(ItemExponentialFailureRateLimiter::new(
        Duration::from_millis(1),
        Duration::from_millis(10),
    ))
}

async fn recv<T>(rx: &mut UnboundedReceiver<T>) -> T {
    tokio::time::timeout(TIMEOUT, rx.recv())
        .await
        .expect("timed out waiting for the controller")
        .expect("channel closed")
}

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[test]
fn builder_clamps_zero_workers_and_keeps_settings() {
    let controller = Controller::<ObjectKey>::new("pods")
        .workers(0)
        .max_retries(3);
    assert_eq!(controller.config().workers, 1);
    assert_eq!(controller.config().max_retries, Some(3));
    assert_eq!(controller.config().name, "pods");

    let custom = Controller::<&str, _>::with_queue(fast_queue())
        .name("custom")
        .workers(4);
    assert_eq!(custom.config().workers, 4);
    assert_eq!(custom.config().max_retries, None);
    assert_eq!(custom.config().name, "custom");
    assert!(format!("{custom:?}").contains("custom"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_forgets_the_key() {
    let controller = Controller::with_queue(fast_queue::<&'static str>());
    let queue = Arc::clone(controller.queue());
    // One failure remembered by the limiter (and the key queued after 1 ms).
    queue.add_rate_limited("web-0");
    assert_eq!(queue.num_requeues(&"web-0"), 1);

    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        plain(move |key: &'static str| {
            let tx = tx.clone();
            async move {
                tx.send(key).expect("test alive");
                Ok::<(), String>(())
            }
        }),
        (),
        cancel.clone(),
    ));
    assert_eq!(recv(&mut rx).await, "web-0");
    cancel.cancel();
    within("run to return", run).await.expect("run task");

    assert_eq!(queue.num_requeues(&"web-0"), 0, "success forgets");
    assert!(queue.is_empty());
    assert!(rx.try_recv().is_err(), "reconciled once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_requeues_rate_limited_until_success() {
    let controller = Controller::with_queue(fast_queue::<&'static str>()).name("retries");
    let queue = Arc::clone(controller.queue());
    queue.add("flaky");
    queue.add("steady");

    // Each attempt reports (key, requeues seen by the limiter at that attempt).
    let (tx, mut rx) = unbounded_channel();
    let attempts: Arc<Mutex<HashMap<&'static str, usize>>> = Arc::default();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let queue = Arc::clone(&queue);
        controller.run(
            plain(move |key: &'static str| {
                let (tx, queue, attempts) = (tx.clone(), Arc::clone(&queue), Arc::clone(&attempts));
                async move {
                    let attempt = {
                        let mut attempts = attempts.lock().expect("lock");
                        let n = attempts.entry(key).or_default();
                        *n += 1;
                        *n
                    };
                    tx.send((key, queue.num_requeues(&key)))
                        .expect("test alive");
                    if key == "flaky" && attempt <= 3 {
                        Err(format!("attempt {attempt} failed"))
                    } else {
                        Ok(())
                    }
                }
            }),
            (),
            cancel.clone(),
        )
    });

    let mut flaky = Vec::new();
    let mut steady = 0;
    while flaky.len() < 4 || steady < 1 {
        match recv(&mut rx).await {
            ("flaky", requeues) => flaky.push(requeues),
            (_, _) => steady += 1,
        }
    }
    // Three failures, each re-queued rate limited (counted), then the success.
    assert_eq!(flaky, [0, 1, 2, 3]);
    cancel.cancel();
    within("run to return", run).await.expect("run task");
    assert_eq!(
        queue.num_requeues(&"flaky"),
        0,
        "the success forgot the failures"
    );
    assert_eq!(steady, 1);
    assert!(rx.try_recv().is_err(), "no attempt after the success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_reconcile_does_not_kill_the_worker() {
    // One worker: if a panic killed it, nothing after the panic would be reconciled.
    let controller = Controller::with_queue(fast_queue::<&'static str>()).workers(1);
    let queue = Arc::clone(controller.queue());
    queue.add("panics-in-future");
    queue.add("panics-in-call");
    queue.add("fine");

    let (tx, mut rx) = unbounded_channel();
    let calls: Arc<Mutex<HashMap<&'static str, usize>>> = Arc::default();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        plain(move |key: &'static str| {
            let call = {
                let mut calls = calls.lock().expect("lock");
                let n = calls.entry(key).or_default();
                *n += 1;
                *n
            };
            // A panic before any future exists.
            assert!(
                !(key == "panics-in-call" && call == 1),
                "reconcile blew up in the call"
            );
            let tx = tx.clone();
            async move {
                // A panic while the future is polled.
                assert!(
                    !(key == "panics-in-future" && call == 1),
                    "reconcile blew up"
                );
                tx.send((key, call)).expect("test alive");
                Ok::<(), String>(())
            }
        }),
        (),
        cancel.clone(),
    ));

    let mut done = HashSet::new();
    while done.len() < 3 {
        let (key, call) = recv(&mut rx).await;
        let expected = if key == "fine" { 1 } else { 2 };
        assert_eq!(
            call, expected,
            "{key}: a panic is retried once, rate limited"
        );
        done.insert(key);
    }
    cancel.cancel();
    within("run to return", run).await.expect("run task");
    for key in ["panics-in-future", "panics-in-call", "fine"] {
        assert_eq!(
            queue.num_requeues(&key),
            0,
            "{key} forgotten after its success"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_run_in_parallel_but_never_the_same_key_at_once() {
    const WORKERS: usize = 4;
    const ROUNDS: usize = 25;
    let controller = Controller::with_queue(fast_queue::<usize>()).workers(WORKERS);
    let queue = Arc::clone(controller.queue());
    for key in 0..WORKERS {
        queue.add(key);
    }

    let barrier = Arc::new(tokio::sync::Barrier::new(WORKERS));
    let in_flight: Arc<Mutex<HashSet<usize>>> = Arc::default();
    let rounds: Arc<Mutex<HashMap<usize, usize>>> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let barrier_timeouts = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let queue = Arc::clone(&queue);
        let overlaps = Arc::clone(&overlaps);
        let barrier_timeouts = Arc::clone(&barrier_timeouts);
        controller.run(
            plain(move |key: usize| {
                let queue = Arc::clone(&queue);
                let (barrier, in_flight, rounds) = (
                    Arc::clone(&barrier),
                    Arc::clone(&in_flight),
                    Arc::clone(&rounds),
                );
                let (overlaps, barrier_timeouts, tx) = (
                    Arc::clone(&overlaps),
                    Arc::clone(&barrier_timeouts),
                    tx.clone(),
                );
                async move {
                    if !in_flight.lock().expect("lock").insert(key) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let round = {
                        let mut rounds = rounds.lock().expect("lock");
                        let n = rounds.entry(key).or_default();
                        *n += 1;
                        *n
                    };
                    if round == 1 {
                        // Every worker holds its first key at the same time, or this times out.
                        if tokio::time::timeout(TIMEOUT, barrier.wait()).await.is_err() {
                            barrier_timeouts.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    if round < ROUNDS {
                        // Added while held: the queue marks it dirty and re-queues it on done,
                        // so another worker may be free to take it — but must not until then.
                        queue.add(key);
                        queue.add(key);
                    }
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    in_flight.lock().expect("lock").remove(&key);
                    if round == ROUNDS {
                        tx.send(key).expect("test alive");
                    }
                    Ok::<(), String>(())
                }
            }),
            (),
            cancel.clone(),
        )
    });

    let mut finished = HashSet::new();
    while finished.len() < WORKERS {
        finished.insert(recv(&mut rx).await);
    }
    cancel.cancel();
    within("run to return", run).await.expect("run task");
    assert_eq!(
        barrier_timeouts.load(Ordering::SeqCst),
        0,
        "workers ran in parallel"
    );
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a key was reconciled twice at once"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn shutdown_drains_queued_items_and_waits_for_in_flight() {
    let controller = Controller::with_queue(fast_queue::<u32>()).workers(1);
    let queue = Arc::clone(controller.queue());
    for key in 1..=5 {
        queue.add(key);
    }

    let (started_tx, mut started_rx) = unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let finished: Arc<Mutex<Vec<u32>>> = Arc::default();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (release, finished) = (Arc::clone(&release), Arc::clone(&finished));
        controller.run(
            plain(move |key: u32| {
                let (started_tx, release, finished) = (
                    started_tx.clone(),
                    Arc::clone(&release),
                    Arc::clone(&finished),
                );
                async move {
                    started_tx.send(key).expect("test alive");
                    if key == 1 {
                        release.notified().await;
                    }
                    finished.lock().expect("lock").push(key);
                    Ok::<(), String>(())
                }
            }),
            (),
            cancel.clone(),
        )
    });

    assert_eq!(recv(&mut started_rx).await, 1);
    cancel.cancel();
    eventually("the queue to shut down", TIMEOUT, || queue.shutting_down()).await;
    queue.add(99); // ignored: the queue is shutting down
    // Key 1 is still held, so run cannot have returned.
    tokio::task::yield_now().await;
    assert!(!run.is_finished(), "run returned while a key was in flight");
    assert!(finished.lock().expect("lock").is_empty());

    release.notify_one();
    within("run to return", run).await.expect("run task");
    assert_eq!(
        *finished.lock().expect("lock"),
        [1, 2, 3, 4, 5],
        "the in-flight key finished and the queued ones were drained"
    );
    assert!(queue.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_returns_when_the_queue_is_shut_down_elsewhere() {
    let controller = Controller::with_queue(fast_queue::<u32>()).workers(3);
    let queue = Arc::clone(controller.queue());
    queue.add(7);
    let (tx, mut rx) = unbounded_channel();
    let run = tokio::spawn(controller.run(
        plain(move |key: u32| {
            let tx = tx.clone();
            async move {
                tx.send(key).expect("test alive");
                Ok::<(), String>(())
            }
        }),
        (),
        CancellationToken::new(),
    ));
    assert_eq!(recv(&mut rx).await, 7);
    queue.shut_down();
    within("run to return", run).await.expect("run task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_retries_drops_the_key() {
    let controller = Controller::with_queue(fast_queue::<&'static str>())
        .max_retries(2)
        .workers(1);
    let queue = Arc::clone(controller.queue());
    queue.add("doomed");

    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let queue = Arc::clone(&queue);
        controller.run(
            plain(move |key: &'static str| {
                let (tx, queue) = (tx.clone(), Arc::clone(&queue));
                async move {
                    tx.send((key, queue.num_requeues(&key)))
                        .expect("test alive");
                    if key == "doomed" {
                        Err("always fails")
                    } else {
                        Ok(())
                    }
                }
            }),
            (),
            cancel.clone(),
        )
    });

    // The first attempt and two retries.
    for expected in 0..=2 {
        assert_eq!(recv(&mut rx).await, ("doomed", expected));
    }
    // After the third failure the key is dropped: the worker moves on to the next key
    // (one worker, so "doomed" has been forgotten and marked done by then).
    eventually("the key to be forgotten", TIMEOUT, || {
        queue.num_requeues(&"doomed") == 0
    })
    .await;
    queue.add("next");
    assert_eq!(recv(&mut rx).await, ("next", 0));
    cancel.cancel();
    within("run to return", run).await.expect("run task");
    assert!(rx.try_recv().is_err(), "the dropped key was not retried");
    assert_eq!(queue.num_requeues(&"doomed"), 0);
}

/// A hand-driven informer: the `SharedInformer` swap point. It keeps the handlers it is
/// given and calls them when the test says so; its cache holds what the test puts in it.
pub(crate) struct FakeInformer<K> {
    pub(crate) handlers: Mutex<Vec<Box<dyn ResourceEventHandler<K> + Send>>>,
    pub(crate) options: Mutex<Vec<kinformer_informer_factory::HandlerOptions>>,
    pub(crate) cache: Arc<kinformer_indexer::ThreadSafeStore<K>>,
}

impl<K: MetaObject> Default for FakeInformer<K> {
    fn default() -> Self {
        Self {
            handlers: Mutex::default(),
            options: Mutex::default(),
            cache: Arc::new(kinformer_indexer::ThreadSafeStore::new(
                kinformer_indexer::namespace_indexers(),
            )),
        }
    }
}

/// A namespaced object with nothing but a name.
#[derive(Clone, Debug)]
struct Named(&'static str);

impl MetaObject for Named {
    fn object_name(&self) -> Option<&str> {
        Some(self.0)
    }
    fn object_namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn object_resource_version(&self) -> Option<&str> {
        None
    }
    fn object_labels(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        None
    }
}

struct FakeRegistration;

impl kinformer_informer_factory::HasSynced for FakeRegistration {
    fn has_synced(&self) -> bool {
        true
    }
}

impl kinformer_informer_factory::HandlerRegistration for FakeRegistration {
    fn remove(&self) {}
}

impl<K> kinformer_informer_factory::HasSynced for FakeInformer<K> {
    fn has_synced(&self) -> bool {
        true
    }
}

impl<K: MetaObject + Send + Sync + 'static> kinformer_informer_factory::SharedInformer<K>
    for FakeInformer<K>
{
    fn add_event_handler_with_options(
        &self,
        handler: Box<dyn ResourceEventHandler<K> + Send>,
        options: kinformer_informer_factory::HandlerOptions,
    ) -> Result<
        Box<dyn kinformer_informer_factory::HandlerRegistration>,
        kinformer_informer_factory::Error,
    > {
        self.handlers.lock().unwrap().push(handler);
        self.options.lock().unwrap().push(options);
        Ok(Box::new(FakeRegistration))
    }
    fn indexer(&self) -> Arc<dyn Indexer<K>> {
        Arc::clone(&self.cache) as _
    }
    fn last_sync_resource_version(&self) -> String {
        String::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_wires_any_shared_informer_to_the_queue_tombstones_included() {
    let informer = FakeInformer::<Named>::default();
    let controller = Controller::<ObjectKey, _>::with_queue(fast_queue());
    controller.watch(&informer).unwrap();
    {
        let handlers = informer.handlers.lock().unwrap();
        let h = &handlers[0];
        h.on_add(&Arc::new(Named("a")), true);
        h.on_update(&Arc::new(Named("b")), &Arc::new(Named("b")));
        h.on_delete(&DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: ObjectKey::parse("ns/gone").unwrap(),
            obj: Arc::new(Named("gone")),
        }));
    }
    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        plain(move |key: ObjectKey| {
            let tx = tx.clone();
            async move { tx.send(key.to_string()).map_err(|_| "closed") }
        }),
        (),
        cancel.clone(),
    ));
    let mut seen = vec![
        recv(&mut rx).await,
        recv(&mut rx).await,
        recv(&mut rx).await,
    ];
    seen.sort();
    assert_eq!(seen, ["ns/a", "ns/b", "ns/gone"]);
    // Key enqueuers lose nothing to a coalescing buffer: the controller asks for one.
    assert_eq!(
        *informer.options.lock().unwrap(),
        [kinformer_informer_factory::HandlerOptions::new().coalesce_by_key()]
    );
    cancel.cancel();
    within("shutdown", run).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_forgets_and_adds_the_key_back_after_the_delay() {
    // The queue's clock moves only when the test steps it.
    let clock = kinformer_workqueue::FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1)),
        QueueConfig::new().clock(clock.clone()),
    );
    let controller = Controller::with_queue(queue);
    let queue = Arc::clone(controller.queue());
    queue.add_rate_limited("cert"); // a failure the requeue must forget
    clock.step(Duration::from_millis(1));

    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |key: &'static str, _ctx: Context<()>| {
            let tx = tx.clone();
            async move {
                tx.send(key).expect("test alive");
                Ok::<_, String>(Action::RequeueAfter(Duration::from_secs(60)))
            }
        },
        (),
        cancel.clone(),
    ));
    assert_eq!(recv(&mut rx).await, "cert");
    // The worker forgets the key, then adds it after the delay, measured from the clock's
    // time then: step only once it waits, or the delay would start after the step.
    eventually("the key to be forgotten and waiting", TIMEOUT, || {
        queue.num_requeues(&"cert") == 0 && queue.inner().waiting_len() == 1
    })
    .await;
    assert!(queue.is_empty(), "not queued until the delay has passed");
    clock.step(Duration::from_secs(59));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(rx.try_recv().is_err(), "not before 60 s");
    clock.step(Duration::from_secs(1));
    assert_eq!(recv(&mut rx).await, "cert", "again after 60 s");
    assert_eq!(queue.num_requeues(&"cert"), 0, "a requeue is not a failure");
    cancel.cancel();
    within("run to return", run).await.expect("run task");
}

/// The default queue (the priority queue): a `RequeueAfter`, then an event for the same key
/// before the delay is over. The event is reconciled at once and the requeue still comes at
/// its time, as `Action`'s docs say (controller-runtime's priority queue merged the two and
/// lost the second reconcile; so did this one before it was made of client-go's layers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_still_comes_after_an_event_for_the_same_key_on_the_default_queue() {
    let clock = kinformer_workqueue::FakeClock::new();
    let queue = PriorityWorkQueue::with_config(
        kinformer_workqueue::default_controller_rate_limiter_with_clock(clock.clone()),
        QueueConfig::new().clock(clock.clone()),
    );
    let controller = Controller::with_queue(queue);
    let queue = Arc::clone(controller.queue());
    queue.add("cronjob");
    let (tx, mut rx) = unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |key: &'static str, ctx: Context<Arc<AtomicUsize>>| {
            let tx = tx.clone();
            async move {
                let n = ctx.fetch_add(1, Ordering::SeqCst) + 1;
                tx.send((key, n)).expect("test alive");
                // The first reconcile asks to look again in 2 s; the others are done.
                Ok::<_, String>(if n == 1 {
                    Action::RequeueAfter(Duration::from_secs(2))
                } else {
                    Action::Done
                })
            }
        },
        Arc::clone(&calls),
        cancel.clone(),
    ));
    assert_eq!(recv(&mut rx).await, ("cronjob", 1));
    eventually("the requeue to wait", TIMEOUT, || {
        queue.waiting_len() == 1 && queue.stats().processing == 0
    })
    .await;
    clock.step(Duration::from_millis(500));
    queue.add("cronjob"); // an event at 0.5 s
    assert_eq!(recv(&mut rx).await, ("cronjob", 2), "the event, at once");
    eventually("the event's reconcile to end", TIMEOUT, || {
        queue.stats().processing == 0
    })
    .await;
    clock.step(Duration::from_millis(1_499));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(rx.try_recv().is_err(), "not before 2 s");
    clock.step(Duration::from_millis(1));
    assert_eq!(recv(&mut rx).await, ("cronjob", 3), "the requeue, at 2 s");
    cancel.cancel();
    within("run to return", run).await.expect("run task");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_carries_the_shared_value_and_its_cancellation() {
    struct Shared {
        calls: AtomicUsize,
    }
    let controller = Controller::with_queue(fast_queue::<&'static str>());
    let queue = Arc::clone(controller.queue());
    queue.add("a");
    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |key: &'static str, ctx: Context<Shared>| {
            let tx = tx.clone();
            async move {
                let n = ctx.calls.fetch_add(1, Ordering::SeqCst) + 1;
                tx.send((key, n, ctx.clone())).expect("test alive");
                // A long reconcile that gives up when told to stop.
                ctx.cancellation().cancelled().await;
                Ok::<_, String>(Action::Done)
            }
        },
        Shared {
            calls: AtomicUsize::new(0),
        },
        cancel.clone(),
    ));
    let (key, n, ctx) = recv(&mut rx).await;
    assert_eq!((key, n), ("a", 1));
    assert!(!ctx.is_cancelled());
    cancel.cancel();
    within("run to return", run).await.expect("run task");
    assert!(ctx.is_cancelled(), "the reconcile saw the stop");
    assert_eq!(ctx.data().calls.load(Ordering::SeqCst), 1);
}

/// A cache whose progress a test sets: what `Context::wrote` waits on.
#[derive(Clone, Default)]
struct Progress(Arc<Mutex<String>>);

impl Progress {
    fn set(&self, rv: &str) {
        *self.0.lock().unwrap() = rv.to_owned();
    }
}

impl kinformer_controller::controller::CacheProgress for Progress {
    fn applied_resource_version(&self) -> String {
        self.0.lock().unwrap().clone()
    }
    fn group_resource(&self) -> Option<(String, String)> {
        None
    }
}

/// A controller whose first reconcile of `"k"` reports a write at resourceVersion 7 to
/// `cache` and asks to run again at once; how many reconciles ran.
fn writes_then_requeues(
    cache: &Progress,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Arc<AtomicUsize> {
    let runs = Arc::new(AtomicUsize::new(0));
    let controller =
        Controller::<&str, _>::with_queue(fast_queue()).read_your_writes_timeout(timeout);
    controller.queue().add("k");
    let (count, cache, cancel) = (Arc::clone(&runs), cache.clone(), cancel.clone());
    tokio::spawn(controller.run(
        move |_key, ctx: Context<Progress>| {
            let first = count.fetch_add(1, Ordering::SeqCst) == 0;
            let next = if first {
                ctx.wrote_version(&*ctx, "7");
                Action::RequeueAfter(Duration::ZERO)
            } else {
                Action::Done
            };
            async move { Ok::<_, String>(next) }
        },
        cache,
        cancel,
    ));
    runs
}

/// Read your own writes: after a reconcile reported a write, the key is not reconciled again
/// until the cache has applied that version (7 ≥ 7; "10" is past "7" as integers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_not_reconciled_again_until_the_cache_shows_its_write() {
    let cache = Progress::default();
    cache.set("5");
    let cancel = CancellationToken::new();
    let runs = writes_then_requeues(&cache, TIMEOUT, &cancel);
    eventually("the first reconcile", TIMEOUT, || {
        runs.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the cache is still at 5");
    cache.set("10");
    eventually("the second reconcile", TIMEOUT, || {
        runs.load(Ordering::SeqCst) == 2
    })
    .await;
    cancel.cancel();
}

/// The wait is bounded: a cache that never shows the write holds the key back for the
/// read-your-writes timeout, then it is reconciled anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_never_shows_the_write_holds_the_key_back_only_for_the_timeout() {
    let cache = Progress::default();
    let cancel = CancellationToken::new();
    let runs = writes_then_requeues(&cache, Duration::from_millis(400), &cancel);
    eventually("the first reconcile", TIMEOUT, || {
        runs.load(Ordering::SeqCst) == 1
    })
    .await;
    let held = eventually("the second reconcile", TIMEOUT, || {
        runs.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(held >= Duration::from_millis(350), "held back {held:?}");
    cancel.cancel();
}

/// Sets its flag when dropped: shows that a future holding it was dropped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_past_its_timeout_is_dropped_cancelled_and_retried_rate_limited() {
    #[cfg(feature = "prometheus")]
    let registry = {
        let mut registry = prometheus_client::registry::Registry::default();
        kinformer_controller::metrics::register(&mut registry);
        registry
    };
    // Retries wait zero: the test's time is Tokio's paused clock alone.
    let queue = RateLimitingWorkQueue::new(ItemExponentialFailureRateLimiter::new(
        Duration::ZERO,
        Duration::ZERO,
    ));
    let controller = Controller::with_queue(queue)
        .name("timeouts")
        .reconcile_timeout(Duration::from_secs(10));
    let queue = Arc::clone(controller.queue());
    queue.add("stuck-once");

    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, mut rx) = unbounded_channel();
    let attempts = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (queue, dropped) = (Arc::clone(&queue), Arc::clone(&dropped));
        controller.run(
            move |key: &'static str, ctx: Context<()>| {
                let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                let tx = tx.clone();
                let flag = (attempt == 1).then(|| DropFlag(Arc::clone(&dropped)));
                let requeues = queue.num_requeues(&key);
                async move {
                    tx.send((attempt, requeues, tokio::time::Instant::now(), ctx.clone()))
                        .expect("test alive");
                    if attempt == 1 {
                        // Stuck: never returns, whatever its context says.
                        let _flag = flag;
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, String>(Action::Done)
                }
            },
            (),
            cancel.clone(),
        )
    });

    let (first, requeues, started, first_ctx) = recv(&mut rx).await;
    assert_eq!((first, requeues), (1, 0));
    assert!(!first_ctx.is_cancelled());
    // Without the timeout the first attempt would hold the key for ever (and `recv` time out).
    let (second, requeues, retried, second_ctx) = recv(&mut rx).await;
    assert_eq!(second, 2);
    let waited = retried - started;
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_millis(10_010),
        "retried at the timeout, not {waited:?}"
    );
    assert_eq!(requeues, 1, "re-queued rate limited, as a failure");
    assert!(
        dropped.load(Ordering::SeqCst),
        "the stuck future was dropped"
    );
    assert!(
        first_ctx.is_cancelled(),
        "the timed-out reconcile's context was cancelled"
    );
    assert!(
        !second_ctx.is_cancelled(),
        "each reconcile has its own token"
    );

    cancel.cancel();
    within("run to return", run).await.expect("run task");
    assert_eq!(
        queue.num_requeues(&"stuck-once"),
        0,
        "the success forgot it"
    );

    #[cfg(feature = "prometheus")]
    {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        let scrape =
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parse");
        let counter = |name: &str| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == name && s.labels.get("controller") == Some("timeouts"))
                .map(|s| match s.value {
                    // The parser reads OpenMetrics counters as untyped.
                    prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                    ref other => panic!("{name} is not a counter: {other:?}"),
                })
        };
        assert_eq!(
            counter("controller_runtime_reconcile_timeouts_total"),
            Some(1.0)
        );
        assert_eq!(
            counter("controller_runtime_reconcile_errors_total"),
            Some(1.0)
        );
    }
}

fn config_map(name: &str, rv: &str) -> Arc<k8s_openapi::api::core::v1::ConfigMap> {
    let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
    cm.metadata.namespace = Some("ns".into());
    cm.metadata.name = Some(name.into());
    cm.metadata.resource_version = Some(rv.into());
    Arc::new(cm)
}

/// The default queue orders by priority, as controller-runtime v0.23's: the initial list and
/// resyncs go in low, so a change queued behind 1,000 of them is reconciled first; the
/// initial keys follow in their order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_reconciled_before_the_initial_list_and_resyncs_queued_ahead_of_it() {
    use kinformer_controller::controller::EnqueueKeys;
    let controller = Controller::<ObjectKey>::new("priority");
    let handler = EnqueueKeys::new(Arc::clone(controller.queue()));
    for i in 0..1000 {
        handler.on_add(&config_map(&format!("cm-{i:04}"), "1"), true);
    }
    let old = config_map("cm-0999", "1");
    handler.on_update(&old, &old); // a resync: stays low
    handler.on_update(&old, &config_map("cm-0999", "2")); // a change: raised
    let (tx, mut rx) = unbounded_channel();
    let cancel = CancellationToken::new();
    tokio::spawn(controller.run(
        move |key: ObjectKey, tx: Context<tokio::sync::mpsc::UnboundedSender<String>>| {
            let _ = tx.send(key.to_string());
            async { Ok::<_, String>(Action::Done) }
        },
        tx,
        cancel.clone(),
    ));
    assert_eq!(recv(&mut rx).await, "ns/cm-0999", "the change goes first");
    assert_eq!(recv(&mut rx).await, "ns/cm-0000", "then the list, in order");
    cancel.cancel();
}
