//! [`Replay`]: a [`ListerWatcher`] that answers from a [`Recording`].

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kinformer_core::{BoxFuture, Clock, ObjectKey, TokioClock};
use kinformer_reflector::{
    Bookmark, Error, ListOptions, ListPage, ListerWatcher, Undecodable, WatchEvent, WatchOptions,
    WatchStream,
};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::format::{
    Answer, Call, End, Event, Frame, Item, ListRequest, Page, Recording, Request, WatchRequest,
};
use crate::model::Follow;

/// When a [`Replay`] delivers what it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timing {
    /// As recorded: each page and frame as long after its call as it came then (on the
    /// replay's clock: under Tokio's paused clock, a recording of minutes replays in
    /// milliseconds, in the same order of events).
    #[default]
    Recorded,
    /// Everything at once: pages as they are asked for, frames back to back.
    Immediate,
}

type Requests = Vec<Request>;

struct State {
    script: VecDeque<Call>,
    follow: Follow,
    requests: Requests,
    divergences: Vec<String>,
    /// Streams handed out that have frames still to deliver.
    open: usize,
}

struct Shared<K> {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    timing: Timing,
    watch_list: bool,
    /// The recording's [`span`](Recording::span).
    span: Duration,
    changed: Notify,
    _k: PhantomData<fn() -> K>,
}

/// A [`ListerWatcher`] that answers as a recorded server did: the n-th call gets the
/// recording's n-th answer (a page, a failure, or a stream with its frames, errors and
/// end), delivered as long after the call as it was recorded (see [`Timing`]), on the
/// replay's [`Clock`] (Tokio's time by default: run it under a paused clock and a recording
/// of minutes replays in milliseconds, deterministically).
///
/// Relists and re-watches are answered from the recording in the order they were made
/// there. A call of another kind than the recording's next (a list where a watch was
/// recorded) is a *divergence*: it is answered from what the server held at that point
/// (every object served so far, at the newest version: a list of them, or a watch that
/// stays quiet, or `410 Gone` when asked from an older version), noted in
/// [`divergences`](Self::divergences), and the script waits for a call of its kind. Calls
/// after the recording's end are answered the same way, without a note: the server went
/// quiet.
///
/// Cloning shares the script.
///
/// ```
/// use std::time::Duration;
/// use kinformer_replay::{Recording, Replay};
/// use kinformer_reflector::{ListOptions, ListerWatcher, WatchEvent, WatchOptions};
/// use futures::StreamExt;
///
/// # #[derive(serde::Deserialize)] struct Obj {}
/// let text = r#"{"format":"kinformer-recording","version":1,"encoding":"json","resource":"objs","redacted":true}
/// {"t":0,"call":0,"list":{"resourceVersion":"0","limit":500,"continue":null}}
/// {"t":1000,"call":0,"page":{"resourceVersion":"10","continue":null,"items":[{"key":"ns/a","rv":"9","object":{}}]}}
/// {"t":2000,"call":1,"watch":{"resourceVersion":"10","timeoutSeconds":300,"bookmarks":true,"sendInitialEvents":false}}
/// {"t":9000,"call":1,"event":{"type":"DELETED","key":"ns/a","rv":"11","object":{}}}
/// {"t":9000,"call":1,"end":"closed"}
/// "#;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
/// # rt.block_on(async {
/// let replay = Replay::<Obj>::new(Recording::parse(text.as_bytes()).unwrap());
/// let page = replay.list(&ListOptions::new("0", Some(500))).await.unwrap();
/// assert_eq!((page.items.len(), page.resource_version.as_str()), (1, "10"));
/// let mut watch = replay.watch(&WatchOptions::new("10", Duration::from_secs(300))).await.unwrap();
/// assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Deleted(_)))));
/// assert!(watch.next().await.is_none()); // closed, as recorded
/// replay.finished().await;
/// assert!(replay.divergences().is_empty());
/// # });
/// ```
pub struct Replay<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Replay<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> std::fmt::Debug for Replay<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("Replay")
            .field("left", &state.script.len())
            .field("served", &state.requests.len())
            .field("divergences", &state.divergences.len())
            .finish_non_exhaustive()
    }
}

impl<K> Replay<K> {
    /// A replay of `recording` on Tokio's time, with recorded timing. It serves streaming
    /// lists when the recording has one.
    pub fn new(recording: Recording) -> Self {
        Self::with(recording, Arc::new(TokioClock), Timing::Recorded)
    }

