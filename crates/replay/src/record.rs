//! [`Recorder`]: a [`ListerWatcher`] decorator that writes every call, page, frame, error
//! and connection end to a recording, and passes everything on unchanged.

use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use kinformer_core::{BoxFuture, Clock, MetaObject, TokioClock, meta_namespace_key};
use kinformer_reflector::{
    Error, ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream,
};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::format::{
    Event, FormatError, Header, Item, Line, ListRequest, PageLine, Record, RecordedError,
    RecordedUndecodable, Recording, WatchRequest,
};
use crate::lines::{self, LineWriter};

/// What a [`Recorder`] writes besides the calls.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecordOptions {
    /// The header's `resource`: what is recorded (free text).
    pub resource: String,
    /// Replace the values of Secrets (`data`, `stringData`, and the annotation
    /// `kubectl.kubernetes.io/last-applied-configuration`, which holds them too) with
    /// `redacted` (`cmVkYWN0ZWQ=` in `data`, base64 of it, so the object still decodes).
    /// Default `true`: a recording is a file that gets shared. Keys stay, so a controller
    /// that reads which keys a Secret has replays the same.
    pub redact_secrets: bool,
}

impl RecordOptions {
    /// Options for a recording of `resource`, Secrets redacted.
    pub fn new(resource: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            redact_secrets: true,
        }
    }

    /// Keeps Secrets' values (only for recordings that never leave the machine).
    #[must_use]
    pub fn keep_secrets(mut self) -> Self {
        self.redact_secrets = false;
        self
    }
}

/// Where a [`Recorder`] writes, shared by its clones and its [`Tape`]s.
struct Out {
    lines: LineWriter,
    redact: bool,
}

impl Out {
    fn write(&self, call: u64, record: Record) {
        let line = Line {
            t: self.lines.now(),
            call,
            record,
        };
        self.lines.write(&line);
    }

    fn item<K: Serialize + MetaObject>(&self, obj: &K) -> Result<Item, FormatError> {
        let key = meta_namespace_key(obj)
            .map(|k| k.to_string())
            .map_err(|e| FormatError::Encode(e.to_string()))?;
        let rv = obj.object_resource_version().unwrap_or_default().to_owned();
        let raw =
            serde_json::value::to_raw_value(obj).map_err(|e| FormatError::Encode(e.to_string()))?;
        let raw = if self.redact { redact(raw)? } else { raw };
        Ok(Item::new(key, rv, raw))
    }

    fn fail(&self, e: &FormatError) {
        self.lines.fail(e, "an object was not recorded");
    }
}

const REDACTED: &str = "redacted";
const REDACTED_BASE64: &str = "cmVkYWN0ZWQ=";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A Secret's values replaced (see [`RecordOptions::redact_secrets`]); any other object
/// as it is.
fn redact(raw: Box<RawValue>) -> Result<Box<RawValue>, FormatError> {
    // Cheap test first: only a Secret's JSON names its kind so.
    if !raw.get().contains("\"Secret\"") {
        return Ok(raw);
    }
    let mut value: serde_json::Value =
        serde_json::from_str(raw.get()).map_err(|e| FormatError::Encode(e.to_string()))?;
    if value.get("kind").and_then(|k| k.as_str()) != Some("Secret") {
        return Ok(raw);
    }
    for (field, with) in [("data", REDACTED_BASE64), ("stringData", REDACTED)] {
        if let Some(map) = value.get_mut(field).and_then(|d| d.as_object_mut()) {
            for v in map.values_mut() {
                *v = serde_json::Value::String(with.into());
            }
        }
    }
    if let Some(a) = value
        .pointer_mut("/metadata/annotations")
        .and_then(|a| a.as_object_mut())
        && let Some(v) = a.get_mut(LAST_APPLIED)
    {
        *v = serde_json::Value::String(REDACTED.into());
    }
    serde_json::value::to_raw_value(&value).map_err(|e| FormatError::Encode(e.to_string()))
}

