//! The [`ListerWatcher`] that talks to Kubernetes through a `kube::Client` (the `kube`
//! feature, on by default), one concern a file:
//!
//! - `client`: [`reflector_client`], kube's client without its retry layer, with
//!   `TCP_NODELAY`;
//! - `request`: the list and watch requests;
//! - `decode`: what decoding needs whatever the wire format (the expected type, `modify`);
//! - `json`: JSON list pages, watch events, bookmarks and error bodies;
//! - `framing`: a watch body split into events (newline-delimited documents).
//!
//! Requests are built here (not through `Api::list` / `Api::watch`) for three reasons:
//! the query must say exactly what client-go's reflector says (`resourceVersion=0` *with*
//! `limit=500` on the first list, which kube's `ListParams` drops); a watch line must be
//! split into its type and raw object before the object is decoded, so that a wrong kind,
//! a malformed object and a server error body become three different typed errors; and a
//! connection cut mid-stream must read as the end of the watch, not as an error.

mod client;
mod decode;
mod framing;
mod json;
mod request;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Resource;
use kube::core::PartialObjectMeta;
use serde::de::DeserializeOwned;

pub use client::reflector_client;
use decode::{Expected, Modify};
use request::Requests;

use crate::{ApiStatus, Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};

/// The [`ListerWatcher`] for Kubernetes: lists and watches the resource of a
/// `kube::Api<K>`, with optional label and field selectors.
///
/// `K` is any `kube::Resource` that deserializes: k8s-openapi types, custom resources,
/// `DynamicObject` (give its `ApiResource` to [`KubeListerWatcher::new_with`]), or
/// `PartialObjectMeta<K>` for metadata-only lists and watches
/// ([`KubeListerWatcher::metadata_only`]). The namespace is the `Api`'s.
///
/// Watch events whose object has another `apiVersion`/`kind` than the resource are
/// reported as [`Error::UnexpectedKind`] (list items too, when they fail to decode:
/// the API server omits `kind` in the items of built-in lists); undecodable objects as
/// [`Error::Decode`] (without any value from the body); a server `ERROR` event or error
/// response as [`Error::Api`]; a connection that fails as [`Error::Unreachable`], and
/// one cut mid-watch as the end of the stream.
///
/// Build the client with [`reflector_client`] so that `429` and `504` reach the
/// reflector (see there why).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_reflector::{KubeListerWatcher, reflector_client};
/// use kube::Api;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = reflector_client(kube::Config::infer().await?)?;
/// let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client.clone(), "default"))
///     .labels("app=web")
///     .fields("status.phase=Running");
/// let meta_only = KubeListerWatcher::metadata_only(Api::<Pod>::all(client));
/// # let _ = (pods, meta_only);
/// # Ok(())
/// # }
/// ```
pub struct KubeListerWatcher<K> {
    client: kube::Client,
    requests: Requests,
    expected: Expected,
    modify: Option<Modify<K>>,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for KubeListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            requests: self.requests.clone(),
            expected: self.expected.clone(),
            modify: self.modify.clone(),
            _k: PhantomData,
        }
    }
}

impl<K> fmt::Debug for KubeListerWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeListerWatcher")
            .field("requests", &self.requests)
            .field("expected", &self.expected.to_string())
            .field("modify", &self.modify.is_some())
            .finish_non_exhaustive()
    }
}

impl<K: Resource> KubeListerWatcher<K> {
    /// Lists and watches what `api` addresses (its resource, and its namespace or all).
    pub fn new(api: kube::Api<K>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::new_with(api, &K::DynamicType::default())
    }

    /// As [`KubeListerWatcher::new`], for types with a runtime type description (e.g.
    /// `DynamicObject` with its `ApiResource`).
    pub fn new_with(api: kube::Api<K>, dyntype: &K::DynamicType) -> Self {
        let metadata_only = K::metadata_api();
        let expected = if metadata_only {
            Expected::partial_metadata()
        } else {
            Expected {
                api_version: K::api_version(dyntype).into_owned(),
                kind: K::kind(dyntype).into_owned(),
            }
        };
        Self::at(api, expected, metadata_only)
    }

    /// Lists and watches `K` in `namespace`, or in every namespace when `None`, for code
    /// generic over `K` (an `Api` names a namespace only for types known to be namespaced).
    /// Pass `None` for cluster-scoped types: a namespaced path of one is not found.
    pub fn scoped(client: kube::Client, dyntype: &K::DynamicType, namespace: Option<&str>) -> Self {
        let mut lw = Self::new_with(kube::Api::all_with(client, dyntype), dyntype);
        lw.requests.url_path = K::url_path(dyntype, namespace);
        lw
    }

