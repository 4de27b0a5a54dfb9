//! `cargo xtask`: the project's automation, in Rust so that it needs only cargo.
//!
//! - `cargo xtask controlplane build` builds etcd and kube-apiserver (kinformer-testenv's installer,
//!   from its Go module in `crates/testenv/go`) and every client-go peer program (from the Go
//!   module in `xtask/go`) into `target/controlplane/bin` (each only when missing or stale). The
//!   other commands build only the ones they run, the same way.
//! - `cargo xtask controlplane up` runs a control plane in the foreground.
//! - `cargo xtask test` runs every check CI runs.
//! - `cargo xtask demo` runs the demo; `cargo xtask demo --replicas 3` the sharded controller
//!   as three processes.
//! - `cargo xtask bench <suite>` runs a benchmark: `workqueue`, `indexer`, `deltafifo` and
//!   `informer` against client-go; `sharding [--cpu | --replicas | --handover [--pods N] [--gate on|off]]`
//!   the sharded controller as processes.
//! - `cargo xtask release` runs the release checks (packaging, MSRV) that end `test`.
//! - `cargo xtask gen-proto [--check]` regenerates (or checks) kinformer-protobuf's schema table.
//! - `cargo xtask record --resource pods [--seconds N] [--churn N] [--kubeconfig]` records a
//!   list/watch stream to a file (kinformer-replay); `cargo xtask bench replay` replays one
//!   into an informer and a controller against the live run.
//! - `cargo xtask soak [--minutes N] [--seed S]` runs the informer chaos soak;
//!   `cargo xtask soak leader --minutes N` the leader election chaos test.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod bench_handover;
mod bench_informer;
mod bench_replay;
mod bench_sharding;
mod cargo;
mod conformance;
mod controlplane;
mod demo_sharded;
mod gen_proto;
mod progress;
mod record;
mod release;
mod soak;
mod soak_leader;
mod test;
mod test_binaries;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "kinformer's project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build or run the local control plane (etcd + kube-apiserver).
    Controlplane {
        #[command(subcommand)]
        command: ControlplaneCommand,
    },
    /// Everything CI checks: fmt, clippy, rustdoc, unit, integration and end-to-end tests,
    /// the loom model check and the client-go conformance traces.
    Test {
        /// Arguments passed to `cargo test` after `--` (e.g. a test name filter).
        #[arg(trailing_var_arg = true)]
        args: Vec<String>,
    },
    /// Run the demo against the local control plane.
    Demo {
        /// Run the sharded pod controller as this many processes instead (they split twelve
        /// shards; one is killed, another started).
        #[arg(long)]
        replicas: Option<usize>,
    },
    /// Replay operation traces on kinformer and on client-go and fail on any difference.
    Conformance,
    /// The release checks alone (the end of `test`): every crate packages and builds from its
    /// package, and the MSRV holds.
    Release,
    /// Regenerate kinformer-protobuf's schema table from the Go types (xtask/go/cmd/gen-proto).
    GenProto {
        /// Write nothing; fail if the checked-in table is stale.
        #[arg(long)]
        check: bool,
    },
    /// Chaos soak: kinformer's pod informer (each FIFO kind) and client-go's under random
    /// churn and faults on the local control plane, then correctness checks and figures.
    Soak {
        #[command(subcommand)]
        command: Option<SoakCommand>,
        #[command(flatten)]
        opts: soak::Opts,
    },
    /// Record a list/watch stream to a file (kinformer-replay's format): the default informer
    /// over a recorder, on the local control plane (with writes to record) or `--kubeconfig`.
    Record(record::Opts),
    /// Benchmark a crate against client-go in one run and record the ratios in BENCHMARKS.md.
    Bench {
        /// The suite: `workqueue`, `indexer`, `deltafifo`, `informer`, `sharding` or `replay`
        /// (a recording replayed against the live run: `cargo xtask bench replay -- --help`).
        suite: String,
        /// The suite's options: `informer`'s (see `cargo xtask bench informer -- --help`), or
        /// `sharding`'s (`--cpu`, or `--replicas` or `--handover`, each with
        /// `[--pods N] [--gate on|off]`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum SoakCommand {
    /// The informer chaos soak (what `cargo xtask soak` runs without a subcommand).
    Informer,
    /// Kinformer and client-go electors on one Lease under kills, pauses and partitions
    /// (`--minutes` whole minutes, `--seed` replays an earlier run's schedule).
    Leader,
}