    /// A replay on `clock` with `timing`.
    pub fn with(recording: Recording, clock: Arc<dyn Clock>, timing: Timing) -> Self {
        let watch_list = recording
            .calls
            .iter()
            .any(|c| matches!(&c.request, Request::Watch(w) if w.send_initial_events));
        let span = recording.span();
        Self {
            shared: Arc::new(Shared {
                span,
                state: Mutex::new(State {
                    script: recording.calls.into(),
                    follow: Follow::default(),
                    requests: Vec::new(),
                    divergences: Vec::new(),
                    open: 0,
                }),
                clock,
                timing,
                watch_list,
                changed: Notify::new(),
                _k: PhantomData,
            }),
        }
    }

    /// The replay with `state` as what the server held before the recording began (a
    /// recording of a restart from a snapshot begins with the server's changes since it):
    /// what calls off script are answered from, with what was served since.
    #[must_use]
    pub fn knowing(self, state: crate::State) -> Self {
        self.shared.state.lock().follow.state = state;
        self
    }

    /// Every call made so far, in order.
    pub fn requests(&self) -> Requests {
        self.shared.state.lock().requests.clone()
    }

    /// The list calls made so far.
    pub fn list_requests(&self) -> Vec<ListRequest> {
        self.requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::List(l) => Some(l),
                Request::Watch(_) => None,
            })
            .collect()
    }

    /// The watch calls made so far.
    pub fn watch_requests(&self) -> Vec<WatchRequest> {
        self.requests()
            .into_iter()
            .filter_map(|r| match r {
                Request::Watch(w) => Some(w),
                Request::List(_) => None,
            })
            .collect()
    }

    /// Where the client did not call as the recording did (see the type docs), and
    /// streams it dropped with frames undelivered.
    pub fn divergences(&self) -> Vec<String> {
        self.shared.state.lock().divergences.clone()
    }

    /// How long the recording lasts ([`Recording::span`]).
    pub fn span(&self) -> Duration {
        self.shared.span
    }

    /// How many recorded calls are still to be made.
    pub fn left(&self) -> usize {
        self.shared.state.lock().script.len()
    }

    /// Resolves once every recorded call has been made and every stream handed out has
    /// delivered its last frame (or been dropped).
    pub async fn finished(&self) {
        until(&self.shared.changed, || {
            let state = self.shared.state.lock();
            state.script.is_empty() && state.open == 0
        })
        .await;
    }
}

/// Resolves once `done` holds, tested now and after each notification of `changed` (its
/// waiters are notified on every change `done` reads).
pub(crate) async fn until(changed: &Notify, done: impl Fn() -> bool) {
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if done() {
            return;
        }
        notified.await;
    }
}

/// A replay's state, as far as the streams it handed out go.
pub(crate) trait OpenStreams {
    /// How many streams handed out are still open, and the divergences noted.
    fn open_and_divergences(&mut self) -> (&mut usize, &mut Vec<String>);
}

impl OpenStreams for State {
    fn open_and_divergences(&mut self) -> (&mut usize, &mut Vec<String>) {
        (&mut self.open, &mut self.divergences)
    }
}

/// Closes a served stream once (`finished` says whether it was): one fewer open in
/// `state`, `undelivered` noted as a divergence (what it left undelivered, if anything),
/// then `changed`'s waiters told.
pub(crate) fn close_once<S: OpenStreams>(
    finished: &mut bool,
    state: &Mutex<S>,
    changed: &Notify,
    undelivered: Option<String>,
) {
    if std::mem::replace(finished, true) {
        return;
    }
    let mut state = state.lock();
    let (open, divergences) = state.open_and_divergences();
    *open -= 1;
    divergences.extend(undelivered);
    drop(state);
    changed.notify_waiters();
}

/// An object's decoded form; an object whose metadata decodes but whose whole does not is
/// [`Undecodable`] (as `KubeListerWatcher` reports one), anything else a decoding error.
fn decode<K: DeserializeOwned>(item: &Item) -> Result<K, Error> {
    serde_json::from_str(item.object.get()).map_err(|e| {
        let detail = format!("{:?} at column {}", e.classify(), e.column());
        match undecodable(item, &detail) {
            Some(object) => Error::Undecodable {
                object,
                deleted: false,
            },
            None => Error::decode(format!("recorded object {}", item.key), detail),
        }
    })
}

