//! `cargo xtask gen-proto [--check]`: the schema table of kinformer-protobuf, generated from
//! the Go types by `xtask/go/cmd/gen-proto`, then kinformer-compact-store's read views,
//! generated from that table (and k8s-openapi's field names) by `xtask/gen-views`.
//!
//! Without `--check` the table (`crates/protobuf/src/schema/table.rs`) and the views
//! (`crates/compact-store/src/view/generated/`) are rewritten; with it, nothing is written
//! and the command fails when either differs from what the Go modules of `xtask/go/go.mod`
//! and the k8s-openapi of `Cargo.lock` give (`cargo xtask test` runs the check).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::progress::Step;

fn table_path() -> PathBuf {
    crate::workspace_root().join("crates/protobuf/src/schema/table.rs")
}

pub(crate) fn run(check: bool) -> anyhow::Result<()> {
    let generator = crate::controlplane::GEN_PROTO;
    crate::controlplane::build(&[generator], false)?;
    let step = Step::start("gen-proto (the schema table from client-go's scheme)");
    let output = Command::new(generator.path())
        .stdin(Stdio::null())
        .output()
        .context("running gen-proto")?;
    if !output.status.success() {
        step.finish("FAILED");
        bail!(
            "gen-proto failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    step.finish("done");
    let path = table_path();
    let current = std::fs::read(&path).unwrap_or_default();
    if current == output.stdout {
        eprintln!("{} is up to date", path.display());
    } else if check {
        bail!(
            "{} is stale: the Go types in xtask/go/go.mod give another table; run `cargo xtask gen-proto`",
            path.display()
        );
    } else {
        std::fs::write(&path, &output.stdout)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    views(check)
}

/// The read views, from the table just checked or written (`xtask/gen-views`, a crate of
/// its own so that a broken views file cannot stop its own regeneration).
fn views(check: bool) -> anyhow::Result<()> {
    let src = k8s_openapi_src()?;
    let out = crate::workspace_root().join("crates/compact-store/src/view/generated");
    let mut args = vec![
        "run".to_owned(),
        "-q".into(),
        "-p".into(),
        "kinformer-gen-views".into(),
        "--".into(),
        src.display().to_string(),
        out.display().to_string(),
    ];
    if check {
        args.push("--check".into());
    }
    let step = Step::start("gen-views (read views from the schema table)");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let status = crate::cargo::command(&args)
        .status()
        .context("running gen-views")?;
    if !status.success() {
        step.finish("FAILED");
        bail!("gen-views failed ({status}): run `cargo xtask gen-proto`");
    }
    step.finish(if check { "up to date" } else { "written" });
    Ok(())
}

/// The `src` directory of the k8s-openapi the workspace builds with.
fn k8s_openapi_src() -> anyhow::Result<PathBuf> {
    let out = crate::cargo::command(&["metadata", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let manifest = meta["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "k8s-openapi"))
        .and_then(|p| p["manifest_path"].as_str())
        .context("k8s-openapi is not in the workspace's dependencies")?;
    Ok(PathBuf::from(manifest)
        .parent()
        .context("k8s-openapi's manifest has no directory")?
        .join("src"))
}
