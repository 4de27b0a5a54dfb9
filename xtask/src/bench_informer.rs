//! `cargo xtask bench informer`: the informer as a whole against client-go's and
//! kube-runtime's, each a separate process syncing the same pods from the local control
//! plane, one process at a time.
//!
//! The contenders are `target/release/kinformer-contender` and
//! `target/release/kube-runtime-contender` (package `kinformer-bench-informer`, in
//! `bench/informer`, whose crate docs give the protocol) and client-go's
//! `informer-peer` (`xtask/go/cmd/informer-peer`, built with the control plane).
//!
//! 1. For every pod count: one namespace, its pods created once; then, with and without
//!    a transform that strips `managedFields`, `--runs` rounds of one process per
//!    contender (the order rotates each round; with stripping, kinformer runs twice: with
//!    the informer's transform and with `KubeListerWatcher::modify`). A run's sync time is
//!    from spawning the process to its result line (so it includes process start and
//!    client setup); its peak RSS is the process's `VmHWM` right after the sync.
//! 2. Event latency, on the smallest pod count with stripping: each contender in turn
//!    syncs, then this driver patches one pod label per tick at `--latency-rate` and
//!    notes the wall-clock times each patch was sent and its response arrived; the
//!    contender notes when its handler saw each new version. Latency = handler time −
//!    send (or response) time, on the one wall clock all processes of the machine share.
//! 3. Churn, on the same pods: each contender in turn syncs, then this driver patches at
//!    each of `--churn-rates` for `--churn-secs` (at most 64 patches in flight) and
//!    reports the rate it reached, the updates per second the handler saw and their p99.
//!
//! Medians, ratios to client-go, the exact command and three SVG charts
//! (`bench/informer/charts/`) go to BENCHMARKS.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use crate::bench::{median, record_section};
use crate::progress::Step;

/// The suite's name on the command line and in BENCHMARKS.md's markers.
pub(crate) const SUITE: &str = "informer";

/// The label the latency loop sets (the contenders read it).
const SEQ_LABEL: &str = "kinformer-bench/seq";
/// A second label that makes every patch a change, also when a pod gets a sequence
/// number it had before (from an earlier contender's round).
const ROUND_LABEL: &str = "kinformer-bench/round";
/// How long one process may take to sync before it is killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// Pods created per call to `create_pods` (for progress).
const CREATE_CHUNK: usize = 500;
/// Where the charts go, relative to the workspace root.
const CHART_DIR: &str = "bench/informer/charts";

#[derive(Parser, Debug)]
#[command(
    name = "cargo xtask bench informer",
    about = "Initial sync time, peak RSS, event latency and churn of kinformer, client-go and kube-runtime"
)]
struct Opts {
    /// Pod counts, comma-separated (50000 too on a bigger machine; 0 shows the fixed cost
    /// of starting a process and its client).
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1000, 10000])]
    pods: Vec<usize>,
    /// Runs per contender, pod count and transform; the median is reported.
    #[arg(long, default_value_t = 9)]
    runs: usize,
    /// Label patches per contender in the latency runs (0 skips them).
    #[arg(long, default_value_t = 1000)]
    latency_patches: usize,
    /// Label patches per second in the latency runs.
    #[arg(long, default_value_t = 50.0)]
    latency_rate: f64,
    /// Churn: label patches per second of each step, comma-separated (64 in flight at most).
    #[arg(long, value_delimiter = ',', default_values_t = [250usize, 500, 1000, 2000])]
    churn_rates: Vec<usize>,
    /// Churn: seconds per step (0 skips the churn runs).
    #[arg(long, default_value_t = 3)]
    churn_secs: usize,
    /// Print the results without writing BENCHMARKS.md and the charts.
    #[arg(long)]
    no_record: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Contender {
    ClientGo,
    Kinformer,
    /// kinformer stripping with `KubeListerWatcher::modify` (per object, while decoding)
    /// instead of the informer's transform; the same as `Kinformer` without stripping.
    KinformerModify,
    KubeRuntime,
}

