//! [`ShardingConfig`]: how many shards, the Lease timing, how fast shards move.

use std::time::Duration;

use kinformer_leaderelection::LeaderElectionConfig;

use crate::Error;
use crate::handover::MAX_SHARDS;

/// A [`ShardManager`](crate::ShardManager)'s settings.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ShardingConfig {
    /// The prefix of the Lease names: `<name>-shard-<i>-of-<shards>` and
    /// `<name>-member-<j>-of-<shards>`.
    pub name: String,
    /// How many shards (1 to 4096). The same on every replica, except while a new count
    /// rolls out over the old one (see [`previous`](Self::previous)).
    pub shards: u32,
    /// The shard counts this config replaces, while replicas running them may still be up:
    /// a new count rolled out replica by replica lists the old one here. Before taking a
    /// shard, a replica hands over every overlapping Lease of these counts (once it is
    /// free), and replicas of an old count give up the shards that overlap a handed-over
    /// one; no key is then reconciled by two replicas at once across the two counts. Empty
    /// by default; once no replica of an old count runs, dropping it saves a read of each
    /// of its Leases per retry. One change at a time: roll out the next count once the
    /// last rollout has ended. See the [crate docs](crate#changing-the-shard-count).
    pub previous: Vec<u32>,
    /// Lease duration, renew deadline and retry period, as for leader election (client-go's
    /// 15 s, 10 s and 2 s by default), validated by the same rules. Its `name`,
    /// `release_on_cancel` (always on here) and `request_timeout` are not used; every Lease
    /// request is bounded by the retry period.
    pub timing: LeaderElectionConfig,
    /// How many shards a replica gives up to re-balance, at most, per
    /// [`move_period`](Self::move_period) (at least 1). Shards of a replica that died are
    /// not moves: they are taken as soon as they expire.
    pub max_moves: u32,
    /// The window of [`max_moves`](Self::max_moves).
    pub move_period: Duration,
}

impl ShardingConfig {
    /// `shards` shards under Leases named after `name`, client-go's leader-election timing,
    /// and at most 2 shards given up per lease duration (15 s).
    pub fn new(name: impl Into<String>, shards: u32) -> Self {
        Self {
            name: name.into(),
            shards,
            previous: Vec::new(),
            timing: LeaderElectionConfig::default(),
            max_moves: 2,
            move_period: Duration::from_secs(15),
        }
    }

    /// `self`, replacing the shard counts `counts` (see [`previous`](Self::previous)).
    #[must_use]
    pub fn replacing(mut self, counts: impl IntoIterator<Item = u32>) -> Self {
        self.previous = counts.into_iter().collect();
        self
    }

    /// Checks the rules: a Lease name prefix, 1 to 4096 shards, previous counts in the same
    /// bounds and other than this one, at least one move per period, and the
    /// leader-election timing rules.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the broken rule.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.is_empty() {
            return Err(Error::InvalidConfig("the name must not be empty".into()));
        }
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(Error::InvalidConfig(format!(
                "{} shards: from 1 to {MAX_SHARDS}",
                self.shards
            )));
        }
        if let Some(bad) = self
            .previous
            .iter()
            .find(|&&p| p == self.shards || !(1..=MAX_SHARDS).contains(&p))
        {
            return Err(Error::InvalidConfig(format!(
                "a previous shard count of {bad}: from 1 to {MAX_SHARDS}, and not this config's"
            )));
        }
        if self.max_moves == 0 || self.move_period.is_zero() {
            return Err(Error::InvalidConfig(
                "at least one move per non-zero move period".into(),
            ));
        }
        self.timing
            .validate()
            .map_err(|e| Error::InvalidConfig(e.to_string()))
    }

    /// The fair share of `live` replicas: `ceil(shards / live)` (all of them for none).
    pub fn fair_share(&self, live: usize) -> usize {
        let shards = self.shards as usize;
        shards.div_ceil(live.max(1))
    }

    /// The grace reconciles in flight get when a shard is lost, as under leader election:
    /// the lease duration minus the renew deadline, the time until another replica may
    /// take the shard.
    pub fn grace(&self) -> Duration {
        self.timing
            .lease_duration
            .saturating_sub(self.timing.renew_deadline)
    }
}
