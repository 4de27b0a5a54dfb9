//! The correctness checks of one subject at the end of a soak: its store against a fresh
//! LIST, its recorder's notifications against its store, the order of notifications per
//! pod, deletes, and its handlers.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::subjects::{Dump, Event, EventOp};

/// How many examples a violation message lists.
const EXAMPLES: usize = 5;

/// Every violation found, as a sentence each; empty when the subject is correct.
pub(super) fn check(events: &[Event], dump: &Dump, truth: &BTreeMap<String, u64>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(diff) = differences(&dump.store, truth) {
        out.push(format!("its store differs from a fresh LIST: {diff}"));
    }
    let mut rebuilt = BTreeMap::new();
    for e in events {
        match e.op {
            EventOp::Add | EventOp::Update => {
                rebuilt.insert(e.name.clone(), e.rv);
            }
            EventOp::Delete => {
                rebuilt.remove(&e.name);
            }
        }
    }
    if let Some(diff) = differences(&rebuilt, &dump.store) {
        out.push(format!(
            "the state rebuilt from its notifications differs from its store: {diff}"
        ));
    }

    let mut per_name: HashMap<&str, Vec<&Event>> = HashMap::new();
    for e in events {
        per_name.entry(e.name.as_str()).or_default().push(e);
    }
    let mut bad_order = Vec::new();
    let mut missed_delete = Vec::new();
    let mut repeated_delete = Vec::new();
    let mut false_delete = Vec::new();
    for (name, evs) in &per_name {
        let deletes = evs.iter().filter(|e| e.op == EventOp::Delete).count();
        let first_ok = evs.first().is_some_and(|e| e.op == EventOp::Add);
        let later_adds = evs.iter().skip(1).any(|e| e.op == EventOp::Add);
        let after_delete = evs
            .iter()
            .position(|e| e.op == EventOp::Delete)
            .is_some_and(|i| i + 1 < evs.len());
        if !first_ok || later_adds || after_delete {
            bad_order.push(format!("{name}: {}", sequence(evs)));
        }
        let exists = truth.contains_key(*name);
        match (exists, deletes) {
            (true, 0) | (false, 1) => {}
            (true, _) => false_delete.push((*name).to_owned()),
            (false, 0) => missed_delete.push((*name).to_owned()),
            (false, _) => repeated_delete.push(format!("{name} ({deletes} deletes)")),
        }
    }
    for (what, mut names) in [
        (
            "notifications out of order (not add, updates, at most one delete, nothing after it)",
            bad_order,
        ),
        (
            "pods it had seen are gone but it got no delete for them",
            missed_delete,
        ),
        (
            "pods it had seen are gone and it got more than one delete",
            repeated_delete,
        ),
        ("deletes for pods that exist at the end", false_delete),
    ] {
        if !names.is_empty() {
            names.sort();
            out.push(format!("{what}: {} ({})", names.len(), examples(&names)));
        }
    }

    if dump.panics == 0 {
        out.push("the panicking handler never panicked (too few events?)".into());
    }
    if dump.panicky != dump.recorded || dump.slow != dump.recorded {
        out.push(format!(
            "its handlers got different numbers of notifications: recorder {}, panicking {}, slow {}",
            dump.recorded, dump.panicky, dump.slow
        ));
    }
    if usize::try_from(dump.recorded).ok() != Some(events.len()) {
        out.push(format!(
            "its recorder counted {} notifications but {} reached stdout",
            dump.recorded,
            events.len()
        ));
    }
    out
}

