//! The shard manager on in-memory leases: fair shares, moves, give-ups and cut-offs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kinformer_leaderelection::testing::{Fault, MemoryLease, MemoryLock};

use super::*;

/// The Leases of a test, by name, shared by every replica.
#[derive(Clone, Default)]
struct Leases(Arc<Mutex<HashMap<String, MemoryLease>>>);

impl Leases {
    fn lock(&self, name: &str, identity: &str) -> MemoryLock {
        let mut map = self.0.lock().unwrap();
        map.entry(name.to_owned()).or_default().lock(identity)
    }

    fn set_fault_for(&self, identity: &str, fault: Fault) {
        for lease in self.0.lock().unwrap().values() {
            lease.set_fault_for(identity, fault);
        }
    }
}

/// Who runs each shard's work now, and every time two did at once.
#[derive(Clone, Default)]
struct Owners {
    now: Arc<Mutex<HashMap<u32, String>>>,
    overlaps: Arc<Mutex<Vec<String>>>,
    /// Every (shard, replica) whose work ended.
    stopped: Arc<Mutex<Vec<(u32, String)>>>,
    /// How long a shard's work takes to stop once its token is cancelled.
    stop_delay: Duration,
}

struct Replica {
    manager: Arc<ShardManager<MemoryLock>>,
    stop: CancellationToken,
    run: JoinHandle<Result<(), Error>>,
}

fn config(shards: u32) -> ShardingConfig {
    let mut config = ShardingConfig::new("ctl", shards);
    config.max_moves = 1;
    config.move_period = Duration::from_secs(4);
    config
}

fn start(leases: &Leases, owners: &Owners, id: &str, config: ShardingConfig) -> Replica {
    let leases = leases.clone();
    let me = id.to_owned();
    let manager = Arc::new(ShardManager::new(config, move |name| leases.lock(name, &me)).unwrap());
    let stop = CancellationToken::new();
    let (m, s, owners, id) = (
        Arc::clone(&manager),
        stop.clone(),
        owners.clone(),
        id.to_owned(),
    );
    let run = tokio::spawn(async move {
        m.run(&s, move |shard: Shard| {
            let (owners, id) = (owners.clone(), id.clone());
            async move {
                if let Some(other) = owners.now.lock().unwrap().insert(shard.index(), id.clone()) {
                    owners.overlaps.lock().unwrap().push(format!(
                        "shard {} started by {id} while {other} ran it",
                        shard.index()
                    ));
                }
                shard.token().cancelled().await;
                tokio::time::sleep(owners.stop_delay).await;
                owners.now.lock().unwrap().remove(&shard.index());
                owners.stopped.lock().unwrap().push((shard.index(), id));
            }
        })
        .await
    });
    Replica { manager, stop, run }
}

fn held(replicas: &[&Replica]) -> Vec<Vec<u32>> {
    replicas.iter().map(|r| r.manager.held()).collect()
}

/// Every shard held by exactly one of `replicas`, `share` each.
fn balanced(replicas: &[&Replica], shards: u32, share: &[usize]) -> bool {
    let held = held(replicas);
    let mut all: Vec<u32> = held.iter().flatten().copied().collect();
    all.sort_unstable();
    let mut sizes: Vec<usize> = held.iter().map(Vec::len).collect();
    sizes.sort_unstable();
    all == (0..shards).collect::<Vec<_>>() && sizes == share
}

