//! Single values: JSON keys from the schema, Go strings, numbers, and each field's value in
//! its JSON form (the special types, embedded JSON).

use serde::de::{self, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

use crate::error::DeError as Error;
use crate::schema::Ty;
use crate::special::{self, JsonNumber};
use crate::wire::{self, Reader, Value};

use super::repeated::{Occurrences, RepeatedAccess};
use super::{MessageAccess, Result, is_zero_time, malformed, nested_type_meta};

/// A JSON key from the schema.
pub(super) struct KeyDe(pub(super) &'static str);

impl<'de> de::Deserializer<'de> for KeyDe {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_str(self.0)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// A string from the body (a map key, or a string value), as encoding/json would write it.
pub(super) fn visit_go_str<'de, V: Visitor<'de>>(b: &'de [u8], visitor: V) -> Result<V::Value> {
    match special::go_str(b) {
        std::borrow::Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
        std::borrow::Cow::Owned(s) => visitor.visit_string(s),
    }
}

/// A map key from the body.
pub(super) struct GoStrDe<'de>(pub(super) &'de [u8]);

impl<'de> de::Deserializer<'de> for GoStrDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visit_go_str(self.0, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let s: std::borrow::Cow<'de, str> = special::go_str(self.0);
        match s {
            std::borrow::Cow::Borrowed(s) => visitor.visit_enum(s.into_deserializer()),
            std::borrow::Cow::Owned(s) => visitor.visit_enum(s.into_deserializer()),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

pub(super) fn visit_number<'de, V: Visitor<'de>>(n: JsonNumber, visitor: V) -> Result<V::Value> {
    match n {
        JsonNumber::U64(n) => visitor.visit_u64(n),
        JsonNumber::I64(n) => visitor.visit_i64(n),
        JsonNumber::F64(n) => visitor.visit_f64(n),
    }
}

/// serde_json hands non-negative integers to `visit_u64` and negative ones to `visit_i64`.
pub(super) fn visit_int<'de, V: Visitor<'de>>(n: i64, visitor: V) -> Result<V::Value> {
    match u64::try_from(n) {
        Ok(u) => visitor.visit_u64(u),
        Err(_) => visitor.visit_i64(n),
    }
}

/// One value of a known type.
pub(super) struct ValueDe<'de> {
    pub(super) ty: &'static Ty,
    pub(super) v: Value<'de>,
}

impl<'de> ValueDe<'de> {
    pub(super) fn len(&self) -> Result<&'de [u8]> {
        match self.v {
            Value::Len(b) => Ok(b),
            _ => Err(Error::malformed("wrong wire type")),
        }
    }

    pub(super) fn varint(&self) -> Result<u64> {
        match self.v {
            Value::Varint(n) => Ok(n),
            _ => Err(Error::malformed("wrong wire type")),
        }
    }

    /// The raw JSON a RawExtension or FieldsV1 holds, `None` for JSON `null`.
    pub(super) fn raw_json(&self) -> Result<Option<&'de [u8]>> {
        let raw = wire::last_len(self.len()?, 1).map_err(malformed)?;
        Ok(match (self.ty, raw) {
            // A FieldsV1 writes `null` for empty bytes too.
            (Ty::FieldsV1, Some([])) => None,
            (_, raw) => raw,
        })
    }

    /// The types [`deserialize_any`](de::Deserializer::deserialize_any) does not handle
    /// inline: special types, bytes, unsigned and floating-point numbers, wrapped lists.
    #[inline(never)]
    pub(super) fn deserialize_other<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.ty {
            Ty::String | Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Message(_) => {
                de::Deserializer::deserialize_any(self, visitor)
            }
            Ty::Bytes => visitor.visit_string(special::base64(self.len()?)),
            Ty::Uint32 => visitor.visit_u64(u64::from(self.varint()? as u32)),
            Ty::Uint64 => visitor.visit_u64(self.varint()?),
            Ty::Double => match self.v {
                Value::Fixed64(bits) => visit_number(
                    special::float_json(f64::from_bits(bits)).map_err(malformed)?,
                    visitor,
                ),
                _ => Err(Error::malformed("wrong wire type")),
            },
            Ty::Float => match self.v {
                Value::Fixed32(bits) => visit_number(
                    special::float32_json(f32::from_bits(bits)).map_err(malformed)?,
                    visitor,
                ),
                _ => Err(Error::malformed("wrong wire type")),
            },
            Ty::Time | Ty::MicroTime => {
                let t = special::Timestamp::parse(self.len()?).map_err(malformed)?;
                match t.json(matches!(self.ty, Ty::MicroTime)) {
                    Some(s) => visitor.visit_str(s.as_str()),
                    None => visitor.visit_unit(),
                }
            }
            Ty::Duration => {
                visitor.visit_string(special::duration_json(self.len()?).map_err(malformed)?)
            }
            Ty::Quantity => match wire::last_len(self.len()?, 1).map_err(malformed)? {
                Some(s) => visit_go_str(s, visitor),
                // The zero Quantity.
                None => visitor.visit_borrowed_str("0"),
            },
            Ty::IntOrString => match special::int_or_string(self.len()?).map_err(malformed)? {
                special::IntOrString::Int(n) => visit_int(i64::from(n), visitor),
                special::IntOrString::Str(s) => visit_go_str(s, visitor),
            },
            Ty::RawExtension | Ty::FieldsV1 => match self.raw_json()? {
                None => visitor.visit_unit(),
                Some(raw) => embedded_json(raw, visitor),
            },
            // Present, even without items, Go unmarshals it into a non-nil slice: `[]`.
            Ty::WrappedList(elem) => visitor.visit_seq(RepeatedAccess::new(
                elem,
                Occurrences {
                    number: 1,
                    reader: Reader::new(self.len()?),
                    run_end: None,
                },
            )),
            Ty::Map(_) => Err(Error::malformed("a map outside a repeated field")),
        }
    }

    /// Whether the JSON of this value is `null`.
    pub(super) fn is_null(&self) -> Result<bool> {
        match self.ty {
            Ty::Time | Ty::MicroTime => is_zero_time(self.ty, self.v),
            Ty::RawExtension | Ty::FieldsV1 => Ok(self.raw_json()?.is_none()),
            _ => Ok(false),
        }
    }
}

