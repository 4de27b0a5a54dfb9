//! The [`ListerWatcher`] that talks to Kubernetes through a `kube::Client`:
//! [`KubeListerWatcher`], what every kinformer informer over a cluster reads through.
//!
//! kinformer-reflector is the state machine over any [`ListerWatcher`]; this crate is the one
//! for the Kubernetes API, and the wire formats it speaks. Its client comes from
//! [`reflector_client`] (kinformer-client's: kube's connection without its retry layer, with
//! `TCP_NODELAY`).
//!
//! # Wire format: protobuf or JSON
//!
//! [`KubeListerWatcher`] asks the API server for Kubernetes protobuf where client-go does
//! and decodes it straight into `K` (with kinformer-protobuf: the same `K`, whatever the
//! format, k8s-openapi types included). [`WireFormat`] picks what it asks for:
//!
//! - [`WireFormat::Auto`] (the default): protobuf for the built-in types the protobuf
//!   schema knows (every type of client-go's scheme: `Pod`, `Deployment`, `ConfigMap`,
//!   ...) and for metadata-only lists and watches (the protobuf `PartialObjectMetadata`,
//!   any resource); JSON for custom resources and `DynamicObject`. That is client-go's
//!   split: its typed clients ask for `application/vnd.kubernetes.protobuf,
//!   application/json` since v0.32, its metadata client for the protobuf
//!   `PartialObjectMetadata`, its dynamic client for JSON.
//! - [`WireFormat::Json`]: JSON for everything (to read the traffic in a proxy, or to
//!   compare).
//! - [`WireFormat::Protobuf`]: protobuf first for every type. The API server serves
//!   custom resources in JSON only and answers such a request in JSON, so for them it is
//!   the same as `Json` (as client-go with `ContentType: protobuf`: the server decides).
//!
//! Whatever was asked, each response is decoded by its `Content-Type`: a server or a proxy
//! that answers JSON works, and error responses (`Status`, in protobuf when protobuf was
//! asked for) keep their code and reason. A watch in protobuf is a stream of
//! length-delimited frames; a frame cut short by the connection ends the watch as a cut
//! line does in JSON, a malformed or oversized one (over 16 MiB, client-go's limit) is an
//! [`Error::Decode`] that never quotes the body. `modify` runs once per object in either
//! format.
//!
//! Why custom resources stay JSON: no protobuf schema exists for them (the API server keeps
//! them as JSON), and the decoder's schema covers the built-in types only. Why
//! `DynamicObject` stays JSON under `Auto`: it is how client-go serves types known only at
//! run time; `Protobuf` decodes it from protobuf too when its type is built in.
//!
//! What it buys: fewer bytes on the wire (a realistic pod's protobuf is about two thirds of
//! its JSON: BENCHMARKS.md's "informer-defaults" wire table) and a faster initial sync, as
//! the same section's protobuf and JSON tables show for both kinformer and client-go.
//!
//! # Clients: kube's retry layer
//!
//! kube's `Client` retries `429`, `503` and `504` internally by default. The reflector
//! must see them, as client-go's does: a `429` is backed off on the reflector's schedule
//! and reported, and a `504` "Too large resource version" must relist at `""` at once
//! (with the retry layer on, a lagging watch cache stalls the list for many retries).
//! So build the reflector's client with [`reflector_client`], which turns the retry
//! layer off; other clients keep it.
//!
//! # How it is built
//!
//! One concern a file:
//!
//! - `request`: the list and watch requests, and the [`WireFormat`] they ask for;
//! - `response`: sending them, the response's `Content-Type` (which decides how its body
//!   is decoded), and error statuses in either format;
//! - `decode`: what decoding needs whatever the wire format (the expected type, `modify`);
//! - `json`: JSON list pages, watch events, bookmarks and error bodies;
//! - `protobuf`: the same in Kubernetes protobuf, through kinformer-protobuf;
//! - `framing`: a watch body split into events (newline-delimited JSON documents, or
//!   length-delimited protobuf frames).
//!
//! Requests are built here (not through `Api::list` / `Api::watch`) for four reasons:
//! the query must say exactly what client-go's reflector says (`resourceVersion=0` *with*
//! `limit=500` on the first list, which kube's `ListParams` drops); the body must be
//! decoded by its `Content-Type`, in JSON or protobuf, which kube's helpers (JSON only)
//! cannot; a watch event must be split into its type and raw object before the object is
//! decoded, so that a wrong kind, a malformed object and a server error body become three
//! different typed errors; and a connection cut mid-stream must read as the end of the
//! watch, not as an error.

