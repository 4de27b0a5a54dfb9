//! `cargo xtask bench <suite>`: run the Rust criterion benches and client-go's
//! `testing.B` benches of the same workloads in one run, print both with their ratio,
//! and record the table in BENCHMARKS.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::progress::Step;

/// One workload measured on both sides.
struct Pair {
    /// criterion's `group/function` id.
    rust: &'static str,
    /// the Go benchmark's name (without `Benchmark` and the `-N` suffix).
    go: &'static str,
    /// The project's target (ARCHITECTURE.md, "Performance"), as a minimum speed-up over
    /// client-go, if it sets one.
    target: Option<f64>,
    /// How many of criterion's elements one Go op is (1 when the Go op is one element;
    /// the FIFO benches time a whole workload per op).
    go_elements: f64,
}

struct Suite {
    name: &'static str,
    package: &'static str,
    bench: &'static str,
    go_pattern: &'static str,
    pairs: &'static [Pair],
    memory: Option<Memory>,
}

/// A bytes-per-entry figure both sides print: the Go test that logs it and the marker
/// before the number on each side.
struct Memory {
    go_test: &'static str,
    go_marker: &'static str,
    rust_marker: &'static str,
}

const SUITES: &[Suite] = &[
    Suite {
        name: "workqueue",
        package: "kinformer-workqueue",
        bench: "workqueue",
        go_pattern: "^BenchmarkWorkqueue",
        pairs: &[
            Pair {
                rust: "workqueue/add_get_done/same_thread",
                go: "WorkqueueAddGetDoneSameThread",
                target: Some(1.3),
                go_elements: 1.0,
            },
            Pair {
                rust: "workqueue/add_get_done/1p1w",
                go: "WorkqueueAddGetDone1p1w",
                target: None,
                go_elements: 1.0,
            },
            Pair {
                rust: "workqueue/contended/2p8w_10k_keys_50pct_dup",
                go: "WorkqueueContended2p8w",
                target: Some(2.0),
                go_elements: 1.0,
            },
            Pair {
                rust: "workqueue/delaying/add_after",
                go: "WorkqueueAddAfter",
                target: Some(2.5),
                go_elements: 1.0,
            },
            Pair {
                rust: "workqueue/rate_limited/requeue",
                go: "WorkqueueRateLimitedRequeue",
                target: None,
                go_elements: 1.0,
            },
        ],
        memory: None,
    },
    Suite {
        name: "indexer",
        package: "kinformer-indexer",
        bench: "indexer",
        go_pattern: "^BenchmarkIndexer",
        pairs: &[
            // client-go's GetByKey never touches the object; handing out an Arc does (its
            // count), so the fair pair is a Go get that then reads the pod's name. Both shown.
            Pair {
                rust: "indexer/get",
                go: "IndexerGet",
                target: None,
                go_elements: 1.0,
            },
            Pair {
                rust: "indexer/get",
                go: "IndexerGetRead",
                target: Some(1.5),
                go_elements: 1.0,
            },
            Pair {
                rust: "indexer/by_index",
                go: "IndexerByIndex",
                target: Some(2.0),
                go_elements: 1.0,
            },
            Pair {
                rust: "indexer/update",
                go: "IndexerUpdate",
                target: None,
                go_elements: 1.0,
            },
            Pair {
                rust: "indexer/list_selector_namespace",
                go: "IndexerListSelectorNamespace",
                target: Some(2.0),
                go_elements: 1.0,
            },
            Pair {
                rust: "indexer/list_selector_all",
                go: "IndexerListSelectorAll",
                target: Some(2.0),
                go_elements: 1.0,
            },
            Pair {
                rust: "indexer/parse_selector",
                go: "IndexerParseSelector",
                target: None,
                go_elements: 1.0,
            },
        ],
        memory: Some(Memory {
            go_test: "TestIndexerHeapPerEntry",
            go_marker: "heap bytes per entry:",
            rust_marker: "indexer/heap_bytes_per_entry:",
        }),
    },
    // The project sets no target for the FIFO. Each run: a relist of 10,000 objects, 100,000
    // updates over them, everything popped (crates/deltafifo/benches/fifo.rs and
    // xtask/go/bench/fifo_test.go).
    Suite {
        name: "deltafifo",
        package: "kinformer-deltafifo",
        bench: "fifo",
        go_pattern: "^BenchmarkFifo",
        pairs: &[
            Pair {
                rust: "fifo/deltafifo",
                go: "FifoDeltaFIFO",
                target: None,
                go_elements: 110_000.0,
            },
            Pair {
                rust: "fifo/in_order_fifo",
                go: "FifoRealFIFOBatch",
                target: None,
                go_elements: 110_000.0,
            },
            Pair {
                rust: "fifo/in_order_fifo_single",
                go: "FifoRealFIFOSingle",
                target: None,
                go_elements: 110_000.0,
            },
            Pair {
                rust: "fifo/in_order_fifo_atomic",
                go: "FifoRealFIFOAtomic",
                target: None,
                go_elements: 110_000.0,
            },
        ],
        memory: None,
    },
];

