//! The recording: what a [`Recorder`](crate::Recorder) writes and a
//! [`Replay`](crate::Replay) serves, in memory ([`Recording`]) and on disk (JSON Lines,
//! version [`VERSION`]).
//!
//! # The file, version 1
//!
//! UTF-8 JSON Lines: one JSON object per line, written as things happen (a recorder killed
//! midway leaves every line it finished; [`Recording::parse`] reads them and ignores a last
//! line cut short). The first line is the header:
//!
//! ```text
//! {"format":"kinformer-recording","version":1,"encoding":"json","resource":"pods","redacted":true}
//! ```
//!
//! `encoding` says how objects are written (`json`: each object as the JSON of its decoded
//! type, which for Kubernetes types is the API's own JSON); `resource` is free text (what
//! was recorded); `redacted` whether Secrets' values were replaced (see
//! [`RecordOptions::redact_secrets`](crate::RecordOptions::redact_secrets)). Every other
//! line is one record of a call, `t` microseconds after the recording began, `call` the
//! call's number (calls may overlap, so their records interleave):
//!
//! | record | meaning |
//! | --- | --- |
//! | `{"t":0,"call":0,"list":{"resourceVersion":"0","limit":500,"continue":null,"exact":false}}` | a list call |
//! | `{"t":9,"call":0,"page":{"resourceVersion":"10","continue":null,"items":[ITEM..],"undecodable":[..]}}` | its page |
//! | `{"t":9,"call":0,"failed":ERROR}` | a list or a watch that failed to start |
//! | `{"t":9,"call":1,"watch":{"resourceVersion":"10","timeoutSeconds":300,"bookmarks":true,"sendInitialEvents":false}}` | a watch call |
//! | `{"t":9,"call":1,"event":{"type":"ADDED","key":"ns/a","rv":"11","object":{..}}}` | a watch event (`ADDED`, `MODIFIED`, `DELETED`) |
//! | `{"t":9,"call":1,"event":{"type":"BOOKMARK","rv":"12","initialEventsEnd":false}}` | a bookmark |
//! | `{"t":9,"call":1,"event":{"type":"ERROR","error":ERROR}}` | an error in the stream (a `410` `ERROR` event, an object that did not decode) |
//! | `{"t":9,"call":1,"end":"closed"}` | the server ended the watch (`closed`), or the client stopped reading it (`dropped`) |
//!
//! An ITEM is `{"key":"ns/a","rv":"11","object":{..}}`; the key and resourceVersion are
//! read from the object when it is recorded, so perturbations never decode an object. An
//! ERROR is `{"kind":"api","code":410,"reason":"Expired","message":"..","causes":[..]}`, or
//! of kind `unreachable`, `decode`, `undecodable`, `unexpectedKind` or `client` (each with
//! its fields; see `RecordedError`). A reader of another `version` refuses the file
//! ([`FormatError::Version`]); fields it does not know are ignored, so a later version may
//! add some. The types of a recording in memory ([`Call`], [`Page`], [`Frame`], ...) have
//! public fields, to build or edit a recording by hand (a scenario no server produced on
//! cue, a perturbation of your own); a field added to one is a new version of the format.

use std::io::{BufRead, Write};
use std::time::Duration;

use kinformer_reflector::{ApiStatus, Error, Undecodable};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::lines::{self, ReadError, read_lines};

/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;

/// The header's `format` value.
pub const MAGIC: &str = "kinformer-recording";

/// Why a recording could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Reading or writing the file failed.
    #[error("recording I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The first line is not a kinformer recording's header.
    #[error("not a kinformer recording (line 1)")]
    NotARecording,
    /// Objects written in an encoding this reader does not read (a recording of another
    /// layer: see the crate docs).
    #[error("recording encoding {found:?}, this reader reads \"json\"")]
    Encoding {
        /// The file's `encoding`.
        found: String,
    },
    /// Another version of the format.
    #[error("recording format version {found}, this reader reads {VERSION}")]
    Version {
        /// The file's version.
        found: u32,
    },
    /// A line that is not a record (its number, 1-based, and why; never a value from it).
    #[error("line {line} is not a record: {detail}")]
    Line {
        /// The line's number.
        line: usize,
        /// What is wrong with it.
        detail: String,
    },
    /// An object that could not be encoded as JSON while recording.
    #[error("cannot encode an object: {0}")]
    Encode(String),
}

