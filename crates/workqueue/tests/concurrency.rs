//! Threads and tasks together: a bounded randomized stress test of the invariants, and the
//! async `get` (never blocks a runtime thread, loses no wake-up, passes wake-ups on).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use kinformer_workqueue::{
    DelayingQueue, DelayingWorkQueue, PriorityStorage, Queue, QueueConfig, WorkQueue,
};

const TIMEOUT: Duration = Duration::from_secs(20);

/// A small xorshift generator: reproducible per seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Per key: the ticket of its last add and the ticket of its last hand-out. A ticket is taken
/// before `add` is called and after `get` returns, so "every add is followed by a hand-out"
/// means `last_get > last_add` at the end, whatever the interleaving.
struct Tickets {
    clock: AtomicU64,
    last_add: Vec<AtomicU64>,
    last_get: Vec<AtomicU64>,
}

impl Tickets {
    fn new(keys: usize) -> Self {
        Self {
            clock: AtomicU64::new(1),
            last_add: (0..keys).map(|_| AtomicU64::new(0)).collect(),
            last_get: (0..keys).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    fn stamp(&self, slot: &AtomicU64) {
        let ticket = self.clock.fetch_add(1, Ordering::SeqCst);
        slot.fetch_max(ticket, Ordering::SeqCst);
    }
}

#[test]
fn randomized_stress_keeps_one_holder_and_loses_nothing() {
    const KEYS: usize = 64;
    const PRODUCERS: u64 = 3;
    const WORKERS: usize = 4;
    let deadline = Instant::now() + Duration::from_millis(1500);

    for (round, storage_is_priority) in [(0u64, false), (1, true)] {
        let queue: Arc<dyn DelayingQueue<usize>> = if storage_is_priority {
            Arc::new(DelayingWorkQueue::wrap(
                WorkQueue::with_storage(PriorityStorage::new(), QueueConfig::new()),
                QueueConfig::new(),
            ))
        } else {
            Arc::new(DelayingWorkQueue::<usize>::new())
        };
        let tickets = Arc::new(Tickets::new(KEYS));
        let holding: Arc<Vec<AtomicBool>> =
            Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
        let double_holds = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let no_more_adds = Arc::new(RwLock::new(false));

        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (queue, tickets, holding, double_holds, no_more_adds) = (
                    queue.clone(),
                    tickets.clone(),
                    holding.clone(),
                    double_holds.clone(),
                    no_more_adds.clone(),
                );
                thread::spawn(move || {
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1) ^ (round << 32));
                    let mut handled = 0usize;
                    while let Some(key) = queue.get() {
                        tickets.stamp(&tickets.last_get[key]);
                        if holding[key].swap(true, Ordering::SeqCst) {
                            double_holds.fetch_add(1, Ordering::SeqCst);
                        }
                        if rng.below(4) == 0 {
                            thread::yield_now();
                        }
                        // Re-add while held sometimes: exercises the dirty path. Not
                        // once the main thread is about to shut the queue down: an add
                        // after shut_down is ignored by contract (rule 4), so its ticket
                        // would never be matched by a get. The read lock makes "check,
                        // stamp, add" one step against the main thread's write lock.
                        if rng.below(8) == 0 {
                            let no_more_adds = no_more_adds.read().unwrap();
                            if !*no_more_adds {
                                tickets.stamp(&tickets.last_add[key]);
                                queue.add(key);
                            }
                        }
                        holding[key].store(false, Ordering::SeqCst);
                        queue.done(&key);
                        handled += 1;
                    }
                    handled
                })
            })
            .collect();

        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (queue, tickets, stop) = (queue.clone(), tickets.clone(), stop.clone());
                thread::spawn(move || {
                    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (p + 1) ^ (round << 40));
                    let mut ops = 0u64;
                    while !stop.load(Ordering::Relaxed) && ops < 200_000 {
                        let key = rng.below(KEYS as u64) as usize;
                        tickets.stamp(&tickets.last_add[key]);
                        match rng.below(10) {
                            0 => queue.add_after(key, Duration::from_micros(rng.below(500))),
                            1 => queue.add_with_priority(key, rng.below(5) as i32),
                            _ => queue.add(key),
                        }
                        ops += 1;
                        if ops.is_multiple_of(64) {
                            thread::yield_now();
                        }
                    }
                })
            })
            .collect();

        let half = Instant::now() + (deadline.saturating_duration_since(Instant::now()) / 2);
        while Instant::now() < half {
            thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::SeqCst);
        for producer in producers {
            producer.join().unwrap();
        }
        // From here on no worker re-adds: every add stamped so far was made before the
        // shutdown below, so it must be handed out.
        *no_more_adds.write().unwrap() = true;
        // Let delayed adds (at most 0.5 ms) fire before draining.
        let wait_until = Instant::now() + TIMEOUT;
        while !queue.is_empty() || tickets_pending(&tickets) {
            assert!(
                Instant::now() < wait_until,
                "items were lost: {:?}",
                pending_keys(&tickets)
            );
            thread::sleep(Duration::from_millis(1));
        }

        let (tx, rx) = mpsc::channel();
        let drainer = {
            let queue = queue.clone();
            thread::spawn(move || {
                queue.shut_down_with_drain();
                tx.send(()).unwrap();
            })
        };
        rx.recv_timeout(TIMEOUT).expect("drain did not terminate");
        drainer.join().unwrap();
        let handled: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();

        assert_eq!(
            double_holds.load(Ordering::SeqCst),
            0,
            "an item had two holders"
        );
        assert!(
            pending_keys(&tickets).is_empty(),
            "items added but never handed out afterwards"
        );
        assert!(handled > 0);
    }
}

