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

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body::{Body, Frame, SizeHint};
use kinformer_core::{Clock, TokioClock};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::Timing;
use crate::format::{FormatError, Header, MAGIC, VERSION, micros, write_json_line};
use crate::record::RecordOptions;

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
        let mut lines = reader.lines().enumerate().peekable();
        let header: Header = match lines.next() {
            Some((_, line)) => {
                serde_json::from_str(&line?).map_err(|_| FormatError::NotARecording)?
            }
            None => return Err(FormatError::NotARecording.into()),
        };
        if header.format != MAGIC {
            return Err(FormatError::NotARecording.into());
        }
        if header.version != VERSION {
            return Err(FormatError::Version {
                found: header.version,
            }
            .into());
        }
        if header.encoding != ENCODING {
            return Err(WireFormatError::Encoding {
                found: header.encoding,
            });
        }
        let mut recording = Self {
            header,
            exchanges: Vec::new(),
        };
        let mut open: HashMap<u64, usize> = HashMap::new();
        while let Some((n, line)) = lines.next() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |detail: String| FormatError::Line {
                line: n + 1,
                detail,
            };
            let raw: RawLine = match serde_json::from_str(&line) {
                Ok(l) => l,
                Err(e) if lines.peek().is_none() && e.is_eof() => break,
                Err(e) => {
                    return Err(bad(format!("{:?} at column {}", e.classify(), e.column())).into());
                }
            };
            let (t, call, record) = raw.into_record().map_err(bad)?;
            recording
                .push(Duration::from_micros(t), call, record, &mut open)
                .map_err(bad)?;
        }
        Ok(recording)
    }

    /// Reads the wire recording in the file at `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self, WireFormatError> {
        let file = std::fs::File::open(path)?;
        Self::parse(std::io::BufReader::new(file))
    }

    /// Writes the recording in the file format, exchange by exchange.
    ///
    /// # Errors
    /// I/O.
    pub fn write(&self, mut out: impl Write) -> Result<(), FormatError> {
        write_json_line(&mut out, &self.header)?;
        for (n, exchange) in self.exchanges.iter().enumerate() {
            for line in exchange.lines(n as u64) {
                write_json_line(&mut out, &line)?;
            }
        }
        out.flush()?;
        Ok(())
    }

    /// Writes the recording to the file at `path` (replacing it).
    ///
    /// # Errors
    /// I/O.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<(), FormatError> {
        let file = std::fs::File::create(path)?;
        self.write(std::io::BufWriter::new(file))
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

// ---- recording -------------------------------------------------------------------------

/// Where a [`WireRecorder`] writes, shared by its layers, services, bodies and tapes.
struct Out {
    writer: Mutex<Box<dyn Write + Send>>,
    memory: Option<Arc<Mutex<Vec<u8>>>>,
    timing: Mutex<(Arc<dyn Clock>, Instant)>,
    next: AtomicU64,
    redact: bool,
    error: Mutex<Option<String>>,
}

impl Out {
    fn write(&self, call: u64, record: Record) {
        let t = {
            let timing = self.timing.lock();
            micros(timing.0.now().saturating_duration_since(timing.1))
        };
        let line = RawLine::new(t, call, record);
        let mut w = self.writer.lock();
        // One line a write, flushed: a recorder killed midway leaves whole lines.
        let result = write_json_line(&mut *w, &line).and_then(|()| Ok(w.flush()?));
        if let Err(e) = result {
            let mut first = self.error.lock();
            if first.is_none() {
                tracing::warn!(error = %e, "wire recording stopped: cannot write");
                *first = Some(e.to_string());
            }
        }
    }
}

/// Records the HTTP exchanges of a `kube::Client` whose stack has its
/// [`layer`](Self::layer): each request's method, path and query, its response's status,
/// `Content-Type` and `Content-Encoding`, the body's chunks as they arrive and how it
/// ended, or the connection error, each with its time on the recorder's [`Clock`] (Tokio's
/// by default). Everything is passed on unchanged; a recording that cannot be written
/// stops recording (the [`WireTape`]'s [`error`](WireTape::error) says why) and never
/// fails a request. See the [module docs](self) for the file and for Secrets.
pub struct WireRecorder {
    out: Arc<Out>,
}

impl std::fmt::Debug for WireRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireRecorder")
            .field("exchanges", &self.out.next.load(Ordering::Relaxed))
            .field("redact", &self.out.redact)
            .finish_non_exhaustive()
    }
}

