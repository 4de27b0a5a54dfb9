//! `--reads`: what reading a synced cache costs, client-go's against kinformer's.
//!
//! For every `--pods` count above 0 the pods are created once
//! ([`kinformer_testenv::apply_realistic_pods`], in a namespace of their own); then `--runs`
//! rounds of one process per side, the sides rotating (each goes first in turn):
//! `informer-peer --reads`, `kinformer-contender --reads` and `kinformer-contender --reads
//! --store decoded`, each with its defaults (protobuf, `managedFields` kept, no transform;
//! kinformer's default cache of `Cached<Pod>`s, or its decoded informer of `Pod`s, client-go's
//! cache), one more index `byNode` and one add handler that reads each
//! pod's `spec.nodeName` (the protocol and the workload are in the docs of
//! `bench/informer/src/reads.rs`). Each process prints its sync line, then, once its handler
//! has handled every initial add, runs the read workload on one thread and prints
//! `{"reads": {...}}`.
//!
//! The table of each count: every measure's median on each side and each kinformer side ÷
//! client-go. Every side reads the same pods, so every run at a count must report the same
//! `checksum`; a mismatch fails the bench.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use super::contenders::{Binaries, Contender, RUN_TIMEOUT, Running};
use super::report::{num, ratio};
use super::step_failed;
use crate::bench::median;
use crate::progress::Step;

/// A side of the read runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Side {
    /// client-go's peer, its defaults.
    ClientGo,
    /// kinformer's contender, its defaults: the default cache (`Cached<Pod>`, views).
    Kinformer,
    /// kinformer's contender with `--store decoded`: the decoded informer (`Pod`s).
    KinformerDecoded,
}

/// The sides in the order of the table's columns (and of the first round).
pub(super) const SIDES: [Side; 3] = [Side::ClientGo, Side::Kinformer, Side::KinformerDecoded];

impl Side {
    fn contender(self) -> Contender {
        match self {
            Side::ClientGo => Contender::ClientGo,
            Side::Kinformer | Side::KinformerDecoded => Contender::Kinformer,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Side::ClientGo => "client-go",
            Side::Kinformer => "kinformer (default cache)",
            Side::KinformerDecoded => "kinformer (decoded_informer)",
        }
    }
}

/// The process of side `s` reading the `n` pods of `ns`: each program's defaults (no
/// `--wire`: protobuf on every side) and `--reads`.
fn command(bins: &Binaries, s: Side, kubeconfig: &Path, ns: &str, n: usize) -> Command {
    let mut cmd = Command::new(bins.path(s.contender()));
    cmd.arg("--kubeconfig").arg(kubeconfig).args([
        "--namespace",
        ns,
        "--expect",
        &n.to_string(),
        "--reads",
    ]);
    if s == Side::KinformerDecoded {
        cmd.args(["--store", "decoded"]);
    }
    cmd
}

/// One run of one side: its sync line and its reads line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ReadSample {
    /// Start of `main` to the sync line (`synced_ms`), the clock of `handled_ms`.
    sync_ms: f64,
    /// User + system CPU of the process up to the sync line, the typed add handler's work
    /// included (`cpu_ms` of the sync line).
    sync_cpu_ms: f64,
    /// Start of `main` to the last initial add handled.
    handled_ms: f64,
    /// ns per get by name, first pass over every name.
    get_pass1_ns: f64,
    /// ns per get by name, third pass.
    get_pass3_ns: f64,
    /// ns per get of the hot key.
    hot_get_ns: f64,
    /// Median ms per list by selector (every pod).
    selector_list_ms: f64,
    /// Median ms per sweep of the 64 nodes through `byNode`.
    index_sweep_ms: f64,
    /// User + system CPU ms of the read workload.
    cpu_ms: f64,
    /// `VmHWM` once the reads are done, KiB.
    rss_kib: f64,
    /// Every `spec.nodeName` length read, summed.
    checksum: u64,
}

