//! The same view of a message as the deserializer's, handed to a `serde::Serializer`
//! instead of a target type: protobuf transcoded into another format without building an
//! object in between.
//!
//! The walk is the deserializer's own ([`MessageAccess::next_field`] and
//! [`MessageAccess::take_value`], the map entries' and repeated elements' readers), so the
//! serializer sees exactly the JSON the deserializer presents — the same keys in the same
//! order, zero values left out, inlined structs flattened, special types in their JSON
//! form — with two differences that make it cheaper than decoding:
//!
//! - messages are structs: each field is written with `serialize_field` under its JSON
//!   name as a `&'static str` from the schema table (an encoder can number names);
//! - `FieldsV1` and `RawExtension` are the JSON text the server sent, written as a newtype
//!   struct of that name around a `serde_json` `RawValue` (checked to be JSON, not
//!   parsed into a tree): serde_json writes it verbatim, kinformer-compact-store keeps it
//!   as text.
//!
//! Formats that need exact lengths up front (bincode and the like) are not served: how many
//! fields a message has present is known only once it is read.
//!
//! Errors keep the deserializer's typed form: the first failure is kept aside with its path
//! while the serializer's error carries it out, then handed back as an [`Error`].

use std::cell::Cell;

use serde::de::{self, Deserializer as _, Visitor};
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq, SerializeStruct, Serializer};
use serde_json::value::RawValue;

use crate::error::{DeError, Error, Segment};
use crate::schema::{Message, Ty};
use crate::special;
use crate::wire::{Reader, Value};

use super::repeated::{MapEntries, Occurrences, RepeatedAccess};
use super::value::ValueDe;
use super::{MessageAccess, Taken, nested_type_meta};

/// A message to transcode: `Serialize` it into any serializer.
pub(crate) struct Transcode<'de, 'f> {
    pub(crate) msg: &'static Message,
    pub(crate) buf: &'de [u8],
    pub(crate) type_meta: Option<(&'de str, &'de str)>,
    pub(crate) failure: &'f Failure,
}

/// The first failure of a transcode, with the path it passed through on its way out.
#[derive(Default)]
pub(crate) struct Failure(Cell<Option<DeError>>);

impl Failure {
    /// Keeps `e` (the first one only) and gives the serializer an error to carry it out.
    #[cold]
    fn fail<E: ser::Error>(&self, e: DeError) -> E {
        let first = self.0.take().unwrap_or(e);
        self.0.set(Some(first));
        E::custom("protobuf transcoding failed")
    }

    /// Adds where the failure passed through; a failure of the serializer itself (nothing
    /// kept yet) is kept as one here.
    #[cold]
    fn at(&self, segment: Segment) {
        let e = self
            .0
            .take()
            .unwrap_or_else(|| DeError::rejected("the serializer refused the value"));
        self.0.set(Some(e.at(segment)));
    }

    /// Forgets the failure of an earlier attempt.
    pub(crate) fn clear(&self) {
        self.0.set(None);
    }

    /// The failure as the crate's error, once the transcode gave up.
    pub(crate) fn into_error(self, msg: &'static Message) -> Error {
        self.0
            .into_inner()
            .unwrap_or_else(|| DeError::rejected("the serializer refused the value"))
            .at(Segment::Message(msg.short_name()))
            .into_error()
    }
}

impl Serialize for Transcode<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let failure = self.failure;
        let mut access =
            MessageAccess::new(self.msg, self.buf, self.type_meta).map_err(|e| failure.fail(e))?;
        // How many fields will be written is known only at the end (zero values and unset
        // fields are left out): the length given is the most there can be, which
        // self-describing formats take as a hint (serde_json writes `{}` at once for 0).
        let most = self.msg.fields.len() + if self.type_meta.is_some() { 2 } else { 0 };
        let mut out = serializer.serialize_struct(self.msg.name, most)?;
        loop {
            let key = match access.next_field() {
                Ok(Some(key)) => key,
                Ok(None) => break,
                Err(e) => return Err(failure.fail(e)),
            };
            let written = match access.take_value() {
                Err(e) => Err(failure.fail(e)),
                Ok(Taken::Str(s)) => out.serialize_field(key, s),
                Ok(Taken::Single(field, v)) => out.serialize_field(
                    key,
                    &ValueSer {
                        ty: &field.ty,
                        v,
                        failure,
                    },
                ),
                Ok(Taken::Repeated(field, buf, pos, one_run)) => {
                    let occurrences = Occurrences {
                        number: field.number,
                        reader: Reader::at(buf, pos),
                        run_end: one_run.then_some(&access.run_end),
                    };
                    let written = out.serialize_field(
                        key,
                        &RepeatedSer {
                            ty: &field.ty,
                            occurrences: Cell::new(Some(occurrences)),
                            failure,
                        },
                    );
                    access.after_repeated(buf);
                    written
                }
            };
            if let Err(e) = written {
                failure.at(Segment::Field(key));
                return Err(e);
            }
        }
        out.end()
    }
}

