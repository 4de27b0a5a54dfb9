//! The workqueue on its own, with worker threads: the controller loop of client-go's
//! examples (Get, process, then Forget + Done on success or AddRateLimited + Done on a
//! failure, giving up after a few retries), without any Kubernetes.
//!
//! Run with `cargo run -p kinformer-workqueue --example workqueue_only`.
#![allow(
    clippy::print_stdout,
    reason = "an example program reports what it does"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use kinformer_workqueue::{
    ItemExponentialFailureRateLimiter, Queue, QueueConfig, RateLimitingQueue, RateLimitingWorkQueue,
};

const MAX_RETRIES: usize = 3;

/// Pretend work: keys ending in "flaky" fail twice, "broken" always fails.
fn reconcile(key: &str, attempt: usize) -> Result<(), String> {
    if key.ends_with("broken") || (key.ends_with("flaky") && attempt < 2) {
        Err(format!("{key}: not ready (attempt {attempt})"))
    } else {
        Ok(())
    }
}

fn main() {
    // Short backoffs so the example finishes quickly; a controller would use
    // `default_controller_rate_limiter()`.
    let queue: RateLimitingWorkQueue<String, _> = RateLimitingWorkQueue::with_config(
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1)),
        QueueConfig::new().name("example"),
    );
    let succeeded = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..3)
        .map(|worker| {
            let (queue, succeeded, dropped) = (queue.clone(), succeeded.clone(), dropped.clone());
            thread::spawn(move || {
                while let Some(key) = queue.get() {
                    let attempt = queue.num_requeues(&key);
                    match reconcile(&key, attempt) {
                        Ok(()) => {
                            println!("worker {worker}: {key} done after {attempt} retries");
                            queue.forget(&key);
                            succeeded.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(error) if attempt < MAX_RETRIES => {
                            println!("worker {worker}: {error}, retrying");
                            queue.add_rate_limited(key.clone());
                        }
                        Err(error) => {
                            println!("worker {worker}: {error}, giving up");
                            queue.forget(&key);
                            dropped.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    queue.done(&key);
                }
            })
        })
        .collect();

    for key in [
        "default/web",
        "default/db-flaky",
        "kube-system/dns",
        "default/cache-broken",
    ] {
        queue.add(key.to_string());
    }
    // Wait until every key succeeded or was given up on, then stop the workers.
    while succeeded.load(Ordering::SeqCst) + dropped.load(Ordering::SeqCst) < 4 {
        thread::sleep(Duration::from_millis(5));
    }
    queue.shut_down_with_drain();
    for worker in workers {
        worker.join().expect("worker panicked");
    }
    println!(
        "{} succeeded, {} dropped",
        succeeded.load(Ordering::SeqCst),
        dropped.load(Ordering::SeqCst)
    );
}
