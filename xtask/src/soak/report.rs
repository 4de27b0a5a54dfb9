//! The report: the side-by-side table, the per-fault table, the raw results as JSON and
//! the RSS chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use super::chaos::{Fault, Kind};
use super::churn::{Entry, Outcome};
use super::figures::{Summary, Trend};
use super::subjects::{Dump, EventOp, Log, Subject};
use super::{Config, Targets};

/// What one subject did and how it fared.
pub(super) struct SubjectResult {
    pub(super) subject: Subject,
    pub(super) log: Log,
    /// The dump the checks used.
    pub(super) dump: Dump,
    /// Seconds from the churn's end until it matched the LIST; `None`: not within the
    /// settle timeout.
    pub(super) settled_s: Option<f64>,
    /// Per fault: seconds from the heal to convergence (`None`: never).
    pub(super) convergence_s: Vec<Option<f64>>,
    pub(super) lag_ms: Vec<f64>,
    pub(super) unseen: Vec<String>,
    pub(super) violations: Vec<String>,
    /// Resource name, its trend after warm-up, whether it is flat.
    pub(super) trends: Vec<(&'static str, Option<Trend>, bool)>,
}

impl SubjectResult {
    pub(super) fn convergence(&self) -> Summary {
        let v: Vec<f64> = self.convergence_s.iter().flatten().copied().collect();
        Summary::of(&v)
    }

    fn not_converged(&self) -> usize {
        self.convergence_s.iter().filter(|c| c.is_none()).count()
    }

    pub(super) fn lag(&self) -> Summary {
        Summary::of(&self.lag_ms)
    }

    /// Whether the targets hold: convergence p99 and lag p99 (and every fault converged).
    pub(super) fn meets(&self, t: &Targets) -> (bool, bool) {
        let c = self.convergence();
        let l = self.lag();
        (
            self.not_converged() == 0 && (c.n == 0 || c.p99 <= t.convergence_p99_s),
            l.n > 0 && l.p99 <= t.lag_p99_ms,
        )
    }

    fn slow_backlog(&self) -> u64 {
        self.log
            .samples
            .iter()
            .map(|s| s.recorded.saturating_sub(s.slow))
            .max()
            .unwrap_or_default()
    }
}

fn num(v: f64, precision: usize) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.precision$}")
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "–".into(), |v| v.to_string())
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

/// How many faults of each kind, as a sentence.
pub(super) fn faults_line(faults: &[Fault], ledger: &[Entry]) -> String {
    let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
    for f in faults {
        *by_kind.entry(f.plan.kind).or_default() += 1;
    }
    // The control plane starts with its watch cache on.
    let mut cache = true;
    let mut switched = 0;
    for f in faults {
        if f.plan.kind == Kind::Restart && f.watch_cache_after != cache {
            switched += 1;
        }
        cache = f.watch_cache_after;
    }
    let kinds: Vec<String> = Kind::ALL
        .iter()
        .map(|k| {
            let n = by_kind.get(k).copied().unwrap_or_default();
            if *k == Kind::Restart {
                format!("{n} {} ({switched} switching the watch cache)", k.name())
            } else {
                format!("{n} {}", k.name())
            }
        })
        .collect();
    let acked = ledger
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Acked { .. }))
        .count();
    let unknown = ledger
        .iter()
        .filter(|e| e.outcome == Outcome::Unknown)
        .count();
    format!(
        "{} faults: {}. {acked} writes acknowledged, {unknown} with an unknown outcome.",
        faults.len(),
        kinds.join(", ")
    )
}

