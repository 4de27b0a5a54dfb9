//! `cargo xtask soak [--minutes N] [--seed S]`: the informer under chaos, kinformer (one
//! process per FIFO kind) and client-go side by side, on the real control plane.
//!
//! 1. A control plane (watch cache on), a namespace, a proxy in front of the API server
//!    and a kubeconfig through it; 150 pods.
//! 2. The subjects, each its own process connecting through the proxy: `kinformer-soak`
//!    (`bench/soak`) with `--fifo delta-fifo`, `in-order` and `in-order-atomic`, and
//!    client-go's `soak-peer` (`xtask/go/cmd/soak-peer`). Each runs a pod informer with a
//!    recording, a panicking and a slow handler (the protocol is in `bench/soak`'s docs).
//! 3. Churn ([`churn`]) straight to the API server: creates, label updates and deletes
//!    (grace period 0) of uniquely named pods, about 200 alive (always 100–300), 15
//!    writes/s, from an RNG seeded with `--seed`; every write's outcome goes to a ledger
//!    (acknowledged with its resourceVersion, or unknown and read back later).
//! 4. Faults ([`chaos`]), one at a time after a quiet gap, from the same seed: partition,
//!    partition with an etcd compaction before the heal, API server restart (half of them
//!    switching the watch cache), etcd compaction, and the subject that keeps its cache on
//!    disk (`kinformer-soak --snapshot-dir`, handlers told only what changed) killed with
//!    SIGKILL and started again from its snapshot. Then a quiet stretch of churn, and the
//!    churn stops.
//! 5. Settling: each subject's notifications are replayed until they match a fresh LIST
//!    and its handlers caught up; then each dumps its store.
//! 6. [`checks`] per subject (store == LIST, notifications == store, add/updates/one
//!    delete per pod, every gone pod deleted once, no delete of a live pod, the
//!    handlers all got everything; for the restarted subject the same per process, from the
//!    snapshot it started from, and no pod's version ever going back across processes), and [`figures`]: convergence after each heal, lag of
//!    writes outside fault windows, resources over time. [`report`] prints the table and
//!    writes the raw results, the ledger and an RSS chart under
//!    `<target>/soak/<seed-S | ci>/`.
//!
//! A kinformer subject's violation fails the run; client-go's are reported (it is the
//! reference, not the code under test). Of the two targets, lag p99 ≤ 1 s is
//! enforced, as the check that the panicking and slow handlers did not hold the recorder
//! up (observed p99: a few ms); convergence p99 ≤ 5 s is reported, not enforced: the
//! reflector's backoff alone allows up to ~4 s after a partition with compaction (up to
//! 2 s before the first retry, up to 1.6 s more before the relist that follows the 410),
//! too close to 5 s for a shared 2-core CI machine. The CI form ([`run_ci`]) is one minute
//! of churn with a fixed seed and the subject built in the dev profile (the tests just
//! built every dependency in it; a release build would add minutes on a cold machine).

mod chaos;
mod checks;
mod churn;
mod figures;
mod report;
mod subjects;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use kinformer_testenv::{ApiProxy, ControlPlane};
use kube::Api;

use crate::controlplane;
use crate::progress::Step;
use chaos::{Fault, Schedule};
use churn::{Churn, Ledger, Settings};
use report::SubjectResult;
use subjects::{Dump, Running, Subject, Target};

/// The options of `cargo xtask soak`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Opts {
    /// Minutes of churn: faults throughout, except the first seconds and a quiet last
    /// stretch (10%, at least 15 s). Start-up and settling come on top.
    #[arg(long, default_value_t = 3.0, global = true)]
    pub(crate) minutes: f64,
    /// The seed of the churn and the faults (default: from the clock). Printed at start,
    /// so a run can be replayed.
    #[arg(long, global = true)]
    pub(crate) seed: Option<u64>,
    /// Build the Rust subject in the dev profile, as CI does, instead of release.
    #[arg(long, global = true)]
    pub(crate) debug: bool,
    /// Run exactly the short seeded form `cargo xtask test` runs (other options ignored).
    #[arg(long, global = true)]
    pub(crate) ci: bool,
}

