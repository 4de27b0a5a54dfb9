//! The broadcaster: a bounded queue in front of one Tokio task that folds events into
//! series and hands their writes to the sink (client-go's `eventBroadcasterImpl`).

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::events::v1::Event;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::record::{Written, attempt_recording, record_event};
use crate::series::{Observed, SeriesCache};
use crate::{Clock, Config, Error, EventSink, KubeSink, Recorder, Reporter, Sleep};

/// What recorders and the handle send to the task.
pub(crate) enum Command {
    /// A published event and when it was published.
    Publish(Box<Event>, SystemTime),
    /// Answer once everything sent before is handled and every write started has ended.
    Flush(oneshot::Sender<()>),
    /// Take nothing new, handle what is queued, stop retries, end.
    Shutdown(oneshot::Sender<()>),
}

/// Receives events from [`Recorder`]s and writes them from a background task, folding
/// isomorphic ones into series: client-go's `EventBroadcaster` of `tools/events`.
///
/// One broadcaster serves any number of recorders (one per reporting controller, say) and
/// keeps one cache for all of them. Its task ends after [`Broadcaster::shutdown`], or once
/// this handle and every recorder are dropped (then writes already started still finish).
/// See the [crate docs](crate) for what is folded and when series are written.
#[derive(Debug)]
pub struct Broadcaster {
    tx: mpsc::Sender<Command>,
    clock: Arc<dyn Clock>,
}

impl Broadcaster {
    /// A broadcaster writing through `client` to `events.k8s.io/v1`.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn new(client: kube::Client, config: Config) -> Result<Self, Error> {
        Self::with_sink(KubeSink::new(client), config)
    }

    /// A broadcaster writing to `sink`.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn with_sink<S: EventSink>(sink: S, config: Config) -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let (tx, rx) = mpsc::channel(config.queue_capacity);
        let clock = Arc::clone(&config.clock);
        // The periods start now, not when the task is first polled.
        let finish = clock.sleep(config.finish_time);
        let refresh = clock.sleep(config.refresh_time);
        let task = Task {
            sink: Arc::new(sink),
            cache: SeriesCache::new(config.max_cached_events),
            writes: Arc::new(Semaphore::new(config.max_writes_in_flight)),
            cancel: CancellationToken::new(),
            config,
        };
        runtime.spawn(task.run(rx, finish, refresh));
        Ok(Self { tx, clock })
    }

    /// A recorder publishing as `reporter` through this broadcaster.
    pub fn recorder(&self, reporter: Reporter) -> Recorder {
        Recorder::new_with(self.tx.clone(), Arc::clone(&self.clock), reporter)
    }

    /// Waits until every event published before this call has been handled and every
    /// write it caused has ended (stored, given up, or out of tries). Series counted but
    /// not yet due are not written early.
    ///
    /// Mostly for tests and for a clean exit; with a sink that keeps failing, this waits
    /// through the retries.
    ///
    /// # Errors
    /// [`Error::ShutDown`] if the broadcaster has shut down.
    pub async fn flush(&self) -> Result<(), Error> {
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Command::Flush(ack))
            .await
            .map_err(|_| Error::ShutDown)?;
        done.await.map_err(|_| Error::ShutDown)
    }

    /// Stops taking events (recorders then answer [`Error::ShutDown`]), handles those
    /// already queued, cancels the sleeps before retries, and returns once the writes in
    /// progress have ended (with a sink that may hang, put a timeout around it). As with
    /// client-go's `Shutdown`, series counted but not yet due are not written.
    pub async fn shutdown(self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Command::Shutdown(ack)).await.is_ok() {
            let _ = done.await;
        }
    }
}

/// The broadcaster's task and what it owns.
struct Task<S> {
    sink: Arc<S>,
    cache: SeriesCache,
    /// One permit per write in flight.
    writes: Arc<Semaphore>,
    /// Ends retry sleeps at shutdown.
    cancel: CancellationToken,
    config: Config,
}

