//! Listers: typed, read-only queries over an indexer, by name and by label selector.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::Selector;
use kinformer_core::{ErrorChain, MetaObject};

use crate::traits::selected;
use crate::{Error, Indexer, NAMESPACE_INDEX, namespaced_value};

/// Typed reads from an [`Indexer`] (client-go's generated `PodLister` and friends, for any
/// object type): list by label selector, get by name, and the same within one namespace
/// through the namespace index.
///
/// Cloning is cheap and shares the indexer. Every result is an `Arc` of the stored object.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_indexer::{everything, namespace_indexers, parse_selector, Lister, ThreadSafeStore};
///
/// let store = Arc::new(ThreadSafeStore::new(namespace_indexers()));
/// for (ns, name, app) in [("default", "a", "nginx"), ("default", "b", "redis"), ("kube-system", "c", "nginx")] {
///     let mut pod = Pod::default();
///     pod.metadata.namespace = Some(ns.into());
///     pod.metadata.name = Some(name.into());
///     pod.metadata.labels = Some([("app".to_string(), app.to_string())].into());
///     store.add(Arc::new(pod))?;
/// }
/// let lister = Lister::new(store);
///
/// let nginx = parse_selector("app=nginx")?;
/// assert_eq!(lister.list(&nginx).len(), 2);
/// assert_eq!(lister.namespaced("default").list(&nginx).len(), 1);
/// assert_eq!(lister.namespaced("default").list(&everything()).len(), 2);
/// let pod = lister.namespaced("default").get("b")?;
/// assert_eq!(pod.metadata.name.as_deref(), Some("b"));
/// assert!(lister.namespaced("default").get("c").unwrap_err().is_not_found());
/// # Ok::<(), kinformer_indexer::Error>(())
/// ```
pub struct Lister<K> {
    indexer: Arc<dyn Indexer<K>>,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: Arc::clone(&self.indexer),
            _k: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister").finish_non_exhaustive()
    }
}

impl<K: MetaObject + 'static> Lister<K> {
    /// A lister over `indexer`: a [`ThreadSafeStore`](crate::ThreadSafeStore), an
    /// informer's indexer, or any other [`Indexer`]. Namespaced queries use its
    /// [`NAMESPACE_INDEX`] when it has one and scan everything otherwise.
    pub fn new<I: Indexer<K> + 'static>(indexer: Arc<I>) -> Self {
        Self::from_dyn(indexer)
    }

    /// A lister over an indexer that is already a trait object.
    pub fn from_dyn(indexer: Arc<dyn Indexer<K>>) -> Self {
        Self {
            indexer,
            _k: PhantomData,
        }
    }

    /// The indexer this lister reads.
    pub fn indexer(&self) -> &Arc<dyn Indexer<K>> {
        &self.indexer
    }

    /// Every object, in every namespace, whose labels match `selector`.
    /// [`everything()`](crate::everything) skips matching.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        self.indexer.list_selected(selector)
    }

    /// The cluster-scoped object called `name` (its key is its name, as with the default
    /// key function).
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub fn get(&self, name: &str) -> Result<Arc<K>, Error> {
        self.indexer
            .get_by_key(name)
            .ok_or_else(|| Error::NotFound {
                namespace: None,
                name: name.to_owned(),
            })
    }

    /// The objects of every namespace that a [`namespaced`](crate::IndexFunc::namespaced)
    /// index called `index` files under `value` (controller-runtime's
    /// `List(ctx, &list, MatchingFields{index: value})`), each once.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`](crate::Error::UnknownIndex).
    pub fn by_field(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        self.indexer.by_index(index, &namespaced_value(None, value))
    }

    /// Queries within one namespace (client-go's `lister.Pods(namespace)`). `""` means
    /// all namespaces for [`list`](NamespacedLister::list), as in client-go.
    pub fn namespaced<'a>(&'a self, namespace: &'a str) -> NamespacedLister<'a, K> {
        NamespacedLister {
            lister: self,
            namespace,
        }
    }
}

/// Queries within one namespace; made by [`Lister::namespaced`].
pub struct NamespacedLister<'a, K> {
    lister: &'a Lister<K>,
    namespace: &'a str,
}

impl<K> fmt::Debug for NamespacedLister<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespacedLister")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<K: MetaObject + 'static> NamespacedLister<'_, K> {
    /// The objects of this namespace whose labels match `selector`, found through the
    /// namespace index. [`everything()`](crate::everything) skips matching.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        if self.namespace.is_empty() {
            return self.lister.list(selector);
        }
        let indexer = &self.lister.indexer;
        match indexer.by_index_selected(NAMESPACE_INDEX, self.namespace, selector) {
            Ok(objs) => objs,
            Err(err) => {
                // client-go does the same: log, then find them the slow way.
                tracing::warn!(error = %ErrorChain(&err), "cannot list through the namespace index; scanning every object");
                let mut objs = indexer.list();
                objs.retain(|obj| {
                    obj.object_namespace() == Some(self.namespace)
                        && (selector.selects_all() || selected(selector, &**obj))
                });
                objs
            }
        }
    }

    /// The objects of this namespace that a [`namespaced`](crate::IndexFunc::namespaced)
    /// index called `index` files under `value` (controller-runtime's
    /// `List(ctx, &list, InNamespace(ns), MatchingFields{index: value})`); for `""`, those
    /// of every namespace, as [`Lister::by_field`].
    ///
    /// # Errors
    /// [`Error::UnknownIndex`](crate::Error::UnknownIndex).
    pub fn by_field(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let namespace = Some(self.namespace).filter(|ns| !ns.is_empty());
        self.lister
            .indexer
            .by_index(index, &namespaced_value(namespace, value))
    }

    /// The object called `name` in this namespace. For `""` the key is the bare name, as
    /// in client-go (the same as [`Lister::get`]). It looks the object up by its
    /// `namespace/name` key, as client-go's listers do: over a cache keyed by a key
    /// function of your own, read by your keys through the indexer (`get_by_key`).
    ///
    /// # Errors
    /// [`Error::NotFound`].
    pub fn get(&self, name: &str) -> Result<Arc<K>, Error> {
        if self.namespace.is_empty() {
            return self.lister.get(name);
        }
        let found = self
            .lister
            .indexer
            .get_by_namespaced_name(self.namespace, name);
        found.ok_or_else(|| Error::NotFound {
            namespace: Some(self.namespace.to_owned()),
            name: name.to_owned(),
        })
    }
}
