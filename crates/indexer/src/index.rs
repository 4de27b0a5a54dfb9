//! Key functions and index functions.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kinformer_core::MetaObject;

use kinformer_core::BoxError;

/// The name of the built-in namespace index (client-go's `NamespaceIndex`), which
/// [`Lister::namespaced`](crate::Lister::namespaced) queries.
pub const NAMESPACE_INDEX: &str = "namespace";

/// Named index functions (client-go's `Indexers`). A `BTreeMap`, so iteration (and so
/// back-filling and error messages) is in name order.
pub type Indexers<K> = BTreeMap<String, IndexFunc<K>>;

type DynIndexFn<K> = dyn Fn(&K) -> Result<Vec<String>, BoxError> + Send + Sync;
type DynSingleFn<K> = dyn for<'a> Fn(&'a K) -> Option<&'a str> + Send + Sync;

/// Computes the indexed values of an object (client-go's `IndexFunc`): zero, one or many
/// strings. An object is listed under each value it returns; returning none leaves it out
/// of that index.
///
/// Cloning shares the function. An index function runs while the store's write lock is
/// held, so it must be quick, must not block, and must not call back into the store.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_indexer::IndexFunc;
///
/// // The reference article's `byNode` index: one value, borrowed from the pod.
/// let by_node = IndexFunc::single(|pod: &Pod| pod.spec.as_ref()?.node_name.as_deref());
/// // The same with owned values (any number of them).
/// let by_node_owned = IndexFunc::new(|pod: &Pod| {
///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
/// });
/// // A multi-value index: one value per container image.
/// let by_image = IndexFunc::new(|pod: &Pod| {
///     let spec = pod.spec.iter();
///     spec.flat_map(|s| &s.containers).filter_map(|c| c.image.clone()).collect()
/// });
/// // A fallible one: the error reaches the caller of `add` / `update` / `replace`.
/// let by_owner = IndexFunc::fallible(|pod: &Pod| {
///     let owners = pod.metadata.owner_references.as_ref().ok_or("pod has no owner")?;
///     Ok::<_, &str>(owners.iter().map(|o| o.uid.clone()).collect())
/// });
/// # let _ = (by_node, by_node_owned, by_image, by_owner);
/// ```
pub struct IndexFunc<K> {
    kind: Kind<K>,
}

enum Kind<K> {
    /// client-go's `MetaNamespaceIndexFunc`, recognised by the store so that it can index
    /// without allocating.
    Namespace,
    Single(Arc<DynSingleFn<K>>),
    Custom(Arc<DynIndexFn<K>>),
}

impl<K> IndexFunc<K> {
    /// An index function that cannot fail.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
    {
        Self {
            kind: Kind::Custom(Arc::new(move |obj: &K| Ok(f(obj)))),
        }
    }

    /// An index function with at most one value, borrowed from the object: the store
    /// compares and files it without allocating, which makes writes cheaper than with
    /// [`new`](Self::new). `None` leaves the object out of the index.
    pub fn single<F>(f: F) -> Self
    where
        F: for<'a> Fn(&'a K) -> Option<&'a str> + Send + Sync + 'static,
    {
        Self {
            kind: Kind::Single(Arc::new(f)),
        }
    }

    /// An index function that may fail. Its error is returned, as
    /// [`Error::IndexFunc`](crate::Error::IndexFunc), by the write that called it, and that
    /// write changes nothing.
    pub fn fallible<F, E>(f: F) -> Self
    where
        F: Fn(&K) -> Result<Vec<String>, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        Self {
            kind: Kind::Custom(Arc::new(move |obj: &K| f(obj).map_err(Into::into))),
        }
    }

    /// The namespace index (client-go's `MetaNamespaceIndexFunc`): one value, the object's
    /// namespace, `""` for cluster-scoped objects.
    pub fn namespace() -> Self {
        Self {
            kind: Kind::Namespace,
        }
    }

    /// Whether this is [`IndexFunc::namespace`].
    pub fn is_namespace(&self) -> bool {
        matches!(self.kind, Kind::Namespace)
    }
}

