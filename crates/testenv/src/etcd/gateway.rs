//! etcd's JSON gateway (`/v3/...` on its client port): health, revision and compaction.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::error::Error;

/// POSTs `body` (JSON) to `path` on the etcd at `base` and returns the JSON answer.
pub(crate) async fn post(base: &str, path: &str, body: &Value) -> Result<Value, Error> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = http::Request::post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| Error::Etcd(format!("building the request to {path}: {e}")))?;
    let resp = client
        .request(req)
        .await
        .map_err(|e| Error::Etcd(format!("{path}: {e}")))?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| Error::Etcd(format!("{path}: reading the answer: {e}")))?
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        return Err(Error::Etcd(format!("{path}: {status}: {text}")));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::Etcd(format!("{path}: not JSON ({e}): {text}")))
}

/// etcd's current revision (the store's newest resourceVersion).
pub(crate) async fn revision(base: &str) -> Result<i64, Error> {
    // A range over the key "\0" touches nothing but returns the header.
    let answer = post(base, "/v3/kv/range", &serde_json::json!({ "key": "AA==" })).await?;
    let rev = &answer["header"]["revision"];
    rev.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| rev.as_i64())
        .ok_or_else(|| Error::Etcd(format!("no revision in {answer}")))
}

/// Compacts etcd's history up to its current revision, physically, and returns that
/// revision: every older resourceVersion is gone from etcd.
pub(crate) async fn compact(base: &str) -> Result<i64, Error> {
    let rev = revision(base).await?;
    post(
        base,
        "/v3/kv/compaction",
        &serde_json::json!({ "revision": rev.to_string(), "physical": true }),
    )
    .await?;
    Ok(rev)
}

/// Whether etcd answers its health check.
pub(crate) async fn healthy(base: &str) -> bool {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let Ok(uri) = format!("{base}/health").parse::<http::Uri>() else {
        return false;
    };
    match client.get(uri).await {
        Ok(resp) if resp.status().is_success() => resp
            .into_body()
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).contains("true"))
            .unwrap_or(false),
        _ => false,
    }
}
