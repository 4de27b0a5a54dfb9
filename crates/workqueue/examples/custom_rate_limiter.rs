//! A rate limiter of your own through the `RateLimiter` trait: a per-namespace fixed delay,
//! combined with the stock exponential backoff by `MaxOfRateLimiter`, driven by a fake clock
//! so the example shows exact delays.
//!
//! Run with `cargo run -p kinformer-workqueue --example custom_rate_limiter`.
#![allow(
    clippy::print_stdout,
    reason = "an example program reports what it does"
)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kinformer_workqueue::{
    FakeClock, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, Queue, QueueConfig,
    RateLimiter, RateLimitingQueue, RateLimitingWorkQueue,
};

/// Retries of objects in a "slow" namespace wait at least `slow_delay`; counts retries per key.
struct NamespaceRateLimiter {
    slow_namespaces: Vec<String>,
    slow_delay: Duration,
    retries: Mutex<HashMap<String, usize>>,
}

impl RateLimiter<String> for NamespaceRateLimiter {
    fn when(&self, key: &String) -> Duration {
        let mut retries = self.retries.lock().unwrap_or_else(|e| e.into_inner());
        *retries.entry(key.clone()).or_default() += 1;
        let namespace = key.split_once('/').map_or("", |(namespace, _)| namespace);
        if self.slow_namespaces.iter().any(|slow| slow == namespace) {
            self.slow_delay
        } else {
            Duration::ZERO
        }
    }

    fn forget(&self, key: &String) {
        self.retries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    fn num_requeues(&self, key: &String) -> usize {
        let retries = self.retries.lock().unwrap_or_else(|e| e.into_inner());
        retries.get(key).copied().unwrap_or(0)
    }
}

fn main() {
    let clock = FakeClock::new();
    let limiter = MaxOfRateLimiter::new(Vec::new())
        .with(NamespaceRateLimiter {
            slow_namespaces: vec!["batch".to_string()],
            slow_delay: Duration::from_secs(30),
            retries: Mutex::new(HashMap::new()),
        })
        .with(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(100),
            Duration::from_secs(60),
        ));
    let queue =
        RateLimitingWorkQueue::with_config(limiter, QueueConfig::new().clock(clock.clone()));

    // Both keys fail once.
    queue.add_rate_limited("default/web".to_string());
    queue.add_rate_limited("batch/report".to_string());

    clock.step(Duration::from_millis(100));
    println!("after 100ms: {:?} ready", queue.len()); // default/web (exponential: 100 ms)
    if let Some(key) = queue.get() {
        println!("got {key}, retried {} time(s)", queue.num_requeues(&key));
        queue.forget(&key);
        queue.done(&key);
    }

    clock.step(Duration::from_secs(30));
    println!("after 30s: {:?} ready", queue.len()); // batch/report (namespace: 30 s)
    if let Some(key) = queue.get() {
        println!("got {key}, retried {} time(s)", queue.num_requeues(&key));
        queue.forget(&key);
        queue.done(&key);
    }
    queue.shut_down();
}