fn tickets_pending(tickets: &Tickets) -> bool {
    !pending_keys(tickets).is_empty()
}

fn pending_keys(tickets: &Tickets) -> Vec<usize> {
    (0..tickets.last_add.len())
        .filter(|&key| {
            let added = tickets.last_add[key].load(Ordering::SeqCst);
            added != 0 && tickets.last_get[key].load(Ordering::SeqCst) < added
        })
        .collect()
}

fn run_with_watchdog(name: &str, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let runner = thread::spawn(move || {
        body();
        tx.send(()).unwrap();
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(()) => runner.join().unwrap(),
        Err(_) => {
            if runner.is_finished() {
                // The body panicked: surface its message.
                runner.join().unwrap();
            }
            panic!("{name}: hung (blocked a runtime thread or lost a wake-up)");
        }
    }
}

#[test]
fn get_async_does_not_block_a_single_threaded_runtime() {
    run_with_watchdog("single-threaded runtime", || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let queue = WorkQueue::new();
        runtime.block_on(async {
            let getter = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.get_async().await })
            };
            // The getter runs first and parks; if it blocked the thread, we would never get
            // here to add.
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            queue.add("wake");
            assert_eq!(getter.await.unwrap(), Some("wake"));
        });
    });
}

#[test]
fn threads_and_tasks_share_a_queue_without_losing_wake_ups() {
    run_with_watchdog("mixed workers", || {
        const ITEMS: usize = 20_000;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let queue = WorkQueue::new();
        let seen = Arc::new(Mutex::new(Vec::with_capacity(ITEMS)));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (queue, seen) = (queue.clone(), seen.clone());
                runtime.spawn(async move {
                    while let Some(item) = queue.get_async().await {
                        seen.lock().unwrap().push(item);
                        queue.done(&item);
                    }
                })
            })
            .collect();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (queue, seen) = (queue.clone(), seen.clone());
                thread::spawn(move || {
                    while let Some(item) = queue.get() {
                        seen.lock().unwrap().push(item);
                        queue.done(&item);
                    }
                })
            })
            .collect();
        for item in 0..ITEMS {
            queue.add(item);
            if item.is_multiple_of(1000) {
                thread::yield_now();
            }
        }
        let start = Instant::now();
        while seen.lock().unwrap().len() < ITEMS {
            assert!(start.elapsed() < TIMEOUT, "items stuck in the queue");
            thread::sleep(Duration::from_millis(1));
        }
        queue.shut_down();
        runtime.block_on(async {
            for task in tasks {
                task.await.unwrap();
            }
        });
        for thread in threads {
            thread.join().unwrap();
        }
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (0..ITEMS).collect::<Vec<_>>(),
            "each item exactly once"
        );
    });
}

