//! `--restart`: a restart of the process, synced again, with the cache kept on disk
//! (kinformer's snapshots) and without (kinformer cold, and client-go, which has no other
//! way), with the API server's watch cache on and off, inside the watch window and past a
//! compaction.
//!
//! Each warm run is prepared by a kinformer process that syncs cold with `--snapshot-dir`
//! (a fresh directory), writes its snapshot and exits (its write time and the file's size
//! are the snapshot's figures); then ten pods are patched (the cluster moves on while the
//! controller restarts), and for "past compaction" etcd is compacted and, with the watch
//! cache on, the API server restarted (its cache then starts past the snapshot's version, as
//! after any restart of it: the snapshot's version is gone from both). The warm process
//! starts from the snapshot (handlers get every object as an add, the default; with
//! `changes`, only what changed). Every process syncs through testenv's TCP proxy, which
//! counts the bytes the server sent it; the API server's CPU over each run comes from its
//! metrics. The cache's bytes, for the snapshot's size against them: kinformer cold's RSS
//! two seconds after the sync, less that of the same program over an empty namespace.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::contenders::RUN_TIMEOUT;
use super::contenders::{Binaries, Contender, Running};
use super::measure::through_proxy;
use crate::bench::median;
use crate::progress::Step;

/// A program, how it starts, and where the server's watch window is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Side {
    ClientGo,
    KinformerCold,
    /// From the snapshot, inside the watch window, every object an add (the default).
    KinformerWarm,
    /// The same, in a cluster where nothing but the pods changed: the watch's events
    /// reach the version the server was at, no bookmark needed.
    KinformerWarmQuiet,
    /// The same, handlers told only what changed.
    KinformerWarmChanges,
    /// From the snapshot, its version compacted away.
    KinformerPastCompaction,
}

impl Side {
    const ALL: [Self; 6] = [
        Self::ClientGo,
        Self::KinformerCold,
        Self::KinformerWarm,
        Self::KinformerWarmQuiet,
        Self::KinformerWarmChanges,
        Self::KinformerPastCompaction,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::ClientGo => "client-go (cold: lists)",
            Self::KinformerCold => "kinformer cold (lists)",
            Self::KinformerWarm => "kinformer from its snapshot",
            Self::KinformerWarmQuiet => "kinformer from its snapshot, nothing else written",
            Self::KinformerWarmChanges => "kinformer from its snapshot, changes only",
            Self::KinformerPastCompaction => "kinformer from its snapshot, past compaction",
        }
    }

    fn warm(self) -> bool {
        matches!(
            self,
            Self::KinformerWarm
                | Self::KinformerWarmQuiet
                | Self::KinformerWarmChanges
                | Self::KinformerPastCompaction
        )
    }
}

/// One run's figures.
#[derive(Clone, Debug, Default)]
pub(super) struct Run {
    sync_ms: f64,
    cpu_ms: f64,
    rss_kib: f64,
    settled_kib: f64,
    bytes: f64,
    server_cpu_ms: f64,
    resumed: bool,
    load_ms: f64,
    lists: u64,
    last_error: String,
    /// The snapshot's version and the one synced at.
    versions: String,
}

/// What a prepared snapshot measured.
#[derive(Clone, Copy, Debug, Default)]
struct Written {
    bytes: f64,
    write_ms: f64,
}

/// Every run, by pod count, watch cache and side.
#[derive(Default)]
pub(super) struct RestartRuns {
    runs: BTreeMap<(usize, bool, Side), Vec<Run>>,
    written: BTreeMap<(usize, bool), Vec<Written>>,
    /// kinformer cold's settled RSS over an empty namespace, KiB.
    baseline_kib: Vec<f64>,
}