/// Advances the paused clock until `cond`, at most `limit`; how long it took.
async fn within(limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

#[test]
fn the_fair_share_is_the_ceiling_of_shards_over_live_replicas() {
    let c = config(12);
    assert_eq!(c.fair_share(0), 12);
    assert_eq!(c.fair_share(1), 12);
    assert_eq!(c.fair_share(3), 4);
    assert_eq!(c.fair_share(5), 3);
    assert_eq!(c.fair_share(13), 1);
    assert!(ShardingConfig::new("x", 0).validate().is_err());
    assert!(ShardingConfig::new("", 3).validate().is_err());
    let mut bad = config(3);
    bad.max_moves = 0;
    assert!(bad.validate().is_err());
    bad = config(3);
    bad.timing.renew_deadline = bad.timing.lease_duration;
    assert!(bad.validate().is_err());
}

#[tokio::test]
async fn locks_of_different_identities_are_refused() {
    let leases = Leases::default();
    let n = std::sync::atomic::AtomicU32::new(0);
    let mixed = ShardManager::new(config(2), |name| {
        let id = format!("r{}", n.fetch_add(1, Ordering::Relaxed));
        leases.lock(name, &id)
    });
    assert!(matches!(mixed, Err(Error::Identity(..))));
    let empty = ShardManager::new(config(2), |name| leases.lock(name, ""));
    assert!(matches!(empty, Err(Error::Identity(..))));
}

#[tokio::test(start_paused = true)]
async fn replicas_started_together_split_the_shards_fairly_without_moves() {
    let (leases, owners) = (Leases::default(), Owners::default());
    let r: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|id| start(&leases, &owners, id, config(12)))
        .collect();
    let all: Vec<&Replica> = r.iter().collect();
    within(Duration::from_secs(10), || balanced(&all, 12, &[4, 4, 4])).await;
    // Stable: nothing moves afterwards.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(balanced(&all, 12, &[4, 4, 4]), "{:?}", held(&all));
    assert!(r.iter().all(|x| x.manager.live_replicas() == 3));
    assert_eq!(r.iter().map(|x| x.manager.moves()).sum::<u64>(), 0);
    assert_eq!(owners.now.lock().unwrap().len(), 12);
    for x in r {
        x.stop.cancel();
        x.run.await.unwrap().unwrap();
    }
    assert!(
        owners.now.lock().unwrap().is_empty(),
        "work stopped on shutdown"
    );
    assert!(owners.overlaps.lock().unwrap().is_empty());
    // Everything released.
    for lease in leases.0.lock().unwrap().values() {
        assert!(lease.record().is_none_or(|r| !r.is_held()));
    }
}

#[tokio::test(start_paused = true)]
async fn a_joining_replica_gets_its_share_within_the_move_limit_and_a_leaving_ones_is_taken() {
    let (leases, owners) = (Leases::default(), Owners::default());
    let a = start(&leases, &owners, "a", config(12));
    let b = start(&leases, &owners, "b", config(12));
    within(Duration::from_secs(10), || balanced(&[&a, &b], 12, &[6, 6])).await;

    // c joins: a and b each give up 2, one per move period (4 s) at most.
    let c = start(&leases, &owners, "c", config(12));
    let took = within(Duration::from_secs(30), || {
        balanced(&[&a, &b, &c], 12, &[4, 4, 4])
    })
    .await;
    assert!(
        took >= Duration::from_secs(4),
        "two moves each need two periods: {took:?}"
    );
    assert_eq!(
        (a.manager.moves(), b.manager.moves(), c.manager.moves()),
        (2, 2, 0)
    );

    // c leaves (releasing): a and b take its shards at once, without moves.
    c.stop.cancel();
    c.run.await.unwrap().unwrap();
    within(Duration::from_secs(20), || balanced(&[&a, &b], 12, &[6, 6])).await;
    assert_eq!(a.manager.moves() + b.manager.moves(), 4);
    assert!(
        owners.overlaps.lock().unwrap().is_empty(),
        "{:?}",
        owners.overlaps
    );
    for x in [a, b] {
        x.stop.cancel();
        x.run.await.unwrap().unwrap();
    }
}