/// How many times `go test` repeats each benchmark; the median is reported.
const GO_COUNT: &str = "5";

pub(crate) fn run(suite: &str, args: &[String]) -> anyhow::Result<()> {
    if suite == crate::bench_informer::SUITE {
        return crate::bench_informer::run(args);
    }
    if suite == crate::bench_sharding::BENCH {
        return crate::bench_sharding::bench(args);
    }
    if suite == crate::bench_replay::SUITE {
        return crate::bench_replay::run(args);
    }
    let Some(suite) = SUITES.iter().find(|s| s.name == suite) else {
        let names: Vec<_> = SUITES.iter().map(|s| s.name).collect();
        bail!(
            "unknown bench suite {suite:?}; known: {}, {}, {}, {}",
            names.join(", "),
            crate::bench_informer::SUITE,
            crate::bench_sharding::BENCH,
            crate::bench_replay::SUITE
        );
    };
    if !args.is_empty() {
        bail!("the {} suite takes no options (got {args:?})", suite.name);
    }
    let root = crate::workspace_root();

    let step = Step::start(format!(
        "client-go: go test -bench '{}' -count {GO_COUNT}",
        suite.go_pattern
    ));
    let out = Command::new("go")
        .args([
            "test",
            "-run",
            "^$",
            "-bench",
            suite.go_pattern,
            "-benchtime",
            "1s",
            "-count",
            GO_COUNT,
            "./bench",
        ])
        .current_dir(root.join("xtask").join("go"))
        .env("GOTOOLCHAIN", "local")
        .output()
        .context("running go test -bench (is Go installed?)")?;
    if !out.status.success() {
        step.finish("FAILED");
        bail!(
            "go test -bench failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    step.finish("done");
    let go = parse_go(&String::from_utf8_lossy(&out.stdout));

    let criterion_home =
        std::env::temp_dir().join(format!("kinformer-criterion-{}", std::process::id()));
    let step = Step::start(format!(
        "kinformer: cargo bench -p {} --bench {}",
        suite.package, suite.bench
    ));
    let mut child = crate::cargo::command(&[
        "bench",
        "-p",
        suite.package,
        "--bench",
        suite.bench,
        "--",
        "--noplot",
    ])
    .env("CRITERION_HOME", &criterion_home)
    .stderr(Stdio::piped())
    .spawn()
    .context("running cargo bench")?;
    // Echo the bench's stderr as it comes, keeping the line a memory figure is on.
    let mut rust_memory = None;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if let Some(m) = &suite.memory {
                rust_memory = rust_memory.or_else(|| number_after(&line, m.rust_marker));
            }
        }
    }
    let status = child.wait().context("waiting for cargo bench")?;
    if !status.success() {
        step.finish("FAILED");
        bail!("cargo bench failed ({status})");
    }
    step.finish("done");

    let mut table = String::from(
        "| kinformer bench vs client-go bench | client-go ns per element (median of 5) | kinformer ns per element (criterion median) | speed-up | target |\n\
         | --- | ---: | ---: | ---: | ---: |\n",
    );
    for pair in suite.pairs {
        let rust = criterion_ns_per_element(&criterion_home, pair.rust)
            .with_context(|| format!("reading criterion's result for {}", pair.rust))?;
        let go_ns = go
            .get(pair.go)
            .copied()
            .with_context(|| format!("no Go result for {}", pair.go))?
            / pair.go_elements;
        let ratio = go_ns / rust;
        let target = pair.target.map_or_else(
            || "–".to_owned(),
            |t| format!("≥ {t}x {}", if ratio >= t { "met" } else { "**missed**" }),
        );
        let _ = writeln!(
            table,
            "| `{}` vs `{}` | {go_ns:.1} | {rust:.1} | {ratio:.2}x | {target} |",
            pair.rust, pair.go
        );
    }
    let _ = fs::remove_dir_all(&criterion_home);
    if let Some(m) = &suite.memory {
        let go_bytes = go_memory(&root, m)?;
        let rust_bytes = rust_memory.context("the Rust bench printed no memory figure")?;
        let _ = writeln!(
            table,
            "\n| memory | client-go | kinformer | kinformer ÷ client-go |\n| --- | ---: | ---: | ---: |\n\
             | heap bytes per entry | {go_bytes:.1} | {rust_bytes:.1} | {:.2} |",
            rust_bytes / go_bytes
        );
    }
    println!("\n{table}");
    record(&root.join("BENCHMARKS.md"), suite.name, &table)?;
    eprintln!("recorded in BENCHMARKS.md");
    Ok(())
}

