//! The [`ListerWatcher`] that talks to Kubernetes through a `kube::Client`.
//!
//! Requests are built here (not through `Api::list` / `Api::watch`) for three reasons:
//! the query must say exactly what client-go's reflector says (`resourceVersion=0` *with*
//! `limit=500` on the first list, which kube's `ListParams` drops); a watch line must be
//! split into its type and raw object before the object is decoded, so that a wrong kind,
//! a malformed object and a server error body become three different typed errors; and a
//! connection cut mid-stream must read as the end of the watch, not as an error.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::io::AsyncBufReadExt;
use futures::{AsyncBufRead, StreamExt};
use kube::Resource;
use kube::core::PartialObjectMeta;
use serde::Deserialize;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::{
    Bookmark, Error, ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream,
};

const JSON: &str = "application/json";
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A `kube::Client` for a reflector: `config` with kube's built-in retry turned off, on
/// connections with `TCP_NODELAY`.
///
/// kube retries `429`, `503` and `504` inside the client by default
/// (`Config::default_retry`: up to 15 times, 5 ms to 1000 s apart). A reflector should
/// see those statuses itself, as client-go's does: a `429` must back off on the
/// reflector's own schedule (and reach its error handler), and a `504` "Too large
/// resource version" must trigger a relist at `""` at once, not minutes of hidden
/// retries. Build the reflector's client with this function; keep the default for
/// other clients.
///
/// kube's client leaves Nagle's algorithm on. On a new TLS connection the request is a
/// small write right after the handshake's last one, so it waits for the server's
/// delayed ACK: about 40 ms on Linux (seen with `strace`: 42 ms between writing the
/// request and the first response byte, 1.5 ms on the reused connection). Every relist
/// and every watch that opens a connection pays it; client-go sets `TCP_NODELAY`, as
/// Go does on every TCP connection. This client does too. It is kube's stack (base URI,
/// authentication, extra headers, TLS from the config, its timeouts) without kube's
/// retry, tracing and decompression layers; with a `proxy_url` in the config it is
/// kube's own client instead (Nagle on).
///
/// # Errors
/// [`Error::Client`] when the client cannot be built from `config`.
pub fn reflector_client(mut config: kube::Config) -> Result<kube::Client, Error> {
    use kube::client::ConfigExt;
    use tower::ServiceBuilder;

    config.default_retry = false;
    let client_error = |e: kube::Error| Error::Client { source: e.into() };
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config).map_err(client_error);
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config
        .rustls_https_connector_with_connector(http)
        .map_err(client_error)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper_client =
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(client_error)?)
        .layer(config.extra_headers_layer().map_err(client_error)?)
        .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })
        .service(hyper_client);
    Ok(kube::client::ClientBuilder::new(service, config.default_namespace).build())
}

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
    url_path: String,
    expected: Expected,
    metadata_only: bool,
    label_selector: Option<String>,
    field_selector: Option<String>,
    modify: Option<Modify<K>>,
    _k: PhantomData<fn() -> K>,
}

/// A change made to every object as it is decoded; see [`KubeListerWatcher::modify`].
type Modify<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

impl<K> Clone for KubeListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            url_path: self.url_path.clone(),
            expected: self.expected.clone(),
            metadata_only: self.metadata_only,
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            modify: self.modify.clone(),
            _k: PhantomData,
        }
    }
}

