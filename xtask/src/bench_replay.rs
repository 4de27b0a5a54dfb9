//! `cargo xtask bench replay [--events 10000] [--runs 3] [--writers 4] [--no-record]`:
//! kinformer-replay's target, "a 10,000-event recording replayed into an informer plus a
//! controller in ≤ 1 s of wall time, the same final cache and the same reconciles as the live
//! run".
//!
//! 1. **Live**, on a fresh local control plane: the default pod informer (`Cached<Pod>`) over
//!    `Recorder::to_file(KubeListerWatcher::new(api).cached(), ..)` and a controller of the
//!    controller kit (`Controller::<ObjectKey>::new`, two workers, its `EnqueueKeys` handler
//!    with the coalescing buffer `Controller::watch` gives) whose reconcile reads the pod from
//!    the lister and notes, per key, the resourceVersion it read (`deleted` when the pod is
//!    gone) and counts its calls. `--writers` concurrent writers cause `--events` watch events
//!    in one namespace (record.rs's churn: label or annotation updates, creates and deletes,
//!    40 %, 20 % and 40 % of the events, a pod's delete being two; pods are never
//!    scheduled); then the bench waits
//!    until the cache equals a LIST from the server and the controller is idle, each key
//!    reconciled at its cached version or as deleted.
//! 2. **Replay**, `--runs` times in each of two ways, each in a runtime of its own: the same
//!    informer and controller over `Replay::with(Recording::load(file), TokioClock, timing)`:
//!    on a paused clock (a current-thread runtime with `start_paused`) with `Timing::Recorded`,
//!    what `Replay::new` gives and the crate docs run (the headline), and on real time with
//!    `Timing::Immediate`. Wall time from before `Recording::load` until the controller is
//!    idle, with where it went: the file loaded, everything served (`Replay::finished`), the
//!    cache equal to the recording's final state, the controller idle (nothing queued,
//!    processing or buffered, every key reconciled at its final version or as deleted).
//! 3. Compared with the live run: the final cache (key → resourceVersion), and the reconciles:
//!    the keys reconciled and the last state each was reconciled at. Reconcile counts differ
//!    by nature (the queue coalesces a key's events while it waits, more or less depending
//!    on speed), so both are shown, not compared. Also: the objects' decode alone
//!    (`Cached<Pod>` from the recorded JSON), the replay's divergences.
//!
//! Measured in a release build: a debug xtask builds itself with `--profile=release` and runs
//! that. Medians go to BENCHMARKS.md's `replay` section unless `--no-record`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kinformer::compact_store::Cached;
use kinformer::controller::{Action, Context, Controller};
use kinformer::core::{MetaObject, ObjectKey, TokioClock, meta_namespace_key};
use kinformer::indexer::Lister;
use kinformer::informer::{HandlerOptions, InformerHandle, Registration, SharedIndexInformer};
use kinformer::prelude::CancellationToken;
use kinformer::reflector::{KubeListerWatcher, ListerWatcher, reflector_client};
use kinformer::workqueue::{PriorityWorkQueue, Queue};
use kinformer_replay::{RecordOptions, Recorder, Recording, Replay, Timing};
use kube::Api;
use kube::api::ListParams;

use crate::bench::{median, record_section};
use crate::controlplane;
use crate::progress::Step;
use crate::record::{Churn, Write, apply};

/// The suite's name on the command line and in BENCHMARKS.md's markers.
pub(crate) const SUITE: &str = "replay";
/// The target for the whole replay.
const TARGET: Duration = Duration::from_secs(1);
/// What a reconcile notes for a pod that is not in the cache.
const DELETED: &str = "deleted";
/// The longest the live run waits for its cache and controller, and a replay for anything.
const PATIENCE: Duration = Duration::from_secs(300);

type Item = Cached<Pod>;

