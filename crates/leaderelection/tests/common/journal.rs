//! The peers' journals and what they say: each process's terms of leadership on the shared
//! wall clock, and whether two ever overlap.

use std::fmt;
use std::path::Path;
use std::time::Duration;

/// One journal line (see `examples/leader_peer.rs` and `xtask/go/cmd/leader-peer`).
#[derive(Clone, Debug)]
pub struct Line {
    pub t: i128,
    pub id: String,
    pub ev: String,
    pub until: Option<i128>,
    /// When the write that a `renew` / `start` line reports was sent.
    pub sent: Option<i128>,
    pub leader: Option<String>,
}

pub fn read_journal(path: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        // A process killed mid-write leaves at most a partial last line.
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            Some(Line {
                t: i128::from(v.get("t")?.as_u64()?),
                id: v.get("id")?.as_str()?.to_owned(),
                ev: v.get("ev")?.as_str()?.to_owned(),
                until: v
                    .get("until")
                    .and_then(serde_json::Value::as_u64)
                    .map(i128::from),
                sent: v
                    .get("sent")
                    .and_then(serde_json::Value::as_u64)
                    .map(i128::from),
                leader: v.get("leader").and_then(|l| l.as_str()).map(str::to_owned),
            })
        })
        .collect()
}

/// One term of leadership of one process, as the process believed it: from its first
/// successful write (or start) to the deadline it last logged, cut short by its own stop
/// or its death.
#[derive(Clone, Debug)]
pub struct Interval {
    pub id: String,
    pub kind: String,
    pub start: i128,
    pub end: i128,
    /// When its last successful write was sent (no later than the server stored it).
    pub last_sent: i128,
    /// When its first successful write within the same wall-clock second as the last one
    /// was sent. client-go's candidates compare records as JSON with `metav1.Time`, which
    /// has whole seconds: to them, writes within one second are one unchanged record.
    pub last_second_first_sent: i128,
}

impl Interval {
    /// From when a standby of `kind` counts the lease of this term's holder once it stopped
    /// writing: its last write for kinformer (which compares records exactly), the first
    /// write of that last second for client-go.
    pub fn lease_counted_from(&self, kind: &str) -> i128 {
        if kind == "go" {
            self.last_second_first_sent
        } else {
            self.last_sent
        }
    }

    fn wrote(&mut self, sent: i128) {
        if sent.div_euclid(1_000_000_000) != self.last_sent.div_euclid(1_000_000_000) {
            self.last_second_first_sent = sent;
        }
        self.last_sent = sent;
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) {:.3}..{:.3}",
            self.id,
            self.kind,
            secs(self.start),
            secs(self.end)
        )
    }
}

pub fn secs(ns: i128) -> f64 {
    // Precision is not a concern at the scale of a test run.
    #[allow(clippy::cast_precision_loss)]
    let s = ns as f64 / 1e9;
    s
}

pub fn duration(ns: i128) -> Duration {
    Duration::from_nanos(u64::try_from(ns.max(0)).unwrap_or(u64::MAX))
}

/// The terms in `lines` (one process's journal), `ended_at` being when the process died or
/// exited (`None`: still running).
pub fn intervals(kind: &str, lines: &[Line], ended_at: Option<i128>) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut open: Option<Interval> = None;
    for line in lines {
        match (line.ev.as_str(), line.until) {
            ("start" | "renew", Some(until)) => match &mut open {
                Some(o) => {
                    o.end = o.end.max(until);
                    o.wrote(line.sent.unwrap_or(line.t));
                }
                None => {
                    open = Some(Interval {
                        id: line.id.clone(),
                        kind: kind.to_owned(),
                        start: line.t,
                        end: until,
                        last_sent: line.sent.unwrap_or(line.t),
                        last_second_first_sent: line.sent.unwrap_or(line.t),
                    });
                }
            },
            ("stop" | "exit", _) => {
                if let Some(mut o) = open.take() {
                    o.end = o.end.min(line.t);
                    out.push(o);
                }
            }
            _ => {}
        }
    }
    if let Some(mut o) = open {
        if let Some(ended) = ended_at {
            o.end = o.end.min(ended);
        }
        out.push(o);
    }
    out
}

/// The pairs of terms that overlap, over all processes.
pub fn overlaps(all: &[Interval]) -> Vec<(Interval, Interval)> {
    let mut sorted = all.to_vec();
    sorted.sort_by_key(|i| i.start);
    let mut found = Vec::new();
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            if b.start >= a.end {
                break;
            }
            found.push((a.clone(), b.clone()));
        }
    }
    found
}

/// The closest a handover between two processes came: the smallest gap between one term's
/// end and the next one's start when they are different processes (a process that takes
/// the lease again after its own term may do so at once).
pub fn closest_handover(all: &[Interval]) -> Option<(i128, Interval, Interval)> {
    let mut sorted = all.to_vec();
    sorted.sort_by_key(|i| i.start);
    sorted
        .windows(2)
        .filter(|w| w[0].id != w[1].id)
        .map(|w| (w[1].start - w[0].end, w[0].clone(), w[1].clone()))
        .min_by_key(|(gap, _, _)| *gap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: i128, ev: &str, until: Option<i128>) -> Line {
        Line {
            t,
            id: "p".into(),
            ev: ev.into(),
            until,
            sent: None,
            leader: None,
        }
    }

    #[test]
    fn a_term_runs_to_the_last_deadline_cut_by_stop_or_death() {
        let lines = [
            line(0, "leader", None),
            line(10, "renew", Some(30)),
            line(20, "renew", Some(40)),
            line(45, "stop", None),
            line(50, "stop", None), // client-go's stop after a run that did not lead
            line(60, "start", Some(80)),
            line(70, "renew", Some(90)),
        ];
        let terms = intervals("rust", &lines, Some(75));
        assert_eq!(terms.len(), 2);
        assert_eq!((terms[0].start, terms[0].end), (10, 40));
        assert_eq!((terms[1].start, terms[1].end), (60, 75), "died at 75");
        let still_running = intervals("rust", &lines, None);
        assert_eq!(still_running[1].end, 90);
    }

    #[test]
    fn client_go_counts_the_lease_from_the_first_write_of_the_last_second() {
        let s = 1_000_000_000;
        let renew = |t: i128| Line {
            sent: Some(t),
            ..line(t, "renew", Some(t + 3 * s))
        };
        let lines = [
            renew(10 * s + 100),
            renew(11 * s + 200),
            renew(11 * s + 700),
            renew(11 * s + 900),
        ];
        let term = &intervals("rust", &lines, None)[0];
        assert_eq!(term.lease_counted_from("rust"), 11 * s + 900);
        assert_eq!(term.lease_counted_from("go"), 11 * s + 200);
    }

    #[test]
    fn overlaps_are_found_across_processes() {
        let i = |id: &str, start, end| Interval {
            id: id.into(),
            kind: "go".into(),
            start,
            end,
            last_sent: start,
            last_second_first_sent: start,
        };
        assert!(overlaps(&[i("a", 0, 10), i("b", 10, 20), i("c", 25, 30)]).is_empty());
        let found = overlaps(&[i("a", 0, 10), i("b", 9, 20), i("c", 15, 30)]);
        assert_eq!(found.len(), 2);
        let (gap, _, _) = closest_handover(&[
            i("a", 0, 10),
            i("a", 10, 11),
            i("b", 13, 20),
            i("c", 25, 30),
        ])
        .unwrap();
        assert_eq!(gap, 2);
    }
}
