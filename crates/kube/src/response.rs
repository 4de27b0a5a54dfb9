//! Reading a response: its `Content-Type` (which decides how the body is decoded), and
//! error statuses in either format.

use kinformer_protobuf::MEDIA_TYPE as PROTOBUF;

use super::cbor;
use super::compression;
use super::decode::truncate;
use super::json::describe_json_error;
use super::protobuf;
use kinformer_reflector::{ApiStatus, Error};

/// The encoding of a response body, as its `Content-Type` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// `application/json`: a document, or a watch stream of one document per line.
    Json,
    /// `application/vnd.kubernetes.protobuf` (`;stream=watch` for a watch): a `k8s\0`
    /// envelope, or a watch stream of length-delimited frames.
    Protobuf,
    /// `application/cbor`: one data item; `application/cbor-seq` for a watch: a CBOR
    /// sequence of events.
    Cbor,
}

impl Format {
    /// The format of a body by its `Content-Type`, parameters (`;stream=watch`,
    /// `;charset=utf-8`) aside. Without one, the format asked for first, as client-go
    /// falls back to its configured content type.
    ///
    /// # Errors
    /// [`Error::Decode`] for any other media type (what a proxy's HTML error page has).
    pub(super) fn of(content_type: Option<&[u8]>, asked: Format) -> Result<Self, Error> {
        let Some(raw) = content_type else {
            return Ok(asked);
        };
        let media = std::str::from_utf8(raw)
            .ok()
            .and_then(|s| s.split(';').next())
            .map(str::trim)
            .unwrap_or_default();
        if media.eq_ignore_ascii_case("application/json") {
            Ok(Self::Json)
        } else if media.eq_ignore_ascii_case(PROTOBUF) {
            Ok(Self::Protobuf)
        } else if media.eq_ignore_ascii_case(cbor::MEDIA_TYPE)
            || media.eq_ignore_ascii_case(cbor::SEQUENCE_MEDIA_TYPE)
        {
            Ok(Self::Cbor)
        } else {
            Err(Error::decode(
                "response",
                format!(
                    "unsupported content type {:?}",
                    truncate(media.trim_matches(|c: char| !c.is_ascii_graphic()), 64)
                ),
            ))
        }
    }
}

/// Sends `req` and returns the body of a successful response with its format; an error
/// status (`4xx`, `5xx`) becomes [`Error::Api`], its `Status` decoded from JSON or
/// protobuf as the server sent it (with Accept: protobuf, the API server sends its errors
/// in protobuf, which kube-client's own helpers cannot read).
pub(super) async fn send(
    client: &kube::Client,
    req: http::Request<Vec<u8>>,
    asked: Format,
) -> Result<Response, Error> {
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .map_err(from_kube)?;
    let code = resp.status();
    let format = Format::of(
        resp.headers()
            .get(http::header::CONTENT_TYPE)
            .map(http::HeaderValue::as_bytes),
        asked,
    );
    let gzip = compression::is_gzip(resp.headers().get(http::header::CONTENT_ENCODING));
    if code.is_client_error() || code.is_server_error() {
        let body = resp.into_body().collect_bytes().await.map_err(from_kube)?;
        let body = match gzip {
            true => compression::gunzip(&body).await.unwrap_or_default(),
            false => body.to_vec(),
        };
        return Err(Error::Api(error_status(code, format.ok(), &body)));
    }
    Ok(Response {
        format: format?,
        gzip,
        body: resp.into_body(),
    })
}

/// A successful response: its body, how to decode it, whether it is gzip.
pub(super) struct Response {
    pub(super) format: Format,
    /// `Content-Encoding: gzip`.
    pub(super) gzip: bool,
    pub(super) body: kube::client::Body,
}

/// Reads the whole body of a successful response.
pub(super) async fn read_body(body: kube::client::Body) -> Result<impl AsRef<[u8]>, Error> {
    body.collect_bytes().await.map_err(from_kube)
}

