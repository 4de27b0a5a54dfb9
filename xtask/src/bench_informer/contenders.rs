//! The contenders: building the Rust ones, and starting and reading one process of any
//! of them (the protocol is in the crate docs of `bench/informer`).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

/// How long one process may take to sync before it is killed.
pub(super) const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// One of the programs compared, in one wire format: client-go and kinformer in each
/// (protobuf is the default of both for built-in types), kinformer once more when
/// stripping (with `modify` instead of the informer's transform), kube-runtime in JSON
/// (kube-rs has no protobuf path).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Contender {
    /// client-go asking for protobuf, its default.
    ClientGo,
    /// client-go with its config's `ContentType` set to JSON.
    ClientGoJson,
    /// kinformer with `WireFormat::Auto`, its default: protobuf for pods.
    Kinformer,
    /// kinformer with `WireFormat::Json`.
    KinformerJson,
    /// kinformer (protobuf) stripping with `KubeListerWatcher::modify` (per object, while
    /// decoding) instead of the informer's transform; the same as `Kinformer` without
    /// stripping.
    KinformerModify,
    /// kube-runtime's `reflector` over its `watcher` (JSON).
    KubeRuntime,
}

impl Contender {
    pub(super) const ALL: [Self; 6] = [
        Self::ClientGo,
        Self::Kinformer,
        Self::ClientGoJson,
        Self::KinformerJson,
        Self::KinformerModify,
        Self::KubeRuntime,
    ];

    /// The contenders of a run with or without stripping.
    pub(super) fn for_strip(strip: bool) -> &'static [Self] {
        if strip {
            &Self::ALL
        } else {
            &Self::ALL_BUT_MODIFY
        }
    }

    /// The contenders of the defaults-against-defaults tables (`--defaults-only`): every
    /// program in each wire format with its own defaults; kinformer strips with the
    /// informer's transform.
    pub(super) const ALL_BUT_MODIFY: [Self; 5] = [
        Self::ClientGo,
        Self::Kinformer,
        Self::ClientGoJson,
        Self::KinformerJson,
        Self::KubeRuntime,
    ];

    /// The contenders of the event latency and churn runs: each program with its
    /// defaults (its default wire format, `managedFields` kept, kinformer's default cache).
    pub(super) const DEFAULTS: [Self; 3] = [Self::ClientGo, Self::Kinformer, Self::KubeRuntime];

    /// The name in progress lines, tables and chart legends.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::ClientGo => "client-go (protobuf)",
            Self::ClientGoJson => "client-go (JSON)",
            Self::Kinformer => "kinformer (protobuf)",
            Self::KinformerJson => "kinformer (JSON)",
            Self::KinformerModify => "kinformer (protobuf, modify)",
            Self::KubeRuntime => "kube-runtime (JSON)",
        }
    }

    /// The `--wire` argument, if the contender takes one.
    fn wire(self) -> Option<&'static str> {
        match self {
            Self::ClientGo => Some("protobuf"),
            Self::ClientGoJson | Self::KinformerJson => Some("json"),
            // kinformer's default (`WireFormat::Auto`) is what is measured.
            Self::Kinformer | Self::KinformerModify | Self::KubeRuntime => None,
        }
    }
}

/// What a contender does after its result line.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum After {
    /// Prints `{"settled_rss_kib"}` two seconds later and exits (`--settle`).
    Settle,
    /// Waits for this many labelled updates and prints when it saw them (`--latency M`).
    Latency(usize),
}

/// The three programs.
pub(super) struct Binaries {
    client_go: PathBuf,
    kinformer: PathBuf,
    kinformer_mimalloc: PathBuf,
    kube_runtime: PathBuf,
}

impl Binaries {
    /// client-go's peer.
    pub(super) fn client_go(&self) -> &Path {
        &self.client_go
    }

    /// kinformer's contender.
    pub(super) fn kinformer(&self) -> &Path {
        &self.kinformer
    }