impl<'de> de::Deserializer<'de> for ValueDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        // What objects are mostly made of stays inline; the rest is out of line, so that
        // this function (instantiated for every visitor) stays small.
        match self.ty {
            Ty::String => visit_go_str(self.len()?, visitor),
            Ty::Bool => visitor.visit_bool(self.varint()? != 0),
            // Go reads an int32 from the low 32 bits of the varint.
            Ty::Int32 => visit_int(i64::from(self.varint()? as i32), visitor),
            Ty::Int64 => visit_int(self.varint()? as i64, visitor),
            Ty::Message(msg) => {
                visitor.visit_map(MessageAccess::new(msg, self.len()?, nested_type_meta(msg))?)
            }
            _ => self.deserialize_other(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match (self.ty, self.v) {
            (Ty::String, Value::Len(b)) => visit_go_str(b, visitor),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.is_null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match (self.ty, self.v) {
            (Ty::String, Value::Len(b)) => GoStrDe(b).deserialize_enum(name, variants, visitor),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

use de::Deserializer as _;

/// JSON bytes inside the protobuf (RawExtension, FieldsV1), handed to the visitor through
/// serde_json, as the JSON decode hands them.
pub(super) fn embedded_json<'de, V: Visitor<'de>>(raw: &'de [u8], visitor: V) -> Result<V::Value> {
    if !special::looks_like_json(raw) {
        return Err(Error::malformed(if special::looks_like_cbor(raw) {
            "embedded CBOR (RawExtension or FieldsV1), which this crate does not decode"
        } else {
            "embedded bytes that are neither JSON nor CBOR"
        }));
    }
    let mut de = serde_json::Deserializer::from_slice(raw);
    let value = de.deserialize_any(visitor).map_err(json_error)?;
    de.end().map_err(json_error)?;
    Ok(value)
}

/// serde_json's syntax errors carry positions only; its data errors may quote the value.
pub(super) fn json_error(e: serde_json::Error) -> Error {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => Error::malformed("invalid embedded JSON"),
        Category::Data | Category::Io => Error::rejected("the target type refused embedded JSON"),
    }
}
