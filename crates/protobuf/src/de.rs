//! A `serde::Deserializer` over protobuf bytes, driven by the schema table.
//!
//! Each message is presented as a map from JSON names to values, the way serde_json presents
//! the object encoding/json writes for the same Go value: the same keys, the same kinds of
//! value (string, integer, float, bool, array, map, null), zero values left out where
//! `omitempty` leaves them out, inlined structs flattened, special types in their JSON form.
//! A target type that decodes the JSON therefore decodes the protobuf, whatever it is.
//!
//! The deserializer is self-describing: `deserialize_any` always knows what comes next,
//! so `serde_json::Value`, `#[serde(flatten)]` and untagged enums work as with JSON. Fields
//! the target does not want are skipped without being decoded (`deserialize_ignored_any`).

use std::cell::Cell;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

use crate::error::{DeError as Error, Segment};
use crate::schema::{Field, Message, Ty, flags, meta};
use crate::special::{self, JsonNumber};
use crate::wire::{self, Reader, Value, WireType};

type Result<T> = std::result::Result<T, Error>;

fn malformed(fault: wire::Fault) -> Error {
    Error::malformed(fault)
}

/// The methods of a deserializer for a value that is present (never JSON `null`) and
/// self-describing: options are `Some`, newtypes are transparent, an ignored value is not
/// decoded at all, and everything else goes to `deserialize_any`.
macro_rules! present_value_methods {
    () => {
        fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            visitor.visit_some(self)
        }

        fn deserialize_newtype_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            visitor: V,
        ) -> Result<V::Value> {
            visitor.visit_newtype_struct(self)
        }

        fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            visitor.visit_unit()
        }

        forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum identifier
        }
    };
}

/// A whole message. `type_meta` (apiVersion, kind) is presented first, as the API server's
/// JSON writes them for a top-level object.
pub(crate) struct MessageDe<'de> {
    pub(crate) msg: &'static Message,
    pub(crate) buf: &'de [u8],
    pub(crate) type_meta: Option<(&'de str, &'de str)>,
}

impl<'de> de::Deserializer<'de> for MessageDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_map(MessageAccess::new(self.msg, self.buf, self.type_meta))
    }

    present_value_methods!();
}

/// The apiVersion and kind JSON shows on a nested object of this message, though protobuf
/// does not carry them: the items of a `PartialObjectMetadataList`, which the API server
/// writes with their type (items of other lists, and other embedded objects, have none in
/// the JSON of objects the server writes, or lose it in protobuf as Go clients do).
pub(crate) fn nested_type_meta(msg: &Message) -> Option<(&'static str, &'static str)> {
    std::ptr::eq(msg, meta::PARTIAL_OBJECT_METADATA)
        .then_some(("meta.k8s.io/v1", "PartialObjectMetadata"))
}

/// The wire type a single value of `ty` is written with.
fn wire_type_of(ty: &Ty) -> WireType {
    match ty {
        Ty::Bool | Ty::Int32 | Ty::Int64 | Ty::Uint32 | Ty::Uint64 => WireType::Varint,
        Ty::Double => WireType::Fixed64,
        Ty::Float => WireType::Fixed32,
        _ => WireType::Len,
    }
}

/// Which repeated fields of a message were already handed out (all their occurrences are
/// gathered when the first one is met), by field index.
#[derive(Default)]
struct Gathered {
    bits: u64,
    /// Indices of 64 and above (no Kubernetes message has that many fields today).
    more: Vec<usize>,
}

impl Gathered {
    /// Marks `i`; true if it was marked before.
    fn test_and_set(&mut self, i: usize) -> bool {
        if i < 64 {
            let bit = 1u64 << i;
            let was = self.bits & bit != 0;
            self.bits |= bit;
            was
        } else if self.more.contains(&i) {
            true
        } else {
            self.more.push(i);
            false
        }
    }
}

/// One message being read: the top-level one, or an inlined one inside it.
struct Frame<'de> {
    msg: &'static Message,
    reader: Reader<'de>,
    hint: usize,
    gathered: Gathered,
    /// Which repeated fields (by index, below 64) occur in more than one run, found by one
    /// scan when the first repeated field is met. Go writes each repeated field as one run,
    /// so the elements of the others end where their run ends; the scan spares a walk to
    /// the end of the message for every repeated field.
    split: Option<u64>,
}

