//! The integration tests of kinformer-workqueue, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod concurrency;
mod decorators;
mod model;
mod priority;
mod robustness;
mod rules;
mod stats;