impl<K> fmt::Debug for KubeListerWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeListerWatcher")
            .field("url_path", &self.url_path)
            .field("expected", &self.expected.to_string())
            .field("metadata_only", &self.metadata_only)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
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
        Self {
            url_path: api.resource_url().to_owned(),
            client: api.into_client(),
            expected,
            metadata_only,
            label_selector: None,
            field_selector: None,
            modify: None,
            _k: PhantomData,
        }
    }

    /// Lists and watches `K` in `namespace`, or in every namespace when `None`, for code
    /// generic over `K` (an `Api` names a namespace only for types known to be namespaced).
    /// Pass `None` for cluster-scoped types: a namespaced path of one is not found.
    pub fn scoped(client: kube::Client, dyntype: &K::DynamicType, namespace: Option<&str>) -> Self {
        let mut lw = Self::new_with(kube::Api::all_with(client, dyntype), dyntype);
        lw.url_path = K::url_path(dyntype, namespace);
        lw
    }

    /// Only objects whose labels match `selector` (`app=web,tier!=db`).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Only objects whose fields match `selector` (`status.phase=Running`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    /// Changes every object right after it is decoded, before the rest of its list page
    /// is (kube-runtime's `modify`): the place to drop what the program never reads, e.g.
    /// `managedFields`, which k8s-openapi holds as a `serde_json::Value` tree of several
    /// KiB per object. A transform set on the informer runs only once the whole list has
    /// been decoded, so every object of the list is in memory with those fields at once;
    /// here at most one is. Watch events get it too.
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
        Self {
            url_path: api.resource_url().to_owned(),
            client: api.into_client(),
            expected: Expected::partial_metadata(),
            metadata_only: true,
            label_selector: None,
            field_selector: None,
            modify: None,
            _k: PhantomData,
        }
    }
}

impl<K> KubeListerWatcher<K>
where
    K: DeserializeOwned + Send + 'static,
{
    fn selectors(&self, qp: &mut form_urlencoded::Serializer<'_, String>) {
        if let Some(l) = &self.label_selector {
            qp.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            qp.append_pair("fieldSelector", f);
        }
    }

    fn list_request(&self, o: &ListOptions) -> Result<http::Request<Vec<u8>>, Error> {
        let mut qp = form_urlencoded::Serializer::new(String::new());
        self.selectors(&mut qp);
        if let Some(limit) = o.limit {
            qp.append_pair("limit", &limit.to_string());
        }
        if let Some(c) = &o.continue_token {
            qp.append_pair("continue", c);
        }
        if !o.resource_version.is_empty() {
            qp.append_pair("resourceVersion", &o.resource_version);
        }
        let accept = if self.metadata_only {
            METADATA_LIST
        } else {
            JSON
        };
        build_get(&self.url_path, qp.finish(), accept)
    }

    fn watch_request(&self, o: &WatchOptions) -> Result<http::Request<Vec<u8>>, Error> {
        let mut qp = form_urlencoded::Serializer::new(String::new());
        qp.append_pair("watch", "true");
        self.selectors(&mut qp);
        if !o.resource_version.is_empty() {
            qp.append_pair("resourceVersion", &o.resource_version);
        }
        qp.append_pair("timeoutSeconds", &o.timeout.as_secs().max(1).to_string());
        if o.allow_bookmarks {
            qp.append_pair("allowWatchBookmarks", "true");
        }
        if o.send_initial_events {
            qp.append_pair("sendInitialEvents", "true");
            qp.append_pair("resourceVersionMatch", "NotOlderThan");
        }
        let accept = if self.metadata_only { METADATA } else { JSON };
        let mut req = build_get(&self.url_path, qp.finish(), accept)?;
        // One JSON document per line, uncompressed, as kube-client asks for watches.
        req.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        Ok(req)
    }

    async fn list_page(&self, o: &ListOptions) -> Result<ListPage<K>, Error> {
        let req = self.list_request(o)?;
        let text = self.client.request_text(req).await.map_err(from_kube)?;
        decode_list(&text, &self.expected, self.modify.as_ref())
    }

    async fn start_watch(&self, o: &WatchOptions) -> Result<WatchStream<K>, Error> {
        let req = self.watch_request(o)?;
        let body = self.client.request_stream(req).await.map_err(from_kube)?;
        Ok(watch_lines(
            body,
            self.expected.clone(),
            self.modify.clone(),
        ))
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

fn build_get(path: &str, query: String, accept: &str) -> Result<http::Request<Vec<u8>>, Error> {
    let uri = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    http::Request::get(uri)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .map_err(|e| Error::Client { source: e.into() })
}

/// Maps kube-client's error onto ours: statuses stay statuses, anything that failed on
/// the way to or from the server is [`Error::Unreachable`].
fn from_kube(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => Error::Api((*status).into()),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Error::unreachable(e)
        }
        kube::Error::SerdeError(e) => Error::decode("response", describe_json_error(&e)),
        kube::Error::FromUtf8(_) => Error::decode("response", "not UTF-8"),
        other => Error::Client {
            source: other.into(),
        },
    }
}