impl Contender {
    const ALL: [Self; 4] = [
        Self::ClientGo,
        Self::Kinformer,
        Self::KinformerModify,
        Self::KubeRuntime,
    ];

    /// The contenders of a run with or without stripping.
    fn for_strip(strip: bool) -> &'static [Self] {
        if strip {
            &Self::ALL
        } else {
            &[Self::ClientGo, Self::Kinformer, Self::KubeRuntime]
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::ClientGo => "client-go",
            Self::Kinformer => "kinformer",
            Self::KinformerModify => "kinformer (modify)",
            Self::KubeRuntime => "kube-runtime",
        }
    }

    fn color(self) -> plotters::style::RGBColor {
        match self {
            Self::ClientGo => plotters::style::RGBColor(0x1f, 0x77, 0xb4),
            Self::Kinformer => plotters::style::RGBColor(0xd6, 0x27, 0x28),
            Self::KinformerModify => plotters::style::RGBColor(0x94, 0x67, 0xbd),
            Self::KubeRuntime => plotters::style::RGBColor(0x2c, 0xa0, 0x2c),
        }
    }
}

/// The three programs.
struct Binaries {
    client_go: PathBuf,
    kinformer: PathBuf,
    kube_runtime: PathBuf,
}

impl Binaries {
    fn path(&self, c: Contender) -> &Path {
        match c {
            Contender::ClientGo => &self.client_go,
            Contender::Kinformer | Contender::KinformerModify => &self.kinformer,
            Contender::KubeRuntime => &self.kube_runtime,
        }
    }
}

/// One sync run.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Spawn to result line, as this driver saw it.
    spawn_ms: f64,
    /// Peak RSS right after the sync.
    rss_kib: f64,
}

/// Event latencies of one contender.
#[derive(Debug, Default)]
struct Latencies {
    /// Handler time − the time the patch request was sent, ms, sorted.
    from_send: Vec<f64>,
    /// Handler time − the time the patch's response arrived, ms, sorted.
    from_ack: Vec<f64>,
    patched: usize,
}