/// The first line of a recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Header {
    /// Always [`MAGIC`].
    pub format: String,
    /// [`VERSION`] when written by this crate.
    pub version: u32,
    /// How objects are written: `json`.
    pub encoding: String,
    /// What was recorded (free text, e.g. `pods` or `pods in default`).
    pub resource: String,
    /// Whether Secrets' values were replaced while recording.
    pub redacted: bool,
}

impl Header {
    /// The header of a recording of `resource`.
    pub fn new(resource: impl Into<String>, redacted: bool) -> Self {
        Self {
            format: MAGIC.into(),
            version: VERSION,
            encoding: "json".into(),
            resource: resource.into(),
            redacted,
        }
    }
}

/// A whole recording: its header and its calls in the order they were made.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Recording {
    /// The header.
    pub header: Header,
    /// Every call, in the order it was made.
    pub calls: Vec<Call>,
}

/// One list or watch call and what the server answered.
#[derive(Clone, Debug)]
pub struct Call {
    /// When it was made, since the recording began.
    pub at: Duration,
    /// What was asked.
    pub request: Request,
    /// What came back.
    pub answer: Answer,
}

/// What a call asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// A list call (one page).
    List(ListRequest),
    /// A watch call.
    Watch(WatchRequest),
}

/// A list call's options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListRequest {
    /// `resourceVersion`.
    pub resource_version: String,
    /// `limit`.
    pub limit: Option<u32>,
    /// `continue`.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
    /// `resourceVersionMatch=Exact`.
    #[serde(default)]
    pub exact: bool,
}

/// A watch call's options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchRequest {
    /// `resourceVersion`.
    pub resource_version: String,
    /// `timeoutSeconds`.
    pub timeout_seconds: u64,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents` (a streaming list).
    pub send_initial_events: bool,
}

/// What the server answered a call.
#[derive(Clone, Debug)]
pub enum Answer {
    /// A list page, `at` after the recording began.
    Page {
        /// When it arrived.
        at: Duration,
        /// The page.
        page: Page,
    },
    /// The call failed: a list, or a watch that did not start.
    Failed {
        /// When the failure arrived.
        at: Duration,
        /// What failed.
        error: RecordedError,
    },
    /// A watch stream: its frames, and how it ended (`None`: the recording stopped while
    /// it was open).
    Stream {
        /// The frames, in order.
        frames: Vec<Frame>,
        /// When and how it ended.
        end: Option<(Duration, End)>,
    },
    /// No answer was recorded (the recording stopped first).
    Pending,
}

/// One list page.
#[derive(Clone, Debug, Default)]
pub struct Page {
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.continue`.
    pub continue_token: Option<String>,
    /// The objects.
    pub items: Vec<Item>,
    /// Objects that did not decode (their keys and why).
    pub undecodable: Vec<RecordedUndecodable>,
}

/// One object: its key and resourceVersion (read when it was recorded) and its JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Item {
    /// `namespace/name`, or `name`.
    pub key: String,
    /// `metadata.resourceVersion`.
    pub rv: String,
    /// The object, as JSON.
    pub object: Box<RawValue>,
}

impl Item {
    /// An item of `object`'s JSON under `key` at `rv`.
    pub fn new(key: impl Into<String>, rv: impl Into<String>, object: Box<RawValue>) -> Self {
        Self {
            key: key.into(),
            rv: rv.into(),
            object,
        }
    }
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.rv == other.rv && self.object.get() == other.object.get()
    }
}

/// One frame of a watch stream, `at` after the recording began.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// When it arrived.
    pub at: Duration,
    /// What it was.
    pub event: Event,
}