/// The `apiVersion`/`kind` objects must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Expected {
    api_version: String,
    kind: String,
}

impl Expected {
    fn partial_metadata() -> Self {
        Self {
            api_version: "meta.k8s.io/v1".into(),
            kind: "PartialObjectMetadata".into(),
        }
    }

    /// Checks the type fields of a raw object. Absent fields pass: list items often
    /// omit them. With `whole`, the whole object is searched for them; otherwise only its
    /// leading keys, where the API server writes them (`{"kind":..,"apiVersion":..,
    /// "metadata":..}`), so that the check costs next to nothing on the hot path.
    fn check(&self, raw: &RawValue, whole: bool) -> Result<(), Error> {
        let (api_version, kind) = peek_type(raw.get(), whole);
        let kind_ok = kind.as_deref().is_none_or(|k| k == self.kind);
        let version_ok = api_version.as_deref().is_none_or(|v| v == self.api_version);
        if kind_ok && version_ok {
            return Ok(());
        }
        Err(Error::UnexpectedKind {
            expected: self.to_string(),
            actual: format!(
                "{}/{}",
                api_version.as_deref().unwrap_or("?"),
                kind.as_deref().unwrap_or("?")
            ),
        })
    }
}

/// Reads `apiVersion` and `kind` of a JSON object: from its leading keys only, or (with
/// `whole`) from anywhere in it. Malformed JSON gives what was found before the fault.
fn peek_type(raw: &str, whole: bool) -> (Option<String>, Option<String>) {
    use serde::de::{IgnoredAny, MapAccess, Visitor};

    struct Peek<'a> {
        found: &'a mut (Option<String>, Option<String>),
        whole: bool,
    }
    impl<'de> Visitor<'de> for Peek<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                match &*key {
                    "apiVersion" => self.found.0 = Some(map.next_value()?),
                    "kind" => self.found.1 = Some(map.next_value()?),
                    // Stopping early leaves the object unfinished, which the caller
                    // ignores: what was found is already stored.
                    _ if !self.whole => return Ok(()),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                if self.found.0.is_some() && self.found.1.is_some() {
                    return Ok(());
                }
            }
            Ok(())
        }
    }
    let mut found = (None, None);
    let mut de = serde_json::Deserializer::from_str(raw);
    let _ = serde::Deserializer::deserialize_map(
        &mut de,
        Peek {
            found: &mut found,
            whole,
        },
    );
    found
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// Decodes one object, telling a wrong kind from a malformed object.
fn decode_object<K: DeserializeOwned>(
    raw: &RawValue,
    expected: &Expected,
    what: impl FnOnce() -> String,
) -> Result<K, Error> {
    expected.check(raw, false)?;
    serde_json::from_str(raw.get()).map_err(|e| {
        // A wrong kind often fails to decode: say so rather than "cannot decode".
        match expected.check(raw, true) {
            Err(wrong_kind) => wrong_kind,
            Ok(()) => Error::decode(what(), describe_json_error(&e)),
        }
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

/// Decodes a list page. The fast path decodes it in one pass, modifying and wrapping
/// each item in its `Arc` as soon as it is decoded (so a page never holds every item in
/// its unmodified form at once); only a page that fails is decoded again item by item,
/// to say which item failed and whether it is of another kind. (Items of a list are
/// checked for their kind that way only: the API server omits `kind` in the items of
/// built-in lists, and typed resources refuse another kind while decoding anyway.)
fn decode_list<K: DeserializeOwned>(
    text: &str,
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<ListPage<K>, Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = ListSeed { modify };
    match seed
        .deserialize(&mut de)
        .and_then(|page| de.end().map(|()| page))
    {
        Ok(page) => Ok(page),
        Err(_) => decode_list_by_item(text, expected, modify),
    }
}

/// Deserializes a list page: `metadata`, and `items` through [`ItemsSeed`].
struct ListSeed<'m, K> {
    modify: Option<&'m Modify<K>>,
}

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ListSeed<'_, K> {
    type Value = ListPage<K>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for ListSeed<'_, K> {
    type Value = ListPage<K>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut meta = ListMeta::default();
        let mut items = Vec::new();
        while let Some(field) = map.next_key::<Cow<'de, str>>()? {
            match &*field {
                "metadata" => meta = map.next_value::<Option<ListMeta>>()?.unwrap_or_default(),
                "items" => {
                    items = map.next_value_seed(ItemsSeed {
                        modify: self.modify,
                    })?
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(ListPage {
            items,
            resource_version: meta.resource_version.unwrap_or_default(),
            continue_token: meta.continue_token.filter(|c| !c.is_empty()),
        })
    }
}

/// Deserializes `items` (an array, or null) into `Arc`s, modifying each item first.
struct ItemsSeed<'m, K> {
    modify: Option<&'m Modify<K>>,
}

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ItemsSeed<'_, K> {
    type Value = Vec<Arc<K>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for ItemsSeed<'_, K> {
    type Value = Vec<Arc<K>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<K>()? {
            items.push(finish(item, self.modify));
        }
        Ok(items)
    }
}