#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod cbor;
mod compression;
mod decode;
mod framing;
mod json;
mod protobuf;
mod request;
mod response;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kinformer_compact_store::Cached;
use kinformer_protobuf::FrameDecoder;
use kinformer_reflector::BoxFuture;
use kube::Resource;
use kube::core::PartialObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

use decode::{Expected, Modify};
/// The reflector's connection (kinformer-client's), re-exported: build a
/// [`KubeListerWatcher`]'s client with [`reflector_client`].
pub use kinformer_client::{ReflectorConnection, reflector_client, reflector_connection};
use request::Requests;
pub use request::{Compression, WireFormat};
use response::Format;

use kinformer_reflector::{Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};

/// The [`ListerWatcher`] for Kubernetes: lists and watches the resource of a
/// `kube::Api<K>`, with optional label and field selectors.
///
/// `K` is any `kube::Resource` that deserializes: k8s-openapi types, custom resources,
/// `DynamicObject` (give its `ApiResource` to [`KubeListerWatcher::new_with`]), or
/// `PartialObjectMeta<K>` for metadata-only lists and watches
/// ([`KubeListerWatcher::metadata_only`]). The namespace is the `Api`'s.
///
/// It asks for Kubernetes protobuf where client-go does (built-in types, metadata-only
/// lists and watches) and for JSON otherwise (custom resources, `DynamicObject`); see
/// [`WireFormat`] to choose. Each response is decoded by its `Content-Type`, whatever
/// was asked: a server or a proxy that answers JSON still works.
///
/// Watch events whose object has another `apiVersion`/`kind` than the resource are
/// reported as [`Error::UnexpectedKind`] (list items too: from the list's kind in
/// protobuf; in JSON, when they fail to decode, as the API server omits `kind` in the
/// items of built-in lists); undecodable objects and malformed frames as
/// [`Error::Decode`] (without any value from the body); a server `ERROR` event or error
/// response as [`Error::Api`]; a connection that fails as [`Error::Unreachable`], and
/// one cut mid-watch (mid-line or mid-frame) as the end of the stream.
///
/// Build the client with [`reflector_client`] so that `429` and `504` reach the
/// reflector (see there why).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_kube::{KubeListerWatcher, WireFormat, reflector_client};
/// use kube::Api;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = reflector_client(kube::Config::infer().await?)?;
/// let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client.clone(), "default"))
///     .labels("app=web")
///     .fields("status.phase=Running");
/// let meta_only = KubeListerWatcher::metadata_only(Api::<Pod>::all(client.clone()));
/// // JSON on the wire, e.g. to compare or to debug with a proxy that shows bodies:
/// let json = KubeListerWatcher::new(Api::<Pod>::all(client)).wire_format(WireFormat::Json);
/// # let _ = (pods, meta_only, json);
/// # Ok(())
/// # }
/// ```
pub struct KubeListerWatcher<K> {
    client: kube::Client,
    requests: Requests,
    expected: Expected,
    modify: Option<Modify<K>>,
    /// A change that JSON objects alone get, before `modify`: [`cached`](Self::cached)'s
    /// carried-over `modify`, which a protobuf object got while it was decoded.
    json_first: Option<Modify<K>>,
    protobuf: Option<ProtobufDecode<K>>,
    /// [`drop_managed_fields`](Self::drop_managed_fields)' change of a decoded `K`, before
    /// `modify` (a `Cached<K>` lister-watcher transcodes without them instead).
    strip: Option<Modify<K>>,
    /// Bytes of response bodies received, shared by clones.
    received: Arc<AtomicU64>,
    /// What [`drop_managed_fields`](Self::drop_managed_fields) saw, shared by clones.
    managed_fields: Arc<ManagedFieldsSeen>,
    _k: PhantomData<fn() -> K>,
}

/// How many objects came with `managedFields` and how many without, since a
/// [`KubeListerWatcher`] was told to [drop them](KubeListerWatcher::drop_managed_fields).
#[derive(Debug, Default)]
struct ManagedFieldsSeen {
    stripped: AtomicU64,
    arrived_without: AtomicU64,
}

