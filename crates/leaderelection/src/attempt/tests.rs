//! The lease step alone, on an in-memory lease and Tokio's paused clock: every branch of
//! `tryAcquireOrRenew` and `release` that the elector and the shard manager rely on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use super::*;
use crate::FakeClock;
use crate::testing::{Fault, MemoryLease, MemoryLock, tokio_clock};

const LEASE: Duration = Duration::from_secs(15);
const TIMEOUT: Duration = Duration::from_secs(2);

fn step<'a>(lock: &'a MemoryLock, clock: &'a FakeClock) -> LeaseAttempt<'a, MemoryLock> {
    LeaseAttempt::new(lock, LEASE, TIMEOUT, clock)
}

fn held_by(holder: &str, transitions: i32) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: holder.to_owned(),
        lease_duration_seconds: 15,
        acquire_time: Some(SystemTime::UNIX_EPOCH),
        renew_time: Some(SystemTime::UNIX_EPOCH),
        leader_transitions: transitions,
    }
}

fn kinds(lease: &MemoryLease) -> Vec<&'static str> {
    lease.calls().into_iter().map(|(_, k)| k).collect()
}

#[tokio::test(start_paused = true)]
async fn no_record_is_created_and_the_record_written_is_observed() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    let lock = lease.lock("a");
    let mut seen = None;
    assert!(
        step(&lock, &clock)
            .try_acquire_or_renew(&mut seen)
            .await
            .is_held()
    );
    assert_eq!(kinds(&lease), ["get", "create"]);
    let record = lease.record().unwrap();
    assert_eq!(record.holder_identity, "a");
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(record.leader_transitions, 0);
    assert_eq!(seen, Some(ObservedRecord::new(record, clock.now())));
}

#[tokio::test(start_paused = true)]
async fn the_holder_renews_on_the_fast_path_keeping_acquire_time_and_transitions() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    lease.put(held_by("b", 3));
    let lock = lease.lock("a");
    let mut seen = None;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // b's record is unchanged for 15 s on a's clock: a takes it, one more transition.
    let _ = step(&lock, &clock).try_acquire_or_renew(&mut seen).await;
    tokio::time::sleep(LEASE).await;
    assert!(
        step(&lock, &clock)
            .try_acquire_or_renew(&mut seen)
            .await
            .is_held()
    );
    let taken = lease.record().unwrap();
    assert_eq!(taken.leader_transitions, 4);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = lease.calls().len();
    assert!(
        step(&lock, &clock)
            .try_acquire_or_renew(&mut seen)
            .await
            .is_held()
    );
    assert_eq!(kinds(&lease)[before..], ["update"], "one write, no read");
    let renewed = lease.record().unwrap();
    assert_eq!(renewed.acquire_time, taken.acquire_time);
    assert_eq!(renewed.leader_transitions, 4);
    assert!(renewed.renew_time > taken.renew_time);
}

#[tokio::test(start_paused = true)]
async fn another_holders_lease_is_left_until_seen_unchanged_for_its_duration() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    lease.put(held_by("b", 0));
    let lock = lease.lock("a");
    let mut seen = None;
    let first = clock.now();
    let attempt = step(&lock, &clock).try_acquire_or_renew(&mut seen).await;
    assert!(matches!(attempt, Attempt::HeldByOther));
    tokio::time::sleep(LEASE - Duration::from_millis(1)).await;
    let attempt = step(&lock, &clock).try_acquire_or_renew(&mut seen).await;
    assert!(matches!(attempt, Attempt::HeldByOther));
    // Unchanged: still counted from the first sight.
    assert_eq!(seen.as_ref().unwrap().since, first);
    // A renewal by b restarts the count.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let mut renewed = held_by("b", 0);
    renewed.renew_time = Some(SystemTime::now());
    lease.put(renewed);
    let attempt = step(&lock, &clock).try_acquire_or_renew(&mut seen).await;
    assert!(matches!(attempt, Attempt::HeldByOther));
    assert_eq!(seen.as_ref().unwrap().since, clock.now());
    assert_eq!(lease.record().unwrap().holder_identity, "b");
}

#[tokio::test(start_paused = true)]
async fn a_released_record_is_taken_at_once() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    lease.put(LeaderElectionRecord {
        lease_duration_seconds: 1,
        ..held_by("", 2)
    });
    let lock = lease.lock("a");
    let mut seen = None;
    assert!(
        step(&lock, &clock)
            .try_acquire_or_renew(&mut seen)
            .await
            .is_held()
    );
    assert_eq!(lease.record().unwrap().leader_transitions, 3);
}

