//! What the priority queue is for, measured: a controller has just listed 10,000 objects
//! (queued at `LOW_PRIORITY`, as controller-runtime's handlers queue an initial list) when one
//! object changes. How long until the change is reconciled, behind client-go's FIFO and
//! behind the priority queue?
//!
//! ```sh
//! cargo run --release -p kinformer-workqueue --example priority_after_initial_list
//! ```
//!
//! Two measurements: how many `get`s hand out the changed key (exact, one thread), and the
//! time until its reconcile has finished with two worker threads whose reconcile takes 100 µs
//! (a sleep, so the two cores stay free; the median of five runs). BENCHMARKS.md records the
//! output ("workqueue priority").
//!
//! Then the other side, starvation: the same list, and a steady stream of changes (one added
//! before every `get`). How many `get`s until the *last* listed key is handed out, in strict
//! priority order (controller-runtime's queue; `PriorityStorage` without fairness) and in the
//! `PriorityWorkQueue`'s (one get in `DEFAULT_FAIR_EVERY` takes the key queued longest)?
#![allow(clippy::print_stdout, reason = "a measuring program prints its table")]

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use kinformer_workqueue::{
    DEFAULT_FAIR_EVERY, FakeClock, LOW_PRIORITY, PriorityStorage, PriorityWorkQueue, Queue,
    QueueConfig, RateLimitingQueue, RateLimitingWorkQueue, WorkQueue,
    default_controller_rate_limiter_with_clock,
};

type Key = Arc<str>;

const LISTED: usize = 10_000;
const WORKERS: usize = 2;
const RECONCILE: Duration = Duration::from_micros(100);
const RUNS: usize = 5;

fn fifo() -> Box<dyn RateLimitingQueue<Key>> {
    Box::new(RateLimitingWorkQueue::new(
        default_controller_rate_limiter_with_clock(FakeClock::new()),
    ))
}

fn priority() -> Box<dyn RateLimitingQueue<Key>> {
    Box::new(PriorityWorkQueue::new(
        default_controller_rate_limiter_with_clock(FakeClock::new()),
    ))
}

/// Queues the initial list at low priority.
fn list(queue: &dyn RateLimitingQueue<Key>) {
    for i in 0..LISTED {
        queue.add_with_priority(Key::from(format!("default/listed-{i}")), LOW_PRIORITY);
    }
}

/// How many `get`s until the changed key is handed out.
fn gets_until_changed(queue: &dyn RateLimitingQueue<Key>) -> usize {
    list(queue);
    let changed = Key::from("default/changed");
    queue.add(changed.clone());
    let mut gets = 0;
    while let Some(key) = queue.get() {
        gets += 1;
        queue.done(&key);
        if key == changed {
            break;
        }
    }
    gets
}

/// The time from the change's add until its reconcile has finished, with the workers
/// already busy on the list.
fn time_until_reconciled(queue: &dyn RateLimitingQueue<Key>) -> Duration {
    list(queue);
    let changed = Key::from("default/changed");
    thread::scope(|scope| {
        let (reconciled, finished) = mpsc::channel();
        for _ in 0..WORKERS {
            let (changed, reconciled) = (&changed, reconciled.clone());
            scope.spawn(move || {
                while let Some(key) = queue.get() {
                    thread::sleep(RECONCILE);
                    if key == *changed {
                        let _ = reconciled.send(Instant::now());
                    }
                    queue.done(&key);
                }
            });
        }
        let start = Instant::now();
        queue.add(changed.clone());
        let end = finished.recv().unwrap_or(start);
        // Stop: shut down, and take what is left so that the workers end soon.
        queue.shut_down();
        while let Some(key) = queue.get() {
            queue.done(&key);
        }
        end - start
    })
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

/// Gets until the last listed key is handed out while a change is added before every get;
/// `None` when it is not within `cap` gets.
fn gets_until_last_listed(queue: &dyn Queue<Key>, cap: usize) -> Option<usize> {
    for i in 0..LISTED {
        queue.add_with_priority(Key::from(format!("default/listed-{i}")), LOW_PRIORITY);
    }
    let last = Key::from(format!("default/listed-{}", LISTED - 1));
    for gets in 1..=cap {
        queue.add(Key::from(format!("default/changed-{gets}")));
        let key = queue.get()?;
        queue.done(&key);
        if key == last {
            return Some(gets);
        }
    }
    None
}

fn starvation() {
    const CAP: usize = 1_000_000;
    println!();
    println!(
        "{LISTED} keys listed (LOW_PRIORITY), then one change (priority 0) added before every get"
    );
    println!();
    println!("| order | gets until the last listed key | changes handed out meanwhile |");
    println!("| --- | ---: | ---: |");
    let strict = WorkQueue::with_storage(PriorityStorage::new(), QueueConfig::new());
    let fair = WorkQueue::with_priorities(QueueConfig::new());
    for (name, queue) in [
        (
            "strict priority (controller-runtime)",
            &strict as &dyn Queue<Key>,
        ),
        (
            "`PriorityWorkQueue` (fair every {DEFAULT_FAIR_EVERY})",
            &fair,
        ),
    ] {
        let name = name.replace("{DEFAULT_FAIR_EVERY}", &DEFAULT_FAIR_EVERY.to_string());
        match gets_until_last_listed(queue, CAP) {
            Some(gets) => println!("| {name} | {gets} | {} |", gets - LISTED),
            None => println!("| {name} | never (not within {CAP}) | {CAP} |"),
        }
    }
}

fn main() {
    println!(
        "{LISTED} keys queued by the initial list (LOW_PRIORITY), then one changed key (priority 0)"
    );
    println!();
    println!(
        "| queue | gets until the changed key | time until it is reconciled ({WORKERS} workers, {} µs reconcile; median of {RUNS}) | min – max |",
        RECONCILE.as_micros()
    );
    println!("| --- | ---: | ---: | ---: |");
    for (name, make) in [
        (
            "client-go FIFO (`RateLimitingWorkQueue`)",
            fifo as fn() -> _,
        ),
        ("`PriorityWorkQueue`", priority),
    ] {
        let gets = gets_until_changed(&*make());
        let runs: Vec<Duration> = (0..RUNS).map(|_| time_until_reconciled(&*make())).collect();
        let (min, max) = (runs.iter().min().copied(), runs.iter().max().copied());
        println!(
            "| {name} | {gets} | {:.2?} | {:.2?} – {:.2?} |",
            median(runs),
            min.unwrap_or_default(),
            max.unwrap_or_default()
        );
    }
    starvation();
}