/// A [`ListerWatcher`] that records what another one returns: every list call and page,
/// every watch call, frame and error, and how each watch ended, with when each happened
/// (on its [`Clock`]: Tokio's by default, so a recording made under a paused clock has
/// virtual times). Everything is passed on unchanged; a recording that cannot be written
/// stops recording (the [`Tape`]'s [`error`](Tape::error) says why) and never fails a call.
///
/// Record below a [`ShardedListerWatcher`](kinformer_reflector::ShardedListerWatcher):
/// its shard changes are the process's, not the server's, and are not recorded.
///
/// ```
/// use kinformer_replay::{RecordOptions, Recorder};
/// use kinformer_reflector::fake::FakeListerWatcher;
/// use kinformer_reflector::{ListOptions, ListerWatcher};
///
/// # #[derive(serde::Serialize)] struct Obj;
/// # impl kinformer_core::MetaObject for Obj {
/// #     fn object_name(&self) -> Option<&str> { Some("a") }
/// #     fn object_namespace(&self) -> Option<&str> { Some("ns") }
/// #     fn object_resource_version(&self) -> Option<&str> { Some("5") }
/// # }
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// # rt.block_on(async {
/// let server = FakeListerWatcher::<Obj>::new(); // in a program: a KubeListerWatcher
/// let recorder = Recorder::in_memory(server, RecordOptions::new("objs"));
/// let tape = recorder.tape();
/// recorder.list(&ListOptions::new("0", Some(500))).await.unwrap();
/// let recording = tape.recording().unwrap();
/// assert_eq!(recording.calls.len(), 1);
/// # });
/// ```
pub struct Recorder<L> {
    inner: L,
    out: Arc<Out>,
}

impl<L> std::fmt::Debug for Recorder<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("calls", &self.out.lines.calls())
            .field("redact", &self.out.redact)
            .finish_non_exhaustive()
    }
}

/// A handle on a [`Recorder`]'s output, to read it back once the recorder has been given
/// to an informer.
#[derive(Clone)]
pub struct Tape {
    out: Arc<Out>,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape")
            .field("calls", &self.out.lines.calls())
            .finish_non_exhaustive()
    }
}

impl Tape {
    /// The first thing that could not be recorded (a write that failed, an object that
    /// did not encode), if any.
    pub fn error(&self) -> Option<String> {
        self.out.lines.error()
    }

    /// The recording so far of an [`in_memory`](Recorder::in_memory) recorder (a watch
    /// still open is a stream without an end).
    ///
    /// # Errors
    /// [`FormatError::Io`] for a recorder that writes elsewhere (read its file with
    /// [`Recording::load`]).
    pub fn recording(&self) -> Result<Recording, FormatError> {
        let elsewhere = "this recorder writes to a file: Recording::load it";
        let bytes = self.out.lines.written(elsewhere)?;
        Recording::parse(bytes.as_slice())
    }
}

impl<L> Recorder<L> {
    /// Records `inner` into `writer` (a file, a socket), a line at a time.
    ///
    /// # Errors
    /// When the header cannot be written.
    pub fn to_writer(
        inner: L,
        writer: impl Write + Send + 'static,
        options: RecordOptions,
    ) -> Result<Self, FormatError> {
        Self::start(inner, Box::new(writer), None, options, Arc::new(TokioClock))
    }

    /// Records `inner` into the file at `path` (created, or replaced).
    ///
    /// # Errors
    /// When the file cannot be created or its header written.
    pub fn to_file(
        inner: L,
        path: impl AsRef<std::path::Path>,
        options: RecordOptions,
    ) -> Result<Self, FormatError> {
        Self::to_writer(inner, lines::create(path)?, options)
    }

    /// Records `inner` in memory: [`Tape::recording`] reads it back.
    pub fn in_memory(inner: L, options: RecordOptions) -> Self {
        let (writer, memory) = LineWriter::memory();
        match Self::start(inner, writer, Some(memory), options, Arc::new(TokioClock)) {
            Ok(r) => r,
            // Writing to memory does not fail; the header always encodes.
            Err(e) => unreachable!("an in-memory recording failed: {e}"),
        }
    }

