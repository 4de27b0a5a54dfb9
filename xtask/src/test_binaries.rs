//! The test step of `cargo xtask test`: builds every test target once, then runs the test
//! binaries a few at a time, each into a log of its own, and reports how long each took.
//!
//! Why not `cargo test`: it runs the binaries one after another, and most of this suite's
//! time is end-to-end tests waiting on a real API server, leases and timeouts, not using
//! the CPU. Running [`jobs`] binaries at once (the doctests are one more job) overlaps that
//! waiting; each binary still runs its own tests on its usual threads. A binary's output is
//! kept in `<target>/test-logs/` and printed only when it fails. The durations are kept too
//! (`durations.tsv`): the next run starts the slowest binaries first, and the step ends with
//! the slowest ones listed, so that where the minutes go is in every CI log.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cargo::command as cargo;
use crate::progress::Step;

/// How many binaries run at once: `KINFORMER_TEST_JOBS`, else the machine's cores.
fn jobs() -> usize {
    std::env::var("KINFORMER_TEST_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from))
}

/// One thing to run: a test binary, or `cargo test --doc`.
struct Job {
    /// `<package dir>: <kind> <target>`, e.g. `crates/deltafifo: test in_order_rules`.
    label: String,
    command: Command,
}

/// What a job did.
struct Done {
    label: String,
    took: Duration,
    passed: bool,
    log: PathBuf,
}

/// Builds every test target (`cargo test --no-run`), then runs them all with `args`
/// after `--include-ignored`; fails if any fails.
pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let root = crate::workspace_root();
    let logs = crate::cargo::target_dir().join("test-logs");
    fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let binaries = build(&root)?;
    let mut queue: Vec<Job> = binaries
        .into_iter()
        .map(|b| {
            let mut command = Command::new(&b.exe);
            command
                .arg("--include-ignored")
                .args(args)
                .current_dir(&b.package_dir)
                .env("CARGO_MANIFEST_DIR", &b.package_dir);
            Job {
                label: b.label,
                command,
            }
        })
        .collect();
    let mut doc = cargo(&["test", "--workspace", "--all-features", "--doc", "--"]);
    doc.args(args);
    queue.push(Job {
        label: "doctests (cargo test --doc)".into(),
        command: doc,
    });
    // Slowest first (as last run measured them), so that the long ones overlap.
    let durations_file = logs.join("durations.tsv");
    let before = read_durations(&durations_file);
    queue.sort_by(|a, b| {
        let took = |j: &Job| before.get(&j.label).copied().unwrap_or(Duration::MAX);
        took(b).cmp(&took(a)).then_with(|| a.label.cmp(&b.label))
    });
    for job in &mut queue {
        job.command
            .env(
                "KINFORMER_CONTROLPLANE_BIN",
                kinformer_testenv::workspace_binary_dir(),
            )
            .env(
                "CARGO",
                std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            );
    }

    let jobs = jobs();
    let total = queue.len();
    let step = Arc::new(Mutex::new(Step::start(format!(
        "running {total} test binaries and the doctests, {jobs} at a time"
    ))));
    let queue = Arc::new(Mutex::new(VecDeque::from(queue)));
    let done: Arc<Mutex<Vec<Done>>> = Arc::default();
    let workers: Vec<_> = (0..jobs)
        .map(|_| {
            let (queue, done, step, logs) = (
                Arc::clone(&queue),
                Arc::clone(&done),
                Arc::clone(&step),
                logs.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_front();
                    let Some(job) = next else { break };
                    let d = run_one(job, &logs);
                    let mut all = done.lock().unwrap_or_else(PoisonError::into_inner);
                    if !d.passed {
                        eprintln!("\nFAILED: {} (log: {})", d.label, d.log.display());
                    }
                    all.push(d);
                    step.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .detail(&format!(
                            "{}/{total} done, last: {}",
                            all.len(),
                            all.last().map_or("", |d| d.label.as_str())
                        ));
                }
            })
        })
        .collect();
    for w in workers {
        if w.join().is_err() {
            bail!("a test-runner thread panicked");
        }
    }
    let done = std::mem::take(&mut *done.lock().unwrap_or_else(PoisonError::into_inner));
    let step = Arc::try_unwrap(step)
        .ok()
        .context("the test-runner threads are done")?
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    write_durations(&durations_file, &done);
    let failed: Vec<&Done> = done.iter().filter(|d| !d.passed).collect();
    step.finish(if failed.is_empty() {
        "passed"
    } else {
        "FAILED"
    });
    report(&done);
    for d in &failed {
        eprintln!("\n---- {} ({}) ----", d.label, d.log.display());
        eprintln!("{}", tail(&d.log, 300));
    }
    if !failed.is_empty() {
        bail!(
            "{} of {total} test jobs failed: {}",
            failed.len(),
            failed
                .iter()
                .map(|d| d.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// A test binary cargo built.
struct Binary {
    label: String,
    exe: PathBuf,
    package_dir: PathBuf,
}

/// `cargo test --no-run` of the workspace; the test binaries it reports.
fn build(root: &Path) -> anyhow::Result<Vec<Binary>> {
    let step = Step::start("building every test target (cargo test --no-run)");
    let mut child = cargo(&[
        "test",
        "--workspace",
        "--all-features",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ])
    .stdout(Stdio::piped())
    .spawn()
    .context("running cargo test --no-run")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's messages")?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(b) = binary(&msg, root) {
            binaries.push(b);
        }
    }
    let status = child.wait().context("waiting for cargo test --no-run")?;
    if !status.success() {
        step.finish("FAILED");
        bail!("building the tests failed ({status})");
    }
    step.finish(&format!("{} test binaries", binaries.len()));
    Ok(binaries)
}

/// The test binary a `compiler-artifact` message names, if it names one.
fn binary(msg: &Value, root: &Path) -> Option<Binary> {
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
        return None;
    }
    let exe = PathBuf::from(msg["executable"].as_str()?);
    let manifest = Path::new(msg["manifest_path"].as_str()?);
    let package_dir = manifest.parent()?.to_path_buf();
    let kind = msg["target"]["kind"][0].as_str().unwrap_or("test");
    let name = msg["target"]["name"].as_str().unwrap_or("?");
    let dir = package_dir.strip_prefix(root).unwrap_or(&package_dir);
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    Some(Binary {
        label: format!("{}: {kind} {name}", dir.display()),
        exe,
        package_dir,
    })
}