impl Frame {
    /// A frame of `event` at `at`.
    pub fn new(at: Duration, event: Event) -> Self {
        Self { at, event }
    }
}

/// A watch frame's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// `ADDED`.
    Added(Item),
    /// `MODIFIED`.
    Modified(Item),
    /// `DELETED`.
    Deleted(Item),
    /// `BOOKMARK` at this resourceVersion (`initial_events_end`: the end of a streaming
    /// list).
    Bookmark {
        /// The resourceVersion.
        rv: String,
        /// Annotated `k8s.io/initial-events-end`.
        initial_events_end: bool,
    },
    /// An error item.
    Error(RecordedError),
}

impl Event {
    /// The object of an `ADDED`, `MODIFIED` or `DELETED` event.
    pub fn item(&self) -> Option<&Item> {
        match self {
            Self::Added(i) | Self::Modified(i) | Self::Deleted(i) => Some(i),
            Self::Bookmark { .. } | Self::Error(_) => None,
        }
    }

    /// The resourceVersion the event moves a watch to (an object's or a bookmark's).
    pub fn rv(&self) -> Option<&str> {
        match self {
            Self::Added(i) | Self::Modified(i) | Self::Deleted(i) => Some(&i.rv),
            Self::Bookmark { rv, .. } => Some(rv),
            Self::Error(_) => None,
        }
    }
}

/// How a watch stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// The server closed it.
    Closed,
    /// The client stopped reading it (its reflector moved on or stopped). Replayed, the
    /// stream stays open after its last frame.
    Dropped,
}

/// An object that did not decode, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RecordedUndecodable {
    /// Its key.
    pub key: String,
    /// Why.
    pub detail: String,
    /// Its uid, if its metadata had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl From<&Undecodable> for RecordedUndecodable {
    fn from(u: &Undecodable) -> Self {
        Self {
            key: u.key.to_string(),
            detail: u.detail.clone(),
            uid: u.uid.clone(),
        }
    }
}

impl RecordedUndecodable {
    fn to_undecodable(&self) -> Option<Undecodable> {
        let key = kinformer_core::ObjectKey::parse(&self.key).ok()?;
        let u = Undecodable::new(key, self.detail.clone());
        Some(match &self.uid {
            Some(uid) => u.with_uid(uid.clone()),
            None => u,
        })
    }

    /// The object as the reflector's type, or a decoding error when its recorded key is
    /// not one.
    pub(crate) fn replayed(&self) -> Result<Undecodable, Error> {
        self.to_undecodable()
            .ok_or_else(|| Error::decode("a recorded undecodable object", "its key is not a key"))
    }
}

/// An [`Error`] as recorded: what the reflector acts on, nothing that points into a
/// process (a connection failure keeps its message only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum RecordedError {
    /// [`Error::Api`].
    Api {
        /// The status code.
        code: u16,
        /// The reason.
        reason: String,
        /// The message.
        message: String,
        /// `details.causes`: `[reason, message]` pairs.
        #[serde(default)]
        causes: Vec<(String, String)>,
    },
    /// [`Error::Unreachable`].
    Unreachable {
        /// What the client reported.
        detail: String,
    },
    /// [`Error::Decode`].
    Decode {
        /// What was being decoded.
        what: String,
        /// Why.
        detail: String,
    },
    /// [`Error::Undecodable`].
    Undecodable {
        /// The object.
        object: RecordedUndecodable,
        /// Whether the event was a deletion.
        deleted: bool,
    },
    /// [`Error::UnexpectedKind`].
    #[serde(rename_all = "camelCase")]
    UnexpectedKind {
        /// What was expected.
        expected: String,
        /// What came.
        actual: String,
    },
    /// Any other error (replayed as [`Error::Client`]).
    Client {
        /// Its message chain.
        detail: String,
    },
}

