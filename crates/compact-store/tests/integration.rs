//! The integration tests of kinformer-compact-store, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod e2e;
mod informer;
mod snapshot_kill;