#[cfg(feature = "prometheus")]
#[tokio::test(start_paused = true)]
async fn a_registered_manager_reports_its_shards_replicas_and_moves_at_each_scrape() {
    let (leases, owners) = (Leases::default(), Owners::default());
    let mut config = config(4);
    config.name = "metrics-ctl".to_owned();
    let a = start(&leases, &owners, "a", config.clone());
    within(Duration::from_secs(10), || a.manager.held().len() == 4).await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(a.manager.metrics()));
    let labels = r#"{manager="metrics-ctl",identity="a"}"#;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(&format!("kinformer_shards_held{labels} 4")),
        "{text}"
    );
    assert!(
        text.contains(&format!("kinformer_shards_live_replicas{labels} 1")),
        "{text}"
    );
    assert!(
        text.contains(&format!("kinformer_shard_moves_total{labels} 0")),
        "{text}"
    );
    // b joins: a gives up two shards, and the next scrape says so.
    let b = start(&leases, &owners, "b", config);
    within(Duration::from_secs(20), || balanced(&[&a, &b], 4, &[2, 2])).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(&format!("kinformer_shards_held{labels} 2")),
        "{text}"
    );
    assert!(
        text.contains(&format!("kinformer_shards_live_replicas{labels} 2")),
        "{text}"
    );
    assert!(
        text.contains(&format!("kinformer_shard_moves_total{labels} 2")),
        "{text}"
    );
    for x in [a, b] {
        x.stop.cancel();
        x.run.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_run_stops_every_shards_work_and_the_manager_can_run_again() {
    let (leases, owners) = (Leases::default(), Owners::default());
    let a = start(&leases, &owners, "a", config(4));
    within(Duration::from_secs(10), || a.manager.held().len() == 4).await;
    a.run.abort();
    let _ = a.run.await;
    within(Duration::from_secs(1), || {
        owners.now.lock().unwrap().is_empty()
    })
    .await;
    // Nothing released: the Leases still name a until they expire.
    let held_by_a = leases
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, l)| {
            name.contains("-shard-") && l.record().is_some_and(|r| r.holder_identity == "a")
        })
        .count();
    assert_eq!(held_by_a, 4);
    // The same manager runs again, and takes its own Leases back at once.
    let (m, stop) = (Arc::clone(&a.manager), CancellationToken::new());
    let again = tokio::spawn({
        let stop = stop.clone();
        async move {
            m.run(&stop, |shard: Shard| async move {
                shard.token().cancelled().await
            })
            .await
        }
    });
    within(Duration::from_secs(3), || a.manager.held().len() == 4).await;
    stop.cancel();
    again.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shards_given_up_together_wait_out_their_work_together_and_the_rest_stay_held() {
    // Work takes 4 s to stop (within the 5 s grace); a gives up 6 shards in one retry.
    // One after the other that would be 24 s without renewing the 6 it keeps, past their
    // 10 s renew deadline.
    let leases = Leases::default();
    let owners = Owners {
        stop_delay: Duration::from_secs(4),
        ..Owners::default()
    };
    let mut config = config(12);
    config.max_moves = 6;
    let a = start(&leases, &owners, "a", config.clone());
    within(Duration::from_secs(10), || a.manager.held().len() == 12).await;
    let b = start(&leases, &owners, "b", config);
    within(Duration::from_secs(20), || balanced(&[&a, &b], 12, &[6, 6])).await;
    let kept = a.manager.held();
    let stopped = owners.stopped.lock().unwrap().clone();
    assert_eq!(stopped.len(), 6, "{stopped:?}");
    assert!(
        stopped.iter().all(|(i, id)| id == "a" && !kept.contains(i)),
        "only the shards given up stopped: {stopped:?}, kept {kept:?}"
    );
    assert_eq!(a.manager.moves(), 6);
    assert!(
        owners.overlaps.lock().unwrap().is_empty(),
        "{:?}",
        owners.overlaps
    );
    for x in [a, b] {
        x.stop.cancel();
        x.run.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_replica_stops_its_work_at_the_renew_deadline_before_others_take_over() {
    let (leases, owners) = (Leases::default(), Owners::default());
    let a = start(&leases, &owners, "a", config(6));
    let b = start(&leases, &owners, "b", config(6));
    within(Duration::from_secs(10), || balanced(&[&a, &b], 6, &[3, 3])).await;
    let b_shards = b.manager.held();

    // b's requests hang: its terms end at the renew deadline (10 s); a takes the shards
    // once it saw them unchanged for the lease duration (15 s), never before b stopped.
    leases.set_fault_for("b", Fault::Hang);
    let cut = Instant::now();
    within(Duration::from_secs(12), || {
        let now = owners.now.lock().unwrap();
        b_shards.iter().all(|i| !now.contains_key(i))
    })
    .await;
    assert!(
        cut.elapsed() >= Duration::from_secs(8),
        "{:?}",
        cut.elapsed()
    );
    within(Duration::from_secs(25), || a.manager.held().len() == 6).await;
    assert!(cut.elapsed() >= Duration::from_secs(15));
    assert!(
        owners.overlaps.lock().unwrap().is_empty(),
        "{:?}",
        owners.overlaps
    );

    // b comes back: it gets its share again, by moves from a.
    leases.set_fault_for("b", Fault::None);
    within(Duration::from_secs(30), || balanced(&[&a, &b], 6, &[3, 3])).await;
    assert!(
        owners.overlaps.lock().unwrap().is_empty(),
        "{:?}",
        owners.overlaps
    );
    for x in [a, b] {
        x.stop.cancel();
        x.run.await.unwrap().unwrap();
    }
}

/// Whether `selection` selects the whole range of shard `index` of `count`.
fn selects(selection: &ShardSelection, index: u32, count: u32) -> bool {
    let range = ShardRange::index_of(index, count).unwrap();
    selection.get().is_some_and(|s| {
        s.range_list()
            .iter()
            .any(|r| r.start() <= range.start() && range.end() <= r.end())
    })
}

#[tokio::test(start_paused = true)]
async fn the_selection_holds_a_shard_from_before_its_work_starts_until_after_it_ends() {
    let leases = Leases::default();
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let replica = |id: &'static str| {
        let leases = leases.clone();
        let manager =
            Arc::new(ShardManager::new(config(4), move |name| leases.lock(name, id)).unwrap());
        let selection = manager.selection(ShardKey::Uid);
        assert_eq!(selection.get(), None, "nothing held, nothing selected");
        let (m, stop, violations) = (
            Arc::clone(&manager),
            CancellationToken::new(),
            Arc::clone(&violations),
        );
        let s = stop.clone();
        let run = tokio::spawn(async move {
            m.run(&s, move |shard: Shard| {
                let (selection, violations) = (selection.clone(), Arc::clone(&violations));
                async move {
                    let (i, n) = (shard.index(), shard.count());
                    if !selects(&selection, i, n) {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("{id}: {i} started unselected"));
                    }
                    shard.token().cancelled().await;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    if !selects(&selection, i, n) {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("{id}: {i} unselected while its work ran"));
                    }
                }
            })
            .await
        });
        (manager, stop, run)
    };
    let a = replica("a");
    within(Duration::from_secs(10), || a.0.held().len() == 4).await;
    assert_eq!(
        a.0.selection(ShardKey::Uid).generation(),
        1,
        "four shards taken in one retry are one change (one relist), not four"
    );
    let b = replica("b");
    within(Duration::from_secs(60), || {
        a.0.held().len() == 2 && b.0.held().len() == 2
    })
    .await;
    // Each replica's selection is the union of what it holds, and nothing more.
    let settle = Duration::from_secs(1);
    tokio::time::sleep(settle).await;
    for (m, _, _) in [&a, &b] {
        let selection = m.selection(ShardKey::Uid);
        for i in 0..4 {
            assert_eq!(
                selects(&selection, i, 4),
                m.held().contains(&i),
                "shard {i}"
            );
        }
    }
    // Shutdown: the shards' work ends, then nothing is selected; the other replica takes
    // them all.
    let before = a.0.selection(ShardKey::Uid).generation();
    a.1.cancel();
    a.2.await.unwrap().unwrap();
    assert_eq!(a.0.selection(ShardKey::Uid).get(), None);
    assert_eq!(
        a.0.selection(ShardKey::Uid).generation(),
        before + 1,
        "the two shards given up at shutdown are one change"
    );
    within(Duration::from_secs(60), || b.0.held().len() == 4).await;
    tokio::time::sleep(settle).await;
    assert!((0..4).all(|i| selects(&b.0.selection(ShardKey::Uid), i, 4)));
    b.1.cancel();
    b.2.await.unwrap().unwrap();
    assert_eq!(*violations.lock().unwrap(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn status_shows_every_shard_and_membership_lease_with_its_holder() {
    let (leases, owners) = (Leases::default(), Owners::default());
    let a = start(&leases, &owners, "a", config(4));
    let b = start(&leases, &owners, "b", config(4));
    within(Duration::from_secs(10), || balanced(&[&a, &b], 4, &[2, 2])).await;
    // One more retry, so that the status of both shows the other's shards.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let status = a.manager.status();
    assert_eq!(
        (status.name.as_str(), status.identity.as_str()),
        ("ctl", "a")
    );
    assert_eq!(
        (status.shard_count, status.live_replicas, status.moves),
        (4, 2, 0)
    );
    assert_eq!(status.held, a.manager.held());
    assert_eq!(status.held.len(), 2);
    assert_eq!(
        status
            .shards
            .iter()
            .map(|l| l.name.as_str())
            .collect::<Vec<_>>(),
        [
            "ctl-shard-0-of-4",
            "ctl-shard-1-of-4",
            "ctl-shard-2-of-4",
            "ctl-shard-3-of-4"
        ]
    );
    for (i, lease) in (0..).zip(&status.shards) {
        let mine = status.held.contains(&i);
        let holder = if mine { "a" } else { "b" };
        assert_eq!(lease.holder.as_deref(), Some(holder), "shard {i}");
        assert_eq!((lease.held, lease.is_me), (mine, mine), "shard {i}");
        assert_eq!(lease.lease_duration, Some(Duration::from_secs(15)));
        assert!(lease.renew_time.is_some());
        let expires_in = lease.expires_in.unwrap();
        assert!(
            expires_in > Duration::from_secs(10) && expires_in <= Duration::from_secs(15),
            "renewed or read within a retry period: {expires_in:?}"
        );
    }
    let members: Vec<_> = status
        .members
        .iter()
        .filter_map(|l| l.holder.as_deref())
        .collect();
    assert_eq!(members.len(), 2, "{:?}", status.members);
    assert!(members.contains(&"a") && members.contains(&"b"));
    assert_eq!(
        status.members.iter().filter(|l| l.held).count(),
        1,
        "a's own"
    );

    a.stop.cancel();
    a.run.await.unwrap().unwrap();
    let stopped = a.manager.status();
    assert!(stopped.held.is_empty() && stopped.shards.is_empty() && stopped.members.is_empty());
    b.stop.cancel();
    b.run.await.unwrap().unwrap();
}

/// A shard's work running: the replica, the shard's count and index, its range.
type RunningShard = (String, u32, u32, ShardRange);

/// The ranges whose work runs now, by replica, and every time two replicas ran
/// overlapping ranges at once.
#[derive(Clone, Default)]
struct Coverage {
    running: Arc<Mutex<Vec<RunningShard>>>,
    overlaps: Arc<Mutex<Vec<String>>>,
}

impl Coverage {
    fn start(&self, leases: &Leases, id: &str, config: ShardingConfig) -> Replica {
        let leases = leases.clone();
        let me = id.to_owned();
        let manager =
            Arc::new(ShardManager::new(config, move |name| leases.lock(name, &me)).unwrap());
        let stop = CancellationToken::new();
        let (m, s, coverage, id) = (
            Arc::clone(&manager),
            stop.clone(),
            self.clone(),
            id.to_owned(),
        );
        let run = tokio::spawn(async move {
            m.run(&s, move |shard: Shard| {
                let (coverage, id) = (coverage.clone(), id.clone());
                async move {
                    let range = shard.selector(ShardKey::Uid).range_list()[0];
                    let me = (id.clone(), shard.count(), shard.index(), range);
                    {
                        let mut running = coverage.running.lock().unwrap();
                        for (other, count, index, r) in running.iter() {
                            if *other != id && crate::handover::overlaps(*r, range) {
                                coverage.overlaps.lock().unwrap().push(format!(
                                    "{id} started shard {} of {} while {other} ran {index} of {count}",
                                    shard.index(),
                                    shard.count()
                                ));
                            }
                        }
                        running.push(me.clone());
                    }
                    shard.token().cancelled().await;
                    // Reconciles in flight drain.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    coverage.running.lock().unwrap().retain(|r| *r != me);
                }
            })
            .await
        });
        Replica { manager, stop, run }
    }

    /// Samples the 48 cells every 12, 16 and 8 shards are made of every 100 ms until
    /// `stop`, and returns the longest time one had nobody running it.
    fn watch_gaps(&self, stop: CancellationToken) -> JoinHandle<Duration> {
        let running = Arc::clone(&self.running);
        tokio::spawn(async move {
            let cells: Vec<u64> = (0..48u32)
                .map(|k| ShardRange::index_of(k, 48).unwrap().start())
                .collect();
            let mut uncovered_since: Vec<Option<Instant>> = vec![None; cells.len()];
            let mut longest = Duration::ZERO;
            while !stop.is_cancelled() {
                let now = Instant::now();
                let running = running.lock().unwrap().clone();
                for (cell, since) in cells.iter().zip(&mut uncovered_since) {
                    if running.iter().any(|r| r.3.contains(*cell)) {
                        if let Some(t) = since.take() {
                            longest = longest.max(now - t);
                        }
                    } else {
                        since.get_or_insert(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            longest
        })
    }
}

/// The shards `replicas` hold together, sorted.
fn all_held(replicas: &[Replica]) -> Vec<u32> {
    let mut all: Vec<u32> = replicas.iter().flat_map(|r| r.manager.held()).collect();
    all.sort_unstable();
    all
}

/// Replaces each of `old` in turn by a replica running `config`: starts the new one, and
/// a few retries later stops the old one as a rolling update does (shutdown releases its
/// Leases). Slowly, 30 s apart: the old replicas still running must give up what the new
/// count needs, not leave it unowned until they stop.
async fn roll(
    leases: &Leases,
    coverage: &Coverage,
    old: Vec<Replica>,
    prefix: &str,
    config: &ShardingConfig,
) -> Vec<Replica> {
    let mut new = Vec::new();
    for (i, old) in old.into_iter().enumerate() {
        new.push(coverage.start(leases, &format!("{prefix}{i}"), config.clone()));
        tokio::time::sleep(Duration::from_secs(6)).await;
        old.stop.cancel();
        old.run.await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_secs(24)).await;
    }
    new
}

#[tokio::test(start_paused = true)]
async fn a_shard_count_rolled_out_replica_by_replica_never_overlaps_and_leaves_no_key_long_unowned()
{
    let (leases, coverage) = (Leases::default(), Coverage::default());
    let watching = CancellationToken::new();
    let gaps = coverage.watch_gaps(watching.clone());
    let twelve: Vec<Replica> = (0..3)
        .map(|i| coverage.start(&leases, &format!("a{i}"), config(12)))
        .collect();
    within(Duration::from_secs(30), || {
        all_held(&twelve) == (0..12).collect::<Vec<_>>()
    })
    .await;

    // 12 → 16: the new replicas hand over the Leases of 12 they need as they come free;
    // the old ones give up the shards next to a handed-over one.
    let sixteen = roll(&leases, &coverage, twelve, "b", &config(16).replacing([12])).await;
    within(Duration::from_secs(60), || {
        all_held(&sixteen) == (0..16).collect::<Vec<_>>()
    })
    .await;
    // 16 → 8, with the Leases of 12 still handed over to 16.
    let eight = roll(&leases, &coverage, sixteen, "c", &config(8).replacing([16])).await;
    within(Duration::from_secs(60), || {
        balanced(&eight.iter().collect::<Vec<_>>(), 8, &[2, 3, 3])
    })
    .await;
    let status = eight[0].manager.status();
    assert!(status.handed_over.is_empty(), "{status:?}");

    watching.cancel();
    let longest = gaps.await.unwrap();
    assert!(
        coverage.overlaps.lock().unwrap().is_empty(),
        "{:#?}",
        coverage.overlaps.lock().unwrap()
    );
    // No key without a running shard for longer than one lease duration (15 s).
    assert!(
        longest <= Duration::from_secs(15),
        "a key went unowned for {longest:?}"
    );
    for r in eight {
        r.stop.cancel();
        r.run.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_rollout_back_to_a_count_handed_over_before_takes_its_leases_back() {
    let (leases, coverage) = (Leases::default(), Coverage::default());
    let twelve: Vec<Replica> = (0..2)
        .map(|i| coverage.start(&leases, &format!("a{i}"), config(12)))
        .collect();
    within(Duration::from_secs(30), || all_held(&twelve).len() == 12).await;
    let sixteen = roll(&leases, &coverage, twelve, "b", &config(16).replacing([12])).await;
    within(Duration::from_secs(60), || all_held(&sixteen).len() == 16).await;
    // The replicas of 16 list 12 as replaced, and those of 12 now list 16: the newer
    // handover decides, and nobody takes back what it handed over.
    let back = roll(
        &leases,
        &coverage,
        sixteen,
        "c",
        &config(12).replacing([16]),
    )
    .await;
    within(Duration::from_secs(60), || {
        balanced(&back.iter().collect::<Vec<_>>(), 12, &[6, 6])
    })
    .await;
    assert!(
        coverage.overlaps.lock().unwrap().is_empty(),
        "{:#?}",
        coverage.overlaps.lock().unwrap()
    );
    for r in back {
        r.stop.cancel();
        r.run.await.unwrap().unwrap();
    }
}
