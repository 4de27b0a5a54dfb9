//! The figures, from the ledger, the faults and a subject's events: convergence after
//! each heal, lag of writes made outside fault windows, and the resource trend.

use std::collections::HashMap;

use super::churn::{Entry, Op, Outcome};
use super::subjects::{Event, EventOp, Sample};

/// What a subject must show for one pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Present at this resourceVersion or a later one.
    Present(u64),
    Absent,
}

/// What every write acknowledged by `at_ns` asks of a subject's state: per pod, present
/// at its last acknowledged (or read-back) version, or absent. Pods whose last write
/// before `at_ns` had an unknown outcome are left out, and so are pods with a delete
/// (acknowledged or not) after `at_ns`: that delete may already have reached the
/// subject, and a pod deleted after the heal counts as covered.
fn wanted(ledger: &[Entry], at_ns: u64) -> HashMap<&str, Want> {
    let mut want: HashMap<&str, Option<Want>> = HashMap::new();
    for e in ledger.iter().filter(|e| e.unix_ns <= at_ns) {
        let w = want.entry(e.name.as_str()).or_insert(None);
        match (e.op, e.outcome) {
            (Op::Create | Op::Update, Outcome::Acked { rv }) => *w = Some(Want::Present(rv)),
            (Op::Delete, Outcome::Acked { .. }) | (_, Outcome::ReadBack { rv: None }) => {
                *w = Some(Want::Absent);
            }
            (_, Outcome::ReadBack { rv: Some(rv) }) => *w = Some(Want::Present(rv)),
            // The pod is there, at its last acknowledged version or a newer one.
            (Op::Update, Outcome::Unknown) => {}
            (Op::Create | Op::Delete, Outcome::Unknown) => *w = None,
        }
    }
    for e in ledger.iter().filter(|e| e.unix_ns > at_ns) {
        if e.op == Op::Delete {
            want.remove(e.name.as_str());
        }
    }
    want.into_iter()
        .filter_map(|(name, w)| w.map(|w| (name, w)))
        .collect()
}

fn covers(state: &HashMap<&str, u64>, name: &str, want: Want) -> bool {
    match want {
        Want::Present(rv) => state.get(name).is_some_and(|&have| have >= rv),
        Want::Absent => !state.contains_key(name),
    }
}

fn apply<'a>(state: &mut HashMap<&'a str, u64>, e: &'a Event) {
    match e.op {
        EventOp::Add | EventOp::Update => {
            state.insert(e.name.as_str(), e.rv);
        }
        EventOp::Delete => {
            state.remove(e.name.as_str());
        }
    }
}

/// Nanoseconds from `heal_ns` until the state rebuilt from `events` covers every write
/// acknowledged before it (see [`wanted`]); `None` if it never does.
pub(super) fn convergence(events: &[Event], ledger: &[Entry], heal_ns: u64) -> Option<u64> {
    let want = wanted(ledger, heal_ns);
    let mut state: HashMap<&str, u64> = HashMap::new();
    let mut rest = events.iter().peekable();
    while let Some(e) = rest.next_if(|e| e.unix_ns <= heal_ns) {
        apply(&mut state, e);
    }
    let mut missing: usize = want
        .iter()
        .filter(|(name, w)| !covers(&state, name, **w))
        .count();
    if missing == 0 {
        return Some(0);
    }
    for e in rest {
        let before = want
            .get(e.name.as_str())
            .map(|w| covers(&state, &e.name, *w));
        apply(&mut state, e);
        if let Some(before) = before {
            let after = covers(&state, &e.name, want[e.name.as_str()]);
            match (before, after) {
                (false, true) => missing -= 1,
                (true, false) => missing += 1,
                _ => {}
            }
        }
        if missing == 0 {
            return Some(e.unix_ns - heal_ns);
        }
    }
    None
}

