//! DeltaFIFO and in-order FIFO throughput on client-go's benchmark workload.
//!
//! Workload (one iteration, identical on the Go side, see BENCHMARKS.md):
//! 1. a new FIFO over an empty known-objects store;
//! 2. `replace` with 10 000 objects `default/obj-00000` .. `default/obj-09999`, rv "1";
//! 3. 100 000 `update`s, the j-th of object `j % 10000` with rv `2 + j`;
//! 4. pop until empty, each pop's processing counting its deltas.
//!
//! Objects are built once, outside the measurement; each step hands the FIFO a pointer
//! (`Arc` clone here, a pointer in Go). The FIFO is built and the list cloned in the
//! untimed setup.
//!
//! Names (kept stable for BENCHMARKS.md): `fifo/deltafifo`, `fifo/in_order_fifo`
//! (per-object mode, batches of up to 1000 = client-go's `PopBatch`),
//! `fifo/in_order_fifo_single` (batch size 1 = client-go's `Pop`),
//! `fifo/in_order_fifo_atomic` (atomic mode, batches of up to 1000).

use kinformer_core::ListPart;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_main};
use kinformer_core::{KnownObjects, MetaObject, ObjectKey};
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo, Item};

const KEYS: usize = 10_000;
const UPDATES: usize = 100_000;

struct Obj {
    name: String,
    rv: String,
}

impl MetaObject for Obj {
    fn object_name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn object_namespace(&self) -> Option<&str> {
        Some("default")
    }
    fn object_resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
}

/// The informer's store, empty: the FIFO consults it as the informer's would.
struct EmptyStore;

impl KnownObjects<Obj> for EmptyStore {
    fn list_keys(&self) -> Vec<ObjectKey> {
        Vec::new()
    }
    fn get_by_key(&self, _key: &str) -> Option<Arc<Obj>> {
        None
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

struct Workload {
    list: Vec<Arc<Obj>>,
    updates: Vec<Arc<Obj>>,
}

fn workload() -> Workload {
    let obj = |i: usize, rv: usize| {
        Arc::new(Obj {
            name: format!("obj-{i:05}"),
            rv: rv.to_string(),
        })
    };
    Workload {
        list: (0..KEYS).map(|i| obj(i, 1)).collect(),
        updates: (0..UPDATES).map(|j| obj(j % KEYS, 2 + j)).collect(),
    }
}

fn count(item: &Item<Obj>) -> usize {
    match item {
        Item::Deltas { deltas, .. } => deltas.len(),
        Item::Batch(events) => events.len(),
        Item::ReplacedAll { objects, .. } => objects.len(),
        _ => 1,
    }
}

fn run(fifo: &dyn FifoQueue<Obj>, list: Vec<Arc<Obj>>, updates: &[Arc<Obj>]) -> usize {
    let run = || -> Result<usize, kinformer_core::Error> {
        fifo.replace(ListPart::whole(list, "1"))?;
        for u in updates {
            fifo.update(Arc::clone(u))?;
        }
        let mut seen = 0;
        while !fifo.is_empty() {
            let popped = fifo.pop().map_err(kinformer_core::Error::from)?;
            seen += count(black_box(popped.item()));
        }
        Ok(seen)
    };
    match run() {
        Ok(seen) => seen,
        Err(e) => panic!("benchmark workload failed: {e}"),
    }
}

fn bench(c: &mut Criterion) {
    let w = workload();
    let known = || -> Arc<dyn KnownObjects<Obj>> { Arc::new(EmptyStore) };
    let mut group = c.benchmark_group("fifo");
    group.throughput(Throughput::Elements((KEYS + UPDATES) as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));

    group.bench_function("deltafifo", |b| {
        b.iter_batched(
            || (DeltaFifo::new(Some(known())), w.list.clone()),
            |(fifo, list)| run(&fifo, list, &w.updates),
            BatchSize::LargeInput,
        )
    });
    let in_order = |batch: usize, atomic: bool| {
        let builder = InOrderFifo::builder().batch_size(batch).atomic(atomic);
        let builder = if atomic {
            builder
        } else {
            builder.known_objects(known())
        };
        match builder.build() {
            Ok(f) => f,
            Err(e) => panic!("bad bench configuration: {e}"),
        }
    };
    group.bench_function("in_order_fifo", |b| {
        b.iter_batched(
            || (in_order(1000, false), w.list.clone()),
            |(fifo, list)| run(&fifo, list, &w.updates),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("in_order_fifo_single", |b| {
        b.iter_batched(
            || (in_order(1, false), w.list.clone()),
            |(fifo, list)| run(&fifo, list, &w.updates),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("in_order_fifo_atomic", |b| {
        b.iter_batched(
            || (in_order(1000, true), w.list.clone()),
            |(fifo, list)| run(&fifo, list, &w.updates),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

mod group {
    #![allow(
        missing_docs,
        reason = "criterion_group! generates an undocumented pub fn"
    )]
    criterion::criterion_group!(fifo, super::bench);
}
criterion_main!(group::fifo);
