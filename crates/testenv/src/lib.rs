//! A real etcd + kube-apiserver on loopback for kinformer's tests, demo and benchmarks.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_testenv::ControlPlane;
//! use kube::Api;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let cp = ControlPlane::shared().await?;
//! let ns = cp.create_namespace("example").await?;
//! let pods: Api<Pod> = Api::namespaced(cp.client()?, &ns);
//! assert!(pods.list(&Default::default()).await?.items.is_empty());
//!
//! let proxy = cp.proxy()?;
//! let through_proxy: Api<Pod> = Api::namespaced(proxy.client()?, &ns);
//! proxy.partition(); // requests through the proxy now fail ...
//! proxy.heal(); // ... and work again
//! # drop(through_proxy);
//! # Ok(())
//! # }
//! ```
//!
//! Both binaries are built from the Go module proxy (see [Getting the binaries](#getting-the-binaries));
//! no container engine or prebuilt Kubernetes is needed. [`ControlPlane::start`] runs them on free loopback ports in a temp dir, with
//! TLS (the API server's self-signed certificate, trusted by the clients) and RBAC on,
//! and hands out [`kube::Client`]s for two users:
//!
//! - an admin (in `system:masters`), from [`ControlPlane::client`];
//! - a restricted user who may only list and watch pods, from
//!   [`ControlPlane::restricted_client`], for RBAC failure tests.
//!
//! Faults a test can inject: [`ControlPlane::stop_apiserver`] /
//! [`ControlPlane::start_apiserver`] (same etcd, same port; or
//! [`ControlPlane::start_apiserver_with_watch_cache`] to switch the watch cache on or off
//! across the restart); a [`ApiProxy`] in front of the API server whose connections
//! [`ApiProxy::partition`] cuts while the test keeps writing through the direct client
//! (a program under test in its own process connects through it with
//! [`ApiProxy::kubeconfig`]); [`ControlPlane::compact_etcd`], which makes old
//! resourceVersions answer `410 Gone`.
//!
//! One control plane can serve every test of a test binary ([`ControlPlane::shared`]);
//! tests then isolate themselves by namespace ([`ControlPlane::create_namespace`]). A
//! test that stops the API server or needs the watch cache off starts its own.
//!
//! # Getting the binaries
//!
//! In your own crate, build etcd and kube-apiserver ([`install::KUBERNETES_VERSION`]) once
//! per machine with this crate's binary, which needs Go 1.26 or newer on `PATH` (the `go`
//! line of the Go module this crate ships; [`Error::GoMissing`] / [`Error::GoTooOld`]
//! otherwise):
//!
//! ```sh
//! cargo install kinformer-testenv@0.1.0 --locked   # the version you depend on
//! kinformer-testenv install   # into ~/.cache/kinformer/controlplane/v1.37.2/bin
//! ```
//!
//! It writes the Go module to a work dir and runs `go build` for both binaries into
//! [`user_binary_dir`] (`$XDG_CACHE_HOME/kinformer/controlplane/<version>/bin`, else under
//! `$HOME/.cache`; `--dir DIR` for another), showing its progress: a cold build downloads
//! about 800 MB of Go modules and takes minutes; a second run, with nothing changed,
//! returns at once. [`install::install`] is the same as a function. Then a test needs no
//! environment variable:
//!
//! ```no_run
//! use kinformer_testenv::{ControlPlane, Crd, CrdVersion};
//! use serde_json::json;
//!
//! #[tokio::test]
//! async fn widgets_are_served() -> Result<(), Box<dyn std::error::Error>> {
//!     let cp = ControlPlane::shared().await?;
//!     let ns = cp.create_namespace("widgets").await?;
//!     let widgets = Crd::new("example.com", "Widget", "widgets")
//!         .version(
//!             CrdVersion::new("v1")
//!                 .schema(json!({ "type": "object", "properties": {
//!                     "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
//!                     "status": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
//!                 } }))
//!                 .status_subresource(true),
//!         )
//!         .create(&cp.client()?)
//!         .await?;
//!     let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(cp.client()?, &ns, &widgets);
//!     assert!(api.list(&Default::default()).await?.items.is_empty());
//!     Ok(())
//! }
//! ```
//!
//! [`ControlPlane::start`] takes the binaries from the first of these that holds both
//! ([`find_binary_dir`]):
//!
//! 1. `KINFORMER_CONTROLPLANE_BIN`, when set (and then only it): a dir holding `etcd` and
//!    `kube-apiserver`, e.g. restored by CI or made by `kinformer-testenv install --dir DIR`;
//! 2. in kinformer's own repository, `<target dir>/controlplane/bin`, which `cargo xtask
//!    controlplane build` fills (with the same installer) along with the client-go peers;
//! 3. [`user_binary_dir`], where `kinformer-testenv install` puts them.
//!
//! When none does it fails with [`Error::NotBuilt`], naming the dirs and these commands.
//!
//! # The watch cache and `410 Gone`
//!
//! With the API server's watch cache on (the default, as in real clusters) a watch from
//! an old resourceVersion is served from the cache, which keeps a window of recent
//! events whatever etcd compacted: compaction alone does not make such a watch fail.
//! For a deterministic `410`, start the control plane with
//! [`Options::watch_cache`]`(false)`: every watch then goes to etcd, and after
//! [`ControlPlane::compact_etcd`] any resourceVersion older than the compaction is gone.
//! (Such a control plane still serves streaming WatchList on 1.36; for a server that
//! refuses it, set `Options::feature_gate("WatchList", false)`: it
//! answers 422, handy for testing the fallback.)
//!
//! # Feature gates
//!
//! [`Options::feature_gate`] sets API server feature gates (one `--feature-gates` flag);
//! [`Options::sharded_list_and_watch`]`(true)` turns on Kubernetes 1.36's alpha sharded list
//! and watch (`shardSelector`), which a default control plane ignores, as a default 1.36
//! cluster does.
//!
//! # Waiting
//!
//! What a test waits for (an informer's cache, a controller's reconcile, a peer's
//! observation) happens on other tasks: [`eventually`] polls a condition until it holds
//! or a timeout passes, then fails the test naming what it waited for;
//! [`eventually_async`] does the same for a condition that awaits (a request to the API
//! server). Tests wait with them instead of polling loops of their own.
//! [`try_eventually`] and [`try_eventually_async`] return a [`TimedOut`] error instead of
//! panicking, for code that is not a test.
//!
//! # Outside `#[test]`: a driver binary
//!
//! Nothing here needs the test harness: a demo, a soak or a scenario check that runs as a
//! program takes this crate as a normal `[dependencies]` entry, starts a control plane,
//! installs its CRDs from the `CustomResourceDefinition` it already has ([`install_crd`]:
//! kube's `CustomResourceExt::crd()`; [`install_crd_yaml`] for a manifest), and waits with
//! the `try_` forms, which fail with an error the program reports instead of a panic:
//!
//! ```no_run
//! use std::time::Duration;
//! use kinformer_testenv::{ControlPlane, try_eventually_async};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let cp = ControlPlane::start().await?; // stopped when dropped
//!     let client = cp.client()?;
//!     // The program's own CRD: `CronJob::crd()` (kube's `CustomResourceExt`), or here one
//!     // this crate builds.
//!     let crd = kinformer_testenv::Crd::new("example.com", "Widget", "widgets").definition()?;
//!     kinformer_testenv::install_crd(&client, &crd).await?;
//!     // ... start the controller under test, create objects ...
//!     let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client);
//!     try_eventually_async("the default namespace", Duration::from_secs(30), || async {
//!         namespaces.get_opt("default").await.ok().flatten().is_some()
//!     })
//!     .await?;
//!     Ok(())
//! }
//! ```
//!
//! # Teardown
//!
//! Dropping a [`ControlPlane`] kills both processes and deletes the temp dir, also when
//! a test panics. If the test binary dies without unwinding, the processes still exit
//! (they watch a pipe from this process), and the next start removes temp dirs left by
//! dead processes.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

