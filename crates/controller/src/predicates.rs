//! Predicates: which updates are worth a reconcile (controller-runtime's `predicate`
//! package, for update events).
//!
//! An informer tells its handlers about every change of an object, its status included, and
//! about every resync. A controller that only acts on the spec can skip the rest:
//! [`Controller::watch_with`](crate::controller::Controller::watch_with) passes an update on
//! only when the predicate holds. Adds and deletes always pass.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kinformer_controller::predicates::{self, Predicate};
//!
//! // Spec changes (the generation moves), or a label change: worth a reconcile.
//! let p: Predicate<Deployment> =
//!     Predicate::any([predicates::generation_changed(), predicates::labels_changed()]);
//!
//! let mut old = Deployment::default();
//! old.metadata.generation = Some(1);
//! let mut status_only = old.clone();
//! status_only.status = Some(Default::default());
//! assert!(!p.matches(&Arc::new(old.clone()), &Arc::new(status_only)));
//!
//! let mut scaled = old.clone();
//! scaled.metadata.generation = Some(2);
//! assert!(p.matches(&Arc::new(old), &Arc::new(scaled)));
//! ```

use std::fmt;
use std::sync::Arc;

type Check<K> = Arc<dyn Fn(&K, &K) -> bool + Send + Sync>;

/// Whether an update from `old` to `new` is worth a reconcile. Cloning shares it.
pub struct Predicate<K> {
    name: Arc<str>,
    check: Check<K>,
    metadata_only: bool,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            check: Arc::clone(&self.check),
            metadata_only: self.metadata_only,
        }
    }
}

impl<K> fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl<K> Predicate<K> {
    /// A predicate of your own, named for logs and `Debug`.
    pub fn new(name: &str, check: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            name: name.into(),
            check: Arc::new(check),
            metadata_only: false,
        }
    }

    /// A predicate of your own that reads only the objects' metadata (every one of this
    /// module's does): a handler filtered by it still needs only metadata
    /// (kinformer-informer-factory's `Needs::metadata_only`), so the default cache decodes
    /// just that for it.
    pub fn on_metadata(name: &str, check: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            metadata_only: true,
            ..Self::new(name, check)
        }
    }

    /// Whether the update from `old` to `new` passes.
    pub fn matches(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        (self.check)(old, new)
    }

    /// Whether it reads only metadata ([`on_metadata`](Self::on_metadata)).
    pub fn reads_only_metadata(&self) -> bool {
        self.metadata_only
    }
}

impl<K: 'static> Predicate<K> {
    /// Passes when any of `predicates` does (controller-runtime's `predicate.Or`).
    pub fn any(predicates: impl IntoIterator<Item = Predicate<K>>) -> Self {
        let all: Vec<Predicate<K>> = predicates.into_iter().collect();
        let name = format!(
            "any({})",
            all.iter().map(|p| &*p.name).collect::<Vec<_>>().join(", ")
        );
        let metadata_only = all.iter().all(|p| p.metadata_only);
        Self {
            metadata_only,
            ..Self::new(&name, move |old, new| {
                all.iter().any(|p| (p.check)(old, new))
            })
        }
    }

    /// Passes when every one of `predicates` does (controller-runtime's `predicate.And`).
    pub fn all(predicates: impl IntoIterator<Item = Predicate<K>>) -> Self {
        let all: Vec<Predicate<K>> = predicates.into_iter().collect();
        let name = format!(
            "all({})",
            all.iter().map(|p| &*p.name).collect::<Vec<_>>().join(", ")
        );
        let metadata_only = all.iter().all(|p| p.metadata_only);
        Self {
            metadata_only,
            ..Self::new(&name, move |old, new| {
                all.iter().all(|p| (p.check)(old, new))
            })
        }
    }
}

/// `metadata.generation` changed: the spec changed (controller-runtime's
/// `GenerationChangedPredicate`). Status-only updates and resyncs do not pass. Kinds whose
/// server does not set a generation (ConfigMaps, Secrets) never pass: use another predicate
/// for them.
#[cfg(feature = "kube")]
pub fn generation_changed<K: kube_core::Resource>() -> Predicate<K> {
    Predicate::on_metadata("generation_changed", |old: &K, new: &K| {
        old.meta().generation != new.meta().generation
    })
}