impl ReadSample {
    /// The sample of `who` from its sync line and its `{"reads": {...}}` line.
    fn parse(sync: &Value, reads: &Value, who: &str) -> anyhow::Result<Self> {
        let r = reads
            .get("reads")
            .with_context(|| format!("{who} printed {reads}, not its reads line"))?;
        // A finite number ≥ 0 (> 0 when `positive`).
        let number = |v: &Value, field: &str, positive: bool| {
            v[field]
                .as_f64()
                .filter(|x| x.is_finite() && (*x > 0.0 || (!positive && *x == 0.0)))
                .with_context(|| format!("{who} reported no {field}: {v}"))
        };
        Ok(Self {
            sync_ms: number(sync, "synced_ms", true)?,
            sync_cpu_ms: number(sync, "cpu_ms", true)?,
            handled_ms: number(r, "handled_ms", true)?,
            get_pass1_ns: number(r, "get_pass1_ns", true)?,
            get_pass3_ns: number(r, "get_pass3_ns", true)?,
            hot_get_ns: number(r, "hot_get_ns", true)?,
            selector_list_ms: number(r, "selector_list_ms", false)?,
            index_sweep_ms: number(r, "index_sweep_ms", false)?,
            cpu_ms: number(r, "cpu_ms", false)?,
            rss_kib: number(r, "rss_kib", true)?,
            checksum: r["checksum"]
                .as_u64()
                .filter(|&c| c > 0)
                .with_context(|| format!("{who} reported no checksum: {r}"))?,
        })
    }
}

/// One row of a count's table.
struct Row {
    /// What it measures, with its unit.
    what: &'static str,
    /// The figure of one run.
    measure: fn(&ReadSample) -> f64,
    /// Decimals shown.
    precision: usize,
}

/// The rows, in order: the reads, then the sync.
const ROWS: [Row; 10] = [
    Row {
        what: "get every pod by name, pass 1 (ns/get)",
        measure: |s| s.get_pass1_ns,
        precision: 0,
    },
    Row {
        what: "get every pod by name, pass 3 (ns/get)",
        measure: |s| s.get_pass3_ns,
        precision: 0,
    },
    Row {
        what: "get one hot key 100,000 times (ns/get)",
        measure: |s| s.hot_get_ns,
        precision: 0,
    },
    Row {
        what: "list by selector `app=web`, every pod (ms)",
        measure: |s| s.selector_list_ms,
        precision: 3,
    },
    Row {
        what: "`byNode` index, sweep of 64 nodes (ms)",
        measure: |s| s.index_sweep_ms,
        precision: 3,
    },
    Row {
        what: "CPU of the read workload (ms)",
        measure: |s| s.cpu_ms,
        precision: 1,
    },
    Row {
        what: "peak RSS once the reads are done (MiB)",
        measure: |s| s.rss_kib / 1024.0,
        precision: 1,
    },
    Row {
        what: "sync (ms)",
        measure: |s| s.sync_ms,
        precision: 0,
    },
    Row {
        what: "CPU to sync, with the typed add handler (ms)",
        measure: |s| s.sync_cpu_ms,
        precision: 0,
    },
    Row {
        what: "last initial add handled (ms)",
        measure: |s| s.handled_ms,
        precision: 0,
    },
];

/// What the read runs measured: samples by pod count and side.
#[derive(Default)]
pub(super) struct ReadRuns {
    samples: BTreeMap<(usize, Side), Vec<ReadSample>>,
}

/// `runs` rounds of every side reading the `n` pods of `ns`; fails when a run fails or the
/// checksums at `n` disagree.
pub(super) fn measure(
    out: &mut ReadRuns,
    bins: &Binaries,
    kubeconfig: &Path,
    ns: &str,
    n: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let total = runs * SIDES.len();
    let mut step = Step::start(format!(
        "reads, {n} pods: {total} runs ({runs} x client-go, kinformer and kinformer decoded, rotating)"
    ));
    let mut done = 0;
    for round in 0..runs {
        for k in 0..SIDES.len() {
            let s = SIDES[(round + k) % SIDES.len()];
            step.detail(&format!("{done}/{total}: {}", s.name()));
            let sample = run_once(bins, s, kubeconfig, ns, n)
                .inspect_err(|_| step_failed(&format!("{} reading {n} pods", s.name())))?;
            out.samples.entry((n, s)).or_default().push(sample);
            done += 1;
        }
    }
    let checksum = out
        .checksum(n)
        .inspect_err(|_| step_failed(&format!("the checksums at {n} pods")))?;
    step.finish(&format!("checksum {checksum} on every side"));
    Ok(())
}

