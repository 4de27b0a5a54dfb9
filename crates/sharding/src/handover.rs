//! Changing the shard count of a running deployment: the marks a replica writes on the
//! Leases of the count it replaces, and which shards overlap which.
//!
//! Shard `i` of `N` and shard `j` of `M` are different ranges of the hash space, under
//! different Leases (`<name>-shard-<i>-of-<N>`), so two replicas running different counts
//! could each hold a shard containing the same key. A replica whose config lists the counts
//! it replaces ([`ShardingConfig::previous`](crate::ShardingConfig::previous)) takes one of
//! its shards only once every overlapping Lease of those counts is *handed over*: written,
//! over the version read and only while free, with a holder that names the new count
//! ([`marker`]) and the longest lease a Lease can state, so that no replica of the old
//! count takes it again. A replica that finds one of its own count's Leases handed over to
//! a count it does not replace gives up every shard it holds that shares a range of that
//! count with it, and takes none of them: the new count's replicas then find them free and
//! hand them over in turn. A replica whose config does replace that count takes the Lease
//! back instead when the handover is the older one: a Lease of the replaced count over the
//! same range was handed over to this replica's count since, or is not handed over at all
//! (a rollback under way). Otherwise it gives it up as well.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::SystemTime;

use kinformer_leaderelection::LeaderElectionRecord;
use kinformer_reflector::ShardRange;

/// The most shards a config may have (and a mark may name): a Lease per shard is renewed
/// every retry period, so more is no longer a sensible deployment.
pub(crate) const MAX_SHARDS: u32 = 4096;

/// A handed-over Lease's lease duration: the longest a Lease states, so that no holder of
/// the old count (of any version of this crate) sees it expire.
pub(crate) const FOREVER: i32 = i32::MAX;

const PREFIX: &str = "kinformer.io/handed-over-to-";
const SUFFIX: &str = "-shards";

/// The holder a Lease handed over to `count` shards names.
pub(crate) fn marker(count: u32) -> String {
    format!("{PREFIX}{count}{SUFFIX}")
}

/// The count a Lease was handed over to, and when, if its record says so.
pub(crate) fn handed_to(record: &LeaderElectionRecord) -> Option<(u32, Option<SystemTime>)> {
    let count = record
        .holder_identity
        .strip_prefix(PREFIX)?
        .strip_suffix(SUFFIX)?
        .parse::<u32>()
        .ok()
        .filter(|c| (1..=MAX_SHARDS).contains(c))?;
    Some((count, record.renew_time))
}

/// The name of Lease `index` of `count` of a kind (`shard` or `member`).
pub(crate) fn lease_name(name: &str, kind: &str, index: u32, count: u32) -> String {
    format!("{name}-{kind}-{index}-of-{count}")
}

/// Whether two ranges share a hash.
pub(crate) fn overlaps(a: ShardRange, b: ShardRange) -> bool {
    u128::from(a.start()) < b.end() && u128::from(b.start()) < a.end()
}

/// The indices of the shards of `count` that overlap `range`: a run of neighbours.
pub(crate) fn overlapping(range: ShardRange, count: u32) -> Range<u32> {
    let hits: Vec<u32> = (0..count)
        .filter(|&i| ShardRange::index_of(i, count).is_ok_and(|r| overlaps(r, range)))
        .collect();
    match (hits.first(), hits.last()) {
        (Some(&first), Some(&last)) => first..last + 1,
        _ => 0..0,
    }
}

/// The shards of `count` (`ranges`) that share a shard of `other` with shard `index`: when
/// `index` is handed over to `other`, the new count's replicas need all of them.
pub(crate) fn sharing_with(index: usize, ranges: &[ShardRange], other: u32) -> BTreeSet<usize> {
    let Some(&range) = ranges.get(index) else {
        return BTreeSet::new();
    };
    let theirs: Vec<ShardRange> = overlapping(range, other)
        .filter_map(|j| ShardRange::index_of(j, other).ok())
        .collect();
    ranges
        .iter()
        .enumerate()
        .filter(|(_, r)| theirs.iter().any(|t| overlaps(*t, **r)))
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(count: u32) -> Vec<ShardRange> {
        (0..count)
            .map(|i| ShardRange::index_of(i, count).unwrap())
            .collect()
    }

    #[test]
    fn a_mark_names_its_count_and_nothing_else_parses_as_one() {
        let mut record = LeaderElectionRecord {
            holder_identity: marker(16),
            ..LeaderElectionRecord::default()
        };
        assert_eq!(handed_to(&record), Some((16, None)));
        for holder in [
            "",
            "r0",
            "kinformer.io/handed-over-to-x-shards",
            &marker(0),
            &marker(MAX_SHARDS + 1),
        ] {
            record.holder_identity = holder.to_owned();
            assert_eq!(handed_to(&record), None, "{holder:?}");
        }
        assert_eq!(lease_name("pods", "shard", 3, 12), "pods-shard-3-of-12");
    }

    #[test]
    fn shards_of_two_counts_overlap_where_their_ranges_do_and_blocks_align() {
        // 12 → 16: a quarter of the space holds 3 of 12 and 4 of 16, and no range crosses
        // a quarter's bound (both cut 2^64 at the same multiples of 2^62).
        assert_eq!(overlapping(ranges(12)[0], 16), 0..2);
        assert_eq!(overlapping(ranges(12)[1], 16), 1..3);
        assert_eq!(overlapping(ranges(16)[3], 12), 2..3);
        assert_eq!(overlapping(ranges(16)[4], 12), 3..4);
        assert_eq!(overlapping(ranges(8)[0], 16), 0..2);
        assert_eq!(overlapping(ranges(12)[11], 7), 6..7);
        assert_eq!(sharing_with(0, &ranges(12), 16), BTreeSet::from([0, 1]));
        assert_eq!(sharing_with(4, &ranges(12), 16), BTreeSet::from([3, 4, 5]));
        assert_eq!(sharing_with(5, &ranges(16), 8), BTreeSet::from([4, 5]));
        assert_eq!(sharing_with(12, &ranges(12), 16), BTreeSet::new());
        // Every pair of counts up to 20: the shards of one count that overlap a shard of
        // the other are exactly those holding a hash of it.
        for a in 1..=20u32 {
            for b in 1..=20u32 {
                for (i, r) in ranges(a).into_iter().enumerate() {
                    let got = overlapping(r, b);
                    let first = ranges(b)
                        .iter()
                        .position(|s| s.contains(r.start()))
                        .unwrap();
                    let last_hash = u64::try_from(r.end() - 1).unwrap();
                    let last = ranges(b)
                        .iter()
                        .position(|s| s.contains(last_hash))
                        .unwrap();
                    assert_eq!(got, first as u32..last as u32 + 1, "{i} of {a} in {b}");
                }
            }
        }
    }
}
