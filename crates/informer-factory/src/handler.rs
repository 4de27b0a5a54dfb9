//! Event handlers: the trait, a closure-based implementation and a filtering wrapper.

use std::fmt;
use std::sync::Arc;

use kinformer_core::{DeletedObject, DeltaObject};

/// Receives the notifications of one informer (client-go's `ResourceEventHandler`).
///
/// Each registered handler runs on its own listener thread, one notification at a time,
/// in the order the informer produced them; a slow handler delays only itself, and a
/// panic is caught and logged (the listener goes on with the next notification). Keep
/// handlers short anyway: the usual one enqueues the object's key in a workqueue.
///
/// Every method has an empty default, so a handler implements only what it needs.
pub trait ResourceEventHandler<K> {
    /// An object appeared. `is_in_initial_list` is true for the objects of the first list
    /// and for the replay of the cache that a handler added late receives.
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object changed. With a resync, or a relist that found it unchanged, `old` and
    /// `new` have the same resource version (often they are the same `Arc`).
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object was deleted: its final state, or a tombstone when the deletion was missed
    /// (see [`kinformer_core::deletion_handling_key`]).
    fn on_delete(&self, obj: &DeletedObject<K>) {
        let _ = obj;
    }
}

impl<K, H: ResourceEventHandler<K> + ?Sized> ResourceEventHandler<K> for Arc<H> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new);
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        (**self).on_delete(obj);
    }
}

impl<K, H: ResourceEventHandler<K> + ?Sized> ResourceEventHandler<K> for Box<H> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new);
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        (**self).on_delete(obj);
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&DeletedObject<K>) + Send + Sync>;

