//! Watch events: one frame of an `application/vnd.kubernetes.protobuf;stream=watch` body.

use std::fmt;

use crate::error::{Error, Segment};
use crate::object::{MAGIC, Object};
use crate::wire;

/// The media type of a protobuf watch stream, for `Accept` and `Content-Type`.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// What happened to the object of a [`WatchEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`: the object is its last state.
    Deleted,
    /// `BOOKMARK`: the object carries only `metadata.resourceVersion` (and annotations,
    /// such as `k8s.io/initial-events-end`).
    Bookmark,
    /// `ERROR`: the object is a `Status` (decode it into `kube::core::Status` or
    /// k8s-openapi's `Status`).
    Error,
}

impl EventType {
    /// The name on the wire (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One watch event: its type and its object, still encoded.
///
/// ```
/// # let frames = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/watch-stream.pb"));
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_protobuf::{EventType, FrameDecoder, WatchEvent};
///
/// let mut decoder = FrameDecoder::new();
/// decoder.push(frames); // bytes as they arrive from the connection
/// let mut names = Vec::new();
/// while let Some(frame) = decoder.next_frame()? {
///     let event = WatchEvent::from_frame(frame)?;
///     match event.event_type() {
///         EventType::Added | EventType::Modified | EventType::Deleted => {
///             let pod: Pod = event.object().deserialize()?;
///             names.push(pod.metadata.name.unwrap_or_default());
///         }
///         EventType::Bookmark | EventType::Error => {}
///     }
/// }
/// decoder.finish()?; // no frame was cut in the middle
/// assert_eq!(names, ["web-0", "web-0"]);
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WatchEvent<'a> {
    event_type: EventType,
    object: Object<'a>,
}

impl<'a> WatchEvent<'a> {
    /// Reads a `metav1.WatchEvent` (`{ type = 1; object = 2 }`, the object a
    /// `RawExtension` holding a `k8s\0` envelope), as the API server writes one per frame. A
    /// frame that is itself enveloped (`k8s\0` + `WatchEvent`) is read too.
    pub fn from_frame(frame: &'a [u8]) -> Result<Self, Error> {
        let at = |e: Error| e.at(Segment::Message("WatchEvent"));
        let event = if frame.starts_with(&MAGIC) {
            let outer = Object::from_bytes(frame)?;
            if outer.kind() != "WatchEvent" {
                return Err(at(Error::malformed(
                    "an envelope of another kind than WatchEvent",
                )));
            }
            outer.raw()
        } else {
            frame
        };
        let [ty, object] = wire::len_fields(event, [1, 2]).map_err(|f| at(Error::malformed(f)))?;
        let event_type = match ty {
            b"ADDED" => EventType::Added,
            b"MODIFIED" => EventType::Modified,
            b"DELETED" => EventType::Deleted,
            b"BOOKMARK" => EventType::Bookmark,
            b"ERROR" => EventType::Error,
            _ => return Err(at(Error::malformed("unknown event type"))),
        };
        let raw = wire::last_len(object, 1)
            .map_err(|f| at(Error::malformed(f).at(Segment::Field("object"))))?
            .unwrap_or_default();
        let object = Object::from_bytes(raw).map_err(|e| match e {
            Error::NotProtobuf => at(Error::malformed("the object is not a k8s envelope")),
            e => e,
        })?;
        Ok(WatchEvent { event_type, object })
    }

    /// The event's type.
    pub fn event_type(&self) -> EventType {
        self.event_type
    }

    /// The event's object.
    pub fn object(&self) -> Object<'a> {
        self.object
    }
}