/// The key and uid of an object that does not decode, from its metadata alone.
fn undecodable(item: &Item, detail: &str) -> Option<Undecodable> {
    #[derive(serde::Deserialize)]
    struct Meta {
        name: String,
        namespace: Option<String>,
        uid: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Partial {
        metadata: Meta,
    }
    let partial: Partial = serde_json::from_str(item.object.get()).ok()?;
    let m = partial.metadata;
    let key = ObjectKey::new(m.namespace.as_deref(), &m.name).ok()?;
    let u = Undecodable::new(key, detail);
    Some(match m.uid {
        Some(uid) => u.with_uid(uid),
        None => u,
    })
}

fn decode_page<K: DeserializeOwned>(page: &Page) -> Result<ListPage<K>, Error> {
    let mut items = Vec::with_capacity(page.items.len());
    let mut left_out = Vec::new();
    for i in &page.items {
        match decode::<K>(i) {
            Ok(obj) => items.push(Arc::new(obj)),
            Err(Error::Undecodable { object, .. }) => left_out.push(object),
            Err(e) => return Err(e),
        }
    }
    let mut out = ListPage::shared(items, page.resource_version.clone());
    if let Some(token) = &page.continue_token {
        out = out.with_continue(token.clone());
    }
    for u in &page.undecodable {
        out = out.with_undecodable(u.replayed()?);
    }
    for u in left_out {
        out = out.with_undecodable(u);
    }
    Ok(out)
}

fn event<K: DeserializeOwned>(event: &Event) -> Result<WatchEvent<K>, Error> {
    let deleted = |e| match e {
        Error::Undecodable { object, .. } => Error::Undecodable {
            object,
            deleted: true,
        },
        e => e,
    };
    Ok(match event {
        Event::Added(i) => WatchEvent::Added(decode(i)?),
        Event::Modified(i) => WatchEvent::Modified(decode(i)?),
        Event::Deleted(i) => WatchEvent::Deleted(decode(i).map_err(deleted)?),
        Event::Bookmark {
            rv,
            initial_events_end,
        } => WatchEvent::Bookmark(Bookmark::new(rv.clone(), *initial_events_end)),
        Event::Error(e) => return Err(e.to_error()),
    })
}

/// Compares resourceVersions that are numbers (as every API server's are); others are
/// taken as not older.
fn older(rv: &str, than: &str) -> bool {
    match (rv.parse::<u64>(), than.parse::<u64>()) {
        (Ok(a), Ok(b)) => a < b,
        _ => false,
    }
}

/// A served stream's frames still to deliver; counted open until its last frame is
/// delivered or it is dropped.
struct Open<K> {
    shared: Arc<Shared<K>>,
    call: usize,
    frames: VecDeque<Frame>,
    finished: bool,
}

impl<K> Open<K> {
    fn finish(&mut self) {
        let (call, left) = (self.call, self.frames.len());
        let note = (left > 0).then(|| {
            format!("call {call}: the watch was dropped with {left} recorded frames undelivered")
        });
        let shared = &self.shared;
        close_once(&mut self.finished, &shared.state, &shared.changed, note);
    }
}

impl<K> Drop for Open<K> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl<K: DeserializeOwned + Send + Sync + 'static> Shared<K> {
    /// Waits until `offset` after `start` (nothing with [`Timing::Immediate`]).
    async fn until(&self, start: Instant, offset: Duration) {
        if self.timing == Timing::Recorded {
            self.clock.sleep_until(start + offset).await;
        }
    }

    /// The next scripted call if it is of the kind asked for.
    fn next(&self, request: Request) -> Result<(usize, Call), OffScript> {
        let mut state = self.state.lock();
        let n = state.requests.len();
        state.requests.push(request.clone());
        let fits =
            |c: &Call| std::mem::discriminant(&c.request) == std::mem::discriminant(&request);
        match state.script.front() {
            Some(c) if fits(c) => {}
            Some(c) => {
                let note = format!(
                    "call {n}: {request:?} where the recording has {:?}",
                    c.request
                );
                state.divergences.push(note);
                return Err(OffScript(state.follow.state.clone()));
            }
            None => return Err(OffScript(state.follow.state.clone())),
        }
        let Some(mut call) = state.script.pop_front() else {
            return Err(OffScript(state.follow.state.clone()));
        };
        if let (Request::Watch(asked), Request::Watch(recorded)) = (&request, &call.request)
            && asked.send_initial_events != recorded.send_initial_events
        {
            let note = format!(
                "call {n}: {asked:?} where the recording has {recorded:?}: served the recorded \
                 events {} the initial ones",
                if asked.send_initial_events {
                    "after"
                } else {
                    "without"
                }
            );
            state.divergences.push(note);
            if let Answer::Stream { frames, .. } = &mut call.answer {
                if asked.send_initial_events {
                    let initial = state.follow.state.initial_events(call.at);
                    frames.splice(0..0, initial);
                } else if let Some(end) = frames.iter().position(|f| {
                    matches!(
                        f.event,
                        Event::Bookmark {
                            initial_events_end: true,
                            ..
                        }
                    )
                }) {
                    frames.drain(..=end);
                }
            }
        }
        if let Answer::Stream { .. } = call.answer {
            state.open += 1;
            state.follow.start(&request);
        }
        drop(state);
        self.changed.notify_waiters();
        Ok((n, call))
    }
}

