//! Criterion benchmarks of the workqueue, one per workload of the performance targets (ARCHITECTURE.md).
//! The Go peer runs the same workloads on client-go; keep the names stable:
//!
//! - `workqueue/add_get_done/same_thread`: client-go's `BenchmarkQueue` shape, 100 string
//!   keys added, got and done one after another in one thread (per element: one cycle).
//! - `workqueue/add_get_done/same_thread_string`: the same with `String` keys.
//! - `workqueue/add_get_done/1p1w`: one producer thread adds keys from a set of 100k, one
//!   worker thread gets and dones them; the producer yields while more than 1024 items are
//!   queued, so no add is a duplicate (per element: one cycle).
//! - `workqueue/contended/2p8w_10k_keys_50pct_dup`: 2 producers each add the same 10k keys
//!   (so half of the 20k adds are duplicates), 8 workers get and done until the queue is
//!   shut down and drained (per element: one add).
//! - `workqueue/delaying/add_after`: client-go's `BenchmarkDelayingQueue_AddAfter` shape, on
//!   a fake clock: add_after with random delays up to 10 min, step 11 min, get everything
//!   (per element: one add_after plus its firing and get).
//! - `workqueue/rate_limited/requeue`: get, add_rate_limited, done on the default controller
//!   limiter over a fake clock, then step the clock until everything fired and get/forget/done
//!   it (per element: one failed-then-succeeded retry).
//!
//! The priority queue (no client-go peer: client-go has none; controller-runtime's is
//! described in BENCHMARKS.md, "workqueue priority"):
//!
//! - `workqueue/priority/add_get_done/same_thread`: the same-thread cycle on
//!   `PriorityWorkQueue`, half the keys at `LOW_PRIORITY`.
//! - `workqueue/priority/changed_after_10k_listed/{fifo,priority}`: 10,000 keys queued at
//!   `LOW_PRIORITY` (an initial list), then one changed key added: the time from its add
//!   until `get` hands it out, in one thread (the FIFO hands out the 10,000 first; per
//!   element: one changed key handed out).
//!
//! The same with worker threads and a reconcile that takes time is a program, not a bench
//! (criterion would repeat a 1 s FIFO run hundreds of times): `cargo run --release -p
//! kinformer-workqueue --example priority_after_initial_list`.

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_main};
use kinformer_workqueue::{
    DelayingQueue, DelayingWorkQueue, FakeClock, LOW_PRIORITY, PriorityWorkQueue, Queue,
    QueueConfig, RateLimitingQueue, RateLimitingWorkQueue, WorkQueue,
    default_controller_rate_limiter_with_clock,
};

/// Keys are `Arc<str>`, as kinformer-core's `ObjectKey` is (and as Go strings are shared):
/// cloning one is a reference count, not an allocation. `same_thread_string` shows the cost
/// of `String` keys, where every new add clones (allocates) the key.
type Key = Arc<str>;

fn keys(n: usize) -> Vec<Key> {
    (0..n)
        .map(|i| Key::from(format!("namespace-{}/object-{i}", i % 7)))
        .collect()
}

fn add_get_done(c: &mut Criterion) {
    let mut group = c.benchmark_group("workqueue/add_get_done");

    let hundred = keys(100);
    group.throughput(Throughput::Elements(100));
    group.bench_function("same_thread", |b| {
        let queue: WorkQueue<Key> = WorkQueue::new();
        b.iter(|| {
            for key in &hundred {
                queue.add(key.clone());
                let got = queue.get();
                if let Some(got) = got {
                    queue.done(black_box(&got));
                }
            }
        });
    });
    let hundred_strings: Vec<String> = hundred.iter().map(|key| key.to_string()).collect();
    group.bench_function("same_thread_string", |b| {
        let queue: WorkQueue<String> = WorkQueue::new();
        b.iter(|| {
            for key in &hundred_strings {
                queue.add(key.clone());
                let got = queue.get();
                if let Some(got) = got {
                    queue.done(black_box(&got));
                }
            }
        });
    });

    let many = keys(100_000);
    group.throughput(Throughput::Elements(1));
    group.bench_function("1p1w", |b| {
        b.iter_custom(|iters| {
            let n = usize::try_from(iters).unwrap_or(usize::MAX);
            let queue: WorkQueue<Key> = WorkQueue::new();
            let worker = {
                let queue = queue.clone();
                thread::spawn(move || {
                    let mut handled = 0usize;
                    while let Some(key) = queue.get() {
                        queue.done(&key);
                        handled += 1;
                    }
                    handled
                })
            };
            let start = Instant::now();
            for i in 0..n {
                // Keep at most ~1k items queued, so that (with 100k keys) no add is a
                // duplicate and every add is one full cycle, however the threads are paced.
                if i % 256 == 0 {
                    while queue.len() > 1024 {
                        thread::yield_now();
                    }
                }
                queue.add(many[i % many.len()].clone());
            }
            queue.shut_down_with_drain();
            let handled = worker.join().unwrap_or(0);
            let elapsed = start.elapsed();
            black_box(handled);
            elapsed
        });
    });
    group.finish();
}

