//! Property test: any single-threaded sequence of operations gives the same results as a
//! plain model of client-go's queue (a FIFO plus dirty and processing sets), and the delaying
//! queue on a fake clock matches a model of ready times.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use kinformer_workqueue::{DelayingQueue, DelayingWorkQueue, FakeClock, Queue, QueueConfig};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    AddAfter(u8, u16),
    Get,
    Done(u8),
    Step(u16),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6).prop_map(Op::Add),
        2 => (0u8..6, 0u16..50).prop_map(|(k, d)| Op::AddAfter(k, d)),
        4 => Just(Op::Get),
        3 => (0u8..6).prop_map(Op::Done),
        2 => (0u16..60).prop_map(Op::Step),
        1 => Just(Op::ShutDown),
    ]
}

/// client-go's semantics, written as plainly as possible (the reference).
#[derive(Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: HashSet<u8>,
    shutting_down: bool,
    now: u64,
    /// item -> (ready time, insertion sequence)
    waiting: BTreeMap<u8, (u64, u64)>,
    seq: u64,
}

impl Model {
    fn add(&mut self, item: u8) {
        if self.shutting_down || self.dirty.contains(&item) {
            return;
        }
        self.dirty.insert(item);
        if !self.processing.contains(&item) {
            self.queue.push_back(item);
        }
    }
    fn add_after(&mut self, item: u8, delay: u64) {
        if self.shutting_down {
            return;
        }
        if delay == 0 {
            return self.add(item);
        }
        let ready = self.now + delay;
        let seq = self.seq;
        self.seq += 1;
        match self.waiting.get_mut(&item) {
            Some(current) if current.0 <= ready => {}
            Some(current) => *current = (ready, seq),
            None => {
                self.waiting.insert(item, (ready, seq));
            }
        }
    }
    fn step(&mut self, by: u64) {
        self.now += by;
        let mut due: Vec<(u64, u64, u8)> = self
            .waiting
            .iter()
            .filter(|(_, (ready, _))| *ready <= self.now)
            .map(|(item, (ready, seq))| (*ready, *seq, *item))
            .collect();
        due.sort_unstable();
        for (_, _, item) in due {
            self.waiting.remove(&item);
            self.add(item);
        }
    }
    /// `None` when `get` would block.
    fn try_get(&mut self) -> Option<Option<u8>> {
        match self.queue.pop_front() {
            Some(item) => {
                self.processing.insert(item);
                self.dirty.remove(&item);
                Some(Some(item))
            }
            None if self.shutting_down => Some(None),
            None => None,
        }
    }
    fn done(&mut self, item: u8) {
        // Ours differs from client-go only for an item that is not held (client-go would
        // queue a queued item twice); the model follows ours.
        if !self.processing.remove(&item) {
            return;
        }
        if self.dirty.contains(&item) {
            self.queue.push_back(item);
        }
    }
    fn shut_down(&mut self) {
        self.shutting_down = true;
        self.waiting.clear();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn queue_matches_the_client_go_model(ops in prop::collection::vec(op(), 1..120)) {
        let clock = FakeClock::new();
        let queue = DelayingWorkQueue::with_config(QueueConfig::new().clock(clock.clone()));
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Add(item) => {
                    queue.add(item);
                    model.add(item);
                }
                Op::AddAfter(item, delay) => {
                    queue.add_after(item, Duration::from_millis(u64::from(delay)));
                    model.add_after(item, u64::from(delay));
                }
                Op::Get => {
                    if let Some(expected) = model.try_get() {
                        prop_assert_eq!(queue.get(), expected);
                    }
                }
                Op::Done(item) => {
                    queue.done(&item);
                    model.done(item);
                }
                Op::Step(by) => {
                    clock.step(Duration::from_millis(u64::from(by)));
                    model.step(u64::from(by));
                }
                Op::ShutDown => {
                    queue.shut_down();
                    model.shut_down();
                }
            }
            prop_assert_eq!(queue.len(), model.queue.len());
            prop_assert_eq!(queue.waiting_len(), model.waiting.len());
            prop_assert_eq!(queue.shutting_down(), model.shutting_down);
        }
    }
}
