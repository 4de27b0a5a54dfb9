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
    let step = Step::start("go run ./cmd/gen-proto (compiles client-go's scheme on first run)");
    let output = Command::new("go")
        .args(["run", "./cmd/gen-proto"])
        .current_dir(crate::workspace_root().join("xtask").join("go"))
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .output()
        .context("running `go run ./cmd/gen-proto` (is Go 1.26+ installed?)")?;
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
