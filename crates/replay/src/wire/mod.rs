//! Recordings of the wire: every HTTP exchange under a `kube::Client`, its response body's
//! bytes as they arrived, replayed as a `kube::Client` (feature `wire`).
//!
//! A [`Recorder`](crate::Recorder) keeps what a lister-watcher decoded; a [`WireRecorder`]
//! keeps what the server sent: each list page and watch frame in its wire format
//! (protobuf, JSON, CBOR; gzip-compressed when it was), chunk by chunk as it came. Put its
//! [`layer`](WireRecorder::layer) on a client's stack, build the lister-watcher on that
//! client, and everything the client asks and receives is written down. A [`WireReplay`]
//! serves such a recording as a `kube::Client`: a `KubeListerWatcher` on it negotiates
//! nothing, but reads the same `Content-Type`s, decompresses the same gzip, splits the same
//! frames and decodes the same bytes into `Cached<K>` (or `K`) as it did live. So the whole
//! path from the wire to the cache replays, not only the reflector's part of it.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_compact_store::Cached;
//! use kinformer_informer_factory::SharedIndexInformer;
//! use kinformer_kube::{KubeListerWatcher, reflector_connection};
//! use kinformer_replay::RecordOptions;
//! use kinformer_replay::wire::{WireRecorder, WireRecording, WireReplay};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Record: the layer on the reflector's connection.
//! let recorder = WireRecorder::to_file("pods.http.jsonl", RecordOptions::new("pods"))?;
//! let client = reflector_connection(kube::Config::infer().await?)?
//!     .with_layer(&recorder.layer())
//!     .build();
//! let pods = KubeListerWatcher::new(kube::Api::<Pod>::namespaced(client, "default")).cached();
//! let informer = SharedIndexInformer::<Cached<Pod>>::builder(pods).build();
//! // ... run, then stop ...
//!
//! // Replay: the recording as a client, under the same lister-watcher.
//! let replay = WireReplay::new(WireRecording::load("pods.http.jsonl")?);
//! let client = replay.client("default");
//! let pods = KubeListerWatcher::new(kube::Api::<Pod>::namespaced(client, "default")).cached();
//! let informer = SharedIndexInformer::<Cached<Pod>>::builder(pods).build();
//! # Ok(())
//! # }
//! ```
//!
//! A wire recording becomes a decoded one by replaying it under a
//! [`Recorder`](crate::Recorder): the lister-watcher on the replayed client, wrapped in a
//! recorder, into an informer. What the perturbations and checks of this crate work on is
//! the decoded form; the wire form is for what happens below the lister-watcher (a
//! decoding bug, a protobuf message that changed, a gzip stream cut mid-member).
//!
//! # The file, version 1
//!
//! As a decoded recording's ([`format`](crate::format)): UTF-8 JSON Lines, written and
//! flushed a line at a time as things happen (a last line cut short is ignored when read),
//! the same header, with `encoding` `http`:
//!
//! ```text
//! {"format":"kinformer-recording","version":1,"encoding":"http","resource":"pods","redacted":true}
//! ```
//!
//! A decoded recording's reader ([`Recording::parse`](crate::Recording::parse)) refuses
//! this encoding, and [`WireRecording::parse`] refuses any other
//! ([`WireFormatError::Encoding`]). Every other line is one record of an exchange, `t`
//! microseconds after the recording began, `call` the exchange's number (exchanges
//! overlap: a watch stays open while lists are made, so their records interleave):
//!
//! | record | meaning |
//! | --- | --- |
//! | `{"t":0,"call":0,"request":{"method":"GET","path":"/api/v1/namespaces/ns/pods","query":"limit=500&resourceVersion=0"}}` | a request: its method, path and query (`query` absent when there is none); never a header, never a body |
//! | `{"t":9,"call":0,"response":{"status":200,"contentType":"application/vnd.kubernetes.protobuf","contentEncoding":"gzip"}}` | its response's status line and the two headers that say how to read the body (each absent when the response had none); `"redacted":true` when the body was left out |
//! | `{"t":9,"call":0,"chunk":"azhzAAoNCgJ2MRIHUG9kTGlzdBL..."}` | a chunk of the body as it arrived, base64 (standard alphabet, padded) |
//! | `{"t":9,"call":0,"end":"complete"}` | the body ended: `complete` (the server finished it), `dropped` (the client stopped reading it), or `failed` with `"error":".."`, the message of what cut it |
//! | `{"t":9,"call":0,"failed":"client error (Connect): tcp connect error: Connection refused"}` | the request got no response (a connection error), with its message |
//!
//! An exchange without an `end` was still open when the recording stopped. A reader of
//! another `version` refuses the file; fields it does not know are ignored.
//!
//! # Secrets
//!
//! Bytes cannot be redacted without decoding them. So with
//! [`RecordOptions::redact_secrets`](crate::RecordOptions::redact_secrets) (the default)
//! the body of every exchange whose path is a `secrets` resource (a list, a watch or a get
//! of Secrets, in any namespace, of any API group) is left out: its response line says
//! `"redacted":true` and no chunk follows (its end is still written). Replaying such an
//! exchange answers the request with [`WireReplayError::Redacted`]. Record Secrets with
//! [`keep_secrets`](crate::RecordOptions::keep_secrets) only for recordings that never
//! leave the machine; or record them with a decoded [`Recorder`](crate::Recorder), which
//! replaces their values and keeps the rest.
//!
//! Headers are never written (the `Authorization` header holds a token), and neither are
//! request bodies.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::format::{FormatError, Header, micros};
use crate::lines::{self, ReadError, read_lines};

