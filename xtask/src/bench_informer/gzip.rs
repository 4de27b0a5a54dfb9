//! `--gzip`: the initial sync with and without gzip, on both sides, on loopback and through a
//! link of limited bandwidth.
//!
//! Each process syncs the pods through testenv's TCP proxy, which counts the bytes the
//! server sent it and, on the paced link, lets them through at `--bandwidth-mbit` per
//! connection. The four sides are client-go asking for gzip (its default: Go's transport
//! says `Accept-Encoding: gzip`), client-go with `DisableCompression`, and kinformer with
//! `Compression::Gzip` and `Compression::None`; all sync with a streaming list, which a 1.37
//! server compresses when asked (`WatchListCompression`). Besides the sync time, the
//! process's CPU and its peak RSS, a run notes the bytes the proxy carried to it and the
//! API server's CPU time over the run (`process_cpu_seconds_total` before and after),
//! which is where compressing costs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;

use super::contenders::{Binaries, Contender, Running};
use super::measure::{self, Sample};
use crate::bench::median;
use crate::progress::Step;

/// The link a run syncs over.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Link {
    /// The proxy on loopback, unpaced.
    Loopback,
    /// The proxy paced to `--bandwidth-mbit`.
    Paced,
}

/// A program and whether it asks for gzip.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Side {
    ClientGoGzip,
    ClientGoNone,
    KinformerGzip,
    KinformerNone,
}

impl Side {
    const ALL: [Self; 4] = [
        Self::ClientGoGzip,
        Self::KinformerGzip,
        Self::ClientGoNone,
        Self::KinformerNone,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::ClientGoGzip => "client-go, gzip (its default)",
            Self::ClientGoNone => "client-go, no gzip",
            Self::KinformerGzip => "kinformer, gzip",
            Self::KinformerNone => "kinformer, no gzip",
        }
    }

    fn program(self) -> Contender {
        match self {
            Self::ClientGoGzip | Self::ClientGoNone => Contender::ClientGo,
            Self::KinformerGzip | Self::KinformerNone => Contender::Kinformer,
        }
    }

    fn compression(self) -> &'static str {
        match self {
            Self::ClientGoGzip | Self::KinformerGzip => "gzip",
            Self::ClientGoNone | Self::KinformerNone => "none",
        }
    }
}

/// One run: the process's sample, the bytes it received, the server's CPU over the run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    sample: Sample,
    bytes: u64,
    server_cpu_ms: f64,
}

/// Every run, by pod count, link and side.
#[derive(Default)]
pub(super) struct GzipRuns {
    runs: BTreeMap<(usize, Link, Side), Vec<Run>>,
}

/// Syncs `n` pods of `ns` with every side over both links, `runs` rounds each, rotating.
#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    out: &mut GzipRuns,
    rt: &tokio::runtime::Runtime,
    cp: &kinformer_testenv::ControlPlane,
    bins: &Binaries,
    ns: &str,
    n: usize,
    runs: usize,
    bandwidth_mbit: f64,
) -> anyhow::Result<()> {
    let admin = {
        let _in_runtime = rt.enter();
        cp.client()?
    };
    let proxy = cp.proxy()?;
    let total = 2 * runs * Side::ALL.len();
    let mut step = Step::start(format!("gzip: {n} pods, {total} syncs"));
    let mut done = 0;
    for link in [Link::Loopback, Link::Paced] {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rate = (link == Link::Paced).then(|| (bandwidth_mbit * 1e6 / 8.0) as u64);
        proxy.tcp().limit_bandwidth(rate);
        for round in 0..runs {
            for k in 0..Side::ALL.len() {
                let side = Side::ALL[(round + k) % Side::ALL.len()];
                step.detail(&format!("{done}/{total}: {} ({link:?})", side.name()));
                let run = sync(rt, &admin, &proxy, bins, side, ns, n)
                    .with_context(|| format!("{} syncing {n} pods ({link:?})", side.name()))?;
                out.runs.entry((n, link, side)).or_default().push(run);
                done += 1;
            }
        }
    }
    proxy.tcp().limit_bandwidth(None);
    step.finish("done");
    Ok(())
}

fn sync(
    rt: &tokio::runtime::Runtime,
    admin: &kube::Client,
    proxy: &kinformer_testenv::ApiProxy,
    bins: &Binaries,
    side: Side,
    ns: &str,
    n: usize,
) -> anyhow::Result<Run> {
    let extra = ["--compression", side.compression()].map(std::ffi::OsStr::new);
    let (sample, bytes, server_cpu_ms) = measure::through_proxy(
        rt,
        admin,
        proxy,
        bins.path(side.program()),
        ns,
        n,
        &extra,
        |cmd| {
            Running::start(side.name(), cmd, false)
                .and_then(|run| measure::settled_sample(run, side.name(), n))
        },
    )?;
    Ok(Run {
        sample,
        bytes,
        server_cpu_ms,
    })
}

