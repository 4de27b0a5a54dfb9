//! Controller owner references, as client-go's `metav1` helpers make and read them
//! (`NewControllerRef`, `GetControllerOf`, `IsControlledBy`).
//!
//! A controller marks what it creates with a controller owner reference to the object it
//! reconciles: the garbage collector deletes the children with their owner, and
//! [`Controller::owns`](crate::controller::Controller::owns) maps a child's events back to
//! its owner's key. [`controller_ref`] makes that reference the way client-go does, with
//! `blockOwnerDeletion` set: kube's `Resource::controller_owner_ref` leaves it unset, and
//! then a foreground deletion of the owner does not wait for the child, and the API server
//! does not check that the controller may delete the owner (the admission plugin
//! `OwnerReferencesPermissionEnforcement` asks for that permission only when the flag is
//! set).
//!
//! Each reads its objects through kinformer-compact-store's `KubeObject`, so it takes the
//! default informers' cached objects (`Cached<K>`, read in place) as it takes decoded ones.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_compact_store::Cached;
//! use kinformer_controller::owner::{controller_of, controller_ref, is_controlled_by};
//!
//! let mut web = Deployment::default();
//! web.metadata.name = Some("web".into());
//! web.metadata.uid = Some("6a1c".into());
//!
//! let reference = controller_ref(&web)?;
//! assert_eq!((reference.api_version.as_str(), reference.kind.as_str()), ("apps/v1", "Deployment"));
//! assert_eq!((reference.controller, reference.block_owner_deletion), (Some(true), Some(true)));
//!
//! let mut pod = Pod::default();
//! pod.metadata.owner_references = Some(vec![reference]);
//! assert!(is_controlled_by(&pod, &web));
//! // The same of the pod as an informer caches it.
//! let cached = Cached::new(&pod).unwrap();
//! assert!(is_controlled_by(&cached, &Cached::new(&web).unwrap()));
//! assert_eq!(controller_of(&cached).map(|r| r.name), Some("web"));
//! # Ok::<(), kinformer_controller::owner::OwnerRefError>(())
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinformer_compact_store::{KubeObject, OwnerRef};
use kinformer_core::MetaObject;
use kube_core::Resource;

/// Why [`controller_ref`] made no reference: the owner lacks what a reference must name.
/// Objects read from the API server always have both; one built locally and never created
/// has neither a uid nor, perhaps, a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerRefError {
    /// The owner has no `metadata.name` (or an empty one).
    #[error("the owner has no name: an owner reference names its owner")]
    NoName,
    /// The owner has no `metadata.uid` (or an empty one): it was never stored by the API
    /// server, and a reference without the uid would be rejected (or point at nothing).
    #[error("the owner has no uid: only an object read from the API server can own others")]
    NoUid,
}

/// A controller owner reference to `owner` (client-go's `metav1.NewControllerRef`):
/// `apiVersion` and `kind` from the owner's type, its name and uid, `controller` and
/// `blockOwnerDeletion` both true.
///
/// For types whose `apiVersion` and kind are known at compile time (every k8s-openapi type,
/// `#[derive(CustomResource)]`, decoded or cached); [`controller_ref_for`] takes a dynamic
/// type's.
///
/// # Errors
/// [`OwnerRefError`] when the owner has no name or no uid.
pub fn controller_ref<T>(owner: &T) -> Result<OwnerReference, OwnerRefError>
where
    T: KubeObject,
    <T::Kind as Resource>::DynamicType: Default,
{
    controller_ref_for(owner, &Default::default())
}

