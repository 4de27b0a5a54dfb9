//! The integration tests of kinformer-indexer, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod common;
mod consistency;
mod listers;
mod rules;
mod selector;
