//! The integration tests of kinformer-informer-factory, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod common;
#[cfg(feature = "kube")]
mod e2e;
#[cfg(feature = "kube")]
mod factory;
mod informer;
#[cfg(feature = "kube")]
mod sharded;
mod snapshot;
#[cfg(feature = "kube")]
mod snapshot_e2e;
mod swap_points;
