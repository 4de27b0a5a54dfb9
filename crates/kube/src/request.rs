//! The list and watch requests, worded as client-go's reflector words them, and the wire
//! format they ask for.

use kinformer_reflector::{Error, ListOptions, ShardSelector, WatchOptions};

use super::response::Format;

const JSON: &str = "application/json";
/// client-go's typed clients since v0.32 (`gentype.PrefersProtobuf`,
/// `Request.UseProtobufAsDefault`): protobuf, else JSON.
const PROTOBUF_THEN_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// client-go's metadata client (`metadata.go`): the protobuf `PartialObjectMetadata`, else
/// its JSON, else the object itself.
const METADATA_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// CBOR, else JSON (a server without `CBORServingAndStorage` answers JSON). A watch asks
/// the same: the API server answers a CBOR sequence (`application/cbor-seq`).
const CBOR_THEN_JSON: &str = "application/cbor,application/json";
const METADATA_CBOR: &str = "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST_CBOR: &str = "application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// Which encoding a [`KubeListerWatcher`](super::KubeListerWatcher) asks the API server
/// for. Whatever it asks, each response is decoded by its `Content-Type`: a server or a
/// proxy that answers JSON to a request for protobuf still works.
///
/// | type | `Auto` (default) | `Protobuf` | `Json` |
/// | --- | --- | --- | --- |
/// | built-in types the protobuf schema knows (k8s-openapi's `Pod`, `Deployment`, ...) | protobuf, else JSON | protobuf, else JSON | JSON |
/// | metadata only (`PartialObjectMeta<K>`), any resource | protobuf `PartialObjectMetadata`, else JSON | the same | JSON |
/// | custom resources, types the schema does not know | JSON | protobuf, else JSON (the API server answers JSON) | JSON |
/// | `DynamicObject` and other types described at run time | JSON | protobuf, else JSON | JSON |
///
/// `Auto` is what client-go does: its typed clients ask for
/// `application/vnd.kubernetes.protobuf,application/json`, its metadata client for the
/// protobuf `PartialObjectMetadata(List)`, its dynamic client (custom resources, types
/// only known at run time) for JSON. The API server serves custom resources in JSON only;
/// it answers a request for protobuf with JSON, which is decoded as such, so `Protobuf`
/// on a custom resource costs nothing and changes nothing (as in client-go, whose
/// `ContentType: protobuf` still accepts other answers). An answer in protobuf for a type
/// the schema does not know (an aggregated API newer than the schema) cannot be decoded:
/// [`Error::Decode`](kinformer_reflector::Error::Decode) names the type; ask for `Json` or `Auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireFormat {
    /// Protobuf where client-go would ask for it: built-in types the protobuf schema
    /// knows, and metadata-only lists and watches; JSON for everything else.
    #[default]
    Auto,
    /// JSON, always (`Accept: application/json`).
    Json,
    /// Protobuf first, JSON as the fallback, for every type.
    Protobuf,
    /// CBOR first, JSON as the fallback, for every type (KEP-4222): the binary format of
    /// custom resources, which have no protobuf. Kubernetes 1.37 serves it behind the alpha
    /// gate `CBORServingAndStorage`; a server without it answers JSON, decoded as such.
    /// Objects are decoded from CBOR with serde as from JSON, into any `K`.
    Cbor,
}

/// Whether a [`KubeListerWatcher`](super::KubeListerWatcher)'s lists and streaming lists
/// ask the API server for gzip (`Accept-Encoding: gzip`). Whatever it asks, a response is
/// decoded by its `Content-Encoding`.
///
/// What the server then compresses: a list response over 128 KiB (`APIResponseCompression`,
/// on since Kubernetes 1.16) and, since 1.37, a streaming list and the watch it becomes
/// (`WatchListCompression`, beta, on by default). Plain watches never are. client-go asks
/// for gzip on every request (Go's HTTP transport does, unless `DisableCompression`).
///
/// Gzip is the default, as in client-go, because it was faster in every case measured
/// (BENCHMARKS.md, "informer-gzip": both sides, loopback and a 100 Mbit/s link). On
/// loopback kinformer synced 10,000 pods in 0.91x the time with 0.80x the CPU with gzip, the
/// API server's CPU about the same (390 against 350 ms); through 100 Mbit/s, in 0.08x the
/// time. Turn it off for a server whose CPU is scarcer than the network, or to read the
/// traffic in a proxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// `Accept-Encoding: identity`: nothing compressed.
    None,
    /// `Accept-Encoding: gzip` on lists and streaming lists (plain watches stay
    /// `identity`: the server would not compress them).
    #[default]
    Gzip,
}

