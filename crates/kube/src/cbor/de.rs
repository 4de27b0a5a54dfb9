//! A serde deserializer of CBOR (RFC 8949) as the API server writes it, straight from the
//! bytes.
//!
//! What the API server writes is a subset: definite lengths only (its encoder and decoder
//! forbid indefinite ones), text-string map keys, the self-described tag 55799 in front of
//! each top-level item, and objects as they would be in JSON. So a [`Deserializer`] hands a
//! type what the same object's JSON would: maps as maps, text as `&str` borrowed from the
//! body, integers and floats, `null`. The API server writes a Go string as a byte string
//! (its encoder's choice, sparing the UTF-8 check) and a `[]byte` as a byte string tagged
//! 22 ("expected conversion to base64"): a byte string is handed over as the string it
//! holds, a tagged one as the base64 text JSON has. Other tags are looked through. Anything
//! else (indefinite lengths, reserved values, a map key that is not a string, nesting
//! deeper than [`MAX_DEPTH`]) is an [`Error`] naming what it was, never a
//! panic; no value from the body is quoted.
//!
//! [`item_len`] finds where a data item ends (a watch's CBOR sequence has no other
//! framing), and [`Raw`] takes one item's bytes undecoded.

use std::fmt;

use serde::de::{self, DeserializeSeed, Visitor};

/// Arrays and maps nested deeper than this are refused (the API server's own decoder
/// stops at a similar depth; a deeper item would only serve to exhaust the stack).
pub(super) const MAX_DEPTH: usize = 100;

/// Why CBOR did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Error {
    /// The bytes end inside a data item.
    Cut,
    /// Not CBOR as the API server writes it: what was found.
    Malformed(&'static str),
    /// The type decoded into refused the value (serde's message).
    Rejected(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cut => f.write_str("CBOR cut short"),
            Error::Malformed(what) => write!(f, "malformed CBOR: {what}"),
            Error::Rejected(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::Rejected(msg.to_string())
    }
    // Without the value: it may come from a Secret.
    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Error::Rejected(format!("invalid type: {}, expected {exp}", kind(&unexp)))
    }
    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Error::Rejected(format!("invalid value: {}, expected {exp}", kind(&unexp)))
    }
    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        Error::Rejected(format!("invalid length {len}, expected {exp}"))
    }
}

/// What kind of value was unexpected, not the value.
fn kind(unexp: &de::Unexpected<'_>) -> &'static str {
    use de::Unexpected as U;
    match unexp {
        U::Bool(_) => "a boolean",
        U::Unsigned(_) | U::Signed(_) => "an integer",
        U::Float(_) => "a float",
        U::Char(_) | U::Str(_) => "a string",
        U::Bytes(_) => "bytes",
        U::Unit | U::Option => "null",
        U::Seq => "an array",
        U::Map => "a map",
        _ => "another value",
    }
}

/// The name [`Raw`] asks for, which this deserializer answers with the item's bytes.
const RAW: &str = "$kinformer::cbor::Raw";

/// One data item's bytes, tags included, undecoded (as serde_json's `RawValue`): what a
/// list's items and an event's object are taken as before each is decoded on its own.
#[derive(Clone, Copy, Debug)]
pub(super) struct Raw<'de>(pub(super) &'de [u8]);

impl<'de: 'a, 'a> de::Deserialize<'de> for Raw<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = Raw<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CBOR data item")
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Raw<'de>, E> {
                Ok(Raw(v))
            }
        }
        d.deserialize_newtype_struct(RAW, RawVisitor)
    }
}

fn malformed(what: &'static str) -> Error {
    Error::Malformed(what)
}

/// A data item's head: its major type and argument.
#[derive(Clone, Copy)]
struct Head {
    major: u8,
    /// The additional information (low five bits).
    info: u8,
    /// The argument: a length, a count, a value or a tag number.
    arg: u64,
}

/// Reads data items from a slice.
pub(super) struct Deserializer<'de> {
    buf: &'de [u8],
    pos: usize,
    depth: usize,
}