/// (pods, managedFields stripped, contender)
type Key = (usize, bool, Contender);

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = Opts::parse_from(
        std::iter::once(format!("cargo xtask bench {SUITE}")).chain(args.iter().cloned()),
    );
    let mut pods = opts.pods.clone();
    pods.sort_unstable();
    pods.dedup();
    if pods.is_empty() || opts.runs == 0 || opts.latency_rate <= 0.0 {
        bail!("--pods needs at least one count, --runs and --latency-rate positive values");
    }
    // Latency runs patch pods: on the smallest count that has some.
    let latency_pods = pods.iter().copied().find(|&n| n > 0);
    let command = std::iter::once(format!("cargo xtask bench {SUITE}"))
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let root = crate::workspace_root();
    let began = Instant::now();
    let load_before = load_average();

    crate::controlplane::build(false)?;
    let bins = build_contenders(&root)?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let step = Step::start("starting etcd and kube-apiserver");
    let cp = rt.block_on(kinformer_testenv::ControlPlane::start())?;
    step.finish("ready");
    let client = rt.block_on(async { cp.client() })?;

    let mut samples: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
    let mut latency: BTreeMap<Contender, Latencies> = BTreeMap::new();
    let mut churn: BTreeMap<Contender, Vec<ChurnStep>> = BTreeMap::new();
    for &n in &pods {
        let ns = rt.block_on(cp.create_namespace(&format!("bench-{n}")))?;
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        let names = create_pods(&rt, &api, n)?;

        let total =
            opts.runs * (Contender::for_strip(false).len() + Contender::for_strip(true).len());
        let mut step = Step::start(format!(
            "{n} pods: {total} syncs ({} runs x 3 contenders without stripping, 4 with)",
            opts.runs
        ));
        let mut done = 0;
        for strip in [false, true] {
            for round in 0..opts.runs {
                let contenders = Contender::for_strip(strip);
                for k in 0..contenders.len() {
                    let c = contenders[(round + k) % contenders.len()];
                    step.detail(&format!(
                        "{done}/{total}: {} ({})",
                        c.name(),
                        if strip { "stripped" } else { "full objects" }
                    ));
                    let s =
                        sync_once(&bins, c, cp.kubeconfig(), &ns, n, strip).inspect_err(|_| {
                            step_failed(&format!("{} syncing {n} pods", c.name()));
                        })?;
                    samples.entry((n, strip, c)).or_default().push(s);
                    done += 1;
                }
            }
        }
        step.finish("done");

        if Some(n) == latency_pods && opts.latency_patches > 0 {
            for (k, c) in Contender::for_strip(true).iter().copied().enumerate() {
                let l = measure_latency(&rt, &bins, c, &cp, &api, &ns, &names, &opts, k)?;
                latency.insert(c, l);
            }
        }
        if Some(n) == latency_pods && opts.churn_secs > 0 && !opts.churn_rates.is_empty() {
            for (k, c) in Contender::for_strip(true).iter().copied().enumerate() {
                let steps = measure_churn(&rt, &bins, c, &cp, &api, &ns, &names, &opts, k)?;
                churn.insert(c, steps);
            }
        }
    }
    drop(cp);
    let load_after = load_average();
    let elapsed = began.elapsed();

    let mut tables = tables(
        &pods,
        &samples,
        &latency,
        latency_pods.unwrap_or_default(),
        &opts,
    );
    churn_table(&mut tables, &churn, latency_pods.unwrap_or_default(), &opts);
    println!("\n{tables}");
    eprintln!(
        "the whole bench took {:.1} min (load average {load_before} before, {load_after} after)",
        elapsed.as_secs_f64() / 60.0
    );
    if opts.no_record {
        return Ok(());
    }
    let charts = root.join(CHART_DIR);
    std::fs::create_dir_all(&charts).with_context(|| format!("creating {}", charts.display()))?;
    metric_chart(
        &charts.join("sync.svg"),
        "Initial sync (spawn to synced)",
        "ms, median",
        &pods,
        &samples,
        |s| s.spawn_ms,
    )?;
    metric_chart(
        &charts.join("rss.svg"),
        "Peak RSS after sync",
        "MiB, median",
        &pods,
        &samples,
        |s| s.rss_kib / 1024.0,
    )?;
    if !latency.is_empty() {
        latency_chart(
            &charts.join("latency.svg"),
            &latency,
            latency_pods.unwrap_or_default(),
        )?;
    }
    let body = format!(
        "Measured by `{command}` on a {cores}-core machine: load average {load_before} before the run and \
         {load_after} after it; the whole run took {min:.1} min. The commit that changed this section dates it.\n\n\
         {tables}\n\
         Charts: [sync time vs pods]({CHART_DIR}/sync.svg), [peak RSS vs pods]({CHART_DIR}/rss.svg){lat}.\n\n\
         ![sync time]({CHART_DIR}/sync.svg)\n![peak RSS]({CHART_DIR}/rss.svg)\n{latimg}",
        cores = std::thread::available_parallelism().map_or(0, usize::from),
        min = elapsed.as_secs_f64() / 60.0,
        lat = if latency.is_empty() {
            String::new()
        } else {
            format!(", [event latency CDF]({CHART_DIR}/latency.svg)")
        },
        latimg = if latency.is_empty() {
            String::new()
        } else {
            format!("![event latency]({CHART_DIR}/latency.svg)\n")
        },
    );
    record_section(&root.join("BENCHMARKS.md"), SUITE, &body)?;
    eprintln!("recorded in BENCHMARKS.md, charts in {CHART_DIR}/");
    Ok(())
}

fn step_failed(what: &str) {
    eprintln!("\nFAILED: {what}");
}

/// The 1-minute and 5-minute load averages, as `/proc/loadavg` has them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(2).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|| "unknown".into())
}