/// The side-by-side table, as markdown.
pub(super) fn table(results: &[SubjectResult], faults: &[Fault], targets: &Targets) -> String {
    let mut t = String::new();
    let head: Vec<&str> = results.iter().map(|r| r.subject.name()).collect();
    let _ = writeln!(t, "| | {} |", head.join(" | "));
    let _ = writeln!(t, "| --- |{}", " ---: |".repeat(results.len()));
    let mut row = |label: &str, f: &dyn Fn(&SubjectResult) -> String| {
        let cells: Vec<String> = results.iter().map(f).collect();
        let _ = writeln!(t, "| {label} | {} |", cells.join(" | "));
    };
    row("notifications (add / update / delete)", &|r| {
        let count = |op| r.log.events.iter().filter(|e| e.op == op).count();
        format!(
            "{} ({} / {} / {})",
            r.log.events.len(),
            count(EventOp::Add),
            count(EventOp::Update),
            count(EventOp::Delete)
        )
    });
    row("deletes as tombstones", &|r| {
        r.log
            .events
            .iter()
            .filter(|e| e.tombstone)
            .count()
            .to_string()
    });
    row("relists (by reason)", &|r| match r.dump.relists {
        Some(n) => {
            let reasons: Vec<String> = r
                .dump
                .lists_by_reason
                .iter()
                .filter(|(reason, k)| **k > 0 && reason.as_str() != "initial")
                .map(|(reason, k)| format!("{reason} {k}"))
                .collect();
            if reasons.is_empty() {
                n.to_string()
            } else {
                format!("{n} ({})", reasons.join(", "))
            }
        }
        None => "–".into(),
    });
    row("convergence after heal p50 / p99 / max, s", &|r| {
        let c = r.convergence();
        format!("{} / {} / {}", num(c.p50, 2), num(c.p99, 2), num(c.max, 2))
    });
    row(
        "convergence max by kind, s (partition / + compaction / restart / compaction / subject killed)",
        &|r| {
            Kind::ALL
                .iter()
                .map(|k| {
                    let v: Vec<f64> = faults
                        .iter()
                        .zip(&r.convergence_s)
                        .filter(|(f, _)| f.plan.kind == *k)
                        .filter_map(|(_, c)| *c)
                        .collect();
                    num(Summary::of(&v).max, 2)
                })
                .collect::<Vec<_>>()
                .join(" / ")
        },
    );
    row("faults not converged by the end", &|r| {
        r.not_converged().to_string()
    });
    row("convergence after the last heal, s", &|r| {
        r.convergence_s.last().map_or_else(
            || "–".into(),
            |c| c.map_or_else(|| "never".into(), |c| num(c, 2)),
        )
    });
    row(
        "lag outside fault windows p50 / p99 / max, ms (writes)",
        &|r| {
            let l = r.lag();
            format!(
                "{} / {} / {} ({})",
                num(l.p50, 0),
                num(l.p99, 0),
                num(l.max, 0),
                l.n
            )
        },
    );
    row("writes outside fault windows never seen", &|r| {
        r.unseen.len().to_string()
    });
    row("panics thrown (every 7th event)", &|r| {
        r.dump.panics.to_string()
    });
    row("slow handler's largest backlog, events", &|r| {
        r.slow_backlog().to_string()
    });
    row("RSS first → last (max), MiB", &|r| {
        let rss: Vec<f64> = r
            .log
            .samples
            .iter()
            .filter_map(|s| s.rss_kib)
            .map(mib)
            .collect();
        match (rss.first(), rss.last()) {
            (Some(a), Some(b)) => format!(
                "{a:.1} → {b:.1} ({:.1})",
                rss.iter().copied().fold(0.0, f64::max)
            ),
            _ => "–".into(),
        }
    });
    row("fds / threads / tasks, last (max)", &|r| {
        let last = r.log.samples.last();
        let max = |f: fn(&super::subjects::Sample) -> Option<u64>| {
            r.log.samples.iter().filter_map(f).max()
        };
        format!(
            "{} / {} / {} ({} / {} / {})",
            opt(last.and_then(|s| s.fds)),
            opt(last.and_then(|s| s.threads)),
            opt(last.and_then(|s| s.tasks)),
            opt(max(|s| s.fds)),
            opt(max(|s| s.threads)),
            opt(max(|s| s.tasks)),
        )
    });
    row("matched the LIST after the churn stopped, s", &|r| {
        r.settled_s
            .map_or_else(|| "**not in time**".into(), |s| num(s, 1))
    });
    row("correctness checks", &|r| {
        if r.violations.is_empty() {
            "passed".into()
        } else {
            format!("**FAILED** ({})", r.violations.len())
        }
    });
    row(
        &format!("target: convergence p99 ≤ {} s", targets.convergence_p99_s),
        &|r| verdict(r.meets(targets).0).into(),
    );
    row(
        &format!("target: lag p99 ≤ {} ms", targets.lag_p99_ms),
        &|r| verdict(r.meets(targets).1).into(),
    );
    t
}

