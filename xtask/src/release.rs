//! What a release needs, checked on every `cargo xtask test`: each library crate packages and
//! builds from its package alone, in dependency order, and the toolchain is the one the
//! manifests promise (`rust-version`).

use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::progress::Step;
use crate::test::cargo;

/// The workspace's packages as `cargo metadata` sees them.
fn metadata() -> anyhow::Result<Value> {
    let out = cargo(&["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("reading cargo metadata")
}

/// The names of the packages that may be published (`publish` not `false`).
fn publishable(meta: &Value) -> Vec<String> {
    let mut names: Vec<String> = meta["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        // `publish: []` is how cargo metadata says `publish = false`.
        .filter(|p| p["publish"].as_array().is_none_or(|r| !r.is_empty()))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// `cargo package` of every publishable crate in one run: cargo orders them by their
/// dependencies and verifies each one by building it from its packaged sources against the
/// ones packaged before it, as `cargo publish` would. Library crates enable no k8s-openapi
/// version feature, so the build of a crate alone names one through k8s-openapi's variable.
pub(crate) fn package() -> anyhow::Result<()> {
    let names = publishable(&metadata()?);
    if names.is_empty() {
        bail!("no publishable crate found in the workspace");
    }
    let mut args = vec!["package", "--allow-dirty"];
    for name in &names {
        args.extend(["-p", name.as_str()]);
    }
    let step = Step::start(format!("cargo package ({})", names.join(", ")));
    // The verification builds our crates as registry crates of version 0.1.0, and cargo
    // never rebuilds a registry crate whose name and version it has built before: in a
    // target dir kept between runs, a crate would be checked against last run's build of
    // its dependencies. So the verification builds in a dir of its own, where every build
    // of ours is dropped first (the dependencies' builds are kept).
    let dir = crate::test::target_dir().join("package-verify");
    forget_our_builds(&dir, &names)?;
    forget_unpacked_sources(&names)?;
    let status = cargo(&args)
        .env("K8S_OPENAPI_ENABLED_VERSION", "1.36")
        .env("CARGO_TARGET_DIR", &dir)
        .status()
        .context("running cargo package")?;
    if !status.success() {
        step.finish("FAILED");
        bail!("cargo package failed ({status})");
    }
    step.finish("passed");
    Ok(())
}

/// Deletes what `dir`'s debug profile holds of the crates `names` (fingerprints, libraries,
/// build scripts), so that they are built again from their packaged sources.
fn forget_our_builds(dir: &std::path::Path, names: &[String]) -> anyhow::Result<()> {
    let debug = dir.join("debug");
    for sub in [".fingerprint", "deps", "build"] {
        let Ok(entries) = std::fs::read_dir(debug.join(sub)) else {
            continue;
        };
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            let ours = names.iter().any(|name| {
                let lib = name.replace('-', "_");
                [format!("{name}-"), format!("lib{lib}-"), format!("{lib}-")]
                    .iter()
                    .any(|prefix| file.starts_with(prefix.as_str()))
            });
            if ours {
                remove(&entry.path())?;
            }
        }
    }
    Ok(())
}

/// Deletes the sources cargo unpacked from our packages in earlier runs. Cargo serves the
/// packages to each other from a registry of its own (named after a hash of its path, under
/// `$CARGO_HOME/registry/src/-<hash>`) and never unpacks a name and version it finds there
/// already: a crate would be verified against last run's sources of its dependencies.
/// crates.io's sources (`index.crates.io-…`) are left alone.
fn forget_unpacked_sources(names: &[String]) -> anyhow::Result<()> {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")));
    let Some(home) = home else {
        return Ok(());
    };
    for kind in ["src", "cache"] {
        let Ok(registries) = std::fs::read_dir(home.join("registry").join(kind)) else {
            continue;
        };
        for registry in registries.flatten() {
            if !registry.file_name().to_string_lossy().starts_with('-') {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(registry.path()) else {
                continue;
            };
            for entry in entries.flatten() {
                let file = entry.file_name();
                let file = file.to_string_lossy();
                // `<name>-<version>` (a dir in src, a `.crate` in cache); a name of ours may be
                // the prefix of another (`kinformer-` and `kinformer-core-`), so the rest must be
                // a version.
                let ours = names.iter().any(|name| {
                    file.strip_prefix(name.as_str())
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
                });
                if ours {
                    remove(&entry.path())?;
                }
            }
        }
    }
    Ok(())
}

/// Removes a file or a whole dir.
fn remove(path: &std::path::Path) -> anyhow::Result<()> {
    let removed = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    removed.with_context(|| format!("removing {}", path.display()))
}

/// The MSRV the manifests name (`rust-version`), checked against the compiler that ran
/// everything else: equal, and the whole run was the MSRV build; older, and the build had
/// already failed; newer, and the MSRV toolchain builds the workspace too, when rustup has it.
pub(crate) fn msrv() -> anyhow::Result<()> {
    let meta = metadata()?;
    let mut wanted: Vec<&str> = meta["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p["rust_version"].as_str())
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let [msrv] = wanted.as_slice() else {
        bail!("the crates name different rust-versions: {wanted:?} (one MSRV for the workspace)");
    };
    let out = Command::new("rustc")
        .arg("--version")
        .output()
        .context("running rustc --version")?;
    let version = String::from_utf8_lossy(&out.stdout);
    let active = version.split_whitespace().nth(1).unwrap_or("");
    let step = Step::start(format!("MSRV {msrv} (rustc {active})"));
    if active == *msrv || active.starts_with(&format!("{msrv}.")) {
        step.finish("passed: everything above was built with it");
        return Ok(());
    }
    let toolchains = Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if !toolchains.lines().any(|l| l.starts_with(msrv)) {
        step.finish("skipped");
        println!(
            "    rustc {active} is newer than the MSRV {msrv} and rustup has no {msrv} toolchain: \
             install it (`rustup toolchain install {msrv}`) to check the MSRV"
        );
        return Ok(());
    }
    let status = cargo(&[
        &format!("+{msrv}"),
        "check",
        "--workspace",
        "--all-targets",
        "--all-features",
    ])
    .status()
    .context("running cargo check with the MSRV toolchain")?;
    if !status.success() {
        step.finish("FAILED");
        bail!("the workspace does not build with its MSRV {msrv}");
    }
    step.finish("passed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishable_skips_publish_false() {
        let meta = serde_json::json!({"packages": [
            {"name": "a", "publish": null},
            {"name": "b", "publish": []},
            {"name": "c", "publish": ["crates-io"]},
        ]});
        assert_eq!(publishable(&meta), ["a", "c"]);
    }
}
