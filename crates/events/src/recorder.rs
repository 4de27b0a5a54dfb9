//! The caller's side: publishing an event never waits and never fails the caller.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kinformer_compact_store::KubeObject;
use kube::Resource;
use tokio::sync::mpsc;

use crate::event::{Occurrence, get_reference, make_event};
use crate::task::{self, Command};
use crate::{Broadcaster, Clock, Config, Error, EventType, Reporter};

/// Publishes events about objects as one reporting controller: client-go's
/// `EventRecorder` of `tools/events`. Cheap to clone; every clone feeds the same
/// [`Broadcaster`].
///
/// [`publish`](Recorder::publish) builds the event, puts it on the broadcaster's bounded
/// queue and returns: it never waits for the API server, and a full queue or a
/// broadcaster that shut down drops the event with an error the caller may ignore.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Command<Event>>,
    clock: Arc<dyn Clock>,
    reporter: Arc<Reporter>,
}

impl Recorder {
    /// A recorder with a broadcaster of its own (default [`Config`]), writing through
    /// `client`; the broadcaster's task ends when the last clone of this recorder is
    /// dropped. To share one cache between reporters, or to flush and shut down, make a
    /// [`Broadcaster`] and ask it for recorders.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn new(client: kube::Client, reporter: Reporter) -> Result<Self, Error> {
        Ok(Broadcaster::new(client, Config::default())?.recorder(reporter))
    }

    pub(crate) fn new_with(
        tx: mpsc::Sender<Command<Event>>,
        clock: Arc<dyn Clock>,
        reporter: Reporter,
    ) -> Self {
        Self {
            tx,
            clock,
            reporter: Arc::new(reporter),
        }
    }

    /// Who this recorder reports as.
    pub fn reporter(&self) -> &Reporter {
        &self.reporter
    }

    /// Records that `action` was taken about `regarding` (and `related`, a second object
    /// it involved, if any), for `reason`, with a human-readable `note` (client-go's
    /// `Eventf(regarding, related, eventtype, reason, action, note)`, the note already
    /// formatted).
    ///
    /// The API server wants `reason` and `action` non-empty and at most 128 bytes, and
    /// `note` at most 1 kB; it refuses other events, and they are dropped (logged, not
    /// retried). Repeats of an event (same regarding and related objects, type, reason,
    /// action and reporter; the note may differ) fold into one series (see the
    /// [crate docs](crate)).
    ///
    /// # Errors
    /// [`Error::QueueFull`] or [`Error::ShutDown`]: the event was dropped. Neither is a
    /// reason to fail a reconcile; log it or ignore it.
    pub fn publish(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<(), Error> {
        let now = self.clock.wall_now();
        let what = Occurrence {
            regarding,
            related,
            type_,
            reason,
            action,
            note,
        };
        let event = make_event(&self.reporter, &what, now);
        task::publish(&self.tx, event, now)
    }

    /// [`publish`](Recorder::publish) about `object`, with no related object, through
    /// the reference client-go's `GetReference` makes: apiVersion, kind, namespace, name,
    /// uid and resourceVersion. (kube's `object_ref` leaves out the resourceVersion,
    /// which is part of what makes two events the same.)
    ///
    /// # Errors
    /// As [`publish`](Recorder::publish).
    pub fn publish_for<K>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<(), Error>
    where
        K: KubeObject,
        K::Kind: Resource<DynamicType = ()>,
    {
        let regarding = get_reference(object);
        self.publish(&regarding, None, type_, reason, action, note)
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}