/// The in-memory output's writer.
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl WireRecorder {
    /// Records into `writer` (a file, a socket), a line at a time.
    ///
    /// # Errors
    /// When the header cannot be written.
    pub fn to_writer(
        writer: impl Write + Send + 'static,
        options: RecordOptions,
    ) -> Result<Self, FormatError> {
        Self::start(Box::new(writer), None, options)
    }

    /// Records into the file at `path` (created, or replaced).
    ///
    /// # Errors
    /// When the file cannot be created or its header written.
    pub fn to_file(
        path: impl AsRef<std::path::Path>,
        options: RecordOptions,
    ) -> Result<Self, FormatError> {
        let file = std::fs::File::create(path)?;
        Self::to_writer(std::io::BufWriter::new(file), options)
    }

    /// Records in memory: [`WireTape::recording`] reads it back.
    pub fn in_memory(options: RecordOptions) -> Self {
        let memory = Arc::new(Mutex::new(Vec::new()));
        let writer = Box::new(Shared(Arc::clone(&memory)));
        match Self::start(writer, Some(memory), options) {
            Ok(r) => r,
            // Writing to memory does not fail; the header always encodes.
            Err(e) => unreachable!("an in-memory wire recording failed: {e}"),
        }
    }

    fn start(
        mut writer: Box<dyn Write + Send>,
        memory: Option<Arc<Mutex<Vec<u8>>>>,
        options: RecordOptions,
    ) -> Result<Self, FormatError> {
        write_json_line(
            &mut writer,
            &wire_header(options.resource, options.redact_secrets),
        )?;
        writer.flush()?;
        let clock: Arc<dyn Clock> = Arc::new(TokioClock);
        Ok(Self {
            out: Arc::new(Out {
                writer: Mutex::new(writer),
                memory,
                timing: Mutex::new((Arc::clone(&clock), clock.now())),
                next: AtomicU64::new(0),
                redact: options.redact_secrets,
                error: Mutex::new(None),
            }),
        })
    }

    /// Times the recording on `clock` instead of Tokio's time (from now on).
    #[must_use]
    pub fn clock(self, clock: Arc<dyn Clock>) -> Self {
        let start = clock.now();
        *self.out.timing.lock() = (clock, start);
        self
    }

    /// The layer to put on a client's stack
    /// (`reflector_connection(config)?.with_layer(&recorder.layer()).build()`). Every
    /// layer of a recorder writes to its recording.
    pub fn layer(&self) -> WireLayer {
        WireLayer {
            out: Arc::clone(&self.out),
        }
    }

    /// A handle to read what was recorded.
    pub fn tape(&self) -> WireTape {
        WireTape {
            out: Arc::clone(&self.out),
        }
    }
}

/// A handle on a [`WireRecorder`]'s output.
#[derive(Clone)]
pub struct WireTape {
    out: Arc<Out>,
}

impl std::fmt::Debug for WireTape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireTape")
            .field("exchanges", &self.out.next.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WireTape {
    /// The first thing that could not be recorded (a write that failed), if any.
    pub fn error(&self) -> Option<String> {
        self.out.error.lock().clone()
    }

    /// The recording so far of an [`in_memory`](WireRecorder::in_memory) recorder (a body
    /// still open has no end).
    ///
    /// # Errors
    /// [`FormatError::Io`] for a recorder that writes elsewhere (read its file with
    /// [`WireRecording::load`]).
    pub fn recording(&self) -> Result<WireRecording, WireFormatError> {
        let Some(memory) = &self.out.memory else {
            return Err(std::io::Error::other(
                "this wire recorder writes to a file: WireRecording::load it",
            )
            .into());
        };
        let bytes = memory.lock().clone();
        WireRecording::parse(bytes.as_slice())
    }
}

/// The tower [`Layer`](tower::Layer) of a [`WireRecorder`]: its service records every
/// exchange that passes through it.
#[derive(Clone)]
pub struct WireLayer {
    out: Arc<Out>,
}

impl std::fmt::Debug for WireLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireLayer").finish_non_exhaustive()
    }
}

impl<S> tower::Layer<S> for WireLayer {
    type Service = WireService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WireService {
            inner,
            out: Arc::clone(&self.out),
        }
    }
}

/// The service of a [`WireLayer`]: passes every request to the service below and records
/// it, its response and the response's body (a [`WireBody`]).
pub struct WireService<S> {
    inner: S,
    out: Arc<Out>,
}

impl<S: Clone> Clone for WireService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            out: Arc::clone(&self.out),
        }
    }
}

impl<S> std::fmt::Debug for WireService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireService").finish_non_exhaustive()
    }
}

