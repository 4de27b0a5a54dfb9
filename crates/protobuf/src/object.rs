//! The `k8s\0` envelope (`runtime.Unknown`) and the object inside it.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::de::{Failure, MessageDe, Transcode, nested_type_meta};
use crate::error::{Error, Segment};
use crate::schema::{self, Message};
use crate::wire;

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The media type of Kubernetes protobuf, for `Accept` and `Content-Type`.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// One object of a Kubernetes protobuf body: the envelope's apiVersion and kind, and the
/// encoded object they describe. Cheap to copy; borrows the body.
///
/// ```
/// # let body = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pod.pb"));
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_protobuf::Object;
///
/// let object = Object::from_bytes(body)?;
/// assert_eq!((object.api_version(), object.kind()), ("v1", "Pod"));
/// let pod: Pod = object.deserialize()?;
/// assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct Object<'a> {
    api_version: &'a str,
    kind: &'a str,
    raw: &'a [u8],
    /// For an item of a list ([`List::objects`](crate::List::objects)): its message, which
    /// shows no `apiVersion`/`kind` (unless metadata-only).
    item: Option<&'static Message>,
}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes: they may be a Secret.
        f.debug_struct("Object")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("len", &self.raw.len())
            .finish()
    }
}

impl<'a> Object<'a> {
    /// Reads the envelope: the `k8s\0` magic, then a `runtime.Unknown` message whose
    /// `typeMeta` names the object's type and whose `raw` holds the object.
    ///
    /// Fails with [`Error::NotProtobuf`] when the magic is missing (a JSON body, say), with
    /// [`Error::Malformed`] when the envelope is not valid protobuf, and with
    /// [`Error::UnsupportedEnvelope`] when it declares a content encoding or another content
    /// type (the API server sets neither).
    pub fn from_bytes(body: &'a [u8]) -> Result<Self, Error> {
        let rest = body.strip_prefix(&MAGIC[..]).ok_or(Error::NotProtobuf)?;
        let envelope = |e: Error| e.at(Segment::Message("Unknown"));
        let [type_meta, raw, encoding, content_type] =
            wire::len_fields(rest, [1, 2, 3, 4]).map_err(|f| envelope(Error::malformed(f)))?;
        if !encoding.is_empty() {
            return Err(Error::UnsupportedEnvelope("a content encoding"));
        }
        if !content_type.is_empty() && content_type != MEDIA_TYPE.as_bytes() {
            return Err(Error::UnsupportedEnvelope(
                "a content type other than protobuf",
            ));
        }
        let [api_version, kind] =
            wire::len_fields(type_meta, [1, 2]).map_err(|f| envelope(Error::malformed(f)))?;
        let text = |b: &'a [u8]| {
            std::str::from_utf8(b)
                .map_err(|_| envelope(Error::malformed("apiVersion or kind is not UTF-8")))
        };
        Ok(Object {
            api_version: text(api_version)?,
            kind: text(kind)?,
            raw,
            item: None,
        })
    }

    /// An item of a list of `api_version`, of message `msg`.
    pub(crate) fn item(api_version: &'a str, msg: &'static Message, raw: &'a [u8]) -> Self {
        let (api_version, kind) = nested_type_meta(msg).unwrap_or((api_version, msg.short_name()));
        Object {
            api_version,
            kind,
            raw,
            item: Some(msg),
        }
    }

    /// The `apiVersion` and `kind` shown first: the envelope's, none for a list item.
    fn type_meta(&self) -> Option<(&'a str, &'a str)> {
        match self.item {
            None => Some((self.api_version, self.kind)),
            Some(msg) => nested_type_meta(msg),
        }
    }

    /// The envelope's apiVersion, e.g. `v1` or `apps/v1`.
    pub fn api_version(&self) -> &'a str {
        self.api_version
    }

    /// The envelope's kind, e.g. `Pod`, `PodList` or `Status`.
    pub fn kind(&self) -> &'a str {
        self.kind
    }

    /// The size of the encoded object in bytes (without the envelope).
    pub fn byte_len(&self) -> usize {
        self.raw.len()
    }

    /// Whether the schema table knows this object's type (see [`is_known`](crate::is_known)).
    pub fn is_known(&self) -> bool {
        schema::is_known(self.api_version, self.kind)
    }

    pub(crate) fn message(&self) -> Result<&'static Message, Error> {
        if let Some(msg) = self.item {
            return Ok(msg);
        }
        schema::lookup(self.api_version, self.kind)
            .ok_or_else(|| Error::unknown_kind(self.api_version, self.kind))
    }

    pub(crate) fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Decodes the object into `T`, any type that decodes the object's JSON: a k8s-openapi
    /// type, `kube::core::PartialObjectMeta<K>`, `kube::core::Status`,
    /// `serde_json::Value`, or a struct of your own that names only the fields it needs
    /// (the others are skipped without being decoded).
    ///
    /// `T` sees what it would see in the API server's JSON for the same object: `apiVersion`
    /// and `kind` first, then the fields (see the crate docs for how each Go type is shown).
    pub fn deserialize<T: Deserialize<'a>>(&self) -> Result<T, Error> {
        let msg = self.message()?;
        T::deserialize(MessageDe {
            msg,
            buf: self.raw,
            type_meta: self.type_meta(),
        })
        .map_err(|e| e.at(Segment::Message(msg.short_name())).into_error())
    }
    /// The object as a `Serialize` value, to transcode it into another format without
    /// building an object in between: a serializer is handed what
    /// [`deserialize`](Self::deserialize) would hand a target type — the object's JSON,
    /// `apiVersion` and `kind` first — each message as a struct whose field names are the
    /// schema's `&'static str`s, and `managedFields`' `FieldsV1` and any `RawExtension` as
    /// a newtype struct of that name around the JSON text the server sent (a `serde_json`
    /// `RawValue`: checked, not parsed into a tree).
    ///
    /// This is how kinformer's default cache (kinformer-compact-store) can go from the
    /// bytes on the wire to its encoded entry without decoding a `Pod`. Into serde_json it
    /// is a protobuf-to-JSON converter:
    ///
    /// ```
    /// # let body = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pod.pb"));
    /// use kinformer_protobuf::Object;
    ///
    /// let object = Object::from_bytes(body)?;
    /// let transcoder = object.transcoder()?;
    /// let json = serde_json::to_vec(&transcoder).map_err(|_| transcoder.into_error())?;
    /// let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
    /// assert_eq!(value, object.deserialize::<serde_json::Value>()?);
    /// # Ok::<(), kinformer_protobuf::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::UnknownKind`] when the schema table does not know the object's type. What
    /// goes wrong while serializing is the serializer's error; [`Transcoder::into_error`]
    /// then says what it was, as [`deserialize`](Self::deserialize) would on the same bytes.
    pub fn transcoder(&self) -> Result<Transcoder<'a>, Error> {
        Ok(Transcoder {
            object: *self,
            msg: self.message()?,
            failure: Failure::default(),
        })
    }
}

