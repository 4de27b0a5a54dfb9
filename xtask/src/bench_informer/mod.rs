//! `cargo xtask bench informer`: the informer as a whole against client-go's and
//! kube-runtime's, each a separate process syncing the same pods from the local control
//! plane, one process at a time.
//!
//! The contenders are `target/release/kinformer-contender` and
//! `target/release/kube-runtime-contender` (package `kinformer-bench-informer`, in
//! `bench/informer`, whose crate docs give the protocol) and client-go's
//! `informer-peer` (`xtask/go/cmd/informer-peer`, built by the bench with etcd and
//! kube-apiserver).
//!
//! 1. For every pod count: one namespace, its pods created once as a cluster holds them
//!    ([`kinformer_testenv::apply_realistic_pods`]: a ReplicaSet's pod with its status,
//!    managedFields of two managers), and the bytes one pod takes on the wire in each
//!    format (a list, and a streaming list up to its end bookmark); then, with and without
//!    a transform that strips `managedFields`, `--runs` rounds of one process per
//!    contender: client-go and kinformer in protobuf (the default of both) and in JSON,
//!    kube-runtime (JSON). The order rotates each round; with stripping, kinformer
//!    (protobuf) runs twice: with the informer's transform and with
//!    `KubeListerWatcher::modify`. A run's sync time is from spawning the process to its
//!    result line (so it includes process start and client setup); its CPU time is the
//!    user + system time the process reports there (`getrusage`), its peak RSS the
//!    process's `VmHWM` right after the sync, its settled RSS `VmRSS` two seconds later.
//!    The first tables put each program's defaults side by side (kinformer with no store
//!    option and no transform); `--defaults-only` runs just these syncs (the contenders
//!    without `modify`) and the wire bytes, and records just those tables in their own
//!    section.
//! 2. Event latency, on the smallest pod count: each program with its defaults
//!    (default wire format, `managedFields` kept) in turn
//!    syncs, then this driver patches one pod label per tick at `--latency-rate` and
//!    notes the wall-clock times each patch was sent and its response arrived; the
//!    contender notes when its handler saw each new version. Latency = handler time −
//!    send (or response) time, on the one wall clock all processes of the machine share.
//! 3. Churn, on the same pods: each contender in turn syncs, then this driver patches at
//!    each of `--churn-rates` for `--churn-secs` (at most 64 patches in flight) and
//!    reports the rate it reached, the updates per second the handler saw and their p99.
//!
//! 4. Memory rows ([`memory`]), at 0 pods and the largest count: bytes per cached pod of
//!    kinformer's decoded store (whole pods, managedFields stripped), its default cache
//!    and a projection, each against client-go caching the same fields, with sync and CPU
//!    times;
//!    then, on a control plane of their own without watch cache, the peak RSS of a
//!    relist forced by `410 Gone` against the steady state. `--memory-only` runs just
//!    these and records just their section.
//!
//! 5. Custom resources ([`crd`]), with `--crd-only` (and nothing else): KEDA `ScaledObject`s
//!    ([`kinformer_testenv::apply_realistic_scaled_objects`]), `--pods` of them per count,
//!    synced in JSON by each program with its defaults: client-go's dynamic informer,
//!    kinformer's default informer over a typed `#[derive(CustomResource)]` struct and over
//!    `DynamicObject`, kube-runtime over the typed struct; and in CBOR by client-go and
//!    kinformer (the control plane serves it: `CBORServingAndStorage`); sync, CPU, RSS and
//!    bytes per cached object against client-go, recorded in their own section.
//!
//! 6. Reads from a synced cache ([`reads`]), with `--reads` (and nothing else): for every
//!    `--pods` count above 0, the pods created once, then `--runs` rounds of client-go's
//!    peer and kinformer's contender with `--reads` (each program's default pod informer,
//!    a `byNode` index and a typed add handler; the workload is `bench/informer`'s
//!    `reads` module), and kinformer's decoded informer beside them, one process per run,
//!    the sides rotating: gets by name, a hot key, a list by selector, an index sweep,
//!    their CPU and the peak RSS after them, the sync time and CPU with the handler and
//!    the time to its last initial add; medians and each kinformer side ÷ client-go in a
//!    table per count, recorded in their own section. Every side's checksums of what it
//!    read must agree.
//!
//! 7. gzip ([`gzip`]), with `--gzip` (and nothing else): for every `--pods` count above 0,
//!    client-go and kinformer each with and without gzip, syncing through testenv's proxy
//!    on loopback and paced to `--bandwidth-mbit`; sync, CPU, the API server's CPU and the
//!    bytes the proxy carried, recorded in their own section.
//!
//! 8. Restarts ([`restart`]), with `--restart` (and nothing else): for every `--pods` count
//!    above 0, client-go and kinformer syncing again after a restart: cold, and kinformer
//!    from its snapshot inside the watch window and past a compaction, with the watch cache
//!    on and off; sync, CPU, bytes from the server, the server's CPU, the snapshot's size
//!    and write and read times, recorded in their own section.
//!
//! Medians, ratios to client-go, the exact command and three SVG charts
//! (`bench/informer/charts/`) go to BENCHMARKS.md. With no mode flag the bench runs steps
//! 1–4; `--defaults-only`, `--memory-only`, `--crd-only` and `--reads` run one part each.
//!
//! This module runs the steps above in order; [`contenders`] builds and runs the
//! processes, [`measure`] takes the measurements, [`report`] writes the tables and the
//! BENCHMARKS.md section, [`charts`] draws the SVGs.