impl ManagedFieldsSeen {
    fn note(&self, stripped: bool) {
        if stripped {
            // Once a process: the server was asked and sent them anyway.
            if self.stripped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::debug!(
                    "the API server sent managedFields although asked to drop them (KEP-5958 \
                     not served): stripped here"
                );
            }
        } else {
            self.arrived_without.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What became of `managedFields` since a [`KubeListerWatcher`] was told to
/// [drop them](KubeListerWatcher::drop_managed_fields): how many objects arrived with them
/// (the server did not drop them: stripped here) and how many without (dropped by the
/// server, or never had any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManagedFieldsDropped {
    /// Objects that arrived with `managedFields`, which this lister-watcher left out.
    pub stripped_here: u64,
    /// Objects that arrived without them.
    pub arrived_without: u64,
}

/// How a [`KubeListerWatcher`] makes an object of one protobuf list item or watch event
/// instead of `K`'s `Deserialize` ([`KubeListerWatcher::decode_protobuf_with`]).
pub type ProtobufDecode<K> = Arc<
    dyn Fn(&kinformer_protobuf::Object<'_>) -> Result<K, kinformer_protobuf::Error> + Send + Sync,
>;

impl<K> Clone for KubeListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            requests: self.requests.clone(),
            expected: self.expected.clone(),
            modify: self.modify.clone(),
            json_first: self.json_first.clone(),
            protobuf: self.protobuf.clone(),
            strip: self.strip.clone(),
            received: Arc::clone(&self.received),
            managed_fields: Arc::clone(&self.managed_fields),
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
            .field("protobuf_decode", &self.protobuf.is_some())
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
        let mut lw = Self::at(api, expected, metadata_only);
        // `Auto` asks for protobuf where client-go's typed clients do: types known when
        // the program is built (k8s-openapi's; their `DynamicType` is `()`) that the
        // protobuf schema has. A type described at run time (`DynamicObject` and its
        // `ApiResource`) is what client-go's dynamic client serves, in JSON.
        let static_type = std::mem::size_of::<K::DynamicType>() == 0;
        lw.requests.protobuf_by_default = static_type
            && kinformer_protobuf::is_known(&lw.expected.api_version, &lw.expected.kind);
        lw
    }

    /// Lists and watches `K` in `namespace`, or in every namespace when `None`, for code
    /// generic over `K` (an `Api` names a namespace only for types known to be namespaced).
    /// Pass `None` for cluster-scoped types: a namespaced path of one is not found.
    pub fn scoped(client: kube::Client, dyntype: &K::DynamicType, namespace: Option<&str>) -> Self {
        let mut lw = Self::new_with(kube::Api::all_with(client, dyntype), dyntype);
        lw.requests.url_path = K::url_path(dyntype, namespace);
        lw
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
                wire_format: WireFormat::Auto,
                protobuf_by_default: false,
                drop_managed_fields: false,
                compression: Compression::default(),
            },
            client: api.into_client(),
            expected,
            modify: None,
            json_first: None,
            protobuf: None,
            strip: None,
            received: Arc::default(),
            managed_fields: Arc::default(),
            _k: PhantomData,
        }
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

    /// Which encoding to ask the API server for (default [`WireFormat::Auto`]: protobuf
    /// for built-in types and metadata-only, JSON for custom resources and
    /// `DynamicObject`, as client-go). Responses are decoded by their `Content-Type`
    /// whatever this says.
    #[must_use]
    pub fn wire_format(mut self, format: WireFormat) -> Self {
        self.requests.wire_format = format;
        self
    }

    /// Whether lists and streaming lists ask for gzip (default [`Compression::Gzip`], as
    /// client-go; see there for what the server compresses and what it costs). A gzip response is decoded
    /// whatever was asked; [`bytes_received`](Self::bytes_received) counts its compressed
    /// bytes.
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> Self {
        self.requests.compression = compression;
        self
    }

    /// Changes every object right after it is decoded, before the rest of its list page
    /// is (kube-runtime's `modify`): the place to drop what the program never reads, e.g.
    /// `managedFields`, which k8s-openapi holds as a `serde_json::Value` tree of several
    /// KiB per object. A paged list is decoded a page at a time, so a transform set on the
    /// informer (which runs in the reflector as each object reaches it) sees a page of
    /// untransformed objects at once; here at most one is. Watch events get it too. It
    /// runs once per object from the server, never on objects already cached, in either
    /// wire format.
    ///
    /// ```no_run
    /// # use kinformer_kube::KubeListerWatcher;
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

    /// The bytes of response bodies this lister-watcher and its clones received so far:
    /// every list page and every watch stream, as they came off the connection (after
    /// HTTP framing, before decoding; error responses aside). What a sharded informer on a
    /// server without the gate `ShardedListAndWatch` receives of other shards shows here.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kinformer_kube::KubeListerWatcher;
    /// # fn f(client: kube::Client) {
    /// let lw = KubeListerWatcher::new(kube::Api::<Pod>::all(client));
    /// let counter = lw.clone(); // give `lw` to an informer, read the clone
    /// println!("{} bytes received", counter.bytes_received());
    /// # let _ = lw;
    /// # }
    /// ```
    pub fn bytes_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// The same requests, for objects of another type `T`, which `decode` makes of each
    /// protobuf list item and watch event's object (JSON still goes through `T`'s
    /// `Deserialize`): a type that is not built by decoding (see [`cached`](Self::cached),
    /// which transcodes the bytes into kinformer-compact-store's encoding). A
    /// [`modify`](Self::modify) given before does not carry over (it changes a `K`). An
    /// object `decode` refuses is reported and skipped as one `K` refuses is
    /// (`ListPage::undecodable`).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kinformer_kube::KubeListerWatcher;
    /// # fn f(client: kube::Client) {
    /// // Just the pods' names and labels from protobuf, nothing else decoded.
    /// #[derive(serde::Deserialize)]
    /// struct Slim { metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta }
    /// let lw = KubeListerWatcher::new(kube::Api::<Pod>::all(client))
    ///     .decode_protobuf_with(|object| object.deserialize::<Slim>());
    /// # let _ = lw;
    /// # }
    /// ```
    pub fn decode_protobuf_with<T>(
        self,
        decode: impl Fn(&kinformer_protobuf::Object<'_>) -> Result<T, kinformer_protobuf::Error>
        + Send
        + Sync
        + 'static,
    ) -> KubeListerWatcher<T> {
        KubeListerWatcher {
            client: self.client,
            requests: self.requests,
            expected: self.expected,
            modify: None,
            json_first: None,
            protobuf: Some(Arc::new(decode)),
            strip: None,
            received: self.received,
            managed_fields: self.managed_fields,
            _k: PhantomData,
        }
    }

    /// What became of `managedFields` since [`drop_managed_fields`](Self::drop_managed_fields)
    /// was set: objects stripped here, objects that arrived without. Shared by clones.
    pub fn managed_fields_dropped(&self) -> ManagedFieldsDropped {
        ManagedFieldsDropped {
            stripped_here: self.managed_fields.stripped.load(Ordering::Relaxed),
            arrived_without: self.managed_fields.arrived_without.load(Ordering::Relaxed),
        }
    }
}

