//! The report: the tables printed and written to BENCHMARKS.md, and the section around them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::charts::CHART_DIR;
use super::contenders::Contender;
use super::measure::{ChurnStep, Key, Latencies, Sample, WireBytes, med, quantile};
use super::{Opts, SUITE};
use crate::bench::record_section;

/// `v` with `precision` decimals, or "–" when there is no value (not a finite number). The
/// table cell of every bench section.
pub(super) fn num(v: f64, precision: usize) -> String {
    if v.is_finite() {
        format!("{v:.precision$}")
    } else {
        "–".to_owned()
    }
}

/// `a ÷ b` as "1.23x", or "–" when either is missing or `b` is zero.
pub(super) fn ratio(a: f64, b: f64) -> String {
    let r = a / b;
    if r.is_finite() {
        format!("{r:.2}x")
    } else {
        "–".to_owned()
    }
}

/// A table row: the `lead` cells, the contenders' medians with `precision` decimals (in
/// the order of [`COLUMNS`]), then the `rest`.
fn row(lead: &[String], medians: [f64; 6], precision: usize, rest: &[String]) -> String {
    let cells: Vec<String> = lead
        .iter()
        .cloned()
        .chain(medians.map(|v| num(v, precision)))
        .chain(rest.iter().cloned())
        .collect();
    format!("| {} |", cells.join(" | "))
}

/// The order of the contenders' columns: protobuf first, then JSON.
const COLUMNS: [Contender; 6] = [
    Contender::ClientGo,
    Contender::Kinformer,
    Contender::KinformerModify,
    Contender::ClientGoJson,
    Contender::KinformerJson,
    Contender::KubeRuntime,
];

