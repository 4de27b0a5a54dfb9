//! Replaying the wire: [`WireReplay`], a `kube::Client` that serves a recording.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body::{Body, Frame};
use kinformer_core::{Clock, TokioClock};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::{
    BodyEnd, BoxError, Chunk, Exchange, WireAnswer, WireRecording, WireReplayError, WireRequest,
};
use crate::Timing;
use crate::replay::{OpenStreams, close_once, until};

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

impl OpenStreams for State {
    fn open_and_divergences(&mut self) -> (&mut usize, &mut Vec<String>) {
        (&mut self.open, &mut self.divergences)
    }
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
        until(&self.shared.changed, || {
            let state = self.shared.state.lock();
            state.left == 0 && state.open == 0
        })
        .await;
    }
}

/// `query` without `timeoutSeconds`, its parameters sorted.
pub(super) fn comparable(query: Option<&str>) -> Vec<&str> {
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
        let (exchange, left) = (self.exchange, self.chunks.len());
        let note = (left > 0).then(|| {
            format!(
                "exchange {exchange}: the body was dropped with {left} recorded chunks undelivered"
            )
        });
        let shared = &self.shared;
        close_once(&mut self.finished, &shared.state, &shared.changed, note);
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
