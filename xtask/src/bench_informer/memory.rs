//! The memory rows: bytes per cached pod of each way kinformer can cache pods (decoded
//! store with and without managedFields, the default cache, a projection in either)
//! against client-go caching the same fields, their sync and CPU times, and the peak RSS
//! of a relist (`410 Gone` after a compaction) against the steady state.
//!
//! Every contender asks for protobuf (both programs' default for pods). Per cached pod is
//! (median peak RSS at N pods − median at 0 pods) ÷ N, as in the main tables; every
//! contender runs `--memory-runs` times per count, the order rotating each round.
//!
//! The relist runs need an API server without watch cache (with it, a watch from an old
//! resourceVersion is served from the cache whatever etcd compacted): they start a control
//! plane of their own with the watch cache off, create the pods there, and run each
//! contender through a proxy the driver cuts while it patches a pod and compacts etcd.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::contenders::{Binaries, RUN_TIMEOUT, Running};
use super::report::{num, ratio};
use crate::bench::median;
use crate::progress::Step;

/// The label the driver sets while a relist contender is cut off (the contenders read it).
const RELIST_LABEL: &str = "kinformer-bench/relist";

/// What a contender keeps of each pod.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Fields {
    /// The whole pod.
    Kept,
    /// `managedFields` stripped.
    Stripped,
    /// Metadata without `managedFields`, node name, containers' names and images, phase.
    Projected,
}

impl Fields {
    fn name(self) -> &'static str {
        match self {
            Self::Kept => "whole pod",
            Self::Stripped => "managedFields stripped",
            Self::Projected => "projection",
        }
    }
}

/// kinformer's allocator.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Alloc {
    /// glibc's malloc, the default.
    Glibc,
    /// glibc, with `malloc_trim(0)` after the sync.
    GlibcTrim,
    /// mimalloc as the global allocator.
    Mimalloc,
}

/// One way of caching pods.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) struct MemContender {
    /// kinformer or client-go.
    kinformer: bool,
    /// kinformer's default cache (`--store default`: objects kept encoded from the wire
    /// to the cache); otherwise its decoded store (`--store decoded`, a factory's
    /// `decoded_informer`).
    default_cache: bool,
    fields: Fields,
    alloc: Alloc,
}

impl MemContender {
    const fn new(kinformer: bool, default_cache: bool, fields: Fields) -> Self {
        Self {
            kinformer,
            default_cache,
            fields,
            alloc: Alloc::Glibc,
        }
    }

    const fn with(self, alloc: Alloc) -> Self {
        Self { alloc, ..self }
    }

    /// Every contender of the memory rows, client-go first for each set of fields, then
    /// the allocator rows.
    pub(super) const ALL: [Self; 15] = [
        Self::new(false, false, Fields::Kept),
        Self::new(true, false, Fields::Kept),
        Self::new(true, true, Fields::Kept),
        Self::new(false, false, Fields::Stripped),
        Self::new(true, false, Fields::Stripped),
        Self::new(true, true, Fields::Stripped),
        Self::new(false, false, Fields::Projected),
        Self::new(true, false, Fields::Projected),
        Self::new(true, true, Fields::Projected),
        Self::new(true, false, Fields::Stripped).with(Alloc::GlibcTrim),
        Self::new(true, false, Fields::Stripped).with(Alloc::Mimalloc),
        Self::new(true, true, Fields::Stripped).with(Alloc::GlibcTrim),
        Self::new(true, true, Fields::Stripped).with(Alloc::Mimalloc),
        // Whole pods in the default cache: how much of the RSS is freed memory
        // glibc keeps, and another allocator.
        Self::new(true, true, Fields::Kept).with(Alloc::GlibcTrim),
        Self::new(true, true, Fields::Kept).with(Alloc::Mimalloc),
    ];

    /// The contenders of the relist runs: each side's defaults, then stripped pods.
    const RELIST: [Self; 5] = [
        Self::new(false, false, Fields::Kept),
        Self::new(true, true, Fields::Kept),
        Self::new(false, false, Fields::Stripped),
        Self::new(true, false, Fields::Stripped),
        Self::new(true, true, Fields::Stripped),
    ];

    fn name(self) -> String {
        let base = match (self.kinformer, self.default_cache) {
            (false, _) => "client-go",
            (true, false) => "kinformer, decoded store",
            (true, true) => "kinformer, default cache",
        };
        match self.alloc {
            Alloc::Glibc => base.into(),
            Alloc::GlibcTrim => format!("{base}, glibc + malloc_trim(0) after sync"),
            Alloc::Mimalloc => format!("{base}, mimalloc"),
        }
    }

    fn label(self) -> String {
        format!("{} ({})", self.name(), self.fields.name())
    }

