//! Programs a test runs as processes: the workspace's examples, the Go peers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::error::{Error, io};

/// The example `example` of the workspace package `package`, built on first use (once per
/// test process) into the calling test binary's target dir and profile, and its path.
///
/// `cargo test --test x` alone does not build examples, and a stale one would test old
/// code; so the example is built with the cargo that runs the test (`CARGO`), without the
/// variables cargo set for the test (seen by the nested cargo they would look like changed
/// build inputs and rebuild the world). Without `CARGO` (a test binary run by hand) the
/// example must have been built already.
///
/// # Errors
/// [`Error::Io`] when cargo cannot run; [`Error::State`] when the build fails or the
/// binary is missing.
pub fn example_binary(package: &str, example: &str) -> Result<PathBuf, Error> {
    static BUILT: OnceLock<Mutex<HashMap<(String, String), PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Mutex::default);
    // Held while building: two tests asking at once build once.
    let mut built = built.lock().unwrap_or_else(PoisonError::into_inner);
    let id = (package.to_owned(), example.to_owned());
    if let Some(path) = built.get(&id) {
        return Ok(path.clone());
    }
    let path = build_example(package, example)?;
    built.insert(id, path.clone());
    Ok(path)
}

fn build_example(package: &str, example: &str) -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().map_err(io("finding the test binary's path"))?;
    // <target>/<profile>/deps/<test binary>
    let profile_dir = exe.parent().and_then(Path::parent).ok_or(Error::State(
        "the test binary is not in <target>/<profile>/deps",
    ))?;
    let target = profile_dir.parent().ok_or(Error::State(
        "the test binary is not in <target>/<profile>/deps",
    ))?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or(Error::State("the profile dir has no name"))?;
    let path = profile_dir.join("examples").join(example);
    if let Some(cargo) = std::env::var_os("CARGO") {
        let mut cmd = Command::new(cargo);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_BIN_EXE_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_CRATE_NAME",
                    "CARGO_BIN_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "CARGO_RUSTC_CURRENT_DIR",
                    "OUT_DIR",
                ]
                .contains(&name.as_ref())
            {
                cmd.env_remove(name.as_ref());
            }
        }
        let status = cmd
            .args(["build", "--quiet", "-p", package, "--example", example])
            .arg("--target-dir")
            .arg(target)
            .args([
                "--profile",
                if profile == "debug" { "dev" } else { profile },
            ])
            .status()
            .map_err(io("running cargo build"))?;
        if !status.success() {
            return Err(Error::State(
                "building the example failed (cargo's output is above)",
            ));
        }
    }
    if !path.is_file() {
        return Err(Error::State(
            "the example binary is missing: build it with `cargo build -p <package> --example <name>`",
        ));
    }
    Ok(path)
}

/// The Go program `name` (a client-go peer) that `cargo xtask controlplane build` builds
/// next to etcd and kube-apiserver.
///
/// # Errors
/// [`Error::PeerNotBuilt`] when it is missing.
pub fn peer_binary(name: &str) -> Result<PathBuf, Error> {
    let path = crate::binary_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::PeerNotBuilt { path })
    }
}