/// One process of side `s`: its sync line, its reads line, its exit.
fn run_once(
    bins: &Binaries,
    s: Side,
    kubeconfig: &Path,
    ns: &str,
    n: usize,
) -> anyhow::Result<ReadSample> {
    let mut run = Running::start(s.name(), command(bins, s, kubeconfig, ns, n), false)?;
    let sync = run.next_json(RUN_TIMEOUT)?;
    let reads = run
        .next_json(RUN_TIMEOUT)
        .with_context(|| format!("{}: the reads line", s.name()))?;
    run.finish()?;
    // Each run's figures, for a look at their spread (the tables show medians).
    eprintln!("    {} {n} pods: {reads}", s.name());
    // Give the API server a moment between runs (it answered a big list).
    std::thread::sleep(Duration::from_millis(300));
    ReadSample::parse(&sync, &reads, s.name())
}

impl ReadRuns {
    /// The median of `f` over the runs of `s` at `n` pods; NaN without runs.
    fn med(&self, n: usize, s: Side, f: fn(&ReadSample) -> f64) -> f64 {
        self.samples
            .get(&(n, s))
            .map_or(f64::NAN, |v| median(v.iter().map(f).collect()))
    }

    /// The one checksum every run at `n` pods reported, on every side.
    ///
    /// # Errors
    /// When there is no run at `n`, or two runs disagree.
    fn checksum(&self, n: usize) -> anyhow::Result<u64> {
        let by_side: Vec<(Side, Vec<u64>)> = SIDES
            .iter()
            .filter_map(|&side| {
                let runs = self.samples.get(&(n, side))?;
                Some((side, runs.iter().map(|s| s.checksum).collect()))
            })
            .collect();
        let mut all = by_side.iter().flat_map(|(_, sums)| sums.iter().copied());
        let Some(first) = all.next() else {
            bail!("no read runs at {n} pods");
        };
        if all.any(|c| c != first) {
            let each: Vec<String> = by_side
                .iter()
                .map(|(c, sums)| format!("{}: {sums:?}", c.name()))
                .collect();
            bail!(
                "the checksums at {n} pods disagree (every side reads the same pods): {}",
                each.join("; ")
            );
        }
        Ok(first)
    }

