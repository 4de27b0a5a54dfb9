use std::fmt;

use kinformer_core::BoxError;

/// The one error type of kinformer-reflector.
///
/// The reflector hands every failure it meets to its watch error handler
/// ([`Reflector::on_watch_error`](crate::Reflector::on_watch_error)) as one of these, then
/// recovers on its own; the variant says which recovery it chose. A [`ListerWatcher`]
/// implementation returns them too, and the reflector's recovery depends on which one it
/// returns, so map your failures onto the variant that describes them.
///
/// [`ListerWatcher`]: crate::ListerWatcher
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API server answered with an error status, either as the HTTP response or as an
    /// `ERROR` event in a watch stream. What the reflector does depends on the status:
    /// [`Error::is_expired`] and [`Error::is_too_large_resource_version`] relist,
    /// [`Error::is_too_many_requests`] backs off and re-watches, anything else (403, 500,
    /// ...) backs off and relists. Fix RBAC or the request for a 4xx that persists.
    #[error("the API server answered {0}")]
    Api(ApiStatus),

    /// The API server could not be reached or the connection broke (connection refused,
    /// TLS handshake, reset). Transient: the reflector backs off and re-watches from its
    /// last resourceVersion, without a relist.
    #[error("cannot reach the API server")]
    Unreachable {
        /// What the client or the network reported.
        #[source]
        source: BoxError,
    },

    /// A list page or watch event could not be decoded, not even its objects' metadata (a
    /// single object that does not fit the type is [`Error::Undecodable`] instead). The
    /// event's change is lost, so the reflector relists; a list that keeps failing to decode
    /// means the server sends something else than Kubernetes objects. The detail never
    /// includes values from the body.
    #[error("cannot decode {what}: {detail}")]
    Decode {
        /// What was being decoded (`"watch event"`, `"list item 3"`, ...).
        what: String,
        /// Why, without any value from the body (Secrets!).
        detail: String,
    },

    /// One object did not decode as the reflector's type, while its metadata did (see
    /// [`Undecodable`](crate::Undecodable)): a watch event for it, or an item of a list
    /// (reported by the reflector). Only that object is skipped; the list and the watch go
    /// on. The cache keeps the object's last version that did decode (with a
    /// known-objects view, as informers have) until the server sends one that decodes;
    /// a deletion (`deleted`) still deletes it. Fix the type or the object.
    #[error("cannot decode object {object}")]
    Undecodable {
        /// The object's key and why it did not decode.
        object: crate::Undecodable,
        /// Whether the event was a deletion.
        deleted: bool,
    },

    /// The server sent an object of another kind than the reflector's (a wrong
    /// `ApiResource` for a dynamic type, a proxy that rewrote the path). The event is
    /// skipped (and logged); the watch goes on. Check the resource the reflector watches.
    #[error("unexpected object: want {expected}, got {actual}")]
    UnexpectedKind {
        /// `apiVersion/kind` the reflector expects.
        expected: String,
        /// `apiVersion/kind` the object had.
        actual: String,
    },

    /// An object in a streamed list had no usable key (no name, a `/` in it). It is
    /// skipped and logged.
    #[error("object without a usable key")]
    InvalidObject(#[source] kinformer_core::Error),

    /// A watch ended within a second without sending any event: the server is likely
    /// unhealthy. The reflector backs off and relists.
    #[error("the watch closed within a second without any event")]
    VeryShortWatch,

    /// The sink refused a write. A closed sink ([`kinformer_core::Error::Closed`]) stops
    /// the reflector; any other refusal is logged and the reflector goes on (a failed
    /// `replace` or `resync` relists after a backoff).
    #[error("the sink refused a write")]
    Sink(#[source] kinformer_core::Error),

    /// The transform ([`Reflector::transform`](crate::Reflector::transform)) refused an
    /// object. A watch event is skipped and logged; in a list, the list fails and the
    /// reflector relists after a backoff (as client-go, whose FIFO refuses the `Replace`).
    #[error("the transform refused an object")]
    Transform {
        /// The transform's error.
        #[source]
        source: BoxError,
    },

    /// A local failure of the client: the request could not be built (a malformed
    /// selector), credentials could not be loaded. The reflector backs off and retries,
    /// which helps only if the cause is transient: check the configuration.
    #[error("the client failed locally")]
    Client {
        /// The client's error.
        #[source]
        source: BoxError,
    },

    /// [`Reflector::spawn`](crate::Reflector::spawn) was called outside a Tokio runtime.
    /// Call it from inside one, or drive [`Reflector::run`](crate::Reflector::run) yourself.
    #[error("the reflector must be spawned inside a Tokio runtime")]
    NoRuntime,

    /// A shard selector or range that the API server would refuse (see
    /// [`ShardSelector::parse`](crate::ShardSelector::parse)); made only when one is built
    /// or parsed, never by the reflector.
    #[error("invalid shard selector: {0}")]
    InvalidShard(String),

    /// The [`ShardSelection`](crate::ShardSelection) of a
    /// [`ShardedListerWatcher`](crate::ShardedListerWatcher) changed: a watch or a list page
    /// under the old selection is refused, and the reflector relists at once (no backoff,
    /// nothing logged above debug) with the new selector. (A change under a running watch
    /// is an item of the watch, [`ShardChange`](crate::ShardChange), not this error.)
    #[error("the shard selection changed")]
    ShardSelectionChanged,

    /// A reflector started from a snapshot ([`Reflector::resume`](crate::Reflector::resume))
    /// could not prove it caught up with the server from the snapshot's resourceVersion
    /// (`410 Gone` is [`Error::Api`] instead). It lists at once (a consistent read), and
    /// the sink compares the list with its cache.
    #[error("cannot resume from resourceVersion {resource_version}: {why}")]
    NotResumed {
        /// The snapshot's resourceVersion.
        resource_version: String,
        /// Why.
        why: &'static str,
    },
}

impl Error {
    /// The HTTP status code, for [`Error::Api`].
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Api(s) => Some(s.code),
            _ => None,
        }
    }

    /// The resourceVersion asked for is gone (`410 Gone`, reason `Expired` or `Gone`):
    /// etcd compacted it, or the watch cache no longer holds it.
    pub fn is_expired(&self) -> bool {
        matches!(self, Self::Api(s) if s.code == 410 || s.reason == "Expired" || s.reason == "Gone")
    }

    /// The resourceVersion asked for is newer than the server knows (a watch cache that
    /// lags, another API server behind a load balancer). Recognises the three forms
    /// API servers have used: the `ResourceVersionTooLarge` cause, the old cause message,
    /// and the old status message.
    pub fn is_too_large_resource_version(&self) -> bool {
        const MSG: &str = "Too large resource version";
        let Self::Api(s) = self else { return false };
        if s.causes.iter().any(|c| c == "ResourceVersionTooLarge") {
            return true;
        }
        let timeout = s.code == 504 || s.reason == "Timeout";
        timeout && (s.cause_messages.iter().any(|m| m == MSG) || s.message.contains(MSG))
    }

    /// `429 Too Many Requests` (API priority and fairness, or a max-inflight limit).
    pub fn is_too_many_requests(&self) -> bool {
        matches!(self, Self::Api(s) if s.code == 429 || s.reason == "TooManyRequests")
    }

    /// The server could not be reached or the connection broke.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }

    /// The shard selection changed: relist now ([`Error::ShardSelectionChanged`]).
    pub fn is_shard_selection_changed(&self) -> bool {
        matches!(self, Self::ShardSelectionChanged)
    }

    /// The sink is closed: the reflector stops.
    pub fn is_sink_closed(&self) -> bool {
        matches!(self, Self::Sink(kinformer_core::Error::Closed))
    }

    /// A streaming list sent a second event for an object it had already listed and the
    /// reflector had handed on in a part of the list: the API server sends each object once
    /// before the end bookmark. The round falls back to List+Watch.
    pub(crate) fn handed_twice() -> Self {
        Self::Decode {
            what: "streaming list".to_owned(),
            detail: "a second event for an object before the initial-events-end bookmark"
                .to_owned(),
        }
    }

    /// A watch that failed to start with this error is retried after a backoff without a
    /// relist (client-go's `isWatchErrorRetriable`, widened from "connection refused" to
    /// every failure to reach the server: its last resourceVersion is still good).
    pub(crate) fn is_retriable_watch_start(&self) -> bool {
        self.is_too_many_requests() || self.is_unreachable()
    }

    /// The error concerns one event only: skip it, keep watching.
    pub(crate) fn skips_event(&self) -> bool {
        matches!(
            self,
            Self::UnexpectedKind { .. }
                | Self::InvalidObject(_)
                | Self::Undecodable { .. }
                | Self::Transform { .. }
        )
    }

    /// [`Error::Unreachable`] from what the transport reported: how a [`ListerWatcher`]
    /// says it could not reach its source (the reflector then re-watches after a backoff,
    /// without a relist).
    ///
    /// [`ListerWatcher`]: crate::ListerWatcher
    pub fn unreachable(source: impl Into<BoxError>) -> Self {
        Self::Unreachable {
            source: source.into(),
        }
    }

    /// [`Error::Decode`]: `what` could not be decoded, for a reason that quotes nothing
    /// from the body.
    pub fn decode(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::Decode {
            what: what.into(),
            detail: detail.into(),
        }
    }
}

