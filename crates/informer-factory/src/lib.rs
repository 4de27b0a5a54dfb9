//! SharedIndexInformer, its listeners and event handlers, and the SharedInformerFactory.
//!
//! This crate is laid out in the workspace; its content arrives with its own issue
//! (see the workspace README's crate map).
