//! Interop with client-go: a kinformer elector and a client-go v0.36.3 elector (each its own
//! process) share one Lease on the real API server, and leadership passes from one to the
//! other both ways, by release and by the leader's death.
//!
//! Run with `cargo xtask test`, or `cargo test -p kinformer-leaderelection -- --include-ignored`
//! once `cargo xtask controlplane build` has built the control plane and `leader-peer`.
//! Timings: lease 4 s, renew deadline 2.5 s, retry 0.5 s.

use std::time::Duration;

use crate::common::journal::{duration, intervals, overlaps};
use crate::common::peers::{Arena, Kind, Peer};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Handover {
    /// The leader is stopped (SIGTERM) and releases the Lease on its way out.
    Release,
    /// The leader is killed (SIGKILL) and the standby waits the lease out.
    Kill,
}

/// Waits until `peer`'s journal reports `leader` as the leader it observed.
async fn wait_until_observed(peer: &Peer, leader: &str) {
    for _ in 0..200 {
        let seen = peer
            .journal()
            .iter()
            .any(|l| l.ev == "leader" && l.leader.as_deref() == Some(leader));
        if seen {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "{} never observed {leader} as the leader; its stderr:\n{}",
        peer.id,
        peer.stderr_tail()
    );
}

async fn handover(leader: Kind, standby: Kind, how: Handover) {
    let name = format!("{leader}-to-{standby}-{how:?}").to_lowercase();
    let arena = Arena::new(&name).await;
    let timings = arena.timings;
    let mut a = arena.spawn(
        leader,
        &format!("{leader}-leader"),
        how == Handover::Release,
    );
    let a_id = a.id.clone();
    arena
        .wait_for_holder(Duration::from_secs(15), |h| h == Some(a_id.as_str()))
        .await;
    let mut b = arena.spawn(standby, &format!("{standby}-standby"), false);
    wait_until_observed(&b, &a.id).await;
    // A few renewals with the standby watching: it must leave a live leader alone.
    tokio::time::sleep(timings.lease * 2).await;
    assert_eq!(arena.holder().await.as_deref(), Some(a.id.as_str()));

    let gone = match how {
        Handover::Release => {
            assert!(
                a.terminate(Duration::from_secs(10)),
                "{} did not exit on SIGTERM; its stderr:\n{}",
                a.id,
                a.stderr_tail()
            );
            a.ended_at.expect("exit time")
        }
        Handover::Kill => a.kill(),
    };
    let b_id = b.id.clone();
    arena
        .wait_for_holder(timings.takeover_bound() + Duration::from_secs(2), |h| {
            h == Some(b_id.as_str())
        })
        .await;
    // Let the new leader renew a few times before reading the journals.
    tokio::time::sleep(timings.retry * 4).await;

    let terms_a = intervals(&leader.to_string(), &a.journal(), a.ended_at);
    let terms_b = intervals(&standby.to_string(), &b.journal(), None);
    assert_eq!(terms_a.len(), 1, "{terms_a:?}");
    assert_eq!(terms_b.len(), 1, "{terms_b:?}");
    let all: Vec<_> = terms_a.iter().chain(&terms_b).cloned().collect();
    assert!(overlaps(&all).is_empty(), "two leaders at once: {all:?}");
    // From the moment the leader stopped leading (release) or died (kill).
    let from = match how {
        Handover::Release => terms_a[0].end,
        Handover::Kill => gone,
    };
    let gap = duration(terms_b[0].start - from);
    let bound = match how {
        // The standby sees the empty holder at its next try.
        Handover::Release => timings.retry.mul_f64(2.2) + Duration::from_secs(1),
        Handover::Kill => timings.takeover_bound(),
    };
    eprintln!(
        "{name}: {} took over {gap:?} after {} {} (bound {bound:?})",
        b.id,
        a.id,
        if how == Handover::Kill {
            "was killed"
        } else {
            "stopped and released"
        },
    );
    assert!(gap <= bound, "took {gap:?} to take over, bound {bound:?}");
    if how == Handover::Kill {
        // A dead leader's lease is waited out in full, counted from when its last write
        // was sent (the standby cannot have seen it earlier) — for client-go, the first
        // write of that last second: it compares records at one-second resolution.
        let waited =
            duration(terms_b[0].start - terms_a[0].lease_counted_from(&standby.to_string()));
        assert!(
            waited >= timings.lease,
            "{} took over {waited:?} after {}'s last write was sent",
            b.id,
            a.id
        );
    }

    // The record each wrote is what the other expects.
    let spec = arena
        .lease_now()
        .await
        .and_then(|l| l.spec)
        .expect("a Lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(b.id.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(4));
    assert_eq!(spec.lease_transitions, Some(1));
    let acquired = spec.acquire_time.expect("acquireTime").0;
    let renewed = spec.renew_time.expect("renewTime").0;
    assert!(renewed >= acquired);
    assert!(
        acquired.as_nanosecond() >= terms_a[0].end,
        "acquireTime is the takeover's"
    );
    assert!(b.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_rust_leader_releases_the_lease_to_a_go_standby() {
    handover(Kind::Rust, Kind::Go, Handover::Release).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_go_leader_releases_the_lease_to_a_rust_standby() {
    handover(Kind::Go, Kind::Rust, Handover::Release).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_go_standby_replaces_a_killed_rust_leader_after_the_lease() {
    handover(Kind::Rust, Kind::Go, Handover::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_rust_standby_replaces_a_killed_go_leader_after_the_lease() {
    handover(Kind::Go, Kind::Rust, Handover::Kill).await;
}