    /// kinformer's contender with mimalloc as its allocator.
    pub(super) fn kinformer_mimalloc(&self) -> &Path {
        &self.kinformer_mimalloc
    }

    /// Made-up paths, for tests of the command lines.
    #[cfg(test)]
    pub(super) fn for_tests() -> Self {
        Self {
            client_go: "go".into(),
            kinformer: "kin".into(),
            kinformer_mimalloc: "kin-mimalloc".into(),
            kube_runtime: "kr".into(),
        }
    }

    /// The program of `c`.
    pub(super) fn path(&self, c: Contender) -> &Path {
        match c {
            Contender::ClientGo | Contender::ClientGoJson => &self.client_go,
            Contender::Kinformer | Contender::KinformerJson | Contender::KinformerModify => {
                &self.kinformer
            }
            Contender::KubeRuntime => &self.kube_runtime,
        }
    }
}

/// `cargo build --release -p kinformer-bench-informer`, and the Go peer's path.
pub(super) fn build() -> anyhow::Result<Binaries> {
    let mut exes = crate::cargo::bins("kinformer-bench-informer", "release")?;
    let mut exe = |name: &str| {
        exes.remove(name)
            .with_context(|| format!("cargo built no {name} executable"))
    };
    Ok(Binaries {
        client_go: crate::controlplane::INFORMER_PEER.path(),
        kinformer: exe("kinformer-contender")?,
        kinformer_mimalloc: exe("kinformer-contender-mimalloc")?,
        kube_runtime: exe("kube-runtime-contender")?,
    })
}

/// A contender process and the lines it prints.
pub(super) struct Running {
    name: &'static str,
    child: Child,
    pub(super) stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    pub(super) spawned: Instant,
}

impl Running {
    pub(super) fn spawn(
        bins: &Binaries,
        c: Contender,
        kubeconfig: &Path,
        ns: &str,
        n: usize,
        strip: bool,
        after: After,
    ) -> anyhow::Result<Self> {
        let mut cmd = Command::new(bins.path(c));
        cmd.arg("--kubeconfig").arg(kubeconfig).args([
            "--namespace",
            ns,
            "--expect",
            &n.to_string(),
        ]);
        if let Some(wire) = c.wire() {
            cmd.args(["--wire", wire]);
        }
        if strip {
            cmd.arg("--strip");
        }
        if c == Contender::KinformerModify {
            cmd.arg("--modify");
        }
        let latency = match after {
            After::Settle => {
                cmd.arg("--settle");
                false
            }
            After::Latency(m) => {
                cmd.args(["--latency", &m.to_string()]);
                true
            }
        };
        Self::start(c.name(), cmd, latency)
    }

    /// Starts `cmd` (a contender with its arguments) as `name`, with a pipe to its stdin
    /// if `stdin`.
    pub(super) fn start(name: &'static str, mut cmd: Command, stdin: bool) -> anyhow::Result<Self> {
        cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", cmd.get_program()))?;
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = err.read_to_string(&mut s);
                s
            })
        });
        Ok(Self {
            name,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            spawned,
        })
    }

    /// The next JSON line, or the process killed and an error with its stderr.
    pub(super) fn next_json(&mut self, timeout: Duration) -> anyhow::Result<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line)
                .with_context(|| format!("{} printed {line:?}, not JSON", self.name)),
            Err(e) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let name = self.name;
                bail!(
                    "{name}: no result ({}); its stderr:\n{}",
                    if matches!(e, mpsc::RecvTimeoutError::Timeout) {
                        "timed out"
                    } else {
                        "exited"
                    },
                    self.stderr_text()
                );
            }
        }
    }

    fn stderr_text(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    /// Waits for the exit and fails unless it succeeded.
    pub(super) fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        if !status.success() {
            let name = self.name;
            bail!("{name} failed ({status}):\n{}", self.stderr_text());
        }
        Ok(())
    }
}
