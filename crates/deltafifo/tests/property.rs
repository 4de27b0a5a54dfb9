//! For any sequence of add / update / delete / replace (and resyncs), with pops applied to
//! the informer's store at any point, the store ends where applying the operations
//! directly to an empty store ends.

use kinformer_core::ListPart;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::*;
use kinformer_core::{KnownObjects, Sink};
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo, Item};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Add(u8, u32),
    Update(u8, u32),
    Delete(u8),
    Replace(Vec<(u8, u32)>),
    Resync,
    /// The informer pops this many items and applies them.
    Pop(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..6;
    prop_oneof![
        4 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::Add(k, v)),
        4 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::Update(k, v)),
        3 => key.clone().prop_map(Op::Delete),
        2 => prop::collection::vec((key, any::<u32>()), 0..6).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        4 => (1u8..4).prop_map(Op::Pop),
    ]
}

fn name(k: u8) -> String {
    format!("k{k}")
}

/// Runs the operations through `fifo` into `store`, and directly into a map; returns both.
fn run(
    fifo: &dyn FifoQueue<Obj>,
    store: &Store,
    ops: &[Op],
) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    let mut direct = BTreeMap::new();
    let check_item = |item: &Item<Obj>| {
        if let Item::Batch(events) = item {
            let mut keys: Vec<_> = events.iter().map(|(k, _)| k.as_str()).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), events.len(), "a batch has distinct keys");
        }
        if let Item::Deltas { deltas, .. } = item {
            assert!(!deltas.is_empty());
        }
    };
    let sink: &dyn Sink<Obj> = fifo;
    for op in ops {
        match op {
            Op::Add(k, v) => {
                sink.add(obj(&name(*k), *v)).unwrap();
                direct.insert(name(*k), *v);
            }
            Op::Update(k, v) => {
                sink.update(obj(&name(*k), *v)).unwrap();
                direct.insert(name(*k), *v);
            }
            Op::Delete(k) => {
                // The watch's delete carries the final state; any value keys the same.
                sink.delete(obj(&name(*k), 0)).unwrap();
                direct.remove(&name(*k));
            }
            Op::Replace(list) => {
                let objs = list.iter().map(|(k, v)| obj(&name(*k), *v)).collect();
                sink.replace(ListPart::whole(objs, "1")).unwrap();
                // A list with a key twice: the last one wins, in the store as here.
                direct = list.iter().map(|(k, v)| (name(*k), *v)).collect();
            }
            Op::Resync => sink.resync().unwrap(),
            Op::Pop(n) => {
                for _ in 0..*n {
                    let Some(p) = fifo.try_pop().unwrap() else {
                        break;
                    };
                    check_item(p.item());
                    store.apply(p.item());
                }
            }
        }
    }
    while let Some(p) = fifo.try_pop().unwrap() {
        check_item(p.item());
        store.apply(p.item());
    }
    assert!(fifo.has_synced() || ops.iter().all(|o| matches!(o, Op::Resync | Op::Pop(_))));
    (store.snapshot(), direct)
}

fn view(store: &Arc<Store>) -> Arc<dyn KnownObjects<Obj>> {
    Arc::clone(store) as Arc<dyn KnownObjects<Obj>>
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn delta_fifo_pops_rebuild_the_directly_applied_state(ops in prop::collection::vec(op(), 0..60)) {
        let store = Arc::new(Store::default());
        let fifo = DeltaFifo::new(Some(view(&store)));
        let (got, want) = run(&fifo, &store, &ops);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn in_order_fifo_pops_rebuild_the_directly_applied_state(
        ops in prop::collection::vec(op(), 0..60),
        batch in 1usize..5,
    ) {
        let store = Arc::new(Store::default());
        let fifo = InOrderFifo::builder().known_objects(view(&store)).batch_size(batch).build().unwrap();
        let (got, want) = run(&fifo, &store, &ops);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn atomic_in_order_fifo_pops_rebuild_the_directly_applied_state(
        ops in prop::collection::vec(op(), 0..60),
        batch in 1usize..5,
    ) {
        let store = Store::default();
        let fifo = InOrderFifo::builder().atomic(true).batch_size(batch).build().unwrap();
        let (got, want) = run(&fifo, &store, &ops);
        prop_assert_eq!(got, want);
    }
}