/// An error status from the API server (a `metav1.Status`), reduced to what a caller
/// acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApiStatus {
    /// The HTTP status code (`410`, `429`, `403`, ...; `0` if the server sent none).
    pub code: u16,
    /// The machine-readable reason (`Expired`, `Forbidden`, `TooManyRequests`, ...).
    pub reason: String,
    /// The server's human-readable message.
    pub message: String,
    /// The `reason` of each entry of `details.causes` (e.g. `ResourceVersionTooLarge`).
    pub causes: Vec<String>,
    /// The `message` of each entry of `details.causes`.
    pub cause_messages: Vec<String>,
}

impl ApiStatus {
    /// A status with this code, reason and message and no causes.
    pub fn new(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
            message: message.into(),
            causes: Vec::new(),
            cause_messages: Vec::new(),
        }
    }

    /// Adds a cause (its `reason` and `message`).
    #[must_use]
    pub fn with_cause(mut self, reason: impl Into<String>, message: impl Into<String>) -> Self {
        self.causes.push(reason.into());
        self.cause_messages.push(message.into());
        self
    }
}

impl fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if !self.reason.is_empty() {
            write!(f, " {}", self.reason)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_is_410_or_its_reasons() {
        assert!(Error::Api(ApiStatus::new(410, "Expired", "too old")).is_expired());
        assert!(Error::Api(ApiStatus::new(410, "Gone", "")).is_expired());
        assert!(Error::Api(ApiStatus::new(0, "Expired", "")).is_expired());
        assert!(!Error::Api(ApiStatus::new(500, "InternalError", "")).is_expired());
    }