impl<S: EventSink> Task<S> {
    /// Runs until shut down or until every sender is gone. `finish` and `refresh` are the
    /// first periods of the two checks; client-go runs both with `wait.Until`, so each
    /// next period starts when the previous check has ended.
    async fn run(mut self, mut rx: mpsc::Receiver<Command>, mut finish: Sleep, mut refresh: Sleep) {
        let clock = Arc::clone(&self.config.clock);
        let mut shutdown_ack = None;
        loop {
            tokio::select! {
                // Timers first, so that a busy queue cannot starve them; finishing before
                // refreshing, so that a series due for both is written once.
                biased;
                () = &mut finish => {
                    self.finish_series().await;
                    finish = clock.sleep(self.config.finish_time);
                }
                () = &mut refresh => {
                    self.refresh_series().await;
                    refresh = clock.sleep(self.config.refresh_time);
                }
                command = rx.recv() => match command {
                    Some(Command::Publish(event, event_time)) => {
                        self.observe(*event, event_time).await;
                    }
                    Some(Command::Flush(ack)) => {
                        self.wait_for_writes().await;
                        let _ = ack.send(());
                    }
                    Some(Command::Shutdown(ack)) => {
                        tracing::debug!("event broadcaster shutting down");
                        rx.close();
                        shutdown_ack = Some(ack);
                    }
                    None => break,
                },
            }
        }
        // Dropped without a shutdown, the writes already started go on retrying alone, as
        // client-go's goroutines do; a shutdown ends their sleeps and waits for them.
        if let Some(ack) = shutdown_ack {
            self.cancel.cancel();
            self.wait_for_writes().await;
            let _ = ack.send(());
        }
    }

    /// Folds `event` into the cache and starts the write it asks for, if any.
    async fn observe(&mut self, event: Event, event_time: SystemTime) {
        let now = self.config.clock.wall_now();
        let to_write = match self.cache.observe(event, event_time, now) {
            Observed::Create(event) | Observed::StartSeries(event) => event,
            Observed::CreateUncached(event) => {
                tracing::debug!(
                    capacity = self.config.max_cached_events,
                    "the event cache is full; writing the event without folding its repeats"
                );
                event
            }
            Observed::Counted => return,
        };
        // Waiting here when every permit is taken is the back-pressure: the queue fills
        // and publish drops, while the callers never wait.
        let Ok(permit) = Arc::clone(&self.writes).acquire_owned().await else {
            return;
        };
        let sink = Arc::clone(&self.sink);
        let clock = Arc::clone(&self.config.clock);
        let cancel = self.cancel.clone();
        let (retry_sleep, max_tries) = (self.config.retry_sleep, self.config.max_tries);
        tokio::spawn(async move {
            attempt_recording(&*sink, to_write, &*clock, retry_sleep, max_tries, &cancel).await;
            drop(permit);
        });
    }

    /// client-go's `finishSeries`: one write (no retries) of each series quiet for the
    /// finish time, forgotten unless the write may pass later; single events that old are
    /// forgotten. Done inline, as client-go does it under its cache lock.
    async fn finish_series(&mut self) {
        let now = self.config.clock.wall_now();
        for (key, mut event) in self.cache.finished(now, self.config.finish_time) {
            match record_event(&*self.sink, &mut event).await {
                Written::Stored(_) | Written::GaveUp => self.cache.forget(&key),
                Written::Retry => {}
            }
        }
    }

    /// client-go's `refreshExistingEventSeries`: one write (no retries) of every series;
    /// the cached event becomes the server's answer.
    async fn refresh_series(&mut self) {
        for (key, mut event) in self.cache.series() {
            if let Written::Stored(stored) = record_event(&*self.sink, &mut event).await {
                self.cache.refreshed(&key, *stored);
            }
        }
    }

    /// Returns once no write is in flight.
    async fn wait_for_writes(&self) {
        let all = u32::try_from(self.config.max_writes_in_flight).unwrap_or(u32::MAX);
        let _ = self.writes.acquire_many(all).await;
    }
}