mod charts;
mod contenders;
mod crd;
mod gzip;
mod measure;
mod memory;
mod reads;
mod report;
mod restart;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::bail;
use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::controlplane;
use crate::progress::Step;
use contenders::Contender;
use measure::{ChurnStep, Key, Latencies, Sample, WireBytes};

/// The suite's name on the command line and in BENCHMARKS.md's markers.
pub(crate) const SUITE: &str = "informer";
/// Pods created per call to `apply_realistic_pods` (for progress).
const CREATE_CHUNK: usize = 500;

#[derive(Parser, Debug)]
#[command(
    name = "cargo xtask bench informer",
    about = "Initial sync time, CPU time, peak RSS, event latency and churn of kinformer, client-go and kube-runtime"
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
    /// Memory rows: runs per contender at 0 pods and at the largest count (0 skips them).
    #[arg(long, default_value_t = 3)]
    memory_runs: usize,
    /// Relist runs per contender at the largest count (0 skips them).
    #[arg(long, default_value_t = 3)]
    relist_runs: usize,
    /// Only the memory rows and the relist runs (recorded in their own section).
    #[arg(long, conflicts_with = "defaults_only")]
    memory_only: bool,
    /// Only custom resources: `--pods` KEDA ScaledObjects per count, synced in JSON by
    /// client-go's dynamic informer, kinformer (typed and DynamicObject) and kube-runtime,
    /// each with its defaults (recorded in their own section).
    #[arg(long, conflicts_with_all = ["memory_only", "defaults_only"])]
    crd_only: bool,
    /// Only the defaults-against-defaults tables: the syncs they need and the wire bytes,
    /// no latency, churn, memory or relist runs (recorded in their own section).
    #[arg(long)]
    defaults_only: bool,
    /// Only reads from a synced cache: for every `--pods` count above 0, client-go's peer
    /// and kinformer's contender with `--reads`, its default cache and its decoded informer
    /// (gets by name, a hot key, a list by selector, an index sweep; sync with a typed add
    /// handler), `--runs` processes each, rotating (recorded in their own section).
    #[arg(long, conflicts_with_all = ["memory_only", "defaults_only", "crd_only"])]
    reads: bool,
    /// Only gzip: for every `--pods` count above 0, client-go and kinformer with and
    /// without gzip, on loopback and through a proxy paced to `--bandwidth-mbit`, `--runs`
    /// processes each (recorded in their own section).
    #[arg(long, conflicts_with_all = ["memory_only", "defaults_only", "crd_only", "reads"])]
    gzip: bool,
    /// Only restarts: for every `--pods` count above 0, client-go and kinformer cold, and
    /// kinformer from its snapshot inside the watch window (every object an add; changes
    /// only) and past a compaction, with the watch cache on and off, `--runs` rounds each
    /// (recorded in their own section).
    #[arg(long, conflicts_with_all = ["memory_only", "defaults_only", "crd_only", "reads", "gzip"])]
    restart: bool,
    /// `--gzip`: the paced link's bandwidth per connection, in Mbit/s.
    #[arg(long, default_value_t = 100.0)]
    bandwidth_mbit: f64,
    /// Print the results without writing BENCHMARKS.md and the charts.
    #[arg(long)]
    no_record: bool,
}

