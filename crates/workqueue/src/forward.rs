//! Forwarding helpers for decorators: a queue of your own that wraps another (to count, log,
//! trace or filter some calls) writes the calls it changes and forwards the rest with one
//! macro per trait, so that it cannot forget one. Every method that carries a priority or a
//! statistic is required (see the crate docs' rule for provided methods), so a decorator that
//! forwards with these macros keeps the queue's order, priorities and metrics.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use kinformer_workqueue::{
//!     LOW_PRIORITY, PriorityWorkQueue, Queue, QueueConfig, default_controller_rate_limiter,
//!     forward_delaying_queue, forward_queue, forward_rate_limiting_queue,
//! };
//!
//! /// Counts adds; everything else is the wrapped queue's.
//! struct CountAdds<Q> {
//!     inner: Q,
//!     adds: AtomicUsize,
//! }
//! impl<Q: Queue<String>> Queue<String> for CountAdds<Q> {
//!     fn add(&self, item: String) {
//!         self.adds.fetch_add(1, Ordering::Relaxed);
//!         self.inner.add(item);
//!     }
//!     forward_queue!(String, inner: add_with_priority, len, is_empty, get, get_async,
//!         get_with_priority, get_async_with_priority, done, shut_down, shut_down_with_drain,
//!         shutting_down, stats);
//! }
//! # use kinformer_workqueue::{DelayingQueue, RateLimitingQueue};
//! impl<Q: DelayingQueue<String>> DelayingQueue<String> for CountAdds<Q> {
//!     forward_delaying_queue!(String, inner: all);
//! }
//! impl<Q: RateLimitingQueue<String>> RateLimitingQueue<String> for CountAdds<Q> {
//!     forward_rate_limiting_queue!(String, inner: all);
//! }
//!
//! let queue = CountAdds {
//!     inner: PriorityWorkQueue::with_config(
//!         default_controller_rate_limiter(),
//!         QueueConfig::new().name("counted"),
//!     ),
//!     adds: AtomicUsize::new(0),
//! };
//! queue.add_with_priority("initial".to_owned(), LOW_PRIORITY);
//! queue.add("change".to_owned());
//! // The priority queue's order and name are kept.
//! assert_eq!(queue.get_with_priority(), Some(("change".to_owned(), 0)));
//! assert_eq!(queue.stats().name, "counted");
//! assert_eq!(queue.adds.load(Ordering::Relaxed), 1);
//! ```

/// Forwards [`Queue`](crate::Queue) methods to a field: inside an
/// `impl Queue<Item> for Decorator`, `forward_queue!(Item, field: method, method, ..)`
/// writes each named method as a call of the same method on `self.field`; `all` names every
/// method (for a decorator that changes nothing here). See the [module docs](crate::forward).
#[macro_export]
macro_rules! forward_queue {
    ($item:ty, $field:tt: all) => {
        $crate::forward_queue!($item, $field: add, add_with_priority, len, is_empty, get,
            get_async, get_with_priority, get_async_with_priority, done, shut_down,
            shut_down_with_drain, shutting_down, stats);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_queue!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, add) => {
        fn add(&self, item: $item) { self.$f.add(item) }
    };
    (@method $item:ty, $f:tt, add_with_priority) => {
        fn add_with_priority(&self, item: $item, priority: i32) {
            self.$f.add_with_priority(item, priority)
        }
    };
    (@method $item:ty, $f:tt, len) => {
        fn len(&self) -> usize { self.$f.len() }
    };
    (@method $item:ty, $f:tt, is_empty) => {
        fn is_empty(&self) -> bool { self.$f.is_empty() }
    };
    (@method $item:ty, $f:tt, get) => {
        fn get(&self) -> Option<$item> { self.$f.get() }
    };
    (@method $item:ty, $f:tt, get_async) => {
        fn get_async(&self) -> $crate::GetFuture<'_, $item> { self.$f.get_async() }
    };
    (@method $item:ty, $f:tt, get_with_priority) => {
        fn get_with_priority(&self) -> Option<($item, i32)> { self.$f.get_with_priority() }
    };
    (@method $item:ty, $f:tt, get_async_with_priority) => {
        fn get_async_with_priority(&self) -> $crate::GetFuture<'_, ($item, i32)> {
            self.$f.get_async_with_priority()
        }
    };
    (@method $item:ty, $f:tt, done) => {
        fn done(&self, item: &$item) { self.$f.done(item) }
    };
    (@method $item:ty, $f:tt, shut_down) => {
        fn shut_down(&self) { self.$f.shut_down() }
    };
    (@method $item:ty, $f:tt, shut_down_with_drain) => {
        fn shut_down_with_drain(&self) { self.$f.shut_down_with_drain() }
    };
    (@method $item:ty, $f:tt, shutting_down) => {
        fn shutting_down(&self) -> bool { self.$f.shutting_down() }
    };
    (@method $item:ty, $f:tt, stats) => {
        fn stats(&self) -> $crate::QueueStats { self.$f.stats() }
    };
}

