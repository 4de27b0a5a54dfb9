//! Decoding the encoding: a serde `Deserializer` over the bytes.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::*;

/// Decodes a `T` from `bytes`, which [`encode`] wrote.
///
/// # Errors
/// [`CodecError::Rejected`] when `T` refuses the value, [`CodecError::Corrupt`] when the
/// bytes are not this format.
pub(crate) fn decode<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, CodecError> {
    let guard = NAMES.read().unwrap_or_else(PoisonError::into_inner);
    let names = guard.as_ref().map_or(&[][..], |n| &n.names[..]);
    let mut d = Decoder {
        input: bytes,
        names,
        depth: 0,
    };
    let value = T::deserialize(&mut d)?;
    if !d.input.is_empty() {
        return Err(CodecError::Corrupt("bytes after the value"));
    }
    Ok(value)
}

struct Decoder<'de, 'n> {
    input: &'de [u8],
    names: &'n [&'static str],
    depth: usize,
}

impl<'de, 'n> Decoder<'de, 'n> {
    fn byte(&mut self) -> Result<u8, CodecError> {
        let (&b, rest) = self
            .input
            .split_first()
            .ok_or(CodecError::Corrupt("truncated"))?;
        self.input = rest;
        Ok(b)
    }

    fn peek(&self) -> Result<u8, CodecError> {
        self.input
            .first()
            .copied()
            .ok_or(CodecError::Corrupt("truncated"))
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::Corrupt("varint too long"))
    }

    fn take(&mut self, len: u64) -> Result<&'de [u8], CodecError> {
        let len = usize::try_from(len).map_err(|_| CodecError::Corrupt("length"))?;
        if len > self.input.len() {
            return Err(CodecError::Corrupt("truncated"));
        }
        let (head, rest) = self.input.split_at(len);
        self.input = rest;
        Ok(head)
    }

    fn str_of(&mut self, len: u64) -> Result<&'de str, CodecError> {
        std::str::from_utf8(self.take(len)?).map_err(|_| CodecError::Corrupt("invalid UTF-8"))
    }

    /// A string value, for map keys and enum variants.
    fn string(&mut self) -> Result<&'de str, CodecError> {
        match self.byte()? {
            t @ SHORT_STR..=0x7f => self.str_of(u64::from(t - SHORT_STR)),
            STR => {
                let len = self.varint()?;
                self.str_of(len)
            }
            _ => Err(CodecError::Corrupt("expected a string")),
        }
    }

    /// The JSON text after a [`RAW_JSON`] tag.
    fn raw_json(&mut self) -> Result<&'de [u8], CodecError> {
        let len = self.varint()?;
        self.take(len)
    }

    /// A decoder of the content of the compound whose tag was just read, one level down;
    /// `self` is left after it.
    fn compound(&mut self) -> Result<Decoder<'de, 'n>, CodecError> {
        let len = self.varint()?;
        let content = self.take(len)?;
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(CodecError::Corrupt("nested too deep"));
        }
        Ok(Decoder {
            input: content,
            names: self.names,
            depth,
        })
    }
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de, '_> {
    type Error = CodecError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CodecError> {
        match self.byte()? {
            NULL => visitor.visit_unit(),
            FALSE => visitor.visit_bool(false),
            TRUE => visitor.visit_bool(true),
            UINT => visitor.visit_u64(self.varint()?),
            NEG => {
                let n = self.varint()?;
                let n = i64::try_from(n).map_err(|_| CodecError::Corrupt("integer"))?;
                visitor.visit_i64(-1 - n)
            }
            F64 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                visitor.visit_f64(f64::from_le_bytes(a))
            }
            t @ SHORT_STR..=0x7f => {
                visitor.visit_borrowed_str(self.str_of(u64::from(t - SHORT_STR))?)
            }
            STR => {
                let len = self.varint()?;
                visitor.visit_borrowed_str(self.str_of(len)?)
            }
            BYTES => {
                let len = self.varint()?;
                visitor.visit_borrowed_bytes(self.take(len)?)
            }
            SEQ => {
                let mut d = self.compound()?;
                let v = visitor.visit_seq(Seq { d: &mut d })?;
                read_to_end(&d, "a sequence longer than the type takes")?;
                Ok(v)
            }
            MAP => {
                let mut d = self.compound()?;
                let v = visitor.visit_map(Map { d: &mut d })?;
                read_to_end(&d, "a map the type did not read to its end")?;
                Ok(v)
            }
            STRUCT => {
                let mut d = self.compound()?;
                let v = visitor.visit_map(Struct { d: &mut d })?;
                read_to_end(&d, "a struct the type did not read to its end")?;
                Ok(v)
            }
            RAW_JSON => {
                let json = self.raw_json()?;
                from_json(json, |d| d.deserialize_any(visitor))
            }
            t if t >= SMALL_UINT => visitor.visit_u64(u64::from(t - SMALL_UINT)),
            _ => Err(CodecError::Corrupt("unknown tag")),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CodecError> {
        if self.peek()? == NULL {
            self.input = &self.input[1..];
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, CodecError> {
        if self.peek()? == RAW_JSON {
            self.input = &self.input[1..];
            let json = self.raw_json()?;
            return from_json(json, |d| visitor.visit_newtype_struct(d));
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CodecError> {
        if self.peek()? == MAP {
            self.input = &self.input[1..];
            let mut d = self.compound()?;
            let v = visitor.visit_enum(Enum { d: &mut d })?;
            read_to_end(&d, "an enum map with more than one entry")?;
            Ok(v)
        } else {
            let variant = self.string()?;
            visitor.visit_enum(variant.into_deserializer())
        }
    }

    fn is_human_readable(&self) -> bool {
        // The values are those of the JSON form (times and quantities as strings).
        true
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// That a compound's content was read to its end; else the type took less than it holds.
fn read_to_end(d: &Decoder<'_, '_>, what: &'static str) -> Result<(), CodecError> {
    if d.input.is_empty() {
        Ok(())
    } else {
        Err(CodecError::Rejected(what.into()))
    }
}

/// Runs `f` on a `serde_json` deserializer over `json`, which must hold one value.
fn from_json<'de, T>(
    json: &'de [u8],
    f: impl FnOnce(
        &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
    ) -> serde_json::Result<T>,
) -> Result<T, CodecError> {
    let mut d = serde_json::Deserializer::from_slice(json);
    let value = f(&mut d).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => CodecError::Rejected(json_error_kind(&e).into()),
        _ => CodecError::Corrupt("invalid JSON text"),
    })?;
    d.end()
        .map_err(|_| CodecError::Corrupt("bytes after the JSON text"))?;
    Ok(value)
}

/// What went wrong in `serde_json`, without its message (which may quote the value).
pub(super) fn json_error_kind(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "JSON: I/O",
        serde_json::error::Category::Syntax => "JSON: syntax",
        serde_json::error::Category::Data => "JSON: a value the type does not take",
        serde_json::error::Category::Eof => "JSON: ends early",
    }
}

struct Seq<'a, 'de, 'n> {
    d: &'a mut Decoder<'de, 'n>,
}

impl<'de> de::SeqAccess<'de> for Seq<'_, 'de, '_> {
    type Error = CodecError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, CodecError> {
        if self.d.input.is_empty() {
            return Ok(None);
        }
        seed.deserialize(&mut *self.d).map(Some)
    }
}

