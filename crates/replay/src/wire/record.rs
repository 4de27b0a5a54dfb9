//! Recording the wire: [`WireRecorder`], its layer, service, bodies and tape.

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use kinformer_core::{Clock, TokioClock};
use parking_lot::Mutex;

use super::{
    BodyEnd, BoxError, RawLine, Record, ResponseLine, WireFormatError, WireRecording, WireRequest,
    is_secrets_path, wire_header,
};
use crate::format::FormatError;
use crate::lines::{self, LineWriter};
use crate::record::RecordOptions;

/// Where a [`WireRecorder`] writes, shared by its layers, services, bodies and tapes.
struct Out {
    lines: LineWriter,
    redact: bool,
}

impl Out {
    fn write(&self, call: u64, record: Record) {
        self.lines
            .write(&RawLine::new(self.lines.now(), call, record));
    }
}

/// Records the HTTP exchanges of a `kube::Client` whose stack has its
/// [`layer`](Self::layer): each request's method, path and query, its response's status,
/// `Content-Type` and `Content-Encoding`, the body's chunks as they arrive and how it
/// ended, or the connection error, each with its time on the recorder's [`Clock`] (Tokio's
/// by default). Everything is passed on unchanged; a recording that cannot be written
/// stops recording (the [`WireTape`]'s [`error`](WireTape::error) says why) and never
/// fails a request. See the [module docs](super) for the file and for Secrets.
pub struct WireRecorder {
    out: Arc<Out>,
}

impl std::fmt::Debug for WireRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireRecorder")
            .field("exchanges", &self.out.lines.calls())
            .field("redact", &self.out.redact)
            .finish_non_exhaustive()
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
        Self::to_writer(lines::create(path)?, options)
    }

    /// Records in memory: [`WireTape::recording`] reads it back.
    pub fn in_memory(options: RecordOptions) -> Self {
        let (writer, memory) = LineWriter::memory();
        match Self::start(writer, Some(memory), options) {
            Ok(r) => r,
            // Writing to memory does not fail; the header always encodes.
            Err(e) => unreachable!("an in-memory wire recording failed: {e}"),
        }
    }

    fn start(
        writer: Box<dyn Write + Send>,
        memory: Option<Arc<Mutex<Vec<u8>>>>,
        options: RecordOptions,
    ) -> Result<Self, FormatError> {
        let header = wire_header(options.resource, options.redact_secrets);
        let clock: Arc<dyn Clock> = Arc::new(TokioClock);
        Ok(Self {
            out: Arc::new(Out {
                lines: LineWriter::start(writer, memory, &header, clock, "wire recording")?,
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
            .field("exchanges", &self.out.lines.calls())
            .finish_non_exhaustive()
    }
}

impl WireTape {
    /// The first thing that could not be recorded (a write that failed), if any.
    pub fn error(&self) -> Option<String> {
        self.out.lines.error()
    }

    /// The recording so far of an [`in_memory`](WireRecorder::in_memory) recorder (a body
    /// still open has no end).
    ///
    /// # Errors
    /// [`FormatError::Io`] for a recorder that writes elsewhere (read its file with
    /// [`WireRecording::load`]).
    pub fn recording(&self) -> Result<WireRecording, WireFormatError> {
        let elsewhere = "this wire recorder writes to a file: WireRecording::load it";
        let bytes = self.out.lines.written(elsewhere)?;
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
        let call = self.out.lines.call();
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
