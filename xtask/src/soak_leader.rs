//! `cargo xtask soak leader --minutes N`: the leader election chaos test
//! (`crates/leaderelection/tests/chaos.rs`) run for N minutes instead of 40 seconds: three
//! kinformer and three client-go electors on one Lease, killed, paused and cut off.

use anyhow::{Context, bail};

use crate::{controlplane, test};

/// The chaos test's name.
const TEST: &str = "rust_and_go_electors_never_lead_at_once_under_kills_pauses_and_partitions";

pub(crate) fn run(minutes: u64, seed: Option<u64>) -> anyhow::Result<()> {
    if minutes == 0 {
        bail!("--minutes must be at least 1");
    }
    controlplane::build(false)?;
    let secs = minutes.saturating_mul(60).to_string();
    println!("leader election soak: {minutes} min of chaos (seed printed below)");
    let mut cmd = test::cargo(&[
        "test",
        "-p",
        "kinformer-leaderelection",
        "--test",
        "chaos",
        "--",
        "--include-ignored",
        "--exact",
        TEST,
        "--nocapture",
    ]);
    cmd.env("KINFORMER_LEADER_CHAOS_SECS", &secs).env(
        "KINFORMER_CONTROLPLANE_BIN",
        kinformer_testenv::binary_dir(),
    );
    if let Some(seed) = seed {
        cmd.env("KINFORMER_LEADER_CHAOS_SEED", seed.to_string());
    }
    // `cargo run` set these for xtask itself; the test builds its elector example with a
    // nested cargo that does not see them, and a difference would rebuild crates twice.
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
    let status = cmd.status().context("running cargo test")?;
    if !status.success() {
        bail!("the leader election soak failed ({status})");
    }
    Ok(())
}
