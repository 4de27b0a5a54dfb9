use std::collections::BTreeMap;

/// The metadata every kinformer layer needs from an object: its name, namespace,
/// resource version and labels.
///
/// With the `kube` feature this is implemented for every [`kube_core::Resource`]
/// (k8s-openapi types, `#[derive(CustomResource)]` types, `DynamicObject`,
/// `PartialObjectMeta`). Implement it yourself for other object types.
///
/// The method names carry an `object_` prefix so that they never clash with
/// `kube::ResourceExt` when both traits are in scope.
///
/// ```
/// use kinformer_core::MetaObject;
///
/// struct Thing { name: String }
/// impl MetaObject for Thing {
///     fn object_name(&self) -> Option<&str> { Some(&self.name) }
///     fn object_namespace(&self) -> Option<&str> { None }
///     fn object_resource_version(&self) -> Option<&str> { None }
/// }
/// let key = kinformer_core::meta_namespace_key(&Thing { name: "a".into() })?;
/// assert_eq!(key.as_str(), "a");
/// # Ok::<(), kinformer_core::Error>(())
/// ```
pub trait MetaObject {
    /// `metadata.name`, if set.
    fn object_name(&self) -> Option<&str>;
    /// `metadata.namespace`, or `None` for cluster-scoped objects.
    fn object_namespace(&self) -> Option<&str>;
    /// `metadata.resourceVersion`, if set.
    fn object_resource_version(&self) -> Option<&str>;
    /// `metadata.labels`, which label selectors match against. The default is none, so a
    /// type without labels only implements the three methods above.
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        None
    }
    /// `metadata.uid`, which sharded lists and watches may hash. The default is none (an
    /// object without a uid hashes as the empty string, as the API server reads it).
    fn object_uid(&self) -> Option<&str> {
        None
    }
}

#[cfg(feature = "kube")]
impl<K: kube_core::Resource> MetaObject for K {
    fn object_name(&self) -> Option<&str> {
        self.meta().name.as_deref()
    }
    fn object_namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }
    fn object_resource_version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.meta().labels.as_ref()
    }
    fn object_uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }
}
