//! [`ShardingConfig`]: how many shards, the Lease timing, how fast shards move.

use std::time::Duration;

use kinformer_leaderelection::LeaderElectionConfig;

use crate::Error;

/// A [`ShardManager`](crate::ShardManager)'s settings.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ShardingConfig {
    /// The prefix of the Lease names: `<name>-shard-<i>` and `<name>-member-<j>`.
    pub name: String,
    /// How many shards (at least 1). The same on every replica.
    pub shards: u32,
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
            timing: LeaderElectionConfig::default(),
            max_moves: 2,
            move_period: Duration::from_secs(15),
        }
    }

    /// Checks the rules: a Lease name prefix, at least one shard and one move per period,
    /// and the leader-election timing rules.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the broken rule.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.is_empty() {
            return Err(Error::InvalidConfig("the name must not be empty".into()));
        }
        if self.shards == 0 {
            return Err(Error::InvalidConfig("at least one shard".into()));
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
