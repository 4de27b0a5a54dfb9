//! The integration tests of kinformer-reflector, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod common;
mod e2e;
mod kube_runtime_comparison;
mod shard;
mod wire_format;