/// What every request of one lister-watcher shares: the resource's path, its selectors,
/// whether it asks for metadata only, and in which format.
#[derive(Clone, Debug)]
pub(super) struct Requests {
    pub(super) url_path: String,
    pub(super) metadata_only: bool,
    pub(super) label_selector: Option<String>,
    pub(super) field_selector: Option<String>,
    pub(super) wire_format: WireFormat,
    /// Whether `Auto` asks for protobuf for this type: a built-in type the schema knows,
    /// with a type description fixed at compile time.
    pub(super) protobuf_by_default: bool,
    /// Whether every media type asked for carries [`DROP_MANAGED_FIELDS`].
    pub(super) drop_managed_fields: bool,
    pub(super) compression: Compression,
}

/// The media type parameter of KEP-5958 (`ManagedFieldsOptOut`): the server leaves
/// `metadata.managedFields` out of what it sends. A server without it ignores the
/// parameter (k8s.io/apiserver's `acceptMediaTypeOptions` collects unknown parameters and
/// goes on), so asking never fails a request.
pub(super) const DROP_MANAGED_FIELDS: &str = ";drop=metadata.managedFields";

impl Requests {
    /// The format the requests ask for first.
    pub(super) fn asks(&self) -> Format {
        match self.wire_format {
            WireFormat::Json => Format::Json,
            WireFormat::Protobuf => Format::Protobuf,
            WireFormat::Cbor => Format::Cbor,
            WireFormat::Auto if self.metadata_only || self.protobuf_by_default => Format::Protobuf,
            WireFormat::Auto => Format::Json,
        }
    }