/// One value of a known type.
struct ValueSer<'de, 'f> {
    ty: &'static Ty,
    v: Value<'de>,
    failure: &'f Failure,
}

impl Serialize for ValueSer<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let failure = self.failure;
        let value = ValueDe {
            ty: self.ty,
            v: self.v,
        };
        match self.ty {
            Ty::Message(msg) => {
                let buf = value.len().map_err(|e| failure.fail(e))?;
                Transcode {
                    msg,
                    buf,
                    type_meta: nested_type_meta(msg),
                    failure,
                }
                .serialize(serializer)
            }
            Ty::RawExtension | Ty::FieldsV1 => match value.raw_json() {
                Err(e) => Err(failure.fail(e)),
                Ok(None) => serializer.serialize_unit(),
                Ok(Some(raw)) => {
                    let raw = raw_json(raw).map_err(|e| failure.fail(e))?;
                    let name = if matches!(self.ty, Ty::FieldsV1) {
                        "FieldsV1"
                    } else {
                        "RawExtension"
                    };
                    serializer.serialize_newtype_struct(name, raw)
                }
            },
            Ty::WrappedList(elem) => {
                let buf = value.len().map_err(|e| failure.fail(e))?;
                let occurrences = Occurrences {
                    number: 1,
                    reader: Reader::new(buf),
                    run_end: None,
                };
                elements(elem, occurrences, failure, serializer)
            }
            // Every other type is a scalar in JSON: what the deserializer hands a visitor
            // goes to the serializer as it is.
            _ => match value.deserialize_any(Forward(serializer)) {
                Ok(written) => written,
                Err(e) => Err(failure.fail(e)),
            },
        }
    }
}

/// JSON text embedded in the protobuf, checked (not parsed into a tree).
fn raw_json(raw: &[u8]) -> Result<&RawValue, DeError> {
    if !special::looks_like_json(raw) {
        return Err(DeError::malformed(if special::looks_like_cbor(raw) {
            "embedded CBOR (RawExtension or FieldsV1), which this crate does not decode"
        } else {
            "embedded bytes that are neither JSON nor CBOR"
        }));
    }
    serde_json::from_slice(raw).map_err(|_| DeError::malformed("invalid embedded JSON"))
}

/// A repeated field: a sequence, or a map for a map field. `Serialize` takes `&self`; the
/// occurrences are read once.
struct RepeatedSer<'de, 'a, 'f> {
    ty: &'static Ty,
    occurrences: Cell<Option<Occurrences<'de, 'a>>>,
    failure: &'f Failure,
}

impl Serialize for RepeatedSer<'_, '_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let failure = self.failure;
        let Some(occurrences) = self.occurrences.take() else {
            return Err(failure.fail(DeError::rejected("a repeated field written twice")));
        };
        let Ty::Map(value) = self.ty else {
            return elements(self.ty, occurrences, failure, serializer);
        };
        let mut entries = MapEntries {
            value,
            occurrences,
            pending: None,
        };
        let mut out = serializer.serialize_map(None)?;
        loop {
            let (key, v) = match entries.next_entry() {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(e) => return Err(failure.fail(e)),
            };
            let written = out.serialize_entry(
                &*special::go_str(key),
                &ValueSer {
                    ty: value,
                    v,
                    failure,
                },
            );
            if let Err(e) = written {
                failure.at(Segment::MapValue);
                return Err(e);
            }
        }
        out.end()
    }
}

/// The elements of a repeated field or a wrapped list, as a sequence.
fn elements<S: Serializer>(
    elem: &'static Ty,
    occurrences: Occurrences<'_, '_>,
    failure: &Failure,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut access = RepeatedAccess::new(elem, occurrences);
    let mut out = serializer.serialize_seq(None)?;
    let mut index = 0;
    loop {
        let v = match access.next_value() {
            Ok(Some(v)) => v,
            Ok(None) => break,
            Err(e) => return Err(failure.fail(e.at(Segment::Index(index)))),
        };
        if let Err(e) = out.serialize_element(&ValueSer {
            ty: elem,
            v,
            failure,
        }) {
            failure.at(Segment::Index(index));
            return Err(e);
        }
        index += 1;
    }
    out.end()
}

/// A visitor that writes the scalar it is handed to a serializer.
struct Forward<S>(S);

impl<'de, S: Serializer> Visitor<'de> for Forward<S> {
    type Value = Result<S::Ok, S::Error>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a scalar")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(self.0.serialize_bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(self.0.serialize_i64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(self.0.serialize_u64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(self.0.serialize_f64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.serialize_str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.0.serialize_unit())
    }
}