/// The status an error response carries: its `Status` when the body is one, else one
/// made of the HTTP code (a proxy's page, a truncated body). The HTTP code fills in a
/// `Status` without one.
fn error_status(code: http::StatusCode, format: Option<Format>, body: &[u8]) -> ApiStatus {
    let decoded = match format {
        Some(Format::Json) => serde_json::from_slice::<kube::core::Status>(body).ok(),
        Some(Format::Protobuf) => protobuf::decode_status(body).ok(),
        Some(Format::Cbor) => cbor::decode_status(body),
        None => None,
    };
    match decoded {
        Some(status) => {
            let mut status = api_status(status);
            if status.code == 0 {
                status.code = code.as_u16();
            }
            status
        }
        None => ApiStatus::new(
            code.as_u16(),
            code.canonical_reason().unwrap_or_default(),
            format!(
                "an error response of {} bytes that is not a Status",
                body.len()
            ),
        ),
    }
}

/// Maps kube-client's error onto ours: statuses stay statuses, anything that failed on
/// the way to or from the server is [`Error::Unreachable`].
pub(super) fn from_kube(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => Error::Api(api_status(*status)),
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

/// kube's `Status` as the reflector's [`ApiStatus`], causes included.
pub(crate) fn api_status(s: kube::core::Status) -> ApiStatus {
    let status = ApiStatus::new(s.code, s.reason, s.message);
    s.details
        .map(|d| d.causes)
        .unwrap_or_default()
        .into_iter()
        .fold(status, |status, c| status.with_cause(c.reason, c.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_type_decides_the_format_and_a_missing_one_is_what_was_asked() {
        for (ct, want) in [
            ("application/json", Format::Json),
            ("application/json; charset=utf-8", Format::Json),
            ("Application/JSON", Format::Json),
            ("application/vnd.kubernetes.protobuf", Format::Protobuf),
            (
                "application/vnd.kubernetes.protobuf;stream=watch",
                Format::Protobuf,
            ),
            ("application/cbor", Format::Cbor),
            ("application/cbor-seq", Format::Cbor),
        ] {
            for asked in [Format::Json, Format::Protobuf, Format::Cbor] {
                assert_eq!(
                    Format::of(Some(ct.as_bytes()), asked).unwrap(),
                    want,
                    "{ct}"
                );
            }
        }
        for asked in [Format::Json, Format::Protobuf, Format::Cbor] {
            assert_eq!(Format::of(None, asked).unwrap(), asked);
        }
        for other in [&b"text/html"[..], b"application/yaml", b"\xff\xfe"] {
            let err = Format::of(Some(other), Format::Protobuf).unwrap_err();
            assert!(matches!(err, Error::Decode { .. }), "{err:?}");
        }
    }

    #[test]
    fn error_bodies_give_their_status_in_either_format_or_the_http_code() {
        let json = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden","reason":"Forbidden","code":403}"#;
        let s = error_status(http::StatusCode::FORBIDDEN, Some(Format::Json), json);
        assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
        let pb = protobuf::tests::status_envelope(410, "Expired", "too old resource version");
        let s = error_status(http::StatusCode::GONE, Some(Format::Protobuf), &pb);
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
        assert_eq!(s.message, "too old resource version");
        // A proxy's page, or a protobuf body claimed as JSON: the HTTP code.
        let s = error_status(
            http::StatusCode::BAD_GATEWAY,
            None,
            b"<html>bad gateway</html>",
        );
        assert_eq!((s.code, s.reason.as_str()), (502, "Bad Gateway"));
        assert!(!s.message.contains("html"), "{}", s.message);
        let s = error_status(http::StatusCode::TOO_MANY_REQUESTS, Some(Format::Json), &pb);
        assert_eq!(s.code, 429);
        // A Status without a code takes the response's.
        let s = error_status(
            http::StatusCode::GONE,
            Some(Format::Json),
            br#"{"kind":"Status","reason":"Expired"}"#,
        );
        assert_eq!(s.code, 410);
    }
}
