//! The leader record: who holds the lock, for how long, and since when.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a [`Lock`](crate::Lock) stores: client-go's `LeaderElectionRecord`, the fields of a
/// `coordination.k8s.io/v1` Lease's spec.
///
/// Only [`holder_identity`](Self::holder_identity) and
/// [`lease_duration_seconds`](Self::lease_duration_seconds) steer the election; the times
/// are written for people and tools, and no elector (this one or client-go's) trusts them:
/// a candidate only notes *when it saw the record change*, on its own monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// Who holds the lock; empty when nobody does (after a release), in which case any
    /// candidate may take it at once.
    pub holder_identity: String,
    /// How long the holder promises to renew within, in whole seconds. A candidate that sees
    /// the record unchanged for this long may take the lock. Released records say 1.
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the lock (the Lease's `acquireTime`).
    pub acquire_time: Option<SystemTime>,
    /// When the holder last renewed (the Lease's `renewTime`).
    pub renew_time: Option<SystemTime>,
    /// How many times the lock changed hands (the Lease's `leaseTransitions`).
    pub leader_transitions: i32,
}

impl LeaderElectionRecord {
    /// Whether someone holds the lock by this record.
    pub fn is_held(&self) -> bool {
        !self.holder_identity.is_empty()
    }
}

/// `t` truncated to whole microseconds: a Lease's times are `MicroTime`s, so a record written
/// with finer times would read back different and look changed.
pub(crate) fn truncate_to_micros(t: SystemTime) -> SystemTime {
    match t.duration_since(UNIX_EPOCH) {
        Ok(since) => {
            UNIX_EPOCH + Duration::new(since.as_secs(), since.subsec_micros().saturating_mul(1000))
        }
        // Before 1970: leave it; MicroTime rounds such times the same way on both sides.
        Err(_) => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncating_to_micros_drops_only_the_sub_microsecond_part() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(
            truncate_to_micros(t),
            UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_000)
        );
    }
}