impl<K: Resource> KubeListerWatcher<K> {
    /// Leaves every object's `metadata.managedFields` out, from the server where it can,
    /// here where it cannot: the field that is up to half of an object's bytes and that
    /// few controllers read (server-side apply's bookkeeping).
    ///
    /// - **Asked of the server**: every request's media types carry KEP-5958's
    ///   `;drop=metadata.managedFields` (alpha gate `ManagedFieldsOptOut`). A server
    ///   without it ignores the parameter (as k8s.io/apiserver does every parameter it does
    ///   not know: Kubernetes 1.37.2 does), so asking never fails a request.
    /// - **Stripped here** when they come anyway, found per object, not assumed: a
    ///   [`cached`](Self::cached) lister-watcher steps over their bytes while it transcodes
    ///   protobuf (`Cached::from_protobuf_without_managed_fields`: cheaper than keeping
    ///   them, where a transform decodes, changes and encodes each object); JSON objects and
    ///   decoded `K`s lose them after decoding, before [`modify`](Self::modify).
    ///
    /// [`managed_fields_dropped`](Self::managed_fields_dropped) says which happened. This
    /// replaces the transform users write for the same end (client-go's
    /// `SetTransform` clearing `ManagedFields`, the factory's `transform_meta`).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kinformer_kube::KubeListerWatcher;
    /// # fn f(client: kube::Client) {
    /// let pods = KubeListerWatcher::new(kube::Api::<Pod>::all(client)).drop_managed_fields();
    /// let counter = pods.clone();
    /// let informer_lw = pods.cached();
    /// // ... once synced: the server did not drop them, so they were stripped here.
    /// let seen = counter.managed_fields_dropped();
    /// println!("{} stripped here, {} came without", seen.stripped_here, seen.arrived_without);
    /// # let _ = informer_lw;
    /// # }
    /// ```
    #[must_use]
    pub fn drop_managed_fields(mut self) -> Self {
        self.requests.drop_managed_fields = true;
        let seen = Arc::clone(&self.managed_fields);
        self.strip = Some(Arc::new(move |obj: &mut K| {
            seen.note(obj.meta_mut().managed_fields.take().is_some());
        }));
        self
    }
}

