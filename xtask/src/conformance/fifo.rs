//! FIFO traces: the generators, and the replayer on kinformer-deltafifo's `DeltaFifo` and
//! `InOrderFifo` (the peer uses client-go's `DeltaFIFO` and `RealFIFO`). The replayer
//! plays the informer: every popped item is applied to the store the FIFO was built with,
//! as client-go's `processDeltas` / `processReplacedAllInfo` do, so that relist tombstones
//! and resyncs depend on what was popped before, as in a real informer.

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{DeltaObject, DeltaType, KnownObjects, ObjectKey};
use kinformer_deltafifo::{DeltaFifo, Error, FifoQueue, InOrderFifo, Item};
use kinformer_indexer::{Indexers, ThreadSafeStore};
use serde_json::{Value, json};

use super::{Observations, Rng};

/// The informer's store as the FIFO sees it, listing its keys sorted. client-go's store
/// lists them in map order, so the peer sorts too: otherwise the order of a resync's
/// Syncs and of a relist's tombstones for stored keys would be random in client-go.
struct SortedKnown(Arc<ThreadSafeStore<Pod>>);

impl KnownObjects<Pod> for SortedKnown {
    fn list_keys(&self) -> Vec<ObjectKey> {
        let mut keys = self.0.list_keys();
        keys.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        keys
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.get_by_key(key)
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Pod>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

/// The pod a trace's description (`ns`, `name`, `rv`) stands for.
fn pod(d: &Value) -> Arc<Pod> {
    let s = |k: &str| d[k].as_str().map(str::to_owned);
    let mut p = Pod::default();
    p.metadata.namespace = s("ns");
    p.metadata.name = s("name");
    p.metadata.resource_version = s("rv");
    Arc::new(p)
}

fn rv(p: &Pod) -> &str {
    p.metadata.resource_version.as_deref().unwrap_or("")
}

/// client-go's `MetaNamespaceKeyFunc` key of a pod.
fn key(p: &Pod) -> String {
    let name = p.metadata.name.as_deref().unwrap_or("");
    match p.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

fn delta_json(key: &ObjectKey, kind: DeltaType, object: &DeltaObject<Pod>) -> Value {
    json!({
        "key": key.as_str(),
        "rv": rv(object.object()),
        "tombstone": object.tombstone().is_some(),
        "type": kind.as_str(),
    })
}

/// Applies a popped item to the store, as client-go's informer does.
fn apply(store: &ThreadSafeStore<Pod>, item: &Item<Pod>) -> anyhow::Result<()> {
    let one = |kind: DeltaType, object: &DeltaObject<Pod>| -> anyhow::Result<()> {
        let obj = object.object();
        match kind {
            DeltaType::Deleted => store.delete(Arc::clone(obj))?,
            _ if store.get_by_key(&key(obj)).is_some() => store.update(Arc::clone(obj))?,
            _ => store.add(Arc::clone(obj))?,
        }
        Ok(())
    };
    match item {
        Item::Deltas { deltas, .. } => {
            for d in deltas {
                one(d.kind, &d.object)?;
            }
        }
        Item::Batch(events) => {
            for (_, d) in events {
                one(d.kind, &d.object)?;
            }
        }
        Item::ReplacedAll {
            objects,
            unchanged,
            resource_version,
        } => {
            // Traces replace with every object; only an informer's reflector keeps some.
            if !unchanged.is_empty() {
                bail!("a ReplacedAll with unchanged keys in a trace");
            }
            let list = objects.iter().map(|(_, o)| Arc::clone(o)).collect();
            store.replace(list, resource_version)?;
        }
        Item::SyncAll | Item::Bookmark { .. } => {}
        other => bail!("unexpected item {}", other.kind()),
    }
    Ok(())
}

fn item_json(item: &Item<Pod>) -> anyhow::Result<(Vec<Value>, bool)> {
    Ok(match item {
        Item::Deltas { key, deltas } => (
            deltas
                .iter()
                .map(|d| delta_json(key, d.kind, &d.object))
                .collect(),
            false,
        ),
        Item::Batch(events) => (
            events
                .iter()
                .map(|(k, d)| delta_json(k, d.kind, &d.object))
                .collect(),
            true,
        ),
        Item::ReplacedAll {
            objects,
            resource_version,
            ..
        } => {
            let objects: Vec<String> = objects
                .iter()
                .map(|(k, o)| format!("{}@{}", k.as_str(), rv(o)))
                .collect();
            let all = json!({ "objects": objects, "rv": resource_version, "type": "ReplacedAll" });
            (vec![all], false)
        }
        Item::SyncAll => (vec![json!({ "type": "SyncAll" })], false),
        other => bail!("unexpected item {}", other.kind()),
    })
}

fn build(
    variant: &str,
    store: &Arc<ThreadSafeStore<Pod>>,
) -> anyhow::Result<Box<dyn FifoQueue<Pod>>> {
    let known = || -> Arc<dyn KnownObjects<Pod>> { Arc::new(SortedKnown(Arc::clone(store))) };
    Ok(match variant {
        "delta" => Box::new(
            DeltaFifo::builder()
                .known_objects(known())
                .emit_replaced(true)
                .build(),
        ),
        "real" | "real_batch" => Box::new(
            InOrderFifo::builder()
                .known_objects(known())
                .batch_size(if variant == "real" {
                    1
                } else {
                    kinformer_deltafifo::DEFAULT_BATCH_SIZE
                })
                .build()?,
        ),
        "real_atomic" => Box::new(InOrderFifo::builder().atomic(true).build()?),
        other => bail!("unknown fifo {other:?}"),
    })
}

/// Replays a fifo trace on kinformer-deltafifo.
pub(crate) fn replay(header: &Value, ops: &[Value]) -> anyhow::Result<Observations> {
    let store = Arc::new(ThreadSafeStore::new(Indexers::new()));
    let queue = build(header["fifo"].as_str().unwrap_or_default(), &store)?;
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let name = op["op"].as_str().unwrap_or_default();
        let mut obs = vec![("n", json!(i + 1)), ("op", json!(name))];
        match name {
            "add" => obs.push(("error", json!(queue.add(pod(&op["obj"])).is_err()))),
            "update" => obs.push(("error", json!(queue.update(pod(&op["obj"])).is_err()))),
            "delete" => obs.push(("error", json!(queue.delete(pod(&op["obj"])).is_err()))),
            "replace" => {
                let list = op["objs"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(pod)
                    .collect();
                let rv = op["rv"].as_str().unwrap_or_default();
                let part = kinformer_core::ListPart::whole(list, rv);
                obs.push(("error", json!(queue.replace(part).is_err())));
            }
            "resync" => obs.push(("error", json!(queue.resync().is_err()))),
            "has_synced" => obs.push(("value", json!(queue.has_synced()))),
            "len" => obs.push(("len", json!(queue.len()))),
            "close" => queue.close(),
            "pop" => match queue.try_pop() {
                Ok(None) => obs.push(("would_block", json!(true))),
                Err(Error::Closed) => obs.push(("closed", json!(true))),
                Err(e) => bail!("op {}: pop failed: {e}", i + 1),
                Ok(Some(popped)) => {
                    let (deltas, batch) = item_json(popped.item())?;
                    obs.push(("deltas", json!(deltas)));
                    obs.push(("batch", json!(batch)));
                    obs.push(("is_in_initial_list", json!(popped.is_in_initial_list())));
                    apply(&store, popped.item()).with_context(|| format!("op {}", i + 1))?;
                    // Processed: the FIFO counts it towards has_synced.
                    drop(popped);
                }
            },
            other => bail!("op {}: unknown op {other:?}", i + 1),
        }
        out.push(super::observation(obs));
    }
    Ok(out)
}

/// Six objects: two namespaces (`p1` in both) and one cluster-scoped name.
const IDS: [(&str, &str); 6] = [
    ("a", "p1"),
    ("a", "p2"),
    ("a", "p3"),
    ("b", "p1"),
    ("b", "p4"),
    ("", "p5"),
];

fn desc(id: usize, rv: &mut u64) -> Value {
    let (ns, name) = IDS[id];
    *rv += 1;
    let mut d = json!({ "name": name, "rv": rv.to_string() });
    if !ns.is_empty() {
        d["ns"] = json!(ns);
    }
    d
}

/// A random trace of `variant`: 30-90 operations over six objects, most traces starting
/// with a relist. `present` tracks the objects whose last write was not a delete (what a
/// relist that leaves them out turns into tombstones). No write follows a close (kinformer
/// refuses it, client-go accepts it).
fn generate_variant(seed: u64, rng: &mut Rng, variant: &str) -> String {
    let header = json!({ "trace": "fifo", "fifo": variant, "seed": seed });
    let mut lines = vec![header.to_string()];
    let mut rv = 0u64;
    let mut present = BTreeSet::new();
    let mut closed = false;
    let n = 30 + rng.below(61);
    let replace = |rng: &mut Rng, rv: &mut u64, present: &mut BTreeSet<usize>| {
        // Mostly what is there (with at most one or two left out), sometimes anything.
        let mut ids: Vec<usize> = if rng.below(4) == 0 {
            (0..IDS.len()).filter(|_| rng.below(2) == 0).collect()
        } else {
            let mut ids: Vec<usize> = present.iter().copied().collect();
            for _ in 0..rng.below(3) {
                if !ids.is_empty() && rng.below(2) == 0 {
                    ids.remove(rng.below(ids.len() as u64) as usize);
                }
            }
            for id in 0..IDS.len() {
                if !ids.contains(&id) && rng.below(4) == 0 {
                    ids.push(id);
                }
            }
            ids
        };
        // List order is random.
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.below(i as u64 + 1) as usize);
        }
        *present = ids.iter().copied().collect();
        let objs: Vec<Value> = ids.iter().map(|&id| desc(id, rv)).collect();
        *rv += 1;
        json!({ "op": "replace", "objs": objs, "rv": rv.to_string() })
    };
    if rng.below(3) != 0 {
        lines.push(replace(rng, &mut rv, &mut present).to_string());
    }
    for i in 0..n {
        let id = rng.below(IDS.len() as u64) as usize;
        let write = !closed;
        let op = match rng.below(100) {
            0..=13 if write => {
                present.insert(id);
                json!({ "op": "add", "obj": desc(id, &mut rv) })
            }
            14..=29 if write => {
                present.insert(id);
                json!({ "op": "update", "obj": desc(id, &mut rv) })
            }
            30..=41 if write => {
                present.remove(&id);
                json!({ "op": "delete", "obj": desc(id, &mut rv) })
            }
            42..=48 if write => replace(rng, &mut rv, &mut present),
            49..=54 if write => json!({ "op": "resync" }),
            55..=59 => json!({ "op": "has_synced" }),
            60..=62 => json!({ "op": "len" }),
            63 if i > n / 2 && !closed => {
                closed = true;
                json!({ "op": "close" })
            }
            _ => json!({ "op": "pop" }),
        };
        lines.push(op.to_string());
    }
    // Drain at the end.
    for _ in 0..4 {
        lines.push(json!({ "op": "pop" }).to_string());
    }
    lines.push(json!({ "op": "has_synced" }).to_string());
    lines.join("\n") + "\n"
}

/// A random DeltaFIFO trace for `seed`.
pub(crate) fn generate_delta(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    generate_variant(seed, &mut rng, "delta")
}

/// A random RealFIFO trace for `seed`: per-object popping one event at a time, per-object
/// popping batches, or atomic.
pub(crate) fn generate_real(seed: u64) -> String {
    let mut rng = Rng::new(seed ^ 0x5eed_f1f0);
    let variant = *rng.pick(&["real", "real_batch", "real_atomic"]);
    generate_variant(seed, &mut rng, variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_traces_replay_with_one_observation_per_op() {
        for seed in 1..=40 {
            for text in [generate_delta(seed), generate_real(seed)] {
                let mut lines = text.lines();
                let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
                let ops: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
                assert!(
                    (35..=96).contains(&ops.len()),
                    "seed {seed}: {} ops",
                    ops.len()
                );
                let observed = replay(&header, &ops).unwrap();
                assert_eq!(observed.len(), ops.len(), "seed {seed}");
                assert!(
                    observed.iter().all(|o| !o.contains("\"error\":true")),
                    "seed {seed}: a write failed: {observed:?}"
                );
            }
        }
    }

    #[test]
    fn no_write_follows_a_close() {
        for seed in 1..=200 {
            for text in [generate_delta(seed), generate_real(seed)] {
                let after: Vec<&str> = text
                    .lines()
                    .skip_while(|l| !l.contains("\"close\""))
                    .skip(1)
                    .collect();
                assert!(
                    after.iter().all(|l| {
                        ["\"pop\"", "\"has_synced\"", "\"len\""]
                            .iter()
                            .any(|op| l.contains(op))
                    }),
                    "seed {seed}: {after:?}"
                );
            }
        }
    }

    #[test]
    fn a_popped_tombstone_deletes_its_key() {
        let header = json!({ "trace": "fifo", "fifo": "delta" });
        let ops: Vec<Value> = [
            r#"{"op":"add","obj":{"ns":"a","name":"p1","rv":"1"}}"#,
            r#"{"op":"pop"}"#,
            r#"{"op":"replace","objs":[],"rv":"2"}"#,
            r#"{"op":"pop"}"#,
            r#"{"op":"resync"}"#,
            r#"{"op":"len"}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        let observed = replay(&header, &ops).unwrap();
        assert!(observed[3].contains(r#""tombstone":true"#), "{observed:?}");
        assert!(observed[5].contains(r#""len":0"#), "{observed:?}");
    }
}
