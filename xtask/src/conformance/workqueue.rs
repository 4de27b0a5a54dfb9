//! Workqueue traces: the generator, and the replayer on kinformer-workqueue.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use anyhow::{Context, bail};
use kinformer_workqueue::{
    CounterMetric, DelayingQueue, DelayingWorkQueue, FakeClock, GaugeMetric, HistogramMetric,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, MetricsProvider,
    Queue, QueueConfig, RateLimiter, RateLimitingQueue, RateLimitingWorkQueue, SettableGaugeMetric,
    WithMaxWaitRateLimiter, WorkQueue, default_controller_rate_limiter_with_clock,
};
use serde_json::{Value, json};

use super::{Observations, Rng};

const ITEMS: [&str; 5] = ["a", "b", "c", "d", "e"];

fn limiter_spec(rng: &mut Rng, depth: u32) -> Value {
    let choice = if depth > 1 {
        rng.below(3)
    } else {
        rng.below(6)
    };
    match choice {
        0 => {
            json!({ "kind": "exponential", "base_ms": 1 + rng.below(10), "max_ms": 50 + rng.below(2000) })
        }
        1 => {
            json!({ "kind": "fast_slow", "fast_ms": 1 + rng.below(10), "slow_ms": 20 + rng.below(200), "max_fast": rng.below(5) })
        }
        2 => json!({ "kind": "default" }),
        3 => {
            json!({ "kind": "max_of", "limiters": [limiter_spec(rng, depth + 1), limiter_spec(rng, depth + 1)] })
        }
        _ => {
            json!({ "kind": "max_wait", "inner": limiter_spec(rng, depth + 1), "max_ms": 1 + rng.below(300) })
        }
    }
}

/// A random trace for `seed`: one of the three queues or a bare limiter, 30-90
/// operations over five items (a bare limiter's steps move its bucket's clock). Workers
/// only `done` what they hold (`done_oldest`), and no drain is generated (its observation
/// is a timeout; the hand-written traces cover it).
pub(crate) fn generate(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let queue = *rng.pick(&["basic", "delaying", "rate_limiting", "limiter"]);
    let mut header = json!({ "trace": "workqueue", "queue": queue, "seed": seed });
    if matches!(queue, "rate_limiting" | "limiter") {
        header["limiter"] = limiter_spec(&mut rng, 0);
    }
    let mut lines = vec![header.to_string()];
    let n = 30 + rng.below(60);
    for _ in 0..n {
        let item = *rng.pick(&ITEMS);
        let op = if queue == "limiter" {
            match rng.below(10) {
                0..=6 => json!({ "op": "when", "item": item }),
                7 => json!({ "op": "forget", "item": item }),
                8 => json!({ "op": "num_requeues", "item": item }),
                // Moves the clock of a token bucket (the default limiter's), if any.
                _ => json!({ "op": "step", "ms": rng.below(120) }),
            }
        } else {
            let timed = queue != "basic";
            let limited = queue == "rate_limiting";
            match rng.below(100) {
                0..=24 => json!({ "op": "add", "item": item }),
                25..=44 => json!({ "op": "get" }),
                45..=59 => json!({ "op": "done_oldest" }),
                60..=66 => json!({ "op": "len" }),
                67..=68 => json!({ "op": "shutting_down" }),
                69 if rng.below(3) == 0 => json!({ "op": "shut_down" }),
                // Half the delays are 10, 20 or 30 ms, so that items often come due at the
                // same instant, where the order of ties (client-go's heap's) shows.
                70..=79 if timed => {
                    let ms = if rng.below(2) == 0 {
                        rng.below(200) as i64 - 5
                    } else {
                        10 * (1 + rng.below(3) as i64)
                    };
                    json!({ "op": "add_after", "item": item, "ms": ms })
                }
                // A burst: three to five items due at the same instant; a heap of three or
                // more ties is what tells client-go's order from insertion order.
                80..=82 if timed => {
                    let ms = 10 * (1 + rng.below(3));
                    let first = rng.below(ITEMS.len() as u64) as usize;
                    let count = 3 + rng.below(3) as usize;
                    for k in 0..count {
                        let item = ITEMS[(first + k) % ITEMS.len()];
                        lines
                            .push(json!({ "op": "add_after", "item": item, "ms": ms }).to_string());
                    }
                    continue;
                }
                83..=89 if timed => json!({ "op": "step", "ms": rng.below(120) }),
                90..=94 if limited => json!({ "op": "add_rate_limited", "item": item }),
                95..=97 if limited => json!({ "op": "forget", "item": item }),
                98..=99 if limited => json!({ "op": "num_requeues", "item": item }),
                _ => json!({ "op": "len" }),
            }
        };
        lines.push(op.to_string());
    }
    lines.join("\n") + "\n"
}

