//! The selections of the objects of the shards this replica holds: what one informer per
//! replica reads instead of one informer per held shard.

use std::collections::BTreeSet;

use kinformer_reflector::{ShardKey, ShardRange, ShardSelection, ShardSelector};

/// The shards whose objects are selected, and the selections that follow them (one per
/// shard key asked for).
#[derive(Default)]
pub(crate) struct Selections {
    held: BTreeSet<u32>,
    by_key: Vec<(ShardKey, ShardSelection)>,
}

impl Selections {
    /// The selection by `key`, made on first use.
    pub(crate) fn get(&mut self, key: ShardKey, ranges: &[ShardRange]) -> ShardSelection {
        if let Some((_, selection)) = self.by_key.iter().find(|(k, _)| *k == key) {
            return selection.clone();
        }
        let selection = ShardSelection::new(selector(key, &self.held, ranges));
        self.by_key.push((key, selection.clone()));
        selection
    }

    /// Selects the objects of the shards `indices` (`held`), or no longer; every selection
    /// follows, in one change (one list at most) however many shards change.
    pub(crate) fn set(
        &mut self,
        indices: impl IntoIterator<Item = u32>,
        held: bool,
        ranges: &[ShardRange],
    ) {
        let mut changed = false;
        for index in indices {
            changed |= if held {
                self.held.insert(index)
            } else {
                self.held.remove(&index)
            };
        }
        if changed {
            for (key, selection) in &self.by_key {
                selection.set(selector(*key, &self.held, ranges));
            }
        }
    }

    /// Selects nothing.
    pub(crate) fn clear(&mut self) {
        self.held.clear();
        for (_, selection) in &self.by_key {
            selection.set(None);
        }
    }
}

/// The selector of the `held` shards' objects by `key`, neighbouring ranges merged (shards
/// 3 and 4 of 12 are one range): `None` for none.
fn selector(key: ShardKey, held: &BTreeSet<u32>, ranges: &[ShardRange]) -> Option<ShardSelector> {
    let mut merged: Vec<ShardRange> = Vec::new();
    for range in held.iter().filter_map(|&i| ranges.get(i as usize)) {
        match merged.last_mut() {
            Some(last) if last.end() == u128::from(range.start()) => {
                // Both bounds come from valid ranges: the union is one.
                if let Ok(joined) = ShardRange::new(last.start(), range.end()) {
                    *last = joined;
                }
            }
            _ => merged.push(*range),
        }
    }
    ShardSelector::ranges(key, merged).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(n: u32) -> Vec<ShardRange> {
        (0..n)
            .map(|i| ShardRange::index_of(i, n).unwrap())
            .collect()
    }

    #[test]
    fn the_selection_is_the_union_of_the_held_shards_with_neighbours_merged() {
        let ranges = ranges(12);
        let mut selections = Selections::default();
        let by_uid = selections.get(ShardKey::Uid, &ranges);
        assert_eq!(by_uid.get(), None);
        let generation = by_uid.generation();
        selections.set([3, 4, 9], true, &ranges);
        assert_eq!(
            by_uid.generation(),
            generation + 1,
            "three shards, one change"
        );
        let want = ShardSelector::ranges(
            ShardKey::Uid,
            [
                ShardRange::new(ranges[3].start(), ranges[4].end()).unwrap(),
                ranges[9],
            ],
        )
        .unwrap();
        assert_eq!(by_uid.get(), Some(want));
        // A selection asked for later starts from what is held.
        let by_namespace = selections.get(ShardKey::Namespace, &ranges);
        assert_eq!(by_namespace.get().unwrap().range_list().len(), 2);
        assert_eq!(by_namespace.get().unwrap().key(), ShardKey::Namespace);

        let generation = by_uid.generation();
        selections.set([4], true, &ranges); // already held: no change, no list
        assert_eq!(by_uid.generation(), generation);
        selections.set([3, 4], false, &ranges);
        assert_eq!(by_uid.generation(), generation + 1);
        assert_eq!(
            by_uid.get(),
            Some(ShardSelector::range(ShardKey::Uid, ranges[9]))
        );
        selections.clear();
        assert_eq!((by_uid.get(), by_namespace.get()), (None, None));
    }

    #[test]
    fn every_shard_held_is_the_whole_hash_space_in_one_range() {
        let ranges = ranges(5);
        let mut selections = Selections::default();
        selections.set(0..5, true, &ranges);
        let all = selections.get(ShardKey::Uid, &ranges).get().unwrap();
        assert_eq!(all.range_list(), [ShardRange::new(0, 1 << 64).unwrap()]);
    }
}