/// [`forward_queue!`](crate::forward_queue) for [`DelayingQueue`](crate::DelayingQueue):
/// `add_after`, `add_after_with_priority`, or `all`.
#[macro_export]
macro_rules! forward_delaying_queue {
    ($item:ty, $field:tt: all) => {
        $crate::forward_delaying_queue!($item, $field: add_after, add_after_with_priority);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_delaying_queue!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, add_after) => {
        fn add_after(&self, item: $item, delay: ::std::time::Duration) {
            self.$f.add_after(item, delay)
        }
    };
    (@method $item:ty, $f:tt, add_after_with_priority) => {
        fn add_after_with_priority(&self, item: $item, delay: ::std::time::Duration, priority: i32) {
            self.$f.add_after_with_priority(item, delay, priority)
        }
    };
}

/// [`forward_queue!`](crate::forward_queue) for
/// [`RateLimitingQueue`](crate::RateLimitingQueue): `add_rate_limited`,
/// `add_rate_limited_with_priority`, `forget`, `num_requeues`, or `all`.
#[macro_export]
macro_rules! forward_rate_limiting_queue {
    ($item:ty, $field:tt: all) => {
        $crate::forward_rate_limiting_queue!($item, $field: add_rate_limited,
            add_rate_limited_with_priority, forget, num_requeues);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_rate_limiting_queue!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, add_rate_limited) => {
        fn add_rate_limited(&self, item: $item) { self.$f.add_rate_limited(item) }
    };
    (@method $item:ty, $f:tt, add_rate_limited_with_priority) => {
        fn add_rate_limited_with_priority(&self, item: $item, priority: i32) {
            self.$f.add_rate_limited_with_priority(item, priority)
        }
    };
    (@method $item:ty, $f:tt, forget) => {
        fn forget(&self, item: &$item) { self.$f.forget(item) }
    };
    (@method $item:ty, $f:tt, num_requeues) => {
        fn num_requeues(&self, item: &$item) -> usize { self.$f.num_requeues(item) }
    };
}

/// [`forward_queue!`](crate::forward_queue) for [`RateLimiter`](crate::RateLimiter): `when`,
/// `forget`, `num_requeues`, or `all`.
#[macro_export]
macro_rules! forward_rate_limiter {
    ($item:ty, $field:tt: all) => {
        $crate::forward_rate_limiter!($item, $field: when, forget, num_requeues);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_rate_limiter!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, when) => {
        fn when(&self, item: &$item) -> ::std::time::Duration { self.$f.when(item) }
    };
    (@method $item:ty, $f:tt, forget) => {
        fn forget(&self, item: &$item) { self.$f.forget(item) }
    };
    (@method $item:ty, $f:tt, num_requeues) => {
        fn num_requeues(&self, item: &$item) -> usize { self.$f.num_requeues(item) }
    };
}
