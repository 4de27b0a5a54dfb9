//! `cargo build` of a package's binaries with progress, returning where cargo put them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::progress::Step;

/// Builds every binary of `package` in `profile` (`"release"` or `"dev"`), showing the crate
/// being compiled, and returns the executables by target name. Cargo's diagnostics are shown
/// when the build fails.
pub(crate) fn bins(package: &str, profile: &str) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let profile = format!("--profile={profile}");
    let mut step = Step::start(format!("cargo build {profile} -p {package}"));
    let mut child = crate::test::cargo(&[
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
