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

use serde::de::{self, DeserializeSeed, Visitor};
use serde::forward_to_deserialize_any;

use crate::error::{DeError as Error, Segment};
use crate::schema::{Field, Message, Ty, flags, meta};
use crate::special::{self};
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
        visitor.visit_map(MessageAccess::new(self.msg, self.buf, self.type_meta)?)
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

/// How deep messages may nest in the data: serde_json's limit for JSON (128), a little
/// under. Until Kubernetes 1.37 the schema bounded the nesting by itself; since, a message
/// may hold itself (scheduling's `CompositePodGroupTemplate`), and without a bound a
/// crafted object would nest until the decoder's stack overflowed: it is malformed instead.
pub(crate) const MAX_MESSAGE_DEPTH: usize = 100;

thread_local! {
    /// How many messages the decoder of this thread is inside of.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One level of message nesting, counted while it lives.
struct Nested;

impl Nested {
    fn enter() -> Result<Self> {
        DEPTH.with(|depth| {
            if depth.get() >= MAX_MESSAGE_DEPTH {
                return Err(Error::malformed("messages nested too deep"));
            }
            depth.set(depth.get() + 1);
            Ok(Nested)
        })
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
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
    /// This message's level of nesting.
    _nested: Nested,
}

impl<'de> MessageAccess<'de> {
    /// The fields of `msg` in `buf`; an error past [`MAX_MESSAGE_DEPTH`] levels of messages.
    fn new(
        msg: &'static Message,
        buf: &'de [u8],
        type_meta: Option<(&'de str, &'de str)>,
    ) -> Result<Self> {
        Ok(MessageAccess {
            cur: Frame::new(msg, buf),
            outer: Outer {
                frames: [None, None, None],
                len: 0,
            },
            pending: Pending::None,
            type_meta,
            run_end: Cell::new(None),
            _nested: Nested::enter()?,
        })
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

/// A field's value, taken from a [`MessageAccess`] after its key.
enum Taken<'de> {
    /// A single value of a field.
    Single(&'static Field, Value<'de>),
    /// A repeated field: the message it is in, where its first occurrence starts, and
    /// whether it is one run.
    Repeated(&'static Field, &'de [u8], usize, bool),
    /// `apiVersion` or `kind`, from the envelope.
    Str(&'de str),
}

impl<'de> MessageAccess<'de> {
    /// The JSON name of the next field (its value is then pending: [`Self::take_value`]),
    /// `None` at the end of the message. What the map shows and what the transcoder writes.
    fn next_field(&mut self) -> Result<Option<&'static str>> {
        if let Some((api_version, kind)) = self.type_meta {
            // apiVersion first, then kind (whose pending value is set when apiVersion's is
            // taken, see take_value).
            self.type_meta = None;
            self.pending = Pending::TypeMeta(api_version, kind);
            return Ok(Some("apiVersion"));
        }
        if let Pending::Kind(_) = self.pending {
            return Ok(Some("kind"));
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
            return Ok(Some(field.json));
        }
    }

    /// The value of the field [`Self::next_field`] just named.
    fn take_value(&mut self) -> Result<Taken<'de>> {
        Ok(match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::Single(field, v) => Taken::Single(field, v),
            Pending::Repeated(field, buf, pos, one_run) => {
                Taken::Repeated(field, buf, pos, one_run)
            }
            Pending::TypeMeta(api_version, kind) => {
                self.pending = Pending::Kind(kind);
                Taken::Str(api_version)
            }
            Pending::Kind(kind) => Taken::Str(kind),
            Pending::None => {
                return Err(Error::rejected("a map value was asked for before its key"));
            }
        })
    }

    /// After a repeated field's elements were read: where the reader goes on, if they were
    /// one run (the elements' reader wrote where it ended).
    fn after_repeated(&mut self, buf: &'de [u8]) {
        if let Some(end) = self.run_end.take() {
            self.cur.reader = Reader::at(buf, end);
        }
    }
}

impl<'de> de::MapAccess<'de> for MessageAccess<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        match self.next_field()? {
            Some(key) => seed.deserialize(KeyDe(key)).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        match self.take_value()? {
            Taken::Single(field, v) => seed
                .deserialize(ValueDe { ty: &field.ty, v })
                .map_err(|e| e.at(Segment::Field(field.json))),
            Taken::Repeated(field, buf, pos, one_run) => {
                let value = seed
                    .deserialize(RepeatedDe {
                        field,
                        reader: Reader::at(buf, pos),
                        run_end: one_run.then_some(&self.run_end),
                    })
                    .map_err(|e| e.at(Segment::Field(field.json)))?;
                self.after_repeated(buf);
                Ok(value)
            }
            Taken::Str(s) => seed.deserialize(de::value::BorrowedStrDeserializer::new(s)),
        }
    }
}

mod repeated;
mod transcode;
mod value;

use repeated::RepeatedDe;
pub(crate) use transcode::{Failure, Transcode};
use value::{KeyDe, ValueDe};

#[cfg(test)]
mod tests;