    #[test]
    fn too_large_resource_version_in_all_three_server_forms() {
        // Today's servers: a cause of type ResourceVersionTooLarge.
        let now = ApiStatus::new(
            504,
            "Timeout",
            "Timeout: Too large resource version: 9, current: 5",
        )
        .with_cause("ResourceVersionTooLarge", "Too large resource version");
        assert!(Error::Api(now).is_too_large_resource_version());
        // 1.17.0-1.18.5: only the cause message.
        let old = ApiStatus::new(504, "Timeout", "x").with_cause("", "Too large resource version");
        assert!(Error::Api(old).is_too_large_resource_version());
        // Before 1.17: only the status message.
        let older = ApiStatus::new(504, "Timeout", "Too large resource version");
        assert!(Error::Api(older).is_too_large_resource_version());
        // A plain timeout is not.
        let plain = ApiStatus::new(504, "Timeout", "request timed out");
        assert!(!Error::Api(plain).is_too_large_resource_version());
    }

    #[test]
    fn retriable_watch_start_is_429_or_unreachable() {
        assert!(Error::Api(ApiStatus::new(429, "TooManyRequests", "")).is_retriable_watch_start());
        assert!(Error::unreachable("connection refused").is_retriable_watch_start());
        assert!(!Error::Api(ApiStatus::new(403, "Forbidden", "")).is_retriable_watch_start());
        assert!(!Error::Api(ApiStatus::new(410, "Expired", "")).is_retriable_watch_start());
    }

    #[test]
    fn status_displays_code_reason_and_message() {
        let s = ApiStatus::new(403, "Forbidden", "pods is forbidden");
        assert_eq!(s.to_string(), "403 Forbidden: pods is forbidden");
        assert_eq!(Error::Api(s).status_code(), Some(403));
    }
}