impl<'de> Deserializer<'de> {
    pub(super) fn new(buf: &'de [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            depth: 0,
        }
    }

    /// Fails unless every byte was read.
    pub(super) fn end(&self) -> Result<(), Error> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(malformed("bytes after the data item"))
        }
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(Error::Cut)?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn head(&mut self) -> Result<Head, Error> {
        let b = self.take(1)?[0];
        let (major, info) = (b >> 5, b & 0x1f);
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(self.fixed()?)),
            26 => u64::from(u32::from_be_bytes(self.fixed()?)),
            27 => u64::from_be_bytes(self.fixed()?),
            31 => {
                return Err(malformed(
                    "an indefinite length (the API server never writes one)",
                ));
            }
            _ => return Err(malformed("a reserved additional information value")),
        };
        Ok(Head { major, info, arg })
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// The next item's head, tags looked through.
    fn untagged_head(&mut self) -> Result<Head, Error> {
        self.tagged_head().map(|(head, _)| head)
    }

    /// The next item's head, and the last tag in front of it (if any).
    fn tagged_head(&mut self) -> Result<(Head, Option<u64>), Error> {
        let mut tag = None;
        loop {
            let head = self.head()?;
            if head.major != 6 {
                return Ok((head, tag));
            }
            tag = Some(head.arg);
        }
    }

    /// The next item's head past its tags, all left to read again (a tag says how the
    /// item is read: see `deserialize_any`).
    fn peek(&mut self) -> Result<Head, Error> {
        let at = self.pos;
        let head = self.untagged_head();
        self.pos = at;
        head
    }

    fn len_of(arg: u64) -> Result<usize, Error> {
        usize::try_from(arg).map_err(|_| malformed("a length past the address space"))
    }

    /// A string: a text string, or a byte string (what the API server writes a Go string
    /// as), UTF-8 either way.
    fn text(&mut self, head: Head) -> Result<&'de str, Error> {
        if !matches!(head.major, 2 | 3) {
            return Err(malformed("a map key or name that is not a string"));
        }
        let bytes = self.take(Deserializer::len_of(head.arg)?)?;
        std::str::from_utf8(bytes).map_err(|_| malformed("a string that is not UTF-8"))
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, Error>) -> Result<T, Error> {
        if self.depth >= MAX_DEPTH {
            return Err(malformed("nested past the depth limit"));
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }
}

