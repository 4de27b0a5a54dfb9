//! What a release needs, checked on every `cargo xtask test`: each library crate packages and
//! builds from its package alone, against the packages of the others, and the toolchain is the
//! one the manifests promise (`rust-version`).

use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cargo::command as cargo;
use crate::progress::Step;

/// The workspace's packages as `cargo metadata` sees them.
pub(crate) fn metadata() -> anyhow::Result<Value> {
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

/// `cargo package` of every publishable crate, and a check that each builds from its package
/// alone against the packages of the others, as `cargo publish` would see them.
///
/// `cargo package`'s own verification builds each crate in turn, with its dependencies as
/// they resolve for that crate alone: one full build of most of the dependency tree per crate
/// (4.5 minutes of a cold `cargo xtask test` on two cores). Here the packages are made
/// without it, unpacked side by side into a workspace of their own whose `[patch]` points
/// each of our crates at its packaged sources, and checked in one `cargo check` (the
/// workspace's `Cargo.lock`, so the same dependency versions): every crate is compiled once,
/// from the files its package holds, against its siblings' packages. A file a package lacks,
/// or a dependency it fails to declare, fails the check as it would fail the verification.
/// Library crates enable no k8s-openapi version feature, so the check names one through
/// k8s-openapi's variable.
pub(crate) fn package() -> anyhow::Result<()> {
    let names = publishable(&metadata()?);
    if names.is_empty() {
        bail!("no publishable crate found in the workspace");
    }
    let step = Step::start(format!("cargo package ({})", names.join(", ")));
    let result = package_and_check(&names);
    step.finish(if result.is_ok() { "passed" } else { "FAILED" });
    result
}

fn package_and_check(names: &[String]) -> anyhow::Result<()> {
    let dir = crate::cargo::target_dir().join("package-verify");
    let mut args = vec!["package", "--no-verify", "--allow-dirty"];
    for name in names {
        args.extend(["-p", name.as_str()]);
    }
    let status = cargo(&args)
        .env("CARGO_TARGET_DIR", &dir)
        .status()
        .context("running cargo package")?;
    if !status.success() {
        bail!("cargo package failed ({status})");
    }
    let ws = unpack(&dir, names)?;
    let status = cargo(&["check", "--workspace"])
        .current_dir(&ws)
        .env("K8S_OPENAPI_ENABLED_VERSION", "1.37")
        .env("CARGO_TARGET_DIR", &dir)
        .status()
        .context("running cargo check on the packaged crates")?;
    if !status.success() {
        bail!("checking the packaged crates failed ({status})");
    }
    Ok(())
}

/// The oldest and the newest Kubernetes versions of the k8s-openapi the workspace uses
/// (its `earliest` and `latest` features): the library crates enable none, so they must
/// compile against each (the workspace's own builds pick 1.36).
const K8S_OPENAPI_VERSIONS: [&str; 2] = ["1.33", "1.37"];

/// Checks every publishable crate's library against k8s-openapi's oldest and newest
/// versions ([`K8S_OPENAPI_VERSIONS`]), through k8s-openapi's variable: a field or a kind
/// of one version only, used without a guard, fails here. kinformer-testenv pins its
/// control plane's version by a default feature, turned off here.
pub(crate) fn k8s_openapi_versions() -> anyhow::Result<()> {
    let names = publishable(&metadata()?);
    for version in K8S_OPENAPI_VERSIONS {
        let step = Step::start(format!(
            "the libraries on k8s-openapi's Kubernetes {version}"
        ));
        let mut args = vec!["check", "--lib", "--all-features"];
        for name in names.iter().filter(|n| *n != "kinformer-testenv") {
            args.extend(["-p", name.as_str()]);
        }
        let libs = cargo(&args)
            .env("K8S_OPENAPI_ENABLED_VERSION", version)
            .status()
            .context("running cargo check")?;
        let testenv = cargo(&[
            "check",
            "--lib",
            "--no-default-features",
            "-p",
            "kinformer-testenv",
        ])
        .env("K8S_OPENAPI_ENABLED_VERSION", version)
        .status()
        .context("running cargo check")?;
        if !libs.success() || !testenv.success() {
            step.finish("FAILED");
            bail!("the libraries do not compile against k8s-openapi's Kubernetes {version}");
        }
        step.finish("passed");
    }
    Ok(())
}

/// Unpacks the packages `names` (in `dir/package/`) into `dir/packaged/`, a workspace of
/// them whose `[patch.crates-io]` serves each one's packaged sources to the others, with the
/// workspace's `Cargo.lock`; returns that dir.
fn unpack(dir: &std::path::Path, names: &[String]) -> anyhow::Result<std::path::PathBuf> {
    let ws = dir.join("packaged");
    if ws.exists() {
        remove(&ws)?;
    }
    std::fs::create_dir_all(&ws).with_context(|| format!("creating {}", ws.display()))?;
    // The crates share the workspace's version, which xtask has too.
    let version = env!("CARGO_PKG_VERSION");
    let mut members = String::new();
    let mut patches = String::new();
    for name in names {
        let unpacked = format!("{name}-{version}");
        let file = dir.join("package").join(format!("{unpacked}.crate"));
        // `-m`: the files get the time of unpacking, not the one the package recorded (the
        // same for every version of a crate), or cargo would take the last run's build of
        // the crate for fresh and check new code against old.
        let status = Command::new("tar")
            .arg("-xzmf")
            .arg(&file)
            .arg("-C")
            .arg(&ws)
            .status()
            .with_context(|| format!("running tar on {}", file.display()))?;
        if !status.success() {
            bail!("unpacking {} failed ({status})", file.display());
        }
        members.push_str(&format!("    \"{unpacked}\",\n"));
        patches.push_str(&format!("{name} = {{ path = \"{unpacked}\" }}\n"));
    }
    let manifest = format!(
        "# Written by `cargo xtask test`: the packaged crates, each built from its package.\n\
         [workspace]\nresolver = \"3\"\nmembers = [\n{members}]\n\n[patch.crates-io]\n{patches}"
    );
    std::fs::write(ws.join("Cargo.toml"), manifest).context("writing the packages' workspace")?;
    std::fs::copy(
        crate::workspace_root().join("Cargo.lock"),
        ws.join("Cargo.lock"),
    )
    .context("copying Cargo.lock")?;
    Ok(ws)
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