impl GzipRuns {
    /// A table per pod count and link: each side's medians, and gzip against none.
    pub(super) fn tables(&self, counts: &[usize], runs: usize, bandwidth_mbit: f64) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "Initial sync of realistic pods through testenv's TCP proxy, with and without gzip, each \
             program with its other defaults (protobuf, streaming list, managedFields kept): \
             client-go asks for gzip by default (Go's transport), `--compression none` sets \
             `DisableCompression`; kinformer with `Compression::Gzip` and `Compression::None`. \
             Loopback: the proxy unpaced; paced: the proxy lets the server send each connection \
             {bandwidth_mbit} Mbit/s. Medians of {runs} runs, one process at a time, the sides \
             rotating. Sync: spawn to synced line; CPU: the process's user + system time to that line; \
             server CPU: the API server's `process_cpu_seconds_total` over the run (the sync and the \
             2 s after it); bytes: what the proxy carried to the process (TLS and HTTP framing \
             included), per pod.\n"
        );
        for &n in counts {
            for link in [Link::Loopback, Link::Paced] {
                let _ = writeln!(
                    t,
                    "\n{n} pods, {}:\n\n| side | sync | CPU | server CPU | bytes per pod | peak RSS |\n\
                     | --- | ---: | ---: | ---: | ---: | ---: |",
                    match link {
                        Link::Loopback => "loopback".to_owned(),
                        Link::Paced => format!("{bandwidth_mbit} Mbit/s"),
                    }
                );
                for side in Side::ALL {
                    let Some(m) = self.medians(n, link, side) else {
                        continue;
                    };
                    let _ = writeln!(
                        t,
                        "| {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} B | {:.1} MiB |",
                        side.name(),
                        m.sample.spawn_ms,
                        m.sample.cpu_ms,
                        m.server_cpu_ms,
                        m.bytes / n as f64,
                        m.sample.rss_kib / 1024.0
                    );
                }
                let ratio = |a: Side, b: Side, f: &dyn Fn(&Medians) -> f64| match (
                    self.medians(n, link, a),
                    self.medians(n, link, b),
                ) {
                    (Some(a), Some(b)) => format!("{:.2}x", f(&a) / f(&b)),
                    _ => "–".into(),
                };
                let sync = |m: &Medians| m.sample.spawn_ms;
                let cpu = |m: &Medians| m.sample.cpu_ms;
                let _ = writeln!(
                    t,
                    "\ngzip ÷ no gzip, sync: client-go {}, kinformer {}; CPU: client-go {}, kinformer {}. \
                     kinformer ÷ client-go with gzip: sync {}, CPU {}; without: sync {}, CPU {}; \
                     kinformer without ÷ client-go's default (gzip): sync {}.",
                    ratio(Side::ClientGoGzip, Side::ClientGoNone, &sync),
                    ratio(Side::KinformerGzip, Side::KinformerNone, &sync),
                    ratio(Side::ClientGoGzip, Side::ClientGoNone, &cpu),
                    ratio(Side::KinformerGzip, Side::KinformerNone, &cpu),
                    ratio(Side::KinformerGzip, Side::ClientGoGzip, &sync),
                    ratio(Side::KinformerGzip, Side::ClientGoGzip, &cpu),
                    ratio(Side::KinformerNone, Side::ClientGoNone, &sync),
                    ratio(Side::KinformerNone, Side::ClientGoNone, &cpu),
                    ratio(Side::KinformerNone, Side::ClientGoGzip, &sync),
                );
            }
        }
        t
    }

    fn medians(&self, n: usize, link: Link, side: Side) -> Option<Medians> {
        let runs = self.runs.get(&(n, link, side)).filter(|r| !r.is_empty())?;
        let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
        #[allow(clippy::cast_precision_loss)]
        Some(Medians {
            sample: Sample {
                spawn_ms: med(&|r| r.sample.spawn_ms),
                rss_kib: med(&|r| r.sample.rss_kib),
                cpu_ms: med(&|r| r.sample.cpu_ms),
                settled_kib: med(&|r| r.sample.settled_kib),
            },
            bytes: med(&|r| r.bytes as f64),
            server_cpu_ms: med(&|r| r.server_cpu_ms),
        })
    }
}

struct Medians {
    sample: Sample,
    bytes: f64,
    server_cpu_ms: f64,
}