#[derive(Parser, Debug)]
#[command(
    name = "cargo xtask bench replay",
    about = "A recording of a live pod informer and controller replayed into the same, on a paused and on a real clock"
)]
struct Opts {
    /// Watch events the live run's writes cause.
    #[arg(long, default_value_t = 10_000)]
    events: usize,
    /// Replays of each kind.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Concurrent writers of the live run.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Print the tables without writing BENCHMARKS.md.
    #[arg(long)]
    no_record: bool,
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = Opts::parse_from(
        std::iter::once(format!("cargo xtask bench {SUITE}")).chain(args.iter().cloned()),
    );
    ensure!(
        opts.events > 0 && opts.runs > 0 && opts.writers > 0,
        "--events, --runs and --writers must be positive"
    );
    if cfg!(debug_assertions) {
        return in_release(args);
    }
    let command = std::iter::once(format!("cargo xtask bench {SUITE}"))
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let began = Instant::now();
    let load_before = load_average();
    controlplane::build(&controlplane::CONTROL_PLANE, false)?;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("pods.jsonl");
    let live = live(&path, &opts)?;
    let recording = Recording::load(&path)?;
    let expected = recording.final_state().versions();
    ensure!(
        expected == live.end.cache,
        "the recording's final state is not the live cache ({} against {} pods)",
        expected.len(),
        live.end.cache.len()
    );
    let size = std::fs::metadata(&path)?.len();
    println!(
        "  recording: {} list/watch call(s), {} events, {:.1} MB ({} B per event)",
        recording.calls.len(),
        recording.event_count(),
        size as f64 / 1e6,
        size / recording.event_count().max(1) as u64
    );

    let mut step = Step::start(format!("replaying {} times each way", opts.runs));
    let (mut paused, mut immediate, mut decodes) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..opts.runs {
        paused.push(replay(&path, Mode::Paused, &expected)?);
        immediate.push(replay(&path, Mode::Immediate, &expected)?);
        decodes.push(decode_only(&recording)?);
        step.detail(&format!(
            "run {}/{}: paused {:.0} ms, immediate {:.0} ms",
            run + 1,
            opts.runs,
            ms(paused[run].idle),
            ms(immediate[run].idle)
        ));
        for (name, s) in [("paused", &paused[run]), ("immediate", &immediate[run])] {
            println!(
                "  run {}, {name}: loaded {:.0} ms, served {:.0} ms, cache {:.0} ms, idle {:.0} ms; {} reconciles",
                run + 1,
                ms(s.load),
                ms(s.served),
                ms(s.cached),
                ms(s.idle),
                s.end.reconciles
            );
        }
    }
    step.finish("done");

    let tables = tables(&live, &recording, size, &paused, &immediate, &decodes);
    let body = format!(
        "Measured by `{command}` on a {cores}-core machine (release build): load average {load_before} \
         before the run and {load_after} after it; the run took {min:.1} min. The commit that \
         changed this section dates it.\n\n{tables}",
        cores = std::thread::available_parallelism().map_or(0, usize::from),
        load_after = load_average(),
        min = began.elapsed().as_secs_f64() / 60.0,
    );
    println!("\n{body}");
    if !opts.no_record {
        record_section(&crate::workspace_root().join("BENCHMARKS.md"), SUITE, &body)?;
        eprintln!("recorded in BENCHMARKS.md ({SUITE})");
    }
    let same = |s: &Sample| s.end.cache == live.end.cache && s.end.last == live.end.last;
    ensure!(
        paused.iter().chain(&immediate).all(same),
        "a replay ended with another cache or other reconciles than the live run"
    );
    Ok(())
}

/// Builds xtask optimised and runs the bench there.
fn in_release(args: &[String]) -> anyhow::Result<()> {
    let exes = crate::cargo::bins("xtask", "release")?;
    let exe = exes.get("xtask").context("cargo built no xtask binary")?;
    let status = std::process::Command::new(exe)
        .args(["bench", SUITE])
        .args(args)
        .status()
        .context("running the release xtask")?;
    ensure!(status.success(), "the release bench failed ({status})");
    Ok(())
}