/// What the server held when a call went off script.
struct OffScript(crate::model::State);

impl<K: DeserializeOwned + Send + Sync + 'static> ListerWatcher<K> for Replay<K> {
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        Box::pin(async move {
            let shared = &self.shared;
            let start = shared.clock.now();
            let request = Request::List(ListRequest {
                resource_version: options.resource_version.clone(),
                limit: options.limit,
                continue_token: options.continue_token.clone(),
                exact: options.exact,
            });
            let (_, call) = match shared.next(request) {
                Ok(c) => c,
                Err(OffScript(held)) => return decode_page(&held.page()),
            };
            match &call.answer {
                Answer::Page { at, page } => {
                    shared.until(start, at.saturating_sub(call.at)).await;
                    shared
                        .state
                        .lock()
                        .follow
                        .answer(&call.request, &call.answer);
                    decode_page(page)
                }
                Answer::Failed { at, error } => {
                    shared.until(start, at.saturating_sub(call.at)).await;
                    Err(error.to_error())
                }
                Answer::Stream { .. } | Answer::Pending => std::future::pending().await,
            }
        })
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        Box::pin(async move {
            let shared = Arc::clone(&self.shared);
            let start = shared.clock.now();
            let request = Request::Watch(WatchRequest {
                resource_version: options.resource_version.clone(),
                timeout_seconds: options.timeout.as_secs(),
                bookmarks: options.allow_bookmarks,
                send_initial_events: options.send_initial_events,
            });
            let (n, call) = match shared.next(request) {
                Ok(c) => c,
                Err(OffScript(held)) => {
                    return if options.send_initial_events {
                        // A streaming list of what the server held, then quiet.
                        let initial = held.initial_events(Duration::ZERO);
                        let events: Vec<_> = initial.iter().map(|f| event::<K>(&f.event)).collect();
                        Ok(futures::stream::iter(events)
                            .chain(futures::stream::pending())
                            .boxed())
                    } else if older(&options.resource_version, &held.rv) {
                        Err(crate::format::RecordedError::expired().to_error())
                    } else {
                        Ok(futures::stream::pending().boxed())
                    };
                }
            };
            let (frames, end) = match call.answer {
                Answer::Failed { at, error } => {
                    shared.until(start, at.saturating_sub(call.at)).await;
                    return Err(error.to_error());
                }
                Answer::Stream { frames, end } => (frames, end),
                Answer::Page { .. } | Answer::Pending => return std::future::pending().await,
            };
            let called = call.at;
            let open = Open {
                shared,
                call: n,
                frames: frames.into(),
                finished: false,
            };
            let stream = futures::stream::unfold(Some(open), move |open| async move {
                let mut open = open?;
                let Some(frame) = open.frames.pop_front() else {
                    return match end {
                        Some((at, End::Closed)) => {
                            open.shared.until(start, at.saturating_sub(called)).await;
                            open.finish();
                            None
                        }
                        // Dropped by the recorded client, or still open when the recording
                        // stopped: open, quiet.
                        _ => {
                            open.finish();
                            std::future::pending().await
                        }
                    };
                };
                open.shared
                    .until(start, frame.at.saturating_sub(called))
                    .await;
                let _gone = open.shared.state.lock().follow.frame(&frame);
                if open.frames.is_empty() {
                    // Every frame delivered: what `finished` waits for, whether or not the
                    // client polls the stream again.
                    open.finish();
                }
                let item = event::<K>(&frame.event);
                Some((item, Some(open)))
            });
            Ok(stream.boxed())
        })
    }

    fn supports_watch_list(&self) -> bool {
        self.shared.watch_list
    }
}
