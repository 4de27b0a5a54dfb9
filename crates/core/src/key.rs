use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use crate::{DeletedObject, Error, MetaObject};

/// The key of an object in a store or queue: `namespace/name`, or `name` for
/// cluster-scoped objects (client-go's `MetaNamespaceKeyFunc`).
///
/// Cloning is a reference-count increment, so keys can travel through queues,
/// indices and handlers without copying the string.
///
/// A key made by [`ObjectKey::new`] or [`ObjectKey::parse`] always splits back into
/// its parts; the constructors refuse names with a `/`, which client-go silently
/// accepts and then cannot split.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// Makes the key of an object with this namespace (`None` or `""` for
    /// cluster-scoped objects) and name.
    ///
    /// # Errors
    /// [`Error::MissingName`] for an empty name, [`Error::SlashInName`] when either
    /// part contains a `/`.
    pub fn new(namespace: Option<&str>, name: &str) -> Result<Self, Error> {
        if name.is_empty() {
            return Err(Error::MissingName);
        }
        if name.contains('/') {
            return Err(Error::SlashInName {
                what: "name",
                value: name.to_owned(),
            });
        }
        match namespace {
            Some(ns) if !ns.is_empty() => {
                if ns.contains('/') {
                    return Err(Error::SlashInName {
                        what: "namespace",
                        value: ns.to_owned(),
                    });
                }
                let mut s = String::with_capacity(ns.len() + 1 + name.len());
                s.push_str(ns);
                s.push('/');
                s.push_str(name);
                Ok(Self(s.into()))
            }
            _ => Ok(Self(name.into())),
        }
    }

    /// Parses a key made by [`ObjectKey::as_str`] or by client-go.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a key with more than one `/`, and
    /// [`Error::MissingName`] for a key with an empty name (`""`, `"ns/"`).
    pub fn parse(key: &str) -> Result<Self, Error> {
        let (namespace, name) = split_key(key)?;
        Self::new(namespace, name)
    }

    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part, or `None` for a cluster-scoped key.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Lets a `HashMap<ObjectKey, _>` be looked up with a `&str`.
impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for ObjectKey {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::parse(s)
    }
}

/// Splits a key into `(namespace, name)`, as client-go's `SplitMetaNamespaceKey`:
/// `"name"` gives `(None, "name")`, `"ns/name"` gives `(Some("ns"), "name")`, and a
/// key with more than one `/` is an error. An empty namespace part (`"/name"`) is
/// `None`, as client-go treats `""` as "no namespace".
///
/// # Errors
/// [`Error::InvalidKey`] when the key has more than one `/`.
pub fn split_key(key: &str) -> Result<(Option<&str>, &str), Error> {
    match key.split_once('/') {
        None => Ok((None, key)),
        Some((_, name)) if name.contains('/') => Err(Error::InvalidKey {
            key: key.to_owned(),
        }),
        Some(("", name)) => Ok((None, name)),
        Some((ns, name)) => Ok((Some(ns), name)),
    }
}

/// The key of an object: client-go's `MetaNamespaceKeyFunc`.
///
/// # Errors
/// [`Error::MissingName`] when the object has no name, [`Error::SlashInName`] when a
/// part contains a `/`.
pub fn meta_namespace_key<O: MetaObject + ?Sized>(obj: &O) -> Result<ObjectKey, Error> {
    let name = obj.object_name().ok_or(Error::MissingName)?;
    ObjectKey::new(obj.object_namespace(), name)
}