impl<K: MetaObject + 'static> IndexFunc<K> {
    /// An index over a field, scoped by namespace (controller-runtime's `IndexField`):
    /// `field` returns the object's values; the store files a namespaced object under
    /// `<namespace>/<value>` and under [`ALL_NAMESPACES`]`/<value>`, a cluster-scoped one
    /// under the latter only, so that a query asks for one namespace
    /// ([`NamespacedLister::by_field`](crate::NamespacedLister::by_field)) or for all
    /// ([`Lister::by_field`](crate::Lister::by_field)) without building the key itself.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::batch::v1::Job;
    /// use kinformer_indexer::{IndexFunc, Indexers, Lister, ThreadSafeStore, namespace_indexers};
    ///
    /// // controller-runtime's `IndexField(ctx, &Job{}, ".metadata.controller", ..)`.
    /// let mut indexers: Indexers<Job> = namespace_indexers();
    /// indexers.insert("owner".into(), IndexFunc::namespaced(|job: &Job| {
    ///     let owners = job.metadata.owner_references.iter().flatten();
    ///     owners.filter(|o| o.controller == Some(true)).map(|o| o.name.clone()).collect()
    /// }));
    /// let store = Arc::new(ThreadSafeStore::new(indexers));
    /// for (ns, name, owner) in [("a", "j1", "nightly"), ("a", "j2", "hourly"), ("b", "j3", "nightly")] {
    ///     let mut job = Job::default();
    ///     job.metadata.namespace = Some(ns.into());
    ///     job.metadata.name = Some(name.into());
    ///     job.metadata.owner_references = Some(vec![
    ///         k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    ///             name: owner.into(),
    ///             controller: Some(true),
    ///             ..Default::default()
    ///         },
    ///     ]);
    ///     store.add(Arc::new(job))?;
    /// }
    /// let jobs = Lister::new(store);
    /// // `List(ctx, &jobs, InNamespace("a"), MatchingFields{"owner": "nightly"})`:
    /// assert_eq!(jobs.namespaced("a").by_field("owner", "nightly")?.len(), 1);
    /// // Without a namespace: every namespace.
    /// assert_eq!(jobs.by_field("owner", "nightly")?.len(), 2);
    /// # Ok::<(), kinformer_indexer::Error>(())
    /// ```
    pub fn namespaced<F>(field: F) -> Self
    where
        F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
    {
        Self::new(move |obj: &K| {
            let values = field(obj);
            let namespace = obj.object_namespace().filter(|ns| !ns.is_empty());
            let mut keys =
                Vec::with_capacity(values.len() * (1 + usize::from(namespace.is_some())));
            for value in &values {
                if let Some(ns) = namespace {
                    keys.push(namespaced_value(Some(ns), value));
                }
                keys.push(namespaced_value(None, value));
            }
            keys
        })
    }
}

/// The namespace part of the value a [`namespaced`](IndexFunc::namespaced) index files
/// every object under (controller-runtime's `__all_namespaces`).
pub const ALL_NAMESPACES: &str = "__all_namespaces";

/// The value a [`namespaced`](IndexFunc::namespaced) index files `value` under for
/// `namespace` (`None`: every namespace): `<namespace>/<value>`.
pub fn namespaced_value(namespace: Option<&str>, value: &str) -> String {
    format!("{}/{value}", namespace.unwrap_or(ALL_NAMESPACES))
}

impl<K: MetaObject> IndexFunc<K> {
    /// The indexed values of `obj`.
    ///
    /// # Errors
    /// Whatever a [`fallible`](Self::fallible) function returns.
    pub fn values(&self, obj: &K) -> Result<Vec<String>, BoxError> {
        match &self.kind {
            Kind::Namespace => Ok(vec![obj.object_namespace().unwrap_or("").to_owned()]),
            Kind::Single(f) => Ok(f(obj).map(str::to_owned).into_iter().collect()),
            Kind::Custom(f) => f(obj),
        }
    }
}

impl<K> Clone for IndexFunc<K> {
    fn clone(&self) -> Self {
        Self {
            kind: match &self.kind {
                Kind::Namespace => Kind::Namespace,
                Kind::Single(f) => Kind::Single(Arc::clone(f)),
                Kind::Custom(f) => Kind::Custom(Arc::clone(f)),
            },
        }
    }
}

impl<K> fmt::Debug for IndexFunc<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Namespace => f.write_str("IndexFunc::namespace"),
            Kind::Single(_) => f.write_str("IndexFunc::single(<closure>)"),
            Kind::Custom(_) => f.write_str("IndexFunc(<closure>)"),
        }
    }
}

/// The usual indexers of an informer's store: just the namespace index, under
/// [`NAMESPACE_INDEX`] (what client-go's generated informers register).
pub fn namespace_indexers<K>() -> Indexers<K> {
    let mut indexers = Indexers::new();
    indexers.insert(NAMESPACE_INDEX.to_owned(), IndexFunc::namespace());
    indexers
}

/// The values of an object for one index, as the store keeps them: computed once when the
/// object is written, so that an update or delete never calls the index function on the
/// old object again (and so can never fail on it).
pub(crate) enum IndexValues<'a> {
    /// No value.
    None,
    /// The namespace index or a `single` function: borrowed from the object.
    Borrowed(&'a str),
    /// A custom function's result, deduplicated.
    Owned(Vec<String>),
}

impl IndexValues<'_> {
    /// The same values, owning their strings.
    pub(crate) fn into_owned(self) -> IndexValues<'static> {
        match self {
            IndexValues::None => IndexValues::None,
            IndexValues::Borrowed(v) => IndexValues::Owned(vec![v.to_owned()]),
            IndexValues::Owned(vs) => IndexValues::Owned(vs),
        }
    }
}

impl<K: MetaObject> IndexFunc<K> {
    /// The values the store files `obj` under: sorted and deduplicated for custom
    /// functions, borrowed for the namespace index.
    pub(crate) fn store_values<'a>(&self, obj: &'a K) -> Result<IndexValues<'a>, BoxError> {
        match &self.kind {
            Kind::Namespace => Ok(IndexValues::Borrowed(obj.object_namespace().unwrap_or(""))),
            Kind::Single(f) => Ok(f(obj).map_or(IndexValues::None, IndexValues::Borrowed)),
            Kind::Custom(f) => {
                let mut values = f(obj)?;
                if values.len() > 1 {
                    values.sort_unstable();
                    values.dedup();
                }
                Ok(IndexValues::Owned(values))
            }
        }
    }
}
