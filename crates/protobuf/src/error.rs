//! The one error type of kinformer-protobuf.
//!
//! No message ever contains a byte of the decoded body: the body may be a Secret. What an
//! error says comes from the schema (message and field names, the position of a list
//! element) and from fixed descriptions. Messages a target type's `Deserialize` produces
//! through `serde::de::Error::custom` are dropped for that reason; `invalid_type` and
//! `invalid_value` keep the expected type but not the value.

use std::fmt;

/// Why decoding failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body does not start with the `k8s\0` magic of Kubernetes protobuf: it is JSON,
    /// another format, or garbage. Decode it by its `Content-Type` instead.
    #[error("not a Kubernetes protobuf body (no k8s\\0 magic)")]
    NotProtobuf,

    /// The envelope names a type the schema table does not know: a custom resource (served
    /// as JSON only) or a type newer than the table. Ask for JSON for this type.
    #[error("no protobuf schema for {api_version}/{kind}")]
    UnknownKind {
        /// The envelope's apiVersion (printable ASCII only, at most 64 characters).
        api_version: String,
        /// The envelope's kind (printable ASCII only, at most 64 characters).
        kind: String,
    },

    /// The envelope wraps its object in a way this crate does not decode (a content
    /// encoding such as gzip, a content type other than protobuf). The API server does not
    /// do this; a proxy or another encoder may have.
    #[error("unsupported protobuf envelope: {0}")]
    UnsupportedEnvelope(&'static str),

    /// The bytes are not valid protobuf for the message the schema says they hold
    /// (truncated, a length past the end, a wrong wire type), or a special type holds a value
    /// its JSON form cannot carry. The body is corrupt or not what its envelope says.
    #[error("malformed protobuf at {path}: {reason}")]
    Malformed {
        /// Where: the message and the field path, e.g. `Pod.spec.containers[2].image`.
        path: Path,
        /// What was wrong.
        reason: &'static str,
    },

    /// The bytes are valid, but the target type refused a value (a missing required field,
    /// a number out of its range, another kind than the type's). The target type does not
    /// match the object; the value itself is not reported.
    #[error("cannot decode {path} into the target type: {reason}")]
    Rejected {
        /// Where, as for [`Error::Malformed`].
        path: Path,
        /// What the target type said, without the value.
        reason: String,
    },

    /// A watch frame's length prefix is larger than the frame decoder's limit
    /// ([`FrameDecoder::with_max_frame_len`](crate::FrameDecoder::with_max_frame_len)). The
    /// stream cannot be resynchronised: end the watch.
    #[error("watch frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// The length the prefix announced.
        len: u64,
        /// The limit.
        max: usize,
    },

    /// The stream ended inside a frame: the connection was cut. The events before it were
    /// complete; the watch simply ended.
    #[error("the stream ended inside a frame ({have} of {want} bytes received)")]
    CutMidFrame {
        /// Bytes of the frame (with its 4-byte prefix) that arrived.
        have: usize,
        /// Bytes the frame (with its prefix) should have had, or 4 if even the prefix was cut.
        want: usize,
    },
}

impl Error {
    /// A malformed-input error at the root of the path (the path is filled in as the error
    /// travels out of the decoder).
    pub(crate) fn malformed(reason: &'static str) -> Self {
        Error::Malformed {
            path: Path::default(),
            reason,
        }
    }

    pub(crate) fn rejected(reason: impl Into<String>) -> Self {
        Error::Rejected {
            path: Path::default(),
            reason: reason.into(),
        }
    }

    pub(crate) fn unknown_kind(api_version: &str, kind: &str) -> Self {
        Error::UnknownKind {
            api_version: printable(api_version),
            kind: printable(kind),
        }
    }

    /// Adds the segment the error passed through on its way out (innermost first).
    #[cold]
    pub(crate) fn at(mut self, segment: Segment) -> Self {
        if let Error::Malformed { path, .. } | Error::Rejected { path, .. } = &mut self {
            path.0.push(segment);
        }
        self
    }

    /// The path of a [`Error::Malformed`] or [`Error::Rejected`] error.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Error::Malformed { path, .. } | Error::Rejected { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// Type names from the envelope are shown only as far as they are plain identifiers.
fn printable(s: &str) -> String {
    if s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./-_".contains(&b))
    {
        s.to_owned()
    } else {
        "<unprintable>".to_owned()
    }
}

/// Where in an object an error happened: `Pod.spec.containers[2].image`. Built from the
/// schema (message and field names) and element positions only; map keys are not shown.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Path(Vec<Segment>);

/// One step of a [`Path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Segment {
    /// The message the path starts in (its short name).
    Message(&'static str),
    /// A field, by JSON name.
    Field(&'static str),
    /// An element of a repeated field or a list.
    Index(usize),
    /// The value of a map entry (the key is not shown: it comes from the body).
    MapValue,
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("the top level");
        }
        for (i, s) in self.0.iter().rev().enumerate() {
            match s {
                Segment::Message(m) => f.write_str(m)?,
                Segment::Field(name) if i == 0 => f.write_str(name)?,
                Segment::Field(name) => write!(f, ".{name}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::MapValue => f.write_str("[…]")?,
            }
        }
        Ok(())
    }
}

/// The error inside the deserializer: the [`Error`] boxed, so that the results passed
/// up and down serde's call chain for every field stay one word wide (errors are rare; the
/// results of the values that decode are not).
pub(crate) struct DeError(Box<Error>);

impl DeError {
    #[cold]
    pub(crate) fn malformed(reason: &'static str) -> Self {
        DeError(Box::new(Error::malformed(reason)))
    }

