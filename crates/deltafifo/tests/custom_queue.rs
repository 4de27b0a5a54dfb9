//! The queue trait, seen from this crate alone: a consumer loop written against
//! `dyn FifoQueue` (a stand-in for the informer's) runs unchanged on a queue of the user's
//! own and on both FIFOs. The real informer running on a user's FIFO is proven in
//! kinformer-informer-factory's `tests/swap_points.rs`.

use kinformer_core::{ListPart, Listed, WholeList};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::common::*;
use kinformer_core::{Delta, DeltaType, MetaObject, Sink, meta_namespace_key};
use kinformer_deltafifo::{DeltaFifo, Error, FifoQueue, InOrderFifo, Item, PopFuture, Popped};

/// A deliberately simple queue: every write is one event, a replace is an atomic
/// `ReplacedAll`, nothing is coalesced or tracked.
#[derive(Default)]
struct LogQueue {
    state: Mutex<(VecDeque<Item<Obj>>, bool, Vec<Waker>)>,
    lists: WholeList<Obj>,
}

impl LogQueue {
    fn push(&self, item: Item<Obj>) {
        let wakers = {
            let mut st = self.state.lock().unwrap();
            st.0.push_back(item);
            std::mem::take(&mut st.2)
        };
        wakers.into_iter().for_each(Waker::wake);
    }
    fn event(&self, kind: DeltaType, o: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*o)?;
        self.push(Item::Deltas {
            key,
            deltas: vec![Delta::new(kind, o)],
        });
        Ok(())
    }
}

impl Sink<Obj> for LogQueue {
    fn add(&self, o: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.event(DeltaType::Added, o)
    }
    fn update(&self, o: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.event(DeltaType::Updated, o)
    }
    fn delete(&self, o: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.event(DeltaType::Deleted, o)
    }
    fn replace(&self, part: ListPart<Obj>) -> Result<(), kinformer_core::Error> {
        let Some((list, rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let objects = Listed::objects(list)
            .into_iter()
            .map(|o| Ok((meta_namespace_key(&*o)?, o)))
            .collect::<Result<_, kinformer_core::Error>>()?;
        self.push(Item::ReplacedAll {
            objects,
            unchanged: Vec::new(),
            resource_version: rv,
        });
        Ok(())
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        self.push(Item::SyncAll);
        Ok(())
    }
    fn bookmark(&self, _: &str) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
}

impl LogQueue {
    /// Pops the oldest entry, or parks `cx`'s waker while there is none.
    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Result<Popped<'_, Obj>, Error>> {
        let mut st = self.state.lock().unwrap();
        if let Some(item) = st.0.pop_front() {
            return Poll::Ready(Ok(Popped::new(item, false)));
        }
        if st.1 {
            return Poll::Ready(Err(Error::Closed));
        }
        st.2.push(cx.waker().clone());
        Poll::Pending
    }
}

impl FifoQueue<Obj> for LogQueue {
    fn pop_async(&self) -> PopFuture<'_, Obj> {
        PopFuture::from_future(std::future::poll_fn(move |cx| self.poll_pop(cx)))
    }
    fn has_synced(&self) -> bool {
        true
    }
    fn close(&self) {
        let wakers = {
            let mut st = self.state.lock().unwrap();
            st.1 = true;
            std::mem::take(&mut st.2)
        };
        wakers.into_iter().for_each(Waker::wake);
    }
    fn is_closed(&self) -> bool {
        self.state.lock().unwrap().1
    }
    fn len(&self) -> usize {
        self.state.lock().unwrap().0.len()
    }
}

/// What a reflector does, through the sink side of the trait object.
fn reflect(sink: &dyn Sink<Obj>) {
    sink.replace(ListPart::whole(vec![obj("a", 1), obj("b", 1)], "1"))
        .unwrap();
    sink.update(obj("a", 2)).unwrap();
    sink.delete(obj("b", 1)).unwrap();
    sink.add(obj("c", 1)).unwrap();
    sink.resync().unwrap();
}

/// What an informer does, through the queue side: blocking pops until closed.
fn inform(queue: &dyn FifoQueue<Obj>, store: &Store) -> usize {
    let mut pops = 0;
    while let Ok(p) = queue.pop() {
        store.apply(p.item());
        pops += 1;
    }
    pops
}

fn pipeline(queue: Arc<dyn FifoQueue<Obj>>) -> (usize, Vec<(String, u32)>) {
    let sink: Arc<dyn Sink<Obj>> = queue.clone(); // upcast: the reflector's view
    reflect(&*sink);
    queue.close();
    let store = Store::default();
    let pops = inform(&*queue, &store);
    (pops, store.snapshot().into_iter().collect())
}

#[test]
fn a_custom_queue_serves_a_consumer_written_against_the_trait() {
    let want = vec![("a".to_string(), 2), ("c".to_string(), 1)];
    let (pops, got) = pipeline(Arc::new(LogQueue::default()));
    assert_eq!(
        (pops, got.clone()),
        (5, want.clone()),
        "custom: one pop per write"
    );
    let (pops, got) = pipeline(Arc::new(DeltaFifo::new(None)));
    assert_eq!((pops, got), (3, want.clone()), "DeltaFIFO: one pop per key");
    let (pops, got) = pipeline(Arc::new(InOrderFifo::atomic()));
    assert_eq!(
        (pops, got),
        (3, want),
        "atomic: ReplacedAll, batch of 3, SyncAll"
    );
}

#[test]
fn the_ext_methods_work_on_the_custom_queue() {
    let q = LogQueue::default();
    q.add(obj("a", 1)).unwrap();
    let kinds = q.pop_with(|item, initial| (item.kind(), initial)).unwrap();
    assert_eq!(kinds, ("Deltas", false));
    assert!(q.try_pop().unwrap().is_none());
    q.close();
    assert!(matches!(q.try_pop(), Err(Error::Closed)));
    let _ = Obj::object_name; // the test type is a MetaObject, as the FIFOs' default needs
}
