use std::sync::Arc;

use crate::{Error, ObjectKey};

/// What the reflector writes through: client-go's `ReflectorStore` plus bookmarks.
///
/// A DeltaFIFO, the in-order FIFO or a plain store implements it, so the reflector
/// can feed any of them. Calls come from one reflector task at a time and must not
/// block for long: the reflector calls them between reads of a watch stream.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kinformer_core::{Error, Sink};
///
/// /// Counts what arrives.
/// #[derive(Default)]
/// struct Counter(Mutex<usize>);
/// impl Sink<String> for Counter {
///     fn add(&self, _: Arc<String>) -> Result<(), Error> { *self.0.lock().unwrap() += 1; Ok(()) }
///     fn update(&self, _: Arc<String>) -> Result<(), Error> { Ok(()) }
///     fn delete(&self, _: Arc<String>) -> Result<(), Error> { Ok(()) }
///     fn replace(&self, list: Vec<Arc<String>>, _rv: &str) -> Result<(), Error> {
///         *self.0.lock().unwrap() = list.len();
///         Ok(())
///     }
///     fn resync(&self) -> Result<(), Error> { Ok(()) }
/// }
///
/// let sink: Arc<dyn Sink<String>> = Arc::new(Counter::default());
/// sink.replace(vec![Arc::new("a".into()), Arc::new("b".into())], "10")?;
/// sink.add(Arc::new("c".into()))?;
/// sink.bookmark("11")?; // the default does nothing
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

    /// A full list at `resource_version` replaces everything: objects missing from it
    /// were deleted while nobody watched.
    ///
    /// # Errors
    /// When an object has no valid key or the sink is closed.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), Error>;

    /// Whether the sink takes the list about to come in parts, and if so starts taking it:
    /// the reflector then hands over the list a part at a time ([`replace_part`]) as it
    /// arrives, and ends it with [`replace`] for the rest, which tells the sink the list's
    /// resource version and that objects missing from every part and the rest were deleted.
    /// A call while parts of an earlier list are pending drops that list's end: the
    /// parts already handed over stay, and only the objects of the new list count as
    /// listed when it ends.
    ///
    /// A sink answers `true` when it can apply parts before the list ends without anyone
    /// relying on seeing the list whole: the FIFOs do for the first list, before anything
    /// has synced, so that an informer caches (and a compact store encodes) objects while
    /// the rest still arrives, instead of holding the whole decoded list at once. The
    /// default is `false`: the list comes whole to [`replace`].
    ///
    /// [`replace_part`]: Sink::replace_part
    /// [`replace`]: Sink::replace
    fn begin_list_in_parts(&self) -> bool {
        false
    }

    /// A part of the list begun by [`begin_list_in_parts`](Sink::begin_list_in_parts).
    ///
    /// # Errors
    /// When an object has no valid key or the sink is closed; the default, for sinks that
    /// never take a list in parts, refuses the part.
    fn replace_part(&self, part: Vec<Arc<K>>) -> Result<(), Error> {
        let _ = part;
        Err(Error::Other(
            "this sink takes lists whole: replace_part without begin_list_in_parts".into(),
        ))
    }

    /// Whether the sink takes a relist's unchanged objects as keys
    /// ([`replace_keeping`](Sink::replace_keeping)) instead of objects. The default is
    /// `false`.
    fn keeps_unchanged(&self) -> bool {
        false
    }

    /// A full list, as [`replace`](Sink::replace), of which the objects under the keys in
    /// `unchanged` are the very versions the sink's consumer already holds: the caller
    /// checked their resource versions against it and drops its decoded copies, so that a
    /// relist over a cache that keeps objects encoded does not hold a second, decoded copy
    /// of everything unchanged. Keys in `unchanged` count as listed and keep what is held
    /// (a key no longer held by then is left out, as an object deleted meanwhile).
    ///
    /// # Errors
    /// As [`replace`](Sink::replace); the default, for sinks that do not
    /// [keep unchanged objects](Sink::keeps_unchanged), refuses the list.
    fn replace_keeping(
        &self,
        list: Vec<Arc<K>>,
        unchanged: &[ObjectKey],
        resource_version: &str,
    ) -> Result<(), Error> {
        let _ = (list, unchanged, resource_version);
        Err(Error::Other(
            "this sink takes every listed object: replace_keeping without keeps_unchanged".into(),
        ))
    }

    /// The periodic resync: re-deliver what is known.
    ///
    /// # Errors
    /// When the sink is closed.
    fn resync(&self) -> Result<(), Error>;

    /// The watch moved on to `resource_version` (a bookmark, or any event). Sinks that
    /// track the last synced version override it; the default does nothing.
    ///
    /// # Errors
    /// When the sink is closed.
    fn bookmark(&self, resource_version: &str) -> Result<(), Error> {
        let _ = resource_version;
        Ok(())
    }
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
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), Error> {
        (**self).replace(list, resource_version)
    }
    fn begin_list_in_parts(&self) -> bool {
        (**self).begin_list_in_parts()
    }
    fn replace_part(&self, part: Vec<Arc<K>>) -> Result<(), Error> {
        (**self).replace_part(part)
    }
    fn keeps_unchanged(&self) -> bool {
        (**self).keeps_unchanged()
    }
    fn replace_keeping(
        &self,
        list: Vec<Arc<K>>,
        unchanged: &[ObjectKey],
        resource_version: &str,
    ) -> Result<(), Error> {
        (**self).replace_keeping(list, unchanged, resource_version)
    }
    fn resync(&self) -> Result<(), Error> {
        (**self).resync()
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), Error> {
        (**self).bookmark(resource_version)
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
        fn replace(&self, list: Vec<Arc<u32>>, rv: &str) -> Result<(), Error> {
            self.push(format!("replace {} @{rv}", list.len()))
        }
        fn begin_list_in_parts(&self) -> bool {
            self.push("begin".into()).is_ok()
        }
        fn replace_part(&self, part: Vec<Arc<u32>>) -> Result<(), Error> {
            self.push(format!("part {}", part.len()))
        }
        fn keeps_unchanged(&self) -> bool {
            true
        }
        fn replace_keeping(
            &self,
            list: Vec<Arc<u32>>,
            unchanged: &[ObjectKey],
            rv: &str,
        ) -> Result<(), Error> {
            self.push(format!(
                "replace {} + {} @{rv}",
                list.len(),
                unchanged.len()
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
        assert!(via_arc.begin_list_in_parts());
        via_arc.replace_part(vec![Arc::new(1)]).unwrap();
        via_arc
            .replace(vec![Arc::new(1), Arc::new(2)], "5")
            .unwrap();
        assert!(via_arc.keeps_unchanged());
        via_arc
            .replace_keeping(vec![Arc::new(1)], &[ObjectKey::parse("a").unwrap()], "6")
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
                "begin",
                "part 1",
                "replace 2 @5",
                "replace 1 + 1 @6",
                "add 3",
                "update 3",
                "delete 3",
                "bookmark 9",
                "resync"
            ]
        );
    }

    /// A sink that keeps the defaults takes every list whole: it answers `false` and
    /// refuses a part, so a reflector that asked first never sends one.
    #[test]
    fn a_sink_takes_lists_whole_unless_it_says_otherwise() {
        struct Whole;
        impl Sink<u32> for Whole {
            fn add(&self, _: Arc<u32>) -> Result<(), Error> {
                Ok(())
            }
            fn update(&self, _: Arc<u32>) -> Result<(), Error> {
                Ok(())
            }
            fn delete(&self, _: Arc<u32>) -> Result<(), Error> {
                Ok(())
            }
            fn replace(&self, _: Vec<Arc<u32>>, _: &str) -> Result<(), Error> {
                Ok(())
            }
            fn resync(&self) -> Result<(), Error> {
                Ok(())
            }
        }
        let sink: Arc<dyn Sink<u32>> = Arc::new(Whole);
        assert!(!sink.begin_list_in_parts());
        assert!(matches!(
            sink.replace_part(vec![Arc::new(1)]),
            Err(Error::Other(_))
        ));
        assert!(!sink.keeps_unchanged());
        assert!(matches!(
            sink.replace_keeping(vec![], &[], "1"),
            Err(Error::Other(_))
        ));
    }
}
