//! A cache for informers that keeps every object encoded: about a fifth of the memory.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod cache;
mod codec;
mod entry;
mod labels;
mod store;

pub use codec::CodecError;
pub use store::{CompactStore, DEFAULT_CACHE, Stats};