impl<K> KubeListerWatcher<K>
where
    K: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// The same requests, for objects kept in kinformer's default cache: each list item and
    /// watch event becomes a [`Cached<K>`] (kinformer-compact-store), read in place through
    /// its typed view. Protobuf is transcoded into the cache's encoding without building a
    /// `K` (`managedFields` stay the JSON text the server sent); JSON (custom resources)
    /// is decoded as `K` and encoded. A [`modify`](Self::modify) given before carries over:
    /// each protobuf object is then decoded as `K` (no longer transcoded), changed and
    /// encoded once, and so is one of a decoder of your own
    /// ([`decode_protobuf_with`](Self::decode_protobuf_with)); a JSON object is changed
    /// after it is decoded. A `modify` of the `Cached<K>` lister-watcher runs after it.
    ///
    /// This is what a factory's informer lists and watches with; an informer built from it
    /// is a `SharedIndexInformer<Cached<K>>`, one built from `self` keeps decoded `K`s.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use kinformer_kube::KubeListerWatcher;
    /// # fn f(client: kube::Client) {
    /// let pods = KubeListerWatcher::new(kube::Api::<Pod>::all(client)).labels("app=web").cached();
    /// # let _ = pods;
    /// # }
    /// ```
    pub fn cached(self) -> KubeListerWatcher<Cached<K>> {
        // A decoded object is changed as this lister-watcher would: stripped, then modified.
        let modify = chain(self.strip.as_ref(), self.modify.as_ref());
        // Stripping alone needs no `K`: the transcoder steps over the field.
        let strip_only = self.strip.is_some() && self.modify.is_none();
        let lw = match self.protobuf.clone() {
            None if modify.is_none() => self.decode_protobuf_with(Cached::from_protobuf),
            None if strip_only => {
                let seen = Arc::clone(&self.managed_fields);
                self.decode_protobuf_with(move |object| {
                    let (cached, stripped) = Cached::from_protobuf_without_managed_fields(object)?;
                    seen.note(stripped);
                    Ok(cached)
                })
            }
            custom => {
                let modify = modify.clone();
                self.decode_protobuf_with(move |object| {
                    let mut obj = match &custom {
                        Some(decode) => decode(object)?,
                        None => object.deserialize::<K>()?,
                    };
                    if let Some(f) = &modify {
                        f(&mut obj);
                    }
                    Cached::new(&obj).map_err(|e| kinformer_protobuf::Error::Rejected {
                        path: kinformer_protobuf::Path::default(),
                        reason: e.to_string(),
                    })
                })
            }
        };
        KubeListerWatcher {
            json_first: modify.map(|f| -> Modify<Cached<K>> {
                Arc::new(move |c: &mut Cached<K>| {
                    // An object that does not decode stays as it came: its readers get
                    // the typed error.
                    if let Ok(changed) = c.map(|obj| f(obj)) {
                        *c = changed;
                    }
                })
            }),
            ..lw
        }
    }
}

/// `first` then `then`, as one change.
fn chain<K: 'static>(first: Option<&Modify<K>>, then: Option<&Modify<K>>) -> Option<Modify<K>> {
    match (first, then) {
        (Some(first), Some(then)) => {
            let (first, then) = (Arc::clone(first), Arc::clone(then));
            Some(Arc::new(move |obj: &mut K| {
                first(obj);
                then(obj);
            }))
        }
        (first, then) => first.or(then).cloned(),
    }
}