    /// client-go caching the same fields.
    fn peer(self) -> Self {
        Self::new(false, false, self.fields)
    }

    fn command(self, bins: &Binaries, kubeconfig: &std::path::Path, ns: &str, n: usize) -> Command {
        let mut cmd = Command::new(match (self.kinformer, self.alloc) {
            (false, _) => bins.client_go(),
            (true, Alloc::Mimalloc) => bins.kinformer_mimalloc(),
            (true, _) => bins.kinformer(),
        });
        cmd.arg("--kubeconfig").arg(kubeconfig).args([
            "--namespace",
            ns,
            "--expect",
            &n.to_string(),
        ]);
        match self.fields {
            Fields::Kept => {}
            // kinformer strips while decoding (`modify`): its lowest peak.
            Fields::Stripped => {
                cmd.arg("--strip");
                if self.kinformer {
                    cmd.arg("--modify");
                }
            }
            Fields::Projected => {
                cmd.arg("--project");
            }
        }
        if self.kinformer {
            cmd.args([
                "--store",
                if self.default_cache {
                    "default"
                } else {
                    "decoded"
                },
            ]);
        }
        if self.alloc == Alloc::GlibcTrim {
            cmd.arg("--trim");
        }
        cmd
    }
}

/// One sync of one memory contender.
#[derive(Clone, Copy, Debug)]
pub(super) struct MemSample {
    spawn_ms: f64,
    /// User + system CPU time up to the result line.
    cpu_ms: f64,
    peak_kib: f64,
    now_kib: f64,
    /// `VmRSS` two seconds after the sync.
    settled_kib: f64,
}

/// One relist of one contender.
#[derive(Clone, Copy, Debug)]
pub(super) struct RelistSample {
    steady_kib: f64,
    peak_kib: f64,
    after_kib: f64,
}

/// The memory rows' samples: by pod count and contender; relists by contender.
#[derive(Default)]
pub(super) struct Memory {
    syncs: BTreeMap<(usize, MemContender), Vec<MemSample>>,
    relists: BTreeMap<MemContender, Vec<RelistSample>>,
    relist_pods: usize,
}

/// A positive number `field` of `v` (KiB, or ms for `cpu_ms`).
fn kib(v: &Value, field: &str, who: &str) -> anyhow::Result<f64> {
    v[field]
        .as_f64()
        .filter(|r| *r > 0.0)
        .with_context(|| format!("{who} reported no {field}: {v}"))
}

