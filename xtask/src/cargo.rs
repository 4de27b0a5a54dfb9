//! Running cargo from xtask: the command ([`command`]), the target dir ([`target_dir`]), and a
//! package's binaries built with progress ([`bins`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::progress::Step;

/// `cargo <args>` in the workspace root, with the cargo that runs xtask.
///
/// Without the variables `cargo run` set for xtask itself: build scripts and tests that run
/// cargo again would not see them, and the difference would rebuild crates twice.
pub(crate) fn command(args: &[&str]) -> Command {
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

/// The cargo target dir: `CARGO_TARGET_DIR`, else `<workspace>/target`.
pub(crate) fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"))
}

/// Builds every binary of `package` in `profile` (`"release"` or `"dev"`), showing the crate
/// being compiled, and returns the executables by target name. Cargo's diagnostics are shown
/// when the build fails.
pub(crate) fn bins(package: &str, profile: &str) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let profile = format!("--profile={profile}");
    let mut step = Step::start(format!("cargo build {profile} -p {package}"));
    let mut child = command(&[
        "build",
        &profile,
        "-p",
        package,
        "--bins",
        "--message-format=json-render-diagnostics",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .context("running cargo build")?;
    let stderr = child.stderr.take().map(|pipe| {
        std::thread::spawn(move || {
            BufReader::new(pipe)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        })
    });
    let mut exes = BTreeMap::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if let Some(target) = msg["target"]["name"].as_str() {
                step.detail(target);
                if let Some(exe) = msg["executable"].as_str() {
                    exes.insert(target.to_owned(), PathBuf::from(exe));
                }
            }
        }
    }
    let status = child.wait().context("waiting for cargo build")?;
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if !status.success() {
        step.finish("FAILED");
        bail!("cargo build failed ({status}):\n{}", stderr.join("\n"));
    }
    step.finish("done");
    Ok(exes)
}