    fn start(
        inner: L,
        writer: Box<dyn Write + Send>,
        memory: Option<Arc<Mutex<Vec<u8>>>>,
        options: RecordOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, FormatError> {
        let header = Header::new(options.resource, options.redact_secrets);
        Ok(Self {
            inner,
            out: Arc::new(Out {
                lines: LineWriter::start(writer, memory, &header, clock, "recording")?,
                redact: options.redact_secrets,
            }),
        })
    }

    /// Times the recording on `clock` instead of Tokio's time (from now on).
    #[must_use]
    pub fn clock(self, clock: Arc<dyn Clock>) -> Self {
        self.out.lines.set_clock(clock);
        self
    }

    /// A handle to read what was recorded.
    pub fn tape(&self) -> Tape {
        Tape {
            out: Arc::clone(&self.out),
        }
    }

    /// The lister-watcher recorded.
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<K, L> ListerWatcher<K> for Recorder<L>
where
    K: Serialize + MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        Box::pin(async move {
            let call = self.out.lines.call();
            self.out.write(
                call,
                Record::List(ListRequest {
                    resource_version: options.resource_version.clone(),
                    limit: options.limit,
                    continue_token: options.continue_token.clone(),
                    exact: options.exact,
                }),
            );
            let answer = self.inner.list(options).await;
            match &answer {
                Ok(page) => {
                    let mut items = Vec::with_capacity(page.items.len());
                    for obj in &page.items {
                        match self.out.item(obj.as_ref()) {
                            Ok(item) => items.push(item),
                            Err(e) => self.out.fail(&e),
                        }
                    }
                    self.out.write(
                        call,
                        Record::Page(PageLine {
                            resource_version: page.resource_version.clone(),
                            continue_token: page.continue_token.clone(),
                            items,
                            undecodable: page
                                .undecodable
                                .iter()
                                .map(RecordedUndecodable::from)
                                .collect(),
                        }),
                    );
                }
                Err(e) => self.out.write(call, Record::Failed(RecordedError::of(e))),
            }
            answer
        })
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        Box::pin(async move {
            let call = self.out.lines.call();
            self.out.write(
                call,
                Record::Watch(WatchRequest {
                    resource_version: options.resource_version.clone(),
                    timeout_seconds: options.timeout.as_secs(),
                    bookmarks: options.allow_bookmarks,
                    send_initial_events: options.send_initial_events,
                }),
            );
            match self.inner.watch(options).await {
                Ok(stream) => Ok(Box::pin(Recorded {
                    inner: stream,
                    out: Arc::clone(&self.out),
                    call,
                    ended: false,
                }) as WatchStream<K>),
                Err(e) => {
                    self.out.write(call, Record::Failed(RecordedError::of(&e)));
                    Err(e)
                }
            }
        })
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}

/// A watch stream passed on and recorded.
struct Recorded<K> {
    inner: WatchStream<K>,
    out: Arc<Out>,
    call: u64,
    ended: bool,
}

impl<K: Serialize + MetaObject> Stream for Recorded<K> {
    type Item = Result<WatchEvent<K>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = this.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(item)) => {
                let line = match item {
                    Ok(WatchEvent::Added(o)) => this.out.item(o).map(Event::Added),
                    Ok(WatchEvent::Modified(o)) => this.out.item(o).map(Event::Modified),
                    Ok(WatchEvent::Deleted(o)) => this.out.item(o).map(Event::Deleted),
                    Ok(WatchEvent::Bookmark(b)) => Ok(Event::Bookmark {
                        rv: b.resource_version.clone(),
                        initial_events_end: b.initial_events_end,
                    }),
                    // The process's own, not the server's.
                    Ok(WatchEvent::Shard(_)) => return polled,
                    Err(e) => Ok(Event::Error(RecordedError::of(e))),
                };
                match line {
                    Ok(line) => this.out.write(this.call, Record::Event(line)),
                    Err(e) => this.out.fail(&e),
                }
            }
            Poll::Ready(None) if !this.ended => {
                this.ended = true;
                this.out
                    .write(this.call, Record::End(crate::format::End::Closed));
            }
            _ => {}
        }
        polled
    }
}

impl<K> Drop for Recorded<K> {
    fn drop(&mut self) {
        if !self.ended {
            self.out
                .write(self.call, Record::End(crate::format::End::Dropped));
        }
    }
}
