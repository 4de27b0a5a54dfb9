//! The integration tests of kinformer-deltafifo, in one test binary: each module below was a
//! binary of its own. One binary links once and compiles the code its modules share with
//! their dependencies (Tokio, kube, serde's generated code) once, not once per file.

mod async_pop;
mod common;
mod custom_queue;
mod delta_fifo_rules;
mod in_order_rules;
mod kube_objects;
mod processing;
mod property;