/// The header cells of the contenders' columns, with `unit`.
fn column_names(unit: &str) -> String {
    COLUMNS
        .iter()
        .map(|c| format!("{} {unit}", c.name()))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

/// The defaults-against-defaults tables: for every pod count > 0, each program as a user
/// gets it (client-go's informer, kinformer's `SharedIndexInformer::builder(lw).build()`,
/// kube-runtime's reflector), in protobuf then JSON, with managedFields kept then
/// stripped: sync time, CPU time, peak and settled RSS and bytes per cached pod, each with
/// its ratio to client-go.
pub(super) fn defaults_tables(
    pods: &[usize],
    samples: &BTreeMap<Key, Vec<Sample>>,
    runs: usize,
) -> String {
    use Contender::{ClientGo, ClientGoJson, Kinformer, KinformerJson, KubeRuntime};
    let mut t = String::new();
    let counts: Vec<usize> = pods.iter().copied().filter(|&n| n > 0).collect();
    if counts.is_empty() {
        return t;
    }
    let _ = writeln!(
        t,
        "Defaults against defaults: each program as a user gets it. client-go: `informer-peer`, a \
         `SharedInformerFactory` with no options (protobuf); kinformer: `SharedIndexInformer::builder(lw).build()` \
         (no store option: its default cache, `Cached<Pod>`s read in place) over `KubeListerWatcher::cached` \
         (`WireFormat::Auto`: protobuf); \
         kube-runtime: `reflector` over `watcher` (JSON, kube-rs has no protobuf path). The JSON tables set \
         client-go's and kinformer's wire format to JSON; the stripped ones strip managedFields with each \
         program's way (client-go `WithTransform`, kinformer `KubeListerWatcher::drop_managed_fields`, \
         kube-runtime `modify`). \
         Pods as `kinformer_testenv::apply_realistic_pods` makes them: a ReplicaSet's pod (one container with \
         env, ports, resources, probe, volumes) applied by `kube-controller-manager` and its `Running` status \
         by `kubelet`, so managedFields have the two entries real pods have (bytes on the wire in the last \
         table). Medians of {runs} runs, one process at a time. Sync: from spawn to the synced line; CPU: user + \
         system time of the process up to that line (`getrusage(RUSAGE_SELF)`); peak RSS: `VmHWM` at that line; \
         2 s later: `VmRSS` two seconds after it; per cached pod: (median at N − median at 0 pods) ÷ N.\n"
    );
    for (wire, go, kin) in [
        ("protobuf", ClientGo, Kinformer),
        ("JSON", ClientGoJson, KinformerJson),
    ] {
        for strip in [false, true] {
            let cols = [go, kin, KubeRuntime];
            if !counts
                .iter()
                .any(|&n| cols.iter().any(|&c| samples.contains_key(&(n, strip, c))))
            {
                continue;
            }
            let _ = writeln!(
                t,
                "{wire}, managedFields {}:\n\n\
                 | pods | measure | {} | {} | kinformer ÷ client-go | {} | kube-runtime ÷ client-go |\n\
                 | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
                if strip { "stripped" } else { "kept" },
                go.name(),
                kin.name(),
                KubeRuntime.name(),
            );
            for &n in &counts {
                let metrics = sync_metrics(samples, n, strip, cols);
                for (what, [g, k, r], precision) in metrics {
                    let _ = writeln!(
                        t,
                        "| {n} | {what} | {} | {} | {} | {} | {} |",
                        num(g, precision),
                        num(k, precision),
                        ratio(k, g),
                        num(r, precision),
                        ratio(r, g),
                    );
                }
            }
            t.push('\n');
        }
    }
    t
}

/// The rows of a defaults table at `n` pods for three contenders: each measure's name, the
/// three medians, and the decimals to show.
fn sync_metrics(
    samples: &BTreeMap<Key, Vec<Sample>>,
    n: usize,
    strip: bool,
    cols: [Contender; 3],
) -> [(&'static str, [f64; 3], usize); 6] {
    #[allow(clippy::cast_precision_loss)]
    let per_pod = |c: Contender, f: fn(&Sample) -> f64| {
        (med(samples, (n, strip, c), f) - med(samples, (0, strip, c), f)) * 1024.0 / n as f64
    };
    let median = |f: fn(&Sample) -> f64| cols.map(|c| med(samples, (n, strip, c), f));
    [
        ("sync ms", median(|s| s.spawn_ms), 0),
        ("CPU ms", median(|s| s.cpu_ms), 0),
        ("peak RSS MiB", median(|s| s.rss_kib / 1024.0), 1),
        ("RSS 2 s later MiB", median(|s| s.settled_kib / 1024.0), 1),
        (
            "bytes per cached pod (peak)",
            cols.map(|c| per_pod(c, |s| s.rss_kib)),
            0,
        ),
        (
            "bytes per cached pod (2 s later)",
            cols.map(|c| per_pod(c, |s| s.settled_kib)),
            0,
        ),
    ]
}

/// The sync time, peak RSS, RSS per pod and event latency tables, as markdown.
pub(super) fn tables(
    pods: &[usize],
    samples: &BTreeMap<Key, Vec<Sample>>,
    latency: &BTreeMap<Contender, Latencies>,
    latency_pods: usize,
    opts: &Opts,
) -> String {
    use Contender::{ClientGo, Kinformer};
    let mut t = String::new();
    let label = |strip: bool| if strip { "stripped" } else { "kept" };
    // kinformer (protobuf) with `drop_managed_fields`, and with `modify` when stripping.
    let kinformer_verdict = |strip: bool, k: f64, m: f64, ok: &dyn Fn(f64) -> bool| {
        if strip {
            format!(
                "drop_managed_fields {}, modify {}",
                verdict(ok(k)),
                verdict(ok(m))
            )
        } else {
            verdict(ok(k)).to_owned()
        }
    };
    let medians = |n: usize, strip: bool, f: &dyn Fn(&Sample) -> f64| {
        COLUMNS.map(|c| med(samples, (n, strip, c), f))
    };
    let _ = writeln!(
        t,
        "Initial sync: time from spawning the process to its \"synced\" line, median of {} runs. \
         client-go and kinformer ask for protobuf by default (client-go's typed clients since v0.32), and for \
         JSON in the JSON columns; kube-runtime speaks JSON only. kinformer strips with \
         `KubeListerWatcher::drop_managed_fields`, kinformer (modify) with `KubeListerWatcher::modify`.\n\n\
         | pods | managedFields | {} | kinformer ÷ client-go, protobuf | kinformer (modify) ÷ client-go, protobuf | \
         kinformer ÷ client-go, JSON | kube-runtime ÷ client-go, JSON | target: kinformer ≤ 0.8x client-go in protobuf, ≤ 1.0x in JSON |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        opts.runs,
        column_names("ms"),
    );
    for &n in pods {
        for strip in [false, true] {
            let m = medians(n, strip, &|s| s.spawn_ms);
            let [g, k, km, gj, kj, r] = m;
            let lead = [n.to_string(), label(strip).to_owned()];
            let rest = [
                ratio(k, g),
                ratio(km, g),
                ratio(kj, gj),
                ratio(r, gj),
                format!(
                    "protobuf: {}; JSON: {}",
                    kinformer_verdict(strip, k, km, &|x| x <= 0.8 * g),
                    verdict(kj <= gj)
                ),
            ];
            let _ = writeln!(t, "{}", row(&lead, m, 0, &rest));
        }
    }
    let _ = writeln!(
        t,
        "\nCPU time: user + system time of the contender's process from its start to its \"synced\" line \
         (`getrusage(RUSAGE_SELF)`, every thread), median of {} runs.\n\n\
         | pods | managedFields | {} | kinformer ÷ client-go, protobuf | kinformer (modify) ÷ client-go, protobuf | \
         kinformer ÷ client-go, JSON | kube-runtime ÷ client-go, JSON |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        opts.runs,
        column_names("CPU ms"),
    );
    for &n in pods {
        for strip in [false, true] {
            let m = medians(n, strip, &|s| s.cpu_ms);
            let [g, k, km, gj, kj, r] = m;
            let lead = [n.to_string(), label(strip).to_owned()];
            let rest = [ratio(k, g), ratio(km, g), ratio(kj, gj), ratio(r, gj)];
            let _ = writeln!(t, "{}", row(&lead, m, 0, &rest));
        }
    }
    let _ = writeln!(
        t,
        "\nPeak RSS (`VmHWM` right after the sync), median of {} runs.\n\n\
         | pods | managedFields | {} | kinformer ÷ client-go, protobuf | kinformer ÷ client-go, JSON | \
         kinformer ÷ kube-runtime | kinformer (modify) ÷ client-go, protobuf | kinformer (modify) ÷ kube-runtime | \
         target: kinformer (protobuf) ≤ 0.5x client-go (protobuf), ≤ 1.0x kube-runtime |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        opts.runs,
        column_names("MiB"),
    );
    for &n in pods {
        for strip in [false, true] {
            let m = medians(n, strip, &|s| s.rss_kib / 1024.0);
            let [g, k, km, gj, kj, r] = m;
            let lead = [n.to_string(), label(strip).to_owned()];
            let rest = [
                ratio(k, g),
                ratio(kj, gj),
                ratio(k, r),
                ratio(km, g),
                ratio(km, r),
                kinformer_verdict(strip, k, km, &|x| x <= 0.5 * g && x <= r),
            ];
            let _ = writeln!(t, "{}", row(&lead, m, 1, &rest));
        }
    }
    // With a 0-pod baseline: the peak RSS each cached pod adds, at the largest count.
    if let (Some(0), Some(&n)) = (pods.first(), pods.last().filter(|&&n| n > 0)) {
        let _ = writeln!(
            t,
            "\nPeak RSS per cached pod: (median peak RSS at {n} pods − at 0 pods) ÷ {n}.\n\n\
             | managedFields | {} | kinformer ÷ client-go, protobuf | kinformer (modify) ÷ client-go, protobuf | \
             kinformer ÷ client-go, JSON | target: ≤ 0.5x client-go (stripped, protobuf) |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            column_names("bytes"),
        );
        for strip in [false, true] {
            #[allow(clippy::cast_precision_loss)]
            let m = COLUMNS.map(|c| {
                (med(samples, (n, strip, c), |s| s.rss_kib)
                    - med(samples, (0, strip, c), |s| s.rss_kib))
                    * 1024.0
                    / n as f64
            });
            let [g, k, km, gj, kj, _] = m;
            let rest = [
                ratio(k, g),
                ratio(km, g),
                ratio(kj, gj),
                if strip {
                    kinformer_verdict(strip, k, km, &|x| x <= 0.5 * g)
                } else {
                    "–".to_owned()
                },
            ];
            let _ = writeln!(t, "{}", row(&[label(strip).to_owned()], m, 0, &rest));
        }
    }
    if let Some(go) = latency.get(&ClientGo) {
        let (g50, g99) = (quantile(&go.from_send, 0.5), quantile(&go.from_send, 0.99));
        let _ = writeln!(
            t,
            "\nEvent latency on {} pods, each program's defaults (managedFields kept): {} label patches at {}/s, one pod each. \
             From sent: the handler's wall-clock time − the time the patch request was sent; from response: − \
             the time the patch's response arrived (negative when the watch event beat the response).\n\n\
             | contender | p50 ms from sent | p99 ms from sent | max ms from sent | p50 ÷ client-go | p99 ÷ client-go | \
             p50 ms from response | p99 ms from response | seen / patched | target: p99 ≤ 1.0x client-go |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            latency_pods, opts.latency_patches, opts.latency_rate
        );
        for (c, l) in latency {
            let (p50, p99) = (quantile(&l.from_send, 0.5), quantile(&l.from_send, 0.99));
            let _ = writeln!(
                t,
                "| {} | {p50:.2} | {p99:.2} | {:.2} | {:.2}x | {:.2}x | {:.2} | {:.2} | {}/{} | {} |",
                c.name(),
                l.from_send.last().copied().unwrap_or(f64::NAN),
                p50 / g50,
                p99 / g99,
                quantile(&l.from_ack, 0.5),
                quantile(&l.from_ack, 0.99),
                l.from_send.len(),
                l.patched,
                if *c == Kinformer {
                    verdict(p99 <= g99)
                } else {
                    "–"
                }
            );
        }
    }
    t
}

/// Appends the churn table.
pub(super) fn churn_table(
    t: &mut String,
    churn: &BTreeMap<Contender, Vec<ChurnStep>>,
    pods: usize,
    opts: &Opts,
) {
    if churn.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "\nChurn on {pods} pods, each program's defaults (managedFields kept): label patches at each rate for {} s, at most 64 in \
         flight, one contender at a time; achieved = patches sent per second (first to last send), handled = \
         updates the handler saw per second (first send to last sighting), p99 from send to handler.\n\n\
         | patches/s asked | contender | patches/s achieved | updates/s handled | p99 ms | seen / sent |\n\
         | ---: | --- | ---: | ---: | ---: | ---: |",
        opts.churn_secs
    );
    let steps = churn.values().map(Vec::len).max().unwrap_or(0);
    for k in 0..steps {
        for (c, s) in churn {
            if let Some(s) = s.get(k) {
                let _ = writeln!(
                    t,
                    "| {} | {} | {:.0} | {:.0} | {:.1} | {}/{} |",
                    s.target,
                    c.name(),
                    s.achieved,
                    s.handled,
                    s.p99_ms,
                    s.seen,
                    s.sent
                );
            }
        }
    }
}

/// Appends the table of bytes per pod on the wire.
pub(super) fn wire_table(t: &mut String, wire: &BTreeMap<usize, WireBytes>) {
    if wire.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "\nBytes on the wire per pod, uncompressed (`Accept-Encoding: identity`; both sides ask for gzip by \
         default, which 1.37 applies to lists over 128 KiB and to streaming lists: the gzip section has those \
         bytes): one list of \
         every pod, and a streaming list (`sendInitialEvents`, what both informers sync with) up to its end \
         bookmark, each byte count divided by the pods.\n\n\
         | pods | list, protobuf | list, JSON | protobuf ÷ JSON | streaming list, protobuf | streaming list, JSON | protobuf ÷ JSON |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for (n, w) in wire {
        let _ = writeln!(
            t,
            "| {n} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {} |",
            w.list[0],
            w.list[1],
            ratio(w.list[0], w.list[1]),
            w.stream[0],
            w.stream[1],
            ratio(w.stream[0], w.stream[1]),
        );
    }
}