/// `cargo build --release -p kinformer-bench-informer`, and the Go peer's path.
fn build_contenders(root: &Path) -> anyhow::Result<Binaries> {
    let mut step = Step::start("cargo build --release -p kinformer-bench-informer");
    let mut child = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "-p",
            "kinformer-bench-informer",
            "--bins",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running cargo build")?;
    let stderr = child.stderr.take().map(|pipe| {
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.push(line);
            }
            lines
        })
    });
    let mut exes = BTreeMap::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if let Some(target) = msg["target"]["name"].as_str() {
                step.detail(target);
                if let Some(exe) = msg["executable"].as_str() {
                    exes.insert(target.to_owned(), PathBuf::from(exe));
                }
            }
        }
    }
    let status = child.wait().context("waiting for cargo build")?;
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if !status.success() {
        step.finish("FAILED");
        bail!("cargo build failed ({status}):\n{}", stderr.join("\n"));
    }
    step.finish("done");
    let mut exe = |name: &str| {
        exes.remove(name)
            .with_context(|| format!("cargo built no {name} executable"))
    };
    Ok(Binaries {
        client_go: kinformer_testenv::binary_dir().join("informer-peer"),
        kinformer: exe("kinformer-contender")?,
        kube_runtime: exe("kube-runtime-contender")?,
    })
}

/// Creates `n` pods in chunks, showing progress; returns their names.
fn create_pods(
    rt: &tokio::runtime::Runtime,
    api: &Api<Pod>,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let mut step = Step::start(format!("creating {n} pods"));
    let mut names = Vec::with_capacity(n);
    let mut chunk = 0;
    while names.len() < n {
        let size = CREATE_CHUNK.min(n - names.len());
        let created = rt
            .block_on(kinformer_testenv::create_pods(
                api,
                &format!("p{chunk}"),
                size,
            ))
            .inspect_err(|_| step_failed("creating pods"))?;
        names.extend(created.into_iter().filter_map(|p| p.metadata.name));
        chunk += 1;
        step.detail(&format!("{}/{n} created", names.len()));
    }
    step.finish("done");
    Ok(names)
}

/// A contender process and the lines it prints.
struct Running {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    spawned: Instant,
}

impl Running {
    fn spawn(
        bins: &Binaries,
        c: Contender,
        kubeconfig: &Path,
        ns: &str,
        n: usize,
        strip: bool,
        latency: usize,
    ) -> anyhow::Result<Self> {
        let mut cmd = Command::new(bins.path(c));
        cmd.arg("--kubeconfig").arg(kubeconfig).args([
            "--namespace",
            ns,
            "--expect",
            &n.to_string(),
        ]);
        if strip {
            cmd.arg("--strip");
        }
        if c == Contender::KinformerModify {
            cmd.arg("--modify");
        }
        if latency > 0 {
            cmd.args(["--latency", &latency.to_string()]);
        }
        cmd.stdin(if latency > 0 {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let spawned = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bins.path(c).display()))?;
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = err.read_to_string(&mut s);
                s
            })
        });
        Ok(Self {
            name: c.name(),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            spawned,
        })
    }

    /// The next JSON line, or the process killed and an error with its stderr.
    fn next_json(&mut self, timeout: Duration) -> anyhow::Result<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line)
                .with_context(|| format!("{} printed {line:?}, not JSON", self.name)),
            Err(e) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let name = self.name;
                bail!(
                    "{name}: no result ({}); its stderr:\n{}",
                    if matches!(e, mpsc::RecvTimeoutError::Timeout) {
                        "timed out"
                    } else {
                        "exited"
                    },
                    self.stderr_text()
                );
            }
        }
    }

    fn stderr_text(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    /// Waits for the exit and fails unless it succeeded.
    fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        if !status.success() {
            let name = self.name;
            bail!("{name} failed ({status}):\n{}", self.stderr_text());
        }
        Ok(())
    }
}

