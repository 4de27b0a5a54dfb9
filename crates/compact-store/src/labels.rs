//! Label sets shared between objects.
//!
//! A `BTreeMap` of two labels takes a 500-byte node on the heap, as much as the rest of an
//! encoded pod; the pods of one Deployment (or ReplicaSet, Job, DaemonSet) all carry the
//! same labels. So the store keeps one copy of each distinct label set and the objects
//! point at it.

use std::collections::HashSet;
use std::sync::Arc;

use crate::entry::Labels;

/// The distinct label sets of the stored objects. Sets nobody uses any more are swept out
/// when the table has doubled since the last sweep, so it stays within twice the sets in
/// use.
#[derive(Default)]
pub(crate) struct LabelSets {
    sets: HashSet<Arc<Labels>, foldhash::quality::RandomState>,
    sweep_at: usize,
}

/// The table is swept no earlier than at this many sets.
const MIN_SWEEP: usize = 64;

impl LabelSets {
    /// The shared copy of `labels`; `None` for no labels.
    pub(crate) fn intern(&mut self, labels: Option<&Labels>) -> Option<Arc<Labels>> {
        let labels = labels.filter(|l| !l.is_empty())?;
        if let Some(shared) = self.sets.get(labels) {
            return Some(Arc::clone(shared));
        }
        if self.sets.len() >= self.sweep_at.max(MIN_SWEEP) {
            // Only the table holds them: no stored object has these labels any more.
            self.sets.retain(|s| Arc::strong_count(s) > 1);
            self.sweep_at = self.sets.len() * 2;
        }
        let shared = Arc::new(labels.clone());
        self.sets.insert(Arc::clone(&shared));
        Some(shared)
    }

    /// How many distinct sets the table holds.
    pub(crate) fn len(&self) -> usize {
        self.sets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equal_label_sets_share_one_copy_and_unused_ones_are_swept() {
        let mut t = LabelSets::default();
        let a = t.intern(Some(&labels(&[("app", "web")]))).unwrap();
        let b = t.intern(Some(&labels(&[("app", "web")]))).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(t.intern(Some(&Labels::new())).is_none());
        assert!(t.intern(None).is_none());
        for i in 0..MIN_SWEEP * 3 {
            let n = i.to_string();
            drop(t.intern(Some(&labels(&[("n", &n)]))));
        }
        // The sweeps left the sets still in use and at most twice as many in all.
        assert!(t.len() <= MIN_SWEEP * 2, "{}", t.len());
        let c = t.intern(Some(&labels(&[("app", "web")]))).unwrap();
        assert!(Arc::ptr_eq(&a, &c));
    }
}
