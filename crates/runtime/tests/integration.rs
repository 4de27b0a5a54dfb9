//! The crate as a program uses it: its flags flattened into the program's own parser, and
//! real signals sent to a real process.
//!
//! One test binary for the crate (`autotests = false`): each one links kube and Tokio.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser};
use kinformer_runtime::{AdminArgs, Args, ClientArgs, LogArgs, LogFormat};

/// A program's own parser: its flags, and kinformer-runtime's.
#[derive(Debug, Parser)]
#[command(name = "widget-controller", about = "Reconciles widgets.")]
struct Cli {
    #[command(flatten)]
    runtime: Args,
    /// Reconciles at once
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Dry run
    #[arg(long)]
    dry_run: bool,
}

/// A program that takes only some groups.
#[derive(Debug, Parser)]
#[command(name = "lister")]
struct Partial {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    admin: AdminArgs,
    /// What to list
    resource: String,
}

#[test]
fn the_flags_flatten_into_a_programs_parser_beside_its_own() {
    Cli::command().debug_assert();
    Partial::command().debug_assert();

    let cli = Cli::try_parse_from([
        "widget-controller",
        "--workers",
        "8",
        "--namespace",
        "widgets",
        "--leader-elect",
        "--log-format",
        "json",
        "--dry-run",
    ])
    .unwrap();
    assert_eq!(cli.workers, 8);
    assert!(cli.dry_run);
    assert_eq!(cli.runtime.client.namespace.as_deref(), Some("widgets"));
    assert!(cli.runtime.leader_election.enabled);
    assert_eq!(cli.runtime.log.log_format, LogFormat::Json);
    assert_eq!(cli.runtime.client.kube_api_burst, 10);

    let partial = Partial::try_parse_from(["lister", "--context", "kind", "pods"]).unwrap();
    assert_eq!(partial.resource, "pods");
    assert_eq!(partial.client.context.as_deref(), Some("kind"));
    assert_eq!(partial.admin.admin_addr.port(), 8080);
    // Not taken, so not accepted.
    assert!(Partial::try_parse_from(["lister", "--leader-elect", "pods"]).is_err());
}

#[test]
fn help_shows_the_programs_about_and_every_flag_under_its_heading() {
    let help = Cli::command().render_long_help().to_string();
    assert!(help.starts_with("Reconciles widgets."), "{help}");
    for line in [
        "Kubernetes client:",
        "--kubeconfig <PATH>",
        "--context <NAME>",
        "--cluster <NAME>",
        "--user <NAME>",
        "--namespace <NS>",
        "--kube-api-qps <QPS>",
        "[default: 5]",
        "--kube-api-burst <N>",
        "[default: 10]",
        "Leader election:",
        "--leader-elect",
        "--leader-election-id <NAME>",
        "--leader-election-namespace <NS>",
        "--leader-election-identity <ID>",
        "--leader-election-lease-duration <DURATION>",
        "[default: 15s]",
        "--leader-election-renew-deadline <DURATION>",
        "[default: 10s]",
        "--leader-election-retry-period <DURATION>",
        "[default: 2s]",
        "Admin server:",
        "--admin-addr <ADDR>",
        "[default: 0.0.0.0:8080]",
        "Logs:",
        "--log-format <FORMAT>",
        "[default: plain]",
        "--log-level <FILTER>",
        "--workers <WORKERS>",
        "--dry-run",
    ] {
        assert!(help.contains(line), "{line:?} missing in:\n{help}");
    }
    // The program's own flags stay under its own heading, not the last group's.
    let options = help.find("Options:").unwrap();
    let groups = help.find("Kubernetes client:").unwrap();
    for own in ["--workers", "--dry-run"] {
        let at = help.find(own).unwrap();
        assert!(
            options < at && at < groups,
            "{own} not under Options:\n{help}"
        );
    }
    // kinformer-runtime's own docs are no program's about.
    assert!(!help.contains("Every flag group"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_this_process_cancels_the_token() {
    let shutdown = kinformer_runtime::shutdown::Shutdown::install().unwrap();
    let token = shutdown.token();
    assert!(!token.is_cancelled());
    // The handlers are registered: SIGTERM no longer ends this process.
    let status = Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::timeout(Duration::from_secs(10), token.cancelled())
        .await
        .expect("SIGTERM cancels the token");
    assert!(shutdown.is_cancelled());
}

/// The child of [`a_second_signal_exits_with_the_signals_code`]: without its variable, a
/// test that passes at once.
#[test]
fn signal_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let shutdown = kinformer_runtime::shutdown::signals().unwrap();
        println!("{READY}");
        shutdown.cancelled().await;
        println!("{DRAINING}");
        // A drain that never ends: only the second signal stops this.
        std::future::pending::<()>().await;
    });
}

const CHILD: &str = "KINFORMER_RUNTIME_SIGNAL_CHILD";
const READY: &str = "signal-child: ready";
const DRAINING: &str = "signal-child: draining";

#[test]
fn a_second_signal_exits_with_the_signals_code() {
    for (signal, code) in [("-TERM", 143), ("-INT", 130)] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "signal_child", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id().to_string();
        // The child's lines, read on a thread so that a silent child fails the test.
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap_or_default()).is_err() {
                    return;
                }
            }
        });
        let mut wait_for = |want: &str| {
            let deadline = Instant::now() + Duration::from_secs(30);
            // libtest writes "test signal_child ... " before the child's first line.
            while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                if line.ends_with(want) {
                    return;
                }
            }
            let _ = child.kill();
            panic!("no {want:?} from the child");
        };
        let kill = || {
            let status = Command::new("kill").args([signal, &pid]).status().unwrap();
            assert!(status.success());
        };
        wait_for(READY);
        kill();
        wait_for(DRAINING);
        kill();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("the second {signal} did not end the child");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(code), "{signal}: {status}");
    }
}
