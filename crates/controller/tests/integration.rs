//! The integration tests of kinformer-controller, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

#[cfg(feature = "kube")]
mod client;
mod controller;
#[cfg(feature = "kube")]
mod e2e;
#[cfg(feature = "kube")]
mod elected;
#[cfg(feature = "kube")]
mod owns;
#[cfg(feature = "kube")]
mod read_your_writes;
