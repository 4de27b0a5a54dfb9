//! Invariants a replayed run must keep: what a test checks once a (perturbed) recording has
//! been served. Three ship ready-made, the kinformer soak's: the cache ends as the server
//! ended ([`StoreEqualsFinalState`]), every deletion reached the handlers
//! ([`EveryDeleteSeen`]), and no handler heard of a deletion the server never made
//! ([`NoFalseDelete`]). A check of your own implements [`Check`].

use std::collections::{BTreeMap, HashMap};

use crate::format::Recording;
use crate::model::Follow;

/// One notification a handler got, reduced to what the checks compare.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Observation {
    /// An add of `key` at `rv`.
    Add {
        /// The object's key.
        key: String,
        /// Its resourceVersion.
        rv: String,
    },
    /// An update of `key` to `rv`.
    Update {
        /// The object's key.
        key: String,
        /// Its new resourceVersion.
        rv: String,
    },
    /// A delete of `key` (a tombstone too).
    Delete {
        /// The object's key.
        key: String,
    },
}

impl Observation {
    /// The key the notification is about.
    pub fn key(&self) -> &str {
        match self {
            Self::Add { key, .. } | Self::Update { key, .. } | Self::Delete { key } => key,
        }
    }
}

/// What a run left: the cache's objects (key → resourceVersion) and every handler
/// notification in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// The cache at the end, key → resourceVersion.
    pub store: BTreeMap<String, String>,
    /// Every notification, in the order the handler got them.
    pub observed: Vec<Observation>,
}

impl Outcome {
    /// An outcome of this cache and these notifications.
    pub fn new(store: BTreeMap<String, String>, observed: Vec<Observation>) -> Self {
        Self { store, observed }
    }
}

/// An invariant of a replayed run.
pub trait Check: Send + Sync {
    /// Its name, for the report.
    fn name(&self) -> &'static str;
    /// Whether `outcome` keeps it, `served` being the recording the run was served.
    ///
    /// # Errors
    /// What is wrong, naming keys (never object contents).
    fn check(&self, served: &Recording, outcome: &Outcome) -> Result<(), String>;
}

/// The cache holds exactly what the server held at the end: every key, at its version.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreEqualsFinalState;

impl Check for StoreEqualsFinalState {
    fn name(&self) -> &'static str {
        "store equals the recorded final state"
    }
    fn check(&self, served: &Recording, outcome: &Outcome) -> Result<(), String> {
        let want = served.final_state().versions();
        if outcome.store == want {
            return Ok(());
        }
        let missing: Vec<_> = want
            .keys()
            .filter(|k| !outcome.store.contains_key(*k))
            .take(5)
            .collect();
        let extra: Vec<_> = outcome
            .store
            .keys()
            .filter(|k| !want.contains_key(*k))
            .take(5)
            .collect();
        let stale: Vec<_> = want
            .iter()
            .filter(|(k, v)| outcome.store.get(*k).is_some_and(|have| have != *v))
            .take(5)
            .map(|(k, v)| format!("{k} at {} not {v}", outcome.store[k]))
            .collect();
        Err(format!(
            "{} objects cached, {} at the end; missing {missing:?}, extra {extra:?}, stale {stale:?}",
            outcome.store.len(),
            want.len()
        ))
    }
}

/// The handlers end where the server ended: a key the server no longer holds was last
/// heard of as a delete (none missed), a key it holds last as an add or update.
#[derive(Clone, Copy, Debug, Default)]
pub struct EveryDeleteSeen;

impl Check for EveryDeleteSeen {
    fn name(&self) -> &'static str {
        "every delete seen"
    }
    fn check(&self, served: &Recording, outcome: &Outcome) -> Result<(), String> {
        let end = served.final_state();
        let mut last: HashMap<&str, &Observation> = HashMap::new();
        for o in &outcome.observed {
            last.insert(o.key(), o);
        }
        let mut wrong = Vec::new();
        for (key, o) in &last {
            let held = end.objects.contains_key(*key);
            if held == matches!(o, Observation::Delete { .. }) {
                wrong.push(format!("{key}: last heard {o:?}, held at the end: {held}"));
            }
        }
        for key in end.objects.keys() {
            if !last.contains_key(key.as_str()) {
                wrong.push(format!("{key}: held at the end, never heard of"));
            }
        }
        wrong.sort();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} keys: {:?}",
                wrong.len(),
                &wrong[..wrong.len().min(5)]
            ))
        }
    }
}

/// Every delete a handler got matches a removal the server made: a `DELETED` event, or a
/// list that no longer had the key (a stale list's removal counts: the server said so).
/// No more deletes of a key than removals of it.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFalseDelete;

