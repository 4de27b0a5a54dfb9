//! Loom model checks of kinformer-workqueue's base queue (add / get / done / shutdown).
//!
//! Run with (what `cargo xtask test` does):
//!
//! ```text
//! RUSTFLAGS="--cfg kinformer_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p kinformer-workqueue-loom --release
//! ```
//!
//! A separate target directory, so that the `--cfg kinformer_loom` build does not evict the
//! normal one; and a crate of its own, so that this build compiles the queue and loom only
//! (the queue crate's tests would pull its dev-dependencies — criterion, proptest, Tokio —
//! into a release build of their own: most of the two and a half minutes this check took).
//! The models run in about two seconds on two cores.
//!
//! Under `--cfg kinformer_loom` the queue's mutex and condition variables are loom's (see
//! kinformer-workqueue's `src/sync.rs`), and loom runs every interleaving of the models'
//! threads (bounded by `LOOM_MAX_PREEMPTIONS`, default 5 here). Loom reports a deadlock if
//! every thread is blocked, so "drain terminates" is checked by the models finishing at all.
//! The blocking `get`'s brief spin is off under loom; the randomized stress test in
//! kinformer-workqueue's `tests/concurrency.rs` covers it.

#[cfg(all(test, kinformer_loom))]
mod models;