fn sync_once(
    bins: &Binaries,
    c: Contender,
    kubeconfig: &Path,
    ns: &str,
    n: usize,
    strip: bool,
) -> anyhow::Result<Sample> {
    let mut run = Running::spawn(bins, c, kubeconfig, ns, n, strip, 0)?;
    let v = run.next_json(RUN_TIMEOUT)?;
    let spawn_ms = run.spawned.elapsed().as_secs_f64() * 1e3;
    run.finish()?;
    let rss_kib = v["rss_kib"]
        .as_f64()
        .filter(|r| *r > 0.0)
        .with_context(|| format!("{} reported no rss_kib: {v}", c.name()))?;
    if let Some(k) = v["transform_clones"].as_u64().filter(|&k| k > 0) {
        eprintln!(
            "\nnote: {}'s transform had to clone {k} of {n} pods (their Arc was shared)",
            c.name()
        );
    }
    // Give the API server a moment between runs (it answered a big list).
    std::thread::sleep(Duration::from_millis(300));
    Ok(Sample { spawn_ms, rss_kib })
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `(sequence number, handler wall-clock ns)` from a contender's `seen` line.
fn seen_pairs(v: &Value) -> anyhow::Result<Vec<(usize, i64)>> {
    Ok(v["seen"]
        .as_array()
        .context("no \"seen\" in the contender's last line")?
        .iter()
        .filter_map(|pair| {
            Some((
                usize::try_from(pair.get(0)?.as_u64()?).ok()?,
                pair.get(1)?.as_i64()?,
            ))
        })
        .collect())
}

/// Milliseconds from `from` (unix ns) to `to` (unix ns).
fn ms_between(from: u64, to: i64) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)]
    let d = (to - i64::try_from(from).ok()?) as f64 / 1e6;
    Some(d)
}

/// One churn step of one contender.
#[derive(Debug, Clone, Copy)]
struct ChurnStep {
    /// Patches per second asked for.
    target: usize,
    /// Patches per second the generator reached (first send to last send).
    achieved: f64,
    /// Updates per second the handler saw (first send to last sighting).
    handled: f64,
    /// p99 from send to handler, ms.
    p99_ms: f64,
    sent: usize,
    seen: usize,
}

/// Runs the contender while patching at each of `--churn-rates` for `--churn-secs`,
/// with at most 64 patches in flight.
#[allow(clippy::too_many_arguments)]
fn measure_churn(
    rt: &tokio::runtime::Runtime,
    bins: &Binaries,
    c: Contender,
    cp: &kinformer_testenv::ControlPlane,
    api: &Api<Pod>,
    ns: &str,
    names: &[String],
    opts: &Opts,
    round: usize,
) -> anyhow::Result<Vec<ChurnStep>> {
    let plan: Vec<(usize, usize)> = opts
        .churn_rates
        .iter()
        .filter(|&&r| r > 0)
        .map(|&r| (r, r * opts.churn_secs))
        .collect();
    let total: usize = plan.iter().map(|(_, m)| m).sum();
    let mut step = Step::start(format!(
        "churn: {}, {total} patches at {:?}/s, {} s each",
        c.name(),
        opts.churn_rates,
        opts.churn_secs
    ));
    let mut run = Running::spawn(bins, c, cp.kubeconfig(), ns, names.len(), true, total)?;
    run.next_json(RUN_TIMEOUT)?;
    std::thread::sleep(Duration::from_secs(1));
    let times = rt.block_on(async {
        let mut times: Vec<Option<(u64, u64)>> = vec![None; total];
        let mut first = 0;
        for &(rate, m) in &plan {
            #[allow(clippy::cast_precision_loss)]
            let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut in_flight = tokio::task::JoinSet::new();
            for i in first..first + m {
                ticker.tick().await;
                while in_flight.len() >= 64 {
                    if let Some(Ok(Ok((i, t)))) = in_flight.join_next().await {
                        times[i] = Some(t);
                    }
                }
                let api = api.clone();
                let name = names[i % names.len()].clone();
                let patch = serde_json::json!({
                    "metadata": { "labels": { SEQ_LABEL: i.to_string(), ROUND_LABEL: format!("churn-{round}-{i}") } }
                });
                in_flight.spawn(async move {
                    let sent = unix_nanos();
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| (i, (sent, unix_nanos())))
                });
            }
            while let Some(r) = in_flight.join_next().await {
                if let Ok(Ok((i, t))) = r {
                    times[i] = Some(t);
                }
            }
            first += m;
            step.detail(&format!("{first}/{total} patched"));
        }
        times
    });
    drop(run.stdin.take());
    let v = run.next_json(Duration::from_secs(120))?;
    run.finish()?;
    let seen: BTreeMap<usize, i64> = seen_pairs(&v)?.into_iter().collect();
    let mut out = Vec::new();
    let mut first = 0;
    for &(rate, m) in &plan {
        let range = first..first + m;
        first += m;
        let sent: Vec<(usize, u64)> = range
            .clone()
            .filter_map(|i| Some((i, times[i]?.0)))
            .collect();
        let (Some(t0), Some(t1)) = (
            sent.iter().map(|s| s.1).min(),
            sent.iter().map(|s| s.1).max(),
        ) else {
            continue;
        };
        let mut lat: Vec<f64> = sent
            .iter()
            .filter_map(|&(i, t)| ms_between(t, *seen.get(&i)?))
            .collect();
        lat.sort_by(f64::total_cmp);
        let last_seen = range.filter_map(|i| seen.get(&i).copied()).max();
        #[allow(clippy::cast_precision_loss)]
        let per_s = |count: usize, ms: Option<f64>| match ms {
            Some(ms) if ms > 0.0 => count as f64 / (ms / 1e3),
            _ => f64::NAN,
        };
        out.push(ChurnStep {
            target: rate,
            achieved: per_s(
                sent.len(),
                ms_between(t0, i64::try_from(t1).unwrap_or(i64::MAX)),
            ),
            handled: per_s(lat.len(), last_seen.and_then(|t| ms_between(t0, t))),
            p99_ms: quantile(&lat, 0.99),
            sent: sent.len(),
            seen: lat.len(),
        });
    }
    step.finish(&format!("{}/{total} seen", seen.len()));
    Ok(out)
}