/// How many times the server removed each key, as `served` tells it.
fn removals(served: &Recording) -> HashMap<String, usize> {
    let mut count: HashMap<String, usize> = HashMap::new();
    let mut follow = Follow::default();
    for call in &served.calls {
        for key in follow.answer(&call.request, &call.answer) {
            *count.entry(key).or_default() += 1;
        }
    }
    count
}

impl Check for NoFalseDelete {
    fn name(&self) -> &'static str {
        "no false delete"
    }
    fn check(&self, served: &Recording, outcome: &Outcome) -> Result<(), String> {
        let removed = removals(served);
        let mut deletes: BTreeMap<&str, usize> = BTreeMap::new();
        for o in &outcome.observed {
            if let Observation::Delete { key } = o {
                *deletes.entry(key).or_default() += 1;
            }
        }
        let wrong: Vec<String> = deletes
            .iter()
            .filter(|(k, n)| removed.get(**k).copied().unwrap_or(0) < **n)
            .map(|(k, n)| {
                format!(
                    "{k}: {n} deletes heard, {} made",
                    removed.get(*k).copied().unwrap_or(0)
                )
            })
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} keys: {:?}",
                wrong.len(),
                &wrong[..wrong.len().min(5)]
            ))
        }
    }
}

/// The three ready-made checks.
pub fn standard() -> Vec<Box<dyn Check>> {
    vec![
        Box::new(StoreEqualsFinalState),
        Box::new(EveryDeleteSeen),
        Box::new(NoFalseDelete),
    ]
}

/// Runs every check; the failures, each prefixed by its check's name.
///
/// # Errors
/// One line per failed check.
pub fn all(
    checks: &[Box<dyn Check>],
    served: &Recording,
    outcome: &Outcome,
) -> Result<(), Vec<String>> {
    let failed: Vec<String> = checks
        .iter()
        .filter_map(|c| {
            c.check(served, outcome)
                .err()
                .map(|e| format!("{}: {e}", c.name()))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Answer, Event};
    use crate::synthetic::Churn;

    /// What a perfect informer would end with on `r`: the final state, and for every key
    /// its adds, updates and deletes in order.
    fn perfect(r: &Recording) -> Outcome {
        let mut observed = Vec::new();
        let mut follow = Follow::default();
        for call in &r.calls {
            if let Answer::Page { page, .. } = &call.answer {
                for i in &page.items {
                    observed.push(Observation::Add {
                        key: i.key.clone(),
                        rv: i.rv.clone(),
                    });
                }
            }
            if let Answer::Stream { frames, .. } = &call.answer {
                for f in frames {
                    match &f.event {
                        Event::Added(i) => observed.push(Observation::Add {
                            key: i.key.clone(),
                            rv: i.rv.clone(),
                        }),
                        Event::Modified(i) => observed.push(Observation::Update {
                            key: i.key.clone(),
                            rv: i.rv.clone(),
                        }),
                        Event::Deleted(i) => {
                            observed.push(Observation::Delete { key: i.key.clone() })
                        }
                        _ => {}
                    }
                }
            }
            let _gone = follow.answer(&call.request, &call.answer);
        }
        Outcome::new(follow.state.versions(), observed)
    }

    #[test]
    fn each_check_passes_a_perfect_run_and_fails_the_fault_it_names() {
        let r = Churn::new("v1", "Pod").objects(10).events(200).build();
        let good = perfect(&r);
        assert_eq!(all(&standard(), &r, &good), Ok(()));

        let mut stale = good.clone();
        let key = stale.store.keys().next().unwrap().clone();
        stale.store.insert(key, "1".into());
        assert!(StoreEqualsFinalState.check(&r, &stale).is_err());

        let (deleted, _) = r.deletions().last().unwrap().clone();
        let mut missed = good.clone();
        let at = missed
            .observed
            .iter()
            .rposition(|o| matches!(o, Observation::Delete { key } if *key == deleted))
            .unwrap();
        missed.observed.remove(at);
        assert!(EveryDeleteSeen.check(&r, &missed).is_err());
        assert!(NoFalseDelete.check(&r, &missed).is_ok());

        let mut false_delete = good.clone();
        let held = good.store.keys().next().unwrap().clone();
        false_delete
            .observed
            .push(Observation::Delete { key: held.clone() });
        false_delete.observed.push(Observation::Add {
            key: held,
            rv: "9".into(),
        });
        assert!(NoFalseDelete.check(&r, &false_delete).is_err());
    }
}
