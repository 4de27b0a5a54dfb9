//! List and watch against the Kubernetes API: the ListerWatcher trait, its kube-client implementation and the Reflector.
//!
//! This crate is laid out in the workspace; its content arrives with its own issue
//! (see the workspace README's crate map).