/// The body of a section of its own (see [`record_part`]): the command, the machine's
/// load, the run's length, `note` and the tables.
pub(super) fn part_body(run: &Run<'_>, note: &str, tables: &str) -> String {
    format!(
        "Measured by `{command}` on a {cores}-core machine: load average {before} before the run and \
         {after} after it; the run took {min:.1} min. The commit that changed this section dates it.{note}\n\n{tables}",
        command = run.command,
        before = run.load_before,
        after = run.load_after,
        cores = std::thread::available_parallelism().map_or(0, usize::from),
        min = run.elapsed.as_secs_f64() / 60.0,
    )
}

/// Writes the section `<suite>-<part>` of BENCHMARKS.md (`defaults` for `--defaults-only`,
/// `crd` for `--crd-only`, `reads` for `--reads`): [`part_body`]; appended at the end of the
/// file with its markers when they are not there yet.
pub(super) fn record_part(
    root: &Path,
    part: &str,
    run: &Run<'_>,
    note: &str,
    tables: &str,
) -> anyhow::Result<()> {
    let body = part_body(run, note, tables);
    let section = format!("{SUITE}-{part}");
    record_section(&root.join("BENCHMARKS.md"), &section, &body)?;
    eprintln!("recorded in BENCHMARKS.md ({section})");
    Ok(())
}

