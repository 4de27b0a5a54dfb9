//! The flags: defaults, every flag, what they build. No cluster: kubeconfigs are files in a
//! temp dir, and nothing is sent to a server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;

use super::*;

fn parse(args: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("prog").chain(args.iter().copied()))
}

#[test]
fn an_empty_command_line_gives_client_gos_and_controller_runtimes_defaults() {
    let args = parse(&[]).unwrap();
    assert_eq!(args, Args::default());
    assert_eq!(args.client.kubeconfig, None);
    assert_eq!(args.client.namespace, None);
    assert_eq!(args.client.kube_api_qps, 5.0);
    assert_eq!(args.client.kube_api_burst, 10);
    assert!(!args.leader_election.enabled);
    assert_eq!(args.leader_election.id, None);
    assert_eq!(args.leader_election.lease_duration, Duration::from_secs(15));
    assert_eq!(args.leader_election.renew_deadline, Duration::from_secs(10));
    assert_eq!(args.leader_election.retry_period, Duration::from_secs(2));
    assert_eq!(
        args.admin.admin_addr,
        "0.0.0.0:8080".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(
        args.admin.admin_addr,
        DEFAULT_ADMIN_ADDR.parse::<SocketAddr>().unwrap()
    );
    assert_eq!(args.log.log_format, LogFormat::Plain);
    assert_eq!(args.log.log_level, None);
    // The defaults are valid together.
    args.leader_election.config().unwrap();
}

#[test]
fn every_flag_lands_in_its_field() {
    let args = parse(&[
        "--kubeconfig",
        "/etc/kube/config",
        "--context",
        "prod",
        "--cluster",
        "prod-eu",
        "--user",
        "robot",
        "--namespace",
        "team-a",
        "--kube-api-qps",
        "20.5",
        "--kube-api-burst",
        "40",
        "--leader-elect",
        "--leader-election-id",
        "my-lease",
        "--leader-election-namespace",
        "kube-system",
        "--leader-election-identity",
        "replica-1",
        "--leader-election-lease-duration",
        "1m",
        "--leader-election-renew-deadline",
        "40s",
        "--leader-election-retry-period=500ms",
        "--admin-addr",
        "127.0.0.1:9090",
        "--log-format",
        "json",
        "--log-level",
        "warn,my_controller=debug",
    ])
    .unwrap();
    assert_eq!(
        args,
        Args {
            client: ClientArgs {
                kubeconfig: Some(PathBuf::from("/etc/kube/config")),
                context: Some("prod".into()),
                cluster: Some("prod-eu".into()),
                user: Some("robot".into()),
                namespace: Some("team-a".into()),
                kube_api_qps: 20.5,
                kube_api_burst: 40,
            },
            leader_election: LeaderElectionArgs {
                enabled: true,
                id: Some("my-lease".into()),
                namespace: Some("kube-system".into()),
                identity: Some("replica-1".into()),
                lease_duration: Duration::from_secs(60),
                renew_deadline: Duration::from_secs(40),
                retry_period: Duration::from_millis(500),
            },
            admin: AdminArgs {
                admin_addr: "127.0.0.1:9090".parse().unwrap(),
            },
            log: LogArgs {
                log_format: LogFormat::Json,
                log_level: Some("warn,my_controller=debug".into()),
            },
        }
    );
    let config = args.leader_election.config().unwrap();
    assert_eq!(config.lease_duration, Duration::from_secs(60));
    assert_eq!(config.renew_deadline, Duration::from_secs(40));
    assert_eq!(config.retry_period, Duration::from_millis(500));
    assert!(config.release_on_cancel);
    assert_eq!(args.leader_election.identity(), "replica-1");
}

#[test]
fn the_aliases_of_controller_runtime_and_component_base_work() {
    let args = parse(&[
        "--metrics-bind-address=:8443",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=5s",
        "--leader-elect-resource-name=lease",
        "--leader-elect-resource-namespace=ns",
    ]);
    // Go's ":8443" is no Rust socket address: rejected, not misread.
    assert!(args.is_err());
    let args = parse(&[
        "--metrics-bind-address=127.0.0.1:8443",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=5s",
        "--leader-elect-resource-name=lease",
        "--leader-elect-resource-namespace=ns",
    ])
    .unwrap();
    assert_eq!(args.admin.admin_addr.port(), 8443);
    let le = &args.leader_election;
    assert_eq!(
        (le.lease_duration, le.renew_deadline, le.retry_period),
        (
            Duration::from_secs(30),
            Duration::from_secs(20),
            Duration::from_secs(5)
        )
    );
    assert_eq!(le.id.as_deref(), Some("lease"));
    assert_eq!(le.namespace.as_deref(), Some("ns"));
}

#[test]
fn bad_values_are_rejected_while_parsing() {
    for bad in [
        ["--kube-api-qps", "0"],
        ["--kube-api-qps=-1", "--log-format=plain"],
        ["--kube-api-qps", "NaN"],
        ["--kube-api-qps", "inf"],
        ["--kube-api-qps", "fast"],
        ["--kube-api-burst", "0"],
        ["--kube-api-burst=-3", "--log-format=plain"],
        ["--leader-election-lease-duration", "15"],
        ["--leader-election-retry-period", "2 s"],
        ["--admin-addr", "localhost"],
        ["--log-format", "yaml"],
    ] {
        let e = parse(&bad).expect_err(&bad.join(" "));
        assert!(
            matches!(
                e.kind(),
                clap::error::ErrorKind::ValueValidation | clap::error::ErrorKind::InvalidValue
            ),
            "{}: {e}",
            bad.join(" ")
        );
    }
    // A duration's error says what is wrong with it.
    let e = parse(&["--leader-election-lease-duration", "15"]).unwrap_err();
    assert!(e.to_string().contains("missing unit"), "{e}");
}

#[test]
fn timings_that_break_leader_elections_rules_are_an_error() {
    let args = parse(&["--leader-election-lease-duration", "10s"]).unwrap();
    let e = args.leader_election.config().unwrap_err();
    assert!(
        matches!(
            &e,
            Error::LeaderElection(kinformer_leaderelection::Error::InvalidConfig(rule))
                if rule.contains("greater than renewDeadline")
        ),
        "{e:?}"
    );
    let args = parse(&["--leader-election-lease-duration", "15500ms"]).unwrap();
    assert!(args.leader_election.config().is_err());
}

#[test]
fn the_default_identity_is_the_hostname_and_a_random_suffix() {
    let args = LeaderElectionArgs::default();
    let (a, b) = (args.identity(), args.identity());
    assert_ne!(a, b, "two processes never share an identity");
    let (host, suffix) = a.rsplit_once('_').unwrap();
    assert!(!host.is_empty());
    assert_eq!(suffix.len(), 16);
    assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
}

/// A kubeconfig with a context that names a namespace (`dev`, current), one that does not
/// (`bare`), two clusters and a user.
const KUBECONFIG: &str = r"
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://127.0.0.1:6443
- name: other-cluster
  cluster:
    server: https://10.1.2.3:6443
contexts:
- name: dev
  context:
    cluster: dev-cluster
    user: dev-user
    namespace: team-a
- name: bare
  context:
    cluster: other-cluster
    user: dev-user
users:
- name: dev-user
  user:
    token: not-a-real-token-0123456789
";

fn kubeconfig(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("config");
    std::fs::write(&path, text).unwrap();
    path
}

fn client_args(path: &Path, extra: &[&str]) -> ClientArgs {
    let mut args = vec!["--kubeconfig", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    parse(&args).unwrap().client
}

#[tokio::test]
async fn the_namespace_is_the_flag_else_the_contexts_else_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), KUBECONFIG);

    let config = client_args(&path, &[]).config().await.unwrap();
    assert_eq!(config.default_namespace, "team-a");
    assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");

    let config = client_args(&path, &["--context", "bare"])
        .config()
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "default");
    assert_eq!(config.cluster_url.to_string(), "https://10.1.2.3:6443/");

    let config = client_args(&path, &["--namespace", "mine"])
        .config()
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "mine");

    let config = client_args(&path, &["--context", "bare", "--namespace", "mine"])
        .config()
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "mine");

    // --cluster swaps the context's cluster, and keeps its namespace.
    let config = client_args(&path, &["--cluster", "other-cluster"])
        .config()
        .await
        .unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://10.1.2.3:6443/");
    assert_eq!(config.default_namespace, "team-a");
}