impl<'de> Frame<'de> {
    fn new(msg: &'static Message, buf: &'de [u8]) -> Self {
        Frame {
            msg,
            reader: Reader::new(buf),
            hint: 0,
            gathered: Gathered::default(),
            split: None,
        }
    }

    /// Whether the repeated field at `index` is written as one run from `key_pos` on.
    fn contiguous(&mut self, index: usize, key_pos: usize) -> Result<bool> {
        if index >= 64 {
            return Ok(false);
        }
        let split = match self.split {
            Some(split) => split,
            None => {
                // From the first repeated field on: those before it are not repeated.
                let split = split_runs(self.msg, self.reader.buf(), key_pos)?;
                self.split = Some(split);
                split
            }
        };
        Ok(split & (1 << index) == 0)
    }
}

/// The repeated fields (by index, below 64) whose occurrences from `from` on are not one
/// run; fields of index 64 and above are never reported contiguous, see [`Frame::contiguous`].
fn split_runs(msg: &Message, buf: &[u8], from: usize) -> Result<u64> {
    let mut r = Reader::at(buf, from);
    let (mut seen, mut split) = (0u64, 0u64);
    let mut last = 0u32;
    let mut hint = 0;
    while let Some((number, _)) = r.field().map_err(malformed)? {
        if number == last {
            continue;
        }
        last = number;
        if let Some((index, field)) = msg.field(number, &mut hint)
            && field.has(flags::REPEATED)
            && index < 64
        {
            let bit = 1u64 << index;
            split |= seen & bit;
            seen |= bit;
        }
    }
    Ok(split)
}

enum Pending<'de> {
    None,
    /// apiVersion's value; kind's comes next.
    TypeMeta(&'de str, &'de str),
    /// kind's key is next, then this value.
    Kind(&'de str),
    Single(&'static Field, Value<'de>),
    /// A repeated field: the message it is in, where its first occurrence starts, and
    /// whether it is one run.
    Repeated(&'static Field, &'de [u8], usize, bool),
}

/// How deep inlined messages nest in the table (a schema test checks it): Kubernetes has
/// two levels (admissionregistration's `NamedRuleWithOperations` inlines
/// `RuleWithOperations`, which inlines `Rule`).
pub(crate) const MAX_INLINE_DEPTH: usize = 3;

/// The messages an inlined message is inside of, innermost last: on the stack, since a heap
/// `Vec` here was allocated and freed for every inlined message (volume sources, probe
/// handlers), and that churn cost more than the decoding around it.
struct Outer<'de> {
    frames: [Option<Frame<'de>>; MAX_INLINE_DEPTH],
    len: usize,
}

impl<'de> Outer<'de> {
    fn push(&mut self, frame: Frame<'de>) -> Result<()> {
        let slot = self
            .frames
            .get_mut(self.len)
            .ok_or_else(|| Error::malformed("inlined messages nested deeper than the schema"))?;
        *slot = Some(frame);
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<Frame<'de>> {
        let i = self.len.checked_sub(1)?;
        self.len = i;
        self.frames.get_mut(i).and_then(Option::take)
    }
}

/// A message as a map of JSON names to values.
struct MessageAccess<'de> {
    cur: Frame<'de>,
    outer: Outer<'de>,
    pending: Pending<'de>,
    /// apiVersion and kind still to present.
    type_meta: Option<(&'de str, &'de str)>,
    /// Where a repeated field that is one run ended, once its elements were all read: the
    /// reader jumps there instead of stepping over them again.
    run_end: Cell<Option<usize>>,
}

impl<'de> MessageAccess<'de> {
    fn new(msg: &'static Message, buf: &'de [u8], type_meta: Option<(&'de str, &'de str)>) -> Self {
        MessageAccess {
            cur: Frame::new(msg, buf),
            outer: Outer {
                frames: [None, None, None],
                len: 0,
            },
            pending: Pending::None,
            type_meta,
            run_end: Cell::new(None),
        }
    }
}

