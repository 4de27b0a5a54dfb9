//! The churn: creates, label updates and deletes of pods from a seeded RNG, straight to
//! the API server (never through the proxy), and the ledger of every write's outcome.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

use super::subjects::rv_number;
use super::unix_nanos;

/// How long one write may take before its outcome counts as unknown.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause after a failed write before the next (the API server may be restarting).
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// The write a ledger entry is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Create,
    Update,
    Delete,
}

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
        }
    }
}

/// What became of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The API server acknowledged it; `rv` is the resourceVersion it answered with (for
    /// a delete, the deletion's; 0 when it did not say).
    Acked { rv: u64 },
    /// No answer (connection cut, timeout, 5xx): it may or may not have happened.
    Unknown,
    /// A read after an unknown create or delete: the pod is there at `Some(rv)`, or gone.
    ReadBack { rv: Option<u64> },
}

/// One line of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// When the outcome was known (for an acknowledged write: the answer's arrival).
    pub(super) unix_ns: u64,
    pub(super) op: Op,
    pub(super) name: String,
    pub(super) outcome: Outcome,
}

/// Every write's outcome, in the order they were known.
pub(super) type Ledger = Arc<Mutex<Vec<Entry>>>;

pub(super) fn lock(ledger: &Ledger) -> MutexGuard<'_, Vec<Entry>> {
    ledger.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The churn's settings: the write rate, and the bounds of the pods alive (the population
/// reverts to their middle).
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    pub(super) writes_per_sec: f64,
    pub(super) min_alive: usize,
    pub(super) max_alive: usize,
}

/// The writer: which pods it believes alive, and the ledger.
pub(super) struct Churn {
    api: Api<Pod>,
    rng: fastrand::Rng,
    settings: Settings,
    /// Pods whose last known state is present.
    alive: Vec<String>,
    /// Pods whose create or delete had an unknown outcome, to be read back.
    unresolved: Vec<(String, Op)>,
    next_id: u64,
    generation: u64,
    ledger: Ledger,
}

impl Churn {
    pub(super) fn new(api: Api<Pod>, seed: u64, settings: Settings) -> Self {
        Self {
            api,
            rng: fastrand::Rng::with_seed(seed),
            settings,
            alive: Vec::new(),
            unresolved: Vec::new(),
            next_id: 0,
            generation: 0,
            ledger: Ledger::default(),
        }
    }

    pub(super) fn ledger(&self) -> Ledger {
        Arc::clone(&self.ledger)
    }

    /// How many pods the writer believes alive.
    pub(super) fn alive(&self) -> usize {
        self.alive.len()
    }

    fn fresh_name(&mut self) -> String {
        let name = format!("soak-{:06}", self.next_id);
        self.next_id += 1;
        name
    }

    fn note(&self, op: Op, name: &str, outcome: Outcome) {
        lock(&self.ledger).push(Entry {
            unix_ns: unix_nanos(),
            op,
            name: name.to_owned(),
            outcome,
        });
    }