/// An [`Object`] to transcode: `Serialize` it ([`Object::transcoder`]).
pub struct Transcoder<'a> {
    object: Object<'a>,
    msg: &'static Message,
    failure: Failure,
}

impl fmt::Debug for Transcoder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Transcoder").field(&self.object).finish()
    }
}

impl Serialize for Transcoder<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // A serializer may give up and serialize again (the compact store's encoder does
        // when it meets a field name for the first time): only the last attempt's
        // failure counts.
        self.failure.clear();
        Transcode {
            msg: self.msg,
            buf: self.object.raw,
            type_meta: self.object.type_meta(),
            failure: &self.failure,
        }
        .serialize(serializer)
    }
}

impl Transcoder<'_> {
    /// Why serializing failed, after it did: malformed protobuf ([`Error::Malformed`], with
    /// its path) or [`Error::Rejected`] when the serializer refused a value (its message is
    /// not kept: it may quote the value).
    pub fn into_error(self) -> Error {
        self.failure.into_error(self.msg)
    }
}

/// Decodes a whole protobuf body (`k8s\0` + envelope) into `T`: shorthand for
/// [`Object::from_bytes`] then [`Object::deserialize`].
///
/// ```
/// # let body = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pod.pb"));
/// let pod: k8s_openapi::api::core::v1::Pod = kinformer_protobuf::from_slice(body)?;
/// assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
pub fn from_slice<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Error> {
    Object::from_bytes(body)?.deserialize()
}