/// Appends the churn table.
fn churn_table(
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
        "\nChurn on {pods} pods (managedFields stripped): label patches at each rate for {} s, at most 64 in \
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

#[allow(clippy::too_many_arguments)]
fn measure_latency(
    rt: &tokio::runtime::Runtime,
    bins: &Binaries,
    c: Contender,
    cp: &kinformer_testenv::ControlPlane,
    api: &Api<Pod>,
    ns: &str,
    names: &[String],
    opts: &Opts,
    round: usize,
) -> anyhow::Result<Latencies> {
    let m = opts.latency_patches;
    let mut step = Step::start(format!(
        "event latency: {}, {m} label patches at {}/s",
        c.name(),
        opts.latency_rate
    ));
    let mut run = Running::spawn(bins, c, cp.kubeconfig(), ns, names.len(), true, m)?;
    run.next_json(RUN_TIMEOUT)?;
    // Let the watch that follows the list start before the first patch.
    std::thread::sleep(Duration::from_secs(1));
    let acked = rt.block_on(async {
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / opts.latency_rate));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut acked = Vec::with_capacity(m);
        for i in 0..m {
            ticker.tick().await;
            let sent = unix_nanos();
            let patch = serde_json::json!({
                "metadata": { "labels": { SEQ_LABEL: i.to_string(), ROUND_LABEL: format!("{round}-{i}") } }
            });
            api.patch(&names[i % names.len()], &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("patch {i}"))?;
            acked.push((sent, unix_nanos()));
            if i % 50 == 0 {
                step.detail(&format!("{i}/{m} patched"));
            }
        }
        anyhow::Ok(acked)
    })?;
    drop(run.stdin.take());
    let v = run.next_json(Duration::from_secs(60))?;
    run.finish()?;
    let (mut from_send, mut from_ack): (Vec<f64>, Vec<f64>) = seen_pairs(&v)?
        .into_iter()
        .filter_map(|(seq, seen)| {
            let (sent, ack) = *acked.get(seq)?;
            Some((ms_between(sent, seen)?, ms_between(ack, seen)?))
        })
        .unzip();
    from_send.sort_by(f64::total_cmp);
    from_ack.sort_by(f64::total_cmp);
    step.finish(&format!("{}/{m} seen", from_send.len()));
    Ok(Latencies {
        from_send,
        from_ack,
        patched: m,
    })
}

