//! Helpers shared by the end-to-end tests: one run's set-up ([`Scene`], [`reflect`]), a
//! sink that keeps the state it was given and a log of every call, a counting
//! [`ListerWatcher`](kinformer_reflector::ListerWatcher) wrapper (a non-default
//! implementation of the trait, plugged in through the public API), the errors a
//! reflector had, pod helpers, and polling waits.
// Each test binary uses a part of these helpers.
#![allow(dead_code, unreachable_pub, unused_imports)]

mod counting;
mod errors;
mod pods;
mod run;
mod sink;
mod wait;

use kinformer_testenv::ControlPlane;

pub use counting::{Calls, Counting};
pub use errors::Errors;
pub use pods::{create_pod, create_pods, delete_pod, label_pod, pod, truth};
pub use run::{Builder, PodBuilder, Run, Scene, reflect};
pub use sink::{Call, StateSink};
pub use wait::{MINUTE, assert_doubling_backoff, converge, eventually};

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