    /// Creates `n` pods, 16 at a time: the population the subjects list first.
    pub(super) async fn populate(&mut self, n: usize) -> anyhow::Result<()> {
        let names: Vec<String> = (0..n).map(|_| self.fresh_name()).collect();
        let api = self.api.clone();
        let results: Vec<_> = futures::stream::iter(names)
            .map(|name| {
                let api = api.clone();
                async move {
                    let r = api.create(&PostParams::default(), &pod(&name)).await;
                    (name, r)
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for (name, r) in results {
            let pod = r.map_err(|e| anyhow::anyhow!("creating pod {name}: {e}"))?;
            self.note(
                Op::Create,
                &name,
                Outcome::Acked {
                    rv: resource_version(&pod),
                },
            );
            self.alive.push(name);
        }
        Ok(())
    }

    /// Writes at the configured rate until `stop` is set.
    pub(super) async fn run(mut self, stop: Arc<AtomicBool>) -> Self {
        let period = Duration::from_secs_f64(1.0 / self.settings.writes_per_sec);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !stop.load(Ordering::SeqCst) {
            tick.tick().await;
            let ok = self.one_write().await;
            if ok {
                // The server answers again: settle one unknown outcome per write.
                self.read_back_one().await;
            } else {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
        self
    }

    /// One create, update or delete; false when it failed (refused or unknown).
    async fn one_write(&mut self) -> bool {
        let op = choose(self.alive.len(), &self.settings, self.rng.f64());
        let n = self.alive.len();
        match op {
            Op::Create => {
                let name = self.fresh_name();
                let r = timeout(self.api.create(&PostParams::default(), &pod(&name))).await;
                self.settle(op, name, r.map(|p| resource_version(&p)))
            }
            Op::Update => {
                let name = self.alive[self.rng.usize(0..n)].clone();
                self.generation += 1;
                let patch = serde_json::json!({
                    "metadata": { "labels": { "soak-generation": self.generation.to_string() } }
                });
                let r = timeout(self.api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                ))
                .await;
                self.settle(op, name, r.map(|p| resource_version(&p)))
            }
            Op::Delete => {
                let name = self.alive[self.rng.usize(0..n)].clone();
                let r = timeout(
                    self.api
                        .delete(&name, &DeleteParams::default().grace_period(0)),
                )
                .await;
                self.settle(
                    op,
                    name,
                    r.map(|either| either.left().map_or(0, |p| resource_version(&p))),
                )
            }
        }
    }

    /// Notes a write's outcome and updates what the writer believes alive.
    fn settle(&mut self, op: Op, name: String, r: Result<u64, Failure>) -> bool {
        let acked = r.is_ok();
        match (op, r) {
            (Op::Create, Ok(rv)) => {
                self.note(op, &name, Outcome::Acked { rv });
                self.alive.push(name);
            }
            (Op::Update, Ok(rv)) => self.note(op, &name, Outcome::Acked { rv }),
            (Op::Delete, Ok(rv)) => {
                self.note(op, &name, Outcome::Acked { rv });
                self.alive.retain(|n| *n != name);
            }
            // Refused: nothing happened (a create's name is simply never used).
            (_, Err(Failure::Refused)) => {}
            // Gone although the writer thought it alive: say so, and stop touching it.
            (_, Err(Failure::NotFound)) => {
                self.note(op, &name, Outcome::ReadBack { rv: None });
                self.alive.retain(|n| *n != name);
            }
            // An unknown update leaves the pod at least at its last acknowledged version.
            (Op::Update, Err(Failure::Unknown)) => self.note(op, &name, Outcome::Unknown),
            (Op::Create | Op::Delete, Err(Failure::Unknown)) => {
                self.note(op, &name, Outcome::Unknown);
                self.alive.retain(|n| *n != name);
                self.unresolved.push((name, op));
            }
        }
        acked
    }

    /// Reads back one pod whose create or delete had an unknown outcome.
    async fn read_back_one(&mut self) {
        let Some((name, op)) = self.unresolved.pop() else {
            return;
        };
        match timeout(self.api.get(&name)).await {
            Ok(p) => {
                self.note(
                    op,
                    &name,
                    Outcome::ReadBack {
                        rv: Some(resource_version(&p)),
                    },
                );
                self.alive.push(name);
            }
            Err(Failure::NotFound) => self.note(op, &name, Outcome::ReadBack { rv: None }),
            Err(Failure::Refused | Failure::Unknown) => self.unresolved.push((name, op)),
        }
    }
}

/// The next write, from `u` uniform in [0, 1): 40% label updates; creates and deletes
/// share the other 60%, weighted by how far `n` pods are from the middle of the bounds, so
/// the population reverts to the middle (200 of 100–300) and stays near it. A population
/// that wandered the whole range would grow the cache late in a long run, and RSS with it:
/// a steady working set is what lets a growing RSS mean a leak.
fn choose(n: usize, s: &Settings, u: f64) -> Op {
    if n <= s.min_alive {
        return Op::Create;
    }
    if n >= s.max_alive {
        return Op::Delete;
    }
    #[allow(clippy::cast_precision_loss)]
    let (n, lo, hi) = (n as f64, s.min_alive as f64, s.max_alive as f64);
    let mid = f64::midpoint(lo, hi);
    // +1 at the lower bound, -1 at the upper.
    let pull = ((mid - n) / (mid - lo)).clamp(-1.0, 1.0);
    if u < 0.3 * (1.0 + pull) {
        Op::Create
    } else if u < 0.6 {
        Op::Delete
    } else {
        Op::Update
    }
}

/// Why a write failed.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// A 4xx other than 404: the server refused it; nothing happened.
    Refused,
    /// 404: the pod is not there.
    NotFound,
    /// Anything else: it may or may not have happened.
    Unknown,
}

async fn timeout<T>(f: impl Future<Output = kube::Result<T>>) -> Result<T, Failure> {
    match tokio::time::timeout(WRITE_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Err(Failure::NotFound),
        Ok(Err(kube::Error::Api(s))) if s.code < 500 => Err(Failure::Refused),
        Ok(Err(_)) | Err(_) => Err(Failure::Unknown),
    }
}

fn resource_version(pod: &Pod) -> u64 {
    rv_number(pod.metadata.resource_version.as_deref().unwrap_or_default())
}

/// The pod the churn creates: testenv's minimal pod (it stays Pending: no scheduler).
fn pod(name: &str) -> Pod {
    kinformer_testenv::pod(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Settings = Settings {
        writes_per_sec: 15.0,
        min_alive: 100,
        max_alive: 300,
    };

    #[test]
    fn the_bounds_force_a_create_or_a_delete_and_the_middle_is_even() {
        for u in [0.0, 0.5, 0.99] {
            assert_eq!(choose(100, &S, u), Op::Create);
            assert_eq!(choose(300, &S, u), Op::Delete);
        }
        assert_eq!(choose(200, &S, 0.29), Op::Create);
        assert_eq!(choose(200, &S, 0.31), Op::Delete);
        assert_eq!(choose(200, &S, 0.61), Op::Update);
        assert_eq!(
            choose(299, &S, 0.001),
            Op::Create,
            "a create stays possible"
        );
    }

    #[test]
    fn the_population_reverts_to_the_middle_and_stays_steady() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut n: usize = 150;
        let mut seen = Vec::new();
        for _ in 0..30_000 {
            match choose(n, &S, rng.f64()) {
                Op::Create => n += 1,
                Op::Delete => n -= 1,
                Op::Update => {}
            }
            assert!((100..=300).contains(&n));
            seen.push(n);
        }
        let mean = |v: &[usize]| {
            #[allow(clippy::cast_precision_loss)]
            let m = v.iter().sum::<usize>() as f64 / v.len() as f64;
            m
        };
        let (middle, last) = (mean(&seen[10_000..20_000]), mean(&seen[20_000..]));
        assert!((middle - 200.0).abs() < 10.0, "{middle}");
        assert!((last - 200.0).abs() < 10.0, "{last}");
        let (lo, hi) = (
            seen[1_000..].iter().min().copied().unwrap_or(0),
            seen[1_000..].iter().max().copied().unwrap_or(0),
        );
        assert!(lo > 150 && hi < 250, "{lo}..{hi}");
    }
}