/// The nearest-rank quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn med(samples: &BTreeMap<Key, Vec<Sample>>, key: Key, f: impl Fn(&Sample) -> f64) -> f64 {
    samples
        .get(&key)
        .map_or(f64::NAN, |v| median(v.iter().map(f).collect()))
}

/// `v` with `precision` decimals, or "–" when there is no value.
fn num(v: f64, precision: usize) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else {
        format!("{v:.precision$}")
    }
}

/// `a ÷ b` as "1.23x", or "–".
fn ratio(a: f64, b: f64) -> String {
    let r = a / b;
    if r.is_finite() {
        format!("{r:.2}x")
    } else {
        "–".to_owned()
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

fn tables(
    pods: &[usize],
    samples: &BTreeMap<Key, Vec<Sample>>,
    latency: &BTreeMap<Contender, Latencies>,
    latency_pods: usize,
    opts: &Opts,
) -> String {
    use Contender::{ClientGo, Kinformer, KinformerModify, KubeRuntime};
    let mut t = String::new();
    let label = |strip: bool| if strip { "stripped" } else { "kept" };
    let kinformer_verdict = |strip: bool, k: f64, m: f64, ok: &dyn Fn(f64) -> bool| {
        if strip {
            format!("transform {}, modify {}", verdict(ok(k)), verdict(ok(m)))
        } else {
            verdict(ok(k)).to_owned()
        }
    };
    let _ = writeln!(
        t,
        "Initial sync: time from spawning the process to its \"synced\" line, median of {} runs. \
         kinformer strips with the informer's transform, kinformer (modify) with `KubeListerWatcher::modify`.\n\n\
         | pods | managedFields | client-go ms | kinformer ms | kinformer (modify) ms | kube-runtime ms | kinformer ÷ client-go | kinformer (modify) ÷ client-go | kube-runtime ÷ client-go | target: kinformer ≤ 1.0x client-go |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        opts.runs
    );
    for &n in pods {
        for strip in [false, true] {
            let [g, k, m, r] = [ClientGo, Kinformer, KinformerModify, KubeRuntime]
                .map(|c| med(samples, (n, strip, c), |s| s.spawn_ms));
            let _ = writeln!(
                t,
                "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                label(strip),
                num(g, 0),
                num(k, 0),
                num(m, 0),
                num(r, 0),
                ratio(k, g),
                ratio(m, g),
                ratio(r, g),
                kinformer_verdict(strip, k, m, &|x| x <= g)
            );
        }
    }
    let _ = writeln!(
        t,
        "\nPeak RSS (`VmHWM` right after the sync), median of {} runs.\n\n\
         | pods | managedFields | client-go MiB | kinformer MiB | kinformer (modify) MiB | kube-runtime MiB | kinformer ÷ client-go | kinformer ÷ kube-runtime | kinformer (modify) ÷ client-go | kinformer (modify) ÷ kube-runtime | target: ≤ 0.5x client-go, ≤ 1.0x kube-runtime |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        opts.runs
    );
    for &n in pods {
        for strip in [false, true] {
            let [g, k, m, r] = [ClientGo, Kinformer, KinformerModify, KubeRuntime]
                .map(|c| med(samples, (n, strip, c), |s| s.rss_kib / 1024.0));
            let _ = writeln!(
                t,
                "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                label(strip),
                num(g, 1),
                num(k, 1),
                num(m, 1),
                num(r, 1),
                ratio(k, g),
                ratio(k, r),
                ratio(m, g),
                ratio(m, r),
                kinformer_verdict(strip, k, m, &|x| x <= 0.5 * g && x <= r)
            );
        }
    }
    // With a 0-pod baseline: the peak RSS each cached pod adds, at the largest count.
    if let (Some(0), Some(&n)) = (pods.first(), pods.last().filter(|&&n| n > 0)) {
        let _ = writeln!(
            t,
            "\nPeak RSS per cached pod: (median peak RSS at {n} pods − at 0 pods) ÷ {n}.\n\n\
             | managedFields | client-go bytes | kinformer bytes | kinformer (modify) bytes | kube-runtime bytes | kinformer ÷ client-go | kinformer (modify) ÷ client-go | target: ≤ 0.5x client-go (stripped) |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
        );
        for strip in [false, true] {
            #[allow(clippy::cast_precision_loss)]
            let [g, k, m, r] = [ClientGo, Kinformer, KinformerModify, KubeRuntime].map(|c| {
                (med(samples, (n, strip, c), |s| s.rss_kib)
                    - med(samples, (0, strip, c), |s| s.rss_kib))
                    * 1024.0
                    / n as f64
            });
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                label(strip),
                num(g, 0),
                num(k, 0),
                num(m, 0),
                num(r, 0),
                ratio(k, g),
                ratio(m, g),
                if strip {
                    kinformer_verdict(strip, k, m, &|x| x <= 0.5 * g)
                } else {
                    "–".to_owned()
                }
            );
        }
    }
    if let Some(go) = latency.get(&ClientGo) {
        let (g50, g99) = (quantile(&go.from_send, 0.5), quantile(&go.from_send, 0.99));
        let _ = writeln!(
            t,
            "\nEvent latency on {} pods (managedFields stripped): {} label patches at {}/s, one pod each. \
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
                if matches!(c, Kinformer | KinformerModify) {
                    verdict(p99 <= g99)
                } else {
                    "–"
                }
            );
        }
    }
    t
}