fn duration_ms(v: &Value) -> Duration {
    // As Go's time.Duration(ms * float64(time.Millisecond)): truncated nanoseconds, and
    // anything not positive is zero (an immediate add).
    let nanos = v.as_f64().unwrap_or(0.0) * 1e6;
    if nanos > 0.0 {
        Duration::from_nanos(nanos as u64)
    } else {
        Duration::ZERO
    }
}

fn limiter_from(spec: &Value, clock: &FakeClock) -> anyhow::Result<Box<dyn RateLimiter<String>>> {
    Ok(match spec["kind"].as_str() {
        Some("default") => Box::new(default_controller_rate_limiter_with_clock(clock.clone())),
        Some("exponential") => Box::new(ItemExponentialFailureRateLimiter::new(
            duration_ms(&spec["base_ms"]),
            duration_ms(&spec["max_ms"]),
        )),
        Some("fast_slow") => Box::new(ItemFastSlowRateLimiter::new(
            duration_ms(&spec["fast_ms"]),
            duration_ms(&spec["slow_ms"]),
            spec["max_fast"].as_u64().unwrap_or(0),
        )),
        Some("max_wait") => Box::new(WithMaxWaitRateLimiter::new(
            limiter_from(&spec["inner"], clock)?,
            duration_ms(&spec["max_ms"]),
        )),
        Some("max_of") => {
            let specs = spec["limiters"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            Box::new(MaxOfRateLimiter::new(
                specs
                    .iter()
                    .map(|s| limiter_from(s, clock))
                    .collect::<Result<_, _>>()?,
            ))
        }
        other => bail!("unknown limiter {other:?}"),
    })
}

/// What a trace's `metrics` op observes, as the peer's recorder keeps it.
#[derive(Default)]
struct Recorded {
    depth: f64,
    adds: f64,
    retries: f64,
    latency_count: u64,
    latency_sum: f64,
    work_count: u64,
    work_sum: f64,
}

/// A metrics provider that records into [`Recorded`]; every metric is a closure over it.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Recorded>>);

struct Metric(Box<dyn Fn(f64) + Send + Sync>);

impl GaugeMetric for Metric {
    fn inc(&self) {
        (self.0)(1.0);
    }
    fn dec(&self) {
        (self.0)(-1.0);
    }
}
impl CounterMetric for Metric {
    fn inc(&self) {
        (self.0)(1.0);
    }
}
impl HistogramMetric for Metric {
    fn observe(&self, value: f64) {
        (self.0)(value);
    }
}
impl SettableGaugeMetric for Metric {
    fn set(&self, _: f64) {}
}

impl Recorder {
    fn metric(&self, f: fn(&mut Recorded, f64)) -> Box<Metric> {
        let r = Arc::clone(&self.0);
        Box::new(Metric(Box::new(move |v| {
            f(&mut r.lock().unwrap_or_else(PoisonError::into_inner), v)
        })))
    }

    fn observe(&self, obs: &mut Vec<(&'static str, Value)>) {
        let r = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let ms = |secs: f64| json!((secs * 1000.0).round() as i64);
        obs.extend([
            ("depth", json!(r.depth as i64)),
            ("adds", json!(r.adds as i64)),
            ("retries", json!(r.retries as i64)),
            ("latency_count", json!(r.latency_count)),
            ("latency_sum_ms", ms(r.latency_sum)),
            ("work_count", json!(r.work_count)),
            ("work_sum_ms", ms(r.work_sum)),
        ]);
    }
}

impl MetricsProvider for Recorder {
    fn new_depth_metric(&self, _: &str) -> Box<dyn GaugeMetric> {
        self.metric(|r, v| r.depth += v)
    }
    fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        self.metric(|r, v| r.adds += v)
    }
    fn new_latency_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        self.metric(|r, v| {
            r.latency_count += 1;
            r.latency_sum += v;
        })
    }
    fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        self.metric(|r, v| {
            r.work_count += 1;
            r.work_sum += v;
        })
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> {
        self.metric(|_, _| {})
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.metric(|_, _| {})
    }
    fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        self.metric(|r, v| r.retries += v)
    }
}

/// The queue under test; every variant is a cheap handle, so the drain can run on a
/// thread of its own while the trace goes on.
#[derive(Clone)]
enum TestQueue {
    Basic(WorkQueue<String>),
    Delaying(DelayingWorkQueue<String>),
    RateLimiting(RateLimitingWorkQueue<String, Box<dyn RateLimiter<String>>>),
}

impl TestQueue {
    fn queue(&self) -> &dyn Queue<String> {
        match self {
            Self::Basic(q) => q,
            Self::Delaying(q) => q,
            Self::RateLimiting(q) => q,
        }
    }

    fn delaying(&self) -> anyhow::Result<&dyn DelayingQueue<String>> {
        match self {
            Self::Basic(_) => bail!("add_after needs a delaying queue"),
            Self::Delaying(q) => Ok(q),
            Self::RateLimiting(q) => Ok(q),
        }
    }
}