/// Whether encoding/json's `omitempty` leaves this value out.
fn is_empty(ty: &Ty, v: Value<'_>) -> Result<bool> {
    Ok(match v {
        Value::Varint(n) => n == 0,
        Value::Fixed64(bits) => f64::from_bits(bits) == 0.0,
        Value::Fixed32(bits) => f32::from_bits(bits) == 0.0,
        Value::Len(b) => match ty {
            Ty::String | Ty::Bytes => b.is_empty(),
            Ty::WrappedList(_) => wrapped_len(b)? == 0,
            _ => false,
        },
        Value::Group => false,
    })
}

/// Whether a Time or MicroTime is Go's zero time (`omitzero` leaves it out).
fn is_zero_time(ty: &Ty, v: Value<'_>) -> Result<bool> {
    let Value::Len(b) = v else {
        return Ok(false);
    };
    let t = special::Timestamp::parse(b).map_err(malformed)?;
    Ok(match ty {
        Ty::Time => t.is_zero(false),
        Ty::MicroTime => t.is_zero(true),
        _ => false,
    })
}

/// The number of items of a wrapped list (`{ repeated items = 1 }`).
fn wrapped_len(b: &[u8]) -> Result<usize> {
    let mut r = Reader::new(b);
    let mut n = 0;
    while let Some((number, v)) = r.field().map_err(malformed)? {
        if number == 1 {
            // Packed scalars would count as one here; wrapped lists hold strings or messages.
            n += usize::from(matches!(v, Value::Len(_)));
        }
    }
    Ok(n)
}

impl<'de> de::MapAccess<'de> for MessageAccess<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if let Some((api_version, kind)) = self.type_meta {
            // apiVersion first, then kind (whose pending value is set when apiVersion's is
            // taken, see next_value_seed).
            self.type_meta = None;
            self.pending = Pending::TypeMeta(api_version, kind);
            return seed.deserialize(KeyDe("apiVersion")).map(Some);
        }
        if let Pending::Kind(_) = self.pending {
            return seed.deserialize(KeyDe("kind")).map(Some);
        }
        loop {
            let key_pos = self.cur.reader.pos();
            let Some((number, value)) = self.cur.reader.field().map_err(malformed)? else {
                match self.outer.pop() {
                    Some(parent) => {
                        self.cur = parent;
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            let Some((index, field)) = self.cur.msg.field(number, &mut self.cur.hint) else {
                continue; // unknown field: skipped, as Go skips it
            };
            if field.has(flags::REPEATED) {
                if self.cur.gathered.test_and_set(index) {
                    continue;
                }
                let one_run = self
                    .cur
                    .contiguous(index, key_pos)
                    .map_err(|e| e.at(Segment::Field(field.json)))?;
                self.pending = Pending::Repeated(field, self.cur.reader.buf(), key_pos, one_run);
            } else {
                if value.wire_type() != Some(wire_type_of(&field.ty)) {
                    return Err(Error::malformed("wrong wire type").at(Segment::Field(field.json)));
                }
                if field.has(flags::INLINE) {
                    if let (Ty::Message(inner), Value::Len(b)) = (&field.ty, value) {
                        let parent = std::mem::replace(&mut self.cur, Frame::new(inner, b));
                        self.outer
                            .push(parent)
                            .map_err(|e| e.at(Segment::Field(field.json)))?;
                    }
                    continue;
                }
                if field.has(flags::OMIT_EMPTY)
                    && is_empty(&field.ty, value).map_err(|e| e.at(Segment::Field(field.json)))?
                {
                    continue;
                }
                if field.has(flags::OMIT_ZERO)
                    && is_zero_time(&field.ty, value)
                        .map_err(|e| e.at(Segment::Field(field.json)))?
                {
                    continue;
                }
                self.pending = Pending::Single(field, value);
            }
            return seed.deserialize(KeyDe(field.json)).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::Single(field, v) => seed
                .deserialize(ValueDe { ty: &field.ty, v })
                .map_err(|e| e.at(Segment::Field(field.json))),
            Pending::Repeated(field, buf, pos, one_run) => {
                let value = seed
                    .deserialize(RepeatedDe {
                        field,
                        reader: Reader::at(buf, pos),
                        run_end: one_run.then_some(&self.run_end),
                    })
                    .map_err(|e| e.at(Segment::Field(field.json)))?;
                if let Some(end) = self.run_end.take() {
                    self.cur.reader = Reader::at(buf, end);
                }
                Ok(value)
            }
            Pending::TypeMeta(api_version, kind) => {
                self.pending = Pending::Kind(kind);
                seed.deserialize(de::value::BorrowedStrDeserializer::new(api_version))
            }
            Pending::Kind(kind) => seed.deserialize(de::value::BorrowedStrDeserializer::new(kind)),
            Pending::None => Err(Error::rejected("a map value was asked for before its key")),
        }
    }
}

/// A JSON key from the schema.
struct KeyDe(&'static str);

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
fn visit_go_str<'de, V: Visitor<'de>>(b: &'de [u8], visitor: V) -> Result<V::Value> {
    match special::go_str(b) {
        std::borrow::Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
        std::borrow::Cow::Owned(s) => visitor.visit_string(s),
    }
}

/// A map key from the body.
struct GoStrDe<'de>(&'de [u8]);

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

fn visit_number<'de, V: Visitor<'de>>(n: JsonNumber, visitor: V) -> Result<V::Value> {
    match n {
        JsonNumber::U64(n) => visitor.visit_u64(n),
        JsonNumber::I64(n) => visitor.visit_i64(n),
        JsonNumber::F64(n) => visitor.visit_f64(n),
    }
}

/// serde_json hands non-negative integers to `visit_u64` and negative ones to `visit_i64`.
fn visit_int<'de, V: Visitor<'de>>(n: i64, visitor: V) -> Result<V::Value> {
    match u64::try_from(n) {
        Ok(u) => visitor.visit_u64(u),
        Err(_) => visitor.visit_i64(n),
    }
}

/// One value of a known type.
struct ValueDe<'de> {
    ty: &'static Ty,
    v: Value<'de>,
}

