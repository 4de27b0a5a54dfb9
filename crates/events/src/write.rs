//! One write of an event to the sink, and the retries around it: client-go's
//! `recordEvent` and the retry loop around it, as `tools/events` (`attemptRecording`) and
//! `tools/record` (`recordToSink`) each do it.

use std::time::Duration;

use kinformer_core::ErrorChain;
use tokio_util::sync::CancellationToken;

use crate::sink::{Described, EventObject};
use crate::{Clock, Error, EventSink};

/// A write a correlator asks for: create `event`, or apply `patch` to it (and create it
/// if the patch finds it gone).
pub(crate) struct Write<E> {
    pub(crate) event: E,
    pub(crate) patch: Option<Vec<u8>>,
}

/// What one write came to.
pub(crate) enum Written<E> {
    /// The sink stored it; here is what it answered.
    Stored(Box<E>),
    /// It failed for good (or cannot succeed as it is): do not try again.
    GaveUp,
    /// It failed in a way that may pass: try again later.
    Retry,
}

/// How the two recorders of client-go retry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetryPolicy {
    /// The sleep between tries.
    pub(crate) sleep: Duration,
    /// How many tries at most.
    pub(crate) max_tries: u32,
    /// `tools/events`: every sleep is `sleep` plus up to 25 % (`wait.Jitter(d, 0.25)`), and
    /// `AlreadyExists` on the create after a patch missed is worth another try (the event
    /// was created meanwhile, so the next try patches it). `tools/record`: the first sleep
    /// is a random fraction of `sleep` ("so that various clients won't all be synced up"),
    /// the next ones `sleep` exactly, and `AlreadyExists` is final.
    pub(crate) events_k8s_io: bool,
}

impl RetryPolicy {
    /// The sleep before try `tries + 1`, `tries` tries having failed.
    fn sleep_after(&self, tries: u32) -> Duration {
        if self.events_k8s_io {
            self.sleep.mul_f64(1.0 + 0.25 * fastrand::f64())
        } else if tries == 1 {
            self.sleep.mul_f64(fastrand::f64())
        } else {
            self.sleep
        }
    }
}

/// One write, as client-go's `recordEvent`: with a patch, the event is patched and
/// created if the patch finds no such event (`404`); without one it is created. A create
/// clears the `resourceVersion` first.
///
/// Which failures are worth another try follows client-go: none of the server's refusals
/// ([`Error::Api`]) except, with `tools/events`, `AlreadyExists` on the create after a
/// patch (see [`RetryPolicy`]); no request that cannot be built ([`Error::Request`]);
/// every transport failure ([`Error::Transport`]).
pub(crate) async fn record_event<E: EventObject, S: EventSink<E>>(
    sink: &S,
    write: &mut Write<E>,
    policy: &RetryPolicy,
) -> Written<E> {
    let event = &mut write.event;
    let mut result = None;
    if let Some(patch) = &write.patch {
        result = Some(sink.patch(event, patch).await);
    }
    let patch_missed = matches!(&result, Some(Err(err)) if err.is_not_found());
    if write.patch.is_none() || patch_missed {
        event.meta_mut().resource_version = None;
        result = Some(sink.create(event).await);
    }
    let err = match result {
        Some(Ok(stored)) => {
            tracing::debug!(event = %Described(&stored), "event written");
            return Written::Stored(Box::new(stored));
        }
        Some(Err(err)) => err,
        None => return Written::GaveUp,
    };
    let about = Described(&*event);
    match &err {
        Error::Request(_) => {
            tracing::error!(error = %ErrorChain(&err), event = %about, "cannot build the event request; not retrying");
            Written::GaveUp
        }
        Error::Api { .. }
            if err.is_already_exists() && write.patch.is_some() && policy.events_k8s_io =>
        {
            Written::Retry
        }
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

/// Writes `write`, trying again after the policy's sleep until it is stored, given up
/// on, tried `max_tries` times, or `cancel` fires (then the sleep ends early and no try
/// follows: once a broadcaster shuts down, each event is tried once). Returns what the
/// sink stored, if it did.
pub(crate) async fn attempt_recording<E: EventObject, S: EventSink<E>>(
    sink: &S,
    mut write: Write<E>,
    clock: &dyn Clock,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Option<E> {
    let mut tries = 0;
    loop {
        match record_event(sink, &mut write, policy).await {
            Written::Stored(stored) => return Some(*stored),
            Written::GaveUp => return None,
            Written::Retry => {}
        }
        tries += 1;
        let about = Described(&write.event);
        if tries >= policy.max_tries {
            tracing::error!(event = %about, tries, "cannot write the event: retry limit exceeded");
            return None;
        }
        if cancel.is_cancelled() {
            tracing::error!(event = %about, "cannot write the event: the broadcaster is shut down");
            return None;
        }
        tokio::select! {
            () = cancel.cancelled() => {
                tracing::error!(event = %about, "cannot write the event: the broadcaster is shut down");
                return None;
            }
            () = clock.sleep(policy.sleep_after(tries)) => {}
        }
    }
}