#[derive(Subcommand)]
enum ControlplaneCommand {
    /// Build etcd, kube-apiserver and every client-go peer program into target/controlplane/bin
    /// (each skipped when up to date). Other commands build only what they run.
    Build {
        /// Rebuild even when the binaries are up to date.
        #[arg(long)]
        force: bool,
    },
    /// Start a control plane in the foreground until Ctrl-C.
    Up {
        /// Run the API server without its watch cache.
        #[arg(long)]
        no_watch_cache: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Controlplane {
            command: ControlplaneCommand::Build { force },
        } => controlplane::build(&controlplane::ALL, force),
        Command::Controlplane {
            command: ControlplaneCommand::Up { no_watch_cache },
        } => {
            controlplane::build(&controlplane::CONTROL_PLANE, false)?;
            controlplane::up(!no_watch_cache)
        }
        Command::Test { args } => test::run(&args),
        Command::Demo { replicas: None } => demo(),
        Command::Demo { replicas: Some(n) } => demo_sharded::run(n),
        Command::Conformance => conformance::run(),
        Command::Release => release::package().and_then(|()| release::msrv()),
        Command::Record(opts) => record::run(&opts),
        Command::Bench { suite, args } => bench::run(&suite, &args),
        Command::GenProto { check } => gen_proto::run(check),
        Command::Soak {
            command: None | Some(SoakCommand::Informer),
            opts,
        } => soak::run(&opts),
        Command::Soak {
            command: Some(SoakCommand::Leader),
            opts,
        } => soak_leader::run(opts.minutes, opts.seed),
    }
}

/// The reference article's pod controller, scripted, on a fresh local control plane: etcd
/// and kube-apiserver are built first if needed (no client-go peer: the demo runs none), then
/// the example runs with `--demo` and its exit status is the demo's.
///
/// From a fresh clone the two builds are most of the wait (Go: etcd and kube-apiserver;
/// Rust: the example), and neither keeps both cores busy all the time (the Go build links
/// on one core, the Rust build waits on a few large crates), so they run at the same time:
/// the example builds in the background, its output kept for an error, while the control
/// plane's build shows its progress.
fn demo() -> anyhow::Result<()> {
    let example = std::thread::spawn(|| {
        cargo::command(&[
            "build",
            "--quiet",
            "--package",
            "kinformer-examples",
            "--example",
            "pod_controller",
        ])
        .stdout(std::process::Stdio::null())
        .output()
    });
    eprintln!("building the pod controller example in the background");
    let control_plane = controlplane::build(&controlplane::CONTROL_PLANE, false);
    let step = progress::Step::start("cargo build --example pod_controller");
    let built = example
        .join()
        .map_err(|_| anyhow::anyhow!("the example's build thread panicked"))?
        .context("running cargo build")?;
    if !built.status.success() {
        step.finish("FAILED");
        anyhow::bail!(
            "building the example failed ({}):\n{}",
            built.status,
            String::from_utf8_lossy(&built.stderr)
        );
    }
    step.finish("done");
    control_plane?;
    println!("running the pod controller (examples/pod_controller.rs) with --demo");
    let status = cargo::command(&[
        "run",
        "--package",
        "kinformer-examples",
        "--example",
        "pod_controller",
        "--",
        "--demo",
    ])
    .env(
        "KINFORMER_CONTROLPLANE_BIN",
        kinformer_testenv::workspace_binary_dir(),
    )
    .status()
    .context("running cargo")?;
    if !status.success() {
        anyhow::bail!("the demo failed ({status})");
    }
    Ok(())
}

/// The workspace root (the parent of `xtask/`): from the `CARGO_MANIFEST_DIR` that `cargo
/// run` sets, not the one compiled in. Cargo reuses a build made from another clone of the
/// repository sharing the target dir (it fingerprints workspace members by relative path),
/// and the compiled-in dir would then be that clone's: CI's clone would run against this
/// one's files, or fail once that clone is gone.
fn workspace_root() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        )
        .parent()
        .map(ToOwned::to_owned)
        .unwrap_or_default()
}