impl<'de> ValueDe<'de> {
    fn len(&self) -> Result<&'de [u8]> {
        match self.v {
            Value::Len(b) => Ok(b),
            _ => Err(Error::malformed("wrong wire type")),
        }
    }

    fn varint(&self) -> Result<u64> {
        match self.v {
            Value::Varint(n) => Ok(n),
            _ => Err(Error::malformed("wrong wire type")),
        }
    }

    /// The raw JSON a RawExtension or FieldsV1 holds, `None` for JSON `null`.
    fn raw_json(&self) -> Result<Option<&'de [u8]>> {
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
    fn deserialize_other<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
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
    fn is_null(&self) -> Result<bool> {
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
                visitor.visit_map(MessageAccess::new(msg, self.len()?, nested_type_meta(msg)))
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
fn embedded_json<'de, V: Visitor<'de>>(raw: &'de [u8], visitor: V) -> Result<V::Value> {
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
fn json_error(e: serde_json::Error) -> Error {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => Error::malformed("invalid embedded JSON"),
        Category::Data | Category::Io => Error::rejected("the target type refused embedded JSON"),
    }
}

/// A repeated field (a slice or a map): every occurrence of its number in the message, from
/// the first one on.
struct RepeatedDe<'de, 'a> {
    field: &'static Field,
    reader: Reader<'de>,
    /// Set when the occurrences are one run (they end at the first other field): where the
    /// run ends is written there once the last element was read.
    run_end: Option<&'a Cell<Option<usize>>>,
}

impl<'de> de::Deserializer<'de> for RepeatedDe<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let occurrences = Occurrences {
            number: self.field.number,
            reader: self.reader,
            run_end: self.run_end,
        };
        match &self.field.ty {
            Ty::Map(value) => visitor.visit_map(MapEntries {
                value,
                occurrences,
                pending: None,
            }),
            elem => visitor.visit_seq(RepeatedAccess::new(elem, occurrences)),
        }
    }

    present_value_methods!();
}

/// The elements of a repeated field, unpacked or packed.
struct RepeatedAccess<'de, 'a> {
    elem: &'static Ty,
    occurrences: Occurrences<'de, 'a>,
    packed: Option<Reader<'de>>,
    index: usize,
}

/// The occurrences of one field number in a message, from a first one on.
struct Occurrences<'de, 'a> {
    number: u32,
    reader: Reader<'de>,
    /// Set when the occurrences are one run: the first other field ends them, and where it
    /// starts is written there (see [`MessageAccess::run_end`]).
    run_end: Option<&'a Cell<Option<usize>>>,
}