mod record;
mod replay;

pub use record::{WireBody, WireLayer, WireRecorder, WireService, WireTape};
pub use replay::WireReplay;

/// The error type of the recording layer's service and bodies, and of the replayed
/// client's: a boxed error, as kube's stack has.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The header's `encoding` of a wire recording.
pub const ENCODING: &str = "http";

/// Why a wire recording could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireFormatError {
    /// What a decoded recording's reader would say too: I/O, not a recording, another
    /// version, a bad line.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A recording of another encoding (a decoded one, `json`: read it with
    /// [`Recording::parse`](crate::Recording::parse)).
    #[error("recording encoding {found:?}, this reader reads \"http\"")]
    Encoding {
        /// The file's `encoding`.
        found: String,
    },
}

impl From<std::io::Error> for WireFormatError {
    fn from(e: std::io::Error) -> Self {
        Self::Format(FormatError::Io(e))
    }
}

/// Why a replayed client's request or body failed. The replayed client's errors are
/// [`BoxError`]s holding one of these (downcast to tell them apart); a
/// `KubeListerWatcher` reports each as a server it could not reach.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireReplayError {
    /// The recorded response was a Secret's, left out while recording (see the module's
    /// "Secrets").
    #[error("the recorded response to {method} {path} was left out: Secrets are redacted")]
    Redacted {
        /// The request's method.
        method: String,
        /// The request's path.
        path: String,
    },
    /// Nothing recorded is left to answer this method and path: the server is gone.
    #[error("no recorded exchange left for {method} {path}: the replayed server is unreachable")]
    Exhausted {
        /// The request's method.
        method: String,
        /// The request's path.
        path: String,
    },
    /// The request failed so when it was recorded (a connection error).
    #[error("{message} (recorded)")]
    Connection {
        /// The recorded message.
        message: String,
    },
    /// The response body failed so when it was recorded.
    #[error("{message} (recorded)")]
    Body {
        /// The recorded message.
        message: String,
    },
}

// ---- the recording in memory ----------------------------------------------------------

/// A whole wire recording: its header and its exchanges in the order they were made.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WireRecording {
    /// The header (`encoding` [`ENCODING`]).
    pub header: Header,
    /// Every exchange, in the order its request was made.
    pub exchanges: Vec<Exchange>,
}

/// One HTTP request and what came back.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Exchange {
    /// When the request was made, since the recording began.
    pub at: Duration,
    /// What was asked.
    pub request: WireRequest,
    /// What came back.
    pub answer: WireAnswer,
}

