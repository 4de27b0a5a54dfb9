//! Property test: any single-threaded sequence of operations gives the same results as a
//! plain model of client-go's queue (a FIFO plus dirty and processing sets), and the delaying
//! queue on a fake clock matches a model of client-go's ready-time heap (so items due at the
//! same instant fire in client-go's order). The priority queue is checked the same way
//! against a plain model of its own rules (module `priority`).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use kinformer_workqueue::{
    DelayingQueue, DelayingWorkQueue, FakeClock, Queue, QueueConfig, WorkQueue,
};
use proptest::prelude::*;

use crate::decorators::forward;

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
    fn queue_matches_the_client_go_model(
        ops in prop::collection::vec(op(), 1..120),
        decorated in any::<bool>(),
    ) {
        let clock = FakeClock::new();
        let config = QueueConfig::new().clock(clock.clone());
        // Or each layer behind a decorator that forwards every call (the rules hold
        // through decorators: every call that carries something is required).
        let queue: Box<dyn DelayingQueue<u8>> = if decorated {
            Box::new(forward(DelayingWorkQueue::wrap(
                forward(WorkQueue::with_config(config.clone())),
                config,
            )))
        } else {
            Box::new(DelayingWorkQueue::with_config(config))
        };
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
            prop_assert_eq!(queue.stats().waiting, model.waiting.len());
            prop_assert_eq!(queue.shutting_down(), model.shutting_down);
        }
    }
}

/// The priority queue against a plain model of its rules (controller-runtime's order, the
/// other queues' dirty, processing and shutdown rules, one get in `DEFAULT_FAIR_EVERY` taking
/// the item queued longest, delayed adds kept apart from ready
/// ones as client-go's delaying queue keeps them): every entry in one map, the next item
/// found by a scan, ready times on the same fake clock.
mod priority {
    use std::cmp::Reverse;
    use std::collections::BTreeMap;
    use std::time::Duration;

    use kinformer_workqueue::{
        DEFAULT_FAIR_EVERY, DelayingQueue, DelayingWorkQueue, FakeClock,
        ItemExponentialFailureRateLimiter, PriorityWorkQueue, Queue, QueueConfig,
        RateLimitingQueue, RateLimitingWorkQueue, WorkQueue,
    };
    use proptest::prelude::*;

    use crate::decorators::forward;

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

    /// The priority queue is the three layers over priority storage, so its model is two
    /// independent parts per item: the base queue's entry (queued, or held and dirty, at a
    /// priority and a place among that priority) and the delaying layer's waiting entry
    /// (ready time and priority). A delayed add is never merged into a ready one.
    #[derive(Debug, Default, Clone, Copy)]
    struct Entry {
        held: bool,
        /// Queued (or dirty while held) at (priority, place among its priority, when it
        /// was queued: a raise keeps it).
        queued: Option<(i32, u64, u64)>,
        /// Waiting in the delaying layer: (ready time, priority).
        waiting: Option<(u64, i32)>,
    }

    #[derive(Debug, Default)]
    struct Model {
        items: BTreeMap<u8, Entry>,
        seq: u64,
        now: u64,
        shutting_down: bool,
        /// Gets since the last fair one (every `DEFAULT_FAIR_EVERY`-th get hands out the
        /// item queued longest).
        gets: u32,
    }

    impl Model {
        fn next_seq(&mut self) -> u64 {
            self.seq += 1;
            self.seq
        }

        /// The base queue's add: a queued item keeps its place unless raised (then it goes
        /// behind the items at its new priority); a held one is marked dirty. `seq` is the
        /// place a new entry takes.
        fn add_ready(&mut self, item: u8, priority: i32, seq: u64) {
            let entry = self.items.entry(item).or_default();
            entry.queued = Some(match entry.queued {
                None => (priority, seq, seq),
                Some((old, _, at)) if priority > old => (priority, seq, at),
                Some(kept) => kept,
            });
        }

        fn add(&mut self, item: u8, priority: i32, delay: u64) {
            if self.shutting_down {
                return;
            }
            if delay == 0 {
                let seq = self.next_seq();
                self.add_ready(item, priority, seq);
                return;
            }
            let at = self.now + delay;
            let entry = self.items.entry(item).or_default();
            entry.waiting = Some(match entry.waiting {
                None => (at, priority),
                Some((old_at, old_priority)) => (old_at.min(at), old_priority.max(priority)),
            });
        }

