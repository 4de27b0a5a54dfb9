//! What a candidate knows of one Lease, for status pages and diagnostics: [`LeaseStatus`].

use std::time::{Duration, SystemTime};

use k8s_openapi::jiff::Timestamp;
use serde::{Serialize, Serializer};

use crate::{Clock, ObservedRecord};

/// One Lease as a candidate last saw it: [`LeaderElector::status`](crate::LeaderElector::status),
/// and kinformer-sharding's shard manager for each of its Leases.
///
/// A snapshot of what the candidate keeps anyway (the last record it read or wrote, and
/// when it first saw it so): taking it makes no request. It serializes (serde) with times as
/// RFC 3339 strings and durations as seconds, for a JSON status page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LeaseStatus {
    /// The Lease's name: the election's [`name`](crate::LeaderElector::name), or a shard
    /// Lease's name.
    pub name: String,
    /// This candidate's identity.
    pub identity: String,
    /// The holder the last record seen names; `None` before the first read, when there is
    /// no Lease, or when it was released.
    pub holder: Option<String>,
    /// Whether the last record seen names this candidate (client-go's `IsLeader`, which can
    /// be stale: see [`held`](Self::held)).
    pub is_me: bool,
    /// Whether this candidate holds the Lease now: it leads (in a term, before its renew
    /// deadline), or holds the shard.
    pub held: bool,
    /// When the holder acquired the Lease (the record's `acquireTime`).
    #[serde(serialize_with = "rfc3339")]
    pub acquire_time: Option<SystemTime>,
    /// When the holder last renewed it (the record's `renewTime`).
    #[serde(serialize_with = "rfc3339")]
    pub renew_time: Option<SystemTime>,
    /// The lease duration the record states.
    #[serde(serialize_with = "seconds")]
    pub lease_duration: Option<Duration>,
    /// How many times the Lease changed hands (the record's `leaseTransitions`).
    pub transitions: Option<i32>,
    /// When this candidate first saw the record as it is, on its own clock: the lease
    /// expires a lease duration after it unless the record changes.
    #[serde(serialize_with = "rfc3339")]
    pub observed_time: Option<SystemTime>,
    /// How long until the lease expires on this candidate's clock unless renewed; zero once
    /// expired.
    #[serde(serialize_with = "seconds")]
    pub expires_in: Option<Duration>,
}

impl LeaseStatus {
    /// The status of the Lease `name` for the candidate `identity`, from the record it saw
    /// last (`None`: none seen, or there is no Lease) on `clock`, the clock it observed the
    /// record on; `held`: whether it holds the Lease now.
    pub fn new(
        name: impl Into<String>,
        identity: impl Into<String>,
        observed: Option<&ObservedRecord>,
        held: bool,
        clock: &dyn Clock,
    ) -> Self {
        let identity = identity.into();
        let mut status = Self {
            name: name.into(),
            held,
            ..Self::default()
        };
        if let Some(seen) = observed {
            let record = &seen.record;
            let (now, wall) = (clock.now(), clock.wall_now());
            status.holder = Some(record.holder_identity.clone()).filter(|h| !h.is_empty());
            status.is_me = seen.names(&identity);
            status.acquire_time = record.acquire_time;
            status.renew_time = record.renew_time;
            status.lease_duration = u64::try_from(record.lease_duration_seconds)
                .ok()
                .map(Duration::from_secs);
            status.transitions = Some(record.leader_transitions);
            status.observed_time = wall.checked_sub(now.saturating_duration_since(seen.since));
            status.expires_in = Some(seen.expiry().saturating_duration_since(now));
        }
        status.identity = identity;
        status
    }
}

/// A time as RFC 3339 (`2026-01-02T03:04:05.123456Z`); a time past what that can say as
/// `null`.
fn rfc3339<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t.and_then(|t| Timestamp::try_from(t).ok()) {
        Some(t) => s.collect_str(&t),
        None => s.serialize_none(),
    }
}

/// A duration as seconds.
fn seconds<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}