impl RecordedError {
    /// `410 Gone` with reason `Expired`, as the API server answers a resourceVersion etcd
    /// compacted away.
    pub fn expired() -> Self {
        Self::Api {
            code: 410,
            reason: "Expired".into(),
            message: "too old resource version (kinformer-replay)".into(),
            causes: Vec::new(),
        }
    }

    /// The error as recorded.
    pub fn of(error: &Error) -> Self {
        match error {
            Error::Api(s) => Self::Api {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
                causes: s
                    .causes
                    .iter()
                    .cloned()
                    .zip(s.cause_messages.iter().cloned())
                    .collect(),
            },
            Error::Unreachable { source } => Self::Unreachable {
                detail: source.to_string(),
            },
            Error::Decode { what, detail } => Self::Decode {
                what: what.clone(),
                detail: detail.clone(),
            },
            Error::Undecodable { object, deleted } => Self::Undecodable {
                object: object.into(),
                deleted: *deleted,
            },
            Error::UnexpectedKind { expected, actual } => Self::UnexpectedKind {
                expected: expected.clone(),
                actual: actual.clone(),
            },
            other => Self::Client {
                detail: kinformer_core::ErrorChain(other).to_string(),
            },
        }
    }

    /// The error to replay.
    pub fn to_error(&self) -> Error {
        match self {
            Self::Api {
                code,
                reason,
                message,
                causes,
            } => {
                let mut s = ApiStatus::new(*code, reason.clone(), message.clone());
                for (r, m) in causes {
                    s = s.with_cause(r.clone(), m.clone());
                }
                Error::Api(s)
            }
            Self::Unreachable { detail } => Error::unreachable(detail.clone()),
            Self::Decode { what, detail } => Error::decode(what.clone(), detail.clone()),
            Self::Undecodable { object, deleted } => match object.replayed() {
                Ok(object) => Error::Undecodable {
                    object,
                    deleted: *deleted,
                },
                Err(e) => e,
            },
            Self::UnexpectedKind { expected, actual } => Error::UnexpectedKind {
                expected: expected.clone(),
                actual: actual.clone(),
            },
            Self::Client { detail } => Error::Client {
                source: detail.clone().into(),
            },
        }
    }
}

// ---- lines ---------------------------------------------------------------------------

/// One line after the header, as it is in the file: exactly one of the optional fields is
/// set. (Not a flattened enum: serde cannot keep an object's raw JSON through one.)
#[derive(Default, Serialize, Deserialize)]
pub(crate) struct RawLine {
    t: u64,
    call: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    list: Option<ListRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    page: Option<PageLine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed: Option<RecordedError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    watch: Option<WatchRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<RawEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<End>,
}

/// A watch event as it is in the file.
#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rv: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    object: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    initial_events_end: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<RecordedError>,
}

/// One line after the header.
pub(crate) struct Line {
    pub(crate) t: u64,
    pub(crate) call: u64,
    pub(crate) record: Record,
}

pub(crate) enum Record {
    List(ListRequest),
    Page(PageLine),
    Failed(RecordedError),
    Watch(WatchRequest),
    Event(Event),
    End(End),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageLine {
    pub(crate) resource_version: String,
    #[serde(rename = "continue")]
    pub(crate) continue_token: Option<String>,
    pub(crate) items: Vec<Item>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) undecodable: Vec<RecordedUndecodable>,
}