    #[cold]
    pub(crate) fn rejected(reason: impl Into<String>) -> Self {
        DeError(Box::new(Error::rejected(reason)))
    }

    /// Adds the segment the error passed through on its way out (innermost first).
    #[cold]
    pub(crate) fn at(mut self, segment: Segment) -> Self {
        if let Error::Malformed { path, .. } | Error::Rejected { path, .. } = &mut *self.0 {
            path.0.push(segment);
        }
        self
    }

    pub(crate) fn into_error(self) -> Error {
        *self.0
    }
}

impl From<Error> for DeError {
    fn from(e: Error) -> Self {
        DeError(Box::new(e))
    }
}

impl fmt::Debug for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for DeError {}

impl serde::de::Error for DeError {
    /// Messages from a target type's own `Deserialize` may quote the value: they are
    /// replaced by a fixed description (the path says where).
    #[cold]
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        DeError::rejected("the target type refused the value")
    }

    #[cold]
    fn invalid_type(unexp: serde::de::Unexpected<'_>, exp: &dyn serde::de::Expected) -> Self {
        DeError::rejected(format!("invalid type: {}, expected {exp}", kind(&unexp)))
    }

    #[cold]
    fn invalid_value(unexp: serde::de::Unexpected<'_>, exp: &dyn serde::de::Expected) -> Self {
        DeError::rejected(format!("invalid value: {}, expected {exp}", kind(&unexp)))
    }

    #[cold]
    fn invalid_length(len: usize, exp: &dyn serde::de::Expected) -> Self {
        DeError::rejected(format!("invalid length {len}, expected {exp}"))
    }

    #[cold]
    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        DeError::rejected(format!("unknown variant, expected one of {expected:?}"))
    }

    #[cold]
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        // Field names come from the schema, never from the body.
        DeError::rejected(format!(
            "unknown field `{field}`, expected one of {expected:?}"
        ))
    }

    #[cold]
    fn missing_field(field: &'static str) -> Self {
        DeError::rejected(format!("missing field `{field}`"))
    }

    #[cold]
    fn duplicate_field(field: &'static str) -> Self {
        DeError::rejected(format!("duplicate field `{field}`"))
    }
}

/// The kind of an unexpected value, without the value.
fn kind(u: &serde::de::Unexpected<'_>) -> &'static str {
    use serde::de::Unexpected as U;
    match u {
        U::Bool(_) => "boolean",
        U::Unsigned(_) | U::Signed(_) => "integer",
        U::Float(_) => "floating point number",
        U::Char(_) => "character",
        U::Str(_) => "string",
        U::Bytes(_) => "byte array",
        U::Unit => "null",
        U::Option => "optional value",
        U::NewtypeStruct => "newtype struct",
        U::Seq => "sequence",
        U::Map => "map",
        U::Enum => "enum",
        U::UnitVariant => "unit variant",
        U::NewtypeVariant => "newtype variant",
        U::TupleVariant => "tuple variant",
        U::StructVariant => "struct variant",
        U::Other(_) => "other value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::Error as _;

    #[test]
    fn paths_read_outermost_first() {
        let e = Error::malformed("truncated")
            .at(Segment::Field("image"))
            .at(Segment::Index(2))
            .at(Segment::Field("containers"))
            .at(Segment::Field("spec"))
            .at(Segment::Message("Pod"));
        assert_eq!(
            e.to_string(),
            "malformed protobuf at Pod.spec.containers[2].image: truncated"
        );
        let e = Error::rejected("x")
            .at(Segment::MapValue)
            .at(Segment::Field("data"))
            .at(Segment::Index(4))
            .at(Segment::Field("items"))
            .at(Segment::Message("ConfigMapList"));
        assert_eq!(
            e.to_string(),
            "cannot decode ConfigMapList.items[4].data[…] into the target type: x"
        );
    }

    #[test]
    fn serde_errors_never_carry_the_value() {
        use serde::de::Unexpected;
        let secret = "c2VjcmV0";
        let errs = [
            DeError::custom(format!("bad value {secret}")),
            DeError::invalid_type(Unexpected::Str(secret), &"an integer"),
            DeError::invalid_value(Unexpected::Str(secret), &"a date"),
            DeError::unknown_variant(secret, &["A", "B"]),
        ];
        for e in errs {
            assert!(!e.to_string().contains(secret), "{e}");
        }
        assert_eq!(
            DeError::invalid_type(Unexpected::Str(secret), &"i32").to_string(),
            "cannot decode the top level into the target type: invalid type: string, expected i32"
        );
    }

    #[test]
    fn unprintable_kinds_are_not_echoed() {
        let e = Error::unknown_kind("v1", "Pod\n\u{1b}[31m");
        assert_eq!(e.to_string(), "no protobuf schema for v1/<unprintable>");
    }
}