    fn accept(&self, list: bool) -> std::borrow::Cow<'static, str> {
        let media_types = self.media_types(list);
        if !self.drop_managed_fields {
            return media_types.into();
        }
        let mut accept = String::with_capacity(media_types.len() + 3 * DROP_MANAGED_FIELDS.len());
        for (i, media_type) in media_types.split(',').enumerate() {
            if i > 0 {
                accept.push(',');
            }
            accept.push_str(media_type);
            accept.push_str(DROP_MANAGED_FIELDS);
        }
        accept.into()
    }

    fn media_types(&self, list: bool) -> &'static str {
        match (self.metadata_only, self.asks(), list) {
            (false, Format::Json, _) => JSON,
            (false, Format::Protobuf, _) => PROTOBUF_THEN_JSON,
            (false, Format::Cbor, _) => CBOR_THEN_JSON,
            (true, Format::Json, true) => METADATA_LIST,
            (true, Format::Json, false) => METADATA,
            (true, Format::Protobuf, true) => METADATA_LIST_PROTOBUF,
            (true, Format::Protobuf, false) => METADATA_PROTOBUF,
            (true, Format::Cbor, true) => METADATA_LIST_CBOR,
            (true, Format::Cbor, false) => METADATA_CBOR,
        }
    }

    fn selectors(
        &self,
        qp: &mut form_urlencoded::Serializer<'_, String>,
        shard: Option<&ShardSelector>,
    ) {
        if let Some(l) = &self.label_selector {
            qp.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            qp.append_pair("fieldSelector", f);
        }
        if let Some(s) = shard {
            qp.append_pair("shardSelector", &s.to_string());
        }
    }

    /// One list page. `resourceVersion=0` is sent *with* `limit` (kube's `ListParams`
    /// drops the limit then; client-go's reflector does not).
    pub(super) fn list(&self, o: &ListOptions) -> Result<http::Request<Vec<u8>>, Error> {
        let mut qp = form_urlencoded::Serializer::new(String::new());
        self.selectors(&mut qp, o.shard.as_ref());
        if let Some(limit) = o.limit {
            qp.append_pair("limit", &limit.to_string());
        }
        if let Some(c) = &o.continue_token {
            qp.append_pair("continue", c);
        }
        if !o.resource_version.is_empty() {
            qp.append_pair("resourceVersion", &o.resource_version);
            if o.exact {
                qp.append_pair("resourceVersionMatch", "Exact");
            }
        }
        let mut req = build_get(&self.url_path, qp.finish(), &self.accept(true))?;
        self.accept_encoding(&mut req, true);
        Ok(req)
    }

    /// `gzip` where it was asked for and the server may compress (lists and streaming
    /// lists), `identity` otherwise: kube-client's default for watches, so that an event
    /// is readable as soon as its bytes arrive.
    fn accept_encoding(&self, req: &mut http::Request<Vec<u8>>, compressible: bool) {
        let encoding = match self.compression {
            Compression::Gzip if compressible => "gzip",
            _ => "identity",
        };
        req.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static(encoding),
        );
    }

    /// A watch, or a streaming list (`sendInitialEvents`).
    pub(super) fn watch(&self, o: &WatchOptions) -> Result<http::Request<Vec<u8>>, Error> {
        let mut qp = form_urlencoded::Serializer::new(String::new());
        qp.append_pair("watch", "true");
        self.selectors(&mut qp, o.shard.as_ref());
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
        let mut req = build_get(&self.url_path, qp.finish(), &self.accept(false))?;
        self.accept_encoding(&mut req, o.send_initial_events);
        Ok(req)
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

#[cfg(test)]
mod tests {
    use kinformer_protobuf::MEDIA_TYPE as PROTOBUF;

    use super::*;

    fn requests(path: &str, metadata_only: bool) -> Requests {
        Requests {
            url_path: path.into(),
            metadata_only,
            label_selector: Some("app=web".into()),
            field_selector: None,
            wire_format: WireFormat::Json,
            protobuf_by_default: true,
            drop_managed_fields: false,
            compression: Compression::Gzip,
        }
    }

    fn accept(req: &http::Request<Vec<u8>>) -> &str {
        req.headers()[http::header::ACCEPT].to_str().unwrap()
    }

    #[test]
    fn first_list_query_keeps_rv_0_with_limit_500_as_client_go_does() {
        let r = requests("/api/v1/namespaces/ns/pods", false);
        let req = r.list(&ListOptions::new("0", Some(500))).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&limit=500&resourceVersion=0"
        );
        assert_eq!(accept(&req), JSON);
        let mut next = ListOptions::new("", Some(500));
        next.continue_token = Some("tok".into());
        let req = r.list(&next).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&limit=500&continue=tok"
        );
        let mut exact = ListOptions::new("42", None);
        exact.exact = true;
        assert_eq!(
            r.list(&exact).unwrap().uri(),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&resourceVersion=42&resourceVersionMatch=Exact"
        );
    }

    #[test]
    fn watch_queries_carry_bookmarks_timeout_and_streaming_options() {
        let r = requests("/api/v1/pods", true);
        let mut o = WatchOptions::new("42", std::time::Duration::from_secs(321));
        let req = r.watch(&o).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/pods?watch=true&labelSelector=app%3Dweb&resourceVersion=42&timeoutSeconds=321&allowWatchBookmarks=true"
        );
        assert_eq!(accept(&req), METADATA);
        assert_eq!(req.headers()[http::header::ACCEPT_ENCODING], "identity");
        o.resource_version.clear();
        o.send_initial_events = true;
        let req = r.watch(&o).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/pods?watch=true&labelSelector=app%3Dweb&timeoutSeconds=321&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        );
        let list = requests("/api/v1/pods", true)
            .list(&ListOptions::new("0", None))
            .unwrap();
        assert_eq!(accept(&list), METADATA_LIST);
    }

    #[test]
    fn the_shard_selector_is_sent_as_shard_selector_on_every_list_and_watch() {
        let r = requests("/api/v1/pods", false);
        let shard =
            kinformer_reflector::ShardSelector::index_of(kinformer_reflector::ShardKey::Uid, 1, 2)
                .unwrap();
        let mut list = ListOptions::new("0", Some(500));
        list.shard = Some(shard.clone());
        let query = "labelSelector=app%3Dweb&shardSelector=shardRange%28object.metadata.uid%2C+%270x8000000000000000%27%2C+%270x10000000000000000%27%29";
        assert_eq!(
            r.list(&list).unwrap().uri(),
            &format!("/api/v1/pods?{query}&limit=500&resourceVersion=0")[..]
        );
        let mut watch = WatchOptions::new("7", std::time::Duration::from_secs(300));
        watch.shard = Some(shard);
        assert_eq!(
            r.watch(&watch).unwrap().uri(),
            &format!(
                "/api/v1/pods?watch=true&{query}&resourceVersion=7&timeoutSeconds=300&allowWatchBookmarks=true"
            )[..]
        );
    }

    #[test]
    fn each_wire_format_asks_what_client_go_asks() {
        let list = ListOptions::new("0", None);
        let watch = WatchOptions::new("1", std::time::Duration::from_secs(60));
        // (format, metadata only, a built-in type the schema knows) -> (list, watch)
        let cases = [
            (
                WireFormat::Auto,
                false,
                true,
                PROTOBUF_THEN_JSON,
                PROTOBUF_THEN_JSON,
            ),
            (WireFormat::Auto, false, false, JSON, JSON),
            (
                WireFormat::Auto,
                true,
                false,
                METADATA_LIST_PROTOBUF,
                METADATA_PROTOBUF,
            ),
            (WireFormat::Json, false, true, JSON, JSON),
            (WireFormat::Json, true, true, METADATA_LIST, METADATA),
            (
                WireFormat::Protobuf,
                false,
                false,
                PROTOBUF_THEN_JSON,
                PROTOBUF_THEN_JSON,
            ),
            (
                WireFormat::Protobuf,
                true,
                false,
                METADATA_LIST_PROTOBUF,
                METADATA_PROTOBUF,
            ),
        ];
        for (format, metadata_only, known, want_list, want_watch) in cases {
            let r = Requests {
                wire_format: format,
                protobuf_by_default: known,
                ..requests("/api/v1/pods", metadata_only)
            };
            let case = format!("{format:?}, metadata only {metadata_only}, known {known}");
            assert_eq!(accept(&r.list(&list).unwrap()), want_list, "{case}");
            assert_eq!(accept(&r.watch(&watch).unwrap()), want_watch, "{case}");
        }
        assert!(PROTOBUF_THEN_JSON.starts_with(PROTOBUF));
        assert!(METADATA_PROTOBUF.starts_with(PROTOBUF));
    }

    #[test]
    fn dropping_managed_fields_adds_kep_5958s_parameter_to_every_media_type() {
        let mut r = requests("/api/v1/pods", true);
        r.drop_managed_fields = true;
        r.wire_format = WireFormat::Auto;
        let list = ListOptions::default();
        let watch = WatchOptions::new("1", std::time::Duration::from_secs(1));
        for (req, plain) in [
            (r.list(&list).unwrap(), METADATA_LIST_PROTOBUF),
            (r.watch(&watch).unwrap(), METADATA_PROTOBUF),
        ] {
            let want: Vec<String> = plain
                .split(',')
                .map(|m| format!("{m};drop=metadata.managedFields"))
                .collect();
            assert_eq!(accept(&req), want.join(","));
        }
    }

    #[test]
    fn gzip_is_asked_for_on_lists_and_streaming_lists_alone() {
        let mut r = requests("/api/v1/pods", false);
        let list = ListOptions::default();
        let mut streaming = WatchOptions::new("", std::time::Duration::from_secs(1));
        streaming.send_initial_events = true;
        let watch = WatchOptions::new("1", std::time::Duration::from_secs(1));
        let encoding =
            |req: http::Request<Vec<u8>>| req.headers()[http::header::ACCEPT_ENCODING].clone();
        for (compression, want) in [(Compression::None, "identity"), (Compression::Gzip, "gzip")] {
            r.compression = compression;
            assert_eq!(encoding(r.list(&list).unwrap()), want);
            assert_eq!(encoding(r.watch(&streaming).unwrap()), want);
            assert_eq!(encoding(r.watch(&watch).unwrap()), "identity");
        }
    }
}