impl<'de> Occurrences<'de, '_> {
    fn next(&mut self) -> Result<Option<Value<'de>>> {
        loop {
            let at = self.reader.pos();
            let Some((number, v)) = self.reader.field().map_err(malformed)? else {
                if let Some(end) = self.run_end {
                    end.set(Some(at));
                }
                return Ok(None);
            };
            if number == self.number {
                return Ok(Some(v));
            }
            if let Some(end) = self.run_end {
                end.set(Some(at));
                return Ok(None);
            }
        }
    }
}

impl<'de, 'a> RepeatedAccess<'de, 'a> {
    fn new(elem: &'static Ty, occurrences: Occurrences<'de, 'a>) -> Self {
        RepeatedAccess {
            elem,
            occurrences,
            packed: None,
            index: 0,
        }
    }

    fn next_value(&mut self) -> Result<Option<Value<'de>>> {
        let want = wire_type_of(self.elem);
        loop {
            if let Some(p) = &mut self.packed {
                if !p.is_empty() {
                    let v = match want {
                        WireType::Varint => Value::Varint(p.varint().map_err(malformed)?),
                        WireType::Fixed64 | WireType::Fixed32 => {
                            return Err(Error::malformed("packed fixed-width values"));
                        }
                        WireType::Len => return Err(Error::malformed("wrong wire type")),
                    };
                    return Ok(Some(v));
                }
                self.packed = None;
            }
            let Some(v) = self.occurrences.next()? else {
                return Ok(None);
            };
            match v.wire_type() {
                Some(w) if w == want => return Ok(Some(v)),
                Some(WireType::Len) if want == WireType::Varint => {
                    if let Value::Len(b) = v {
                        self.packed = Some(Reader::new(b));
                    }
                }
                _ => return Err(Error::malformed("wrong wire type")),
            }
        }
    }
}

impl<'de> de::SeqAccess<'de> for RepeatedAccess<'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let index = self.index;
        let Some(v) = self.next_value().map_err(|e| e.at(Segment::Index(index)))? else {
            return Ok(None);
        };
        self.index += 1;
        seed.deserialize(ValueDe { ty: self.elem, v })
            .map(Some)
            .map_err(|e| e.at(Segment::Index(index)))
    }
}

/// The entries of a map field: repeated `{ key = 1; value = 2 }` messages.
struct MapEntries<'de, 'a> {
    value: &'static Ty,
    occurrences: Occurrences<'de, 'a>,
    pending: Option<Value<'de>>,
}