/// What every reconcile shares: the pod cache and what it noted.
struct Ctx {
    pods: Lister<Item>,
    seen: Arc<Reconciled>,
}

/// Per key, the last state a reconcile read (the pod's resourceVersion, or [`DELETED`]), and
/// how many reconciles ran.
#[derive(Default)]
struct Reconciled {
    last: Mutex<BTreeMap<String, String>>,
    count: AtomicUsize,
}

impl Reconciled {
    fn last(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, kinformer::indexer::Error> {
    let state = match ctx
        .pods
        .namespaced(key.namespace().unwrap_or_default())
        .get(key.name())
    {
        Ok(pod) => pod.object_resource_version().unwrap_or_default().to_owned(),
        Err(e) if e.is_not_found() => DELETED.to_owned(),
        Err(e) => return Err(e),
    };
    ctx.seen.count.fetch_add(1, Ordering::Relaxed);
    ctx.seen.last().insert(key.to_string(), state);
    Ok(Action::Done)
}

/// An informer and its controller, running.
struct Rig {
    informer: SharedIndexInformer<Item>,
    registration: Registration<Item>,
    queue: Arc<PriorityWorkQueue<ObjectKey>>,
    seen: Arc<Reconciled>,
    handle: InformerHandle,
    cancel: CancellationToken,
    workers: tokio::task::JoinHandle<()>,
}

/// What a run ended with.
struct End {
    /// key → resourceVersion.
    cache: BTreeMap<String, String>,
    /// key → the last state reconciled.
    last: BTreeMap<String, String>,
    reconciles: usize,
}

impl Rig {
    /// The informer over `lw` and the controller, started.
    fn start(lw: impl ListerWatcher<Item> + 'static) -> anyhow::Result<Self> {
        let informer = SharedIndexInformer::builder(lw).name("pods").build();
        let controller = Controller::<ObjectKey>::new("bench-replay").workers(2);
        // What `Controller::watch` registers, kept to read its buffer's length.
        let registration = informer.add_event_handler_with_options(
            controller.enqueue_handler(),
            HandlerOptions::new().coalesce_by_key(),
        )?;
        let queue = Arc::clone(controller.queue());
        let seen = Arc::new(Reconciled::default());
        let handle = informer.start()?;
        let cancel = CancellationToken::new();
        let ctx = Ctx {
            pods: informer.lister(),
            seen: Arc::clone(&seen),
        };
        let workers = tokio::spawn(controller.run(reconcile, ctx, cancel.clone()));
        Ok(Self {
            informer,
            registration,
            queue,
            seen,
            handle,
            cancel,
            workers,
        })
    }

    /// Whether the cache holds exactly `expected` (its size first: cheap).
    fn cache_is(&self, expected: &BTreeMap<String, String>) -> bool {
        self.informer.stats().objects == expected.len() && cache_of(&self.informer) == *expected
    }

    /// Whether the controller is done with `expected`: nothing buffered, queued or held,
    /// every key of it reconciled at its version, every other key reconciled as deleted.
    fn idle(&self, expected: &BTreeMap<String, String>) -> bool {
        let q = self.queue.stats();
        if q.depth + q.processing + q.waiting > 0
            || self.registration.pending() > 0
            || self.informer.stats().queued_items > 0
        {
            return false;
        }
        let last = self.seen.last();
        expected.iter().all(|(k, rv)| last.get(k) == Some(rv))
            && last
                .iter()
                .all(|(k, state)| expected.contains_key(k) || state == DELETED)
    }

    /// Stops the controller (draining its queue), then the informer.
    async fn stop(self) -> anyhow::Result<End> {
        let Self {
            informer,
            seen,
            handle,
            cancel,
            workers,
            ..
        } = self;
        cancel.cancel();
        workers.await?;
        let cache = cache_of(&informer);
        handle.stop().await?;
        let last = std::mem::take(&mut *seen.last());
        Ok(End {
            cache,
            last,
            reconciles: seen.count.load(Ordering::Relaxed),
        })
    }
}

/// `informer`'s cache: key → resourceVersion.
fn cache_of(informer: &SharedIndexInformer<Item>) -> BTreeMap<String, String> {
    informer
        .indexer()
        .list()
        .iter()
        .filter_map(|p| {
            let key = meta_namespace_key(p.as_ref()).ok()?.to_string();
            Some((key, p.object_resource_version()?.to_owned()))
        })
        .collect()
}

/// The live run, recorded.
struct Live {
    end: End,
    writes: usize,
    writers: usize,
    /// From the informer's start to the last write's answer.
    wrote: Duration,
    /// From the informer's start to the cache equal to a LIST and the controller idle.
    converged: Duration,
}

fn live(path: &Path, opts: &Opts) -> anyhow::Result<Live> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let step = Step::start("starting etcd and kube-apiserver");
        let cp = kinformer_testenv::ControlPlane::start().await?;
        step.finish("ready");
        let ns = cp.create_namespace("bench-replay").await?;
        let client = reflector_client(cp.admin_config())?;
        let lw = KubeListerWatcher::new(Api::<Pod>::namespaced(client, &ns)).cached();
        let recorder = Recorder::to_file(lw, path, RecordOptions::new(format!("pods in {ns}")))?;
        let tape = recorder.tape();
        let began = Instant::now();
        let rig = Rig::start(recorder)?;
        while !rig.informer.has_synced() {
            ensure!(began.elapsed() < PATIENCE, "the live informer did not sync");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        let api = Api::<Pod>::namespaced(cp.client()?, &ns);
        let done = Arc::new(AtomicUsize::new(0));
        let writers = futures::future::try_join_all((0..opts.writers).map(|w| {
            // An even share each, the first ones one more.
            let n = opts.events / opts.writers + usize::from(w < opts.events % opts.writers);
            writer(api.clone(), w, n, Arc::clone(&done))
        }));
        tokio::pin!(writers);
        let mut step = Step::start(format!(
            "live: pod writes by {} writers until {} events",
            opts.writers, opts.events
        ));
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let writes = loop {
            tokio::select! {
                written = &mut writers => break written?.into_iter().sum::<usize>(),
                _ = tick.tick() => step.detail(&format!(
                    "{}/{} events, {} pods cached, {} reconciles",
                    done.load(Ordering::Relaxed),
                    opts.events,
                    rig.informer.stats().objects,
                    rig.seen.count.load(Ordering::Relaxed),
                )),
            }
        };
        let wrote = began.elapsed();
        step.finish("written");

        let step = Step::start("live: waiting for cache = LIST and the controller idle");
        let listed: BTreeMap<String, String> = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter_map(|p| {
                let key = format!("{ns}/{}", p.metadata.name.as_deref()?);
                Some((key, p.metadata.resource_version.clone()?))
            })
            .collect();
        while !(rig.cache_is(&listed) && rig.idle(&listed)) {
            ensure!(
                began.elapsed() < PATIENCE,
                "the live cache or controller did not catch up with the server"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let converged = began.elapsed();
        step.finish(&format!("{} pods", listed.len()));
        let end = rig.stop().await?;
        if let Some(error) = tape.error() {
            anyhow::bail!("the live run's recording is incomplete: {error}");
        }
        println!(
            "  live: {writes} writes ({} events) in {:.1} s ({:.0} writes/s), converged at {:.1} s; {} reconciles of {} keys, {} pods left",
            opts.events,
            wrote.as_secs_f64(),
            writes as f64 / wrote.as_secs_f64(),
            converged.as_secs_f64(),
            end.reconciles,
            end.last.len(),
            end.cache.len()
        );
        Ok(Live {
            end,
            writes,
            writers: opts.writers,
            wrote,
            converged,
        })
    })
}

/// One writer's churn, seeded by its number, until it has caused `n` watch events (a pod's
/// delete causes two: `MODIFIED` with its `deletionTimestamp`, then `DELETED`); how many
/// writes that took.
async fn writer(
    api: Api<Pod>,
    w: usize,
    n: usize,
    done: Arc<AtomicUsize>,
) -> anyhow::Result<usize> {
    let mut churn = Churn::new(format!("w{w}"), w as u64);
    let (mut left, mut writes) = (n, 0);
    while left > 0 {
        let write = churn.next(left >= 2);
        apply(&api, &write, kinformer_testenv::pod).await?;
        let events = if matches!(write, Write::Delete(_)) {
            2
        } else {
            1
        };
        left -= events;
        writes += 1;
        done.fetch_add(events, Ordering::Relaxed);
    }
    Ok(writes)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `Timing::Recorded` on a paused clock (current-thread runtime, `start_paused`).
    Paused,
    /// `Timing::Immediate` on real time (current-thread runtime).
    Immediate,
}

/// One replay: when each stage was reached after the start, and how it ended.
struct Sample {
    load: Duration,
    served: Duration,
    cached: Duration,
    idle: Duration,
    /// How far Tokio's clock moved (the recorded time, on a paused clock).
    clock: Duration,
    divergences: usize,
    end: End,
}

fn replay(path: &Path, mode: Mode, expected: &BTreeMap<String, String>) -> anyhow::Result<Sample> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time();
    if mode == Mode::Paused {
        builder.start_paused(true);
    }
    let rt = builder.build()?;
    // A paused clock leaves no real timer to give up on: a thread of its own watches.
    let _watchdog = Watchdog::start(PATIENCE);
    rt.block_on(async {
        let clock = tokio::time::Instant::now();
        let began = Instant::now();
        let recording = Recording::load(path)?;
        let load = began.elapsed();
        let timing = match mode {
            Mode::Paused => Timing::Recorded,
            Mode::Immediate => Timing::Immediate,
        };
        let replay = Replay::<Item>::with(recording, Arc::new(TokioClock), timing);
        let rig = Rig::start(replay.clone())?;
        replay.finished().await;
        let served = began.elapsed();
        // Everything is served: waiting on real time no longer holds the paused clock back.
        while !rig.cache_is(expected) {
            pause().await;
        }
        let cached = began.elapsed();
        while !rig.idle(expected) {
            pause().await;
        }
        let idle = began.elapsed();
        let clock = clock.elapsed();
        let divergences = replay.divergences().len();
        let end = rig.stop().await?;
        Ok(Sample {
            load,
            served,
            cached,
            idle,
            clock,
            divergences,
            end,
        })
    })
}

/// A short real-time wait that lets the runtime's tasks run (a blocking-pool sleep: a paused
/// clock does not jump while it runs).
async fn pause() {
    let _ = tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_micros(200))).await;
}

