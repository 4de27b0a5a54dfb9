//! The `tools/events` broadcaster: the shared task (`task.rs`) with the series cache as its
//! correlator (client-go's `eventBroadcasterImpl`).

use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;

use crate::series::SeriesCache;
use crate::task::{self, Handle, Settings};
use crate::write::RetryPolicy;
use crate::{Clock, Config, Error, EventSink, KubeSink, Recorder, Reporter};

/// Receives events from [`Recorder`]s and writes them from a background task, folding
/// isomorphic ones into series: client-go's `EventBroadcaster` of `tools/events`.
///
/// One broadcaster serves any number of recorders (one per reporting controller, say) and
/// keeps one cache for all of them. Its task ends after [`Broadcaster::shutdown`], or once
/// this handle and every recorder are dropped (then writes already started still finish).
/// See the [crate docs](crate) for what is folded and when series are written.
#[derive(Debug)]
pub struct Broadcaster {
    handle: Handle<Event>,
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
    pub fn with_sink<S: EventSink<Event>>(sink: S, config: Config) -> Result<Self, Error> {
        let clock = Arc::clone(&config.clock);
        let cache = SeriesCache::new(
            config.max_cached_events,
            config.finish_time,
            config.refresh_time,
        );
        let settings = Settings {
            queue_capacity: config.queue_capacity,
            max_writes_in_flight: config.max_writes_in_flight,
            retry: RetryPolicy {
                sleep: config.retry_sleep,
                max_tries: config.max_tries,
                events_k8s_io: true,
            },
            clock: config.clock,
        };
        let handle = task::spawn(sink, cache, settings)?;
        Ok(Self { handle, clock })
    }

    /// A recorder publishing as `reporter` through this broadcaster.
    pub fn recorder(&self, reporter: Reporter) -> Recorder {
        Recorder::new_with(self.handle.sender(), Arc::clone(&self.clock), reporter)
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
        self.handle.flush().await
    }

    /// Stops taking events (recorders then answer [`Error::ShutDown`]), ends the sleeps
    /// before retries, writes the events already queued (each tried once, as client-go
    /// promises for a broadcaster shut down), waits for the writes in progress, then
    /// writes once each series counted past its last write (client-go leaves those to the
    /// next periodic check, which never comes), and returns. With a sink that may hang,
    /// put a timeout around it.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}