fn chain(e: &BoxError) -> String {
    let e: &(dyn std::error::Error + 'static) = &**e;
    kinformer_core::ErrorChain(e).to_string()
}

fn header(headers: &http::HeaderMap, name: http::header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

impl<S, ReqB, B> tower::Service<http::Request<ReqB>> for WireService<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<WireBody<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let call = self.out.next.fetch_add(1, Ordering::Relaxed);
        let uri = req.uri();
        let redact = self.out.redact && is_secrets_path(uri.path());
        self.out.write(
            call,
            Record::Request(WireRequest::new(
                req.method().as_str(),
                uri.path(),
                uri.query(),
            )),
        );
        let response = self.inner.call(req);
        let out = Arc::clone(&self.out);
        Box::pin(async move {
            match response.await {
                Ok(resp) => {
                    let (parts, body) = resp.into_parts();
                    out.write(
                        call,
                        Record::Response(ResponseLine {
                            status: parts.status.as_u16(),
                            content_type: header(&parts.headers, http::header::CONTENT_TYPE),
                            content_encoding: header(
                                &parts.headers,
                                http::header::CONTENT_ENCODING,
                            ),
                            redacted: redact,
                        }),
                    );
                    let mut body = WireBody {
                        inner: Box::pin(body),
                        out,
                        call,
                        redact,
                        ended: false,
                    };
                    if body.inner.is_end_stream() {
                        body.end(BodyEnd::Complete);
                    }
                    Ok(http::Response::from_parts(parts, body))
                }
                Err(e) => {
                    let e: BoxError = e.into();
                    out.write(call, Record::Failed(chain(&e)));
                    Err(e)
                }
            }
        })
    }
}

/// A response body passed on and recorded, chunk by chunk; its end (or its drop before
/// the end) is recorded too.
pub struct WireBody<B> {
    inner: Pin<Box<B>>,
    out: Arc<Out>,
    call: u64,
    redact: bool,
    ended: bool,
}

impl<B> std::fmt::Debug for WireBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireBody")
            .field("exchange", &self.call)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl<B> WireBody<B> {
    fn end(&mut self, how: BodyEnd) {
        if !std::mem::replace(&mut self.ended, true) {
            self.out.write(self.call, Record::End(how));
        }
    }
}

impl<B> Body for WireBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.end(BodyEnd::Complete);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                let e: BoxError = e.into();
                this.end(BodyEnd::Failed(chain(&e)));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && !data.is_empty()
                    && !this.redact
                    && !this.ended
                {
                    this.out.write(this.call, Record::Chunk(data.clone()));
                }
                // A reader may stop at the end it is told of, without polling again.
                if this.inner.is_end_stream() {
                    this.end(BodyEnd::Complete);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for WireBody<B> {
    fn drop(&mut self) {
        self.end(BodyEnd::Dropped);
    }
}

// ---- replaying -------------------------------------------------------------------------

struct State {
    /// The exchanges still to serve, by method and path, each with its number.
    queues: HashMap<(String, String), VecDeque<(usize, Exchange)>>,
    left: usize,
    /// Bodies handed out that have chunks or an end still to deliver.
    open: usize,
    requests: Vec<WireRequest>,
    divergences: Vec<String>,
}

struct ReplayShared {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    timing: Timing,
    span: Duration,
    changed: Notify,
}

/// Serves a [`WireRecording`] as a `kube::Client` ([`client`](Self::client)): the n-th
/// request of a method and path is answered with the recording's n-th exchange of that
/// method and path: its status, `Content-Type` and `Content-Encoding`, then its body's
/// chunks, each as long after the request as it came then (see [`Timing`]; on the
/// replay's [`Clock`], Tokio's by default: under a paused clock a recording of minutes
/// replays in milliseconds), then the body's end as recorded: complete, failed (the
/// body's error, a [`WireReplayError::Body`]), or, for a body the recorded client dropped
/// or that was still open when the recording stopped, open and quiet. A recorded
/// connection error fails the request ([`WireReplayError::Connection`]), a Secret's body
/// left out too ([`WireReplayError::Redacted`]), and a request with nothing recorded left
/// for its method and path fails at once as an unreachable server would
/// ([`WireReplayError::Exhausted`]).
///
/// A request whose query differs from the recorded one is still answered with the
/// recorded exchange, and noted in [`divergences`](Self::divergences); `timeoutSeconds`
/// is left out of the comparison (a reflector picks each watch's at random, and the watch
/// ends as recorded whatever it asks). A request of a method and path that the recording
/// never had is noted too.
///
/// Cloning shares the recording.
///
/// ```
/// use kinformer_replay::wire::{WireRecording, WireReplay};
///
/// let text = r#"{"format":"kinformer-recording","version":1,"encoding":"http","resource":"pods","redacted":true}
/// {"t":0,"call":0,"request":{"method":"GET","path":"/api/v1/namespaces/ns/pods/a"}}
/// {"t":1000,"call":0,"response":{"status":200,"contentType":"application/json"}}
/// {"t":1000,"call":0,"chunk":"eyJraW5kIjoiUG9kIiwibWV0YWRhdGEiOnsibmFtZSI6ImEifX0="}
/// {"t":2000,"call":0,"end":"complete"}
/// "#;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
/// # rt.block_on(async {
/// let replay = WireReplay::new(WireRecording::parse(text.as_bytes()).unwrap());
/// let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(replay.client("ns"), "ns");
/// assert_eq!(pods.get("a").await.unwrap().metadata.name.as_deref(), Some("a"));
/// assert!(pods.get("a").await.is_err()); // nothing left for it
/// replay.finished().await;
/// # });
/// ```
#[derive(Clone)]
pub struct WireReplay {
    shared: Arc<ReplayShared>,
}

impl std::fmt::Debug for WireReplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("WireReplay")
            .field("left", &state.left)
            .field("served", &state.requests.len())
            .field("divergences", &state.divergences.len())
            .finish_non_exhaustive()
    }
}