/// Runs `job` with its output in a log of its own.
fn run_one(mut job: Job, logs: &Path) -> Done {
    let file_name: String = job
        .label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let log = logs.join(format!("{file_name}.log"));
    let start = Instant::now();
    let passed = fs::File::create(&log)
        .and_then(|out| {
            let err = out.try_clone()?;
            job.command
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .status()
        })
        .is_ok_and(|s| s.success());
    Done {
        label: job.label,
        took: start.elapsed(),
        passed,
        log,
    }
}

/// The slowest jobs and the sum of all, as the step's last lines.
fn report(done: &[Done]) {
    let mut by_time: Vec<&Done> = done.iter().collect();
    by_time.sort_by_key(|d| std::cmp::Reverse(d.took));
    let sum: Duration = done.iter().map(|d| d.took).sum();
    eprintln!(
        "    {} jobs, {:.0}s of test time in all; the slowest:",
        done.len(),
        sum.as_secs_f64()
    );
    for d in by_time.iter().take(12) {
        eprintln!("    {:>7.1}s  {}", d.took.as_secs_f64(), d.label);
    }
}

/// The durations a previous run wrote (label → time); empty when there are none.
fn read_durations(path: &Path) -> BTreeMap<String, Duration> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (secs, label) = l.split_once('\t')?;
            Some((
                label.to_owned(),
                Duration::from_secs_f64(secs.parse().ok()?),
            ))
        })
        .collect()
}

/// Keeps this run's durations for the next run's order (best effort: only the order
/// depends on it).
fn write_durations(path: &Path, done: &[Done]) {
    let text: String = done
        .iter()
        .map(|d| format!("{:.3}\t{}\n", d.took.as_secs_f64(), d.label))
        .collect();
    let _ = fs::write(path, text);
}

/// The last `lines` lines of the file at `path`.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_artifact_becomes_a_binary_labelled_by_package_dir_kind_and_name() {
        let root = Path::new("/w");
        let msg = serde_json::json!({
            "reason": "compiler-artifact",
            "profile": { "test": true },
            "executable": "/t/debug/deps/rules-abc",
            "manifest_path": "/w/crates/indexer/Cargo.toml",
            "target": { "kind": ["test"], "name": "rules" }
        });
        let b = binary(&msg, root).unwrap();
        assert_eq!(b.label, "crates/indexer: test rules");
        assert_eq!(b.exe, Path::new("/t/debug/deps/rules-abc"));
        assert_eq!(b.package_dir, Path::new("/w/crates/indexer"));

        let lib = serde_json::json!({
            "reason": "compiler-artifact",
            "profile": { "test": false },
            "executable": null,
            "manifest_path": "/w/crates/indexer/Cargo.toml",
            "target": { "kind": ["lib"], "name": "kinformer_indexer" }
        });
        assert!(binary(&lib, root).is_none(), "not a test");
        let check = serde_json::json!({ "reason": "build-finished", "success": true });
        assert!(binary(&check, root).is_none());
    }

    #[test]
    fn durations_round_trip_and_a_bad_line_is_skipped() {
        let dir = std::env::temp_dir().join(format!("xtask-durations-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("durations.tsv");
        let done = [Done {
            label: "crates/core: lib kinformer_core".into(),
            took: Duration::from_millis(1500),
            passed: true,
            log: dir.join("x.log"),
        }];
        write_durations(&path, &done);
        fs::write(&path, fs::read_to_string(&path).unwrap() + "garbage\n").unwrap();
        let read = read_durations(&path);
        assert_eq!(read.len(), 1);
        assert_eq!(
            read["crates/core: lib kinformer_core"],
            Duration::from_millis(1500)
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