/// The lag of acknowledged writes outside `excluded` windows (and after `from_ns`): from
/// the acknowledgement to the first event that shows it (the pod at that version or
/// later, or its delete), in milliseconds, at least 0 (a watch event may beat the
/// write's answer). Also the writes never shown.
pub(super) fn lags(
    events: &[Event],
    ledger: &[Entry],
    from_ns: u64,
    excluded: &[(u64, u64)],
) -> (Vec<f64>, Vec<String>) {
    let mut by_name: HashMap<&str, Vec<&Event>> = HashMap::new();
    for e in events {
        by_name.entry(e.name.as_str()).or_default().push(e);
    }
    let mut lags = Vec::new();
    let mut unseen = Vec::new();
    for w in ledger {
        let Outcome::Acked { rv } = w.outcome else {
            continue;
        };
        if w.unix_ns < from_ns || excluded.iter().any(|&(a, b)| (a..=b).contains(&w.unix_ns)) {
            continue;
        }
        let shown = by_name.get(w.name.as_str()).and_then(|evs| {
            evs.iter().find(|e| match w.op {
                Op::Delete => e.op == EventOp::Delete,
                Op::Create | Op::Update => e.op == EventOp::Delete || e.rv >= rv,
            })
        });
        match shown {
            #[allow(clippy::cast_precision_loss)]
            Some(e) => lags.push(e.unix_ns.saturating_sub(w.unix_ns) as f64 / 1e6),
            None => unseen.push(format!("{} {}", w.op.name(), w.name)),
        }
    }
    (lags, unseen)
}

/// p50, p99 and max of a set of values (nearest rank), and how many.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Summary {
    pub(super) n: usize,
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) max: f64,
}

impl Summary {
    pub(super) fn of(values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Self {
                n: 0,
                p50: f64::NAN,
                p99: f64::NAN,
                max: f64::NAN,
            };
        }
        v.sort_by(f64::total_cmp);
        Self {
            n: v.len(),
            p50: rank(&v, 0.50),
            p99: rank(&v, 0.99),
            max: v[v.len() - 1],
        }
    }
}

/// The nearest-rank quantile of sorted, non-empty `v`.
fn rank(v: &[f64], q: f64) -> f64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[i - 1]
}

/// A resource's median over the middle and the last third of the samples taken after
/// warm-up (`from_ns`): flat when the last is not above the middle by more than the
/// tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Trend {
    pub(super) middle: f64,
    pub(super) last: f64,
}

impl Trend {
    pub(super) fn of(
        samples: &[Sample],
        from_ns: u64,
        f: impl Fn(&Sample) -> Option<u64>,
    ) -> Option<Self> {
        let v: Vec<(u64, f64)> = samples
            .iter()
            .filter(|s| s.unix_ns >= from_ns)
            .filter_map(|s| {
                #[allow(clippy::cast_precision_loss)]
                f(s).map(|x| (s.unix_ns, x as f64))
            })
            .collect();
        let (first, last) = (v.first()?.0, v.last()?.0);
        let third = (last - first) / 3;
        let median = |lo: u64, hi: u64| {
            let xs: Vec<f64> = v
                .iter()
                .filter(|(t, _)| (lo..=hi).contains(t))
                .map(|&(_, x)| x)
                .collect();
            (!xs.is_empty()).then(|| Summary::of(&xs).p50)
        };
        Some(Self {
            middle: median(first + third, first + 2 * third)?,
            last: median(first + 2 * third, last)?,
        })
    }