/// Applies `modify` to a freshly decoded object and puts it in its `Arc`.
fn finish<K>(mut obj: K, modify: Option<&Modify<K>>) -> Arc<K> {
    if let Some(m) = modify {
        m(&mut obj);
    }
    Arc::new(obj)
}

fn decode_list_by_item<K: DeserializeOwned>(
    text: &str,
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<ListPage<K>, Error> {
    #[derive(Deserialize)]
    struct RawList<'a> {
        #[serde(default)]
        metadata: ListMeta,
        #[serde(borrow, default)]
        items: Option<Vec<&'a RawValue>>,
    }
    let raw: RawList<'_> =
        serde_json::from_str(text).map_err(|e| Error::decode("list", describe_json_error(&e)))?;
    let raw_items = raw.items.unwrap_or_default();
    let mut items = Vec::with_capacity(raw_items.len());
    for (i, item) in raw_items.into_iter().enumerate() {
        let obj = decode_object(item, expected, || format!("list item {i}"))?;
        items.push(finish(obj, modify));
    }
    Ok(ListPage {
        items,
        resource_version: raw.metadata.resource_version.unwrap_or_default(),
        continue_token: raw.metadata.continue_token.filter(|c| !c.is_empty()),
    })
}

/// Decodes one line of a watch stream.
fn decode_event<K: DeserializeOwned>(
    line: &str,
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<WatchEvent<K>, Error> {
    #[derive(Deserialize)]
    struct RawEvent<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        object: &'a RawValue,
    }
    let ev: RawEvent<'_> = match serde_json::from_str(line) {
        Ok(ev) => ev,
        Err(e) => {
            // A bare Status instead of an event: the server failed mid-stream.
            if let Ok(status) = serde_json::from_str::<kube::core::Status>(line)
                && (status.code != 0 || !status.reason.is_empty())
            {
                return Err(Error::Api(status.into()));
            }
            return Err(Error::decode("watch event", describe_json_error(&e)));
        }
    };
    let decode = |what: &str| {
        let mut obj: K = decode_object(ev.object, expected, || format!("{what} object"))?;
        if let Some(m) = modify {
            m(&mut obj);
        }
        Ok::<K, Error>(obj)
    };
    match &*ev.kind {
        "ADDED" => decode("ADDED").map(WatchEvent::Added),
        "MODIFIED" => decode("MODIFIED").map(WatchEvent::Modified),
        "DELETED" => decode("DELETED").map(WatchEvent::Deleted),
        "BOOKMARK" => decode_bookmark(ev.object).map(WatchEvent::Bookmark),
        "ERROR" => {
            let status: kube::core::Status = serde_json::from_str(ev.object.get())
                .map_err(|e| Error::decode("ERROR event", describe_json_error(&e)))?;
            Err(Error::Api(status.into()))
        }
        other => Err(Error::decode(
            "watch event",
            format!("unknown event type {:?}", truncate(other, 32)),
        )),
    }
}