#[tokio::test]
async fn a_kubeconfig_that_cannot_serve_is_an_error_not_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), KUBECONFIG);
    for extra in [&["--context", "nope"][..], &["--cluster", "nope"][..]] {
        let e = client_args(&path, extra).config().await.unwrap_err();
        assert!(
            matches!(&e, Error::Kubeconfig { path: Some(p), .. } if *p == path),
            "{extra:?}: {e:?}"
        );
        assert!(chain(&e).contains("nope"), "{e}");
    }
    // kube would go on without credentials; kubectl says no.
    let e = client_args(&path, &["--user", "nobody"])
        .config()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::KubeconfigUser { path: Some(p), user } if *p == path && user == "nobody"),
        "{e:?}"
    );
    client_args(&path, &["--user", "dev-user"])
        .config()
        .await
        .unwrap();
    let missing = dir.path().join("missing");
    let e = client_args(&missing, &[]).config().await.unwrap_err();
    assert!(matches!(&e, Error::Kubeconfig { .. }), "{e:?}");
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
fn a_location_is_two_numbers_or_none() {
    assert_eq!(
        client::location("error: line 25 column 12: expected string scalar"),
        Some((25, 12))
    );
    assert_eq!(client::location("at line 3, column 4"), Some((3, 4)));
    assert_eq!(client::location("line  column 4"), None);
    assert_eq!(client::location("invalid type: string \"x\""), None);
}

