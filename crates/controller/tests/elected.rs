//! `Controller::run_elected` on an in-memory lease and a paused clock: workers only while
//! leading, a standby that takes over with its queue already full, in-flight reconciles
//! cancelled (and aborted after the grace, their keys queued again), release on shutdown.
//! The same against the real API server with client-go electors is in
//! `crates/leaderelection/tests` (the elector) and `examples/tests/failover.rs` (the
//! controller).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_controller::controller::{Action, Context, Controller};
use kinformer_core::ObjectKey;
use kinformer_leaderelection::testing::{Fault, MemoryLease, tokio_clock};
use kinformer_leaderelection::{LeaderElectionConfig, LeaderElector};
use kinformer_workqueue::{PriorityWorkQueue, Queue};
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// One thing a reconcile did: (key, when, what).
type Entry = (String, Instant, &'static str);

/// What one replica's reconciles did, in order.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<Entry>>>);

impl Journal {
    fn push(&self, key: &ObjectKey, what: &'static str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
            key.to_string(),
            Instant::now(),
            what,
        ));
    }
    fn entries(&self) -> Vec<Entry> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    fn keys(&self, what: &str) -> Vec<String> {
        self.entries()
            .into_iter()
            .filter(|e| e.2 == what)
            .map(|e| e.0)
            .collect()
    }
}

fn key(s: &str) -> ObjectKey {
    ObjectKey::parse(s).unwrap()
}

fn elector(lease: &MemoryLease, id: &str, release_on_cancel: bool) -> LeaderElector {
    let config = LeaderElectionConfig {
        release_on_cancel,
        ..LeaderElectionConfig::default()
    };
    LeaderElector::builder(lease.lock(id))
        .config(config)
        .clock(tokio_clock())
        .build()
        .unwrap()
}

/// Reconciles record the key; `slow/*` keys wait for the cancellation, `stuck/*` ignore it
/// the first time (a reconcile that never returns) and succeed the second.
async fn reconcile(key: ObjectKey, ctx: Context<Journal>) -> Result<Action, String> {
    ctx.push(&key, "reconcile");
    match key.namespace() {
        Some("slow") => {
            ctx.cancellation().cancelled().await;
            ctx.push(
                &key,
                if ctx.is_leading() {
                    "cancelled while leading"
                } else {
                    "cancelled"
                },
            );
        }
        Some("stuck")
            if ctx
                .keys("reconcile")
                .iter()
                .filter(|k| **k == key.to_string())
                .count()
                == 1 =>
        {
            std::future::pending::<()>().await;
        }
        _ => {}
    }
    Ok(Action::Done)
}

/// A replica: a controller whose queue already holds `keys` (its informers' handlers would
/// have put them there, leading or not), run under `elector` until `shutdown`.
fn replica(
    elector: LeaderElector,
    keys: &[&str],
    shutdown: &CancellationToken,
) -> (
    Journal,
    Arc<PriorityWorkQueue<ObjectKey>>,
    tokio::task::JoinHandle<()>,
) {
    let controller = Controller::<ObjectKey>::new("elected").workers(2);
    for k in keys {
        controller.queue().add(key(k));
    }
    let queue = Arc::clone(controller.queue());
    let journal = Journal::default();
    let (j, shutdown) = (journal.clone(), shutdown.clone());
    let task = tokio::spawn(async move {
        controller
            .run_elected(&elector, reconcile, j, shutdown)
            .await
            .unwrap();
    });
    (journal, queue, task)
}

