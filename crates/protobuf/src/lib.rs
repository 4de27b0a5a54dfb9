//! Kubernetes protobuf (the `k8s\0` envelope, lists, watch frames) decoded into any serde
//! type that decodes the same object's JSON.
//!
//! This first step holds the schema table only: for every protobuf message of the
//! Kubernetes API, how it maps onto its JSON.
//!
//! ```
//! assert!(kinformer_protobuf::is_known("v1", "Pod"));
//! ```
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]
#![allow(dead_code)]

mod schema;

pub use schema::{is_known, schema_source};
