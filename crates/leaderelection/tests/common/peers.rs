//! Electors as processes: kinformer's (`examples/leader_peer.rs`) and client-go's
//! (`xtask/go/cmd/leader-peer`), each behind its own proxy so a test can cut it off, each
//! logging its leadership to a file.

use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kinformer_testenv::{ApiProxy, ControlPlane};

use super::journal::{Line, read_journal};

/// Which elector a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// kinformer-leaderelection (the `leader_peer` example).
    Rust,
    /// client-go v0.36.3 (`leader-peer`, built with the control plane).
    Go,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Rust => "rust",
            Kind::Go => "go",
        })
    }
}

/// The timings every elector of a test uses: shorter than the defaults so a takeover takes
/// seconds, with the defaults' proportions kept where it matters (renew deadline well under
/// the lease, room for a retry).
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    pub lease: Duration,
    pub renew_deadline: Duration,
    pub retry: Duration,
}

/// Lease 4 s, renew deadline 2.5 s, retry 0.5 s.
pub const TIMINGS: Timings = Timings {
    lease: Duration::from_secs(4),
    renew_deadline: Duration::from_millis(2500),
    retry: Duration::from_millis(500),
};

impl Timings {
    /// The longest a standby may take to replace a dead leader: it sees the leader's last
    /// write within one jittered retry (up to 2.2 retry periods), waits a lease duration
    /// from then, and (client-go) tries at its next jittered retry after that; plus a second
    /// for process scheduling on a loaded machine.
    pub fn takeover_bound(&self) -> Duration {
        self.lease + self.retry.mul_f64(2.0 * 2.2) + Duration::from_secs(1)
    }
}

/// Wall-clock now, in Unix nanoseconds: the clock every journal uses.
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

/// The kinformer elector binary (this package's `leader_peer` example), built on first use.
fn rust_binary() -> PathBuf {
    kinformer_testenv::example_binary("kinformer-leaderelection", "leader_peer")
        .unwrap_or_else(|e| panic!("{e}"))
}

/// client-go's elector binary, built by `cargo xtask controlplane build`.
fn go_binary() -> PathBuf {
    kinformer_testenv::peer_binary("leader-peer").unwrap_or_else(|e| panic!("{e}"))
}

/// Where a test's peers run: the Lease, the timings, the directory of the journals.
pub struct Arena {
    pub cp: &'static ControlPlane,
    /// Straight to the API server, past every proxy.
    pub client: kube::Client,
    pub namespace: String,
    pub lease: String,
    pub timings: Timings,
    pub dir: tempfile::TempDir,
}

impl Arena {
    pub async fn new(name: &str) -> Self {
        let cp = ControlPlane::shared().await.expect("control plane");
        let namespace = cp.create_namespace(name).await.expect("namespace");
        Self {
            cp,
            client: cp.client().expect("client"),
            namespace,
            lease: name.to_owned(),
            timings: TIMINGS,
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// Starts an elector process named `id`.
    pub fn spawn(&self, kind: Kind, id: &str, release_on_cancel: bool) -> Peer {
        let proxy = self.cp.proxy().expect("proxy");
        let log = self.dir.path().join(format!("{id}.jsonl"));
        let err = self.dir.path().join(format!("{id}.stderr"));
        let mut cmd = Command::new(match kind {
            Kind::Rust => rust_binary(),
            Kind::Go => go_binary(),
        });
        let ms = |d: Duration| d.as_millis().to_string();
        cmd.arg("--kubeconfig")
            .arg(proxy.kubeconfig())
            .args(["--namespace", &self.namespace])
            .args(["--name", &self.lease])
            .args(["--identity", id])
            .args(["--lease-ms", &ms(self.timings.lease)])
            .args(["--renew-deadline-ms", &ms(self.timings.renew_deadline)])
            .args(["--retry-ms", &ms(self.timings.retry)])
            .stdin(Stdio::null())
            .stdout(File::create(&log).expect("journal file"))
            .stderr(File::create(&err).expect("stderr file"));
        if release_on_cancel {
            cmd.arg("--release-on-cancel");
        }
        if kind == Kind::Rust {
            cmd.env("RUST_LOG", "kinformer_leaderelection=info");
        }
        let spawned_at = now_ns();
        let child = cmd.spawn().expect("start an elector");
        Peer {
            id: id.to_owned(),
            kind,
            child,
            log,
            proxy,
            spawned_at,
            ended_at: None,
            paused: false,
        }
    }
}

/// One elector process.
pub struct Peer {
    pub id: String,
    pub kind: Kind,
    child: Child,
    log: PathBuf,
    pub proxy: ApiProxy,
    pub spawned_at: i128,
    /// When it was killed or exited (an upper bound: it was gone by then).
    pub ended_at: Option<i128>,
    pub paused: bool,
}

impl Peer {
    /// SIGKILL: the process dies where it is, without releasing anything. Returns when.
    pub fn kill(&mut self) -> i128 {
        self.cont();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let at = now_ns();
        self.ended_at.get_or_insert(at);
        at
    }

    /// SIGSTOP: the process freezes (a long GC pause, a frozen VM).
    pub fn pause(&mut self) {
        if !self.paused && self.signal("-STOP") {
            self.paused = true;
        }
    }

    /// SIGCONT.
    pub fn cont(&mut self) {
        if self.paused {
            self.signal("-CONT");
            self.paused = false;
        }
    }

    /// SIGTERM, then waits up to `grace` for the process to exit (releasing the lease if it
    /// was started to), then kills it. Returns whether it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> bool {
        self.cont();
        self.signal("-TERM");
        let until = std::time::Instant::now() + grace;
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.ended_at.get_or_insert(now_ns());
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        false
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn journal(&self) -> Vec<Line> {
        read_journal(&self.log)
    }

    /// The end of the process's stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log.with_extension("stderr")).unwrap_or_default();
        let lines: Vec<_> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn signal(&self, sig: &str) -> bool {
        Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if self.is_running() {
            self.kill();
        }
    }
}