impl<'de> de::MapAccess<'de> for MapEntries<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some(v) = self.occurrences.next()? else {
            return Ok(None);
        };
        let Value::Len(entry) = v else {
            return Err(Error::malformed("wrong wire type"));
        };
        let want = wire_type_of(self.value);
        let (mut key, mut value) = (&[][..], None);
        let mut r = Reader::new(entry);
        while let Some((n, v)) = r.field().map_err(malformed)? {
            match (n, v) {
                (1, Value::Len(k)) => key = k,
                (2, v) if v.wire_type() == Some(want) => value = Some(v),
                (1 | 2, _) => return Err(Error::malformed("wrong wire type in a map entry")),
                _ => {}
            }
        }
        // A missing value is the Go zero value of its type.
        self.pending = Some(value.unwrap_or(match want {
            WireType::Varint => Value::Varint(0),
            WireType::Fixed64 => Value::Fixed64(0),
            WireType::Fixed32 => Value::Fixed32(0),
            WireType::Len => Value::Len(&[]),
        }));
        seed.deserialize(GoStrDe(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let Some(v) = self.pending.take() else {
            return Err(Error::rejected("a map value was asked for before its key"));
        };
        seed.deserialize(ValueDe { ty: self.value, v })
            .map_err(|e| e.at(Segment::MapValue))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::schema::flags::*;

    /// A message builder for hand-made inputs.
    #[derive(Default)]
    struct Enc(Vec<u8>);

    impl Enc {
        fn varint(mut self, mut v: u64) -> Self {
            while v >= 0x80 {
                self.0.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
            self
        }
        fn key(self, number: u32, wire: u8) -> Self {
            self.varint(u64::from(number) << 3 | u64::from(wire))
        }
        fn int(self, number: u32, v: u64) -> Self {
            self.key(number, 0).varint(v)
        }
        fn bytes(self, number: u32, b: &[u8]) -> Self {
            let mut s = self.key(number, 2).varint(b.len() as u64);
            s.0.extend_from_slice(b);
            s
        }
        fn msg(self, number: u32, m: Enc) -> Self {
            self.bytes(number, &m.0)
        }
        fn fixed64(mut self, number: u32, v: u64) -> Self {
            self = self.key(number, 1);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn fixed32(mut self, number: u32, v: u32) -> Self {
            self = self.key(number, 5);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
    }

    fn field(number: u32, json: &'static str, ty: Ty, flags: u8) -> Field {
        Field {
            number,
            json,
            ty,
            flags,
        }
    }

    static INNER: Message = Message {
        name: "test.Inner",
        fields: &[Field {
            number: 1,
            json: "innerName",
            ty: Ty::String,
            flags: OMIT_EMPTY,
        }],
    };

    fn decode<'a, T: Deserialize<'a>>(
        msg: &'static Message,
        b: &'a [u8],
    ) -> std::result::Result<T, crate::Error> {
        T::deserialize(MessageDe {
            msg,
            buf: b,
            type_meta: None,
        })
        .map_err(Error::into_error)
    }

    fn leak(fields: Vec<Field>) -> &'static Message {
        Box::leak(Box::new(Message {
            name: "test.Msg",
            fields: Box::leak(fields.into_boxed_slice()),
        }))
    }

    #[test]
    fn scalars_of_every_kind_read_as_their_json() {
        let msg = leak(vec![
            field(1, "u32", Ty::Uint32, 0),
            field(2, "u64", Ty::Uint64, 0),
            field(3, "double", Ty::Double, 0),
            field(4, "float", Ty::Float, 0),
            field(5, "duration", Ty::Duration, 0),
            field(6, "i32", Ty::Int32, 0),
            field(7, "i64", Ty::Int64, 0),
            field(8, "bool", Ty::Bool, 0),
            field(9, "bytes", Ty::Bytes, 0),
            field(10, "integral", Ty::Double, 0),
        ]);
        let b = Enc::default()
            .int(1, u64::MAX) // Go keeps the low 32 bits of a uint32
            .int(2, u64::MAX)
            .fixed64(3, 2.5f64.to_bits())
            .fixed32(4, 0.1f32.to_bits())
            .msg(5, Enc::default().int(1, 90_000_000_000))
            .int(6, (-5i64) as u64) // int32 negatives are sign-extended to ten bytes
            .int(7, (-7i64) as u64)
            .int(8, 1)
            .bytes(9, b"\x00\xffhi")
            .fixed64(10, 3.0f64.to_bits());
        let v: Value = decode(msg, &b.0).expect("decodes");
        assert_eq!(
            v,
            json!({
                "u32": 4_294_967_295u64, "u64": u64::MAX, "double": 2.5, "float": 0.1,
                "duration": "1m30s", "i32": -5, "i64": -7, "bool": true, "bytes": "AP9oaQ==",
                "integral": 3
            })
        );
    }

    #[test]
    fn omitempty_zero_values_are_left_out_but_pointer_zeros_stay() {
        let msg = leak(vec![
            field(1, "count", Ty::Int32, OMIT_EMPTY),
            field(2, "name", Ty::String, OMIT_EMPTY),
            field(3, "flag", Ty::Bool, OMIT_EMPTY),
            field(4, "ratio", Ty::Double, OMIT_EMPTY),
            // A pointer, or a field without omitempty: JSON writes the zero.
            field(5, "replicas", Ty::Int32, 0),
            field(6, "label", Ty::String, 0),
        ]);
        let b = Enc::default()
            .int(1, 0)
            .bytes(2, b"")
            .int(3, 0)
            .fixed64(4, (-0.0f64).to_bits())
            .int(5, 0)
            .bytes(6, b"");
        let v: Value = decode(msg, &b.0).expect("decodes");
        assert_eq!(v, json!({"replicas": 0, "label": ""}));
    }

    #[test]
    fn inlined_messages_are_flattened_into_their_parent() {
        static PARENT_FIELDS: [Field; 2] = [
            Field {
                number: 1,
                json: "",
                ty: Ty::Message(&INNER),
                flags: INLINE,
            },
            Field {
                number: 2,
                json: "own",
                ty: Ty::Int64,
                flags: 0,
            },
        ];
        static PARENT: Message = Message {
            name: "test.Parent",
            fields: &PARENT_FIELDS,
        };
        let b = Enc::default()
            .msg(1, Enc::default().bytes(1, b"x").int(99, 1))
            .int(2, 3);
        let v: Value = decode(&PARENT, &b.0).expect("decodes");
        assert_eq!(v, json!({"innerName": "x", "own": 3}));
    }

    #[test]
    fn repeated_fields_are_gathered_packed_or_not_wherever_they_are() {
        let msg = leak(vec![
            field(1, "names", Ty::String, REPEATED),
            field(2, "ports", Ty::Int32, REPEATED),
            field(3, "other", Ty::Int32, 0),
        ]);
        let packed = Enc::default().varint(80).varint(443);
        let b = Enc::default()
            .bytes(1, b"a")
            .int(3, 7)
            .bytes(1, b"b")
            .int(2, 1)
            .msg(2, packed)
            .bytes(1, b"c");
        let v: Value = decode(msg, &b.0).expect("decodes");
        assert_eq!(
            v,
            json!({"names": ["a", "b", "c"], "other": 7, "ports": [1, 80, 443]})
        );
    }

    #[test]
    fn maps_read_as_objects_and_a_missing_value_is_the_zero_value() {
        let msg = leak(vec![
            field(1, "labels", Ty::Map(&Ty::String), REPEATED),
            field(2, "limits", Ty::Map(&Ty::Quantity), REPEATED),
            field(3, "extra", Ty::Map(&Ty::WrappedList(&Ty::String)), REPEATED),
        ]);
        let b = Enc::default()
            .msg(1, Enc::default().bytes(1, b"app").bytes(2, b"web"))
            .msg(1, Enc::default().bytes(1, b"empty"))
            .msg(
                2,
                Enc::default()
                    .bytes(1, b"cpu")
                    .msg(2, Enc::default().bytes(1, b"250m")),
            )
            .msg(2, Enc::default().bytes(1, b"gpu"))
            .msg(
                3,
                Enc::default()
                    .bytes(1, b"groups")
                    .msg(2, Enc::default().bytes(1, b"a").bytes(1, b"b")),
            )
            .msg(3, Enc::default().bytes(1, b"none"));
        let v: Value = decode(msg, &b.0).expect("decodes");
        assert_eq!(
            v,
            json!({
                "labels": {"app": "web", "empty": ""},
                "limits": {"cpu": "250m", "gpu": "0"},
                "extra": {"groups": ["a", "b"], "none": []}
            })
        );
    }

    #[test]
    fn special_types_read_as_their_json() {
        let msg = leak(vec![
            field(1, "port", Ty::IntOrString, 0),
            field(2, "target", Ty::IntOrString, 0),
            field(3, "raw", Ty::RawExtension, 0),
            field(4, "nilRaw", Ty::RawExtension, 0),
            field(5, "fields", Ty::FieldsV1, 0),
            field(6, "noFields", Ty::FieldsV1, 0),
            field(7, "created", Ty::Time, 0),
            field(8, "zero", Ty::Time, 0),
            field(9, "omitted", Ty::Time, OMIT_ZERO),
            field(10, "eventTime", Ty::MicroTime, 0),
        ]);
        let b = Enc::default()
            .msg(1, Enc::default().int(1, 0).int(2, 8080))
            .msg(2, Enc::default().int(1, 1).bytes(3, b"http"))
            .msg(3, Enc::default().bytes(1, br#"{"kind":"X","n":[1,2]}"#))
            .msg(4, Enc::default())
            .msg(5, Enc::default().bytes(1, br#"{"f:metadata":{}}"#))
            .msg(6, Enc::default().bytes(1, b""))
            .msg(7, Enc::default().int(1, 1_700_000_000).int(2, 5))
            .msg(8, Enc::default())
            .msg(9, Enc::default())
            .msg(10, Enc::default().int(1, 1_700_000_000).int(2, 123_456_789));
        let v: Value = decode(msg, &b.0).expect("decodes");
        assert_eq!(
            v,
            json!({
                "port": 8080, "target": "http",
                "raw": {"kind": "X", "n": [1, 2]}, "nilRaw": null,
                "fields": {"f:metadata": {}}, "noFields": null,
                "created": "2023-11-14T22:13:20Z", "zero": null,
                "eventTime": "2023-11-14T22:13:20.123456Z"
            })
        );
        // Optional targets see JSON's null as None.
        #[derive(Deserialize, Debug, PartialEq)]
        #[serde(rename_all = "camelCase")]
        struct Opt {
            zero: Option<String>,
            created: Option<String>,
            no_fields: Option<Value>,
        }
        let o: Opt = decode(msg, &b.0).expect("decodes");
        assert_eq!(
            o,
            Opt {
                zero: None,
                created: Some("2023-11-14T22:13:20Z".into()),
                no_fields: None
            }
        );
    }

    #[test]
    fn embedded_cbor_and_bad_int_or_string_types_are_malformed() {
        let msg = leak(vec![
            field(1, "raw", Ty::RawExtension, 0),
            field(2, "port", Ty::IntOrString, 0),
        ]);
        let cbor = Enc::default().msg(1, Enc::default().bytes(1, &[0xd9, 0xd9, 0xf7, 0xa0]));
        let err = decode::<Value>(msg, &cbor.0).expect_err("CBOR");
        assert!(matches!(err, crate::Error::Malformed { .. }), "{err}");
        assert_eq!(err.path().map(ToString::to_string).as_deref(), Some("raw"));
        let bad = Enc::default().msg(2, Enc::default().int(1, 7));
        assert!(matches!(
            decode::<Value>(msg, &bad.0),
            Err(crate::Error::Malformed { .. })
        ));
    }

    #[test]
    fn unknown_fields_are_skipped_and_ignored_fields_are_not_decoded() {
        let msg = leak(vec![
            field(1, "name", Ty::String, 0),
            field(2, "blob", Ty::RawExtension, 0),
        ]);
        // `blob` holds bytes that would fail to decode: a target that ignores it never
        // looks inside.
        let b = Enc::default()
            .int(7, 1)
            .bytes(1, b"n")
            .fixed32(9, 1)
            .msg(2, Enc::default().bytes(1, &[0xff]));
        #[derive(Deserialize)]
        struct OnlyName {
            name: String,
        }
        let v: OnlyName = decode(msg, &b.0).expect("decodes");
        assert_eq!(v.name, "n");
        assert!(decode::<Value>(msg, &b.0).is_err());
    }

    #[test]
    fn wrong_wire_types_are_malformed_and_name_the_field() {
        let msg = leak(vec![
            field(1, "name", Ty::String, 0),
            field(2, "items", Ty::Message(&INNER), REPEATED),
        ]);
        let b = Enc::default().int(1, 5);
        let err = decode::<Value>(msg, &b.0).expect_err("varint for a string");
        assert_eq!(
            err.to_string(),
            "malformed protobuf at name: wrong wire type"
        );
        let b = Enc::default().bytes(2, b"").int(2, 1);
        let err = decode::<Value>(msg, &b.0).expect_err("varint for a message");
        assert_eq!(
            err.to_string(),
            "malformed protobuf at items[1]: wrong wire type"
        );
    }

    #[test]
    fn enums_and_flatten_work_through_deserialize_any() {
        #[derive(Deserialize, Debug, PartialEq)]
        enum Policy {
            Always,
            Never,
        }
        #[derive(Deserialize, Debug, PartialEq)]
        struct Target {
            name: Policy,
            #[serde(flatten)]
            rest: std::collections::BTreeMap<String, Value>,
        }
        let msg = leak(vec![
            field(1, "name", Ty::String, 0),
            field(2, "n", Ty::Int64, 0),
        ]);
        let b = Enc::default().bytes(1, b"Never").int(2, 4);
        let t: Target = decode(msg, &b.0).expect("decodes");
        assert_eq!(t.name, Policy::Never);
        assert_eq!(t.rest.get("n"), Some(&json!(4)));
    }
}
