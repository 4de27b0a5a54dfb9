//! The local cache: the Store and Indexer traits, the thread-safe store, index functions and listers.
//!
//! This crate is laid out in the workspace; its content arrives with its own issue
//! (see the workspace README's crate map).