impl Serialize for Line {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut raw = RawLine {
            t: self.t,
            call: self.call,
            ..RawLine::default()
        };
        match &self.record {
            Record::List(r) => raw.list = Some(r.clone()),
            Record::Page(p) => {
                raw.page = Some(PageLine {
                    resource_version: p.resource_version.clone(),
                    continue_token: p.continue_token.clone(),
                    items: p.items.clone(),
                    undecodable: p.undecodable.clone(),
                });
            }
            Record::Failed(e) => raw.failed = Some(e.clone()),
            Record::Watch(w) => raw.watch = Some(w.clone()),
            Record::End(e) => raw.end = Some(*e),
            Record::Event(e) => {
                let item = |kind: &str, i: &Item| RawEvent {
                    kind: kind.into(),
                    key: Some(i.key.clone()),
                    rv: Some(i.rv.clone()),
                    object: Some(i.object.clone()),
                    ..RawEvent::default()
                };
                raw.event = Some(match e {
                    Event::Added(i) => item("ADDED", i),
                    Event::Modified(i) => item("MODIFIED", i),
                    Event::Deleted(i) => item("DELETED", i),
                    Event::Bookmark {
                        rv,
                        initial_events_end,
                    } => RawEvent {
                        kind: "BOOKMARK".into(),
                        rv: Some(rv.clone()),
                        initial_events_end: *initial_events_end,
                        ..RawEvent::default()
                    },
                    Event::Error(error) => RawEvent {
                        kind: "ERROR".into(),
                        error: Some(error.clone()),
                        ..RawEvent::default()
                    },
                });
            }
        }
        raw.serialize(s)
    }
}

impl RawLine {
    fn into_line(self) -> Result<Line, String> {
        let record = match self {
            Self { list: Some(r), .. } => Record::List(r),
            Self { page: Some(p), .. } => Record::Page(p),
            Self {
                failed: Some(e), ..
            } => Record::Failed(e),
            Self { watch: Some(w), .. } => Record::Watch(w),
            Self { end: Some(e), .. } => Record::End(e),
            Self { event: Some(e), .. } => Record::Event(e.into_event()?),
            _ => return Err("a line with no record".into()),
        };
        Ok(Line {
            t: self.t,
            call: self.call,
            record,
        })
    }
}

impl RawEvent {
    fn into_event(self) -> Result<Event, String> {
        let item = |e: Self| -> Result<Item, String> {
            match (e.key, e.rv, e.object) {
                (Some(key), Some(rv), Some(object)) => Ok(Item { key, rv, object }),
                _ => Err(format!("a {} event without key, rv and object", e.kind)),
            }
        };
        Ok(match self.kind.as_str() {
            "ADDED" => Event::Added(item(self)?),
            "MODIFIED" => Event::Modified(item(self)?),
            "DELETED" => Event::Deleted(item(self)?),
            "BOOKMARK" => Event::Bookmark {
                rv: self.rv.ok_or("a bookmark without rv")?,
                initial_events_end: self.initial_events_end,
            },
            "ERROR" => Event::Error(self.error.ok_or("an ERROR event without error")?),
            other => return Err(format!("an event of type {other:?}")),
        })
    }
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Recording {
    /// An empty recording of `resource`.
    pub fn new(header: Header) -> Self {
        Self {
            header,
            calls: Vec::new(),
        }
    }

    /// Reads a recording in the file format (see the module docs). A last line cut short
    /// (the recorder was killed while writing it) is left out; any other bad line is an
    /// error.
    ///
    /// # Errors
    /// [`FormatError`]: not a recording, another version, a bad line, I/O.
    pub fn parse(reader: impl BufRead) -> Result<Self, FormatError> {
        // The header is read first; the calls are pushed onto a recording that takes it after.
        let mut recording = Self::new(Header::new(String::new(), false));
        let mut open: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
        recording.header = read_lines(reader, "json", |parsed: RawLine| {
            recording.push_line(parsed.into_line()?, &mut open)
        })
        .map_err(|e| match e {
            ReadError::Format(e) => e,
            ReadError::Encoding(found) => FormatError::Encoding { found },
        })?;
        Ok(recording)
    }

    /// Reads the recording in the file at `path`.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self, FormatError> {
        Self::parse(lines::open(path)?)
    }

    /// Writes the recording in the file format, call by call.
    ///
    /// # Errors
    /// I/O.
    pub fn write(&self, out: impl Write) -> Result<(), FormatError> {
        let calls = self.calls.iter().enumerate();
        lines::write_all(
            out,
            &self.header,
            calls.flat_map(|(n, c)| c.lines(n as u64)),
        )
    }

