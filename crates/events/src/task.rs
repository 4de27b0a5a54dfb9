//! The machinery both broadcasters share: a bounded queue in front of one Tokio task
//! that hands each published event to a [`Correlator`] (`tools/events`' series,
//! `tools/record`'s `EventCorrelator`) and writes what it asks for through the sink, with
//! client-go's retries; flush and shutdown; the correlator's periodic checks.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::sink::{Described, EventObject};
use crate::write::{RetryPolicy, Write, attempt_recording};
use crate::{Clock, Error, EventSink, Sleep};

/// What recorders and the handle send to the task.
pub(crate) enum Command<E> {
    /// A published event and when it was published.
    Publish(Box<E>, SystemTime),
    /// Answer once everything sent before is handled and every write started has ended.
    Flush(oneshot::Sender<()>),
    /// Take nothing new, handle what is queued (each write tried once), end.
    Shutdown(oneshot::Sender<()>),
}

/// What turns published events into writes. Owned by the task alone, so it needs no lock.
pub(crate) trait Correlator: Send + Sync + 'static {
    /// The kind of Event.
    type Event: EventObject;

    /// Whether the task writes each event before it takes the next (`tools/record`: a
    /// repeat's count patch names the event its first occurrence created, and what the
    /// server stored goes back into the correlator) or starts writes concurrently, at
    /// most the configured number at once (`tools/events`).
    const IN_ORDER: bool;

    /// Takes a published event; answers the write it asks for, if any.
    fn observe(
        &mut self,
        event: Self::Event,
        published: SystemTime,
        now: SystemTime,
    ) -> Option<Write<Self::Event>>;

    /// What the sink stored for a write of an in-order correlator (client-go's
    /// `EventCorrelator.UpdateState`).
    fn written(&mut self, _stored: &Self::Event) {}

    /// The periods of the correlator's checks, each started when the previous one ended
    /// (client-go's `wait.Until`); earlier ones run first when several are due.
    fn periods(&self) -> Vec<Duration> {
        Vec::new()
    }

    /// Runs check `which` of [`periods`](Correlator::periods), writing inline.
    fn on_period<S: EventSink<Self::Event>>(
        &mut self,
        _which: usize,
        _sink: &S,
        _policy: &RetryPolicy,
        _now: SystemTime,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Runs once the queue is drained at shutdown, writing inline (each write tried once).
    fn on_shutdown<S: EventSink<Self::Event>>(
        &mut self,
        _sink: &S,
        _policy: &RetryPolicy,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// How the task runs.
pub(crate) struct Settings {
    pub(crate) queue_capacity: usize,
    pub(crate) max_writes_in_flight: usize,
    pub(crate) retry: RetryPolicy,
    pub(crate) clock: Arc<dyn Clock>,
}

/// The broadcaster's side of the task: the queue, and the token that ends retry sleeps.
#[derive(Debug)]
pub(crate) struct Handle<E> {
    tx: mpsc::Sender<Command<E>>,
    cancel: CancellationToken,
}

/// Starts the task.
///
/// # Errors
/// [`Error::NoRuntime`] outside a Tokio runtime.
pub(crate) fn spawn<S, C>(
    sink: S,
    correlator: C,
    settings: Settings,
) -> Result<Handle<C::Event>, Error>
where
    C: Correlator,
    S: EventSink<C::Event>,
{
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
    let (tx, rx) = mpsc::channel(settings.queue_capacity);
    let cancel = CancellationToken::new();
    // The periods start now, not when the task is first polled.
    let periods = correlator.periods();
    let timers = periods.iter().map(|p| settings.clock.sleep(*p)).collect();
    let task = Task {
        sink: Arc::new(sink),
        writes: Arc::new(Semaphore::new(settings.max_writes_in_flight)),
        cancel: cancel.clone(),
        correlator,
        periods,
        settings,
    };
    runtime.spawn(task.run(rx, timers));
    Ok(Handle { tx, cancel })
}

impl<E: EventObject> Handle<E> {
    /// A sender for a recorder.
    pub(crate) fn sender(&self) -> mpsc::Sender<Command<E>> {
        self.tx.clone()
    }

    /// See the broadcasters' `flush`.
    pub(crate) async fn flush(&self) -> Result<(), Error> {
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Command::Flush(ack))
            .await
            .map_err(|_| Error::ShutDown)?;
        done.await.map_err(|_| Error::ShutDown)
    }

    /// See the broadcasters' `shutdown`. The sleeps before retries end at once, so that
    /// a write waiting for its next try cannot hold up the events queued behind it; from
    /// here on each write is tried once (client-go's `Shutdown` promises as much).
    pub(crate) async fn shutdown(self) {
        self.cancel.cancel();
        let (ack, done) = oneshot::channel();
        if self.tx.send(Command::Shutdown(ack)).await.is_ok() {
            let _ = done.await;
        }
    }
}

/// Puts `event` on the queue without waiting: client-go's `ActionOrDrop`.
///
/// # Errors
/// [`Error::QueueFull`] or [`Error::ShutDown`]: the event was dropped.
pub(crate) fn publish<E: EventObject>(
    tx: &mpsc::Sender<Command<E>>,
    event: E,
    published: SystemTime,
) -> Result<(), Error> {
    match tx.try_send(Command::Publish(Box::new(event), published)) {
        Ok(()) => Ok(()),
        Err(mpsc::error::TrySendError::Full(Command::Publish(event, _))) => {
            tracing::debug!(event = %Described(&*event), "the event queue is full; dropping the event");
            Err(Error::QueueFull)
        }
        Err(mpsc::error::TrySendError::Full(_)) => Err(Error::QueueFull),
        Err(mpsc::error::TrySendError::Closed(_)) => Err(Error::ShutDown),
    }
}

/// The task and what it owns.
struct Task<S, C> {
    sink: Arc<S>,
    correlator: C,
    periods: Vec<Duration>,
    /// One permit per write in flight.
    writes: Arc<Semaphore>,
    /// Ends retry sleeps at shutdown.
    cancel: CancellationToken,
    settings: Settings,
}

/// The index of the first of `timers` that is due.
async fn first_due(timers: &mut [Sleep]) -> usize {
    poll_fn(|cx| {
        for (i, timer) in timers.iter_mut().enumerate() {
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}

impl<S, C> Task<S, C>
where
    C: Correlator,
    S: EventSink<C::Event>,
{
    /// Runs until shut down or until every sender is gone.
    async fn run(mut self, mut rx: mpsc::Receiver<Command<C::Event>>, mut timers: Vec<Sleep>) {
        let clock = Arc::clone(&self.settings.clock);
        let mut shutdown_ack = None;
        loop {
            tokio::select! {
                // Timers first, so that a busy queue cannot starve them.
                biased;
                which = first_due(&mut timers) => {
                    let now = clock.wall_now();
                    self.correlator
                        .on_period(which, &*self.sink, &self.settings.retry, now)
                        .await;
                    timers[which] = clock.sleep(self.periods[which]);
                }
                command = rx.recv() => match command {
                    Some(Command::Publish(event, published)) => {
                        let now = clock.wall_now();
                        if let Some(write) = self.correlator.observe(*event, published, now) {
                            self.write(write).await;
                        }
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
            self.correlator
                .on_shutdown(&*self.sink, &self.settings.retry)
                .await;
            let _ = ack.send(());
        }
    }

    /// Writes in order (awaited here) or starts the write as a task of its own.
    async fn write(&mut self, write: Write<C::Event>) {
        let clock = Arc::clone(&self.settings.clock);
        let policy = self.settings.retry;
        if C::IN_ORDER {
            let stored =
                attempt_recording(&*self.sink, write, &*clock, &policy, &self.cancel).await;
            if let Some(stored) = stored {
                self.correlator.written(&stored);
            }
            return;
        }
        // Waiting here when every permit is taken is the back-pressure: the queue fills
        // and publish drops, while the callers never wait.
        let Ok(permit) = Arc::clone(&self.writes).acquire_owned().await else {
            return;
        };
        let sink = Arc::clone(&self.sink);
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            attempt_recording(&*sink, write, &*clock, &policy, &cancel).await;
            drop(permit);
        });
    }

    /// Returns once no write is in flight.
    async fn wait_for_writes(&self) {
        let all = u32::try_from(self.settings.max_writes_in_flight).unwrap_or(u32::MAX);
        let _ = self.writes.acquire_many(all).await;
    }
}