struct Map<'a, 'de, 'n> {
    d: &'a mut Decoder<'de, 'n>,
}

impl<'de> de::MapAccess<'de> for Map<'_, 'de, '_> {
    type Error = CodecError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, CodecError> {
        if self.d.input.is_empty() {
            return Ok(None);
        }
        seed.deserialize(&mut *self.d).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, CodecError> {
        seed.deserialize(&mut *self.d)
    }
}

/// A struct's fields: keys are the numbered names (or inline ones), handed to the type as
/// strings, exactly as a JSON object's keys.
struct Struct<'a, 'de, 'n> {
    d: &'a mut Decoder<'de, 'n>,
}

impl<'de> de::MapAccess<'de> for Struct<'_, 'de, '_> {
    type Error = CodecError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, CodecError> {
        if self.d.input.is_empty() {
            return Ok(None);
        }
        let id = self.d.varint()?;
        let id = u32::try_from(id).map_err(|_| CodecError::Corrupt("field id"))?;
        let key: &'de str = match id {
            INLINE_NAME => self.d.string()?,
            id => {
                let i = id
                    .checked_sub(FIRST_ID)
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or(CodecError::Corrupt("field id"))?;
                self.d
                    .names
                    .get(i)
                    .copied()
                    .ok_or(CodecError::Corrupt("unknown field id"))?
            }
        };
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, CodecError> {
        seed.deserialize(&mut *self.d)
    }
}

struct Enum<'a, 'de, 'n> {
    d: &'a mut Decoder<'de, 'n>,
}

impl<'de> de::EnumAccess<'de> for Enum<'_, 'de, '_> {
    type Error = CodecError;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), CodecError> {
        let name = self.d.string()?;
        let v = seed.deserialize(de::value::BorrowedStrDeserializer::<CodecError>::new(name))?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for Enum<'_, 'de, '_> {
    type Error = CodecError;
    fn unit_variant(self) -> Result<(), CodecError> {
        de::Deserialize::deserialize(&mut *self.d)
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, CodecError> {
        seed.deserialize(&mut *self.d)
    }
    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, CodecError> {
        de::Deserializer::deserialize_any(&mut *self.d, visitor)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CodecError> {
        de::Deserializer::deserialize_any(&mut *self.d, visitor)
    }
}
