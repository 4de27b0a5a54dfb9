//! The faults: a seeded schedule (which fault, how long, the quiet gap before it) and
//! injecting one on the control plane and the proxy the subjects connect through.

use std::time::Duration;

use kinformer_testenv::{ApiProxy, ControlPlane};

use super::unix_nanos;

/// The kinds of fault, in the order tables show them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Kind {
    /// The subjects' connections cut, then restored.
    Partition,
    /// The same, with etcd compacted before the heal: their resourceVersion may be gone.
    PartitionCompact,
    /// The API server killed and started again (maybe with the watch cache switched).
    Restart,
    /// etcd compacted, nothing else.
    Compact,
    /// The subject that keeps its cache on disk killed (SIGKILL) and started again from its
    /// snapshot.
    SubjectKill,
}

impl Kind {
    pub(super) const ALL: [Self; 5] = [
        Self::Partition,
        Self::PartitionCompact,
        Self::Restart,
        Self::Compact,
        Self::SubjectKill,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Partition => "partition",
            Self::PartitionCompact => "partition + compaction",
            Self::Restart => "API server restart",
            Self::Compact => "etcd compaction",
            Self::SubjectKill => "subject killed, restarted from its snapshot",
        }
    }
}

/// One planned fault.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Plan {
    pub(super) kind: Kind,
    /// The quiet time before it.
    pub(super) gap: Duration,
    /// How long the partition lasts, or the API server stays down; zero for a compaction.
    pub(super) hold: Duration,
    /// For a restart: whether the API server comes back with its watch cache on.
    pub(super) watch_cache: bool,
}

/// Fault plans from a seeded RNG: every kind once per round, in a random order, so even
/// a short run sees each kind.
pub(super) struct Schedule {
    rng: fastrand::Rng,
    round: Vec<Kind>,
    gap: (Duration, Duration),
}

impl Schedule {
    /// `gap`: the range of the quiet time before each fault.
    pub(super) fn new(seed: u64, gap: (Duration, Duration)) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            round: Vec::new(),
            gap,
        }
    }

    /// The next fault; `watch_cache` is whether the API server runs its cache now.
    pub(super) fn next(&mut self, watch_cache: bool) -> Plan {
        if self.round.is_empty() {
            self.round = Kind::ALL.to_vec();
            self.rng.shuffle(&mut self.round);
        }
        let kind = self.round.pop().unwrap_or(Kind::Partition);
        let gap = self.between(self.gap.0, self.gap.1);
        let hold = match kind {
            Kind::Partition | Kind::PartitionCompact => {
                self.between(Duration::from_secs(2), Duration::from_secs(10))
            }
            Kind::Restart => self.between(Duration::from_secs(1), Duration::from_secs(5)),
            Kind::SubjectKill => self.between(Duration::ZERO, Duration::from_secs(3)),
            Kind::Compact => Duration::ZERO,
        };
        // Half the restarts switch the cache, so a run serves watches both from the cache
        // and from etcd (where a compaction means 410 Gone).
        let switch = kind == Kind::Restart && self.rng.bool();
        Plan {
            kind,
            gap,
            hold,
            watch_cache: watch_cache != switch,
        }
    }

    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (lo, hi) = (millis(lo), millis(hi).max(millis(lo)));
        Duration::from_millis(self.rng.u64(lo..=hi))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A fault as it happened.
#[derive(Clone, Debug)]
pub(super) struct Fault {
    pub(super) plan: Plan,
    /// When it began (the cut, the kill, the compaction).
    pub(super) start_ns: u64,
    /// When it was over (the heal; the restarted API server ready; the compaction done).
    pub(super) heal_ns: u64,
    /// Whether the API server ran its watch cache after the fault.
    pub(super) watch_cache_after: bool,
    /// The revision etcd was compacted to, if it was.
    pub(super) compacted: Option<i64>,
}

/// Injects `plan` and returns when it is healed. A [`Kind::SubjectKill`] is the caller's to
/// inject (it holds the subjects).
pub(super) async fn inject(
    cp: &ControlPlane,
    proxy: &ApiProxy,
    plan: Plan,
) -> anyhow::Result<Fault> {
    let start_ns = unix_nanos();
    let mut compacted = None;
    match plan.kind {
        Kind::Partition | Kind::PartitionCompact => {
            proxy.partition();
            tokio::time::sleep(plan.hold).await;
            if plan.kind == Kind::PartitionCompact {
                compacted = Some(cp.compact_etcd().await?);
            }
            proxy.heal();
        }
        Kind::Restart => {
            cp.stop_apiserver()?;
            tokio::time::sleep(plan.hold).await;
            cp.start_apiserver_with_watch_cache(plan.watch_cache)
                .await?;
        }
        Kind::Compact => compacted = Some(cp.compact_etcd().await?),
        Kind::SubjectKill => anyhow::bail!("a subject is killed by the caller, which holds it"),
    }
    Ok(Fault {
        plan,
        start_ns,
        heal_ns: unix_nanos(),
        watch_cache_after: cp.watch_cache(),
        compacted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: (Duration, Duration) = (Duration::from_secs(3), Duration::from_secs(6));

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        let plans = |seed| {
            let mut s = Schedule::new(seed, GAP);
            (0..12).map(|_| s.next(true)).collect::<Vec<_>>()
        };
        assert_eq!(plans(7), plans(7));
        assert_ne!(plans(7), plans(8));
    }

    #[test]
    fn every_round_has_each_kind_once_and_holds_stay_in_range() {
        let mut s = Schedule::new(42, GAP);
        let mut cache = true;
        let mut switched = 0;
        for _ in 0..25 {
            let mut kinds: Vec<Kind> = (0..Kind::ALL.len())
                .map(|_| {
                    let p = s.next(cache);
                    assert!(p.gap >= GAP.0 && p.gap <= GAP.1, "{p:?}");
                    match p.kind {
                        Kind::Partition | Kind::PartitionCompact => assert!(
                            p.hold >= Duration::from_secs(2) && p.hold <= Duration::from_secs(10)
                        ),
                        Kind::Restart => {
                            assert!(
                                p.hold >= Duration::from_secs(1)
                                    && p.hold <= Duration::from_secs(5)
                            );
                            if p.watch_cache != cache {
                                switched += 1;
                            }
                            cache = p.watch_cache;
                        }
                        Kind::Compact => assert_eq!(p.hold, Duration::ZERO),
                        Kind::SubjectKill => assert!(p.hold <= Duration::from_secs(3)),
                    }
                    if p.kind != Kind::Restart {
                        assert_eq!(p.watch_cache, cache, "only restarts switch the cache");
                    }
                    p.kind
                })
                .collect();
            kinds.sort();
            assert_eq!(kinds, Kind::ALL);
        }
        assert!(
            switched > 3 && switched < 22,
            "about half the restarts switch the cache: {switched} of 25"
        );
    }
}
