//! Property test: any single-threaded sequence of operations gives the same results as a
//! plain model of client-go's queue (a FIFO plus dirty and processing sets), and the delaying
//! queue on a fake clock matches a model of client-go's ready-time heap (so items due at the
//! same instant fire in client-go's order). The priority queue is checked the same way
//! against a plain model of its own rules (module `priority`).

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
        2 => (0u8..6, delay()).prop_map(|(k, d)| Op::AddAfter(k, d)),
        4 => Just(Op::Get),
        3 => (0u8..6).prop_map(Op::Done),
        2 => step().prop_map(Op::Step),
        1 => Just(Op::ShutDown),
    ]
}

/// Half of the delays and steps are multiples of 10 ms, so that several items often come due
/// at the same instant (where the heap's order shows) and exactly at a step's end.
fn delay() -> impl Strategy<Value = u16> {
    prop_oneof![0u16..50, (0u16..5).prop_map(|d| d * 10)]
}

fn step() -> impl Strategy<Value = u16> {
    prop_oneof![0u16..60, (0u16..6).prop_map(|s| s * 10)]
}

/// client-go's semantics, written as plainly as possible (the reference).
#[derive(Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: HashSet<u8>,
    shutting_down: bool,
    now: u64,
    waiting: GoHeap,
}

/// client-go's `waitForPriorityQueue` under Go's `container/heap`, transcribed literally:
/// entries swap, and every swap updates both entries' index (Go's `waitFor.index`), which
/// `waitingEntryByData` reaches through a pointer and the model through `index`. The queue's
/// own heap moves entries into a hole instead; this checks that it ends in the same order.
#[derive(Default)]
struct GoHeap {
    /// (ready time, item)
    entries: Vec<(u64, u8)>,
    /// item -> its index in `entries`
    index: BTreeMap<u8, usize>,
}