impl<K> KubeListerWatcher<K>
where
    K: DeserializeOwned + Send + 'static,
{
    fn count(&self, bytes: usize) {
        self.received.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// What a protobuf object gets once decoded: `strip`, then `modify`.
    fn protobuf_modify(&self) -> Option<Modify<K>> {
        chain(self.strip.as_ref(), self.modify.as_ref())
    }

    /// What a JSON object gets: `json_first`, then `strip` and `modify`.
    fn json_modify(&self) -> Option<Modify<K>> {
        chain(self.json_first.as_ref(), self.protobuf_modify().as_ref())
    }

    async fn list_page(&self, o: &ListOptions) -> Result<ListPage<K>, Error> {
        let req = self.requests.list(o)?;
        let resp = response::send(&self.client, req, self.requests.asks()).await?;
        let body = response::read_body(resp.body).await?;
        self.count(body.as_ref().len());
        let unzipped;
        let body: &[u8] = if resp.gzip {
            unzipped = compression::gunzip(body.as_ref()).await?;
            &unzipped
        } else {
            body.as_ref()
        };
        let expected = &self.expected;
        match resp.format {
            Format::Protobuf => protobuf::decode_list(
                body,
                expected,
                self.protobuf_modify().as_ref(),
                self.protobuf.as_ref(),
            ),
            Format::Json => {
                let text =
                    std::str::from_utf8(body).map_err(|_| Error::decode("list", "not UTF-8"))?;
                json::decode_list(text, expected, self.json_modify().as_ref())
            }
            Format::Cbor => cbor::decode_list(body, expected, self.json_modify().as_ref()),
        }
    }

    async fn start_watch(&self, o: &WatchOptions) -> Result<WatchStream<K>, Error> {
        use futures::TryStreamExt;
        use http_body_util::BodyExt;

        let req = self.requests.watch(o)?;
        let resp = response::send(&self.client, req, self.requests.asks()).await?;
        // kube's client wraps body errors; the framing tells a cut from a failure by the
        // I/O error inside.
        let received = Arc::clone(&self.received);
        let chunks = resp
            .body
            .into_data_stream()
            .inspect_ok(move |chunk| {
                received.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            })
            .map_err(std::io::Error::other);
        let chunks = if resp.gzip {
            futures::StreamExt::boxed(compression::gunzip_stream(chunks.into_async_read()))
        } else {
            futures::StreamExt::boxed(chunks)
        };
        let expected = self.expected.clone();
        Ok(match resp.format {
            Format::Protobuf => {
                let (modify, custom) = (self.protobuf_modify(), self.protobuf.clone());
                framing::watch_frames(chunks, FrameDecoder::new(), move |frame| {
                    protobuf::decode_frame(frame, &expected, modify.as_ref(), custom.as_ref())
                })
            }
            Format::Json => {
                let modify = self.json_modify();
                framing::watch_lines(chunks.into_async_read(), move |line| {
                    json::decode_line(line, &expected, modify.as_ref())
                })
            }
            Format::Cbor => {
                let modify = self.json_modify();
                framing::watch_frames(chunks, cbor::Sequence::default(), move |item| {
                    cbor::decode_event(item, &expected, modify.as_ref())
                })
            }
        })
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

impl<K> KubeListerWatcher<K> {
    /// This lister-watcher, restricted to one shard: see
    /// [`ShardedListerWatcher`](kinformer_reflector::ShardedListerWatcher).
    pub fn sharded(
        self,
        selector: kinformer_reflector::ShardSelector,
    ) -> kinformer_reflector::ShardedListerWatcher<Self> {
        kinformer_reflector::ShardedListerWatcher::new(self, selector)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

    use super::protobuf::tests as pb;
    use super::*;
    use kinformer_reflector::WatchEvent;

    /// A client whose server answers every request with `status`, `content_type` and
    /// `body`, and records the `Accept` header of each request.
    fn canned(
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    ) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        let accepts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&accepts);
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let accept = req.headers()[http::header::ACCEPT]
                .to_str()
                .unwrap()
                .to_owned();
            seen.lock().unwrap().push(accept);
            let resp = http::Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, content_type)
                .body(kube::client::Body::from(body.clone()))
                .unwrap();
            async move { Ok::<_, std::convert::Infallible>(resp) }
        });
        (kube::Client::new(service, "default"), accepts)
    }

    fn framed(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in frames {
            out.extend_from_slice(&u32::try_from(f.len()).unwrap().to_be_bytes());
            out.extend_from_slice(f);
        }
        out
    }

    fn pods(client: kube::Client) -> KubeListerWatcher<Pod> {
        KubeListerWatcher::new(kube::Api::<Pod>::namespaced(client, "ns"))
    }

    /// Every item of a pod watch on `client`, to its end.
    async fn watch_all(client: kube::Client) -> Vec<Result<WatchEvent<Pod>, Error>> {
        let options = WatchOptions::new("5", std::time::Duration::from_secs(60));
        let stream = pods(client).watch(&options).await.unwrap();
        stream.collect().await
    }

    #[tokio::test]
    async fn a_protobuf_list_and_watch_decode_and_a_frame_cut_short_ends_the_watch() {
        let list = pb::pod_list(&[pb::pod("a", "1"), pb::pod("b", "2")], "10", "");
        let (client, accepts) = canned(200, "application/vnd.kubernetes.protobuf", list);
        let page = pods(client)
            .list(&ListOptions::new("0", Some(500)))
            .await
            .unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.resource_version, "10");
        assert!(accepts.lock().unwrap()[0].starts_with("application/vnd.kubernetes.protobuf,"));

        let mut marked = Vec::new();
        pb::field(
            &mut marked,
            1,
            &pb::object_meta("", "12", &[(decode::INITIAL_EVENTS_END, "true")]),
        );
        let mut body = framed(&[
            pb::event("ADDED", &pb::envelope("v1", "Pod", &pb::pod("c", "11"))),
            pb::event("BOOKMARK", &pb::envelope("v1", "Pod", &marked)),
            pb::event("DELETED", &pb::envelope("v1", "Pod", &pb::pod("c", "13"))),
        ]);
        body.truncate(body.len() - 2);
        let (client, _) = canned(
            200,
            "application/vnd.kubernetes.protobuf;stream=watch",
            body,
        );
        let events = watch_all(client).await;
        assert_eq!(events.len(), 2, "the cut DELETED is the end: {events:?}");
        assert!(
            matches!(&events[0], Ok(WatchEvent::Added(p)) if p.metadata.name.as_deref() == Some("c"))
        );
        assert!(matches!(&events[1], Ok(WatchEvent::Bookmark(b)) if b.initial_events_end));
    }

    /// A pod message whose metadata has one `managedFields` entry.
    fn pod_with_managed_fields(name: &str, rv: &str) -> Vec<u8> {
        let mut fields_v1 = Vec::new();
        pb::field(&mut fields_v1, 1, br#"{"f:spec":{}}"#);
        let mut entry = Vec::new();
        pb::field(&mut entry, 1, b"kubectl");
        pb::field(&mut entry, 6, b"FieldsV1");
        pb::field(&mut entry, 7, &fields_v1);
        let mut meta = pb::object_meta(name, rv, &[]);
        pb::field(&mut meta, 17, &entry);
        let mut pod = Vec::new();
        pb::field(&mut pod, 1, &meta);
        pod
    }

    #[tokio::test]
    async fn dropped_managed_fields_are_asked_for_and_stripped_here_when_they_come_anyway() {
        let list = pb::pod_list(
            &[pod_with_managed_fields("a", "1"), pb::pod("b", "2")],
            "10",
            "",
        );
        let options = ListOptions::new("0", Some(500));
        // Decoded pods, then the default cache's entries (transcoded without them).
        let (client, accepts) = canned(200, "application/vnd.kubernetes.protobuf", list.clone());
        let lw = pods(client).drop_managed_fields();
        let page = lw.list(&options).await.unwrap();
        assert!(
            page.items
                .iter()
                .all(|p| p.metadata.managed_fields.is_none())
        );
        assert!(accepts.lock().unwrap()[0].ends_with(";drop=metadata.managedFields"));
        let (client, _) = canned(200, "application/vnd.kubernetes.protobuf", list);
        let lw = pods(client).drop_managed_fields();
        let counter = lw.clone();
        let page = lw.cached().list(&options).await.unwrap();
        assert!(
            page.items
                .iter()
                .all(|p| p.meta().managed_fields().is_none())
        );
        assert_eq!(page.items[0].meta().name(), Some("a"));
        let seen = counter.managed_fields_dropped();
        assert_eq!((seen.stripped_here, seen.arrived_without), (1, 1));
        // JSON (a custom resource's path), with a modify after the strip.
        let json = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[
            {"metadata":{"name":"a","namespace":"ns","managedFields":[{"manager":"m","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]}}]}"#;
        let (client, _) = canned(200, "application/json", json.to_vec());
        let lw = pods(client)
            .drop_managed_fields()
            .modify(|p: &mut Pod| assert!(p.metadata.managed_fields.is_none(), "stripped first"));
        let counter = lw.clone();
        let page = lw.cached().list(&options).await.unwrap();
        assert!(page.items[0].meta().managed_fields().is_none());
        assert_eq!(counter.managed_fields_dropped().stripped_here, 1);
    }

    #[tokio::test]
    async fn the_bytes_of_every_list_and_watch_body_are_counted_across_clones() {
        let list = pb::pod_list(&[pb::pod("a", "1"), pb::pod("b", "2")], "10", "");
        let size = list.len() as u64;
        let (client, _) = canned(200, "application/vnd.kubernetes.protobuf", list);
        let lw = pods(client);
        let counter = lw.clone();
        assert_eq!(counter.bytes_received(), 0);
        lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        assert_eq!(counter.bytes_received(), 2 * size);

        let body = framed(&[
            pb::event("ADDED", &pb::envelope("v1", "Pod", &pb::pod("c", "11"))),
            pb::event("DELETED", &pb::envelope("v1", "Pod", &pb::pod("c", "13"))),
        ]);
        let size = body.len() as u64;
        let (client, _) = canned(
            200,
            "application/vnd.kubernetes.protobuf;stream=watch",
            body,
        );
        let lw = pods(client);
        let options = WatchOptions::new("5", std::time::Duration::from_secs(60));
        let events: Vec<_> = lw.watch(&options).await.unwrap().collect().await;
        assert_eq!(events.len(), 2);
        assert_eq!(lw.bytes_received(), size);
        // An error response is not counted.
        let (client, _) = canned(
            410,
            "application/json",
            br#"{"kind":"Status","code":410}"#.to_vec(),
        );
        let lw = pods(client);
        assert!(lw.list(&ListOptions::new("0", None)).await.is_err());
        assert_eq!(lw.bytes_received(), 0);
    }

    #[tokio::test]
    async fn a_json_answer_to_a_request_for_protobuf_is_decoded_as_json() {
        let list = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a"}}]}"#;
        let (client, accepts) = canned(200, "application/json", list.to_vec());
        let lw = pods(client);
        let page = lw.list(&ListOptions::new("0", None)).await.unwrap();
        assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
        assert!(accepts.lock().unwrap()[0].starts_with("application/vnd.kubernetes.protobuf"));
        let line =
            br#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"b"}}}
"#;
        let (client, _) = canned(200, "application/json", line.to_vec());
        let events = watch_all(client).await;
        assert!(
            matches!(&events[..], [Ok(WatchEvent::Added(p))] if p.metadata.name.as_deref() == Some("b"))
        );
        // Asked for JSON, a protobuf answer is still read by its Content-Type.
        let list = pb::pod_list(&[pb::pod("c", "1")], "6", "");
        let (client, accepts) = canned(200, "application/vnd.kubernetes.protobuf", list);
        let page = pods(client)
            .wire_format(WireFormat::Json)
            .list(&ListOptions::new("0", None))
            .await
            .unwrap();
        assert_eq!(page.items[0].metadata.name.as_deref(), Some("c"));
        assert_eq!(accepts.lock().unwrap()[0], "application/json");
    }

    #[tokio::test]
    async fn error_responses_in_either_format_are_api_errors_with_their_status() {
        let gone = pb::status_envelope(410, "Expired", "too old resource version");
        let (client, _) = canned(410, "application/vnd.kubernetes.protobuf", gone);
        let err = pods(client)
            .list(&ListOptions::new("5", None))
            .await
            .unwrap_err();
        assert!(err.is_expired(), "{err}");
        let forbidden = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}"#;
        let (client, _) = canned(403, "application/json", forbidden.to_vec());
        let err = pods(client)
            .watch(&WatchOptions::new("5", std::time::Duration::from_secs(60)))
            .await
            .err()
            .unwrap();
        assert_eq!(err.status_code(), Some(403));
        let (client, _) = canned(429, "text/plain", b"slow down".to_vec());
        let err = pods(client)
            .list(&ListOptions::new("5", None))
            .await
            .unwrap_err();
        assert_eq!(err.status_code(), Some(429));
        // A successful response of another type is a decode error.
        let (client, _) = canned(200, "text/html", b"<html></html>".to_vec());
        let err = pods(client)
            .list(&ListOptions::new("5", None))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Decode { .. }), "{err:?}");
    }

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

    #[tokio::test]
    async fn auto_asks_for_protobuf_for_built_in_types_and_metadata_only_json_otherwise() {
        let cfg = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(cfg).unwrap();
        let typed = KubeListerWatcher::new(kube::Api::<Pod>::all(client.clone()));
        assert!(typed.requests.asks() == Format::Protobuf);
        assert!(typed.clone().wire_format(WireFormat::Json).requests.asks() != Format::Protobuf);
        let meta = KubeListerWatcher::metadata_only(kube::Api::<Pod>::all(client.clone()));
        assert!(meta.requests.asks() == Format::Protobuf);
        // DynamicObject, even for a built-in type, and a custom resource: JSON, unless asked.
        let pod_ar = ApiResource::erase::<Pod>(&());
        let dynamic = KubeListerWatcher::new_with(
            kube::Api::<DynamicObject>::all_with(client.clone(), &pod_ar),
            &pod_ar,
        );
        assert!(dynamic.requests.asks() != Format::Protobuf);
        assert!(dynamic.wire_format(WireFormat::Protobuf).requests.asks() == Format::Protobuf);
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
        let crd =
            KubeListerWatcher::new_with(kube::Api::<DynamicObject>::all_with(client, &ar), &ar);
        assert!(crd.requests.asks() != Format::Protobuf);
    }
}