    /// Writes the recording to the file at `path` (replacing it).
    ///
    /// # Errors
    /// I/O.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<(), FormatError> {
        self.write(lines::create(path)?)
    }

    fn push_line(
        &mut self,
        line: Line,
        open: &mut std::collections::HashMap<u64, usize>,
    ) -> Result<(), String> {
        let at = Duration::from_micros(line.t);
        let (request, record) = match line.record {
            Record::List(r) => (Some(Request::List(r)), None),
            Record::Watch(r) => (Some(Request::Watch(r)), None),
            other => (None, Some(other)),
        };
        if let Some(request) = request {
            if open.contains_key(&line.call) {
                return Err(format!("call {} made twice", line.call));
            }
            open.insert(line.call, self.calls.len());
            self.calls.push(Call {
                at,
                request,
                answer: Answer::Pending,
            });
            return Ok(());
        }
        let index = *open
            .get(&line.call)
            .ok_or_else(|| format!("an answer to call {} before the call", line.call))?;
        let call = &mut self.calls[index];
        let Some(record) = record else {
            return Err("a call without a request".into());
        };
        match (record, &mut call.answer) {
            (Record::Page(p), Answer::Pending) if matches!(call.request, Request::List(_)) => {
                call.answer = Answer::Page {
                    at,
                    page: Page {
                        resource_version: p.resource_version,
                        continue_token: p.continue_token,
                        items: p.items,
                        undecodable: p.undecodable,
                    },
                };
            }
            (Record::Failed(error), Answer::Pending) => call.answer = Answer::Failed { at, error },
            (Record::Event(e), answer) if matches!(call.request, Request::Watch(_)) => {
                if let Answer::Pending = answer {
                    *answer = Answer::Stream {
                        frames: Vec::new(),
                        end: None,
                    };
                }
                match answer {
                    Answer::Stream { frames, end: None } => frames.push(Frame::new(at, e)),
                    _ => return Err(format!("an event of call {} after its end", line.call)),
                }
            }
            (Record::End(how), answer) if matches!(call.request, Request::Watch(_)) => match answer
            {
                Answer::Pending => {
                    *answer = Answer::Stream {
                        frames: Vec::new(),
                        end: Some((at, how)),
                    };
                }
                Answer::Stream {
                    end: end @ None, ..
                } => *end = Some((at, how)),
                _ => return Err(format!("call {} ended twice", line.call)),
            },
            _ => return Err(format!("a record that does not fit call {}", line.call)),
        }
        Ok(())
    }
}

impl Call {
    /// The call's lines in the file format, numbered `n`.
    pub(crate) fn lines(&self, n: u64) -> Vec<Line> {
        let line = |at: Duration, record| Line {
            t: micros(at),
            call: n,
            record,
        };
        let mut out = vec![line(
            self.at,
            match &self.request {
                Request::List(r) => Record::List(r.clone()),
                Request::Watch(r) => Record::Watch(r.clone()),
            },
        )];
        match &self.answer {
            Answer::Page { at, page } => out.push(line(
                *at,
                Record::Page(PageLine {
                    resource_version: page.resource_version.clone(),
                    continue_token: page.continue_token.clone(),
                    items: page.items.clone(),
                    undecodable: page.undecodable.clone(),
                }),
            )),
            Answer::Failed { at, error } => out.push(line(*at, Record::Failed(error.clone()))),
            Answer::Stream { frames, end } => {
                for f in frames {
                    out.push(line(f.at, Record::Event(f.event.clone())));
                }
                if let Some((at, how)) = end {
                    out.push(line(*at, Record::End(*how)));
                }
            }
            Answer::Pending => {}
        }
        out
    }
}

pub(crate) fn write_json_line(
    out: &mut impl Write,
    value: &impl Serialize,
) -> Result<(), FormatError> {
    serde_json::to_writer(&mut *out, value).map_err(|e| FormatError::Encode(e.to_string()))?;
    out.write_all(b"\n")?;
    Ok(())
}