/// `runs` rounds of every memory contender on the pods of `ns` (`n` of them).
pub(super) fn syncs(
    memory: &mut Memory,
    bins: &Binaries,
    kubeconfig: &std::path::Path,
    ns: &str,
    n: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let all = MemContender::ALL;
    let total = runs * all.len();
    let mut step = Step::start(format!(
        "memory rows, {n} pods: {total} syncs ({runs} runs x {} contenders)",
        all.len()
    ));
    let mut done = 0;
    for round in 0..runs {
        for k in 0..all.len() {
            let c = all[(round + k) % all.len()];
            step.detail(&format!("{done}/{total}: {}", c.label()));
            let mut cmd = c.command(bins, kubeconfig, ns, n);
            cmd.arg("--settle");
            let mut run = Running::start("memory contender", cmd, false)
                .inspect_err(|_| step.detail("FAILED"))?;
            let v = run
                .next_json(RUN_TIMEOUT)
                .with_context(|| format!("{} on {n} pods", c.label()))?;
            let spawn_ms = run.spawned.elapsed().as_secs_f64() * 1e3;
            let settled = run
                .next_json(Duration::from_secs(30))
                .with_context(|| format!("{} on {n} pods: settled RSS", c.label()))?;
            run.finish()
                .with_context(|| format!("{} on {n} pods", c.label()))?;
            let who = c.label();
            memory.syncs.entry((n, c)).or_default().push(MemSample {
                spawn_ms,
                cpu_ms: kib(&v, "cpu_ms", &who)?,
                peak_kib: kib(&v, "rss_kib", &who)?,
                now_kib: kib(&v, "rss_now_kib", &who)?,
                settled_kib: kib(&settled, "settled_rss_kib", &who)?,
            });
            done += 1;
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    step.finish("done");
    Ok(())
}

/// The relist runs on a control plane of their own (watch cache off), `n` pods.
pub(super) fn relists(
    memory: &mut Memory,
    rt: &tokio::runtime::Runtime,
    bins: &Binaries,
    n: usize,
    runs: usize,
) -> anyhow::Result<()> {
    // kube clients and the proxy are made inside the runtime.
    let _in_runtime = rt.enter();
    let step = Step::start("starting a control plane without watch cache for the relist runs");
    let cp = rt.block_on(kinformer_testenv::ControlPlane::start_with(
        kinformer_testenv::Options::default().watch_cache(false),
    ))?;
    step.finish("ready");
    let client = cp.client()?;
    let ns = rt.block_on(cp.create_namespace(&format!("relist-{n}")))?;
    let api = Api::<Pod>::namespaced(client, &ns);
    let names = super::create_pods(rt, &api, n)?;
    let first = names.first().context("the relist runs need pods")?;
    memory.relist_pods = n;
    let all = MemContender::RELIST;
    let mut step = Step::start(format!(
        "relists, {n} pods: {} runs x {} contenders",
        runs,
        all.len()
    ));
    for round in 0..runs {
        for k in 0..all.len() {
            let c = all[(round + k) % all.len()];
            step.detail(&format!("round {round}: {}", c.label()));
            let proxy = cp.proxy()?;
            let mut cmd = c.command(bins, proxy.kubeconfig(), &ns, n);
            cmd.arg("--relist");
            let mut run = Running::start("relist contender", cmd, false)?;
            let who = c.label();
            run.next_json(RUN_TIMEOUT)
                .with_context(|| format!("{who}: sync"))?;
            let steady = run
                .next_json(Duration::from_secs(30))
                .with_context(|| format!("{who}: steady RSS"))?;
            // Cut off, the pod changes and etcd forgets the versions the contender knows:
            // its re-watch gets 410 Gone and it relists.
            proxy.partition();
            let patch = serde_json::json!({
                "metadata": { "labels": { RELIST_LABEL: format!("{round}-{k}") } }
            });
            rt.block_on(api.patch(first, &PatchParams::default(), &Patch::Merge(&patch)))
                .context("patching a pod for the relist")?;
            rt.block_on(cp.compact_etcd())?;
            proxy.heal();
            let relist = run
                .next_json(Duration::from_secs(150))
                .with_context(|| format!("{who}: relist"))?;
            run.finish().with_context(|| format!("{who}: relist"))?;
            memory.relists.entry(c).or_default().push(RelistSample {
                steady_kib: kib(&steady, "steady_rss_kib", &who)?,
                peak_kib: kib(&relist, "relist_hwm_kib", &who)?,
                after_kib: kib(&relist, "after_rss_kib", &who)?,
            });
        }
    }
    step.finish("done");
    Ok(())
}

fn med(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        median(v.to_vec())
    }
}

impl Memory {
    fn sync_median(&self, n: usize, c: MemContender, f: fn(&MemSample) -> f64) -> f64 {
        let v: Vec<f64> = self
            .syncs
            .get(&(n, c))
            .map(|s| s.iter().map(f).collect())
            .unwrap_or_default();
        med(&v)
    }

    /// Peak RSS per cached pod, bytes.
    fn per_pod(&self, n: usize, c: MemContender) -> f64 {
        self.per_pod_of(n, c, |s| s.peak_kib)
    }

    /// Settled RSS per cached pod, bytes.
    fn settled_per_pod(&self, n: usize, c: MemContender) -> f64 {
        self.per_pod_of(n, c, |s| s.settled_kib)
    }

    fn per_pod_of(&self, n: usize, c: MemContender, f: fn(&MemSample) -> f64) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let pods = n as f64;
        (self.sync_median(n, c, f) - self.sync_median(0, c, f)) * 1024.0 / pods
    }

    /// The memory tables, for the largest count `n`.
    pub(super) fn tables(&self, n: usize, runs: usize) -> String {
        let mut t = String::new();
        if n > 0 && !self.syncs.is_empty() {
            let _ = writeln!(
                t,
                "Memory rows at {n} pods, protobuf: peak RSS (`VmHWM` right after the sync) and RSS \
                 (`VmRSS`, same moment), medians of {runs} runs; per cached pod = (peak at {n} − peak at 0) ÷ {n}; \
                 sync time from spawn to the synced line, CPU time (user + system, `getrusage`) of the \
                 process up to that line; \
                 \"2 s later\": `VmRSS` two seconds after the synced line (handlers have had the initial adds). kinformer strips while decoding \
                 (`KubeListerWatcher::modify`); client-go with its transform. Decoded store: \
                 a factory's `decoded_informer` (decoded pods shared as `Arc`, as client-go keeps them); default cache: \
                 `SharedIndexInformer::builder(lw).build()`, pods kept encoded (transcoded from protobuf \
                 when whole, decoded, stripped and encoded when stripped). Projection: metadata without \
                 managedFields, node name, containers' names and images, phase (kinformer: a `PodView` \
                 struct as the informer's type; client-go: a transform that keeps only those fields). \
                 The allocator rows: `malloc_trim(0)` runs just before the \"2 s later\" reading, so it can \
                 lower only that column; mimalloc replaces glibc's malloc in the whole process.\n"
            );
            let _ = writeln!(
                t,
                "| contender | peak MiB at 0 | peak MiB at {n} | RSS MiB at {n} | RSS MiB 2 s later | bytes per cached pod (peak) | ÷ client-go, same fields | bytes per cached pod (2 s later) | ÷ client-go | sync ms | sync ÷ client-go | CPU ms | CPU ÷ client-go | target (peak, sync) |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
            );
            for c in MemContender::ALL {
                let per = self.per_pod(n, c);
                let peer = self.per_pod(n, c.peer());
                let settled = self.settled_per_pod(n, c);
                let peer_settled = self.settled_per_pod(n, c.peer());
                let sync = self.sync_median(n, c, |s| s.spawn_ms);
                let peer_sync = self.sync_median(n, c.peer(), |s| s.spawn_ms);
                let cpu = self.sync_median(n, c, |s| s.cpu_ms);
                let peer_cpu = self.sync_median(n, c.peer(), |s| s.cpu_ms);
                let target = match (c.kinformer, c.default_cache, c.fields) {
                    _ if c.alloc != Alloc::Glibc => "–".into(),
                    (true, false, Fields::Stripped) => verdict(per <= peer, "≤ 1.0x"),
                    (true, true, Fields::Kept) => format!(
                        "{}; sync {}",
                        verdict(per <= 0.4 * peer, "≤ 0.4x"),
                        verdict(sync <= 0.8 * peer_sync, "≤ 0.8x")
                    ),
                    (true, true, Fields::Stripped) => format!(
                        "{}; sync {}",
                        verdict(per <= 0.5 * peer, "≤ 0.5x"),
                        verdict(sync <= peer_sync, "≤ 1.0x")
                    ),
                    _ => "–".into(),
                };
                let _ = writeln!(
                    t,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {target} |",
                    c.label(),
                    num(self.sync_median(0, c, |s| s.peak_kib) / 1024.0, 1),
                    num(self.sync_median(n, c, |s| s.peak_kib) / 1024.0, 1),
                    num(self.sync_median(n, c, |s| s.now_kib) / 1024.0, 1),
                    num(self.sync_median(n, c, |s| s.settled_kib) / 1024.0, 1),
                    num(per, 0),
                    if c.kinformer {
                        ratio(per, peer)
                    } else {
                        "1.00x".into()
                    },
                    num(settled, 0),
                    if c.kinformer {
                        ratio(settled, peer_settled)
                    } else {
                        "1.00x".into()
                    },
                    num(sync, 0),
                    if c.kinformer {
                        ratio(sync, peer_sync)
                    } else {
                        "1.00x".into()
                    },
                    num(cpu, 0),
                    if c.kinformer {
                        ratio(cpu, peer_cpu)
                    } else {
                        "1.00x".into()
                    },
                );
            }
            t.push('\n');
        }
        if !self.relists.is_empty() {
            let rn = self.relist_pods;
            let _ = writeln!(
                t,
                "Relist at {rn} pods, on an API server without watch cache: after the \
                 sync the contender resets its peak RSS; the driver cuts its connection, patches a pod, compacts \
                 etcd and reconnects it, so its re-watch gets `410 Gone` and it relists. Steady = `VmRSS` before; \
                 peak = `VmHWM` from the reset to a second after the handler saw the patched pod; medians of the \
                 runs.\n"
            );
            let _ = writeln!(
                t,
                "| contender | steady MiB | peak during relist MiB | RSS after MiB | peak ÷ steady | runs | target: ≤ 1.1x |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: | --- |"
            );
            for c in MemContender::RELIST {
                let Some(s) = self.relists.get(&c) else {
                    continue;
                };
                let steady = med(&s.iter().map(|r| r.steady_kib).collect::<Vec<_>>());
                let peak = med(&s.iter().map(|r| r.peak_kib).collect::<Vec<_>>());
                let after = med(&s.iter().map(|r| r.after_kib).collect::<Vec<_>>());
                let _ = writeln!(
                    t,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    c.label(),
                    num(steady / 1024.0, 1),
                    num(peak / 1024.0, 1),
                    num(after / 1024.0, 1),
                    ratio(peak, steady),
                    s.len(),
                    if c.kinformer {
                        verdict(peak <= 1.1 * steady, "")
                    } else {
                        "–".into()
                    }
                );
            }
            t.push('\n');
        }
        t
    }
}

fn verdict(ok: bool, what: &str) -> String {
    let v = if ok { "met" } else { "**missed**" };
    if what.is_empty() {
        v.into()
    } else {
        format!("{what}: {v}")
    }
}
