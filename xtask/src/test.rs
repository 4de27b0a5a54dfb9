//! `cargo xtask test`: every check CI runs, in order, failing on the first.

use std::process::Command;

use anyhow::{Context, bail};

use crate::progress::Step;

/// `cargo <args>` in the workspace root, with the cargo that runs xtask.
///
/// Without the variables `cargo run` set for xtask itself: build scripts and tests that run
/// cargo again would not see them, and the difference would rebuild crates twice.
pub(crate) fn cargo(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args).current_dir(crate::workspace_root());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&name.as_ref())
        {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

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
    crate::release::msrv()
}

/// The cargo target dir: `CARGO_TARGET_DIR`, else `<workspace>/target`.
pub(crate) fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"))
}