/// How long the data item at the start of `buf` is, tags included: `Ok(None)` while it is
/// not all there yet (a watch stream's next chunk will tell).
///
/// # Errors
/// When the bytes there cannot start a data item the API server writes.
pub(super) fn item_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    let mut de = Deserializer::new(buf);
    match skip(&mut de) {
        Ok(()) => Ok(Some(de.pos)),
        Err(Error::Cut) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Steps over one data item.
fn skip(de: &mut Deserializer<'_>) -> Result<(), Error> {
    let head = de.untagged_head()?;
    match head.major {
        0 | 1 => Ok(()),
        2 | 3 => de.take(Deserializer::len_of(head.arg)?).map(|_| ()),
        4 | 5 => de.nested(|de| {
            let items = if head.major == 5 { 2 } else { 1 };
            for _ in 0..head.arg.saturating_mul(items) {
                skip(de)?;
            }
            Ok(())
        }),
        7 => simple(head).map(|_| ()),
        _ => unreachable_major(),
    }
}

#[cold]
fn unreachable_major() -> Result<(), Error> {
    Err(malformed("an unknown major type"))
}

/// A simple value or float of major type 7.
enum Simple {
    Bool(bool),
    Null,
    Float(f64),
}

fn simple(head: Head) -> Result<Simple, Error> {
    Ok(match (head.info, head.arg) {
        (20, _) => Simple::Bool(false),
        (21, _) => Simple::Bool(true),
        (22 | 23, _) => Simple::Null,
        #[allow(clippy::cast_possible_truncation)]
        (25, bits) => Simple::Float(half_to_f64(bits as u16)),
        #[allow(clippy::cast_possible_truncation)]
        (26, bits) => Simple::Float(f64::from(f32::from_bits(bits as u32))),
        (27, bits) => Simple::Float(f64::from_bits(bits)),
        _ => return Err(malformed("an unassigned simple value")),
    })
}

/// A byte string as the JSON text its tag asks for (RFC 8949, 3.4.5.2): base64url without
/// padding (21), base64 (22) or base16 (23).
fn encode_expected(tag: Option<u64>, bytes: &[u8]) -> String {
    const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    if tag == Some(23) {
        return bytes.iter().map(|b| format!("{b:02x}")).collect();
    }
    let (alphabet, pad) = if tag == Some(21) {
        (URL, false)
    } else {
        (STD, true)
    };
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 0x3f) as usize]));
        }
        if pad {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

/// An IEEE 754 half-precision float (RFC 8949, appendix D).
fn half_to_f64(h: u16) -> f64 {
    let exp = (h >> 10) & 0x1f;
    let mant = f64::from(h & 0x3ff);
    let val = match exp {
        0 => mant * 2f64.powi(-24),
        31 if mant == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (mant + 1024.0) * 2f64.powi(i32::from(e) - 25),
    };
    if h & 0x8000 != 0 { -val } else { val }
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let (head, tag) = self.tagged_head()?;
        match head.major {
            0 => visitor.visit_u64(head.arg),
            1 => match i64::try_from(head.arg) {
                Ok(n) => visitor.visit_i64(-1 - n),
                Err(_) => visitor.visit_i128(-1 - i128::from(head.arg)),
            },
            2 => {
                let bytes = self.take(Deserializer::len_of(head.arg)?)?;
                match tag {
                    // A `[]byte` field: the base64 text its JSON has (tag 22, "expected
                    // conversion to base64"; 21 is base64url, 23 base16).
                    Some(21..=23) => visitor.visit_string(encode_expected(tag, bytes)),
                    // A Go string, which the API server writes as a byte string.
                    _ => match std::str::from_utf8(bytes) {
                        Ok(s) => visitor.visit_borrowed_str(s),
                        Err(_) => visitor.visit_borrowed_bytes(bytes),
                    },
                }
            }
            3 => visitor.visit_borrowed_str(self.text(head)?),
            4 => self.nested(|de| {
                let mut seq = Items { de, left: head.arg };
                let v = visitor.visit_seq(&mut seq)?;
                // A visitor that stopped early leaves nothing unread.
                while seq.left > 0 {
                    seq.left -= 1;
                    skip(seq.de)?;
                }
                Ok(v)
            }),
            5 => self.nested(|de| {
                let mut map = Items { de, left: head.arg };
                let v = visitor.visit_map(&mut map)?;
                while map.left > 0 {
                    map.left -= 1;
                    skip(map.de)?;
                    skip(map.de)?;
                }
                Ok(v)
            }),
            7 => match simple(head)? {
                Simple::Bool(b) => visitor.visit_bool(b),
                Simple::Null => visitor.visit_unit(),
                Simple::Float(f) => visitor.visit_f64(f),
            },
            _ => Err(malformed("an unknown major type")),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let head = self.peek()?;
        if head.major == 7 && matches!(head.info, 22 | 23) {
            self.untagged_head()?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == RAW {
            let start = self.pos;
            skip(self)?;
            return visitor.visit_borrowed_bytes(&self.buf[start..self.pos]);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let head = self.peek()?;
        match head.major {
            2 | 3 => {
                let head = self.untagged_head()?;
                let variant = self.text(head)?;
                visitor.visit_enum(de::value::BorrowedStrDeserializer::new(variant))
            }
            5 if head.arg == 1 => {
                self.untagged_head()?;
                self.nested(|de| visitor.visit_enum(Variant { de }))
            }
            _ => Err(malformed(
                "an enum that is neither a text string nor a one-entry map",
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        skip(self)?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// The elements of an array, or the entries of a map.
struct Items<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    left: u64,
}

impl<'de> de::SeqAccess<'de> for Items<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok().map(|n| n.min(4096))
    }
}

impl<'de> de::MapAccess<'de> for Items<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let head = self.de.untagged_head()?;
        let key = self.de.text(head)?;
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.de)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok().map(|n| n.min(4096))
    }
}

/// An enum written as `{variant: content}`.
struct Variant<'a, 'de> {
    de: &'a mut Deserializer<'de>,
}

impl<'a, 'de> de::EnumAccess<'de> for Variant<'a, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let head = self.de.untagged_head()?;
        let name = self.de.text(head)?;
        let v = seed.deserialize(de::value::BorrowedStrDeserializer::<Error>::new(name))?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        de::Deserialize::deserialize(&mut *self.de)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }
}

/// Decodes one whole CBOR data item (the self-described tag in front allowed) as `T`.
///
/// # Errors
/// When it is not CBOR the API server writes, `T` refuses it, or bytes follow it.
pub(super) fn from_slice<'de, T: de::Deserialize<'de>>(buf: &'de [u8]) -> Result<T, Error> {
    let mut de = Deserializer::new(buf);
    let v = T::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

#[cfg(test)]
mod tests;