fn decode_bookmark(raw: &RawValue) -> Result<Bookmark, Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        resource_version: String,
        #[serde(default)]
        annotations: Option<BTreeMap<String, String>>,
    }
    #[derive(Deserialize)]
    struct Raw {
        metadata: Meta,
    }
    let b: Raw = serde_json::from_str(raw.get())
        .map_err(|e| Error::decode("BOOKMARK object", describe_json_error(&e)))?;
    let end = b
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INITIAL_EVENTS_END))
        .is_some_and(|v| v == "true");
    Ok(Bookmark {
        resource_version: b.metadata.resource_version,
        initial_events_end: end,
    })
}

/// Why a JSON value did not decode, without the value itself: serde's messages quote
/// the offending value (`invalid value: string "c2VjcmV0", expected ...`), and the value
/// may come from a Secret. Field and variant names are schema, and stay.
fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let msg = e.to_string();
    // serde_json appends " at line L column C"; we add our own position.
    let msg = msg
        .rsplit_once(" at line ")
        .map_or(msg.as_str(), |(m, _)| m);
    let what = match e.classify() {
        Category::Data => {
            if let Some(rest) = msg
                .strip_prefix("invalid type: ")
                .or_else(|| msg.strip_prefix("invalid value: "))
            {
                let kind = if msg.starts_with("invalid type") {
                    "invalid type"
                } else {
                    "invalid value"
                };
                match rest.split_once(", expected ") {
                    Some((_, exp)) => format!("{kind}, expected {}", redact_quoted(exp)),
                    None => kind.to_owned(),
                }
            } else {
                redact_quoted(msg)
            }
        }
        Category::Syntax => format!("malformed JSON ({})", redact_quoted(msg)),
        Category::Eof => "truncated JSON".to_owned(),
        Category::Io => "I/O error".to_owned(),
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// Replaces the content of every `"..."` with `…`.
fn redact_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut inside = false;
    for c in s.chars() {
        if c == '"' {
            if inside {
                out.push('…');
            }
            inside = !inside;
            out.push(c);
        } else if !inside {
            out.push(c);
        }
    }
    out
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Whether an I/O error while reading a watch means the connection went away (the
/// server closed it, a proxy cut it, the peer reset it): the watch simply ended, as
/// client-go's `IsProbableEOF` decides.
fn is_probable_eof(e: &io::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>()
            && matches!(
                io.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::TimedOut
            )
        {
            return true;
        }
        let msg = err.to_string().to_ascii_lowercase();
        if [
            "unexpected eof",
            "connection reset",
            "connection closed",
            "broken pipe",
            "close_notify",
            "end of file",
            "error reading a body from connection",
        ]
        .iter()
        .any(|p| msg.contains(p))
        {
            return true;
        }
        // `io::Error::source` skips the error it wraps: look inside first.
        cur = match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    false
}

/// Turns a watch response body into a stream of decoded events.
fn watch_lines<K, R>(body: R, expected: Expected, modify: Option<Modify<K>>) -> WatchStream<K>
where
    K: DeserializeOwned + Send + 'static,
    R: AsyncBufRead + Send + 'static,
{
    struct State<R, K> {
        body: std::pin::Pin<Box<R>>,
        buf: Vec<u8>,
        expected: Expected,
        modify: Option<Modify<K>>,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        buf: Vec::with_capacity(8 * 1024),
        expected,
        modify,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            st.buf.clear();
            match st.body.as_mut().read_until(b'\n', &mut st.buf).await {
                Ok(0) => return None,
                Ok(_) if st.buf.last() != Some(&b'\n') => {
                    // The connection ended mid-line: a cut, not a malformed event.
                    tracing::debug!(bytes = st.buf.len(), "watch connection ended mid-event");
                    return None;
                }
                Ok(_) => {
                    let line = match std::str::from_utf8(&st.buf) {
                        Ok(s) => s.trim(),
                        Err(_) => {
                            let err = Error::decode("watch event", "not UTF-8");
                            return Some((Err(err), st));
                        }
                    };
                    if line.is_empty() {
                        continue;
                    }
                    let ev = decode_event::<K>(line, &st.expected, st.modify.as_ref());
                    return Some((ev, st));
                }
                Err(e) if is_probable_eof(&e) => {
                    tracing::debug!(error = %e, "watch connection closed");
                    return None;
                }
                Err(e) => {
                    st.done = true;
                    return Some((Err(Error::unreachable(e)), st));
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

    use super::*;

    fn pods() -> Expected {
        Expected {
            api_version: "v1".into(),
            kind: "Pod".into(),
        }
    }

    #[test]
    fn added_modified_deleted_decode_to_objects() {
        for (t, want) in [("ADDED", 0), ("MODIFIED", 1), ("DELETED", 2)] {
            let line = format!(
                r#"{{"type":"{t}","object":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"a","namespace":"ns","resourceVersion":"5"}}}}}}"#
            );
            let ev = decode_event::<Pod>(&line, &pods(), None).unwrap();
            let (idx, pod) = match ev {
                WatchEvent::Added(p) => (0, p),
                WatchEvent::Modified(p) => (1, p),
                WatchEvent::Deleted(p) => (2, p),
                WatchEvent::Bookmark(_) => panic!("bookmark"),
            };
            assert_eq!(idx, want);
            assert_eq!(pod.metadata.resource_version.as_deref(), Some("5"));
        }
    }

    #[test]
    fn bookmark_carries_rv_and_the_initial_events_end_annotation() {
        let line = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"210","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        let ev = decode_event::<Pod>(line, &pods(), None).unwrap();
        assert_eq!(ev, WatchEvent::Bookmark(Bookmark::new("210", true)));
        let plain = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"211"}}}"#;
        let ev = decode_event::<Pod>(plain, &pods(), None).unwrap();
        assert_eq!(ev, WatchEvent::Bookmark(Bookmark::new("211", false)));
    }

    #[test]
    fn error_event_and_bare_status_become_api_errors() {
        let line = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        let err = decode_event::<Pod>(line, &pods(), None).unwrap_err();
        assert!(err.is_expired(), "{err}");
        let bare = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"boom","reason":"InternalError","code":500}"#;
        let err = decode_event::<Pod>(bare, &pods(), None).unwrap_err();
        assert_eq!(err.status_code(), Some(500));
    }

    #[test]
    fn garbage_and_unknown_types_are_decode_errors() {
        for line in [
            "not json",
            r#"{"type":"ADDED"}"#,
            r#"{"type":"WHAT","object":{}}"#,
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":5}}}"#,
        ] {
            let err = decode_event::<Pod>(line, &pods(), None).unwrap_err();
            assert!(matches!(err, Error::Decode { .. }), "{line}: {err:?}");
        }
    }

    #[test]
    fn an_object_of_another_kind_is_unexpected_kind_not_decode() {
        let line = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}}"#;
        match decode_event::<Pod>(line, &pods(), None).unwrap_err() {
            Error::UnexpectedKind { expected, actual } => {
                assert_eq!(expected, "v1/Pod");
                assert_eq!(actual, "v1/ConfigMap");
            }
            other => panic!("{other:?}"),
        }
        // A dynamic type checks against its ApiResource.
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"));
        let exp = Expected {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        };
        assert!(matches!(
            decode_event::<DynamicObject>(line, &exp, None),
            Err(Error::UnexpectedKind { .. })
        ));
    }

    #[test]
    fn decode_errors_never_echo_values_from_the_body() {
        // A Secret whose data is not base64: serde would quote the value.
        let line = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"hunter2-not-base64!"}}}"#;
        let exp = Expected {
            api_version: "v1".into(),
            kind: "Secret".into(),
        };
        let err = decode_event::<Secret>(line, &exp, None).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, Error::Decode { .. }));
        assert!(!shown.contains("hunter2"), "{shown}");
        let err = decode_event::<ConfigMap>(
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"},"data":{"k":5}}}"#,
            &Expected { api_version: "v1".into(), kind: "ConfigMap".into() },
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn the_type_peek_reads_leading_keys_and_the_whole_object_on_demand() {
        let lead = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}"#;
        assert_eq!(
            peek_type(lead, false),
            (Some("v1".into()), Some("Pod".into()))
        );
        let late = r#"{"metadata":{"name":"a"},"kind":"Pod","apiVersion":"v1"}"#;
        assert_eq!(peek_type(late, false), (None, None));
        assert_eq!(
            peek_type(late, true),
            (Some("v1".into()), Some("Pod".into()))
        );
        assert_eq!(peek_type("not json", true), (None, None));
        assert_eq!(
            peek_type(r#"{"kind":"Pod","#, true),
            (None, Some("Pod".into()))
        );
    }

    #[test]
    fn a_wrong_kind_written_after_metadata_is_still_named_when_it_fails_to_decode() {
        // k8s-openapi refuses another kind while decoding; the error then says which.
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"a"},"apiVersion":"v1","kind":"ConfigMap"}}"#;
        assert!(matches!(
            decode_event::<Pod>(line, &pods(), None),
            Err(Error::UnexpectedKind { .. })
        ));
    }

    #[test]
    fn modify_runs_on_every_list_item_and_watch_object_on_both_decode_paths() {
        let strip: Modify<Pod> = Arc::new(|p: &mut Pod| {
            p.metadata.managed_fields = None;
            p.metadata
                .labels
                .get_or_insert_default()
                .insert("seen".into(), "1".into());
        });
        let mf =
            r#""managedFields":[{"manager":"m","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]"#;
        let fast = format!(
            r#"{{"kind":"PodList","metadata":{{"resourceVersion":"9"}},"items":[{{"metadata":{{"name":"a",{mf}}}}},{{"metadata":{{"name":"b",{mf}}}}}]}}"#
        );
        // A wrong kind among the items forces the item-by-item path: it must fail the same
        // way, and a good page decoded that way must be modified too.
        let page = decode_list::<Pod>(&fast, &pods(), Some(&strip)).unwrap();
        assert_eq!(page.resource_version, "9");
        for p in &page.items {
            assert_eq!(p.metadata.managed_fields, None);
            assert_eq!(p.metadata.labels.as_ref().unwrap()["seen"], "1");
        }
        let slow = decode_list_by_item::<Pod>(&fast, &pods(), Some(&strip)).unwrap();
        assert!(
            slow.items
                .iter()
                .all(|p| p.metadata.managed_fields.is_none())
        );
        let untouched = decode_list::<Pod>(&fast, &pods(), None).unwrap();
        assert!(
            untouched
                .items
                .iter()
                .all(|p| p.metadata.managed_fields.is_some())
        );

        let line = format!(
            r#"{{"type":"MODIFIED","object":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"a",{mf}}}}}}}"#
        );
        match decode_event::<Pod>(&line, &pods(), Some(&strip)).unwrap() {
            WatchEvent::Modified(p) => assert_eq!(p.metadata.managed_fields, None),
            _ => panic!("not a MODIFIED event"),
        }
    }

    #[test]
    fn list_pages_decode_with_rv_and_continue_and_tolerate_missing_item_kinds() {
        let text = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10","continue":"c1"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        let page = decode_list::<Pod>(text, &pods(), None).unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.resource_version, "10");
        assert_eq!(page.continue_token.as_deref(), Some("c1"));
        let last = r#"{"metadata":{"resourceVersion":"11","continue":""},"items":null}"#;
        let page = decode_list::<Pod>(last, &pods(), None).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.continue_token, None);
        let wrong = r#"{"metadata":{"resourceVersion":"11"},"items":[{"metadata":{"name":"a"}},{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"}}]}"#;
        assert!(matches!(
            decode_list::<Pod>(wrong, &pods(), None),
            Err(Error::UnexpectedKind { .. })
        ));
        let bad = r#"{"metadata":{"resourceVersion":"11"},"items":[{"metadata":{"name":"a"}},{"metadata":7}]}"#;
        match decode_list::<Pod>(bad, &pods(), None).unwrap_err() {
            Error::Decode { what, .. } => assert_eq!(what, "list item 1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn probable_eof_covers_cuts_and_resets_but_not_other_io_errors() {
        assert!(is_probable_eof(&io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "x"
        )));
        assert!(is_probable_eof(&io::Error::other(
            "peer closed connection without sending TLS close_notify"
        )));
        assert!(is_probable_eof(&io::Error::other(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "reset"
        ))));
        assert!(!is_probable_eof(&io::Error::other("invalid certificate")));
    }

    #[tokio::test]
    async fn a_line_cut_mid_event_ends_the_stream_cleanly() {
        let body: &[u8] = b"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"3\"}}}\n\n{\"type\":\"ADDED\",\"obj";
        let stream: WatchStream<Pod> = watch_lines(futures::io::Cursor::new(body), pods(), None);
        let got: Vec<_> = stream.collect().await;
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], Ok(WatchEvent::Bookmark(b)) if b.resource_version == "3"));
    }

    fn lw<K: Resource>(path: &str, metadata_only: bool) -> KubeListerWatcher<K> {
        // Requests are only built, never sent: any client will do.
        let cfg = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        KubeListerWatcher {
            client: kube::Client::try_from(cfg).unwrap(),
            url_path: path.into(),
            expected: pods(),
            metadata_only,
            label_selector: Some("app=web".into()),
            field_selector: None,
            modify: None,
            _k: PhantomData,
        }
    }

    #[tokio::test]
    async fn first_list_query_keeps_rv_0_with_limit_500_as_client_go_does() {
        let lw = lw::<Pod>("/api/v1/namespaces/ns/pods", false);
        let req = lw.list_request(&ListOptions::new("0", Some(500))).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&limit=500&resourceVersion=0"
        );
        assert_eq!(req.headers()[http::header::ACCEPT], JSON);
        let next = ListOptions {
            resource_version: String::new(),
            limit: Some(500),
            continue_token: Some("tok".into()),
        };
        let req = lw.list_request(&next).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&limit=500&continue=tok"
        );
    }

    #[tokio::test]
    async fn watch_queries_carry_bookmarks_timeout_and_streaming_options() {
        let lw = lw::<PartialObjectMeta<Pod>>("/api/v1/pods", true);
        let mut o = WatchOptions::new("42", std::time::Duration::from_secs(321));
        let req = lw.watch_request(&o).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/pods?watch=true&labelSelector=app%3Dweb&resourceVersion=42&timeoutSeconds=321&allowWatchBookmarks=true"
        );
        assert_eq!(req.headers()[http::header::ACCEPT], METADATA);
        assert_eq!(req.headers()[http::header::ACCEPT_ENCODING], "identity");
        o.resource_version.clear();
        o.send_initial_events = true;
        let req = lw.watch_request(&o).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/pods?watch=true&labelSelector=app%3Dweb&timeoutSeconds=321&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        );
    }

    #[tokio::test]
    async fn constructors_take_the_apis_path_and_the_expected_type() {
        let cfg = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(cfg).unwrap();
        let typed = KubeListerWatcher::new(kube::Api::<Pod>::namespaced(client.clone(), "ns"));
        assert_eq!(typed.url_path, "/api/v1/namespaces/ns/pods");
        assert_eq!(typed.expected, pods());
        assert!(!typed.metadata_only);
        let meta = KubeListerWatcher::metadata_only(kube::Api::<Pod>::all(client.clone()));
        assert_eq!(meta.expected, Expected::partial_metadata());
        assert!(meta.metadata_only);
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
        let dynamic =
            KubeListerWatcher::new_with(kube::Api::<DynamicObject>::all_with(client, &ar), &ar);
        assert_eq!(dynamic.expected.to_string(), "example.com/v1/Widget");
        assert_eq!(dynamic.url_path, "/apis/example.com/v1/widgets");
    }
}