/// [`controller_ref`] for an owner whose `apiVersion` and kind come from `dynamic_type` (a
/// `DynamicObject`'s `ApiResource`).
///
/// ```
/// use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
/// use kinformer_controller::owner::controller_ref_for;
///
/// let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
/// let resource = ApiResource::from_gvk(&gvk);
/// let mut widget = DynamicObject::new("demo", &resource);
/// widget.metadata.uid = Some("9f2e".into());
/// let reference = controller_ref_for(&widget, &resource)?;
/// assert_eq!(reference.api_version, "example.com/v1");
/// assert_eq!(reference.kind, "Widget");
/// # Ok::<(), kinformer_controller::owner::OwnerRefError>(())
/// ```
///
/// # Errors
/// [`OwnerRefError`] when the owner has no name or no uid.
pub fn controller_ref_for<T: KubeObject>(
    owner: &T,
    dynamic_type: &<T::Kind as Resource>::DynamicType,
) -> Result<OwnerReference, OwnerRefError> {
    let name = non_empty(owner.object_name()).ok_or(OwnerRefError::NoName)?;
    let uid = non_empty(owner.object_uid()).ok_or(OwnerRefError::NoUid)?;
    Ok(OwnerReference {
        api_version: T::Kind::api_version(dynamic_type).into_owned(),
        kind: T::Kind::kind(dynamic_type).into_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// The controller owner reference of `obj`: the first with `controller: true` (client-go's
/// `metav1.GetControllerOfNoCopy`; the API server allows at most one).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// use kinformer_controller::owner::controller_of;
///
/// let mut pod = Pod::default();
/// assert!(controller_of(&pod).is_none());
/// let merely_owned = OwnerReference { name: "a".into(), ..OwnerReference::default() };
/// let controlled = OwnerReference { name: "b".into(), controller: Some(true), ..OwnerReference::default() };
/// pod.metadata.owner_references = Some(vec![merely_owned, controlled]);
/// assert_eq!(controller_of(&pod).map(|r| r.name), Some("b"));
/// ```
pub fn controller_of<T: KubeObject>(obj: &T) -> Option<OwnerRef<'_>> {
    obj.owner_references().find(|r| r.controller == Some(true))
}

/// Whether `obj`'s controller owner reference points at `owner`: compared by uid, as
/// client-go's `metav1.IsControlledBy`, so an owner deleted and created again under the
/// same name does not control the first one's children.
///
/// Unlike client-go, an `owner` without a uid controls nothing (client-go would match it
/// with a reference whose uid is empty too; neither can come from the API server).
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kinformer_controller::owner::{controller_ref, is_controlled_by};
///
/// let mut owner = ConfigMap::default();
/// owner.metadata.name = Some("settings".into());
/// owner.metadata.uid = Some("1".into());
/// let mut pod = Pod::default();
/// pod.metadata.owner_references = Some(vec![controller_ref(&owner)?]);
/// assert!(is_controlled_by(&pod, &owner));
///
/// let mut recreated = owner.clone();
/// recreated.metadata.uid = Some("2".into()); // same name, another object
/// assert!(!is_controlled_by(&pod, &recreated));
/// # Ok::<(), kinformer_controller::owner::OwnerRefError>(())
/// ```
pub fn is_controlled_by<T: KubeObject, O: MetaObject>(obj: &T, owner: &O) -> bool {
    match (controller_of(obj), non_empty(owner.object_uid())) {
        (Some(reference), Some(uid)) => reference.uid == uid,
        _ => false,
    }
}

/// `s`, unless it is missing or empty.
fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::Namespace;

    use super::*;

    fn deployment(name: Option<&str>, uid: Option<&str>) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.name = name.map(Into::into);
        d.metadata.uid = uid.map(Into::into);
        d
    }

    fn reference(name: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        }
    }

    fn replica_set(refs: Vec<OwnerReference>) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.owner_references = Some(refs);
        rs
    }

    #[test]
    fn a_controller_ref_is_client_gos_new_controller_ref() {
        let got = controller_ref(&deployment(Some("web"), Some("u-1"))).unwrap();
        assert_eq!(
            got,
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "web".into(),
                uid: "u-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        );
        // The core group's apiVersion is the version alone.
        let mut ns = Namespace::default();
        ns.metadata.name = Some("team-a".into());
        ns.metadata.uid = Some("u-2".into());
        assert_eq!(controller_ref(&ns).unwrap().api_version, "v1");
        // A cached owner makes the same reference.
        let cached = kinformer_compact_store::Cached::new(&deployment(Some("web"), Some("u-1")));
        assert_eq!(controller_ref(&cached.unwrap()).unwrap(), got);
    }

    #[test]
    fn no_controller_ref_without_a_uid_or_a_name() {
        assert_eq!(
            controller_ref(&deployment(Some("web"), None)),
            Err(OwnerRefError::NoUid)
        );
        assert_eq!(
            controller_ref(&deployment(Some("web"), Some(""))),
            Err(OwnerRefError::NoUid)
        );
        assert_eq!(
            controller_ref(&deployment(None, Some("u-1"))),
            Err(OwnerRefError::NoName)
        );
    }

    #[test]
    fn controller_of_takes_the_first_controller_reference() {
        let rs = replica_set(vec![
            reference("owner", "u-0", None),
            reference("not-controller", "u-1", Some(false)),
            reference("controller", "u-2", Some(true)),
            reference("second", "u-3", Some(true)),
        ]);
        assert_eq!(controller_of(&rs).map(|r| r.name), Some("controller"));
        assert!(controller_of(&replica_set(vec![reference("o", "u", None)])).is_none());
        assert!(controller_of(&ReplicaSet::default()).is_none());
    }

    #[test]
    fn controlled_by_compares_the_controller_reference_uid() {
        let owner = deployment(Some("web"), Some("u-1"));
        let controlled = replica_set(vec![controller_ref(&owner).unwrap()]);
        assert!(is_controlled_by(&controlled, &owner));

        // Same name, another object: the uid decides.
        let recreated = deployment(Some("web"), Some("u-9"));
        assert!(!is_controlled_by(&controlled, &recreated));
        // Owned, but not as its controller.
        let merely_owned = replica_set(vec![reference("web", "u-1", Some(false))]);
        assert!(!is_controlled_by(&merely_owned, &owner));
        // An owner without a uid controls nothing, even a reference with an empty uid.
        let unstored = deployment(Some("web"), None);
        let empty_uid = replica_set(vec![reference("web", "", Some(true))]);
        assert!(!is_controlled_by(&empty_uid, &unstored));
    }
}