/// Ends the process when a replay takes longer than its patience (dropped: never).
struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    fn start(patience: Duration) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&done);
        std::thread::spawn(move || {
            let until = Instant::now() + patience;
            while Instant::now() < until {
                if seen.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!(
                "a replay did not end within {} s: giving up",
                patience.as_secs()
            );
            std::process::exit(1);
        });
        Self(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How long decoding the recording's objects into `Cached<Pod>` takes alone (what a replay
/// does for each page item and event it serves).
fn decode_only(recording: &Recording) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let mut n = 0;
    for item in recording.frames().filter_map(|f| f.event.item()) {
        let pod: Item = serde_json::from_str(item.object.get())?;
        n += usize::from(pod.object_name().is_some());
    }
    let took = began.elapsed();
    ensure!(n == recording.event_count(), "an event without a name");
    Ok(took)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The median of `f` over `samples`, in ms.
fn med(samples: &[Sample], f: impl Fn(&Sample) -> Duration) -> f64 {
    median(samples.iter().map(|s| ms(f(s))).collect())
}

fn tables(
    live: &Live,
    recording: &Recording,
    size: u64,
    paused: &[Sample],
    immediate: &[Sample],
    decodes: &[Duration],
) -> String {
    let runs = paused.len();
    let headline = med(paused, |s| s.idle);
    let mut out = format!(
        "Live: {writes} pod writes by {writers} concurrent writers (label or annotation updates, \
         creates and deletes: 40 %, 20 % and 40 % of the events, a pod's delete being two, \
         `MODIFIED` with its `deletionTimestamp` then `DELETED`) on the local control plane in {wrote:.1} s, the cache equal \
         to a LIST and the controller idle at {conv:.1} s; recorded as {events} events in {calls} \
         list/watch call(s), \
         {mb:.1} MB ({per} B per event). The default pod informer (`Cached<Pod>`) and a controller \
         of two workers whose reconcile reads the pod from the lister, on both sides. Replays: \
         medians of {runs}, each in a new current-thread runtime, wall time from before \
         `Recording::load` to the controller idle.\n\n\
         **Headline (`Replay::new`'s timing, `Timing::Recorded`, on a paused clock): {headline:.0} ms \
         for {events} events; target ≤ {target} ms: {verdict}.**\n\n",
        writes = live.writes,
        writers = live.writers,
        wrote = live.wrote.as_secs_f64(),
        conv = live.converged.as_secs_f64(),
        calls = recording.calls.len(),
        events = recording.event_count(),
        mb = size as f64 / 1e6,
        per = size / recording.event_count().max(1) as u64,
        target = TARGET.as_millis(),
        verdict = if headline <= ms(TARGET) {
            "met"
        } else {
            "missed"
        },
    );
    out.push_str(
        "| run | wall time to controller idle | file loaded | replay served | cache = final state | Tokio clock moved | reconciles | final cache = live | keys reconciled and last state each = live | divergences |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    out.push_str(&format!(
        "| live (recorded) | {:.1} s | – | – | – | {:.1} s | {} | – | – | – |\n",
        live.converged.as_secs_f64(),
        live.converged.as_secs_f64(),
        live.end.reconciles
    ));
    for (name, samples) in [
        ("replay, paused clock, `Timing::Recorded`", paused),
        ("replay, real clock, `Timing::Immediate`", immediate),
    ] {
        let same_cache = samples
            .iter()
            .filter(|s| s.end.cache == live.end.cache)
            .count();
        let same_last = samples
            .iter()
            .filter(|s| s.end.last == live.end.last)
            .count();
        let reconciles = median(samples.iter().map(|s| s.end.reconciles as f64).collect());
        let divergences: usize = samples.iter().map(|s| s.divergences).sum();
        out.push_str(&format!(
            "| {name} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} s | {reconciles:.0} | {same_cache}/{runs} | {same_last}/{runs} | {divergences} |\n",
            med(samples, |s| s.idle),
            med(samples, |s| s.load),
            med(samples, |s| s.served),
            med(samples, |s| s.cached),
            median(samples.iter().map(|s| s.clock.as_secs_f64()).collect()),
        ));
    }
    let each = |samples: &[Sample]| {
        samples
            .iter()
            .map(|s| format!("{:.0}", ms(s.idle)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "\nEach run's wall time to controller idle: paused clock {} ms; real clock {} ms.\n",
        each(paused),
        each(immediate)
    ));
    out.push_str(&format!(
        "\nThe stage columns are times since the start, not durations: file loaded (`Recording::load`: \
         reading and parsing the JSON Lines), every call answered and every frame delivered \
         (`Replay::finished`; each object is decoded into a `Cached<Pod>` as it is served), the \
         informer's cache equal to the recording's final state, the controller idle (nothing \
         buffered, queued or in flight; every key reconciled at its final version, or as \
         deleted). Decoding the {events} recorded objects into `Cached<Pod>` alone (JSON → `Pod` → \
         the cache's encoding): {decode:.0} ms. {keys} keys reconciled; reconcile counts differ \
         from the live run's by nature (a key's events coalesce in the queue while it waits, more \
         or less depending on speed), so they are shown, not compared.\n",
        events = recording.event_count(),
        decode = median(decodes.iter().map(|d| ms(*d)).collect()),
        keys = live.end.last.len(),
    ));
    out
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(2).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|| "unknown".into())
}
