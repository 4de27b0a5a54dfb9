//! One write of an event to the sink, and the retries around it: client-go's
//! `recordEvent` and `attemptRecording`.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kinformer_core::ErrorChain;
use tokio_util::sync::CancellationToken;

use crate::{Clock, Error, EventSink};

/// What one write came to.
pub(crate) enum Written {
    /// The sink stored it; here is what it answered.
    Stored(Box<Event>),
    /// It failed for good (or cannot succeed as it is): do not try again.
    GaveUp,
    /// It failed in a way that may pass: try again later.
    Retry,
}

/// One write, as client-go's `recordEvent`: an event with a series is patched (only its
/// `series` changes) and created if the patch finds no such event (`404`); an event
/// without one is created. A create clears the `resourceVersion` first.
///
/// Which failures are worth another try follows client-go: none of the server's refusals
/// ([`Error::Api`]) except `AlreadyExists` when creating a series (the first event of the
/// series was created in the meantime, so the next try patches it); no request that cannot
/// be built ([`Error::Request`]); every transport failure ([`Error::Transport`]).
pub(crate) async fn record_event<S: EventSink>(sink: &S, event: &mut Event) -> Written {
    let is_series = event.series.is_some();
    let mut result = None;
    if let Some(series) = &event.series {
        let patch = match serde_json::to_vec(&serde_json::json!({ "series": series })) {
            Ok(patch) => patch,
            Err(err) => {
                tracing::error!(error = %err, "cannot encode an event series patch; dropping it");
                return Written::GaveUp;
            }
        };
        result = Some(sink.patch(event, &patch).await);
    }
    let patch_missed = matches!(&result, Some(Err(err)) if err.is_not_found());
    if !is_series || patch_missed {
        event.metadata.resource_version = None;
        result = Some(sink.create(event).await);
    }
    let err = match result {
        Some(Ok(stored)) => {
            tracing::debug!(
                event = event.metadata.name.as_deref().unwrap_or_default(),
                namespace = event.metadata.namespace.as_deref().unwrap_or_default(),
                count = event.series.as_ref().map(|s| s.count),
                "event written"
            );
            return Written::Stored(Box::new(stored));
        }
        Some(Err(err)) => err,
        None => return Written::GaveUp,
    };
    let about = Described(event);
    match &err {
        Error::Request(_) => {
            tracing::error!(error = %ErrorChain(&err), event = %about, "cannot build the event request; not retrying");
            Written::GaveUp
        }
        Error::Api { .. } if err.is_already_exists() && is_series => Written::Retry,
        Error::Api { .. } if err.is_already_exists() => {
            tracing::debug!(error = %ErrorChain(&err), event = %about, "the server refused the event; not retrying");
            Written::GaveUp
        }
        Error::Api { .. } => {
            tracing::error!(error = %ErrorChain(&err), event = %about, "the server refused the event; not retrying");
            Written::GaveUp
        }
        _ => {
            tracing::warn!(error = %ErrorChain(&err), event = %about, "cannot write the event; may retry");
            Written::Retry
        }
    }
}

/// Writes `event`, trying again after a jittered sleep (`retry_sleep` plus up to a quarter
/// more, client-go's `wait.Jitter(d, 0.25)`) until it is stored, given up on, tried
/// `max_tries` times, or `cancel` fires (then the sleep ends early and no try follows).
pub(crate) async fn attempt_recording<S: EventSink>(
    sink: &S,
    mut event: Event,
    clock: &dyn Clock,
    retry_sleep: Duration,
    max_tries: u32,
    cancel: &CancellationToken,
) {
    let mut tries = 0;
    loop {
        match record_event(sink, &mut event).await {
            Written::Stored(_) | Written::GaveUp => return,
            Written::Retry => {}
        }
        tries += 1;
        if tries >= max_tries {
            tracing::error!(event = %Described(&event), tries, "cannot write the event: retry limit exceeded");
            return;
        }
        let sleep = retry_sleep.mul_f64(1.0 + 0.25 * fastrand::f64());
        tokio::select! {
            () = cancel.cancelled() => return,
            () = clock.sleep(sleep) => {}
        }
    }
}

/// An event in a log line: which object, why, and the event's own name. Never the note,
/// which is free text.
pub(crate) struct Described<'a>(pub(crate) &'a Event);

impl std::fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = self.0;
        fn s(v: Option<&String>) -> &str {
            v.map_or("", String::as_str)
        }
        let regarding = e.regarding.as_ref();
        write!(
            f,
            "{} {}/{} about {} {} (event {}/{}, count {})",
            s(e.type_.as_ref()),
            s(e.reason.as_ref()),
            s(e.action.as_ref()),
            s(regarding.and_then(|r| r.kind.as_ref())),
            s(regarding.and_then(|r| r.name.as_ref())),
            s(e.metadata.namespace.as_ref()),
            s(e.metadata.name.as_ref()),
            e.series.as_ref().map_or(1, |series| series.count),
        )
    }
}
