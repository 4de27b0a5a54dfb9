//! The integration tests of kinformer-events, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod common;
mod e2e;
mod record;
mod record_e2e;
mod series;
mod writes;