impl GoHeap {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn less(&self, i: usize, j: usize) -> bool {
        self.entries[i].0 < self.entries[j].0
    }
    fn swap(&mut self, i: usize, j: usize) {
        self.entries.swap(i, j);
        self.index.insert(self.entries[i].1, i);
        self.index.insert(self.entries[j].1, j);
    }
    fn up(&mut self, mut j: usize) {
        loop {
            let i = j.saturating_sub(1) / 2; // Go's (j-1)/2 truncates -1/2 to 0
            if i == j || !self.less(j, i) {
                break;
            }
            self.swap(i, j);
            j = i;
        }
    }
    fn down(&mut self, i0: usize, n: usize) -> bool {
        let mut i = i0;
        loop {
            let j1 = 2 * i + 1;
            if j1 >= n {
                break;
            }
            let mut j = j1;
            let j2 = j1 + 1;
            if j2 < n && self.less(j2, j1) {
                j = j2;
            }
            if !self.less(j, i) {
                break;
            }
            self.swap(i, j);
            i = j;
        }
        i > i0
    }
    /// client-go's `insert`.
    fn insert(&mut self, item: u8, ready: u64) {
        if let Some(&i) = self.index.get(&item) {
            if self.entries[i].0 > ready {
                self.entries[i].0 = ready;
                // heap.Fix
                if !self.down(i, self.len()) {
                    self.up(i);
                }
            }
            return;
        }
        // heap.Push
        self.entries.push((ready, item));
        self.index.insert(item, self.len() - 1);
        self.up(self.len() - 1);
    }
    /// heap.Pop
    fn pop(&mut self) -> Option<(u64, u8)> {
        let n = self.len().checked_sub(1)?;
        self.swap(0, n);
        self.down(0, n);
        let entry = self.entries.pop()?;
        self.index.remove(&entry.1);
        Some(entry)
    }
    fn clear(&mut self) {
        self.entries.clear();
        self.index.clear();
    }
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
        self.waiting.insert(item, self.now + delay);
    }
    fn step(&mut self, by: u64) {
        self.now += by;
        // client-go's waiting loop: pop while the top's ready time is not after now.
        while self
            .waiting
            .entries
            .first()
            .is_some_and(|e| e.0 <= self.now)
        {
            if let Some((_, item)) = self.waiting.pop() {
                self.add(item);
            }
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

/// The priority queue against a plain model of its rules (controller-runtime's order, the
/// other queues' dirty, processing and shutdown rules): every entry in one list, the next
/// item found by a scan, ready times on the same fake clock.
mod priority {
    use std::cmp::Reverse;
    use std::collections::BTreeMap;
    use std::time::Duration;

    use kinformer_workqueue::{
        DelayingQueue, FakeClock, ItemExponentialFailureRateLimiter, PriorityWorkQueue, Queue,
        QueueConfig,
    };
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Add(u8, i32),
        AddAfter(u8, u16, i32),
        Get,
        Done(u8),
        Step(u16),
        ShutDown,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..6, -2i32..3).prop_map(|(k, p)| Op::Add(k, p)),
            3 => (0u8..6, super::delay(), -2i32..3).prop_map(|(k, d, p)| Op::AddAfter(k, d, p)),
            4 => Just(Op::Get),
            3 => (0u8..6).prop_map(Op::Done),
            2 => super::step().prop_map(Op::Step),
            1 => Just(Op::ShutDown),
        ]
    }

    /// What is pending for an item: priority, place among its priority, ready time
    /// (`None`: ready).
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Pending {
        priority: i32,
        seq: u64,
        at: Option<u64>,
    }

    #[derive(Debug, Default)]
    struct Model {
        /// item -> (held by a worker, what is pending)
        items: BTreeMap<u8, (bool, Option<Pending>)>,
        seq: u64,
        now: u64,
        shutting_down: bool,
    }

    impl Model {
        fn next_seq(&mut self) -> u64 {
            self.seq += 1;
            self.seq
        }

        fn add(&mut self, item: u8, priority: i32, delay: u64) {
            if self.shutting_down {
                return;
            }
            let at = (delay > 0).then_some(self.now + delay);
            let old = self.items.get(&item).copied();
            let pending = match old {
                None | Some((_, None)) => Pending {
                    priority,
                    seq: self.next_seq(),
                    at,
                },
                Some((_, Some(old))) => {
                    // The earlier ready time (now is the earliest), the higher priority;
                    // a new place when raised or when it becomes ready now.
                    let at = match (old.at, at) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        _ => None,
                    };
                    let raised = priority > old.priority;
                    let seq = if raised || (old.at.is_some() && at.is_none()) {
                        self.next_seq()
                    } else {
                        old.seq
                    };
                    Pending {
                        priority: priority.max(old.priority),
                        seq,
                        at,
                    }
                }
            };
            let held = old.is_some_and(|(held, _)| held);
            self.items.insert(item, (held, Some(pending)));
        }

        /// `None` when `get` would block.
        fn try_get(&mut self) -> Option<Option<(u8, i32)>> {
            let next = self
                .items
                .iter()
                .filter_map(|(item, (held, pending))| match pending {
                    Some(p) if !held && p.at.is_none() => Some((*item, *p)),
                    _ => None,
                })
                .min_by_key(|(_, p)| (Reverse(p.priority), p.seq));
            match next {
                Some((item, p)) => {
                    self.items.insert(item, (true, None));
                    Some(Some((item, p.priority)))
                }
                None if self.shutting_down => Some(None),
                None => None,
            }
        }

        fn done(&mut self, item: u8) {
            match self.items.get(&item).copied() {
                Some((true, None)) => {
                    self.items.remove(&item);
                }
                Some((true, pending)) => {
                    self.items.insert(item, (false, pending));
                }
                _ => {}
            }
        }

        fn step(&mut self, by: u64) {
            self.now += by;
            let mut due: Vec<(u8, Pending)> = self
                .items
                .iter()
                .filter_map(|(item, (_, pending))| match pending {
                    Some(p) if p.at.is_some_and(|at| at <= self.now) => Some((*item, *p)),
                    _ => None,
                })
                .collect();
            due.sort_by_key(|(_, p)| (p.at, Reverse(p.priority), p.seq));
            for (item, p) in due {
                let seq = self.next_seq();
                if let Some((_, pending)) = self.items.get_mut(&item) {
                    *pending = Some(Pending { seq, at: None, ..p });
                }
            }
        }

        fn shut_down(&mut self) {
            self.shutting_down = true;
            self.items.retain(|_, (held, pending)| {
                if pending.is_some_and(|p| p.at.is_some()) {
                    *pending = None;
                }
                *held || pending.is_some()
            });
        }

        fn len(&self) -> usize {
            self.items
                .values()
                .filter(|(held, p)| !held && p.is_some_and(|p| p.at.is_none()))
                .count()
        }

        fn waiting_len(&self) -> usize {
            self.items
                .values()
                .filter(|(_, p)| p.is_some_and(|p| p.at.is_some()))
                .count()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn priority_queue_matches_its_model(ops in prop::collection::vec(op(), 1..120)) {
            let clock = FakeClock::new();
            let queue = PriorityWorkQueue::with_config(
                ItemExponentialFailureRateLimiter::<u8>::new(
                    Duration::from_millis(1),
                    Duration::from_millis(1),
                ),
                QueueConfig::new().clock(clock.clone()),
            );
            let mut model = Model::default();
            for op in ops {
                match op {
                    Op::Add(item, priority) => {
                        queue.add_with_priority(item, priority);
                        model.add(item, priority, 0);
                    }
                    Op::AddAfter(item, delay, priority) => {
                        queue.add_after_with_priority(
                            item,
                            Duration::from_millis(u64::from(delay)),
                            priority,
                        );
                        model.add(item, priority, u64::from(delay));
                    }
                    Op::Get => {
                        if let Some(expected) = model.try_get() {
                            prop_assert_eq!(queue.get_with_priority(), expected);
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
                prop_assert_eq!(queue.len(), model.len());
                prop_assert_eq!(queue.waiting_len(), model.waiting_len());
                prop_assert_eq!(queue.shutting_down(), model.shutting_down);
            }
        }
    }
}