#[tokio::test(start_paused = true)]
async fn a_failed_fast_path_reads_again_and_counts_the_slow_path() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    let lock = lease.lock("a");
    let mut seen = None;
    assert!(
        step(&lock, &clock)
            .try_acquire_or_renew(&mut seen)
            .await
            .is_held()
    );
    // Someone rewrites the record naming a: a's version is stale, the fast path conflicts.
    lease.put(lease.record().unwrap());
    let slow = AtomicUsize::new(0);
    let count = || {
        slow.fetch_add(1, Ordering::Relaxed);
    };
    let before = lease.calls().len();
    let attempt = step(&lock, &clock)
        .on_slow_path(&count)
        .try_acquire_or_renew(&mut seen)
        .await;
    assert!(attempt.is_held());
    assert_eq!(kinds(&lease)[before..], ["update", "get", "update"]);
    assert_eq!(slow.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn of_two_candidates_racing_for_a_free_lease_one_gets_a_conflict() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    lease.put(held_by("", 0));
    let (a, b) = (lease.lock("a"), lease.lock("b"));
    let (mut seen_a, mut seen_b) = (None, None);
    // Both read the free record, then both write over it.
    let _ = step(&a, &clock).read(&mut seen_a).await.unwrap();
    let _ = step(&b, &clock).read(&mut seen_b).await.unwrap();
    lease.set_latency(Duration::from_millis(10));
    let (step_a, step_b) = (step(&a, &clock), step(&b, &clock));
    let (ra, rb) = tokio::join!(
        step_a.try_acquire_or_renew(&mut seen_a),
        step_b.try_acquire_or_renew(&mut seen_b),
    );
    let held = [ra.is_held(), rb.is_held()];
    assert_eq!(held.iter().filter(|h| **h).count(), 1, "{ra:?} {rb:?}");
    let loser = if held[0] { rb } else { ra };
    assert!(
        matches!(loser, Attempt::Failed(Error::Conflict)),
        "{loser:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn every_request_is_cut_at_the_request_timeout() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    let lock = lease.lock("a");
    lease.set_fault(Fault::Hang);
    let started = clock.now();
    let attempt = step(&lock, &clock).try_acquire_or_renew(&mut None).await;
    assert!(matches!(attempt, Attempt::Failed(Error::Timeout(t)) if t == TIMEOUT));
    assert_eq!(clock.now() - started, TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn release_clears_only_a_record_that_still_names_the_candidate() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    let lock = lease.lock("a");
    let mut seen = None;
    let released = step(&lock, &clock).release(&mut seen).await.unwrap();
    assert_eq!(released, Release::NotFound);
    assert!(
        step(&lock, &clock)
            .try_acquire_or_renew(&mut seen)
            .await
            .is_held()
    );
    let released = step(&lock, &clock).release(&mut seen).await.unwrap();
    assert_eq!(released, Release::Released);
    let record = lease.record().unwrap();
    assert!(!record.is_held());
    assert_eq!(record.lease_duration_seconds, 1);
    assert_eq!(seen.as_ref().map(|o| &o.record), Some(&record));
    // Taken by b meanwhile: a leaves it alone.
    lease.put(held_by("b", 1));
    let released = step(&lock, &clock).release(&mut seen).await.unwrap();
    assert_eq!(released, Release::NotHolder);
    assert_eq!(lease.record().unwrap().holder_identity, "b");
}

#[tokio::test(start_paused = true)]
async fn a_lock_is_handed_over_only_when_free_and_freed_only_from_that_holder() {
    let (lease, clock) = (MemoryLease::new(), tokio_clock());
    let (a, b) = (lease.lock("a"), lease.lock("b"));
    let (mut seen_a, mut seen_b) = (None, None);
    // None yet: created naming the other holder.
    let attempt = step(&a, &clock)
        .hand_over(&mut seen_a, "retired", i32::MAX)
        .await;
    assert!(attempt.is_held());
    let record = lease.record().unwrap();
    assert_eq!(
        (
            record.holder_identity.as_str(),
            record.lease_duration_seconds
        ),
        ("retired", i32::MAX)
    );
    // Already handed: nothing written.
    let writes = lease.calls().len();
    assert!(
        step(&b, &clock)
            .hand_over(&mut seen_b, "retired", i32::MAX)
            .await
            .is_held()
    );
    assert_eq!(lease.calls().len(), writes + 1, "one read, no write");
    // Nobody takes it while its lease runs, not even long after.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(matches!(
        step(&b, &clock).try_acquire_or_renew(&mut seen_b).await,
        Attempt::HeldByOther
    ));
    // Freed from that holder only, then taken at once.
    let freed = step(&b, &clock).release_from(&mut seen_b, "other").await;
    assert_eq!(freed.unwrap(), Release::NotHolder);
    let freed = step(&b, &clock).release_from(&mut seen_b, "retired").await;
    assert_eq!(freed.unwrap(), Release::Released);
    assert!(
        step(&b, &clock)
            .try_acquire_or_renew(&mut seen_b)
            .await
            .is_held()
    );
    // A lock another candidate holds is not handed over until its lease expires.
    assert!(matches!(
        step(&a, &clock)
            .hand_over(&mut seen_a, "retired", i32::MAX)
            .await,
        Attempt::HeldByOther
    ));
    tokio::time::sleep(LEASE).await;
    assert!(
        step(&a, &clock)
            .hand_over(&mut seen_a, "retired", i32::MAX)
            .await
            .is_held()
    );
    assert_eq!(lease.record().unwrap().leader_transitions, 2);
}

#[test]
fn a_record_is_free_when_released_own_or_expired() {
    let now = std::time::Instant::now();
    let seen = |holder: &str, ago: u64| {
        ObservedRecord::new(held_by(holder, 0), now - Duration::from_secs(ago))
    };
    assert!(seen("", 0).is_free_for("a", now));
    assert!(seen("a", 0).is_free_for("a", now));
    assert!(!seen("b", 14).is_free_for("a", now));
    assert!(seen("b", 15).is_free_for("a", now));
    assert_eq!(seen("b", 15).expiry(), now);
    let mut observed = Some(seen("b", 3));
    ObservedRecord::observe(&mut observed, held_by("b", 0), now);
    assert_eq!(observed, Some(seen("b", 3)), "unchanged: first sight kept");
    ObservedRecord::observe(&mut observed, held_by("c", 1), now);
    assert_eq!(observed, Some(seen_at(held_by("c", 1), now)));
}

fn seen_at(record: LeaderElectionRecord, at: std::time::Instant) -> ObservedRecord {
    ObservedRecord::new(record, at)
}
