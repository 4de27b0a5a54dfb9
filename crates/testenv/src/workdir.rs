//! The control plane's temp dir: one per control plane, named after this process so
//! that the dirs of dead processes can be told apart and removed.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, io};

/// Makes a fresh temp dir for a control plane, after removing those left by dead
/// processes. Dropping it deletes it.
pub(crate) fn create() -> Result<tempfile::TempDir, Error> {
    let root = std::env::temp_dir().join("kinformer-testenv");
    remove_stale_dirs(&root);
    fs::create_dir_all(&root).map_err(io(format!("creating {}", root.display())))?;
    tempfile::Builder::new()
        .prefix(&format!("{}-", std::process::id()))
        .tempdir_in(&root)
        .map_err(io("creating the control plane's temp dir"))
}

/// Writes a file only the owner can read: it may hold tokens or keys.
pub(crate) fn write_private(path: &Path, content: &str) -> Result<(), Error> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(content.as_bytes()))
        .map_err(io(format!("writing {}", path.display())))
}

/// Removes temp dirs of control planes whose process is gone (a test binary that was
/// killed cannot clean up after itself).
fn remove_stale_dirs(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_dirs_of_dead_processes_are_removed_and_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dead = root.path().join("999999999-abc");
        let live = root.path().join(format!("{}-abc", std::process::id()));
        let other = root.path().join("not-a-pid");
        for d in [&dead, &live, &other] {
            fs::create_dir(d).unwrap();
        }
        remove_stale_dirs(root.path());
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
    }
}
