//! A bounded map that forgets the least recently used entry: what `k8s.io/utils/lru` is
//! to client-go's `EventCorrelator` (`Get` and `Add` both count as a use).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

pub(crate) struct Lru<K, V> {
    /// Each entry and the tick of its last use.
    entries: HashMap<K, (V, u64)>,
    /// Keys by the tick of their last use, oldest first.
    uses: BTreeMap<u64, K>,
    tick: u64,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// At most `capacity` entries (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            uses: BTreeMap::new(),
            tick: 0,
            capacity: capacity.max(1),
        }
    }

    fn touch(&mut self, key: &K) -> u64 {
        self.tick += 1;
        if let Some((_, used)) = self.entries.get_mut(key) {
            self.uses.remove(used);
            *used = self.tick;
            self.uses.insert(self.tick, key.clone());
        }
        self.tick
    }

    /// The entry of `key`, now the most recently used.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.touch(key);
        self.entries.get_mut(key).map(|(value, _)| value)
    }

    /// Sets the entry of `key`, now the most recently used, forgetting the least recently
    /// used one if that makes one too many.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        let tick = self.touch(&key);
        if let Some(entry) = self.entries.get_mut(&key) {
            entry.0 = value;
            return;
        }
        self.entries.insert(key.clone(), (value, tick));
        self.uses.insert(tick, key);
        if self.entries.len() > self.capacity
            && let Some((_, oldest)) = self.uses.pop_first()
        {
            self.entries.remove(&oldest);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_least_recently_used_and_a_get_is_a_use() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert_eq!(lru.get_mut(&"a"), Some(&mut 1));
        lru.insert("c", 3); // b is the least recently used
        assert_eq!(lru.get_mut(&"b"), None);
        assert_eq!(lru.get_mut(&"a"), Some(&mut 1));
        lru.insert("c", 4); // an update, not a new entry
        lru.insert("d", 5); // a was used before c's update
        assert_eq!(lru.get_mut(&"a"), None);
        assert_eq!(lru.get_mut(&"c"), Some(&mut 4));
        assert_eq!(lru.len(), 2);
    }
}
