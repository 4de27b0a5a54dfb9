//! Label sets shared between objects.
//!
//! A `BTreeMap` of two labels takes a 500-byte node on the heap, as much as the rest of an
//! encoded pod; the pods of one Deployment (or ReplicaSet, Job, DaemonSet) all carry the
//! same labels. So the process keeps one copy of each distinct label set and the objects
//! point at it. The table is keyed by the label map's encoding, so that an object whose
//! labels are known already builds no map at all.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use crate::view::read::next;

/// Labels, shared by every object that has the same ones.
pub(crate) type Labels = BTreeMap<String, String>;

/// The distinct label sets of the objects alive, by their encoding. Sets nobody uses any
/// more are swept out when the table has doubled since the last sweep, so it stays within
/// twice the sets in use.
#[derive(Default)]
struct LabelSets {
    sets: HashMap<Box<[u8]>, Arc<Labels>, foldhash::quality::RandomState>,
    sweep_at: usize,
}

/// The table is swept no earlier than at this many sets.
const MIN_SWEEP: usize = 64;

static SETS: LazyLock<Mutex<LabelSets>> = LazyLock::new(Mutex::default);

/// The shared copy of the labels whose map content (the encoding's, after its length) is
/// `content`; `None` for no labels.
pub(crate) fn shared(content: &[u8]) -> Option<Arc<Labels>> {
    if content.is_empty() {
        return None;
    }
    let mut table = SETS.lock().unwrap_or_else(PoisonError::into_inner);
    table.intern(content)
}

impl LabelSets {
    fn intern(&mut self, content: &[u8]) -> Option<Arc<Labels>> {
        if let Some(shared) = self.sets.get(content) {
            return Some(Arc::clone(shared));
        }
        let labels = Arc::new(parse(content)?);
        if self.sets.len() >= self.sweep_at.max(MIN_SWEEP) {
            // Only the table holds them: no object has these labels any more.
            self.sets.retain(|_, s| Arc::strong_count(s) > 1);
            self.sweep_at = self.sets.len() * 2;
        }
        self.sets.insert(content.into(), Arc::clone(&labels));
        Some(labels)
    }
}

/// The labels of a map's content: string keys and string values (a map of another shape
/// is no labels).
fn parse(mut content: &[u8]) -> Option<Labels> {
    let mut labels = Labels::new();
    while !content.is_empty() {
        let key = next(&mut content)?.as_str()?;
        let value = next(&mut content)?.as_str()?;
        labels.insert(key.to_owned(), value.to_owned());
    }
    Some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::read::Raw;

    fn content(pairs: &[(&str, &str)]) -> Vec<u8> {
        let map: Labels = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let bytes = crate::encode_to_vec(&map).unwrap();
        Raw::whole(&bytes).unwrap().as_map().unwrap().to_vec()
    }

    #[test]
    fn equal_label_sets_share_one_copy_and_unused_ones_are_swept() {
        let mut t = LabelSets::default();
        let web = content(&[("app", "web")]);
        let a = t.intern(&web).unwrap();
        let b = t.intern(&web).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.get("app").map(String::as_str), Some("web"));
        for i in 0..MIN_SWEEP * 3 {
            let n = i.to_string();
            drop(t.intern(&content(&[("n", &n)])));
        }
        // The sweeps left the sets still in use and at most twice as many in all.
        assert!(t.sets.len() <= MIN_SWEEP * 2, "{}", t.sets.len());
        let c = t.intern(&web).unwrap();
        assert!(Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn no_labels_and_labels_of_another_shape_are_none() {
        assert!(shared(&[]).is_none());
        let numbers = crate::encode_to_vec(&std::collections::BTreeMap::from([("a", 1)])).unwrap();
        let numbers = Raw::whole(&numbers).unwrap().as_map().unwrap().to_vec();
        assert!(LabelSets::default().intern(&numbers).is_none());
    }
}