/// The seed of the CI form, chosen because its first round of faults fits the minute,
/// kills the subject that keeps its cache on disk while the watch cache is on, then restarts
/// the API server without its watch cache before a partition with compaction (the 410 Gone,
/// relist and tombstone path), and kills that subject again with the cache off: these paths
/// run in every CI run. (Under the churn both kills resume: the watch's own events reach the
/// server's version, bookmark or not. The list a resume falls back to is the end-to-end
/// tests'.)
const CI_SEED: u64 = 12;
/// Minutes of churn in the CI form.
const CI_MINUTES: f64 = 1.0;
/// Mixed into the seed for the churn's RNG, so it does not mirror the faults' RNG.
const CHURN_SALT: u64 = 0x9e37_79b9_7f4a_7c15;
/// Pods created before the subjects start.
const INITIAL_PODS: usize = 150;
/// Writes from this long before a fault start are left out of the lag.
const BEFORE_FAULT: Duration = Duration::from_secs(2);
/// How long a subject may take to sync at start, or to answer a dump.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);
const DUMP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a subject may take to exit once its stdin closed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

/// The targets.
pub(super) struct Targets {
    pub(super) convergence_p99_s: f64,
    pub(super) lag_p99_ms: f64,
}

const TARGETS: Targets = Targets {
    convergence_p99_s: 5.0,
    lag_p99_ms: 1000.0,
};

/// One soak's settings.
pub(super) struct Config {
    pub(super) command: String,
    pub(super) seed: u64,
    /// The whole churn, warm-up and quiet stretch included.
    pub(super) churn: Duration,
    /// Churn before the first fault.
    warmup: Duration,
    /// Churn after the last fault.
    quiet: Duration,
    /// The range of the quiet gap before each fault.
    gap: (Duration, Duration),
    /// How long the subjects may take to match the LIST once the churn stopped.
    settle: Duration,
    sample: Duration,
    pub(super) release: bool,
    settings: Settings,
    /// Whether fds, threads, tasks and RSS must stay flat (long runs only).
    leak_check: bool,
    out_dir: PathBuf,
}

const SETTINGS: Settings = Settings {
    writes_per_sec: 15.0,
    min_alive: 100,
    max_alive: 300,
};

/// `cargo xtask soak`.
pub(crate) fn run(opts: &Opts) -> anyhow::Result<()> {
    if opts.ci {
        return run_ci();
    }
    if !(opts.minutes.is_finite() && opts.minutes >= 0.5) {
        bail!("--minutes must be at least 0.5");
    }
    let seed = opts.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() ^ u64::from(d.subsec_nanos()))
            % 1_000_000
    });
    let churn = Duration::from_secs_f64(opts.minutes * 60.0);
    let cfg = Config {
        command: format!(
            "cargo xtask soak --minutes {} --seed {seed}{}",
            opts.minutes,
            if opts.debug { " --debug" } else { "" }
        ),
        seed,
        churn,
        warmup: Duration::from_secs(10),
        quiet: churn
            .mul_f64(0.1)
            .clamp(Duration::from_secs(15), Duration::from_secs(60)),
        gap: (Duration::from_secs(5), Duration::from_secs(15)),
        settle: Duration::from_secs(120),
        sample: if opts.minutes > 10.0 {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(2)
        },
        release: !opts.debug,
        settings: SETTINGS,
        leak_check: opts.minutes >= 10.0,
        out_dir: crate::cargo::target_dir()
            .join("soak")
            .join(format!("seed-{seed}")),
    };
    soak(&cfg)
}