impl Exchange {
    /// A request made `at`, and what came back.
    pub fn new(at: Duration, request: WireRequest, answer: WireAnswer) -> Self {
        Self {
            at,
            request,
            answer,
        }
    }
}

/// A request as recorded: no header, no body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WireRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The URI's path.
    pub path: String,
    /// The URI's query, as sent (without the `?`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

impl WireRequest {
    /// A request of `method` for `path` with `query`.
    pub fn new(method: impl Into<String>, path: impl Into<String>, query: Option<&str>) -> Self {
        Self {
            method: method.into(),
            path: path.into(),
            query: query.map(str::to_owned),
        }
    }
}

/// What came back for a request.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum WireAnswer {
    /// A response.
    Response(WireResponse),
    /// No response: the request failed (a connection error).
    Failed {
        /// When it failed.
        at: Duration,
        /// The error's message.
        message: String,
    },
    /// Nothing was recorded (the recording stopped first).
    Pending,
}

/// A response: its status, how to read its body, and the body as it arrived.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WireResponse {
    /// When its head arrived.
    pub at: Duration,
    /// The HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Encoding`.
    pub content_encoding: Option<String>,
    /// Whether the body was left out (a Secret's: see the module's "Secrets").
    pub redacted: bool,
    /// The body, chunk by chunk as it arrived.
    pub chunks: Vec<Chunk>,
    /// When and how the body ended (`None`: still open when the recording stopped).
    pub end: Option<(Duration, BodyEnd)>,
}

impl WireResponse {
    /// The whole body (its chunks together).
    pub fn body(&self) -> Vec<u8> {
        self.chunks
            .iter()
            .flat_map(|c| c.bytes.iter().copied())
            .collect()
    }
}

/// A chunk of a response body.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Chunk {
    /// When it arrived.
    pub at: Duration,
    /// Its bytes.
    pub bytes: Bytes,
}

impl Chunk {
    /// `bytes`, arrived `at`.
    pub fn new(at: Duration, bytes: impl Into<Bytes>) -> Self {
        Self {
            at,
            bytes: bytes.into(),
        }
    }
}

/// How a response body ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyEnd {
    /// The server finished it.
    Complete,
    /// Reading it failed (a connection cut, a timeout), with the error's message.
    Failed(String),
    /// The client stopped reading it (dropped it before its end).
    Dropped,
}

