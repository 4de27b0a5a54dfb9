//! Forwarding macros for decorators of the core traits: a type that wraps a [`Sink`](crate::Sink),
//! a [`KnownObjects`](crate::KnownObjects) view or a [`Clock`](crate::Clock) (to count, log or
//! trace some calls) writes the calls it changes and forwards the rest with one macro per
//! trait, so that it cannot forget one. The other crates publish the same for their traits
//! (`forward_fifo_queue!`, `forward_indexer!`, `forward_lister_watcher!`, `forward_queue!`,
//! `forward_lock!`, `forward_event_sink!`).
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use kinformer_core::{Error, ListPart, Sink, forward_sink};
//!
//! /// Counts the lists a sink receives; everything else is the wrapped sink's.
//! struct CountLists<S> {
//!     inner: S,
//!     lists: AtomicUsize,
//! }
//! impl<K, S: Sink<K>> Sink<K> for CountLists<S> {
//!     fn replace(&self, part: ListPart<K>) -> Result<(), Error> {
//!         self.lists.fetch_add(1, Ordering::Relaxed);
//!         self.inner.replace(part)
//!     }
//!     forward_sink!(K, inner: add, update, delete, resync, bookmark);
//! }
//! ```

/// Forwards [`Sink`](crate::Sink) methods to a field: inside the trait's `impl` for a
/// decorator, `forward_sink!(K, field: all)` writes every method as a call of the same method
/// on `self.field`; `forward_sink!(K, field: method, ..)` writes only those named, for a
/// decorator that writes the others itself. `all` is: `add`, `update`, `delete`, `replace`,
/// `resync`, `bookmark`.
#[macro_export]
macro_rules! forward_sink {
    ($item:ty, $field:tt: all) => {
        $crate::forward_sink!($item, $field: add, update, delete, replace, resync, bookmark);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_sink!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, add) => {
        fn add(&self, obj: ::std::sync::Arc<$item>) -> ::std::result::Result<(), $crate::Error> {
            self.$f.add(obj)
        }
    };
    (@method $item:ty, $f:tt, update) => {
        fn update(&self, obj: ::std::sync::Arc<$item>) -> ::std::result::Result<(), $crate::Error> {
            self.$f.update(obj)
        }
    };
    (@method $item:ty, $f:tt, delete) => {
        fn delete(&self, obj: ::std::sync::Arc<$item>) -> ::std::result::Result<(), $crate::Error> {
            self.$f.delete(obj)
        }
    };
    (@method $item:ty, $f:tt, replace) => {
        fn replace(&self, part: $crate::ListPart<$item>) -> ::std::result::Result<(), $crate::Error> {
            self.$f.replace(part)
        }
    };
    (@method $item:ty, $f:tt, resync) => {
        fn resync(&self) -> ::std::result::Result<(), $crate::Error> {
            self.$f.resync()
        }
    };
    (@method $item:ty, $f:tt, bookmark) => {
        fn bookmark(&self, resource_version: &str) -> ::std::result::Result<(), $crate::Error> {
            self.$f.bookmark(resource_version)
        }
    };
}

/// Forwards [`KnownObjects`](crate::KnownObjects) methods to a field: inside the trait's `impl`
/// for a decorator, `forward_known_objects!(K, field: all)` writes every method as a call of
/// the same method on `self.field`; `forward_known_objects!(K, field: method, ..)` writes only
/// those named, for a decorator that writes the others itself. `all` is: `list_keys`,
/// `get_by_key`, `get_shared`, `contains_version`.
#[macro_export]
macro_rules! forward_known_objects {
    ($item:ty, $field:tt: all) => {
        $crate::forward_known_objects!($item, $field: list_keys, get_by_key, get_shared, contains_version);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_known_objects!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, list_keys) => {
        fn list_keys(&self) -> ::std::vec::Vec<$crate::ObjectKey> {
            self.$f.list_keys()
        }
    };
    (@method $item:ty, $f:tt, get_by_key) => {
        fn get_by_key(&self, key: &str) -> ::std::option::Option<::std::sync::Arc<$item>> {
            self.$f.get_by_key(key)
        }
    };
    (@method $item:ty, $f:tt, get_shared) => {
        fn get_shared(&self, key: &str) -> ::std::option::Option<::std::sync::Arc<$item>> {
            self.$f.get_shared(key)
        }
    };
    (@method $item:ty, $f:tt, contains_version) => {
        fn contains_version(&self, key: &str, resource_version: &str) -> bool {
            self.$f.contains_version(key, resource_version)
        }
    };
}

/// Forwards [`Clock`](crate::Clock) methods to a field: inside the trait's `impl` for a
/// decorator, `forward_clock!(field: all)` writes every method as a call of the same method on
/// `self.field`; `forward_clock!(field: method, ..)` writes only those named, for a decorator
/// that writes the others itself. `all` is: `now`, `wall_now`, `sleep_until`, `sleep`,
/// `subscribe`.
#[macro_export]
macro_rules! forward_clock {
    ($field:tt: all) => {
        $crate::forward_clock!($field: now, wall_now, sleep_until, sleep, subscribe);
    };
    ($field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_clock!(@method $field, $method);)+
    };
    (@method $f:tt, now) => {
        fn now(&self) -> ::std::time::Instant {
            self.$f.now()
        }
    };
    (@method $f:tt, wall_now) => {
        fn wall_now(&self) -> ::std::time::SystemTime {
            self.$f.wall_now()
        }
    };
    (@method $f:tt, sleep_until) => {
        fn sleep_until(&self, deadline: ::std::time::Instant) -> $crate::Sleep {
            self.$f.sleep_until(deadline)
        }
    };
    (@method $f:tt, sleep) => {
        fn sleep(&self, duration: ::std::time::Duration) -> $crate::Sleep {
            self.$f.sleep(duration)
        }
    };
    (@method $f:tt, subscribe) => {
        fn subscribe(&self, listener: ::std::sync::Weak<dyn $crate::TimeListener>) -> bool {
            self.$f.subscribe(listener)
        }
    };
}