        /// The items `get` may hand out next: the highest priority, the earliest place.
        /// Items readied at one instant share a place (the delaying layer fires them in its
        /// heap's order, client-go's, which this model does not reproduce), so there may
        /// be several.
        fn candidates(&self) -> Vec<(u8, i32)> {
            let ready: Vec<(u8, i32, u64, u64)> = self
                .items
                .iter()
                .filter(|(_, e)| !e.held)
                .filter_map(|(item, e)| e.queued.map(|(p, seq, at)| (*item, p, seq, at)))
                .collect();
            let fair = self.gets + 1 == DEFAULT_FAIR_EVERY;
            // A fair get: the item queued longest. Otherwise priority, then place.
            let rank = |p: i32, seq: u64, at: u64| {
                if fair {
                    (Reverse(0), at)
                } else {
                    (Reverse(p), seq)
                }
            };
            let best = ready
                .iter()
                .map(|(_, p, seq, at)| rank(*p, *seq, *at))
                .min();
            ready
                .into_iter()
                .filter(|(_, p, seq, at)| Some(rank(*p, *seq, *at)) == best)
                .map(|(item, p, _, _)| (item, p))
                .collect()
        }

        fn take(&mut self, item: u8) {
            self.gets = (self.gets + 1) % DEFAULT_FAIR_EVERY;
            if let Some(entry) = self.items.get_mut(&item) {
                entry.held = true;
                entry.queued = None;
            }
        }

        fn done(&mut self, item: u8) {
            let Some(entry) = self.items.get(&item).copied() else {
                return;
            };
            if !entry.held {
                return;
            }
            let entry = self.items.entry(item).or_default();
            entry.held = false;
            if let Some((priority, _, _)) = entry.queued {
                // Dirty: queued again now, behind what is queued.
                let seq = self.next_seq();
                self.items.entry(item).or_default().queued = Some((priority, seq, seq));
            }
            self.forget_empty(item);
        }

        fn step(&mut self, by: u64) {
            self.now += by;
            let mut due: Vec<(u64, u8, i32)> = self
                .items
                .iter()
                .filter_map(|(item, e)| match e.waiting {
                    Some((at, p)) if at <= self.now => Some((at, *item, p)),
                    _ => None,
                })
                .collect();
            due.sort_unstable();
            let mut last_at = None;
            let mut seq = 0;
            for (at, item, priority) in due {
                if last_at != Some(at) {
                    last_at = Some(at);
                    seq = self.next_seq();
                }
                self.items.entry(item).or_default().waiting = None;
                self.add_ready(item, priority, seq);
            }
        }

        fn shut_down(&mut self) {
            self.shutting_down = true;
            let items: Vec<u8> = self.items.keys().copied().collect();
            for item in items {
                self.items.entry(item).or_default().waiting = None;
                self.forget_empty(item);
            }
        }

        fn forget_empty(&mut self, item: u8) {
            if self
                .items
                .get(&item)
                .is_some_and(|e| !e.held && e.queued.is_none() && e.waiting.is_none())
            {
                self.items.remove(&item);
            }
        }

        fn len(&self) -> usize {
            self.items
                .values()
                .filter(|e| !e.held && e.queued.is_some())
                .count()
        }

        fn waiting_len(&self) -> usize {
            self.items.values().filter(|e| e.waiting.is_some()).count()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn priority_queue_matches_its_model(
            ops in prop::collection::vec(op(), 1..120),
            decorated in any::<bool>(),
        ) {
            let clock = FakeClock::new();
            let config = QueueConfig::new().clock(clock.clone());
            let limiter = ItemExponentialFailureRateLimiter::<u8>::new(
                Duration::from_millis(1),
                Duration::from_millis(1),
            );
            // Or its three layers and its limiter each behind a forwarding decorator.
            let queue: Box<dyn RateLimitingQueue<u8>> = if decorated {
                let base = forward(WorkQueue::with_priorities(config.clone()));
                let delaying = forward(DelayingWorkQueue::wrap(base, config));
                Box::new(forward(RateLimitingWorkQueue::wrap(delaying, forward(limiter))))
            } else {
                Box::new(PriorityWorkQueue::with_config(limiter, config))
            };
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
                        let candidates = model.candidates();
                        if !candidates.is_empty() {
                            let got = queue.get_with_priority();
                            prop_assert!(
                                got.is_some_and(|got| candidates.contains(&got)),
                                "got {:?}, expected one of {:?}", got, candidates
                            );
                            if let Some((item, _)) = got {
                                model.take(item);
                            }
                        } else if model.shutting_down {
                            prop_assert_eq!(queue.get_with_priority(), None);
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
                prop_assert_eq!(queue.stats().waiting, model.waiting_len());
                prop_assert_eq!(queue.shutting_down(), model.shutting_down);
            }
        }
    }
}
