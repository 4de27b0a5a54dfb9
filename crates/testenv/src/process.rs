//! Child processes that never outlive the test binary.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use crate::error::{Error, io};

/// A running etcd or kube-apiserver.
///
/// It is killed when dropped (also while a panicking test unwinds). If the test
/// binary dies without unwinding, the child still exits: its stdin is a pipe that
/// only this process holds, and the binaries built by `cargo xtask controlplane build`
/// exit when that pipe closes (`crates/testenv/go/internal/parentwatch`).
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) component: &'static str,
    child: Child,
    pub(crate) log: PathBuf,
}

impl Process {
    pub(crate) fn spawn(
        component: &'static str,
        bin: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Self, Error> {
        let out = File::create(log).map_err(io(format!("creating {}", log.display())))?;
        let err = out.try_clone().map_err(io("cloning a log file handle"))?;
        let child = Command::new(bin)
            .args(args)
            .env("KINFORMER_EXIT_WITH_PARENT", "1")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io(format!("starting {}", bin.display())))?;
        tracing::debug!(component, pid = child.id(), "started");
        Ok(Self {
            component,
            child,
            log: log.to_owned(),
        })
    }

    /// The exit status, if the process has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The error to report when the process did not become ready.
    pub(crate) fn not_ready(&mut self, reason: impl Into<String>) -> Error {
        let mut reason = reason.into();
        if let Some(status) = self.exited() {
            reason = format!("{reason} (exited with {status})");
        }
        Error::NotReady {
            component: self.component,
            reason,
            log: self.log.clone(),
            tail: log_tail(&self.log, 25),
        }
    }

    /// Closes our end of the child's stdin, as the kernel does when this process dies.
    #[cfg(test)]
    pub(crate) fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    pub(crate) fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a log file (empty when unreadable).
pub(crate) fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