/// The error and every source under it, as a log line would print them.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[tokio::test]
async fn a_broken_kubeconfig_is_reported_without_its_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let broken = KUBECONFIG.replace(
        "    token: not-a-real-token-0123456789",
        "    token: [not-a-real-token-0123456789",
    );
    let path = kubeconfig(dir.path(), &broken);
    let e = client_args(&path, &[]).config().await.unwrap_err();
    assert!(
        matches!(&e, Error::KubeconfigSyntax { path: Some(p), location: Some((25, 12)) } if *p == path),
        "{e:?}"
    );
    let text = chain(&e);
    assert!(
        text.contains("is not a kubeconfig in YAML at line 25, column 12"),
        "{text}"
    );
    assert!(!text.contains("0123456789"), "the token leaks: {text}");
    assert!(
        !format!("{e:?}").contains("0123456789"),
        "the token leaks: {e:?}"
    );
}

#[tokio::test]
async fn the_client_is_built_from_the_flags_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), KUBECONFIG);
    let args = client_args(&path, &["--kube-api-qps", "50", "--kube-api-burst", "100"]);
    let client = args.client().await.unwrap();
    assert_eq!(client.default_namespace(), "team-a");

    // A struct built by hand is checked when the client is built.
    let by_hand = ClientArgs {
        kube_api_qps: 0.0,
        ..args
    };
    let Err(e) = by_hand.client().await else {
        panic!("a QPS of 0 made a client");
    };
    assert!(
        matches!(
            &e,
            Error::Client(kinformer_client::Error::InvalidRateLimit { .. })
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn the_admin_server_binds_its_address_or_says_which_it_could_not() {
    let any_port = AdminArgs {
        admin_addr: "127.0.0.1:0".parse().unwrap(),
    };
    let server = any_port.bind().await.unwrap();
    let taken = AdminArgs {
        admin_addr: server.local_addr().unwrap(),
    };
    let e = taken.bind().await.unwrap_err();
    assert!(
        matches!(&e, Error::Bind { addr, .. } if *addr == taken.admin_addr),
        "{e:?}"
    );
    assert!(e.to_string().contains(&taken.admin_addr.to_string()), "{e}");
}

#[tokio::test]
async fn an_elector_only_with_leader_elect() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), KUBECONFIG);
    let client = client_args(&path, &[]).client().await.unwrap();
    let off = parse(&[]).unwrap().leader_election;
    assert!(
        off.elector(client.clone(), "team-a", "c")
            .unwrap()
            .is_none()
    );

    let on = parse(&["--leader-elect", "--leader-election-identity", "me"])
        .unwrap()
        .leader_election;
    let elector = on.elector(client.clone(), "team-a", "c").unwrap().unwrap();
    assert_eq!(elector.identity(), "me");
    assert_eq!(elector.name(), "team-a/c");
    assert_eq!(elector.config().lease_duration, Duration::from_secs(15));
    assert!(elector.config().release_on_cancel);

    let named = parse(&[
        "--leader-elect",
        "--leader-election-id",
        "lease",
        "--leader-election-namespace",
        "kube-system",
    ])
    .unwrap()
    .leader_election;
    let elector = named
        .elector(client.clone(), "team-a", "c")
        .unwrap()
        .unwrap();
    assert_eq!(elector.name(), "kube-system/lease");

    let bad = parse(&["--leader-elect", "--leader-election-retry-period", "9s"])
        .unwrap()
        .leader_election;
    assert!(matches!(
        bad.elector(client, "team-a", "c"),
        Err(Error::LeaderElection(_))
    ));
}