    /// Only objects whose labels match `selector` (`app=web,tier!=db`).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.requests.label_selector = Some(selector.to_owned());
        self
    }

    /// Only objects whose fields match `selector` (`status.phase=Running`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.requests.field_selector = Some(selector.to_owned());
        self
    }

    /// Changes every object right after it is decoded, before the rest of its list page
    /// is (kube-runtime's `modify`): the place to drop what the program never reads, e.g.
    /// `managedFields`, which k8s-openapi holds as a `serde_json::Value` tree of several
    /// KiB per object. A paged list is decoded a page at a time, so a transform set on the
    /// informer (which runs in the reflector as each object reaches it) sees a page of
    /// untransformed objects at once; here at most one is. Watch events get it too. It
    /// runs once per object from the server, never on objects already cached.
    ///
    /// ```no_run
    /// # use kinformer_reflector::KubeListerWatcher;
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # fn f(client: kube::Client) {
    /// let pods = KubeListerWatcher::new(kube::Api::<Pod>::all(client))
    ///     .modify(|pod: &mut Pod| pod.metadata.managed_fields = None);
    /// # }
    /// ```
    #[must_use]
    pub fn modify(mut self, f: impl Fn(&mut K) + Send + Sync + 'static) -> Self {
        self.modify = Some(Arc::new(f));
        self
    }
}

impl<K: Resource> KubeListerWatcher<PartialObjectMeta<K>> {
    /// Metadata-only lists and watches of `api`'s resource: the server sends
    /// `PartialObjectMetadata` (name, namespace, labels, annotations, owners, ...) instead
    /// of whole objects.
    pub fn metadata_only(api: kube::Api<K>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::at(api, Expected::partial_metadata(), true)
    }
}

impl<K> KubeListerWatcher<K> {
    /// The lister-watcher of `api`'s resource path, for objects of the `expected` type.
    fn at<A: Resource>(api: kube::Api<A>, expected: Expected, metadata_only: bool) -> Self {
        Self {
            requests: Requests {
                url_path: api.resource_url().to_owned(),
                metadata_only,
                label_selector: None,
                field_selector: None,
            },
            client: api.into_client(),
            expected,
            modify: None,
            _k: PhantomData,
        }
    }
}

impl<K> KubeListerWatcher<K>
where
    K: DeserializeOwned + Send + 'static,
{
    async fn list_page(&self, o: &ListOptions) -> Result<ListPage<K>, Error> {
        let req = self.requests.list(o)?;
        let text = self.client.request_text(req).await.map_err(from_kube)?;
        json::decode_list(&text, &self.expected, self.modify.as_ref())
    }

    async fn start_watch(&self, o: &WatchOptions) -> Result<WatchStream<K>, Error> {
        let req = self.requests.watch(o)?;
        let body = self.client.request_stream(req).await.map_err(from_kube)?;
        let (expected, modify) = (self.expected.clone(), self.modify.clone());
        Ok(framing::watch_lines(body, move |line| {
            json::decode_line(line, &expected, modify.as_ref())
        }))
    }
}

impl<K> ListerWatcher<K> for KubeListerWatcher<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        Box::pin(self.list_page(options))
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        Box::pin(self.start_watch(options))
    }

    /// The API server streams lists since Kubernetes 1.27 (beta, on by default since
    /// 1.32); one that refuses makes the reflector fall back to List+Watch.
    fn supports_watch_list(&self) -> bool {
        true
    }
}

/// `kube::Api<K>` lists and watches its own resource and namespace, without selectors
/// (use [`KubeListerWatcher`] for selectors, dynamic types and metadata-only mode).
impl<K> ListerWatcher<K> for kube::Api<K>
where
    K: Resource + Clone + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        let lw = KubeListerWatcher::new(self.clone());
        Box::pin(async move { lw.list_page(options).await })
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        let lw = KubeListerWatcher::new(self.clone());
        Box::pin(async move { lw.start_watch(options).await })
    }

    fn supports_watch_list(&self) -> bool {
        true
    }
}

/// Maps kube-client's error onto ours: statuses stay statuses, anything that failed on
/// the way to or from the server is [`Error::Unreachable`].
fn from_kube(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => Error::Api((*status).into()),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Error::unreachable(e)
        }
        kube::Error::SerdeError(e) => Error::decode("response", json::describe_json_error(&e)),
        kube::Error::FromUtf8(_) => Error::decode("response", "not UTF-8"),
        other => Error::Client {
            source: other.into(),
        },
    }
}

impl From<kube::core::Status> for ApiStatus {
    fn from(s: kube::core::Status) -> Self {
        let (causes, cause_messages) = s
            .details
            .map(|d| d.causes.into_iter().map(|c| (c.reason, c.message)).unzip())
            .unwrap_or_default();
        Self {
            code: s.code,
            reason: s.reason,
            message: s.message,
            causes,
            cause_messages,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

    use super::*;

    #[tokio::test]
    async fn constructors_take_the_apis_path_and_the_expected_type() {
        let cfg = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(cfg).unwrap();
        let typed = KubeListerWatcher::new(kube::Api::<Pod>::namespaced(client.clone(), "ns"));
        assert_eq!(typed.requests.url_path, "/api/v1/namespaces/ns/pods");
        assert_eq!(typed.expected.to_string(), "v1/Pod");
        assert!(!typed.requests.metadata_only);
        let meta = KubeListerWatcher::metadata_only(kube::Api::<Pod>::all(client.clone()));
        assert_eq!(meta.expected, Expected::partial_metadata());
        assert!(meta.requests.metadata_only);
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
        let dynamic =
            KubeListerWatcher::new_with(kube::Api::<DynamicObject>::all_with(client, &ar), &ar);
        assert_eq!(dynamic.expected.to_string(), "example.com/v1/Widget");
        assert_eq!(dynamic.requests.url_path, "/apis/example.com/v1/widgets");
    }
}