// ---- lines -----------------------------------------------------------------------------

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseLine {
    status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    redacted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum EndKind {
    Complete,
    Failed,
    Dropped,
}

/// One line after the header, as it is in the file: one record field set (`error` only
/// with `end`).
#[derive(Default, Serialize, Deserialize)]
struct RawLine {
    t: u64,
    call: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request: Option<WireRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<ResponseLine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chunk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<EndKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed: Option<String>,
}

enum Record {
    Request(WireRequest),
    Response(ResponseLine),
    Chunk(Bytes),
    End(BodyEnd),
    Failed(String),
}

impl RawLine {
    fn new(t: u64, call: u64, record: Record) -> Self {
        let mut line = Self {
            t,
            call,
            ..Self::default()
        };
        match record {
            Record::Request(r) => line.request = Some(r),
            Record::Response(r) => line.response = Some(r),
            Record::Chunk(b) => line.chunk = Some(BASE64.encode(&b)),
            Record::End(BodyEnd::Complete) => line.end = Some(EndKind::Complete),
            Record::End(BodyEnd::Dropped) => line.end = Some(EndKind::Dropped),
            Record::End(BodyEnd::Failed(m)) => {
                line.end = Some(EndKind::Failed);
                line.error = Some(m);
            }
            Record::Failed(m) => line.failed = Some(m),
        }
        line
    }

    fn into_record(self) -> Result<(u64, u64, Record), String> {
        let record = match self {
            Self {
                request: Some(r), ..
            } => Record::Request(r),
            Self {
                response: Some(r), ..
            } => Record::Response(r),
            Self { chunk: Some(c), .. } => Record::Chunk(
                BASE64
                    .decode(c.as_bytes())
                    .map_err(|e| format!("a chunk that is not base64: {e}"))?
                    .into(),
            ),
            Self {
                end: Some(end),
                ref error,
                ..
            } => Record::End(match end {
                EndKind::Complete => BodyEnd::Complete,
                EndKind::Dropped => BodyEnd::Dropped,
                EndKind::Failed => BodyEnd::Failed(error.clone().unwrap_or_default()),
            }),
            Self {
                failed: Some(m), ..
            } => Record::Failed(m),
            _ => return Err("a line with no record".into()),
        };
        Ok((self.t, self.call, record))
    }
}

impl WireRecording {
    /// An empty wire recording of `resource`.
    pub fn new(resource: impl Into<String>, redacted: bool) -> Self {
        Self {
            header: wire_header(resource, redacted),
            exchanges: Vec::new(),
        }
    }

    /// Reads a wire recording (see the module docs). A last line cut short is left out;
    /// any other bad line is an error.
    ///
    /// # Errors
    /// [`WireFormatError::Encoding`] for a recording of another encoding; the rest as
    /// [`Recording::parse`](crate::Recording::parse).
    pub fn parse(reader: impl BufRead) -> Result<Self, WireFormatError> {
        // The header is read first; the exchanges are pushed onto a recording that takes
        // it after.
        let mut recording = Self::new(String::new(), false);
        let mut open: HashMap<u64, usize> = HashMap::new();
        recording.header = read_lines(reader, ENCODING, |raw: RawLine| {
            let (t, call, record) = raw.into_record()?;
            recording.push(Duration::from_micros(t), call, record, &mut open)
        })
        .map_err(|e| match e {
            ReadError::Format(e) => WireFormatError::Format(e),
            ReadError::Encoding(found) => WireFormatError::Encoding { found },
        })?;
        Ok(recording)
    }

    /// Reads the wire recording in the file at `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self, WireFormatError> {
        Self::parse(lines::open(path)?)
    }

    /// Writes the recording in the file format, exchange by exchange.
    ///
    /// # Errors
    /// I/O.
    pub fn write(&self, out: impl Write) -> Result<(), FormatError> {
        let exchanges = self.exchanges.iter().enumerate();
        lines::write_all(
            out,
            &self.header,
            exchanges.flat_map(|(n, x)| x.lines(n as u64)),
        )
    }

    /// Writes the recording to the file at `path` (replacing it).
    ///
    /// # Errors
    /// I/O.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<(), FormatError> {
        self.write(lines::create(path)?)
    }

    /// How long the recording lasts: its last request, response, chunk, failure or end.
    pub fn span(&self) -> Duration {
        self.exchanges
            .iter()
            .flat_map(|x| {
                let answered: Vec<Duration> = match &x.answer {
                    WireAnswer::Response(r) => std::iter::once(r.at)
                        .chain(r.chunks.iter().map(|c| c.at))
                        .chain(r.end.iter().map(|(at, _)| *at))
                        .collect(),
                    WireAnswer::Failed { at, .. } => vec![*at],
                    WireAnswer::Pending => Vec::new(),
                };
                std::iter::once(x.at).chain(answered)
            })
            .max()
            .unwrap_or_default()
    }

    fn push(
        &mut self,
        at: Duration,
        call: u64,
        record: Record,
        open: &mut HashMap<u64, usize>,
    ) -> Result<(), String> {
        if let Record::Request(request) = record {
            if open.contains_key(&call) {
                return Err(format!("exchange {call} requested twice"));
            }
            open.insert(call, self.exchanges.len());
            self.exchanges.push(Exchange {
                at,
                request,
                answer: WireAnswer::Pending,
            });
            return Ok(());
        }
        let index = *open
            .get(&call)
            .ok_or_else(|| format!("a record of exchange {call} before its request"))?;
        let answer = &mut self.exchanges[index].answer;
        match (record, answer) {
            (Record::Response(r), answer @ WireAnswer::Pending) => {
                *answer = WireAnswer::Response(WireResponse {
                    at,
                    status: r.status,
                    content_type: r.content_type,
                    content_encoding: r.content_encoding,
                    redacted: r.redacted,
                    chunks: Vec::new(),
                    end: None,
                });
            }
            (Record::Failed(message), answer @ WireAnswer::Pending) => {
                *answer = WireAnswer::Failed { at, message };
            }
            (Record::Chunk(bytes), WireAnswer::Response(r)) if r.end.is_none() && !r.redacted => {
                r.chunks.push(Chunk { at, bytes });
            }
            (Record::End(how), WireAnswer::Response(r)) if r.end.is_none() => {
                r.end = Some((at, how));
            }
            _ => return Err(format!("a record that does not fit exchange {call}")),
        }
        Ok(())
    }
}

