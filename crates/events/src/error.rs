//! The crate's one error type.

use kinformer_core::BoxError;

/// What can go wrong in this crate.
///
/// [`Recorder::publish`](crate::Recorder::publish) fails only with [`Error::QueueFull`] or
/// [`Error::ShutDown`]: the event is dropped and the caller goes on (a reconcile should
/// not fail because an Event could not be recorded). The other variants are what an
/// [`EventSink`](crate::EventSink) answers; the broadcaster sorts them the way client-go
/// does to decide whether to try a write again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The broadcaster's queue was full, so the event was dropped (client-go drops too,
    /// at the same depth of 1000 by default). The sink is slower than the events come.
    #[error("the event queue is full; the event was dropped")]
    QueueFull,

    /// The broadcaster has shut down (or its task has ended); nothing is recorded any more.
    #[error("the event broadcaster has shut down")]
    ShutDown,

    /// The broadcaster was started outside a Tokio runtime, which it needs for its task.
    #[error("no Tokio runtime to run the event broadcaster on")]
    NoRuntime,

    /// The API server answered with a failure status. Not retried (client-go's rule),
    /// except `404` on a series patch (the event is created again) and `AlreadyExists` on
    /// such a create (retried after a sleep).
    #[error("the API server refused the event: {code} {reason}")]
    Api {
        /// The HTTP status code, e.g. `422`.
        code: u16,
        /// The machine-readable reason, e.g. `"Invalid"` or `"AlreadyExists"`.
        reason: String,
        /// The server's message. Kept out of the `Display` output because it may quote the
        /// event's fields.
        message: String,
    },

    /// The request got no usable answer (connection refused, timeout, a response that
    /// could not be read). Retried after a sleep, up to the configured number of tries.
    #[error("the event could not be sent")]
    Transport(#[source] BoxError),

    /// The request could not be built (an event without a namespace, a body that does not
    /// serialize). Not retried: it would be built the same way again.
    #[error("the event request could not be built")]
    Request(#[source] BoxError),
}

impl Error {
    /// Whether this is the server's `404 Not Found`.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { code: 404, .. })
    }

    /// Whether this is the server's `AlreadyExists` (client-go's `IsAlreadyExists` looks at
    /// the status reason, not at the code, which `409 Conflict` shares).
    pub(crate) fn is_already_exists(&self) -> bool {
        matches!(self, Error::Api { reason, .. } if reason == "AlreadyExists")
    }
}

impl From<kube::Error> for Error {
    /// Sorts kube's errors the way client-go sorts its own: a status from the server is
    /// [`Error::Api`]; a request that could not be built is [`Error::Request`]; anything
    /// else (connection, TLS, timeout, an unreadable response) is [`Error::Transport`].
    fn from(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => Error::Api {
                code: status.code,
                reason: status.reason,
                message: status.message,
            },
            err @ (kube::Error::BuildRequest(_) | kube::Error::HttpError(_)) => {
                Error::Request(Box::new(err))
            }
            err => Error::Transport(Box::new(err)),
        }
    }
}