/// What differs between two name → resourceVersion maps (`have` against `want`), or
/// `None` when they are equal.
pub(super) fn differences(
    have: &BTreeMap<String, u64>,
    want: &BTreeMap<String, u64>,
) -> Option<String> {
    let missing: Vec<String> = want
        .keys()
        .filter(|k| !have.contains_key(*k))
        .cloned()
        .collect();
    let extra: Vec<String> = have
        .keys()
        .filter(|k| !want.contains_key(*k))
        .cloned()
        .collect();
    let stale: Vec<String> = have
        .iter()
        .filter_map(|(k, rv)| {
            want.get(k)
                .filter(|w| *w != rv)
                .map(|w| format!("{k} at {rv}, not {w}"))
        })
        .collect();
    let mut s = String::new();
    for (what, v) in [
        ("missing", missing),
        ("extra", extra),
        ("other resourceVersion", stale),
    ] {
        if !v.is_empty() {
            let _ = write!(
                s,
                "{}{what} {} ({})",
                if s.is_empty() { "" } else { "; " },
                v.len(),
                examples(&v)
            );
        }
    }
    (!s.is_empty()).then_some(s)
}

fn examples(v: &[String]) -> String {
    let mut s = v
        .iter()
        .take(EXAMPLES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if v.len() > EXAMPLES {
        s.push_str(", ...");
    }
    s
}

fn sequence(evs: &[&Event]) -> String {
    evs.iter()
        .map(|e| {
            let op = match e.op {
                EventOp::Add => "add",
                EventOp::Update => "update",
                EventOp::Delete if e.tombstone => "delete(tombstone)",
                EventOp::Delete => "delete",
            };
            format!("{op}@{}", e.rv)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: EventOp, name: &str, rv: u64) -> Event {
        Event {
            unix_ns: 0,
            op,
            name: name.into(),
            rv,
            tombstone: false,
        }
    }

    fn map(v: &[(&str, u64)]) -> BTreeMap<String, u64> {
        v.iter().map(|(k, rv)| ((*k).to_owned(), *rv)).collect()
    }

    fn dump(store: &[(&str, u64)], recorded: u64) -> Dump {
        Dump {
            store: map(store),
            recorded,
            panicky: recorded,
            slow: recorded,
            panics: 1,
            ..Dump::default()
        }
    }

    #[test]
    fn a_correct_subject_passes() {
        let events = [
            ev(EventOp::Add, "a", 1),
            ev(EventOp::Add, "b", 2),
            ev(EventOp::Update, "a", 3),
            Event {
                tombstone: true,
                ..ev(EventOp::Delete, "b", 2)
            },
        ];
        let truth = map(&[("a", 3)]);
        assert_eq!(
            check(&events, &dump(&[("a", 3)], 4), &truth),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_kind_of_violation_is_reported() {
        let events = [
            ev(EventOp::Add, "a", 1),
            ev(EventOp::Delete, "a", 1),
            ev(EventOp::Update, "a", 2),
            ev(EventOp::Add, "b", 3),
            ev(EventOp::Add, "c", 4),
            ev(EventOp::Delete, "c", 4),
            ev(EventOp::Delete, "c", 4),
        ];
        // a exists at the end (a delete for it is false), b is gone without a delete, c
        // got two deletes, and the store lags behind the LIST.
        let truth = map(&[("a", 5)]);
        let d = Dump {
            panics: 0,
            slow: 3,
            ..dump(&[("a", 2), ("b", 3)], 7)
        };
        let v = check(&events, &d, &truth).join("\n");
        for want in [
            "store differs from a fresh LIST: extra 1 (b); other resourceVersion 1 (a at 2, not 5)",
            "notifications out of order",
            "a: add@1 delete@1 update@2",
            "gone but it got no delete for them: 1 (b)",
            "more than one delete: 1 (c (2 deletes))",
            "deletes for pods that exist at the end: 1 (a)",
            "never panicked",
            "recorder 7, panicking 7, slow 3",
        ] {
            assert!(v.contains(want), "{want:?} not in:\n{v}");
        }
    }

    #[test]
    fn rebuilt_state_and_counts_are_checked_against_the_store() {
        let events = [ev(EventOp::Add, "a", 1)];
        let v = check(
            &events,
            &dump(&[("a", 1), ("z", 9)], 2),
            &map(&[("a", 1), ("z", 9)]),
        );
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].contains("rebuilt from its notifications differs"),
            "{v:?}"
        );
        assert!(v[1].contains("counted 2 notifications but 1"), "{v:?}");
    }
}