#[test]
fn shut_down_wakes_parked_async_getters() {
    run_with_watchdog("shutdown wakes tasks", || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let queue: WorkQueue<u8> = WorkQueue::new();
        let getters: Vec<_> = (0..5)
            .map(|_| {
                let queue = queue.clone();
                runtime.spawn(async move { queue.get_async().await })
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        queue.shut_down();
        runtime.block_on(async {
            for getter in getters {
                assert_eq!(getter.await.unwrap(), None);
            }
        });
    });
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn flag_waker() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    (flag.clone(), Waker::from(flag))
}

#[test]
fn a_dropped_get_future_passes_its_wake_up_on() {
    let queue = WorkQueue::new();
    let (flag_a, waker_a) = flag_waker();
    let (flag_b, waker_b) = flag_waker();
    let mut a = queue.get_async();
    let mut b = queue.get_async();
    assert!(
        std::pin::Pin::new(&mut a)
            .poll(&mut Context::from_waker(&waker_a))
            .is_pending()
    );
    assert!(
        std::pin::Pin::new(&mut b)
            .poll(&mut Context::from_waker(&waker_b))
            .is_pending()
    );
    queue.add(1);
    assert!(
        flag_a.0.load(Ordering::SeqCst),
        "the first parked getter is woken"
    );
    assert!(!flag_b.0.load(Ordering::SeqCst), "only one getter per item");
    drop(a);
    assert!(
        flag_b.0.load(Ordering::SeqCst),
        "the dropped getter's wake-up moved on"
    );
    assert_eq!(
        std::pin::Pin::new(&mut b).poll(&mut Context::from_waker(&waker_b)),
        Poll::Ready(Some(1))
    );
}

#[test]
fn a_completed_get_future_takes_nothing_more() {
    let queue = WorkQueue::new();
    queue.add(1);
    queue.add(2);
    let (_, waker) = flag_waker();
    let mut future = queue.get_async();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(
        std::pin::Pin::new(&mut future).poll(&mut cx),
        Poll::Ready(Some(1))
    );
    assert!(std::pin::Pin::new(&mut future).poll(&mut cx).is_pending());
    drop(future);
    assert_eq!(queue.len(), 1);
}

#[test]
fn a_cancelled_get_future_takes_nothing() {
    let queue = WorkQueue::new();
    let (_, waker) = flag_waker();
    let mut parked = queue.get_async();
    assert!(
        std::pin::Pin::new(&mut parked)
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    drop(parked);
    queue.add(5);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some(5));
}

#[test]
fn many_keys_with_duplicates_are_each_processed_after_their_last_add() {
    // 2 producers, 8 workers, 10k keys, each key added twice (the benchmark's shape).
    const KEYS: usize = 10_000;
    let queue: WorkQueue<usize> = WorkQueue::new();
    let processed: Arc<Vec<AtomicUsize>> =
        Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (queue, processed) = (queue.clone(), processed.clone());
            thread::spawn(move || {
                while let Some(key) = queue.get() {
                    processed[key].fetch_add(1, Ordering::SeqCst);
                    queue.done(&key);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || {
                for key in 0..KEYS {
                    queue.add(key);
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    queue.shut_down_with_drain();
    // After the drain, workers empty what is still queued and stop.
    for worker in workers {
        worker.join().unwrap();
    }
    let counts: HashSet<usize> = processed.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert!(
        counts.iter().all(|&count| count == 1 || count == 2),
        "each key once or twice, got counts {counts:?}"
    );
}