    /// Whether the last third stays within `rel` (a fraction) plus `abs` of the middle.
    pub(super) fn flat(&self, rel: f64, abs: f64) -> bool {
        self.last <= self.middle * (1.0 + rel) + abs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn ack(t: u64, op: Op, name: &str, rv: u64) -> Entry {
        Entry {
            unix_ns: t * S,
            op,
            name: name.into(),
            outcome: Outcome::Acked { rv },
        }
    }

    fn unknown(t: u64, op: Op, name: &str) -> Entry {
        Entry {
            unix_ns: t * S,
            op,
            name: name.into(),
            outcome: Outcome::Unknown,
        }
    }

    fn ev(t_ms: u64, op: EventOp, name: &str, rv: u64) -> Event {
        Event {
            unix_ns: t_ms * 1_000_000,
            op,
            name: name.into(),
            rv,
            tombstone: false,
        }
    }

    #[test]
    fn convergence_is_when_every_write_before_the_heal_shows() {
        let ledger = [
            ack(1, Op::Create, "a", 10),
            ack(2, Op::Create, "b", 11),
            // During the fault (5..10 s): a updated, b deleted, c created.
            ack(6, Op::Update, "a", 12),
            ack(7, Op::Delete, "b", 13),
            ack(8, Op::Create, "c", 14),
        ];
        let events = [
            ev(1_100, EventOp::Add, "a", 10),
            ev(2_100, EventOp::Add, "b", 11),
            // After the heal at 10 s: the relist brings a and c, then b's delete.
            ev(11_000, EventOp::Update, "a", 12),
            ev(11_500, EventOp::Add, "c", 14),
            ev(12_250, EventOp::Delete, "b", 11),
        ];
        assert_eq!(convergence(&events, &ledger, 10 * S), Some(2_250_000_000));
        // Missing the delete: never.
        assert_eq!(convergence(&events[..4], &ledger, 10 * S), None);
        // Nothing missed at the heal: zero.
        assert_eq!(convergence(&events, &ledger, 3 * S), Some(0));
    }

    #[test]
    fn a_pod_deleted_after_the_heal_counts_as_covered_and_unknown_outcomes_are_skipped() {
        let ledger = [
            ack(1, Op::Create, "a", 10),
            ack(6, Op::Update, "a", 12),
            unknown(7, Op::Create, "u"),
            // Deleted after the heal at 10 s, before the subject ever saw rv 12.
            ack(11, Op::Delete, "a", 13),
        ];
        let events = [ev(1_100, EventOp::Add, "a", 10)];
        assert_eq!(convergence(&events, &ledger, 10 * S), Some(0));
    }

    #[test]
    fn an_older_version_does_not_cover_a_newer_write() {
        let ledger = [ack(1, Op::Create, "a", 10), ack(6, Op::Update, "a", 12)];
        let events = [
            ev(1_100, EventOp::Add, "a", 10),
            ev(10_500, EventOp::Update, "a", 11),
            ev(10_900, EventOp::Update, "a", 15),
        ];
        assert_eq!(convergence(&events, &ledger, 10 * S), Some(900_000_000));
    }

    #[test]
    fn lag_runs_from_the_answer_to_the_first_event_that_shows_the_write() {
        let ledger = [
            ack(1, Op::Create, "a", 10),
            ack(2, Op::Update, "a", 12),
            ack(3, Op::Delete, "a", 13),
            ack(4, Op::Create, "b", 14),
            // In an excluded window.
            ack(6, Op::Create, "c", 15),
        ];
        let events = [
            // The watch beat the answer: lag 0.
            ev(990, EventOp::Add, "a", 10),
            ev(2_030, EventOp::Update, "a", 12),
            ev(3_005, EventOp::Delete, "a", 12),
        ];
        let (lags, unseen) = lags(&events, &ledger, 0, &[(5 * S, 7 * S)]);
        assert_eq!(lags, [0.0, 30.0, 5.0]);
        assert_eq!(unseen, ["create b"]);
        let (after, _) = super::lags(&events, &ledger, 2 * S, &[]);
        assert_eq!(after.len(), 2, "writes before from_ns are left out");
    }

    #[test]
    fn summary_takes_nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        let s = Summary::of(&v);
        assert_eq!((s.n, s.p50, s.p99, s.max), (200, 100.0, 198.0, 200.0));
        assert!(Summary::of(&[]).p99.is_nan());
    }

    #[test]
    fn a_growing_resource_is_not_flat_and_a_steady_one_is() {
        let samples = |f: fn(u64) -> u64| -> Vec<Sample> {
            (0..90)
                .map(|i| Sample {
                    unix_ns: i * S,
                    rss_kib: Some(f(i)),
                    ..Sample::default()
                })
                .collect()
        };
        let steady = Trend::of(&samples(|i| 1000 + i % 7), 0, |s| s.rss_kib).unwrap();
        assert!(steady.flat(0.05, 0.0), "{steady:?}");
        let leak = Trend::of(&samples(|i| 1000 + 10 * i), 0, |s| s.rss_kib).unwrap();
        assert!(!leak.flat(0.05, 0.0), "{leak:?}");
        assert!(Trend::of(&[], 0, |s| s.rss_kib).is_none());
    }
}
