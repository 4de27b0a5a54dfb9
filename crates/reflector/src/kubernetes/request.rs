//! The list and watch requests, worded as client-go's reflector words them.

use crate::{Error, ListOptions, WatchOptions};

const JSON: &str = "application/json";
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// What every request of one lister-watcher shares: the resource's path, its selectors,
/// and whether it asks for metadata only.
#[derive(Clone, Debug)]
pub(super) struct Requests {
    pub(super) url_path: String,
    pub(super) metadata_only: bool,
    pub(super) label_selector: Option<String>,
    pub(super) field_selector: Option<String>,
}

impl Requests {
    fn selectors(&self, qp: &mut form_urlencoded::Serializer<'_, String>) {
        if let Some(l) = &self.label_selector {
            qp.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            qp.append_pair("fieldSelector", f);
        }
    }

    /// One list page. `resourceVersion=0` is sent *with* `limit` (kube's `ListParams`
    /// drops the limit then; client-go's reflector does not).
    pub(super) fn list(&self, o: &ListOptions) -> Result<http::Request<Vec<u8>>, Error> {
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

    /// A watch, or a streaming list (`sendInitialEvents`).
    pub(super) fn watch(&self, o: &WatchOptions) -> Result<http::Request<Vec<u8>>, Error> {
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
    use super::*;

    fn requests(path: &str, metadata_only: bool) -> Requests {
        Requests {
            url_path: path.into(),
            metadata_only,
            label_selector: Some("app=web".into()),
            field_selector: None,
        }
    }

    #[test]
    fn first_list_query_keeps_rv_0_with_limit_500_as_client_go_does() {
        let r = requests("/api/v1/namespaces/ns/pods", false);
        let req = r.list(&ListOptions::new("0", Some(500))).unwrap();
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
        let req = r.list(&next).unwrap();
        assert_eq!(
            req.uri(),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&limit=500&continue=tok"
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
        assert_eq!(req.headers()[http::header::ACCEPT], METADATA);
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
        assert_eq!(list.headers()[http::header::ACCEPT], METADATA_LIST);
    }
}