/// What every recorded section says of its run.
pub(super) struct Run<'a> {
    pub(super) command: &'a str,
    pub(super) load_before: &'a str,
    pub(super) load_after: &'a str,
    pub(super) elapsed: Duration,
}

/// Writes the memory rows' section of BENCHMARKS.md.
pub(super) fn record_memory(
    root: &Path,
    command: &str,
    load_before: &str,
    load_after: &str,
    elapsed: Duration,
    tables: &str,
) -> anyhow::Result<()> {
    let body = format!(
        "Measured by `{command}` on a {cores}-core machine shared with other work: load average \
         {load_before} before the run and {load_after} after it; the run took {min:.1} min. The commit \
         that changed this section dates it. Both sides ran in this one run.\n\n{tables}",
        cores = std::thread::available_parallelism().map_or(0, usize::from),
        min = elapsed.as_secs_f64() / 60.0,
    );
    record_section(
        &root.join("BENCHMARKS.md"),
        &format!("{SUITE}-memory"),
        &body,
    )?;
    eprintln!("recorded in BENCHMARKS.md");
    Ok(())
}

/// Writes the informer's section of BENCHMARKS.md: how it was measured, `tables`, and the
/// charts (the latency chart only when there are latencies).
pub(super) fn record(
    root: &Path,
    command: &str,
    load_before: &str,
    load_after: &str,
    elapsed: Duration,
    tables: &str,
    has_latency: bool,
) -> anyhow::Result<()> {
    let body = format!(
        "Measured by `{command}` on a {cores}-core machine: load average {load_before} before the run and \
         {load_after} after it; the whole run took {min:.1} min. The commit that changed this section dates it.\n\n\
         {tables}\n\
         Charts: [sync time vs pods]({CHART_DIR}/sync.svg), [peak RSS vs pods]({CHART_DIR}/rss.svg){lat}.\n\n\
         ![sync time]({CHART_DIR}/sync.svg)\n![peak RSS]({CHART_DIR}/rss.svg)\n{latimg}",
        cores = std::thread::available_parallelism().map_or(0, usize::from),
        min = elapsed.as_secs_f64() / 60.0,
        lat = if has_latency {
            format!(", [event latency CDF]({CHART_DIR}/latency.svg)")
        } else {
            String::new()
        },
        latimg = if has_latency {
            format!("![event latency]({CHART_DIR}/latency.svg)\n")
        } else {
            String::new()
        },
    );
    record_section(&root.join("BENCHMARKS.md"), SUITE, &body)?;
    eprintln!("recorded in BENCHMARKS.md, charts in {CHART_DIR}/");
    Ok(())
}