/// Prints a part's tables with what the run was, and records them in BENCHMARKS.md's
/// section `informer-<part>` unless `--no-record`.
fn print_and_record(
    opts: &Opts,
    root: &std::path::Path,
    part: &str,
    command: &str,
    load_before: &str,
    began: Instant,
    tables: &str,
) -> anyhow::Result<()> {
    let load_after = load_average();
    let run = report::Run {
        command,
        load_before,
        load_after: &load_after,
        elapsed: began.elapsed(),
    };
    println!("\n{}", report::part_body(&run, "", tables));
    if !opts.no_record {
        report::record_part(root, part, &run, "", tables)?;
    }
    Ok(())
}

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
    if opts.reads && pods.iter().all(|&n| n == 0) {
        bail!("--reads needs a pod count above 0 (there is nothing to read at 0 pods)");
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

    controlplane::build(
        &[
            controlplane::ETCD,
            controlplane::KUBE_APISERVER,
            controlplane::INFORMER_PEER,
        ],
        false,
    )?;
    let bins = contenders::build()?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let step = Step::start("starting etcd and kube-apiserver");
    // Custom resources are measured in CBOR too, which 1.37 serves behind an alpha gate.
    let mut options = kinformer_testenv::Options::default();
    if opts.crd_only {
        options = options.feature_gate("CBORServingAndStorage", true);
    }
    let cp = rt.block_on(kinformer_testenv::ControlPlane::start_with(options))?;
    step.finish("ready");
    let client = rt.block_on(async { cp.client() })?;

    if opts.crd_only {
        // kube clients are made inside the runtime.
        let runs = {
            let _in_runtime = rt.enter();
            crd::measure(&rt, &cp, &bins, &pods, opts.runs)?
        };
        drop(cp);
        let load_after = load_average();
        let elapsed = began.elapsed();
        let tables = runs.tables(&pods, opts.runs);
        println!("\n{tables}");
        eprintln!(
            "the custom resource runs took {:.1} min (load average {load_before} before, {load_after} after)",
            elapsed.as_secs_f64() / 60.0
        );
        if !opts.no_record {
            report::record_part(
                &root,
                "crd",
                &report::Run {
                    command: &command,
                    load_before: &load_before,
                    load_after: &load_after,
                    elapsed,
                },
                " `--pods` counts scaled objects here.",
                &tables,
            )?;
        }
        return Ok(());
    }

    if opts.gzip {
        let counts: Vec<usize> = pods.iter().copied().filter(|&n| n > 0).collect();
        let mut runs = gzip::GzipRuns::default();
        for &n in &counts {
            let ns = rt.block_on(cp.create_namespace(&format!("gzip-{n}")))?;
            let api = Api::<Pod>::namespaced(client.clone(), &ns);
            create_pods(&rt, &api, n)?;
            gzip::measure(
                &mut runs,
                &rt,
                &cp,
                &bins,
                &ns,
                n,
                opts.runs,
                opts.bandwidth_mbit,
            )?;
        }
        drop(cp);
        let tables = runs.tables(&counts, opts.runs, opts.bandwidth_mbit);
        return print_and_record(&opts, &root, "gzip", &command, &load_before, began, &tables);
    }

    if opts.restart {
        let counts: Vec<usize> = pods.iter().copied().filter(|&n| n > 0).collect();
        let mut runs = restart::RestartRuns::default();
        let empty = rt.block_on(cp.create_namespace("restart-empty"))?;
        for &n in &counts {
            let ns = rt.block_on(cp.create_namespace(&format!("restart-{n}")))?;
            let api = Api::<Pod>::namespaced(client.clone(), &ns);
            create_pods(&rt, &api, n)?;
            restart::measure(&mut runs, &rt, &cp, &bins, &ns, &empty, n, opts.runs)?;
        }
        drop(cp);
        let tables = runs.tables(&counts, opts.runs);
        return print_and_record(
            &opts,
            &root,
            "restart",
            &command,
            &load_before,
            began,
            &tables,
        );
    }

    if opts.reads {
        let counts: Vec<usize> = pods.iter().copied().filter(|&n| n > 0).collect();
        if counts.len() < pods.len() {
            eprintln!("--reads: skipping 0 pods (nothing to read)");
        }
        let mut runs = reads::ReadRuns::default();
        for &n in &counts {
            let ns = rt.block_on(cp.create_namespace(&format!("reads-{n}")))?;
            let api = Api::<Pod>::namespaced(client.clone(), &ns);
            create_pods(&rt, &api, n)?;
            reads::measure(&mut runs, &bins, cp.kubeconfig(), &ns, n, opts.runs)?;
        }
        drop(cp);
        let load_after = load_average();
        let elapsed = began.elapsed();
        let run = report::Run {
            command: &command,
            load_before: &load_before,
            load_after: &load_after,
            elapsed,
        };
        let tables = runs.tables(&counts, opts.runs);
        // What BENCHMARKS.md gets: the command, the load, then the tables.
        println!("\n{}", report::part_body(&run, "", &tables));
        eprintln!(
            "the read runs took {:.1} min (load average {load_before} before, {load_after} after)",
            elapsed.as_secs_f64() / 60.0
        );
        if !opts.no_record {
            report::record_part(&root, "reads", &run, "", &tables)?;
        }
        return Ok(());
    }

    let mut samples: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
    let mut latency: BTreeMap<Contender, Latencies> = BTreeMap::new();
    let mut churn: BTreeMap<Contender, Vec<ChurnStep>> = BTreeMap::new();
    let mut wire: BTreeMap<usize, WireBytes> = BTreeMap::new();
    let mut mem = memory::Memory::default();
    let max_pods = pods.last().copied().unwrap_or_default();
    for &n in &pods {
        let memory_count = n == 0 || n == max_pods;
        if opts.memory_only && !memory_count {
            continue;
        }
        let ns = rt.block_on(cp.create_namespace(&format!("bench-{n}")))?;
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        let names = create_pods(&rt, &api, n)?;
        let setup = measure::Setup {
            rt: &rt,
            bins: &bins,
            cp: &cp,
            api: &api,
            ns: &ns,
            names: &names,
            opts: &opts,
        };

        if opts.memory_runs > 0 && memory_count && !opts.defaults_only {
            memory::syncs(&mut mem, &bins, cp.kubeconfig(), &ns, n, opts.memory_runs)?;
        }
        if opts.memory_only {
            continue;
        }

        if n > 0 {
            wire.insert(n, measure::wire_bytes(&setup)?);
        }

        let for_strip = |strip: bool| {
            if opts.defaults_only {
                &Contender::ALL_BUT_MODIFY[..]
            } else {
                Contender::for_strip(strip)
            }
        };
        let (kept, stripped) = (for_strip(false).len(), for_strip(true).len());
        let total = opts.runs * (kept + stripped);
        let mut step = Step::start(format!(
            "{n} pods: {total} syncs ({} runs x {kept} contenders without stripping, {stripped} with)",
            opts.runs
        ));
        let mut done = 0;
        for strip in [false, true] {
            for round in 0..opts.runs {
                let contenders = for_strip(strip);
                for k in 0..contenders.len() {
                    let c = contenders[(round + k) % contenders.len()];
                    step.detail(&format!(
                        "{done}/{total}: {} ({})",
                        c.name(),
                        if strip { "stripped" } else { "full objects" }
                    ));
                    let s = measure::sync_once(&setup, c, strip).inspect_err(|_| {
                        step_failed(&format!("{} syncing {n} pods", c.name()));
                    })?;
                    samples.entry((n, strip, c)).or_default().push(s);
                    done += 1;
                }
            }
        }
        step.finish("done");

        if opts.defaults_only {
            continue;
        }
        if Some(n) == latency_pods && opts.latency_patches > 0 {
            for (k, c) in Contender::DEFAULTS.iter().copied().enumerate() {
                let l = measure::latency(&setup, c, k)?;
                latency.insert(c, l);
            }
        }
        if Some(n) == latency_pods && opts.churn_secs > 0 && !opts.churn_rates.is_empty() {
            for (k, c) in Contender::DEFAULTS.iter().copied().enumerate() {
                let steps = measure::churn(&setup, c, k)?;
                churn.insert(c, steps);
            }
        }
    }
    drop(cp);
    if opts.relist_runs > 0 && max_pods > 0 && !opts.defaults_only {
        memory::relists(&mut mem, &rt, &bins, max_pods, opts.relist_runs)?;
    }
    let load_after = load_average();
    let elapsed = began.elapsed();
    let memory_tables = mem.tables(max_pods, opts.memory_runs);
    if !memory_tables.is_empty() {
        println!("\n{memory_tables}");
    }
    if opts.memory_only {
        eprintln!(
            "the memory rows took {:.1} min (load average {load_before} before, {load_after} after)",
            elapsed.as_secs_f64() / 60.0
        );
        if !opts.no_record {
            report::record_memory(
                &root,
                &command,
                &load_before,
                &load_after,
                elapsed,
                &memory_tables,
            )?;
        }
        return Ok(());
    }

    let mut tables = report::defaults_tables(&pods, &samples, opts.runs);
    if opts.defaults_only {
        report::wire_table(&mut tables, &wire);
        println!("\n{tables}");
        eprintln!(
            "the defaults runs took {:.1} min (load average {load_before} before, {load_after} after)",
            elapsed.as_secs_f64() / 60.0
        );
        if !opts.no_record {
            report::record_part(
                &root,
                "defaults",
                &report::Run {
                    command: &command,
                    load_before: &load_before,
                    load_after: &load_after,
                    elapsed,
                },
                "",
                &tables,
            )?;
        }
        return Ok(());
    }
    tables.push_str(&report::tables(
        &pods,
        &samples,
        &latency,
        latency_pods.unwrap_or_default(),
        &opts,
    ));
    report::churn_table(&mut tables, &churn, latency_pods.unwrap_or_default(), &opts);
    report::wire_table(&mut tables, &wire);
    println!("\n{tables}");
    eprintln!(
        "the whole bench took {:.1} min (load average {load_before} before, {load_after} after)",
        elapsed.as_secs_f64() / 60.0
    );
    if opts.no_record {
        return Ok(());
    }
    charts::write_all(
        &root,
        &pods,
        &samples,
        &latency,
        latency_pods.unwrap_or_default(),
    )?;
    report::record(
        &root,
        &command,
        &load_before,
        &load_after,
        elapsed,
        &tables,
        !latency.is_empty(),
    )?;
    if memory_tables.is_empty() {
        return Ok(());
    }
    report::record_memory(
        &root,
        &command,
        &load_before,
        &load_after,
        elapsed,
        &memory_tables,
    )
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

/// Creates `n` realistic pods ([`kinformer_testenv::apply_realistic_pods`]) in chunks,
/// showing progress; returns their names.
fn create_pods(
    rt: &tokio::runtime::Runtime,
    api: &Api<Pod>,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let mut step = Step::start(format!(
        "creating {n} pods (server-side apply of spec and status)"
    ));
    let mut names = Vec::with_capacity(n);
    let mut chunk = 0;
    while names.len() < n {
        let size = CREATE_CHUNK.min(n - names.len());
        let created = rt
            .block_on(kinformer_testenv::apply_realistic_pods(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_defaults_and_lists() {
        let o = Opts::parse_from(["x", "--pods", "100,2000", "--runs", "3"]);
        assert_eq!(o.pods, [100, 2000]);
        assert_eq!(o.runs, 3);
        let d = Opts::parse_from(["x"]);
        assert_eq!(d.pods, [0, 1000, 10000]);
        assert!(!d.defaults_only);
        let q = Opts::parse_from(["x", "--defaults-only", "--pods", "0,10000", "--runs", "5"]);
        assert!(q.defaults_only && q.runs == 5);
        assert!(Opts::try_parse_from(["x", "--defaults-only", "--memory-only"]).is_err());
        let c = Opts::parse_from(["x", "--crd-only", "--pods", "0,10000", "--runs", "3"]);
        assert!(c.crd_only && !c.defaults_only && !c.memory_only);
        assert_eq!((c.pods, c.runs), (vec![0, 10000], 3));
        assert!(!d.crd_only);
        for other in ["--memory-only", "--defaults-only"] {
            assert!(Opts::try_parse_from(["x", "--crd-only", other]).is_err());
            assert!(Opts::try_parse_from(["x", other, "--crd-only"]).is_err());
        }
        assert!(
            Opts::try_parse_from(["x", "--crd-only", "--no-record"])
                .unwrap()
                .no_record
        );
        assert!(!d.reads);
        let r = Opts::parse_from(["x", "--reads", "--pods", "10000,50000", "--runs", "3"]);
        assert!(r.reads && !r.crd_only && !r.defaults_only && !r.memory_only);
        assert_eq!((r.pods, r.runs), (vec![10000, 50000], 3));
        for other in ["--memory-only", "--defaults-only", "--crd-only"] {
            assert!(Opts::try_parse_from(["x", "--reads", other]).is_err());
            assert!(Opts::try_parse_from(["x", other, "--reads"]).is_err());
        }
        assert!(
            Opts::try_parse_from(["x", "--reads", "--no-record"])
                .unwrap()
                .no_record
        );
    }
}