/// The short seeded form `cargo xtask test` runs.
pub(crate) fn run_ci() -> anyhow::Result<()> {
    let churn = Duration::from_secs_f64(CI_MINUTES * 60.0);
    let cfg = Config {
        command: format!(
            "cargo xtask soak --ci (the form `cargo xtask test` runs: seed {CI_SEED})"
        ),
        seed: CI_SEED,
        churn,
        warmup: Duration::from_secs(5),
        quiet: Duration::from_secs(10),
        gap: (Duration::from_secs(3), Duration::from_secs(6)),
        settle: Duration::from_secs(30),
        sample: Duration::from_secs(1),
        release: false,
        settings: SETTINGS,
        leak_check: false,
        out_dir: crate::cargo::target_dir().join("soak").join("ci"),
    };
    soak(&cfg)
}

/// Nanoseconds since the Unix epoch: the clock the subjects stamp their events with.
pub(super) fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn soak(cfg: &Config) -> anyhow::Result<()> {
    let began = Instant::now();
    eprintln!(
        "soak: seed {} ({:.1} min of churn); replay with: cargo xtask soak --minutes {} --seed {}",
        cfg.seed,
        cfg.churn.as_secs_f64() / 60.0,
        cfg.churn.as_secs_f64() / 60.0,
        cfg.seed
    );
    let peer = controlplane::SOAK_PEER;
    controlplane::build(
        &[controlplane::ETCD, controlplane::KUBE_APISERVER, peer],
        false,
    )?;
    let exe = subjects::build_rust_subject(cfg.release)?;
    let peer = peer.path();
    if cfg.out_dir.exists() {
        std::fs::remove_dir_all(&cfg.out_dir)
            .with_context(|| format!("clearing {}", cfg.out_dir.display()))?;
    }
    std::fs::create_dir_all(&cfg.out_dir)
        .with_context(|| format!("creating {}", cfg.out_dir.display()))?;
    let built = began.elapsed();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let step = Step::start("starting etcd and kube-apiserver");
    let cp = rt.block_on(ControlPlane::start())?;
    step.finish("ready");
    let (ns, proxy, api) = rt.block_on(async {
        let ns = cp.create_namespace("soak").await?;
        let api = Api::<Pod>::namespaced(cp.client()?, &ns);
        anyhow::Ok((ns, cp.proxy()?, api))
    })?;
    let mut churn = Churn::new(api.clone(), cfg.seed ^ CHURN_SALT, cfg.settings);
    let step = Step::start(format!("creating {INITIAL_PODS} pods"));
    rt.block_on(churn.populate(INITIAL_PODS))?;
    step.finish("done");

    let target = Target {
        kubeconfig: proxy.kubeconfig(),
        namespace: &ns,
        sample: cfg.sample,
        out_dir: &cfg.out_dir,
    };
    let mut running = Subject::ALL
        .iter()
        .map(|&s| {
            let exe = if s == Subject::ClientGo { &peer } else { &exe };
            Running::spawn(s, exe, &target)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    wait_synced(&mut running)?;
    let started_up = began.elapsed();

    let t0_ns = unix_nanos();
    let ledger = churn.ledger();
    let stop = Arc::new(AtomicBool::new(false));
    let faults = rt.block_on(async {
        let task = tokio::spawn(churn.run(Arc::clone(&stop)));
        let faults = chaos_phase(cfg, &cp, &proxy, &mut running, &ledger).await;
        stop.store(true, Ordering::SeqCst);
        let churn = task.await.context("the churn task failed")?;
        eprintln!("    churn stopped with {} pods alive", churn.alive());
        faults
    })?;

    let truth = rt.block_on(list(&api))?;
    let settled = settle(cfg, &mut running, &truth)?;
    let truth = rt.block_on(list(&api))?;
    let mut logs = Vec::new();
    for r in running {
        let subject = r.subject;
        logs.push((subject, r.finish(EXIT_TIMEOUT)));
    }
    drop(proxy);
    drop(cp);

    let mut ledger = churn::lock(&ledger).clone();
    ledger.sort_by_key(|e| e.unix_ns);
    let results: Vec<SubjectResult> = logs
        .into_iter()
        .zip(settled)
        .map(|((subject, (log, exit_problem)), (settled_s, dump))| {
            evaluate(
                cfg,
                subject,
                log,
                exit_problem,
                dump,
                settled_s,
                &faults,
                &ledger,
                &truth,
                t0_ns,
            )
        })
        .collect();
    let elapsed = began.elapsed();
    finish(
        cfg, t0_ns, &faults, &ledger, &results, built, started_up, elapsed,
    )
}

/// Waits until every subject has synced.
fn wait_synced(running: &mut [Running]) -> anyhow::Result<()> {
    let mut step = Step::start(
        "starting the subjects (3 kinformer FIFO kinds, one restarted from snapshots, client-go)",
    );
    let start = Instant::now();
    loop {
        let mut synced = 0;
        for r in running.iter_mut() {
            r.check_alive()?;
            if r.log().synced_ns.is_some() {
                synced += 1;
            }
        }
        if synced == running.len() {
            step.finish("synced");
            return Ok(());
        }
        if start.elapsed() > SYNC_TIMEOUT {
            step.finish("FAILED");
            bail!(
                "only {synced} of {} subjects synced within {SYNC_TIMEOUT:?}",
                running.len()
            );
        }
        step.detail(&format!("{synced}/{} synced", running.len()));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Warm-up, faults one at a time with quiet gaps, and the quiet stretch; returns the
/// faults as they happened.
async fn chaos_phase(
    cfg: &Config,
    cp: &ControlPlane,
    proxy: &ApiProxy,
    running: &mut [Running],
    ledger: &Ledger,
) -> anyhow::Result<Vec<Fault>> {
    let start = Instant::now();
    let fault_end = cfg.churn.saturating_sub(cfg.quiet);
    let mut step = Step::start(format!(
        "churn and faults for {:.0} s (the last {:.0} s quiet)",
        cfg.churn.as_secs_f64(),
        cfg.quiet.as_secs_f64()
    ));
    let mut schedule = Schedule::new(cfg.seed, cfg.gap);
    let mut faults: Vec<Fault> = Vec::new();
    let progress = Progress {
        start,
        churn: cfg.churn,
        ledger,
    };
    progress
        .pause(cfg.warmup, "warming up", &mut step, running, &faults)
        .await?;
    loop {
        let plan = schedule.next(cp.watch_cache());
        if start.elapsed() + plan.gap + plan.hold >= fault_end {
            break;
        }
        progress
            .pause(plan.gap, "quiet", &mut step, running, &faults)
            .await?;
        step.detail(&format!(
            "{:.0}/{:.0} s, fault {}: {} for {:.1} s",
            start.elapsed().as_secs_f64(),
            cfg.churn.as_secs_f64(),
            faults.len() + 1,
            plan.kind.name(),
            plan.hold.as_secs_f64()
        ));
        let fault = if plan.kind == chaos::Kind::SubjectKill {
            kill_and_restart(cp, running, plan).await
        } else {
            chaos::inject(cp, proxy, plan).await
        }
        .with_context(|| format!("injecting a {}", plan.kind.name()))?;
        faults.push(fault);
    }
    let left = cfg.churn.saturating_sub(start.elapsed());
    progress
        .pause(left, "quiet stretch", &mut step, running, &faults)
        .await?;
    step.finish(&format!("done ({} faults)", faults.len()));
    Ok(faults)
}

/// What the chaos phase shows while it waits.
struct Progress<'a> {
    start: Instant,
    churn: Duration,
    ledger: &'a Ledger,
}

impl Progress<'_> {
    /// Waits `d`, checking every second that every subject is alive and showing progress.
    async fn pause(
        &self,
        d: Duration,
        now: &str,
        step: &mut Step,
        running: &mut [Running],
        faults: &[Fault],
    ) -> anyhow::Result<()> {
        let end = Instant::now() + d;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
            for r in running.iter_mut() {
                r.check_alive()?;
            }
            step.detail(&format!(
                "{:.0}/{:.0} s, {} faults, {} writes; {now}",
                self.start.elapsed().as_secs_f64(),
                self.churn.as_secs_f64(),
                faults.len(),
                churn::lock(self.ledger).len()
            ));
        }
    }
}

/// Kills the subject that keeps its cache on disk (as a crash: no snapshot at shutdown),
/// waits `plan.hold`, reads the snapshot it left (what the new process will start from), and
/// starts it again.
async fn kill_and_restart(
    cp: &ControlPlane,
    running: &mut [Running],
    plan: chaos::Plan,
) -> anyhow::Result<Fault> {
    let r = running
        .iter_mut()
        .find(|r| r.subject == Subject::Snapshots)
        .context("no subject keeps its cache on disk")?;
    let start_ns = unix_nanos();
    r.kill()?;
    tokio::time::sleep(plan.hold).await;
    let base = snapshot_state(&r.snapshot_dir());
    r.respawn(base)?;
    Ok(Fault {
        plan,
        start_ns,
        heal_ns: unix_nanos(),
        watch_cache_after: cp.watch_cache(),
        compacted: None,
    })
}

/// The pods (name → resourceVersion) of the snapshot in `dir`, as a process starting now
/// would load it; empty when there is none it would load.
fn snapshot_state(dir: &std::path::Path) -> BTreeMap<String, u64> {
    use kinformer_compact_store::snapshot;
    use kinformer_core::MetaObject;
    let Some(path) = std::fs::read_dir(dir).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "snapshot"))
    }) else {
        return BTreeMap::new();
    };
    let Ok(header) = snapshot::read_header(&path) else {
        return BTreeMap::new();
    };
    match snapshot::read::<Pod>(&path, &header.identity) {
        Ok(s) => s
            .objects
            .iter()
            .map(|p| {
                (
                    p.object_name().unwrap_or_default().to_owned(),
                    subjects::rv_number(p.object_resource_version().unwrap_or_default()),
                )
            })
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

/// A fresh LIST of the namespace's pods (retried while the API server comes back).
async fn list(api: &Api<Pod>) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut last = None;
    for _ in 0..60 {
        match api.list(&Default::default()).await {
            Ok(l) => {
                return Ok(l
                    .items
                    .iter()
                    .map(|p| {
                        (
                            p.metadata.name.clone().unwrap_or_default(),
                            subjects::rv_number(
                                p.metadata.resource_version.as_deref().unwrap_or_default(),
                            ),
                        )
                    })
                    .collect());
            }
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!(
        "listing the pods failed for 30 s: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    )
}

/// Waits until each subject's notifications match `truth` and its handlers caught up,
/// then takes its dump; a subject that does not within the settle time is dumped as it
/// is. Returns per subject the seconds it took (`None`: not in time) and the dump.
fn settle(
    cfg: &Config,
    running: &mut [Running],
    truth: &BTreeMap<String, u64>,
) -> anyhow::Result<Vec<(Option<f64>, Dump)>> {
    let mut step = Step::start("settling: every subject against a fresh LIST");
    let start = Instant::now();
    let n = running.len();
    let mut settled: Vec<Option<f64>> = vec![None; n];
    let mut dumps: Vec<Option<Dump>> = vec![None; n];
    loop {
        for (i, r) in running.iter_mut().enumerate() {
            if settled[i].is_some() {
                continue;
            }
            let matches = same(&r.log().state, truth);
            if matches {
                let d = r.dump(DUMP_TIMEOUT)?;
                if d.store == *truth && d.slow == d.recorded && d.panicky == d.recorded {
                    settled[i] = Some(start.elapsed().as_secs_f64());
                    dumps[i] = Some(d);
                }
            }
        }
        let done = settled.iter().filter(|s| s.is_some()).count();
        if done == n || start.elapsed() > cfg.settle {
            break;
        }
        step.detail(&format!("{done}/{n} match"));
        std::thread::sleep(Duration::from_millis(250));
    }
    let done = settled.iter().filter(|s| s.is_some()).count();
    step.finish(&format!("{done}/{n} matched"));
    let mut out = Vec::with_capacity(n);
    for ((r, secs), dump) in running.iter_mut().zip(settled).zip(dumps) {
        let dump = match dump {
            Some(d) => d,
            None => r.dump(DUMP_TIMEOUT)?,
        };
        out.push((secs, dump));
    }
    Ok(out)
}

fn same(state: &HashMap<String, u64>, truth: &BTreeMap<String, u64>) -> bool {
    state.len() == truth.len() && truth.iter().all(|(k, rv)| state.get(k) == Some(rv))
}

/// The figures and checks of one subject.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    cfg: &Config,
    subject: Subject,
    log: subjects::Log,
    exit_problem: Option<String>,
    dump: Dump,
    settled_s: Option<f64>,
    faults: &[Fault],
    ledger: &[churn::Entry],
    truth: &BTreeMap<String, u64>,
    t0_ns: u64,
) -> SubjectResult {
    #[allow(clippy::cast_precision_loss)]
    let convergence_s: Vec<Option<f64>> = faults
        .iter()
        .map(|f| figures::convergence(&log.events, ledger, f.heal_ns).map(|ns| ns as f64 / 1e9))
        .collect();
    let before = u64::try_from(BEFORE_FAULT.as_nanos()).unwrap_or(u64::MAX);
    let windows: Vec<(u64, u64)> = faults
        .iter()
        .zip(&convergence_s)
        .map(|(f, c)| {
            let end = c.map_or(u64::MAX, |c| {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let c_ns = (c * 1e9) as u64;
                f.heal_ns + c_ns
            });
            (f.start_ns.saturating_sub(before), end)
        })
        .collect();
    let from_ns = log.synced_ns.unwrap_or(t0_ns).max(t0_ns);
    let (lag_ms, unseen) = figures::lags(&log.events, ledger, from_ns, &windows);

    let mut violations = if subject == Subject::Snapshots {
        checks::check_restarted(&log.events, &log.epochs, &dump, truth)
    } else {
        checks::check(&log.events, &dump, truth)
    };
    // The recorder shares the informer with a panicking and a slow handler: if either held
    // it up, its lag would show it (the slow one alone needs 50 ms per event).
    let lag = figures::Summary::of(&lag_ms);
    if lag.n == 0 || lag.p99 > TARGETS.lag_p99_ms {
        violations.push(format!(
            "its recorder lagged: p99 {} ms over {} writes outside fault windows (at most {} ms \
             allowed): the panicking or the slow handler may be holding it up",
            fmt(lag.p99, 0),
            lag.n,
            TARGETS.lag_p99_ms
        ));
    }
    if settled_s.is_none() {
        violations.push(format!(
            "it did not match a fresh LIST within {:.0} s of the churn stopping",
            cfg.settle.as_secs_f64()
        ));
    }
    violations.extend(exit_problem);
    if !log.bad_lines.is_empty() {
        violations.push(format!(
            "it printed {} lines outside the protocol, e.g. {:?}",
            log.bad_lines.len(),
            log.bad_lines[0]
        ));
    }
    let mut trends = Vec::new();
    // A restarted subject's samples span several processes.
    if cfg.leak_check && subject != Subject::Snapshots {
        type Field = fn(&subjects::Sample) -> Option<u64>;
        let resources: [(&str, Field, f64, f64); 4] = [
            ("RSS", |s| s.rss_kib, 0.10, 0.0),
            ("fds", |s| s.fds, 0.0, 2.0),
            ("threads", |s| s.threads, 0.0, 2.0),
            ("tasks", |s| s.tasks, 0.10, 5.0),
        ];
        for (name, f, rel, abs) in resources {
            let t = figures::Trend::of(&log.samples, t0_ns, f);
            let flat = t.is_some_and(|t| t.flat(rel, abs));
            if !flat {
                violations.push(match t {
                    Some(t) => format!(
                        "{name} grew after warm-up: median {:.0} in the last third against {:.0} in the middle third",
                        t.last, t.middle
                    ),
                    None => format!("too few samples of {name} to tell whether it grew"),
                });
            }
            trends.push((name, t, flat));
        }
    }
    SubjectResult {
        subject,
        log,
        dump,
        settled_s,
        convergence_s,
        lag_ms,
        unseen,
        violations,
        trends,
    }
}

/// Prints the report, writes the raw results, and fails on a kinformer violation.
#[allow(clippy::too_many_arguments)]
fn finish(
    cfg: &Config,
    t0_ns: u64,
    faults: &[Fault],
    ledger: &[churn::Entry],
    results: &[SubjectResult],
    built: Duration,
    started_up: Duration,
    elapsed: Duration,
) -> anyhow::Result<()> {
    println!("\nsoak: {}", cfg.command);
    println!("{}\n", report::faults_line(faults, ledger));
    println!("{}", report::table(results, faults, &TARGETS));
    println!(
        "Convergence per fault, s (from the heal until the subject's notifications show every write acknowledged before it):\n"
    );
    println!("{}", report::fault_table(faults, results, t0_ns));
    let json = report::json(cfg, t0_ns, faults, ledger, results, &TARGETS);
    let results_path = cfg.out_dir.join("results.json");
    std::fs::write(&results_path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", results_path.display()))?;
    std::fs::write(
        cfg.out_dir.join("writes.jsonl"),
        report::ledger_lines(ledger),
    )
    .context("writing the ledger")?;
    let chart = cfg.out_dir.join("rss.svg");
    report::rss_chart(
        &chart,
        results,
        faults,
        ledger,
        t0_ns,
        &format!(
            "RSS over {:.0} minutes of churn and faults (seed {}; ticks: fault starts)",
            cfg.churn.as_secs_f64() / 60.0,
            cfg.seed
        ),
    )?;
    eprintln!(
        "raw results, the ledger, each subject's output and the RSS chart: {}",
        cfg.out_dir.display()
    );
    eprintln!(
        "the soak took {:.0} s: {:.0} s building, {:.0} s starting up, {:.0} s of churn, then settling and checks",
        elapsed.as_secs_f64(),
        built.as_secs_f64(),
        (started_up - built).as_secs_f64(),
        cfg.churn.as_secs_f64()
    );

    let mut failed = Vec::new();
    for r in results {
        if r.violations.is_empty() {
            continue;
        }
        let who = r.subject.name();
        if r.subject.is_kinformer() {
            eprintln!("\nFAILED: {who}:");
            failed.push(who);
        } else {
            eprintln!("\n{who} (the reference, not under test) had violations:");
        }
        for v in &r.violations {
            eprintln!("  - {v}");
        }
    }
    for r in results.iter().filter(|r| r.subject.is_kinformer()) {
        let (conv, lag) = r.meets(&TARGETS);
        eprintln!(
            "{}: convergence p99 {} s (target ≤ {} s: {}), lag p99 {} ms (target ≤ {} ms: {})",
            r.subject.name(),
            fmt(r.convergence().p99, 2),
            TARGETS.convergence_p99_s,
            if conv { "met" } else { "missed" },
            fmt(r.lag().p99, 0),
            TARGETS.lag_p99_ms,
            if lag { "met" } else { "missed" },
        );
    }
    if !failed.is_empty() {
        bail!(
            "the soak found violations in {} (seed {}; details above and in {})",
            failed.join(", "),
            cfg.seed,
            results_path.display()
        );
    }
    eprintln!("\nsoak: every kinformer subject passed every check");
    Ok(())
}

fn fmt(v: f64, precision: usize) -> String {
    if v.is_finite() {
        format!("{v:.precision$}")
    } else {
        "–".into()
    }
}