/// Measures `n` pods of `ns` (and the empty namespace `empty` for the baseline) with the
/// watch cache on and then off, `runs` rounds of every side each, rotating. Leaves the
/// API server with its watch cache on.
#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    out: &mut RestartRuns,
    rt: &tokio::runtime::Runtime,
    cp: &kinformer_testenv::ControlPlane,
    bins: &Binaries,
    ns: &str,
    empty: &str,
    n: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let proxy = cp.proxy()?;
    let total = 2 * runs * Side::ALL.len();
    let mut step = Step::start(format!("restart: {n} pods, {total} restarts"));
    let mut done = 0;
    for cache in [true, false] {
        if cp.watch_cache() != cache {
            step.detail(&format!(
                "restarting the API server, watch cache {}",
                on_off(cache)
            ));
            cp.stop_apiserver()?;
            rt.block_on(cp.start_apiserver_with_watch_cache(cache))?;
        }
        let admin = {
            let _in_runtime = rt.enter();
            cp.client()?
        };
        if cache && out.baseline_kib.len() < runs {
            let (run, _) = sync(
                rt,
                &admin,
                &proxy,
                bins,
                Side::KinformerCold,
                empty,
                0,
                None,
            )?;
            out.baseline_kib.push(run.settled_kib);
        }
        for round in 0..runs {
            for k in 0..Side::ALL.len() {
                let side = Side::ALL[(round + k) % Side::ALL.len()];
                step.detail(&format!(
                    "{done}/{total}: {} (watch cache {})",
                    side.name(),
                    on_off(cache)
                ));
                let dir = tempfile::tempdir()?;
                if side.warm() {
                    let (_, written) = sync(
                        rt,
                        &admin,
                        &proxy,
                        bins,
                        Side::KinformerCold,
                        ns,
                        n,
                        Some(dir.path()),
                    )
                    .context("preparing the snapshot")?;
                    out.written
                        .entry((n, cache))
                        .or_default()
                        .push(written.context("the preparing run wrote no snapshot")?);
                    patch_some(rt, &admin, ns)?;
                    if side != Side::KinformerWarmQuiet {
                        // The rest of the cluster moves on too (Leases, Events, …): the
                        // server's version then lies past the pods' last event.
                        write_elsewhere(rt, &admin, empty)?;
                    }
                    if side == Side::KinformerPastCompaction {
                        let rev = rt.block_on(cp.compact_etcd())?;
                        eprintln!("\nnote: etcd compacted at {rev}");
                        if cache {
                            // Its cache holds the snapshot's version until it restarts.
                            cp.stop_apiserver()?;
                            rt.block_on(cp.start_apiserver_with_watch_cache(cache))?;
                        }
                    }
                }
                let admin = {
                    let _in_runtime = rt.enter();
                    cp.client()?
                };
                let snapshot_dir = side.warm().then(|| dir.path());
                let (run, _) = sync(rt, &admin, &proxy, bins, side, ns, n, snapshot_dir)
                    .with_context(|| format!("{} syncing {n} pods", side.name()))?;
                if side.warm() && (side == Side::KinformerPastCompaction) == run.resumed {
                    eprintln!(
                        "\nnote: {} (watch cache {}) resumed: {}; {} list(s); last error: {}; {}",
                        side.name(),
                        on_off(cache),
                        run.resumed,
                        run.lists,
                        run.last_error,
                        run.versions,
                    );
                }
                out.runs.entry((n, cache, side)).or_default().push(run);
                done += 1;
            }
        }
    }
    if !cp.watch_cache() {
        cp.stop_apiserver()?;
        rt.block_on(cp.start_apiserver_with_watch_cache(true))?;
    }
    step.finish("done");
    Ok(())
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// Patches ten pods' labels to a value they never had: the cluster moves on while the
/// program is down (a patch that changes nothing writes nothing).
fn patch_some(rt: &tokio::runtime::Runtime, client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    static PATCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let round = PATCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    rt.block_on(async {
        let pods = api
            .list(&kube::api::ListParams::default().limit(10))
            .await?;
        for p in pods.items {
            let name = p.metadata.name.unwrap_or_default();
            let patch =
                serde_json::json!({"metadata": {"labels": {"restart-round": round.to_string()}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        anyhow::Ok(())
    })
}

/// Writes a ConfigMap in `ns`: a change of another resource, which moves the cluster's
/// resourceVersion on without an event for the pods' watch.
fn write_elsewhere(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    ns: &str,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "elsewhere"},
        "data": {"n": n.to_string()},
    });
    rt.block_on(api.patch(
        "elsewhere",
        &PatchParams::apply("kinformer-bench").force(),
        &Patch::Apply(&cm),
    ))?;
    Ok(())
}

/// One process of `side` over `ns` (`n` pods), kinformer with its snapshot in
/// `snapshot_dir` if given: its run, and the snapshot it wrote after settling.
#[allow(clippy::too_many_arguments)]
fn sync(
    rt: &tokio::runtime::Runtime,
    admin: &kube::Client,
    proxy: &kinformer_testenv::ApiProxy,
    bins: &Binaries,
    side: Side,
    ns: &str,
    n: usize,
    snapshot_dir: Option<&Path>,
) -> anyhow::Result<(Run, Option<Written>)> {
    let program = if side == Side::ClientGo {
        Contender::ClientGo
    } else {
        Contender::Kinformer
    };
    let mut extra: Vec<&std::ffi::OsStr> = Vec::new();
    if let Some(dir) = snapshot_dir {
        extra.extend([std::ffi::OsStr::new("--snapshot-dir"), dir.as_os_str()]);
    }
    if side == Side::KinformerWarmChanges {
        extra.extend(["--snapshot-start", "changes"].map(std::ffi::OsStr::new));
    }
    let ((synced, sync_ms, settled, written), bytes, server_cpu_ms) =
        through_proxy(rt, admin, proxy, bins.path(program), ns, n, &extra, |cmd| {
            let mut running = Running::start(side.name(), cmd, false)?;
            let synced = running.next_json(RUN_TIMEOUT)?;
            let sync_ms = running.spawned.elapsed().as_secs_f64() * 1e3;
            let settled = running
                .next_json(Duration::from_secs(30))
                .context("settled RSS")?;
            let written = if snapshot_dir.is_none() {
                None
            } else {
                let w = running
                    .next_json(Duration::from_secs(120))
                    .context("the snapshot written")?;
                Some(Written {
                    bytes: w["snapshot_bytes"].as_f64().unwrap_or(0.0),
                    write_ms: w["snapshot_write_ms"].as_f64().unwrap_or(0.0),
                })
            };
            running.finish()?;
            Ok((synced, sync_ms, settled, written))
        })?;
    let field = |v: &serde_json::Value, f: &str| v[f].as_f64().unwrap_or(0.0);
    let run = Run {
        sync_ms,
        cpu_ms: field(&synced, "cpu_ms"),
        rss_kib: field(&synced, "rss_kib"),
        settled_kib: field(&settled, "settled_rss_kib"),
        #[allow(clippy::cast_precision_loss)]
        bytes: bytes as f64,
        server_cpu_ms,
        resumed: synced["resumed"].as_u64() == Some(1),
        load_ms: field(&synced, "snapshot_load_ms"),
        lists: synced["lists"].as_u64().unwrap_or(0),
        last_error: synced["last_error"].as_str().unwrap_or_default().to_owned(),
        versions: format!("snapshot at {}", synced["snapshot_rv"]),
    };
    // Give the API server a moment between runs.
    std::thread::sleep(Duration::from_millis(300));
    Ok((run, written))
}

impl RestartRuns {
    /// A table per pod count and watch cache: each side's medians, against client-go;
    /// and the snapshots' size and write time.
    pub(super) fn tables(&self, counts: &[usize], runs: usize) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "A restart of the program, synced again, with realistic pods, each program with its \
             defaults (client-go: protobuf, streaming list, gzip; kinformer: the same, its default \
             cache). Ten pods change while the program is down, and a ConfigMap elsewhere (the rest of \
             a cluster moves on too, so the server's version lies past the pods' last event and only \
             the watch cache's bookmark proves the watch caught up), except in the \
             \"nothing else written\" row. Cold: a list; from its snapshot: kinformer with \
             `SnapshotOptions` (every object an add, its default, or changes only), the snapshot \
             written by the previous process; past compaction: etcd compacted and, with \
             the watch cache on, the API server restarted before the start. Medians of {runs} runs, \
             one process at a time, the sides rotating. Sync: spawn to synced (from a snapshot: \
             caught up with what the server was at when it started); CPU: the process's; bytes: \
             what testenv's proxy carried to it (TLS and HTTP included); server CPU: the API \
             server's `process_cpu_seconds_total` over the run (the sync and the 2 s after it).\n"
        );
        for &n in counts {
            for cache in [true, false] {
                let Some(cold) = self.medians(n, cache, Side::ClientGo) else {
                    continue;
                };
                let _ = writeln!(
                    t,
                    "\n{n} pods, watch cache {}:\n\n| side | sync | ÷ client-go | CPU | bytes from the server | ÷ client-go | server CPU | peak RSS | resumed |\n\
                     | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
                    on_off(cache)
                );
                for side in Side::ALL {
                    let Some(m) = self.medians(n, cache, side) else {
                        continue;
                    };
                    let resumed = self.runs[&(n, cache, side)]
                        .iter()
                        .filter(|r| r.resumed)
                        .count();
                    let _ = writeln!(
                        t,
                        "| {} | {:.0} ms | {:.2}x | {:.0} ms | {:.1} MB | {:.3}x | {:.0} ms | {:.0} MiB | {} |",
                        side.name(),
                        m.sync_ms,
                        m.sync_ms / cold.sync_ms,
                        m.cpu_ms,
                        m.bytes / 1e6,
                        m.bytes / cold.bytes,
                        m.server_cpu_ms,
                        m.rss_kib / 1024.0,
                        if side.warm() {
                            format!("{resumed}/{}", self.runs[&(n, cache, side)].len())
                        } else {
                            "–".into()
                        },
                    );
                }
                if let Some(w) = self.written.get(&(n, cache)).filter(|w| !w.is_empty()) {
                    let bytes = median(w.iter().map(|w| w.bytes).collect());
                    let write_ms = median(w.iter().map(|w| w.write_ms).collect());
                    let load_ms = self
                        .medians(n, cache, Side::KinformerWarm)
                        .map_or(0.0, |m| m.load_ms);
                    let cache_bytes = self
                        .medians(n, true, Side::KinformerCold)
                        .map(|m| (m.settled_kib - median(self.baseline_kib.clone())) * 1024.0);
                    let _ = writeln!(
                        t,
                        "\nSnapshot: {:.1} MB on disk ({:.0} B per pod), {}; written in {write_ms:.0} ms \
                         (fsync included), read in {load_ms:.0} ms.",
                        bytes / 1e6,
                        bytes / n as f64,
                        cache_bytes.map_or("–".into(), |c| format!(
                            "{:.2}x the cache's bytes ({:.1} MB: kinformer cold's RSS 2 s after the sync less an empty namespace's)",
                            bytes / c,
                            c / 1e6
                        )),
                    );
                }
            }
        }
        t
    }

    fn medians(&self, n: usize, cache: bool, side: Side) -> Option<Run> {
        let runs = self.runs.get(&(n, cache, side)).filter(|r| !r.is_empty())?;
        let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
        Some(Run {
            sync_ms: med(&|r| r.sync_ms),
            cpu_ms: med(&|r| r.cpu_ms),
            rss_kib: med(&|r| r.rss_kib),
            settled_kib: med(&|r| r.settled_kib),
            bytes: med(&|r| r.bytes),
            server_cpu_ms: med(&|r| r.server_cpu_ms),
            resumed: false,
            load_ms: med(&|r| r.load_ms),
            lists: 0,
            last_error: String::new(),
            versions: String::new(),
        })
    }
}