/// Asserts that every Markdown table in `text` has rows of as many cells as its header (a
/// bench section's tables, in the tests).
#[cfg(test)]
pub(super) fn assert_tables_rectangular(text: &str) {
    let mut cells = None;
    for line in text.lines() {
        if line.starts_with('|') {
            let n = line.matches('|').count();
            assert_eq!(*cells.get_or_insert(n), n, "{line}");
        } else {
            cells = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// Rows of known samples, cell by cell.
    #[test]
    fn table_rows_keep_their_cells_and_formats() {
        let opts = Opts::parse_from(["x", "--runs", "1"]);
        let mut samples: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
        for n in [0, 100] {
            for strip in [false, true] {
                for (c, ms, kib) in [
                    (Contender::ClientGo, 10.0, 2048.0),
                    (Contender::Kinformer, 5.0, 1024.0),
                    (Contender::KinformerModify, 12.0, 1100.0),
                    (Contender::ClientGoJson, 30.0, 3072.0),
                    (Contender::KinformerJson, 25.0, 2560.0),
                    (Contender::KubeRuntime, 20.0, 1536.0),
                ] {
                    if strip || c != Contender::KinformerModify {
                        #[allow(clippy::cast_precision_loss)]
                        let sample = Sample {
                            spawn_ms: ms + n as f64,
                            rss_kib: if n == 0 { kib } else { 2.0 * kib + 7.0 },
                            cpu_ms: 2.0 * ms + n as f64,
                            settled_kib: if n == 0 { kib } else { 1.5 * kib },
                        };
                        samples.insert((n, strip, c), vec![sample]);
                    }
                }
            }
        }
        let t = tables(&[0, 100], &samples, &BTreeMap::new(), 100, &opts);
        let d = defaults_tables(&[0, 100], &samples, 1);
        for row in [
            "| 100 | sync ms | 110 | 105 | 0.95x | 120 | 1.09x |",
            "| 100 | CPU ms | 120 | 110 | 0.92x | 140 | 1.17x |",
            "| 100 | peak RSS MiB | 4.0 | 2.0 | 0.50x | 3.0 | 0.75x |",
            "| 100 | bytes per cached pod (peak) | 21043 | 10557 | 0.50x | 15800 | 0.75x |",
            "| 100 | bytes per cached pod (2 s later) | 10486 | 5243 | 0.50x | 7864 | 0.75x |",
            "| 100 | sync ms | 130 | 125 | 0.96x | 120 | 0.92x |",
        ] {
            assert!(d.lines().any(|line| line == row), "no row {row:?} in\n{d}");
        }
        assert_eq!(d.matches("| 100 | sync ms |").count(), 4, "{d}");
        assert_eq!(
            t.matches("| 0 | kept | 20 | 10 | – | 60 | 50 | 40 | 0.50x | – | 0.83x | 0.67x |")
                .count(),
            1,
            "{t}"
        );
        assert_tables_rectangular(&t);
        assert_tables_rectangular(&d);
        for row in [
            "| 0 | kept | 10 | 5 | – | 30 | 25 | 20 | 0.50x | – | 0.83x | 0.67x | protobuf: met; JSON: met |",
            "| 100 | stripped | 110 | 105 | 112 | 130 | 125 | 120 | 0.95x | 1.02x | 0.96x | 0.92x | protobuf: drop_managed_fields **missed**, modify **missed**; JSON: met |",
            "| 0 | stripped | 2.0 | 1.0 | 1.1 | 3.0 | 2.5 | 1.5 | 0.50x | 0.83x | 0.67x | 0.54x | 0.72x | drop_managed_fields met, modify **missed** |",
            "| 100 | kept | 4.0 | 2.0 | – | 6.0 | 5.0 | 3.0 | 0.50x | 0.83x | 0.67x | – | – | **missed** |",
            "| kept | 21043 | 10557 | – | 31529 | 26286 | 15800 | 0.50x | – | 0.83x | – |",
            "| stripped | 21043 | 10557 | 11336 | 31529 | 26286 | 15800 | 0.50x | 0.54x | 0.83x | drop_managed_fields **missed**, modify **missed** |",
        ] {
            assert!(t.lines().any(|line| line == row), "no row {row:?} in\n{t}");
        }
    }
}