/// One row per fault: its kind, when, how long, and each subject's convergence.
pub(super) fn fault_table(faults: &[Fault], results: &[SubjectResult], t0_ns: u64) -> String {
    let mut t = String::new();
    let head: Vec<&str> = results.iter().map(|r| r.subject.name()).collect();
    let _ = writeln!(
        t,
        "| # | fault | at, s | held, s | watch cache after | {} |",
        head.join(" | ")
    );
    let _ = writeln!(
        t,
        "| ---: | --- | ---: | ---: | --- |{}",
        " ---: |".repeat(results.len())
    );
    for (i, f) in faults.iter().enumerate() {
        let cells: Vec<String> = results
            .iter()
            .map(|r| match r.convergence_s.get(i).copied().flatten() {
                Some(c) => num(c, 2),
                None => "never".into(),
            })
            .collect();
        #[allow(clippy::cast_precision_loss)]
        let at = f.start_ns.saturating_sub(t0_ns) as f64 / 1e9;
        let _ = writeln!(
            t,
            "| {} | {} | {at:.0} | {:.1} | {} | {} |",
            i + 1,
            f.plan.kind.name(),
            f.plan.hold.as_secs_f64(),
            if f.watch_cache_after { "on" } else { "off" },
            cells.join(" | ")
        );
    }
    t
}

