use std::sync::{Arc, Mutex, PoisonError};

use crate::{Error, KnownObjects, ObjectKey};

/// What the reflector writes through: client-go's `ReflectorStore` plus bookmarks.
///
/// A DeltaFIFO, the in-order FIFO or a plain store implements it, so the reflector
/// can feed any of them. Calls come from one reflector task at a time and must not
/// block for long: the reflector calls them between reads of a watch stream.
///
/// Every method is what it says for every sink; nothing is asked first. A list comes
/// to [`replace`](Sink::replace) in parts as it arrives ([`ListPart`]), and its objects
/// the consumer's cache holds already come as [`Listed::Unchanged`]: a sink that applies
/// lists whole gathers the parts ([`WholeList`]), one that needs every object reads an
/// unchanged one from the cache ([`Listed::into_object`]). So a wrapper that forwards
/// the six methods keeps everything the sink it wraps does.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kinformer_core::{Error, ListPart, Sink, WholeList};
///
/// /// Counts what arrives.
/// #[derive(Default)]
/// struct Counter {
///     count: Mutex<usize>,
///     lists: WholeList<String>,
/// }
/// impl Sink<String> for Counter {
///     fn add(&self, _: Arc<String>) -> Result<(), Error> { *self.count.lock().unwrap() += 1; Ok(()) }
///     fn update(&self, _: Arc<String>) -> Result<(), Error> { Ok(()) }
///     fn delete(&self, _: Arc<String>) -> Result<(), Error> { Ok(()) }
///     fn replace(&self, part: ListPart<String>) -> Result<(), Error> {
///         if let Some((list, _resource_version)) = self.lists.gather(part) {
///             *self.count.lock().unwrap() = list.len();
///         }
///         Ok(())
///     }
///     fn resync(&self) -> Result<(), Error> { Ok(()) }
///     fn bookmark(&self, _resource_version: &str) -> Result<(), Error> { Ok(()) }
/// }
///
/// let counter = Arc::new(Counter::default());
/// let sink: Arc<dyn Sink<String>> = counter.clone();
/// sink.replace(ListPart::whole(vec![Arc::new("a".into()), Arc::new("b".into())], "10"))?;
/// sink.add(Arc::new("c".into()))?;
/// assert_eq!(*counter.count.lock().unwrap(), 3);
/// # Ok::<(), Error>(())
/// ```
pub trait Sink<K>: Send + Sync {
    /// An object was created.
    ///
    /// # Errors
    /// When the object has no valid key or the sink is closed.
    fn add(&self, obj: Arc<K>) -> Result<(), Error>;

    /// An object changed.
    ///
    /// # Errors
    /// When the object has no valid key or the sink is closed.
    fn update(&self, obj: Arc<K>) -> Result<(), Error>;

    /// An object was deleted; `obj` is its final state.
    ///
    /// # Errors
    /// When the object has no valid key or the sink is closed.
    fn delete(&self, obj: Arc<K>) -> Result<(), Error>;

    /// A full list, or a part of one ([`ListPart`]). When the part that ends the list
    /// arrives, the list replaces everything: objects missing from every part of it were
    /// deleted while nobody watched. The reflector hands a list over as it arrives (each
    /// page of a paged list, each [`ListPart`] of a streaming list), so that a sink may
    /// apply parts before the list ends (the in-order FIFO does for the first list, so an
    /// informer's cache fills while the rest arrives); a sink that applies lists whole
    /// gathers them with a [`WholeList`].
    ///
    /// # Errors
    /// When an object has no valid key or the sink is closed.
    fn replace(&self, part: ListPart<K>) -> Result<(), Error>;

    /// The periodic resync: re-deliver what is known.
    ///
    /// # Errors
    /// When the sink is closed.
    fn resync(&self) -> Result<(), Error>;

    /// The watch moved on to `resource_version` (a bookmark, or any event). A sink that
    /// tracks the last synced version records it; others return `Ok(())`. Required, like
    /// the rest, so that a wrapper cannot lose it by forwarding only what it must.
    ///
    /// # Errors
    /// When the sink is closed.
    fn bookmark(&self, resource_version: &str) -> Result<(), Error>;
}

