//! `cargo xtask test`: every check CI runs, in order, failing on the first.

use std::process::Command;

use anyhow::{Context, bail};

use crate::cargo::{command as cargo, target_dir};
use crate::progress::Step;

fn check(name: &str, mut cmd: Command) -> anyhow::Result<()> {
    let step = Step::start(name);
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        step.finish("FAILED");
        bail!("{name} failed ({status})");
    }
    step.finish("passed");
    Ok(())
}

pub(crate) fn run(test_args: &[String]) -> anyhow::Result<()> {
    forget_stale_builds_of_ours()?;
    check("cargo fmt --check", cargo(&["fmt", "--all", "--check"]))?;
    check(
        "cargo clippy -D warnings",
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    let mut doc = cargo(&["doc", "--workspace", "--no-deps", "--all-features"]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    check("cargo doc (warnings are errors)", doc)?;
    crate::gen_proto::run(true)?;
    // The workspace's end-to-end tests run the control plane and the events, leader and
    // controller peers; all are built, so that a test running one more still finds it.
    crate::controlplane::build(&crate::controlplane::ALL, false)?;
    // Unit, integration, doc and end-to-end tests: `cargo test`'s, a few binaries at a time.
    crate::test_binaries::run(test_args)?;
    // After the tests, whose dev-profile build the soak's subject reuses.
    crate::soak::run_ci()?;
    // The loom model check needs the queue built with `--cfg kinformer_loom`, in a target dir
    // of its own so that it does not invalidate the normal build; its crate depends on the
    // queue and loom alone, so that build is small.
    let mut loom = cargo(&["test", "-p", "kinformer-workqueue-loom", "--release"]);
    loom.env("RUSTFLAGS", "--cfg kinformer_loom")
        .env("CARGO_TARGET_DIR", target_dir().join("loom"));
    check("loom model check of the workqueue", loom)?;
    crate::conformance::run()?;
    crate::release::package()?;
    crate::release::k8s_openapi_versions()?;
    crate::release::msrv()
}

/// How old a build of one of our own targets must be before [`forget_stale_builds_of_ours`]
/// deletes it.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(2 * 3600);

/// Deletes the debug builds of the workspace's own targets that are more than two hours
/// old, from a target dir kept between runs.
///
/// A build of ours is named after the target and a hash of its package's *path*, so each
/// clone CI runs from (and each local checkout) leaves a full set of our libraries and test
/// binaries that no later run reuses: 5.5 GB of the shared target dir after a day of runs.
/// Dependencies are left alone (they are reused); so is everything built in the last two
/// hours (this run's, and a concurrent run's).
fn forget_stale_builds_of_ours() -> anyhow::Result<()> {
    let meta = crate::release::metadata()?;
    let mut prefixes: Vec<String> = Vec::new();
    for package in meta["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        for target in package["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if let Some(name) = target["name"].as_str() {
                let name = name.replace('-', "_");
                prefixes.push(format!("{name}-"));
                prefixes.push(format!("lib{name}-"));
            }
        }
        if let Some(name) = package["name"].as_str() {
            // Fingerprint and build-script dirs are named after the package.
            prefixes.push(format!("{name}-"));
        }
    }
    let debug = target_dir().join("debug");
    let mut freed: u64 = 0;
    for sub in ["deps", "examples", ".fingerprint", "build", "incremental"] {
        let Ok(entries) = std::fs::read_dir(debug.join(sub)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !prefixes.iter().any(|p| name.starts_with(p.as_str())) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > STALE_AFTER);
            if !old {
                continue;
            }
            let path = entry.path();
            let removed = if meta.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if removed.is_ok() {
                freed += meta.len();
            }
        }
    }
    if freed > 0 {
        eprintln!(
            "removed stale builds of the workspace's own crates from {} ({} MB)",
            debug.display(),
            freed / 1_000_000
        );
    }
    Ok(())
}