/// Replays a workqueue trace on kinformer-workqueue.
pub(crate) fn replay(header: &Value, ops: &[Value]) -> anyhow::Result<Observations> {
    let clock = FakeClock::new();
    // A named queue records metrics (client-go records none for an unnamed one).
    let recorder = Recorder::default();
    let name = header["name"].as_str().unwrap_or_default();
    let config = || {
        let provider: Arc<dyn MetricsProvider> = Arc::new(recorder.clone());
        QueueConfig::new()
            .clock(clock.clone())
            .name(name)
            .metrics_provider(provider)
    };
    let (queue, limiter): (Option<TestQueue>, Option<Box<dyn RateLimiter<String>>>) =
        match header["queue"].as_str() {
            Some("basic") => (
                Some(TestQueue::Basic(WorkQueue::with_config(config()))),
                None,
            ),
            Some("delaying") => (
                Some(TestQueue::Delaying(
                    DelayingWorkQueue::with_config(config()),
                )),
                None,
            ),
            Some("rate_limiting") => {
                let limiter = limiter_from(&header["limiter"], &clock)?;
                (
                    Some(TestQueue::RateLimiting(RateLimitingWorkQueue::with_config(
                        limiter,
                        config(),
                    ))),
                    None,
                )
            }
            Some("limiter") => (None, Some(limiter_from(&header["limiter"], &clock)?)),
            other => bail!("unknown queue {other:?}"),
        };
    let q = || {
        queue
            .as_ref()
            .map(TestQueue::queue)
            .context("this op needs a queue")
    };
    let limiter = || -> anyhow::Result<&dyn RateLimiter<String>> {
        match (&queue, &limiter) {
            (Some(TestQueue::RateLimiting(q)), _) => Ok(q.limiter()),
            (_, Some(l)) => Ok(l.as_ref()),
            _ => bail!("this op needs a rate limiter"),
        }
    };
    let mut out = Vec::new();
    let mut held: VecDeque<String> = VecDeque::new();
    let mut drained: Option<mpsc::Receiver<()>> = None;
    for (i, op) in ops.iter().enumerate() {
        let name = op["op"].as_str().unwrap_or_default();
        let item = || op["item"].as_str().unwrap_or_default().to_owned();
        let mut obs = vec![("n", json!(i + 1)), ("op", json!(name))];
        match name {
            "add" => q()?.add(item()),
            "get" => {
                let q = q()?;
                if q.is_empty() && !q.shutting_down() {
                    obs.push(("would_block", json!(true)));
                } else {
                    let got = q.get();
                    obs.push(("shutdown", json!(got.is_none())));
                    obs.push(("item", json!(got.clone().unwrap_or_default())));
                    held.extend(got);
                }
            }
            "done" => {
                let it = item();
                q()?.done(&it);
                if let Some(pos) = held.iter().position(|h| *h == it) {
                    held.remove(pos);
                }
            }
            "done_oldest" => {
                if let Some(it) = held.pop_front() {
                    q()?.done(&it);
                }
            }
            "len" => obs.push(("len", json!(q()?.len()))),
            "shut_down" => q()?.shut_down(),
            "shutting_down" => obs.push(("value", json!(q()?.shutting_down()))),
            "shut_down_with_drain" => {
                let draining = queue.clone().context("this op needs a queue")?;
                let (tx, rx) = mpsc::channel();
                std::thread::spawn(move || {
                    draining.queue().shut_down_with_drain();
                    let _ = tx.send(());
                });
                drained = Some(rx);
                // Let the drain start before the next operation, as the peer does.
                std::thread::sleep(Duration::from_millis(5));
            }
            "drained" => {
                let done = drained
                    .as_ref()
                    .is_some_and(|rx| rx.recv_timeout(Duration::from_millis(200)).is_ok());
                obs.push(("value", json!(done)));
            }
            "add_after" => queue
                .as_ref()
                .context("add_after needs a queue")?
                .delaying()?
                .add_after(item(), duration_ms(&op["ms"])),
            "step" => clock.step(duration_ms(&op["ms"])),
            "add_rate_limited" => match &queue {
                Some(TestQueue::RateLimiting(q)) => q.add_rate_limited(item()),
                _ => bail!("add_rate_limited needs a rate-limited queue"),
            },
            "forget" => limiter()?.forget(&item()),
            "num_requeues" => obs.push(("value", json!(limiter()?.num_requeues(&item())))),
            "metrics" => recorder.observe(&mut obs),
            "when" => {
                let d = limiter()?.when(&item());
                obs.push(("ms", json!((d.as_nanos() + 500_000) / 1_000_000)));
            }
            other => bail!("op {}: unknown op {other:?}", i + 1),
        }
        if obs.len() > 2 {
            out.push(super::observation(obs));
        }
    }
    if let Some(q) = &queue {
        q.queue().shut_down();
    }
    Ok(out)
}