impl<K, S: Sink<K> + ?Sized> Sink<K> for Arc<S> {
    fn add(&self, obj: Arc<K>) -> Result<(), Error> {
        (**self).add(obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), Error> {
        (**self).update(obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), Error> {
        (**self).delete(obj)
    }
    fn replace(&self, part: ListPart<K>) -> Result<(), Error> {
        (**self).replace(part)
    }
    fn resync(&self) -> Result<(), Error> {
        (**self).resync()
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), Error> {
        (**self).bookmark(resource_version)
    }
}

/// A list handed to [`Sink::replace`], or a part of one.
///
/// A list is one or more parts: the first says it [`starts`](Self::starts) the list
/// (any list not ended before it was lost midway, and its pending parts are dropped),
/// the last carries the list's resource version ([`end`](Self::end)). A list that comes
/// whole is one part that does both ([`ListPart::whole`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ListPart<K> {
    /// The part's objects, in list order.
    pub items: Vec<Listed<K>>,
    /// This part starts a list.
    pub starts: bool,
    /// On the part that ends the list: the list's `resourceVersion`.
    pub end: Option<String>,
}

impl<K> ListPart<K> {
    /// A whole list at `resource_version`.
    pub fn whole(objects: Vec<Arc<K>>, resource_version: impl Into<String>) -> Self {
        Self::new(
            objects.into_iter().map(Listed::Object).collect(),
            true,
            Some(resource_version.into()),
        )
    }

    /// A part: `starts` the list or not, `end`s it (with its resource version) or not.
    pub fn new(items: Vec<Listed<K>>, starts: bool, end: Option<String>) -> Self {
        Self { items, starts, end }
    }
}

/// One object of a list ([`ListPart`]).
#[derive(Debug)]
pub enum Listed<K> {
    /// The object as the server listed it (transformed).
    Object(Arc<K>),
    /// An object the consumer's cache holds at the listed version: the reflector compared
    /// resource versions with the cache and dropped the copy it had decoded, so that a
    /// relist does not hold a second copy of everything unchanged.
    Unchanged(Unchanged<K>),
}

impl<K> Clone for Listed<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(Arc::clone(o)),
            Self::Unchanged(u) => Self::Unchanged(u.clone()),
        }
    }
}

impl<K> Listed<K> {
    /// The object: as listed, or for an unchanged one [`Unchanged::object`]; `None` when
    /// that has none (deleted meanwhile: then it counts as not listed).
    pub fn into_object(self) -> Option<Arc<K>> {
        match self {
            Self::Object(o) => Some(o),
            Self::Unchanged(u) => u.object(),
        }
    }

    /// The same item as it should wait for the end of its list: an unchanged one without
    /// its listed copy when the cache can hand out its own ([`Unchanged::without_copy`]
    /// drops it in any case). [`WholeList`] gathers items this way.
    #[must_use]
    pub fn lightened(self) -> Self {
        match self {
            Self::Object(o) => Self::Object(o),
            Self::Unchanged(u) => Self::Unchanged(u.lightened()),
        }
    }

    /// The listed objects, and the keys of the unchanged ones: what a sink that is the
    /// cache itself needs (it keeps its entries under those keys).
    pub fn split(list: Vec<Self>) -> (Vec<Arc<K>>, Vec<ObjectKey>) {
        let mut objects = Vec::with_capacity(list.len());
        let mut unchanged = Vec::new();
        for item in list {
            match item {
                Self::Object(o) => objects.push(o),
                Self::Unchanged(u) => unchanged.push(u.key),
            }
        }
        (objects, unchanged)
    }

    /// Every object ([`into_object`](Self::into_object); those without one left out):
    /// what a sink that needs every object does with a list.
    pub fn objects(list: Vec<Self>) -> Vec<Arc<K>> {
        list.into_iter().filter_map(Self::into_object).collect()
    }
}

/// A listed object the consumer's cache holds at the listed version
/// ([`Listed::Unchanged`]): its key, the cache to read it from, and (from the reflector)
/// the copy it listed, until a sink that keeps its own entry drops it.
pub struct Unchanged<K> {
    key: ObjectKey,
    cache: Arc<dyn KnownObjects<K>>,
    listed: Option<Arc<K>>,
}