// The control plane and its lifecycle.
mod control_plane;
mod options;
// Its parts: where the binaries are, each process, the temp dir and the ports they use.
mod apiserver;
mod binaries;
mod etcd;
pub mod install;
mod ports;
mod process;
mod workdir;
// Access: the users, their kubeconfig and clients, a proxy to cut their connections.
mod api_proxy;
mod clients;
mod kubeconfig;
mod proxy;
mod random;
mod users;
// What tests create on the server.
mod crd;
mod fixtures;
mod programs;
mod recording;
mod scaled_objects;
// Waiting in tests.
pub mod wait;

mod error;

pub use api_proxy::ApiProxy;
pub use binaries::{binary_dir, find_binary_dir, user_binary_dir, workspace_binary_dir};
pub use control_plane::ControlPlane;
pub use crd::{Crd, CrdScope, CrdVersion, create_crd, install_crd, install_crd_yaml};
pub use error::Error;
pub use fixtures::{apply_realistic_pods, create_pods, pod};
pub use options::{Options, SHARDED_LIST_AND_WATCH};
pub use programs::{example_binary, peer_binary};
pub use proxy::TcpProxy;
pub use recording::{ContentTypes, recording_client};
pub use scaled_objects::{
    SCALED_OBJECT_GROUP, SCALED_OBJECT_KIND, SCALED_OBJECT_PLURAL, SCALED_OBJECT_VERSION,
    apply_realistic_scaled_objects, create_scaled_object_crd, scaled_object_resource,
};
pub use users::{ADMIN_USER, RESTRICTED_USER};
pub use wait::{TimedOut, eventually, eventually_async, try_eventually, try_eventually_async};