/// The number right after `marker` on `line`, if there is one.
fn number_after(line: &str, marker: &str) -> Option<f64> {
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Runs the Go test that logs the memory figure and reads it.
fn go_memory(root: &Path, m: &Memory) -> anyhow::Result<f64> {
    let out = Command::new("go")
        .args([
            "test",
            "-count",
            "1",
            "-v",
            "-run",
            &format!("^{}$", m.go_test),
            "./bench",
        ])
        .current_dir(root.join("xtask").join("go"))
        .env("GOTOOLCHAIN", "local")
        .output()
        .context("running the Go memory test")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| number_after(l, m.go_marker))
        .with_context(|| format!("{} printed no {:?}", m.go_test, m.go_marker))
}

/// Median ns/op per benchmark from `go test -bench` output (several `-count` lines).
fn parse_go(out: &str) -> BTreeMap<String, f64> {
    let mut runs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in out.lines() {
        let mut fields = line.split_whitespace();
        let (Some(name), Some(_iters), Some(ns), Some("ns/op")) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(name) = name.strip_prefix("Benchmark") else {
            continue;
        };
        let name = name.rsplit_once('-').map_or(name, |(n, _)| n);
        if let Ok(ns) = ns.parse() {
            runs.entry(name.to_owned()).or_default().push(ns);
        }
    }
    runs.into_iter().map(|(k, v)| (k, median(v))).collect()
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// criterion's median time per iteration divided by the elements per iteration.
fn criterion_ns_per_element(home: &Path, id: &str) -> anyhow::Result<f64> {
    // criterion keeps a group's `/` out of its directory names: `a/b/c` is `a_b/c`.
    let (group, function) = id.rsplit_once('/').unwrap_or(("", id));
    let dir = home
        .join(group.replace('/', "_"))
        .join(function)
        .join("new");
    let estimates: Value = serde_json::from_str(&fs::read_to_string(dir.join("estimates.json"))?)?;
    let benchmark: Value = serde_json::from_str(&fs::read_to_string(dir.join("benchmark.json"))?)?;
    let ns = estimates["median"]["point_estimate"]
        .as_f64()
        .context("no median in estimates.json")?;
    let elements = benchmark["throughput"]["Elements"].as_f64().unwrap_or(1.0);
    Ok(ns / elements)
}

/// Replaces the suite's section of BENCHMARKS.md (between its markers), or appends it.
fn record(path: &Path, suite: &str, table: &str) -> anyhow::Result<()> {
    record_section(
        path,
        suite,
        &format!(
            "Measured by `cargo xtask bench {suite}` (both sides in one run, on a {}-core machine; the commit that \
             changed this table dates it).\n\
             Speed-up = client-go time ÷ kinformer time for the same element.\n\n{table}",
            std::thread::available_parallelism().map_or(0, usize::from)
        ),
    )
}

/// Replaces the text between the suite's markers in BENCHMARKS.md with `body`, or
/// appends a section with the markers.
pub(crate) fn record_section(path: &Path, suite: &str, body: &str) -> anyhow::Result<()> {
    let start = format!("<!-- bench:{suite}:start -->");
    let end = format!("<!-- bench:{suite}:end -->");
    let section = format!("{start}\n{body}{end}");
    let text = fs::read_to_string(path).unwrap_or_default();
    let new = match (text.find(&start), text.find(&end)) {
        (Some(a), Some(b)) if b > a => format!("{}{section}{}", &text[..a], &text[b + end.len()..]),
        _ => format!("{}\n## {suite}\n\n{section}\n", text.trim_end()),
    };
    fs::write(path, new).context("writing BENCHMARKS.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_output_gives_the_median_per_benchmark() {
        let out = "goos: linux\nBenchmarkWorkqueueAddAfter-2   100  900.0 ns/op\n\
                   BenchmarkWorkqueueAddAfter-2   100  700 ns/op\nBenchmarkWorkqueueAddAfter-2 100 800 ns/op\nPASS\n";
        let m = parse_go(out);
        assert_eq!(m.get("WorkqueueAddAfter"), Some(&800.0));
    }

    #[test]
    fn record_replaces_only_its_own_section() {
        let dir = std::env::temp_dir().join(format!("kinformer-bench-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("B.md");
        fs::write(&path, "# Benchmarks\n\nintro\n").unwrap();
        record(&path, "a", "T1\n").unwrap();
        record(&path, "b", "U1\n").unwrap();
        record(&path, "a", "T2\n").unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("T2")
                && !text.contains("T1")
                && text.contains("U1")
                && text.starts_with("# Benchmarks")
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