impl Exchange {
    fn lines(&self, n: u64) -> Vec<RawLine> {
        let line = |at: Duration, record| RawLine::new(micros(at), n, record);
        let mut out = vec![line(self.at, Record::Request(self.request.clone()))];
        match &self.answer {
            WireAnswer::Response(r) => {
                out.push(line(
                    r.at,
                    Record::Response(ResponseLine {
                        status: r.status,
                        content_type: r.content_type.clone(),
                        content_encoding: r.content_encoding.clone(),
                        redacted: r.redacted,
                    }),
                ));
                for c in &r.chunks {
                    out.push(line(c.at, Record::Chunk(c.bytes.clone())));
                }
                if let Some((at, how)) = &r.end {
                    out.push(line(*at, Record::End(how.clone())));
                }
            }
            WireAnswer::Failed { at, message } => {
                out.push(line(*at, Record::Failed(message.clone())));
            }
            WireAnswer::Pending => {}
        }
        out
    }
}

fn wire_header(resource: impl Into<String>, redacted: bool) -> Header {
    Header {
        encoding: ENCODING.into(),
        ..Header::new(resource, redacted)
    }
}

/// Whether `path` is of a `secrets` resource: `/api/v1/secrets`,
/// `/api/v1/namespaces/ns/secrets/name`, `/apis/g/v/watch/secrets`... of any group, under
/// any prefix. A path that is not an API path but has a `secrets` segment counts too (a
/// Secret is never recorded by mistake; a namespace named `secrets` is not one).
pub fn is_secrets_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = segments.iter().enumerate().find_map(|(i, s)| match *s {
        "api" => segments.get(i + 2..),
        "apis" => segments.get(i + 3..),
        _ => None,
    });
    let Some(mut rest) = rest else {
        return segments.contains(&"secrets");
    };
    if rest.first() == Some(&"watch") {
        rest = &rest[1..];
    }
    match rest {
        ["namespaces", _, resource, ..] => *resource == "secrets",
        [resource, ..] => *resource == "secrets",
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::replay::comparable;
    use super::*;

    #[test]
    fn secrets_paths_are_told_from_others() {
        for secret in [
            "/api/v1/secrets",
            "/api/v1/namespaces/ns/secrets",
            "/api/v1/namespaces/ns/secrets/token",
            "/api/v1/watch/namespaces/ns/secrets",
            "/apis/example.com/v1/secrets",
            "/k8s/clusters/c-1/api/v1/namespaces/ns/secrets",
            "/weird/secrets",
        ] {
            assert!(is_secrets_path(secret), "{secret}");
        }
        for other in [
            "/api/v1/pods",
            "/api/v1/namespaces/secrets/pods",
            "/api/v1/namespaces/secrets",
            "/apis/apps/v1/namespaces/secrets/deployments",
            "/version",
        ] {
            assert!(!is_secrets_path(other), "{other}");
        }
    }

    #[test]
    fn divergent_queries_leave_out_timeouts_and_order() {
        assert_eq!(
            comparable(Some("watch=true&timeoutSeconds=300&resourceVersion=5")),
            comparable(Some("resourceVersion=5&timeoutSeconds=412&watch=true"))
        );
        assert_ne!(
            comparable(Some("resourceVersion=5")),
            comparable(Some("resourceVersion=6"))
        );
    }
}
