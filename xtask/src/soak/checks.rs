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

/// The checks of the subject that is killed and started again from its snapshot, whose
/// notifications come from several processes: each process starts from the pods its
/// snapshot held (`epochs`: where its events start, and that state; the first process from
/// nothing) and must notify from there in order (an add for a pod it does not hold, an update
/// or one delete for one it does); the last one's state so rebuilt is its store, which is a
/// fresh LIST; no process deletes a pod that exists at the end; and across processes no pod's
/// version ever goes back (a restarted process never hands on a state older than what an
/// earlier one handed on). A pod an earlier process was told of and that went while no
/// process ran is not the new process's to delete unless its snapshot held it, as after any
/// restart without one.
pub(super) fn check_restarted(
    events: &[Event],
    epochs: &[(usize, BTreeMap<String, u64>)],
    dump: &Dump,
    truth: &BTreeMap<String, u64>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(diff) = differences(&dump.store, truth) {
        out.push(format!("its store differs from a fresh LIST: {diff}"));
    }
    let mut processes: Vec<(usize, BTreeMap<String, u64>)> = vec![(0, BTreeMap::new())];
    processes.extend(epochs.iter().cloned());
    let mut newest: HashMap<&str, u64> = HashMap::new();
    let (mut back, mut bad_order, mut false_delete) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_state = BTreeMap::new();
    let mut last_count = 0;
    for (i, (from, base)) in processes.iter().enumerate() {
        let to = processes
            .get(i + 1)
            .map_or(events.len(), |p| p.0)
            .min(events.len());
        let evs = events.get(*from..to).unwrap_or_default();
        let mut state = base.clone();
        for e in evs {
            let held = state.contains_key(&e.name);
            let ok = match e.op {
                EventOp::Add => !held,
                EventOp::Update | EventOp::Delete => held,
            };
            if !ok {
                bad_order.push(format!(
                    "{} ({:?}@{} in process {})",
                    e.name,
                    e.op,
                    e.rv,
                    i + 1
                ));
            }
            match e.op {
                EventOp::Add | EventOp::Update => {
                    if let Some(&n) = newest.get(e.name.as_str())
                        && e.rv < n
                    {
                        back.push(format!(
                            "{} at {} after {n} (process {})",
                            e.name,
                            e.rv,
                            i + 1
                        ));
                    }
                    let n = newest.entry(e.name.as_str()).or_default();
                    *n = (*n).max(e.rv);
                    state.insert(e.name.clone(), e.rv);
                }
                EventOp::Delete => {
                    if truth.contains_key(&e.name) {
                        false_delete.push(format!("{} (process {})", e.name, i + 1));
                    }
                    state.remove(&e.name);
                }
            }
        }
        last_state = state;
        last_count = evs.len();
    }
    if let Some(diff) = differences(&last_state, &dump.store) {
        out.push(format!(
            "the state rebuilt from its last process's snapshot and notifications differs from its store: {diff}"
        ));
    }
    for (what, mut names) in [
        (
            "notifications that do not follow from what the process held (an add of a held pod, an update or delete of one it did not hold)",
            bad_order,
        ),
        (
            "a version older than one an earlier notification handed on",
            back,
        ),
        ("deletes for pods that exist at the end", false_delete),
    ] {
        if !names.is_empty() {
            names.sort();
            out.push(format!("{what}: {} ({})", names.len(), examples(&names)));
        }
    }
    if dump.panicky != dump.recorded || dump.slow != dump.recorded {
        out.push(format!(
            "its handlers got different numbers of notifications: recorder {}, panicking {}, slow {}",
            dump.recorded, dump.panicky, dump.slow
        ));
    }
    if usize::try_from(dump.recorded).ok() != Some(last_count) {
        out.push(format!(
            "its last process's recorder counted {} notifications but {last_count} reached stdout",
            dump.recorded
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
    fn a_restarted_subject_is_checked_from_each_process_s_snapshot() {
        let events = [
            ev(EventOp::Add, "a", 1),
            ev(EventOp::Add, "b", 2),
            ev(EventOp::Update, "a", 3),
            // Process 2, from a snapshot holding a@1 and b@2 (older than a@3 it was told).
            ev(EventOp::Update, "a", 4),
            Event {
                tombstone: true,
                ..ev(EventOp::Delete, "b", 2)
            },
            ev(EventOp::Add, "c", 5),
        ];
        let epochs = vec![(3, map(&[("a", 1), ("b", 2)]))];
        let truth = map(&[("a", 4), ("c", 5)]);
        let d = dump(&[("a", 4), ("c", 5)], 3);
        assert_eq!(
            check_restarted(&events, &epochs, &d, &truth),
            Vec::<String>::new()
        );

        // Going back in time, a false delete, an add of a held pod, and a store off the LIST.
        let events = [
            ev(EventOp::Add, "a", 1),
            ev(EventOp::Update, "a", 7),
            ev(EventOp::Update, "a", 4),
            ev(EventOp::Add, "a", 8),
            ev(EventOp::Delete, "c", 5),
        ];
        let epochs = vec![(2, map(&[("a", 1), ("c", 5)]))];
        let v = check_restarted(
            &events,
            &epochs,
            &dump(&[("a", 8)], 3),
            &map(&[("a", 9), ("c", 5)]),
        )
        .join("\n");
        for want in [
            "a at 4 after 7 (process 2)",
            "deletes for pods that exist at the end: 1 (c (process 2))",
            "an add of a held pod",
            "its store differs from a fresh LIST",
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
