use std::fmt;
use std::sync::Arc;

use crate::ObjectKey;

/// What happened to an object, as queued by a FIFO (client-go's `DeltaType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED`, or an add to the FIFO).
    Added,
    /// The object changed (a watch `MODIFIED`).
    Updated,
    /// The object was deleted (a watch `DELETED`, or a tombstone from a relist).
    Deleted,
    /// The object was in a full relist (`Replace`). The informer treats it as an add
    /// or an update depending on whether it already knew the object.
    Replaced,
    /// A periodic resync re-delivered an object that did not change.
    Sync,
}

impl DeltaType {
    /// client-go's spelling of the type (`"Added"`, `"Updated"`, ...), as used in
    /// logs and in the conformance traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "Added",
            Self::Updated => "Updated",
            Self::Deleted => "Deleted",
            Self::Replaced => "Replaced",
            Self::Sync => "Sync",
        }
    }
}

impl fmt::Display for DeltaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tombstone for an object whose deletion was missed: the watch was down while it
/// was deleted and a relist no longer contained it. `obj` is the last state kinformer
/// saw, which may be stale. (client-go's `DeletedFinalStateUnknown`.)
///
/// Unlike client-go, the object is always present: the FIFOs take it from their own
/// queue or from the store ([`KnownObjects`](crate::KnownObjects)); a key the store no
/// longer holds by then needs no tombstone, as its deletion was already delivered.
pub struct DeletedFinalStateUnknown<K> {
    /// The key the object was stored under.
    pub key: ObjectKey,
    /// The last known state of the object.
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: Arc::clone(&self.obj),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeletedFinalStateUnknown<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeletedFinalStateUnknown")
            .field("key", &self.key)
            .field("obj", &self.obj)
            .finish()
    }
}

/// The object a delta carries: a real object, or a tombstone for a missed deletion.
pub enum DeltaObject<K> {
    /// The object as the API server sent it (after any transform).
    Object(Arc<K>),
    /// A missed deletion found by a relist.
    Tombstone(DeletedFinalStateUnknown<K>),
}

/// What a delete handler receives: the deleted object, or a tombstone when the
/// deletion was missed. Use [`deletion_handling_key`](crate::deletion_handling_key) to
/// get its key either way.
pub type DeletedObject<K> = DeltaObject<K>;

impl<K> DeltaObject<K> {
    /// The object, whether real or the last known state inside a tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(o) => o,
            Self::Tombstone(t) => &t.obj,
        }
    }

    /// The tombstone, if this is one.
    pub fn tombstone(&self) -> Option<&DeletedFinalStateUnknown<K>> {
        match self {
            Self::Object(_) => None,
            Self::Tombstone(t) => Some(t),
        }
    }
}

impl<K> Clone for DeltaObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(Arc::clone(o)),
            Self::Tombstone(t) => Self::Tombstone(t.clone()),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeltaObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Object(o) => f.debug_tuple("Object").field(o).finish(),
            Self::Tombstone(t) => f.debug_tuple("Tombstone").field(t).finish(),
        }
    }
}

/// One change to one object (client-go's `Delta`).
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object after the change (for a deletion: its last state, or a tombstone).
    pub object: DeltaObject<K>,
}

impl<K> Delta<K> {
    /// A delta carrying a real object.
    pub fn new(kind: DeltaType, obj: Arc<K>) -> Self {
        Self {
            kind,
            object: DeltaObject::Object(obj),
        }
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind,
            object: self.object.clone(),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Delta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delta")
            .field("kind", &self.kind)
            .field("object", &self.object)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloning_a_delta_shares_the_object() {
        let obj = Arc::new(String::from("pod"));
        let d = Delta::new(DeltaType::Added, Arc::clone(&obj));
        let c = d.clone();
        assert!(Arc::ptr_eq(c.object.object(), &obj));
        assert_eq!(Arc::strong_count(&obj), 3);
        assert!(c.object.tombstone().is_none());
    }

    #[test]
    fn tombstone_exposes_last_known_object() {
        let obj = Arc::new(String::from("last"));
        let t = DeltaObject::Tombstone(DeletedFinalStateUnknown {
            key: ObjectKey::parse("ns/a").unwrap(),
            obj: Arc::clone(&obj),
        });
        assert!(Arc::ptr_eq(t.object(), &obj));
        assert_eq!(t.tombstone().map(|t| t.key.as_str()), Some("ns/a"));
    }

    #[test]
    fn delta_type_spelling_matches_client_go() {
        let all = [
            DeltaType::Added,
            DeltaType::Updated,
            DeltaType::Deleted,
            DeltaType::Replaced,
            DeltaType::Sync,
        ];
        let names: Vec<_> = all.iter().map(|t| t.to_string()).collect();
        assert_eq!(names, ["Added", "Updated", "Deleted", "Replaced", "Sync"]);
    }
}