impl WireReplay {
    /// A replay of `recording` on Tokio's time, with recorded timing.
    pub fn new(recording: WireRecording) -> Self {
        Self::with(recording, Arc::new(TokioClock), Timing::Recorded)
    }

    /// A replay on `clock` with `timing`.
    pub fn with(recording: WireRecording, clock: Arc<dyn Clock>, timing: Timing) -> Self {
        let span = recording.span();
        let left = recording.exchanges.len();
        let mut queues: HashMap<(String, String), VecDeque<(usize, Exchange)>> = HashMap::new();
        for (n, x) in recording.exchanges.into_iter().enumerate() {
            queues
                .entry((x.request.method.clone(), x.request.path.clone()))
                .or_default()
                .push_back((n, x));
        }
        Self {
            shared: Arc::new(ReplayShared {
                state: Mutex::new(State {
                    queues,
                    left,
                    open: 0,
                    requests: Vec::new(),
                    divergences: Vec::new(),
                }),
                clock,
                timing,
                span,
                changed: Notify::new(),
            }),
        }
    }

    /// A `kube::Client` that this replay answers, with `default_namespace` as its default
    /// namespace. Call it inside a Tokio runtime (the client's buffer runs on it); every
    /// client of a replay shares its recording.
    pub fn client(&self, default_namespace: &str) -> kube::Client {
        let shared = Arc::clone(&self.shared);
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let shared = Arc::clone(&shared);
            let request =
                WireRequest::new(req.method().as_str(), req.uri().path(), req.uri().query());
            async move { serve(shared, request).await }
        });
        kube::Client::new(service, default_namespace)
    }

    /// Every request made so far, in order.
    pub fn requests(&self) -> Vec<WireRequest> {
        self.shared.state.lock().requests.clone()
    }

    /// Where the client did not ask as the recording did (see the type docs), and bodies
    /// it dropped with chunks undelivered.
    pub fn divergences(&self) -> Vec<String> {
        self.shared.state.lock().divergences.clone()
    }

    /// How many recorded exchanges are still to be asked for.
    pub fn left(&self) -> usize {
        self.shared.state.lock().left
    }

    /// How long the recording lasts ([`WireRecording::span`]).
    pub fn span(&self) -> Duration {
        self.shared.span
    }

    /// Resolves once every recorded exchange has been asked for and every body handed
    /// out has delivered its last chunk and its end (or been dropped).
    pub async fn finished(&self) {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.shared.state.lock();
                if state.left == 0 && state.open == 0 {
                    return;
                }
            }
            changed.await;
        }
    }
}

/// `query` without `timeoutSeconds`, its parameters sorted.
fn comparable(query: Option<&str>) -> Vec<&str> {
    let mut params: Vec<&str> = query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("timeoutSeconds="))
        .collect();
    params.sort_unstable();
    params
}

impl ReplayShared {
    /// Waits until `offset` after `start` (nothing with [`Timing::Immediate`]).
    async fn until(&self, start: Instant, offset: Duration) {
        if self.timing == Timing::Recorded {
            self.clock.sleep_until(start + offset).await;
        }
    }