fn contended(c: &mut Criterion) {
    const KEYS: usize = 10_000;
    let keys = keys(KEYS);
    let mut group = c.benchmark_group("workqueue/contended");
    group.sample_size(20);
    group.throughput(Throughput::Elements(2 * KEYS as u64));
    group.bench_function("2p8w_10k_keys_50pct_dup", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let queue: WorkQueue<Key> = WorkQueue::new();
                total += thread::scope(|scope| {
                    let workers: Vec<_> = (0..8)
                        .map(|_| {
                            let queue = &queue;
                            scope.spawn(move || {
                                while let Some(key) = queue.get() {
                                    queue.done(&key);
                                }
                            })
                        })
                        .collect();
                    let start = Instant::now();
                    let producers: Vec<_> = (0..2)
                        .map(|_| {
                            let (queue, keys) = (&queue, &keys);
                            scope.spawn(move || {
                                for key in keys {
                                    queue.add(key.clone());
                                }
                            })
                        })
                        .collect();
                    for producer in producers {
                        let _ = producer.join();
                    }
                    queue.shut_down_with_drain();
                    for worker in workers {
                        let _ = worker.join();
                    }
                    start.elapsed()
                });
            }
            total
        });
    });
    group.finish();
}

fn delaying(c: &mut Criterion) {
    let mut group = c.benchmark_group("workqueue/delaying");
    const N: usize = 10_000;
    let keys = keys(N);
    // A fixed pseudo-random sequence of delays up to 10 minutes.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let delays: Vec<Duration> = (0..N)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            Duration::from_nanos(state % 600_000_000_000)
        })
        .collect();
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("add_after", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let clock = FakeClock::new();
                let queue: DelayingWorkQueue<Key> =
                    DelayingWorkQueue::with_config(QueueConfig::new().clock(clock.clone()));
                let start = Instant::now();
                for (key, delay) in keys.iter().zip(&delays) {
                    queue.add_after(key.clone(), *delay);
                }
                clock.step(Duration::from_secs(11 * 60));
                for _ in 0..N {
                    black_box(queue.get());
                }
                total += start.elapsed();
            }
            total
        });
    });
    group.finish();
}

fn rate_limited(c: &mut Criterion) {
    const N: usize = 1_000;
    let keys = keys(N);
    let mut group = c.benchmark_group("workqueue/rate_limited");
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("requeue", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let clock = FakeClock::new();
                let queue: RateLimitingWorkQueue<Key> = RateLimitingWorkQueue::with_config(
                    default_controller_rate_limiter_with_clock(clock.clone()),
                    QueueConfig::new().clock(clock.clone()),
                );
                for key in &keys {
                    queue.add(key.clone());
                }
                let start = Instant::now();
                // Every item fails once ...
                for _ in 0..N {
                    if let Some(key) = queue.get() {
                        queue.add_rate_limited(key.clone());
                        queue.done(&key);
                    }
                }
                // ... fires after its backoff (the bucket spaces the last ones ~90 s out) ...
                clock.step(Duration::from_secs(1000));
                // ... and succeeds.
                for _ in 0..N {
                    if let Some(key) = queue.get() {
                        queue.forget(&key);
                        queue.done(&key);
                    }
                }
                total += start.elapsed();
            }
            total
        });
    });
    group.finish();
}

/// The priority queue (controller-runtime v0.23's default): what a cycle costs against the
/// FIFO's, and what it is for, a change reconciled ahead of an initial list.
fn priority(c: &mut Criterion) {
    let mut group = c.benchmark_group("workqueue/priority");

    let hundred = keys(100);
    group.throughput(Throughput::Elements(100));
    group.bench_function("add_get_done/same_thread", |b| {
        let queue: PriorityWorkQueue<Key> =
            PriorityWorkQueue::new(default_controller_rate_limiter_with_clock(FakeClock::new()));
        b.iter(|| {
            for (i, key) in hundred.iter().enumerate() {
                queue.add_with_priority(key.clone(), if i % 2 == 0 { LOW_PRIORITY } else { 0 });
                if let Some(got) = queue.get() {
                    queue.done(black_box(&got));
                }
            }
        });
    });

    // 10,000 keys queued by the initial list, then one changed object: the time from its
    // add until `get` hands it out. The FIFO hands out the whole list first; the keys a
    // measurement took are queued again before the next one, untimed (none, for the
    // priority queue, whose list stays queued behind the change).
    let listed = keys(LISTED);
    let changed: Key = Key::from("default/changed");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    for (name, make) in queue_makers() {
        let (listed, changed) = (&listed, &changed);
        group.bench_function(format!("changed_after_10k_listed/{name}"), |b| {
            let queue = make();
            for key in listed {
                queue.add_with_priority(key.clone(), LOW_PRIORITY);
            }
            let mut taken: Vec<Key> = Vec::with_capacity(LISTED);
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    for key in taken.drain(..) {
                        queue.add_with_priority(key, LOW_PRIORITY);
                    }
                    let start = Instant::now();
                    queue.add(changed.clone());
                    while let Some(key) = queue.get() {
                        queue.done(&key);
                        if key == *changed {
                            break;
                        }
                        taken.push(key);
                    }
                    total += start.elapsed();
                }
                total
            });
        });
    }
    group.finish();
}

const LISTED: usize = 10_000;

type MakeQueue = fn() -> Box<dyn RateLimitingQueue<Key>>;

/// The two queues a controller can hold: client-go's FIFO and the priority queue.
fn queue_makers() -> [(&'static str, MakeQueue); 2] {
    [
        ("fifo", || {
            Box::new(RateLimitingWorkQueue::new(
                default_controller_rate_limiter_with_clock(FakeClock::new()),
            ))
        }),
        ("priority", || {
            Box::new(PriorityWorkQueue::new(
                default_controller_rate_limiter_with_clock(FakeClock::new()),
            ))
        }),
    ]
}

mod group {
    #![allow(
        missing_docs,
        reason = "criterion_group! generates an undocumented pub fn"
    )]
    criterion::criterion_group!(
        benches,
        super::add_get_done,
        super::contended,
        super::delaying,
        super::rate_limited,
        super::priority
    );
}

criterion_main!(group::benches);