impl<K> Clone for Unchanged<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            cache: Arc::clone(&self.cache),
            listed: self.listed.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Unchanged<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Unchanged").field(&self.key).finish()
    }
}

impl<K> Unchanged<K> {
    /// The object under `key` in `cache`, listed at the version the cache holds.
    pub fn new(key: ObjectKey, cache: Arc<dyn KnownObjects<K>>) -> Self {
        Self {
            key,
            cache,
            listed: None,
        }
    }

    /// The same, with the copy that was listed: what [`object`](Self::object) falls back
    /// to when the cache cannot hand out its own without making one.
    #[must_use]
    pub fn with_listed(mut self, listed: Arc<K>) -> Self {
        self.listed = Some(listed);
        self
    }

    /// The object's key.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The same, without the listed copy: for a sink that keeps the cache's entry (the
    /// atomic FIFO, a store), which never reads the copy, so that a list gathered until it
    /// ends does not hold a second copy of everything unchanged.
    #[must_use]
    pub fn without_copy(mut self) -> Self {
        self.listed = None;
        self
    }

    /// The same, without the listed copy when the cache can hand out its own allocation
    /// ([`KnownObjects::get_shared`], what [`object`](Self::object) takes first): the copy
    /// would only be dropped later.
    #[must_use]
    fn lightened(self) -> Self {
        if self.listed.is_some() && self.cache.get_shared(self.key.as_str()).is_some() {
            self.without_copy()
        } else {
            self
        }
    }

    /// The object: the cache's own allocation when it can hand it out as it is
    /// ([`KnownObjects::get_shared`]: the decoded store), so that nothing holds a second
    /// copy; else the listed copy; else read from the cache (for a store that keeps
    /// objects encoded, a decoded copy). `None` only when there is no listed copy and the
    /// cache no longer holds the object. A sink that is the cache itself keeps its entry
    /// instead. Call it outside any lock of the cache's.
    pub fn object(&self) -> Option<Arc<K>> {
        self.cache
            .get_shared(self.key.as_str())
            .or_else(|| self.listed.clone())
            .or_else(|| self.cache.get_by_key(self.key.as_str()))
    }
}

/// Gathers the parts of a list for a sink that applies lists whole (see
/// [`Sink::replace`]).
pub struct WholeList<K> {
    pending: Mutex<Vec<Listed<K>>>,
}

impl<K> Default for WholeList<K> {
    fn default() -> Self {
        Self {
            pending: Mutex::new(Vec::new()),
        }
    }
}

impl<K> std::fmt::Debug for WholeList<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WholeList").finish_non_exhaustive()
    }
}

impl<K> WholeList<K> {
    /// Adds `part` to the list under way (a part that starts a list drops what an earlier,
    /// unended list left); once `part` ends the list: the whole list and its resource
    /// version. Items wait [`lightened`](Listed::lightened): a relist holds no second copy
    /// of what the cache can hand out.
    pub fn gather(&self, part: ListPart<K>) -> Option<(Vec<Listed<K>>, String)> {
        let ListPart { items, starts, end } = part;
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if starts {
            pending.clear();
        }
        match end {
            None => {
                pending.extend(items.into_iter().map(Listed::lightened));
                None
            }
            Some(rv) if pending.is_empty() => Some((items, rv)),
            Some(rv) => {
                let mut list = std::mem::take(&mut *pending);
                list.extend(items);
                Some((list, rv))
            }
        }
    }
}

