//! A kinformer elector over a Lease that logs its leadership as JSON lines: the Rust twin of
//! client-go's `xtask/go/cmd/leader-peer`, for the interop and chaos tests
//! (`tests/interop.rs`, `tests/chaos.rs`). Same flags, same lines.
//!
//! ```text
//! cargo run -p kinformer-leaderelection --example leader_peer -- \
//!     --kubeconfig PATH --namespace NS --name LEASE --identity ID \
//!     [--lease-ms 15000] [--renew-deadline-ms 10000] [--retry-ms 2000] [--release-on-cancel]
//! ```
//!
//! Every line is `{"t": <wall clock, Unix ns>, "id": ID, "ev": EVENT, ...}`:
//!
//! - `start` / `renew` with `sent` and `until`: the elector started leading / renewed with a
//!   write sent at `sent`, and leads until `until` (`sent` + the renew deadline) unless it
//!   renews again. Written by the `LeaderCallbacks` hooks, which the elector calls before it
//!   acts on the new deadline, so the line is in the file before the belief.
//! - `stop`: the elector stopped leading.
//! - `leader` with `leader`: a new holder was observed.
//! - `exit`: exiting after SIGTERM or SIGINT (the lease released first with
//!   `--release-on-cancel`).
#![allow(clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use kinformer_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Args {
    /// The kubeconfig of the API server.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The Lease's namespace.
    #[arg(long)]
    namespace: String,
    /// The Lease's name.
    #[arg(long)]
    name: String,
    /// This candidate's identity.
    #[arg(long)]
    identity: String,
    /// The lease duration, in milliseconds (a whole number of seconds).
    #[arg(long, default_value_t = 15_000)]
    lease_ms: u64,
    /// The renew deadline, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    renew_deadline_ms: u64,
    /// The retry period, in milliseconds.
    #[arg(long, default_value_t = 2_000)]
    retry_ms: u64,
    /// Release the lease on SIGTERM / SIGINT.
    #[arg(long)]
    release_on_cancel: bool,
}

/// Writes the JSON lines, one `write(2)` each, so a line is in the file even if the process
/// is killed right after.
struct Journal {
    id: String,
    renew_deadline: Duration,
}

impl Journal {
    fn log(&self, ev: &str, extra: serde_json::Value) {
        let mut line =
            serde_json::json!({ "t": unix_nanos(SystemTime::now()), "id": self.id, "ev": ev });
        if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
            line.extend(extra);
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    fn log_until(&self, ev: &str, deadline: Instant) {
        // The deadline on the wall clock that every process of the test shares.
        let now = Instant::now();
        let until = SystemTime::now() + deadline.saturating_duration_since(now);
        // The elector's deadline is the winning write's send time plus the renew deadline.
        let sent = until - self.renew_deadline;
        self.log(
            ev,
            serde_json::json!({ "sent": unix_nanos(sent), "until": unix_nanos(until) }),
        );
    }
}

impl LeaderCallbacks for Journal {
    fn started_leading(&self, deadline: Instant) {
        self.log_until("start", deadline);
    }

    fn renewed(&self, deadline: Instant) {
        self.log_until("renew", deadline);
    }

    fn stopped_leading(&self) {
        self.log("stop", serde_json::json!({}));
    }

    fn new_leader(&self, identity: &str) {
        self.log("leader", serde_json::json!({ "leader": identity }));
    }
}

fn unix_nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    if let Err(e) = run(Args::parse()).await {
        eprintln!("leader_peer: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;
    let lock = LeaseLock::new(client, &args.namespace, &args.name, &args.identity);
    let renew_deadline = Duration::from_millis(args.renew_deadline_ms);
    let config = LeaderElectionConfig {
        lease_duration: Duration::from_millis(args.lease_ms),
        renew_deadline,
        retry_period: Duration::from_millis(args.retry_ms),
        release_on_cancel: args.release_on_cancel,
        ..LeaderElectionConfig::default()
    };
    let elector = LeaderElector::builder(lock)
        .config(config)
        .callbacks(Journal {
            id: args.identity.clone(),
            renew_deadline,
        })
        .build()?;

    let cancel = CancellationToken::new();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        stop.cancel();
    });
    elector
        .run(&cancel, |leading| async move { leading.lost().await })
        .await?;
    Journal {
        id: args.identity,
        renew_deadline,
    }
    .log("exit", serde_json::json!({}));
    Ok(())
}
