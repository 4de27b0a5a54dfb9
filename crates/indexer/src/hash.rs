//! The hasher for slot ids.
//!
//! Index sets hold `u32` slot ids. SipHash (std's default) spends more time on a 4-byte id
//! than the rest of the set operation; Fibonacci hashing (one multiplication) spreads
//! consecutive ids over hashbrown's buckets (low bits) and control bytes (top 7 bits) alike.
//! Ids are allocated by the store, never chosen by a caller, so there is no collision
//! attack to defend against here.

use std::hash::{BuildHasherDefault, Hasher};

/// 2^64 / φ, the multiplier of Fibonacci hashing.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached if something other than a `u32` is hashed; still a valid hash.
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(GOLDEN);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(GOLDEN);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type BuildIdHasher = BuildHasherDefault<IdHasher>;

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn consecutive_ids_get_distinct_buckets_and_control_bytes() {
        let b = BuildIdHasher::default();
        let hashes: Vec<u64> = (0u32..1024).map(|i| b.hash_one(i)).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(buckets.len(), 1024);
        assert!(
            tags.len() > 100,
            "only {} distinct control bytes",
            tags.len()
        );
    }
}
