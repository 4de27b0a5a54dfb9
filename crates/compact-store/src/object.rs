//! [`KubeObject`]: the metadata that code generic over an informer's objects reads, whether
//! they are kept decoded (`K`) or cached encoded ([`Cached<K>`]).

use kinformer_core::MetaObject;
use kube_core::Resource;
use serde::de::DeserializeOwned;

use crate::view::apimachinery::pkg::apis::meta::v1::{ObjectMetaView, OwnerReferenceView};
use crate::{Cached, DecodeError};

/// A Kubernetes object as an informer carries it, decoded (any `kube::Resource`: a
/// k8s-openapi type, a custom resource, `DynamicObject`) or cached ([`Cached<K>`]): what
/// code written for both reads of its metadata without building anything — the controller
/// kit's owner look-ups, predicates and key handlers.
///
/// Name, namespace, resource version, uid and labels come from
/// [`MetaObject`]; this adds the rest of `metadata` that controllers read.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kinformer_compact_store::{Cached, KubeObject};
///
/// fn spec_changed<T: KubeObject>(old: &T, new: &T) -> bool {
///     old.generation() != new.generation()
/// }
///
/// let mut d = Deployment::default();
/// d.metadata.generation = Some(1);
/// let mut scaled = d.clone();
/// scaled.metadata.generation = Some(2);
/// assert!(spec_changed(&d, &scaled));
/// assert!(spec_changed(&Cached::new(&d)?, &Cached::new(&scaled)?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KubeObject: MetaObject {
    /// The Kubernetes type: `Pod` for `Pod` and for `Cached<Pod>`.
    type Kind: Resource;

    /// `metadata.generation`.
    fn generation(&self) -> Option<i64>;

    /// Whether `metadata.deletionTimestamp` is set: the object is being deleted.
    fn is_deleting(&self) -> bool;

    /// `metadata.annotations`, in key order.
    fn annotations(&self) -> impl Iterator<Item = (&str, &str)>;

    /// `metadata.finalizers`.
    fn finalizers(&self) -> impl Iterator<Item = &str>;

    /// `metadata.ownerReferences`.
    fn owner_references(&self) -> impl Iterator<Item = OwnerRef<'_>>;

    /// The object as its kind, to change and write back: a clone of a decoded object,
    /// [`Cached::decode`] of a cached one.
    ///
    /// # Errors
    /// [`DecodeError`] when a cached object's bytes do not decode as the kind.
    fn to_kind(&self) -> Result<Self::Kind, DecodeError>
    where
        Self::Kind: Clone + DeserializeOwned;
}

/// One of an object's owner references ([`KubeObject::owner_references`]), borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OwnerRef<'a> {
    /// The owner's `apiVersion` (`apps/v1`).
    pub api_version: &'a str,
    /// The owner's kind.
    pub kind: &'a str,
    /// The owner's name (in the object's namespace, or cluster-scoped).
    pub name: &'a str,
    /// The owner's uid.
    pub uid: &'a str,
    /// Whether the owner is the object's managing controller.
    pub controller: Option<bool>,
    /// Whether the garbage collector waits for this object before it deletes the owner.
    pub block_owner_deletion: Option<bool>,
}

impl<K: Resource> KubeObject for K {
    type Kind = K;

    fn generation(&self) -> Option<i64> {
        self.meta().generation
    }
    fn is_deleting(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }
    fn annotations(&self) -> impl Iterator<Item = (&str, &str)> {
        let annotations = self.meta().annotations.iter().flatten();
        annotations.map(|(k, v)| (k.as_str(), v.as_str()))
    }
    fn finalizers(&self) -> impl Iterator<Item = &str> {
        self.meta().finalizers.iter().flatten().map(String::as_str)
    }
    fn owner_references(&self) -> impl Iterator<Item = OwnerRef<'_>> {
        let refs = self.meta().owner_references.iter().flatten();
        refs.map(|r| OwnerRef {
            api_version: &r.api_version,
            kind: &r.kind,
            name: &r.name,
            uid: &r.uid,
            controller: r.controller,
            block_owner_deletion: r.block_owner_deletion,
        })
    }
    fn to_kind(&self) -> Result<K, DecodeError>
    where
        K: Clone + DeserializeOwned,
    {
        Ok(self.clone())
    }
}

impl<K: Resource> KubeObject for Cached<K> {
    type Kind = K;

    fn generation(&self) -> Option<i64> {
        self.meta().generation()
    }
    fn is_deleting(&self) -> bool {
        self.meta().deletion_timestamp().is_some()
    }
    fn annotations(&self) -> impl Iterator<Item = (&str, &str)> {
        self.meta().annotations().into_iter().flatten()
    }
    fn finalizers(&self) -> impl Iterator<Item = &str> {
        self.meta().finalizers().into_iter().flatten()
    }
    fn owner_references(&self) -> impl Iterator<Item = OwnerRef<'_>> {
        let meta: ObjectMetaView<'_> = self.meta();
        meta.owner_references()
            .into_iter()
            .flatten()
            .map(|r: OwnerReferenceView<'_>| OwnerRef {
                api_version: r.api_version(),
                kind: r.kind(),
                name: r.name(),
                uid: r.uid(),
                controller: r.controller(),
                block_owner_deletion: r.block_owner_deletion(),
            })
    }
    fn to_kind(&self) -> Result<K, DecodeError>
    where
        K: Clone + DeserializeOwned,
    {
        self.decode()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    use super::*;

    fn both(rs: &ReplicaSet) -> (ReplicaSet, Cached<ReplicaSet>) {
        (rs.clone(), Cached::new(rs).unwrap())
    }

    fn read<T: KubeObject>(o: &T) -> (Option<i64>, bool, Vec<String>, Vec<String>, Vec<String>) {
        (
            o.generation(),
            o.is_deleting(),
            o.annotations().map(|(k, v)| format!("{k}={v}")).collect(),
            o.finalizers().map(str::to_owned).collect(),
            o.owner_references()
                .map(|r| {
                    format!(
                        "{}/{} {} {} {:?}",
                        r.api_version, r.kind, r.name, r.uid, r.controller
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn decoded_and_cached_objects_read_the_same_metadata() {
        let mut rs = ReplicaSet::default();
        let (empty, cached_empty) = both(&rs);
        assert_eq!(read(&empty), read(&cached_empty));
        assert_eq!(read(&empty), (None, false, vec![], vec![], vec![]));

        rs.metadata.generation = Some(4);
        rs.metadata.deletion_timestamp = Some(Time(Default::default()));
        rs.metadata.annotations = Some([("b".into(), "2".into()), ("a".into(), "1".into())].into());
        rs.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
        rs.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            uid: "u-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        let (decoded, cached) = both(&rs);
        assert_eq!(read(&decoded), read(&cached));
        let (generation, deleting, annotations, finalizers, owners) = read(&cached);
        assert_eq!((generation, deleting), (Some(4), true));
        assert_eq!(annotations, ["a=1", "b=2"]);
        assert_eq!(finalizers, ["example.com/cleanup"]);
        assert_eq!(owners, ["apps/v1/Deployment web u-1 Some(true)"]);
    }
}