/// The key of a deleted object, which may be a tombstone: client-go's
/// `DeletionHandlingMetaNamespaceKeyFunc`. A tombstone gives the key it was stored
/// under, whatever its object says.
///
/// # Errors
/// As [`meta_namespace_key`] for a real object; never for a tombstone.
pub fn deletion_handling_key<K: MetaObject>(obj: &DeletedObject<K>) -> Result<ObjectKey, Error> {
    match obj {
        DeletedObject::Object(o) => meta_namespace_key(&**o),
        DeletedObject::Tombstone(t) => Ok(t.key.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeletedFinalStateUnknown;

    struct Obj(Option<&'static str>, Option<&'static str>);
    impl MetaObject for Obj {
        fn object_name(&self) -> Option<&str> {
            self.1
        }
        fn object_namespace(&self) -> Option<&str> {
            self.0
        }
        fn object_resource_version(&self) -> Option<&str> {
            None
        }
    }

    #[test]
    fn namespaced_key_is_namespace_slash_name() {
        let k = meta_namespace_key(&Obj(Some("ns"), Some("a"))).unwrap();
        assert_eq!(k.as_str(), "ns/a");
        assert_eq!((k.namespace(), k.name()), (Some("ns"), "a"));
    }

    #[test]
    fn cluster_scoped_key_is_name() {
        for ns in [None, Some("")] {
            let k = meta_namespace_key(&Obj(ns, Some("node-1"))).unwrap();
            assert_eq!(k.as_str(), "node-1");
            assert_eq!((k.namespace(), k.name()), (None, "node-1"));
        }
    }

    #[test]
    fn object_without_name_is_an_error() {
        assert!(matches!(
            meta_namespace_key(&Obj(Some("ns"), None)),
            Err(Error::MissingName)
        ));
        assert!(matches!(
            meta_namespace_key(&Obj(Some("ns"), Some(""))),
            Err(Error::MissingName)
        ));
    }

    #[test]
    fn slash_in_a_part_is_an_error() {
        assert!(matches!(
            ObjectKey::new(Some("a/b"), "c"),
            Err(Error::SlashInName {
                what: "namespace",
                ..
            })
        ));
        assert!(matches!(
            ObjectKey::new(None, "b/c"),
            Err(Error::SlashInName { what: "name", .. })
        ));
    }

    #[test]
    fn split_key_follows_client_go() {
        assert_eq!(split_key("name").unwrap(), (None, "name"));
        assert_eq!(split_key("ns/name").unwrap(), (Some("ns"), "name"));
        assert_eq!(split_key("/name").unwrap(), (None, "name"));
        assert_eq!(split_key("").unwrap(), (None, ""));
        assert_eq!(split_key("ns/").unwrap(), (Some("ns"), ""));
    }

    #[test]
    fn split_key_with_more_than_one_slash_is_an_error() {
        for bad in ["a/b/c", "//", "a//b", "/a/"] {
            match split_key(bad) {
                Err(Error::InvalidKey { key }) => assert_eq!(key, bad),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn parse_round_trips_and_rejects_malformed_keys() {
        for good in ["a", "ns/a"] {
            assert_eq!(ObjectKey::parse(good).unwrap().as_str(), good);
        }
        assert_eq!(ObjectKey::parse("/a").unwrap().as_str(), "a");
        assert!(matches!(
            ObjectKey::parse("a/b/c"),
            Err(Error::InvalidKey { .. })
        ));
        assert!(matches!(ObjectKey::parse(""), Err(Error::MissingName)));
        assert!(matches!(
            "ns/".parse::<ObjectKey>(),
            Err(Error::MissingName)
        ));
    }

    #[test]
    fn tombstone_gives_its_stored_key() {
        // The tombstone's object says otherwise: the stored key wins, as in client-go.
        let t = DeletedFinalStateUnknown {
            key: ObjectKey::parse("old-ns/old").unwrap(),
            obj: Arc::new(Obj(Some("ns"), Some("renamed"))),
        };
        let k = deletion_handling_key(&DeletedObject::Tombstone(t)).unwrap();
        assert_eq!(k.as_str(), "old-ns/old");
        let real = DeletedObject::Object(Arc::new(Obj(Some("ns"), Some("a"))));
        assert_eq!(deletion_handling_key(&real).unwrap().as_str(), "ns/a");
    }

    #[test]
    fn str_lookup_in_a_map_by_borrow() {
        let mut m = std::collections::HashMap::new();
        m.insert(ObjectKey::parse("ns/a").unwrap(), 1);
        assert_eq!(m.get("ns/a"), Some(&1));
    }
}
