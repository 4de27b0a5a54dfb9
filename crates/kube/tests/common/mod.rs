//! Helpers shared by the end-to-end tests: the control planes ([`shared`], [`no_cache`]),
//! one run's set-up ([`Scene`], [`reflect`]), a sink that keeps the state it was given and
//! a log of every call, a counting [`ListerWatcher`](kinformer_reflector::ListerWatcher)
//! wrapper (a non-default implementation of the trait, plugged in through the public
//! API), the errors a reflector had, pod helpers, polling waits, and clients that record
//! the wire format of what they received.
// Each test binary uses a part of these helpers.
#![allow(dead_code, unreachable_pub, unused_imports)]

mod counting;
mod errors;
mod pods;
mod run;
mod sink;
mod wait;
mod wire;

use kinformer_testenv::{ControlPlane, Options};
use tokio::sync::MutexGuard;

pub use counting::{Calls, Counting};
pub use errors::Errors;
pub use pods::{create_pod, create_pods, delete_pod, label_pod, pod, truth};
pub use run::{Builder, PodBuilder, Run, Scene, reflect};
pub use sink::{Call, StateSink};
pub use wait::{MINUTE, assert_doubling_backoff, converge};
pub use wire::{ContentTypes, recorded, recording_client};

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// The control plane shared by this test binary's tests, with logs set up first.
pub async fn shared() -> &'static ControlPlane {
    init_tracing();
    ControlPlane::shared()
        .await
        .expect("start the shared control plane")
}

static NO_CACHE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
/// Tests on the no-cache control plane take turns: one compacts etcd, which would expire
/// another's continue tokens mid-list.
static NO_CACHE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The watch-cache-off, WatchList-off control plane of this test binary, and this test's
/// turn on it: the server honours `limit` at RV "0" (paged lists), answers `410` right
/// after a compaction, and refuses streaming lists.
pub async fn no_cache() -> (&'static ControlPlane, MutexGuard<'static, ()>) {
    init_tracing();
    let cp = NO_CACHE
        .get_or_try_init(|| {
            ControlPlane::start_with(
                Options::default()
                    .watch_cache(false)
                    // Streaming lists work without the watch cache in 1.36; the gate
                    // makes the server refuse them (422), for the fallback test.
                    .apiserver_arg("--feature-gates=WatchList=false"),
            )
        })
        .await
        .expect("start the no-cache control plane");
    (cp, NO_CACHE_TURN.lock().await)
}
