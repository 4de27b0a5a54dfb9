//! `cargo xtask soak leader --minutes N`: the leader election chaos test
//! (`crates/leaderelection/tests/chaos.rs`) run for N minutes instead of 40 seconds: three
//! kinformer and three client-go electors on one Lease, killed, paused and cut off.

use anyhow::{Context, bail};

use crate::controlplane;

/// The chaos test's name.
const TEST: &str = "rust_and_go_electors_never_lead_at_once_under_kills_pauses_and_partitions";

pub(crate) fn run(minutes: f64, seed: Option<u64>) -> anyhow::Result<()> {
    if !(minutes.is_finite() && minutes >= 0.5) {
        bail!("--minutes must be at least 0.5");
    }
    // The chaos test runs the control plane and client-go's electors.
    controlplane::build(
        &[
            controlplane::ETCD,
            controlplane::KUBE_APISERVER,
            controlplane::LEADER_PEER,
        ],
        false,
    )?;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let secs = ((minutes * 60.0).round() as u64).to_string();
    println!("leader election soak: {minutes} min of chaos (seed printed below)");
    let mut cmd = crate::cargo::command(&[
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
        kinformer_testenv::workspace_binary_dir(),
    );
    if let Some(seed) = seed {
        cmd.env("KINFORMER_LEADER_CHAOS_SEED", seed.to_string());
    }
    let status = cmd.status().context("running cargo test")?;
    if !status.success() {
        bail!("the leader election soak failed ({status})");
    }
    Ok(())
}
