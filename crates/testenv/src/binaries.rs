//! Where the etcd and kube-apiserver binaries are.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The directory holding the `etcd` and `kube-apiserver` binaries: the
/// `KINFORMER_CONTROLPLANE_BIN` environment variable if set, else
/// `<target dir>/controlplane/bin`, where `cargo xtask controlplane build` puts them.
pub fn binary_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KINFORMER_CONTROLPLANE_BIN") {
        return dir.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // crates/testenv -> the workspace root
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .nth(2)
                .unwrap_or(manifest)
                .join("target")
        });
    target.join("controlplane").join("bin")
}

/// The binary `name` in `dir`, or [`Error::NotBuilt`] naming the build command.
pub(crate) fn binary(dir: &Path, name: &str) -> Result<PathBuf, Error> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::NotBuilt { path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_error_names_the_build_command() {
        let empty = tempfile::tempdir().unwrap();
        let err = binary(empty.path(), "kube-apiserver").unwrap_err();
        assert!(matches!(err, Error::NotBuilt { .. }));
        let msg = err.to_string();
        assert!(msg.contains("cargo xtask controlplane build"), "{msg}");
        assert!(msg.contains("kube-apiserver"), "{msg}");
    }
}