#[allow(clippy::cast_precision_loss)]
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The raw results.
pub(super) fn json(
    cfg: &Config,
    t0_ns: u64,
    faults: &[Fault],
    ledger: &[Entry],
    results: &[SubjectResult],
    targets: &Targets,
) -> Value {
    let faults: Vec<Value> = faults
        .iter()
        .map(|f| {
            json!({
                "kind": f.plan.kind.name(),
                "gap_s": f.plan.gap.as_secs_f64(),
                "hold_s": f.plan.hold.as_secs_f64(),
                "start_unix_ns": f.start_ns,
                "heal_unix_ns": f.heal_ns,
                "watch_cache_after": f.watch_cache_after,
                "compacted_revision": f.compacted,
            })
        })
        .collect();
    let subjects: Vec<Value> = results
        .iter()
        .map(|r| {
            let summary = |s: Summary| json!({"n": s.n, "p50": finite(s.p50), "p99": finite(s.p99), "max": finite(s.max)});
            let (conv_ok, lag_ok) = r.meets(targets);
            json!({
                "subject": r.subject.name(),
                "synced_unix_ns": r.log.synced_ns,
                "notifications": r.log.events.len(),
                "tombstones": r.log.events.iter().filter(|e| e.tombstone).count(),
                "relists": r.dump.relists,
                "lists_by_reason": r.dump.lists_by_reason,
                "last_sync_rv": r.dump.last_sync_rv,
                "panics": r.dump.panics,
                "settled_s": r.settled_s,
                "convergence_s": r.convergence_s,
                "convergence": summary(r.convergence()),
                "lag_ms": summary(r.lag()),
                "unseen_writes": r.unseen,
                "violations": r.violations,
                "targets_met": {"convergence": conv_ok, "lag": lag_ok},
                "trends": r.trends.iter().map(|(name, t, flat)| json!({
                    "resource": name,
                    "middle_third_median": t.map(|t| t.middle),
                    "last_third_median": t.map(|t| t.last),
                    "flat": flat,
                })).collect::<Vec<_>>(),
                "samples": r.log.samples.iter().map(|s| json!({
                    "t_s": secs_since(t0_ns, s.unix_ns),
                    "rss_kib": s.rss_kib, "fds": s.fds, "threads": s.threads, "tasks": s.tasks,
                    "recorded": s.recorded, "slow": s.slow, "panics": s.panics, "relists": s.relists,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "command": cfg.command,
        "seed": cfg.seed,
        "churn_s": cfg.churn.as_secs_f64(),
        "release_build": cfg.release,
        "start_unix_ns": t0_ns,
        "writes": ledger.len(),
        "targets": {"convergence_p99_s": targets.convergence_p99_s, "lag_p99_ms": targets.lag_p99_ms},
        "faults": faults,
        "subjects": subjects,
    })
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

#[allow(clippy::cast_precision_loss)]
fn secs_since(t0_ns: u64, t_ns: u64) -> f64 {
    t_ns.saturating_sub(t0_ns) as f64 / 1e9
}

/// The ledger, one JSON line per write.
pub(super) fn ledger_lines(ledger: &[Entry]) -> String {
    let mut s = String::new();
    for e in ledger {
        let (outcome, rv) = match e.outcome {
            Outcome::Acked { rv } => ("acked", Some(rv)),
            Outcome::Unknown => ("unknown", None),
            Outcome::ReadBack { rv } => ("read_back", rv),
        };
        let _ = writeln!(
            s,
            "{}",
            json!({"unix_ns": e.unix_ns, "op": e.op.name(), "name": e.name, "outcome": outcome, "rv": rv})
        );
    }
    s
}

fn color(s: Subject) -> plotters::style::RGBColor {
    match s {
        Subject::DeltaFifo => plotters::style::RGBColor(0x94, 0x67, 0xbd),
        Subject::InOrder => plotters::style::RGBColor(0xff, 0x7f, 0x0e),
        Subject::InOrderAtomic => plotters::style::RGBColor(0xd6, 0x27, 0x28),
        Subject::Snapshots => plotters::style::RGBColor(0x2c, 0xa0, 0x2c),
        Subject::ClientGo => plotters::style::RGBColor(0x1f, 0x77, 0xb4),
    }
}

/// The pods alive by the ledger (acknowledged creates and deletes, read-backs), one point
/// per second: (minutes since `t0_ns`, pods).
fn alive_series(ledger: &[Entry], t0_ns: u64) -> Vec<(f64, f64)> {
    let mut alive = std::collections::HashSet::new();
    let mut out: Vec<(f64, f64)> = Vec::new();
    for e in ledger {
        match (e.op, e.outcome) {
            (super::churn::Op::Create, Outcome::Acked { .. })
            | (_, Outcome::ReadBack { rv: Some(_) }) => {
                alive.insert(e.name.as_str());
            }
            (super::churn::Op::Delete, Outcome::Acked { .. })
            | (_, Outcome::ReadBack { rv: None }) => {
                alive.remove(e.name.as_str());
            }
            _ => continue,
        }
        let t = secs_since(t0_ns, e.unix_ns);
        #[allow(clippy::cast_precision_loss)]
        let point = (t / 60.0, alive.len() as f64);
        match out.last_mut() {
            Some(last) if t - last.0 * 60.0 < 1.0 => last.1 = point.1,
            _ => out.push(point),
        }
    }
    out
}

/// RSS over time, one line per subject, with the faults' start times as ticks; below it,
/// the pods alive (the cache's size).
pub(super) fn rss_chart(
    path: &Path,
    results: &[SubjectResult],
    faults: &[Fault],
    ledger: &[Entry],
    t0_ns: u64,
    title: &str,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let series: Vec<(Subject, Vec<(f64, f64)>)> = results
        .iter()
        .map(|r| {
            let pts = r
                .log
                .samples
                .iter()
                .filter_map(|s| {
                    s.rss_kib
                        .map(|k| (secs_since(t0_ns, s.unix_ns) / 60.0, mib(k)))
                })
                .collect();
            (r.subject, pts)
        })
        .collect();
    let alive = alive_series(ledger, t0_ns);
    let max_x = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .fold(0.1, f64::max);
    let max_y = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(440);
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..max_x * 1.02, 0.0..max_y * 1.15)?;
    chart.configure_mesh().y_desc("RSS, MiB").draw()?;
    let grey = RGBColor(0xbb, 0xbb, 0xbb);
    chart.draw_series(faults.iter().map(|f| {
        let x = secs_since(t0_ns, f.start_ns) / 60.0;
        PathElement::new(vec![(x, 0.0), (x, max_y * 0.04)], grey.stroke_width(1))
    }))?;
    for (s, pts) in series {
        let c = color(s);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(s.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    let max_alive = alive.iter().map(|&(_, n)| n).fold(1.0, f64::max);
    let mut pods = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..max_x * 1.02, 0.0..max_alive * 1.1)?;
    pods.configure_mesh()
        .x_desc("minutes since the churn started")
        .y_desc("pods alive")
        .y_labels(4)
        .draw()?;
    pods.draw_series(LineSeries::new(alive, BLACK.stroke_width(1)))?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
