//! Predicates: which updates are worth a reconcile (controller-runtime's `predicate`
//! package, for update events).
//!
//! An informer tells its handlers about every change of an object, its status included, and
//! about every resync. A controller that only acts on the spec can skip the rest:
//! [`Controller::watch_with`](crate::controller::Controller::watch_with) passes an update on
//! only when the predicate holds. Adds and deletes always pass.
//!
//! The built-in predicates read the objects' metadata in place, for the default informer's
//! cached objects (`Cached<K>`) and for decoded ones alike.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kinformer_compact_store::Cached;
//! use kinformer_controller::predicates::{self, Predicate};
//!
//! // Spec changes (the generation moves), or a label change: worth a reconcile.
//! let p: Predicate<Cached<Deployment>> =
//!     Predicate::any([predicates::generation_changed(), predicates::labels_changed()]);
//!
//! let mut old = Deployment::default();
//! old.metadata.generation = Some(1);
//! let mut status_only = old.clone();
//! status_only.status = Some(Default::default());
//! let cached = |d: &Deployment| Arc::new(Cached::new(d).unwrap());
//! assert!(!p.matches(&cached(&old), &cached(&status_only)));
//!
//! let mut scaled = old.clone();
//! scaled.metadata.generation = Some(2);
//! assert!(p.matches(&cached(&old), &cached(&scaled)));
//! ```

use std::fmt;
use std::sync::Arc;

#[cfg(feature = "kube")]
use kinformer_compact_store::KubeObject;
use kinformer_core::MetaObject;

type Check<K> = Arc<dyn Fn(&K, &K) -> bool + Send + Sync>;

/// Whether an update from `old` to `new` is worth a reconcile. Cloning shares it.
pub struct Predicate<K> {
    name: Arc<str>,
    check: Check<K>,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            name: Arc::clone(&self.name),
            check: Arc::clone(&self.check),
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
        }
    }

    /// Whether the update from `old` to `new` passes.
    pub fn matches(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        (self.check)(old, new)
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
        Self::new(&name, move |old, new| {
            all.iter().any(|p| (p.check)(old, new))
        })
    }

    /// Passes when every one of `predicates` does (controller-runtime's `predicate.And`).
    pub fn all(predicates: impl IntoIterator<Item = Predicate<K>>) -> Self {
        let all: Vec<Predicate<K>> = predicates.into_iter().collect();
        let name = format!(
            "all({})",
            all.iter().map(|p| &*p.name).collect::<Vec<_>>().join(", ")
        );
        Self::new(&name, move |old, new| {
            all.iter().all(|p| (p.check)(old, new))
        })
    }
}

/// `metadata.generation` changed: the spec changed (controller-runtime's
/// `GenerationChangedPredicate`). Status-only updates and resyncs do not pass. Kinds whose
/// server does not set a generation (ConfigMaps, Secrets) never pass: use another predicate
/// for them.
#[cfg(feature = "kube")]
pub fn generation_changed<T: KubeObject>() -> Predicate<T> {
    Predicate::new("generation_changed", |old: &T, new: &T| {
        old.generation() != new.generation()
    })
}

/// `metadata.labels` changed (controller-runtime's `LabelChangedPredicate`). No labels and an
/// empty map are the same.
pub fn labels_changed<T: MetaObject>() -> Predicate<T> {
    Predicate::new("labels_changed", |old: &T, new: &T| {
        fn labels<T: MetaObject>(o: &T) -> Option<&std::collections::BTreeMap<String, String>> {
            o.object_labels().filter(|m| !m.is_empty())
        }
        labels(old) != labels(new)
    })
}

/// `metadata.annotations` changed (controller-runtime's `AnnotationChangedPredicate`). No
/// annotations and an empty map are the same.
#[cfg(feature = "kube")]
pub fn annotations_changed<T: KubeObject>() -> Predicate<T> {
    Predicate::new("annotations_changed", |old: &T, new: &T| {
        !old.annotations().eq(new.annotations())
    })
}

/// `metadata.resourceVersion` changed: anything changed; only resyncs (and relists that
/// found the object unchanged) are skipped (controller-runtime's
/// `ResourceVersionChangedPredicate`).
pub fn resource_version_changed<T: MetaObject>() -> Predicate<T> {
    Predicate::new("resource_version_changed", |old: &T, new: &T| {
        old.object_resource_version() != new.object_resource_version()
    })
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
    fn cached_objects_pass_as_decoded_ones_do() {
        use kinformer_compact_store::Cached;
        let base = cm("1", Some(1), Some("a"), Some("x"));
        let changed = [
            cm("2", Some(2), Some("a"), Some("x")),
            cm("2", Some(1), Some("b"), Some("x")),
            cm("2", Some(1), Some("a"), Some("y")),
            Arc::clone(&base),
        ];
        let cached = |c: &ConfigMap| Arc::new(Cached::new(c).unwrap());
        for (p, q) in [
            (
                generation_changed::<ConfigMap>(),
                generation_changed::<Cached<ConfigMap>>(),
            ),
            (labels_changed(), labels_changed()),
            (annotations_changed(), annotations_changed()),
            (resource_version_changed(), resource_version_changed()),
        ] {
            for new in &changed {
                assert_eq!(
                    p.matches(&base, new),
                    q.matches(&cached(&base), &cached(new)),
                    "{p:?}"
                );
            }
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