#[tokio::test(start_paused = true)]
async fn only_the_leader_reconciles_and_a_standby_takes_over_with_its_queue_already_full() {
    let lease = MemoryLease::new();
    let shutdown = CancellationToken::new();
    let (a, qa, _ta) = replica(elector(&lease, "a", false), &["ns/x"], &shutdown);
    sleep(Duration::from_secs(1)).await;
    let (b, qb, _tb) = replica(elector(&lease, "b", false), &["ns/x"], &shutdown);
    sleep(Duration::from_secs(5)).await;
    assert_eq!(lease.record().unwrap().holder_identity, "a");
    assert_eq!(a.keys("reconcile"), ["ns/x"]);
    assert!(
        b.keys("reconcile").is_empty(),
        "a standby does not reconcile"
    );

    // Events keep reaching both queues; the standby's waits.
    qa.add(key("ns/y"));
    qb.add(key("ns/y"));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(a.keys("reconcile"), ["ns/x", "ns/y"]);
    assert_eq!(qb.len(), 2);

    // `a` is cut off: it stops within its renew deadline (10 s), `b` takes over after the
    // lease duration (15 s) and works through what its queue gathered.
    let cut = Instant::now();
    lease.set_fault_for("a", Fault::Unreachable);
    sleep(Duration::from_secs(30)).await;
    assert_eq!(lease.record().unwrap().holder_identity, "b");
    let mut took = b.keys("reconcile");
    took.sort();
    assert_eq!(took, ["ns/x", "ns/y"]);
    // Not before a lease duration after `a`'s last renewal, which was at most one retry
    // period (2 s) before the cut.
    let b_first = b.entries()[0].1;
    assert!(
        b_first - cut >= Duration::from_secs(13),
        "{:?}",
        b_first - cut
    );

    // From now on only `b` acts.
    qa.add(key("ns/z"));
    qb.add(key("ns/z"));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(a.keys("reconcile"), ["ns/x", "ns/y"], "a lost the lease");
    assert_eq!(b.keys("reconcile").last().map(String::as_str), Some("ns/z"));
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_cancels_reconciles_and_aborts_stuck_ones_after_the_grace_then_requeues_them()
 {
    let lease = MemoryLease::new();
    let shutdown = CancellationToken::new();
    let (a, _qa, _ta) = replica(
        elector(&lease, "a", false),
        &["slow/p", "stuck/q"],
        &shutdown,
    );
    sleep(Duration::from_secs(1)).await;
    assert_eq!(a.keys("reconcile"), ["slow/p", "stuck/q"]);

    // Renewals fail from now: leadership ends at the renew deadline (10 s after the last
    // renewal, sent at most 2 s ago).
    let cut = Instant::now();
    lease.set_fault_for("a", Fault::Unreachable);
    sleep(Duration::from_secs(11)).await;
    let entries = a.entries();
    let (_, at, what) = entries
        .iter()
        .find(|e| e.0 == "slow/p" && e.2 != "reconcile")
        .expect("the polite reconcile saw the cancellation");
    assert_eq!(
        *what, "cancelled",
        "is_leading is false once the term ended"
    );
    assert!(*at - cut <= Duration::from_secs(10), "{:?}", *at - cut);

    // The stuck one is aborted after the grace (lease 15 s - renew deadline 10 s) and its
    // key queued again: when `a` leads again, it is reconciled a second time.
    lease.set_fault_for("a", Fault::None);
    sleep(Duration::from_secs(30)).await;
    let stuck: Vec<Instant> = a
        .entries()
        .into_iter()
        .filter(|e| e.0 == "stuck/q" && e.2 == "reconcile")
        .map(|e| e.1)
        .collect();
    assert_eq!(stuck.len(), 2, "{:?}", a.entries());
    assert_eq!(lease.record().unwrap().holder_identity, "a");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_the_workers_releases_the_lease_and_shuts_the_queue_down() {
    let lease = MemoryLease::new();
    let shutdown = CancellationToken::new();
    let (a, qa, ta) = replica(elector(&lease, "a", true), &["ns/x"], &shutdown);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(a.keys("reconcile"), ["ns/x"]);
    // A key reconciled while stopping waits for the next leader, not for this drain.
    qa.add(key("slow/p"));
    sleep(Duration::from_millis(10)).await;
    shutdown.cancel();
    ta.await.unwrap();
    assert_eq!(a.keys("cancelled"), ["slow/p"]);
    assert!(qa.shutting_down());
    let record = lease.record().unwrap();
    assert!(!record.is_held(), "released: {record:?}");
}

#[tokio::test(start_paused = true)]
async fn without_election_is_leading_is_always_true() {
    let ctx = Context::new(Arc::new(()), CancellationToken::new());
    assert!(ctx.is_leading());
    ctx.cancellation().cancel();
    assert!(ctx.is_leading(), "a stopping controller still drains");
}
