//! `cargo xtask gen-proto [--check]`: the schema table of kinformer-protobuf, generated from
//! the Go types by `xtask/go/cmd/gen-proto`.
//!
//! Without `--check` the table (`crates/protobuf/src/schema/table.rs`) is rewritten; with it,
//! nothing is written and the command fails when the checked-in table differs from what the
//! Go modules of `xtask/go/go.mod` give (`cargo xtask test` runs the check).

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
        return Ok(());
    }
    if check {
        bail!(
            "{} is stale: the Go types in xtask/go/go.mod give another table; run `cargo xtask gen-proto`",
            path.display()
        );
    }
    std::fs::write(&path, &output.stdout).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