/// Changes an object from the server once, before it is stored (client-go's
/// `TransformFunc`): typically strips fields the program never reads, such as
/// `managedFields`, to save memory. The reflector (`Reflector::transform`) and the FIFOs
/// (their builders' `transform`) take one.
///
/// It gets the only reference to a freshly decoded object as a rule, so `Arc::make_mut`
/// or `Arc::try_unwrap` edits in place without a copy. An error refuses the object.
pub type TransformFn<K> = Arc<dyn Fn(Arc<K>) -> Result<Arc<K>, crate::BoxError> + Send + Sync>;

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records every call, so a test can check what went through `dyn Sink`.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Recorder {
        fn push(&self, s: String) -> Result<(), Error> {
            self.0.lock().map_err(|_| Error::Closed)?.push(s);
            Ok(())
        }
    }

    impl Sink<u32> for Recorder {
        fn add(&self, obj: Arc<u32>) -> Result<(), Error> {
            self.push(format!("add {obj}"))
        }
        fn update(&self, obj: Arc<u32>) -> Result<(), Error> {
            self.push(format!("update {obj}"))
        }
        fn delete(&self, obj: Arc<u32>) -> Result<(), Error> {
            self.push(format!("delete {obj}"))
        }
        fn replace(&self, part: ListPart<u32>) -> Result<(), Error> {
            self.push(format!(
                "replace {}{}{}",
                part.items.len(),
                if part.starts { " starts" } else { "" },
                part.end.map(|rv| format!(" @{rv}")).unwrap_or_default()
            ))
        }
        fn resync(&self) -> Result<(), Error> {
            self.push("resync".into())
        }
        fn bookmark(&self, rv: &str) -> Result<(), Error> {
            self.push(format!("bookmark {rv}"))
        }
    }

    #[test]
    fn a_sink_behind_arc_dyn_receives_every_call_in_order() {
        let rec = Arc::new(Recorder::default());
        let sink: Arc<dyn Sink<u32>> = rec.clone();
        let via_arc: Arc<Arc<dyn Sink<u32>>> = Arc::new(sink);
        via_arc
            .replace(ListPart::new(vec![Listed::Object(Arc::new(1))], true, None))
            .unwrap();
        via_arc
            .replace(ListPart::whole(vec![Arc::new(1), Arc::new(2)], "5"))
            .unwrap();
        via_arc.add(Arc::new(3)).unwrap();
        via_arc.update(Arc::new(3)).unwrap();
        via_arc.delete(Arc::new(3)).unwrap();
        via_arc.bookmark("9").unwrap();
        via_arc.resync().unwrap();
        let got = rec.0.lock().unwrap().clone();
        assert_eq!(
            got,
            [
                "replace 1 starts",
                "replace 2 starts @5",
                "add 3",
                "update 3",
                "delete 3",
                "bookmark 9",
                "resync"
            ]
        );
    }

    struct Cache;
    impl KnownObjects<u32> for Cache {
        fn list_keys(&self) -> Vec<ObjectKey> {
            vec![ObjectKey::parse("a").unwrap()]
        }
        fn get_by_key(&self, key: &str) -> Option<Arc<u32>> {
            (key == "a").then(|| Arc::new(7))
        }
        fn get_shared(&self, key: &str) -> Option<Arc<u32>> {
            self.get_by_key(key)
        }
        fn contains_version(&self, _: &str, _: &str) -> bool {
            false
        }
    }

    fn values(list: Vec<Listed<u32>>) -> Vec<Option<u32>> {
        list.into_iter()
            .map(|l| l.into_object().map(|o| *o))
            .collect()
    }

    #[test]
    fn a_whole_list_gathers_its_parts_and_a_new_list_drops_an_unended_one() {
        let lists = WholeList::default();
        let obj = |n| Listed::Object(Arc::new(n));
        assert!(
            lists
                .gather(ListPart::new(vec![obj(1)], true, None))
                .is_none()
        );
        // Lost midway: the next list starts over.
        assert!(
            lists
                .gather(ListPart::new(vec![obj(2)], true, None))
                .is_none()
        );
        assert!(
            lists
                .gather(ListPart::new(vec![obj(3)], false, None))
                .is_none()
        );
        let cache: Arc<dyn KnownObjects<u32>> = Arc::new(Cache);
        let unchanged = |k| {
            Listed::Unchanged(Unchanged::new(
                ObjectKey::parse(k).unwrap(),
                Arc::clone(&cache),
            ))
        };
        let (list, rv) = lists
            .gather(ListPart::new(
                vec![unchanged("a"), unchanged("gone")],
                false,
                Some("9".into()),
            ))
            .unwrap();
        assert_eq!(rv, "9");
        assert_eq!(values(list), [Some(2), Some(3), Some(7), None]);
        let (list, rv) = lists
            .gather(ListPart::whole(vec![Arc::new(4)], "10"))
            .unwrap();
        assert_eq!((values(list), rv.as_str()), (vec![Some(4)], "10"));
    }
}