    /// The prose that says what was measured, then a table per count above 0 with runs.
    pub(super) fn tables(&self, counts: &[usize], runs: usize) -> String {
        let [go, kin, dec] = SIDES;
        let counts: Vec<usize> = counts
            .iter()
            .copied()
            .filter(|&n| n > 0 && SIDES.iter().any(|&s| self.samples.contains_key(&(n, s))))
            .collect();
        let mut t = String::new();
        if counts.is_empty() {
            return t;
        }
        let _ = writeln!(
            t,
            "Reads from a synced cache, each program's default pod informer (protobuf, managedFields kept, no \
             transform) with one more index, `byNode` (`spec.nodeName`), and one add handler that reads each pod's \
             `spec.nodeName`. client-go: `informer-peer --reads`, a `SharedInformerFactory`'s pod informer, its \
             handler and reads through the typed `*v1.Pod`; kinformer: `kinformer-contender --reads`, \
             `SharedIndexInformer::builder(KubeListerWatcher::new(api).cached())` (the default cache: \
             `Cached<Pod>`s kept encoded), its handler and reads through the generated view \
             (`pod.spec()?.node_name()`); kinformer's decoded informer: the same with `--store decoded`, \
             `SharedIndexInformer::builder(KubeListerWatcher::new(api))` (decoded `Pod`s shared as `Arc`, \
             client-go's cache, what a factory's `decoded_informer` builds), reading `pod.spec.node_name`. Pods as `kinformer_testenv::apply_realistic_pods` makes them, on \
             `node-0` to `node-63`. Once the add handler has handled every initial add, one thread (goroutine) \
             reads, each read taking `spec.nodeName` of every pod it gets: every pod by name through the \
             namespaced lister, three passes in one fixed shuffled order (the same on both sides); one hot key \
             100,000 times; the namespace listed by the selector `app=web` (every pod), median of 5; the \
             `byNode` index asked for each of the 64 nodes, median of 5 sweeps. CPU: user + system time \
             (`getrusage`) of those reads; peak RSS: `VmHWM` once they are done. Sync: start of `main` to the \
             synced line; CPU to sync: the process's user + system time up to that line, the add handler's \
             work included; last add handled: start of `main` to the handler's last initial add (the reads \
             start then). Medians of {runs} runs, one process per run, the sides rotating. Every side \
             summed the node names' lengths it read into a checksum, the same on all.\n"
        );
        for n in counts {
            let checksum = self
                .checksum(n)
                .map_or_else(|e| format!("**{e}**"), |c| c.to_string());
            let _ = writeln!(
                t,
                "{n} pods (checksum {checksum}):\n\n\
                 | measure | {} | {} | ÷ client-go | {} | ÷ client-go |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: |",
                go.name(),
                kin.name(),
                dec.name(),
            );
            for Row {
                what,
                measure,
                precision,
            } in ROWS
            {
                let [g, k, d] = [go, kin, dec].map(|s| self.med(n, s, measure));
                let _ = writeln!(
                    t,
                    "| {what} | {} | {} | {} | {} | {} |",
                    num(g, precision),
                    num(k, precision),
                    ratio(k, g),
                    num(d, precision),
                    ratio(d, g),
                );
            }
            t.push('\n');
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample(scale: f64, checksum: u64) -> ReadSample {
        ReadSample {
            sync_ms: 1000.0 * scale,
            sync_cpu_ms: 800.0 * scale,
            handled_ms: 1010.0 * scale,
            get_pass1_ns: 300.0 * scale,
            get_pass3_ns: 200.0 * scale,
            hot_get_ns: 50.0 * scale,
            selector_list_ms: 1.5 * scale,
            index_sweep_ms: 0.25 * scale,
            cpu_ms: 40.0 * scale,
            rss_kib: 102_400.0 * scale,
            checksum,
        }
    }

    #[test]
    fn each_side_runs_its_program_with_reads_and_its_defaults() {
        let bins = Binaries::for_tests();
        let args = |s: Side| {
            let cmd = command(&bins, s, Path::new("/k"), "ns", 7);
            (
                cmd.get_program().to_string_lossy().into_owned(),
                cmd.get_args()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        };
        let want = "--kubeconfig /k --namespace ns --expect 7 --reads";
        assert_eq!(args(Side::ClientGo), ("go".to_owned(), want.to_owned()));
        assert_eq!(args(Side::Kinformer), ("kin".to_owned(), want.to_owned()));
        assert_eq!(
            args(Side::KinformerDecoded),
            ("kin".to_owned(), format!("{want} --store decoded"))
        );
    }

    /// The lines as the two programs print them: the Rust side's `wire` is null, Go's
    /// numbers that are integers print without a fraction.
    #[test]
    fn a_sample_comes_from_the_sync_line_and_the_reads_line() {
        let sync = json!({"contender": "kinformer", "wire": null, "transform": false,
            "synced_ms": 812.5, "rss_kib": 50_000, "rss_now_kib": 49_000, "cpu_ms": 640.25, "objects": 1000});
        let reads = json!({"reads": {"get_pass1_ns": 310.2, "get_pass3_ns": 205.0, "hot_get_ns": 48.1,
            "selector_list_ms": 1.25, "index_sweep_ms": 0.5, "cpu_ms": 37.0, "rss_kib": 51_200,
            "checksum": 4_200_000, "handled_ms": 820.0}});
        let s = ReadSample::parse(&sync, &reads, "kinformer").unwrap();
        assert_eq!(
            s,
            ReadSample {
                sync_ms: 812.5,
                sync_cpu_ms: 640.25,
                handled_ms: 820.0,
                get_pass1_ns: 310.2,
                get_pass3_ns: 205.0,
                hot_get_ns: 48.1,
                selector_list_ms: 1.25,
                index_sweep_ms: 0.5,
                cpu_ms: 37.0,
                rss_kib: 51_200.0,
                checksum: 4_200_000,
            }
        );
        // A read CPU of 0 (a coarse clock) is a value; a sync CPU of 0 is not.
        let mut zero_cpu = reads.clone();
        zero_cpu["reads"]["cpu_ms"] = json!(0);
        assert_eq!(
            ReadSample::parse(&sync, &zero_cpu, "go").unwrap().cpu_ms,
            0.0
        );
        let mut no_sync_cpu = sync.clone();
        no_sync_cpu["cpu_ms"] = json!(0);
        assert!(ReadSample::parse(&no_sync_cpu, &reads, "go").is_err());
        for field in ["checksum", "handled_ms", "get_pass1_ns", "rss_kib"] {
            let mut missing = reads.clone();
            missing["reads"].as_object_mut().unwrap().remove(field);
            let e = ReadSample::parse(&sync, &missing, "go").unwrap_err();
            assert!(e.to_string().contains(field), "{field}: {e}");
        }
        let mut zero = reads.clone();
        zero["reads"]["checksum"] = json!(0);
        assert!(ReadSample::parse(&sync, &zero, "go").is_err());
        // The sync line where the reads line should be.
        assert!(ReadSample::parse(&sync, &sync, "go").is_err());
    }

    #[test]
    fn the_checksums_must_agree_across_runs_and_sides() {
        let mut runs = ReadRuns::default();
        assert!(runs.checksum(10).is_err());
        for c in SIDES {
            runs.samples
                .insert((10, c), vec![sample(1.0, 77), sample(1.0, 77)]);
        }
        assert_eq!(runs.checksum(10).unwrap(), 77);
        runs.samples
            .get_mut(&(10, Side::Kinformer))
            .unwrap()
            .push(sample(1.0, 78));
        let e = runs.checksum(10).unwrap_err().to_string();
        assert!(e.contains("[77, 77, 78]") && e.contains("[77, 77]"), "{e}");
    }

    /// Rows of known samples, cell by cell: medians of three runs and their ratios.
    #[test]
    fn the_table_has_each_measure_its_medians_and_ratio() {
        let mut runs = ReadRuns::default();
        for (n, checksum) in [(1000, 5_000), (10_000, 50_000)] {
            // Medians: client-go's the samples at scale 1, kinformer's at scale 0.5.
            runs.samples.insert(
                (n, Side::ClientGo),
                vec![
                    sample(1.0, checksum),
                    sample(3.0, checksum),
                    sample(0.9, checksum),
                ],
            );
            runs.samples.insert(
                (n, Side::Kinformer),
                vec![
                    sample(0.5, checksum),
                    sample(0.4, checksum),
                    sample(2.0, checksum),
                ],
            );
            // The decoded side's medians: scale 2.
            runs.samples.insert(
                (n, Side::KinformerDecoded),
                vec![sample(2.0, checksum), sample(2.0, checksum)],
            );
        }
        let t = runs.tables(&[0, 1000, 10_000], 3);
        assert!(t.contains("Medians of 3 runs"), "{t}");
        assert!(t.contains("1000 pods (checksum 5000):"), "{t}");
        assert!(t.contains("10000 pods (checksum 50000):"), "{t}");
        assert!(!t.contains("\n0 pods"), "{t}");
        for row in [
            "| measure | client-go | kinformer (default cache) | ÷ client-go | kinformer (decoded_informer) | ÷ client-go |",
            "| get every pod by name, pass 1 (ns/get) | 300 | 150 | 0.50x | 600 | 2.00x |",
            "| get every pod by name, pass 3 (ns/get) | 200 | 100 | 0.50x | 400 | 2.00x |",
            "| get one hot key 100,000 times (ns/get) | 50 | 25 | 0.50x | 100 | 2.00x |",
            "| list by selector `app=web`, every pod (ms) | 1.500 | 0.750 | 0.50x | 3.000 | 2.00x |",
            "| `byNode` index, sweep of 64 nodes (ms) | 0.250 | 0.125 | 0.50x | 0.500 | 2.00x |",
            "| CPU of the read workload (ms) | 40.0 | 20.0 | 0.50x | 80.0 | 2.00x |",
            "| peak RSS once the reads are done (MiB) | 100.0 | 50.0 | 0.50x | 200.0 | 2.00x |",
            "| sync (ms) | 1000 | 500 | 0.50x | 2000 | 2.00x |",
            "| CPU to sync, with the typed add handler (ms) | 800 | 400 | 0.50x | 1600 | 2.00x |",
            "| last initial add handled (ms) | 1010 | 505 | 0.50x | 2020 | 2.00x |",
        ] {
            assert_eq!(
                t.lines().filter(|line| *line == row).count(),
                2,
                "not twice {row:?} in\n{t}"
            );
        }
        crate::bench_informer::report::assert_tables_rectangular(&t);
    }

    #[test]
    fn a_side_without_runs_shows_dashes_and_no_runs_no_table() {
        let mut runs = ReadRuns::default();
        assert!(runs.tables(&[10], 1).is_empty());
        runs.samples
            .insert((10, Side::ClientGo), vec![sample(1.0, 9)]);
        let t = runs.tables(&[10], 1);
        assert!(
            t.lines()
                .any(|l| l == "| get every pod by name, pass 1 (ns/get) | 300 | – | – | – | – |"),
            "{t}"
        );
    }
}