    fn next(&self, request: &WireRequest) -> Option<(usize, Exchange)> {
        let mut state = self.state.lock();
        let n = state.requests.len();
        state.requests.push(request.clone());
        let key = (request.method.clone(), request.path.clone());
        let Some(queue) = state.queues.get_mut(&key) else {
            let note = format!(
                "request {n}: {} {}, which the recording never had",
                request.method, request.path
            );
            state.divergences.push(note);
            return None;
        };
        let (x, exchange) = queue.pop_front()?;
        state.left -= 1;
        if comparable(request.query.as_deref()) != comparable(exchange.request.query.as_deref()) {
            let note = format!(
                "request {n}: {} {} with query {:?} answered with exchange {x}, asked with {:?}",
                request.method, request.path, request.query, exchange.request.query
            );
            state.divergences.push(note);
        }
        if matches!(&exchange.answer, WireAnswer::Response(r) if !r.redacted) {
            state.open += 1;
        }
        drop(state);
        self.changed.notify_waiters();
        Some((x, exchange))
    }
}

async fn serve(
    shared: Arc<ReplayShared>,
    request: WireRequest,
) -> Result<http::Response<ReplayBody>, BoxError> {
    let start = shared.clock.now();
    let Some((n, exchange)) = shared.next(&request) else {
        return Err(Box::new(WireReplayError::Exhausted {
            method: request.method,
            path: request.path,
        }));
    };
    let response = match exchange.answer {
        WireAnswer::Failed { at, message } => {
            shared.until(start, at.saturating_sub(exchange.at)).await;
            return Err(Box::new(WireReplayError::Connection { message }));
        }
        WireAnswer::Pending => return std::future::pending().await,
        WireAnswer::Response(r) => r,
    };
    if response.redacted {
        shared
            .until(start, response.at.saturating_sub(exchange.at))
            .await;
        return Err(Box::new(WireReplayError::Redacted {
            method: request.method,
            path: request.path,
        }));
    }
    let open = OpenBody {
        shared: Arc::clone(&shared),
        exchange: n,
        chunks: response.chunks.into(),
        finished: false,
    };
    shared
        .until(start, response.at.saturating_sub(exchange.at))
        .await;
    let mut builder = http::Response::builder().status(response.status);
    if let Some(ct) = &response.content_type {
        builder = builder.header(http::header::CONTENT_TYPE, ct.as_str());
    }
    if let Some(ce) = &response.content_encoding {
        builder = builder.header(http::header::CONTENT_ENCODING, ce.as_str());
    }
    let body = ReplayBody {
        stream: body_stream(open, response.end, start, exchange.at),
    };
    builder.body(body).map_err(|e| -> BoxError { Box::new(e) })
}

/// A body's chunks still to deliver; counted open until its end is delivered (or it is
/// left open) or it is dropped.
struct OpenBody {
    shared: Arc<ReplayShared>,
    exchange: usize,
    chunks: VecDeque<Chunk>,
    finished: bool,
}

impl OpenBody {
    fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let mut state = self.shared.state.lock();
        state.open -= 1;
        if !self.chunks.is_empty() {
            let note = format!(
                "exchange {}: the body was dropped with {} recorded chunks undelivered",
                self.exchange,
                self.chunks.len()
            );
            state.divergences.push(note);
        }
        drop(state);
        self.shared.changed.notify_waiters();
    }
}

impl Drop for OpenBody {
    fn drop(&mut self) {
        self.finish();
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, BoxError>> + Send>>;

fn body_stream(
    open: OpenBody,
    end: Option<(Duration, BodyEnd)>,
    start: Instant,
    asked: Duration,
) -> BodyStream {
    futures::stream::unfold(Some(open), move |open| {
        let end = end.clone();
        async move {
            let mut open = open?;
            let Some(chunk) = open.chunks.pop_front() else {
                return match end {
                    Some((at, BodyEnd::Complete)) => {
                        open.shared.until(start, at.saturating_sub(asked)).await;
                        open.finish();
                        None
                    }
                    Some((at, BodyEnd::Failed(message))) => {
                        open.shared.until(start, at.saturating_sub(asked)).await;
                        open.finish();
                        let e: BoxError = Box::new(WireReplayError::Body { message });
                        Some((Err(e), None))
                    }
                    // Dropped by the recorded client, or still open when the recording
                    // stopped: open, quiet.
                    Some((_, BodyEnd::Dropped)) | None => {
                        open.finish();
                        std::future::pending().await
                    }
                };
            };
            open.shared
                .until(start, chunk.at.saturating_sub(asked))
                .await;
            Some((Ok(chunk.bytes), Some(open)))
        }
    })
    .boxed()
}

/// A replayed response body.
struct ReplayBody {
    stream: BodyStream,
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.stream
            .as_mut()
            .poll_next(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }
}

#[cfg(test)]
mod tests {
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
