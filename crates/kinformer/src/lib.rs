//! The whole informer pipeline in one crate: each layer as a module, a prelude and a Controller runner.
//!
//! This crate is laid out in the workspace; its content arrives with its own issue
//! (see the workspace README's crate map).