/// Sync time or RSS against the pod count, one panel without and one with the transform.
fn metric_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    pods: &[usize],
    samples: &BTreeMap<Key, Vec<Sample>>,
    f: impl Fn(&Sample) -> f64 + Copy,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    #[allow(clippy::cast_precision_loss)]
    let xs: Vec<f64> = pods.iter().map(|&n| n as f64).collect();
    let max_x = xs.iter().copied().fold(1.0, f64::max);
    let max_y = samples
        .keys()
        .map(|&k| med(samples, k, f))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, strip) in root.split_evenly((1, 2)).iter().zip([false, true]) {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{title}: managedFields {}",
                    if strip { "stripped" } else { "kept" }
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..max_x * 1.05, 0.0..max_y * 1.15)?;
        chart
            .configure_mesh()
            .x_desc("pods")
            .y_desc(y_desc)
            .draw()?;
        for &c in Contender::for_strip(strip) {
            let color = c.color();
            let points: Vec<(f64, f64)> = pods
                .iter()
                .zip(&xs)
                .map(|(&n, &x)| (x, med(samples, (n, strip, c), f)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(4))?
                .label(c.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// The event latencies' CDFs.
fn latency_chart(
    path: &Path,
    latency: &BTreeMap<Contender, Latencies>,
    pods: usize,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let lo = latency
        .values()
        .filter_map(|l| l.from_send.first().copied())
        .fold(0.0, f64::min);
    // The CDF up to the largest p99 (the tail beyond it would squeeze the rest).
    let hi = latency
        .values()
        .map(|l| quantile(&l.from_send, 0.99))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (800, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Event latency CDF ({pods} pods, patch sent to handler, up to the largest p99)"
            ),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(lo..hi * 1.05, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("ms")
        .y_desc("fraction of updates")
        .draw()?;
    for (c, l) in latency {
        let color = c.color();
        #[allow(clippy::cast_precision_loss)]
        let total = l.from_send.len().max(1) as f64;
        #[allow(clippy::cast_precision_loss)]
        let points: Vec<(f64, f64)> = l
            .from_send
            .iter()
            .enumerate()
            .filter(|(_, v)| **v <= hi)
            .map(|(i, &v)| (v, (i + 1) as f64 / total))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(c.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[3.0], 0.99), 3.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn options_parse_with_defaults_and_lists() {
        let o = Opts::parse_from(["x", "--pods", "100,2000", "--runs", "3"]);
        assert_eq!(o.pods, [100, 2000]);
        assert_eq!(o.runs, 3);
        let d = Opts::parse_from(["x"]);
        assert_eq!(d.pods, [0, 1000, 10000]);
    }
}