/// `metadata.labels` changed (controller-runtime's `LabelChangedPredicate`). No labels and an
/// empty map are the same.
#[cfg(feature = "kube")]
pub fn labels_changed<K: kube_core::Resource>() -> Predicate<K> {
    Predicate::on_metadata("labels_changed", |old: &K, new: &K| {
        map_or_empty(&old.meta().labels) != map_or_empty(&new.meta().labels)
    })
}

/// `metadata.annotations` changed (controller-runtime's `AnnotationChangedPredicate`). No
/// annotations and an empty map are the same.
#[cfg(feature = "kube")]
pub fn annotations_changed<K: kube_core::Resource>() -> Predicate<K> {
    Predicate::on_metadata("annotations_changed", |old: &K, new: &K| {
        map_or_empty(&old.meta().annotations) != map_or_empty(&new.meta().annotations)
    })
}

/// `metadata.resourceVersion` changed: anything changed; only resyncs (and relists that
/// found the object unchanged) are skipped (controller-runtime's
/// `ResourceVersionChangedPredicate`).
#[cfg(feature = "kube")]
pub fn resource_version_changed<K: kube_core::Resource>() -> Predicate<K> {
    Predicate::on_metadata("resource_version_changed", |old: &K, new: &K| {
        old.meta().resource_version != new.meta().resource_version
    })
}

#[cfg(feature = "kube")]
fn map_or_empty(
    m: &Option<std::collections::BTreeMap<String, String>>,
) -> Option<&std::collections::BTreeMap<String, String>> {
    m.as_ref().filter(|m| !m.is_empty())
}

#[cfg(all(test, feature = "kube"))]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(
        rv: &str,
        generation: Option<i64>,
        label: Option<&str>,
        note: Option<&str>,
    ) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.resource_version = Some(rv.into());
        c.metadata.generation = generation;
        c.metadata.labels = label.map(|l| [("app".to_string(), l.to_string())].into());
        c.metadata.annotations = note.map(|n| [("note".to_string(), n.to_string())].into());
        Arc::new(c)
    }

    #[test]
    fn each_builtin_predicate_looks_at_its_field_only() {
        let base = cm("1", Some(1), Some("a"), Some("x"));
        let gen_moved = cm("2", Some(2), Some("a"), Some("x"));
        let relabelled = cm("2", Some(1), Some("b"), Some("x"));
        let annotated = cm("2", Some(1), Some("a"), Some("y"));
        let resync = Arc::clone(&base);
        let table: [(Predicate<ConfigMap>, [bool; 4]); 4] = [
            (generation_changed(), [true, false, false, false]),
            (labels_changed(), [false, true, false, false]),
            (annotations_changed(), [false, false, true, false]),
            (resource_version_changed(), [true, true, true, false]),
        ];
        for (p, want) in table {
            let got = [&gen_moved, &relabelled, &annotated, &resync].map(|n| p.matches(&base, n));
            assert_eq!(got, want, "{p:?}");
        }
    }

    #[test]
    fn no_labels_and_empty_labels_are_the_same() {
        let mut empty = ConfigMap::default();
        empty.metadata.labels = Some(Default::default());
        assert!(!labels_changed().matches(&Arc::new(ConfigMap::default()), &Arc::new(empty)));
    }

    #[test]
    fn any_and_all_combine() {
        let yes = Predicate::<ConfigMap>::new("yes", |_, _| true);
        let no = Predicate::<ConfigMap>::new("no", |_, _| false);
        let x = Arc::new(ConfigMap::default());
        assert!(Predicate::any([no.clone(), yes.clone()]).matches(&x, &x));
        assert!(!Predicate::all([no.clone(), yes.clone()]).matches(&x, &x));
        assert!(!Predicate::<ConfigMap>::any([]).matches(&x, &x));
        assert!(Predicate::<ConfigMap>::all([]).matches(&x, &x));
        assert_eq!(format!("{:?}", Predicate::any([no, yes])), "any(no, yes)");
    }
}
