use std::path::PathBuf;

/// The command that builds the control plane outside kinformer's repository.
pub(crate) const INSTALL_COMMAND: &str = concat!(
    "cargo install kinformer-testenv@",
    env!("CARGO_PKG_VERSION"),
    " && kinformer-testenv install"
);

/// `a, b, c`.
fn paths(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// The one error type of kinformer-testenv.
///
/// Its `Debug` is its message followed by its sources': a test that returns
/// `Result<(), Box<dyn Error>>` or unwraps shows what to do (for [`Error::NotBuilt`], the
/// install command), not the fields.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The etcd / kube-apiserver binaries were found in none of the places testenv looks
    /// (see [`binary_dir`](crate::binary_dir)).
    #[error(
        "control-plane binary {} not found (looked in: {}): build etcd and kube-apiserver with \
         `{INSTALL_COMMAND}` (Go {} or newer on PATH), or `cargo xtask controlplane build` \
         in kinformer's repository; or set KINFORMER_CONTROLPLANE_BIN to a directory holding \
         both",
        path.display(),
        paths(searched),
        go
    )]
    NotBuilt {
        /// The binary that was missing (in the last dir looked in).
        path: PathBuf,
        /// The dirs looked in, in order.
        searched: Vec<PathBuf>,
        /// The Go version the install command needs
        /// ([`install::go_version_needed`](crate::install::go_version_needed)).
        go: &'static str,
    },
    /// A client-go peer program is missing: only kinformer's repository builds them.
    #[error("peer program {path} not found: build it with `cargo xtask controlplane build`")]
    PeerNotBuilt {
        /// The path that was looked for.
        path: PathBuf,
    },
    /// `go` is not on `PATH`: building the control plane needs it.
    #[error(
        "building etcd and kube-apiserver needs Go {needed} or newer, and `go` is not on PATH \
         (install it from https://go.dev/dl/)"
    )]
    GoMissing {
        /// The Go version the control plane's module needs.
        needed: &'static str,
    },
    /// The `go` on `PATH` is older than the control plane's module needs.
    #[error(
        "building etcd and kube-apiserver needs Go {needed} or newer; `go` on PATH is {found} \
         (install a newer one from https://go.dev/dl/)"
    )]
    GoTooOld {
        /// `go env GOVERSION` (`go1.25.1`).
        found: String,
        /// The version needed.
        needed: &'static str,
    },
    /// A step of the control plane's build failed.
    #[error("`{step}` failed ({status}):\n{tail}")]
    GoBuild {
        /// The step (`go build kube-apiserver`).
        step: String,
        /// Its exit status.
        status: String,
        /// The end of its output.
        tail: String,
    },
    /// A process did not become ready in time, or exited while starting.
    #[error("{component} did not become ready: {reason}\n--- last lines of {log} ---\n{tail}")]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        component: &'static str,
        /// What went wrong.
        reason: String,
        /// The process's log file.
        log: PathBuf,
        /// The end of that log.
        tail: String,
    },
    /// Local I/O: temp dirs, files, sockets, spawning processes.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A call to the API server failed.
    #[error("{context}")]
    Kube {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: Box<kube::Error>,
    },
    /// The kubeconfig that testenv wrote could not be loaded.
    #[error("loading the kubeconfig: {0}")]
    Kubeconfig(String),
    /// Talking to etcd's JSON gateway failed.
    #[error("etcd: {0}")]
    Etcd(String),
    /// A CRD could not be built, or was not established and served in time.
    #[error("CRD {name}: {reason}")]
    Crd {
        /// The CRD's name, `{plural}.{group}`.
        name: String,
        /// What went wrong.
        reason: String,
    },
    /// The operation needs the API server to be running (or stopped) and it is not.
    #[error("{0}")]
    State(&'static str),
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

pub(crate) fn kube_err(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let context = context.into();
    move |source| Error::Kube {
        context,
        source: Box::new(source),
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_says_what_display_says_and_the_sources() {
        let not_built = Error::NotBuilt {
            path: PathBuf::from("/c/etcd"),
            searched: vec![PathBuf::from("/a"), PathBuf::from("/c")],
            go: "1.26",
        };
        let debug = format!("{not_built:?}");
        assert_eq!(debug, not_built.to_string());
        assert!(debug.contains("kinformer-testenv install"), "{debug}");
        assert!(debug.contains("/a, /c"), "{debug}");

        let io = io("writing x")(std::io::Error::other("disk full"));
        assert_eq!(format!("{io:?}"), "writing x: disk full");
    }
}
