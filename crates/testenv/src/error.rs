use std::path::PathBuf;

/// The one error type of kinformer-testenv.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The etcd / kube-apiserver binaries are missing.
    #[error(
        "control-plane binary {path} not found: build it with `cargo xtask controlplane build` \
         (or set KINFORMER_CONTROLPLANE_BIN to a directory holding etcd and kube-apiserver)"
    )]
    NotBuilt {
        /// The path that was looked for.
        path: PathBuf,
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
