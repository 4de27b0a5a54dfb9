//! A pod controller as a program ships it: kinformer-runtime's flags flattened into its own
//! command line, logs as the flags say, `/metrics` `/healthz` `/readyz` on `--admin-addr`,
//! optional leader election, and a shutdown that drains on the first SIGTERM or Ctrl-C and
//! exits at once on the second.
//!
//! ```text
//! cargo run --example cli_controller -- --help
//! cargo run --example cli_controller                          # KUBECONFIG / ~/.kube/config / in-cluster
//! cargo run --example cli_controller -- --kubeconfig K --context C --namespace N --log-format json
//! cargo run --example cli_controller -- --leader-elect --admin-addr 127.0.0.1:9090
//! ```
//!
//! Unlike the other examples it starts no local control plane: it connects where
//! `ClientArgs` says, as a real controller does (`cargo xtask controlplane up` prints a
//! kubeconfig for the local one).

use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kinformer::controller::{Action, Context};
use kinformer::metrics::Metrics;
use kinformer::prelude::*;

/// Watches the pods of a namespace and logs each one's phase.
#[derive(Debug, Parser)]
#[command(name = "cli-controller")]
struct Cli {
    #[command(flatten)]
    runtime: kinformer::runtime::Args,

    /// Reconciles at once
    #[arg(long, default_value_t = 2)]
    workers: usize,

    /// How long to wait for the cache to sync before giving up
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = kinformer::runtime::parse_duration)]
    sync_timeout: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let cli = Cli::parse();
    cli.runtime.log.init()?;
    // From here on the first SIGTERM or Ctrl-C cancels `shutdown`; the second exits.
    let shutdown = kinformer::runtime::shutdown::signals()?;

    let config = cli.runtime.client.config().await?;
    let namespace = config.default_namespace.clone();
    tracing::info!(server = %config.cluster_url, %namespace, "connecting");
    let metrics = Metrics::install();
    // --kube-api-qps/--kube-api-burst, rest_client_* metrics, the reflector's connection.
    let client = cli
        .runtime
        .client
        .client_builder(config)
        .metrics(&mut metrics.registry())
        .reflector_connection()
        .build()?;

    let factory = SharedInformerFactory::builder(client.clone())
        .namespace(&namespace)
        .build();
    metrics.register_factory(&factory);
    let pods = factory.informer::<Pod>();
    let controller = Controller::<ObjectKey>::new("cli-controller").workers(cli.workers);
    controller.watch(&pods)?;

    // The admin server outlives the drain (metrics and probes answer until the end).
    let admin_stop = CancellationToken::new();
    let server = cli.runtime.admin.bind().await?.ready_when("informers", {
        let factory = factory.clone();
        move || factory.all_synced()
    });
    tracing::info!(addr = %server.local_addr()?, "admin server listening");
    let admin = tokio::spawn(server.run(admin_stop.clone()));

    factory.start()?;
    tracing::info!("waiting for the cache to sync");
    tokio::select! {
        report = factory.wait_for_cache_sync(cli.sync_timeout) => {
            if !report.all_synced() {
                return Err(format!("the cache did not sync: {report}").into());
            }
            tracing::info!(%report, "cache synced");
        }
        () = shutdown.cancelled() => {
            tracing::info!("shutdown before the cache synced");
            factory.shutdown().await?;
            admin_stop.cancel();
            admin.await??;
            return Ok(());
        }
    }

    let elector = cli
        .runtime
        .leader_election
        .elector(client, &namespace, "cli-controller")?;
    let context = pods.lister();
    // Returns once `shutdown` is cancelled and the queue is drained.
    match &elector {
        None => controller.run(reconcile, context, shutdown).await,
        Some(elector) => {
            tracing::info!(
                identity = elector.identity(),
                lease = elector.name(),
                "leader election on"
            );
            controller
                .run_elected(elector, reconcile, context, shutdown)
                .await?;
        }
    }
    tracing::info!("drained; stopping the informers");
    factory.shutdown().await?;
    admin_stop.cancel();
    admin.await??;
    tracing::info!("stopped");
    Ok(())
}

/// Reads the pod back from the cache and logs its phase.
async fn reconcile(
    key: ObjectKey,
    pods: Context<Lister<Cached<Pod>>>,
) -> Result<Action, kinformer::indexer::Error> {
    let namespace = key.namespace().unwrap_or_default();
    match pods.namespaced(namespace).get(key.name()) {
        Ok(pod) => {
            let phase = pod.status().and_then(|s| s.phase());
            tracing::info!(%key, phase = phase.unwrap_or("Unknown"), "reconciled pod");
        }
        Err(e) if e.is_not_found() => tracing::info!(%key, "pod deleted"),
        Err(e) => return Err(e),
    }
    Ok(Action::Done)
}