/// A handler made of closures (client-go's `ResourceEventHandlerFuncs`); a missing
/// closure ignores its notifications.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_informer_factory::{ResourceEventHandler, ResourceEventHandlerFuncs};
///
/// let h = ResourceEventHandlerFuncs::<String>::new()
///     .add_func(|obj, _initial| assert_eq!(obj.as_str(), "a"))
///     .update_func(|_old, new| assert_eq!(new.as_str(), "b"));
/// h.on_add(&Arc::new("a".to_string()), true);
/// h.on_update(&Arc::new("a".to_string()), &Arc::new("b".to_string()));
/// ```
pub struct ResourceEventHandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for ResourceEventHandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> fmt::Debug for ResourceEventHandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceEventHandlerFuncs")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> ResourceEventHandlerFuncs<K> {
    /// A handler that ignores everything until closures are set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f(obj, is_in_initial_list)` for every add.
    #[must_use]
    pub fn add_func(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Calls `f(old, new)` for every update.
    #[must_use]
    pub fn update_func(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Calls `f(obj)` for every delete.
    #[must_use]
    pub fn delete_func(mut self, f: impl Fn(&DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K> ResourceEventHandler<K> for ResourceEventHandlerFuncs<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

/// Passes on only the objects that `filter` accepts (client-go's
/// `FilteringResourceEventHandler`), so that the wrapped handler sees the filtered set as
/// if it were the whole world:
///
/// | event | filter on old → new | wrapped handler gets |
/// | --- | --- | --- |
/// | add | — → pass | `on_add` |
/// | update | pass → pass | `on_update(old, new)` |
/// | update | pass → fail | `on_delete(old)` (it left the set) |
/// | update | fail → pass | `on_add(new, false)` (it entered the set) |
/// | update | fail → fail | nothing |
/// | delete | pass (the object, or a tombstone's last state) | `on_delete` |
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kinformer_informer_factory::{
///     FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs,
/// };
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let (a, d) = (Arc::clone(&seen), Arc::clone(&seen));
/// let inner = ResourceEventHandlerFuncs::<i32>::new()
///     .add_func(move |o, _| a.lock().unwrap().push(format!("add {o}")))
///     .delete_func(move |o| d.lock().unwrap().push(format!("delete {}", o.object())));
/// let even = FilteringResourceEventHandler::new(|n: &i32| n % 2 == 0, inner);
///
/// even.on_update(&Arc::new(2), &Arc::new(3)); // leaves the set
/// even.on_update(&Arc::new(3), &Arc::new(4)); // enters it
/// assert_eq!(*seen.lock().unwrap(), ["delete 2", "add 4"]);
/// ```
pub struct FilteringResourceEventHandler<K, H> {
    filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    handler: H,
}

impl<K, H: fmt::Debug> fmt::Debug for FilteringResourceEventHandler<K, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringResourceEventHandler")
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl<K, H> FilteringResourceEventHandler<K, H> {
    /// Wraps `handler` so that it only sees objects for which `filter` returns true.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, handler: H) -> Self {
        Self {
            filter: Box::new(filter),
            handler,
        }
    }

    /// The wrapped handler.
    pub fn inner(&self) -> &H {
        &self.handler
    }
}

impl<K, H: ResourceEventHandler<K>> ResourceEventHandler<K>
    for FilteringResourceEventHandler<K, H>
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.handler.on_update(old, new),
            (true, false) => self
                .handler
                .on_delete(&DeltaObject::Object(Arc::clone(old))),
            (false, true) => self.handler.on_add(new, false),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &DeletedObject<K>) {
        if (self.filter)(obj.object()) {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kinformer_core::{DeletedFinalStateUnknown, ObjectKey};

    use super::*;

    /// Records what reaches the wrapped handler.
    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl ResourceEventHandler<i32> for Log {
        fn on_add(&self, obj: &Arc<i32>, initial: bool) {
            self.0.lock().unwrap().push(format!("add {obj} {initial}"));
        }
        fn on_update(&self, old: &Arc<i32>, new: &Arc<i32>) {
            self.0.lock().unwrap().push(format!("update {old}->{new}"));
        }
        fn on_delete(&self, obj: &DeletedObject<i32>) {
            let kind = if obj.tombstone().is_some() {
                "tombstone"
            } else {
                "object"
            };
            self.0
                .lock()
                .unwrap()
                .push(format!("delete {} {kind}", obj.object()));
        }
    }

    fn even() -> FilteringResourceEventHandler<i32, Log> {
        FilteringResourceEventHandler::new(|n: &i32| n % 2 == 0, Log::default())
    }

    fn log(h: &FilteringResourceEventHandler<i32, Log>) -> Vec<String> {
        h.inner().0.lock().unwrap().clone()
    }

    /// Rule 32: pass→fail becomes delete(old), fail→pass becomes add(new).
    #[test]
    fn rule_32_filter_transitions() {
        let h = even();
        h.on_update(&Arc::new(2), &Arc::new(4)); // pass → pass
        h.on_update(&Arc::new(4), &Arc::new(5)); // pass → fail
        h.on_update(&Arc::new(5), &Arc::new(7)); // fail → fail
        h.on_update(&Arc::new(7), &Arc::new(8)); // fail → pass
        assert_eq!(log(&h), ["update 2->4", "delete 4 object", "add 8 false"]);
    }

    #[test]
    fn filter_applies_to_adds_and_deletes_and_tombstones() {
        let h = even();
        h.on_add(&Arc::new(1), true);
        h.on_add(&Arc::new(2), true);
        h.on_delete(&DeltaObject::Object(Arc::new(3)));
        h.on_delete(&DeltaObject::Object(Arc::new(6)));
        let tomb = |n| {
            DeltaObject::Tombstone(DeletedFinalStateUnknown {
                key: ObjectKey::parse("ns/x").unwrap(),
                obj: Arc::new(n),
            })
        };
        h.on_delete(&tomb(9));
        h.on_delete(&tomb(10));
        assert_eq!(
            log(&h),
            ["add 2 true", "delete 6 object", "delete 10 tombstone"]
        );
    }

    #[test]
    fn funcs_call_only_what_is_set() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        let h = ResourceEventHandlerFuncs::<i32>::new().delete_func(move |o| {
            s.lock().unwrap().push(**o.object());
        });
        h.on_add(&Arc::new(1), false);
        h.on_update(&Arc::new(1), &Arc::new(2));
        h.on_delete(&DeltaObject::Object(Arc::new(3)));
        assert_eq!(*seen.lock().unwrap(), [3]);
        assert!(format!("{h:?}").contains("on_delete: true"));
    }
}
