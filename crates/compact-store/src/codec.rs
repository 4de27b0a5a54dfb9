//! The encoding the store keeps objects in: a small self-describing binary form of serde's
//! data model, shaped like the JSON of the same value.
//!
//! Why a format of our own rather than the protobuf the API server sent, JSON, or an
//! existing binary format: see the crate docs ("The encoding"). In short: it encodes any
//! `Serialize` type (built-in types, custom resources, `DynamicObject`, projections) after
//! the transform ran, it is as small as the protobuf on the pods measured, and struct field
//! names — most of the bytes of an object's JSON — take one byte each, because serde hands
//! them over as `&'static str` and a process-wide table numbers them.
//!
//! The bytes never leave the process (the numbering is this process's), so the format has
//! no version and no compatibility promise.
//!
//! # Layout
//!
//! One tag byte per value, then its payload:
//!
//! | tag | value |
//! | --- | --- |
//! | `0x01` | null (`None`, `()`) |
//! | `0x02` / `0x03` | `false` / `true` |
//! | `0x04` | unsigned integer, LEB128 varint |
//! | `0x05` | negative integer `-1 - n`, `n` a varint |
//! | `0x06` | `f64`, 8 bytes little-endian |
//! | `0x07` | string: varint length, UTF-8 bytes |
//! | `0x08` | bytes: varint length, bytes |
//! | `0x09` | sequence: varint length in bytes, then the values |
//! | `0x0a` | map: varint length in bytes, then key, value, key, value, … |
//! | `0x0b` | struct: varint length in bytes, then (varint field id, value) pairs; id `1` is followed by the field name as a string |
//! | `0x0c` | JSON text: varint length, the JSON of the value (see below) |
//! | `0x40`–`0x7f` | string of 0–63 bytes, the length in the tag |
//! | `0x80`–`0xff` | unsigned integer 0–127 in the tag |
//!
//! Every value says how long it is before its content (a compound's length is that of its
//! content), so that a reader looking for one field of a struct steps over every other
//! field in one jump, however much it holds: that is what lets a read view
//! ([`crate::view`]) find `spec.nodeName` of a pod without reading its metadata. A
//! compound's length is written in two bytes while it is under 16 KiB (a varint with a
//! continuation bit on its first byte even where one byte would do), so that the encoder
//! can reserve them before it writes the content and fill them in after; a longer content
//! moves over to make room for a longer varint.
//!
//! A struct's fields are written small ones first: a field whose id and value take more
//! than 24 bytes (a nested struct, a list, a long string) is moved after the others when the
//! struct ends. A read looks a field up by stepping over the fields before it, and each
//! step reads a field's header: small fields first keep the headers a look-up reads
//! together, in one or two cache lines, where the order of the type (or of the protobuf
//! it came from) would put them after kilobytes of lists (`spec.nodeName` after a pod's
//! volumes and containers). Decoding is unaffected: a struct's fields come in any order, as
//! a JSON object's keys do. The cost is a copy of each large field's bytes once per struct
//! around it, when the object is written.
//!
//! Enums are written as JSON writes them (a unit variant is its name; any other variant a
//! one-entry map from its name to its content), and `Some(x)` as `x`, so any type whose
//! serde implementation round-trips through JSON round-trips through this format with the
//! same result.
//!
//! The newtype structs in which the Kubernetes schema holds free-form JSON —
//! `FieldsV1` (`managedFields`), `RawExtension` and apiextensions' `JSON` ([`RAW_JSON_TYPES`])
//! — are kept as the JSON text itself, as the API server sends them (in protobuf too),
//! not as a tree of tagged values: a pod's `managedFields` then cost about their size on
//! the wire, and encoding them is one `serde_json` write instead of a key-by-key walk.
//! Decoding hands the type a `serde_json` deserializer over that text, so the type gets
//! what it would get from the object's JSON.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{PoisonError, RwLock};

use serde::de;
use serde::ser::{self, Serialize};

/// The tags of the layout above.
pub(crate) mod tags {
    pub(crate) const NULL: u8 = 0x01;
    pub(crate) const FALSE: u8 = 0x02;
    pub(crate) const TRUE: u8 = 0x03;
    pub(crate) const UINT: u8 = 0x04;
    pub(crate) const NEG: u8 = 0x05;
    pub(crate) const F64: u8 = 0x06;
    pub(crate) const STR: u8 = 0x07;
    pub(crate) const BYTES: u8 = 0x08;
    pub(crate) const SEQ: u8 = 0x09;
    pub(crate) const MAP: u8 = 0x0a;
    pub(crate) const STRUCT: u8 = 0x0b;
    pub(crate) const RAW_JSON: u8 = 0x0c;
    pub(crate) const SHORT_STR: u8 = 0x40;
    pub(crate) const SHORT_STR_MAX: usize = 0x3f;
    pub(crate) const SMALL_UINT: u8 = 0x80;
    pub(crate) const SMALL_UINT_MAX: u64 = 0x7f;
}

use tags::*;

/// Field id `1` says the name follows inline (`0` is never written).
pub(crate) const INLINE_NAME: u32 = 1;
const FIRST_ID: u32 = 2;

/// At most this many distinct field names are numbered; past it names are written out.
/// Names come from `Serialize` impls, so a program has a fixed set of them; the cap only
/// guards against a type that leaks fresh names at run time.
const MAX_NAMES: usize = 1 << 16;

/// The names of the newtype structs whose content is kept as JSON text: the types the
/// Kubernetes schema (and k8s-openapi) use for free-form JSON inside an object.
pub const RAW_JSON_TYPES: &[&str] = &["FieldsV1", "RawExtension", "JSON"];

/// Decoding refuses values nested deeper than this.
const MAX_DEPTH: usize = 512;

/// Why an object could not be encoded or decoded. Messages never quote a value of the
/// object (it may be a Secret).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The type serialized something the format cannot hold (a 128-bit integer), or its
    /// `Serialize` impl failed.
    #[error("cannot encode the object: {0}")]
    Encode(String),
    /// The bytes end early or hold an unknown tag: a bug in this crate, never expected.
    #[error("corrupt encoding: {0}")]
    Corrupt(&'static str),
    /// The type's `Deserialize` refused what its `Serialize` wrote: the two do not
    /// round-trip (as through JSON). The value is not reported.
    #[error("the type does not decode what it encoded: {0}")]
    Rejected(String),
}

impl ser::Error for CodecError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Encode(msg.to_string())
    }
}

impl de::Error for CodecError {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        // A type's own message may quote the value; keep only that it refused.
        Self::Rejected("a custom error of the type".to_owned())
    }
    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::Rejected(format!("invalid type: {}, expected {exp}", kind(&unexp)))
    }
    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::Rejected(format!(
            "invalid value of type {}, expected {exp}",
            kind(&unexp)
        ))
    }
    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        Self::Rejected(format!("invalid length {len}, expected {exp}"))
    }
    fn unknown_variant(_variant: &str, expected: &'static [&'static str]) -> Self {
        Self::Rejected(format!("unknown variant, expected one of {expected:?}"))
    }
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Self::Rejected(format!(
            "unknown field {field:?}, expected one of {expected:?}"
        ))
    }
    fn missing_field(field: &'static str) -> Self {
        Self::Rejected(format!("missing field {field:?}"))
    }
    fn duplicate_field(field: &'static str) -> Self {
        Self::Rejected(format!("duplicate field {field:?}"))
    }
}

/// What kind of value was unexpected, without the value.
fn kind(unexp: &de::Unexpected<'_>) -> &'static str {
    use de::Unexpected as U;
    match unexp {
        U::Bool(_) => "boolean",
        U::Unsigned(_) | U::Signed(_) => "integer",
        U::Float(_) => "float",
        U::Char(_) | U::Str(_) => "string",
        U::Bytes(_) => "bytes",
        U::Unit => "null",
        U::Option => "option",
        U::NewtypeStruct => "newtype struct",
        U::Seq => "sequence",
        U::Map => "map",
        U::Enum => "enum",
        U::UnitVariant | U::NewtypeVariant | U::TupleVariant | U::StructVariant => "variant",
        U::Other(_) => "other",
    }
}

/// The process-wide numbering of field names.
#[derive(Default)]
struct Names {
    ids: HashMap<&'static str, u32, foldhash::fast::RandomState>,
    /// `names[id - FIRST_ID]`.
    names: Vec<&'static str>,
}

static NAMES: RwLock<Option<Names>> = RwLock::new(None);

/// The id field `name` is written with, if any object has been written with it yet.
pub(crate) fn field_id(name: &str) -> Option<u32> {
    let guard = NAMES.read().unwrap_or_else(PoisonError::into_inner);
    guard.as_ref()?.ids.get(name).copied()
}

/// The name numbered `id`.
pub(crate) fn field_name(id: u32) -> Option<&'static str> {
    let i = usize::try_from(id.checked_sub(FIRST_ID)?).ok()?;
    let guard = NAMES.read().unwrap_or_else(PoisonError::into_inner);
    guard.as_ref()?.names.get(i).copied()
}

/// Every numbered field name, in id order: what a snapshot writes beside its entries, so
/// that another process can read them (see [`adopt_names`]).
pub(crate) fn names() -> Vec<&'static str> {
    let guard = NAMES.read().unwrap_or_else(PoisonError::into_inner);
    guard.as_ref().map(|n| n.names.clone()).unwrap_or_default()
}

/// How the entries of a snapshot read in this process ([`adopt_names`]).
pub(crate) enum Numbering {
    /// As they are: this process numbers their names as their writer did.
    Same,
    /// Renumbered ([`renumber`]): the id this process gives each of the writer's names,
    /// by the writer's id less [`FIRST_ID`].
    Renumber(Vec<u32>),
}

/// Makes this process able to read entries written under `names` (the table of the
/// process that wrote a snapshot). When the tables agree on the names both have (one a
/// prefix of the other: which holds for tables taken at any two times in one process, names
/// being only ever added, and for a process that has numbered nothing yet) this process
/// takes the writer's numbering and the entries read as they are; otherwise each of the
/// writer's names gets this process's id and the entries must be renumbered. A name this
/// process lacks is added, copied once for the life of the process (names are
/// `&'static str`).
///
/// # Errors
/// [`CodecError::Corrupt`] when `names` holds a name twice, or holds more names than the
/// table may grow to.
pub(crate) fn adopt_names(names: &[String]) -> Result<Numbering, CodecError> {
    if names.len() > MAX_NAMES {
        return Err(CodecError::Corrupt("too many field names"));
    }
    let mut distinct = std::collections::HashSet::with_capacity(names.len());
    if !names.iter().all(|n| distinct.insert(n.as_str())) {
        return Err(CodecError::Corrupt("a field name twice"));
    }
    drop(distinct);
    let mut guard = NAMES.write().unwrap_or_else(PoisonError::into_inner);
    let table = guard.get_or_insert_with(Names::default);
    let same = table
        .names
        .iter()
        .zip(names)
        .all(|(have, name)| *have == name.as_str());
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        let id = match table.ids.get(name.as_str()) {
            Some(&id) => id,
            None => {
                if table.names.len() >= MAX_NAMES {
                    return Err(CodecError::Corrupt("too many field names"));
                }
                let name: &'static str = Box::leak(name.clone().into_boxed_str());
                let id = u32::try_from(table.names.len())
                    .map_err(|_| CodecError::Corrupt("too many field names"))?
                    + FIRST_ID;
                table.names.push(name);
                table.ids.insert(name, id);
                id
            }
        };
        ids.push(id);
    }
    Ok(if same {
        Numbering::Same
    } else {
        Numbering::Renumber(ids)
    })
}

/// The entry `bytes` with its struct field ids mapped through `ids` (the id of each of
/// the writer's names in this process, by the writer's id less [`FIRST_ID`]), every other
/// byte as it was; `None` when the bytes do not parse or name an id `ids` lacks.
pub(crate) fn renumber(bytes: &[u8], ids: &[u32]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 16);
    let mut input = bytes;
    renumber_value(&mut input, ids, &mut out, 0)?;
    input.is_empty().then_some(out)
}

fn renumber_value(input: &mut &[u8], ids: &[u32], out: &mut Vec<u8>, depth: usize) -> Option<()> {
    use crate::view::read::{next, varint};
    if depth > MAX_DEPTH {
        return None;
    }
    let before = *input;
    let raw = next(input)?;
    match raw.tag {
        STRUCT => {
            out.push(STRUCT);
            let at = reserve_len(out);
            let mut content = raw.body;
            while !content.is_empty() {
                let id = u32::try_from(varint(&mut content)?).ok()?;
                let mapped = match id {
                    INLINE_NAME => INLINE_NAME,
                    _ => *ids.get(usize::try_from(id.checked_sub(FIRST_ID)?).ok()?)?,
                };
                put_varint(out, u64::from(mapped));
                if id == INLINE_NAME {
                    // The name, a string: as it is.
                    let name = content;
                    next(&mut content)?;
                    out.extend_from_slice(&name[..name.len() - content.len()]);
                }
                renumber_value(&mut content, ids, out, depth + 1)?;
            }
            fill_len(out, at);
        }
        SEQ | MAP => {
            out.push(raw.tag);
            let at = reserve_len(out);
            let mut content = raw.body;
            while !content.is_empty() {
                renumber_value(&mut content, ids, out, depth + 1)?;
            }
            fill_len(out, at);
        }
        _ => out.extend_from_slice(&before[..before.len() - input.len()]),
    }
    Some(())
}

/// How an encoder numbers a field name: looking it up only (under the read lock), or
/// adding it (under the write lock).
trait NameIds {
    /// The name's id; `None` when it has none yet and this table cannot add it.
    fn id(&mut self, name: &'static str) -> Option<u32>;
}

/// Looks names up; a miss stops the encode so that it can be redone with [`Adding`].
struct Lookup<'a>(Option<&'a Names>);

impl NameIds for Lookup<'_> {
    fn id(&mut self, name: &'static str) -> Option<u32> {
        self.0?.ids.get(name).copied()
    }
}

struct Adding<'a>(&'a mut Names);

impl NameIds for Adding<'_> {
    fn id(&mut self, name: &'static str) -> Option<u32> {
        if let Some(&id) = self.0.ids.get(name) {
            return Some(id);
        }
        if self.0.names.len() >= MAX_NAMES {
            return Some(INLINE_NAME);
        }
        let id = u32::try_from(self.0.names.len()).ok()? + FIRST_ID;
        self.0.names.push(name);
        self.0.ids.insert(name, id);
        Some(id)
    }
}

/// Appends the encoding of `value` to `out`.
///
/// # Errors
/// [`CodecError::Encode`] when the value cannot be encoded; `out` is then left with
/// whatever was written before the failure.
pub(crate) fn encode<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    encode_with(value, out, Keep::All).map(|_| ())
}

/// What [`encode_with`] keeps of a value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Keep {
    /// Everything.
    All,
    /// Everything but the top-level value's `metadata.managedFields` (a field of the
    /// struct or map at the top, whose value is a struct).
    AllButManagedFields,
}

/// Appends the encoding of `value` to `out`, without what `keep` leaves out; `true` when
/// something was left out.
///
/// # Errors
/// As [`encode`].
pub(crate) fn encode_with<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
    keep: Keep,
) -> Result<bool, CodecError> {
    let start = out.len();
    let level = match keep {
        Keep::All => Level::Below,
        Keep::AllButManagedFields => Level::Top,
    };
    let left_out = Cell::new(false);
    {
        let guard = NAMES.read().unwrap_or_else(PoisonError::into_inner);
        let mut ids = Lookup(guard.as_ref());
        let mut spare = Vec::new();
        match value.serialize(&mut Encoder::new(
            out, &mut ids, &mut spare, level, &left_out,
        )) {
            Ok(()) => return Ok(left_out.get()),
            Err(Stop::Failed(e)) => return Err(e),
            Err(Stop::NewName) => out.truncate(start),
        }
    }
    left_out.set(false);
    // A name seen for the first time: encode again, numbering new names as they come.
    let mut guard = NAMES.write().unwrap_or_else(PoisonError::into_inner);
    let names = guard.get_or_insert_with(Names::default);
    let mut ids = Adding(names);
    let mut spare = Vec::new();
    match value.serialize(&mut Encoder::new(
        out, &mut ids, &mut spare, level, &left_out,
    )) {
        Ok(()) => Ok(left_out.get()),
        Err(Stop::Failed(e)) => Err(e),
        Err(Stop::NewName) => Err(CodecError::Encode(
            "a field name could not be numbered".into(),
        )),
    }
}

mod decode;

pub(crate) use decode::decode;
use decode::json_error_kind;

// ---------------------------------------------------------------------------------------
// Encoding

/// Why an encode stopped: a failure, or a name the lookup table does not have yet.
#[derive(Debug)]
enum Stop {
    Failed(CodecError),
    NewName,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed(e) => e.fmt(f),
            Self::NewName => f.write_str("a new field name"),
        }
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Failed(CodecError::Encode(msg.to_string()))
    }
}

struct Encoder<'a, N> {
    out: &'a mut Vec<u8>,
    ids: &'a mut N,
    /// Buffers the structs being written hold their large fields in, reused.
    spare: &'a mut Vec<Vec<u8>>,
    /// Where the value being written is, for what [`Keep`] leaves out.
    level: Level,
    /// Set when something was left out.
    left_out: &'a Cell<bool>,
}

/// Where a value is in the object, as far as [`Keep::AllButManagedFields`] cares: the
/// top-level value, its `metadata`, or anywhere else (every value, when all is kept).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    Top,
    Metadata,
    Below,
}

impl Level {
    /// The level of the value of field `key` of a compound at this level.
    fn of_field(self, key: &str) -> Level {
        if self == Level::Top && key == "metadata" {
            Level::Metadata
        } else {
            Level::Below
        }
    }
}

impl<'a, N> Encoder<'a, N> {
    fn new(
        out: &'a mut Vec<u8>,
        ids: &'a mut N,
        spare: &'a mut Vec<Vec<u8>>,
        level: Level,
        left_out: &'a Cell<bool>,
    ) -> Self {
        Self {
            out,
            ids,
            spare,
            level,
            left_out,
        }
    }
}

/// A struct field whose encoding (its id and value) takes more bytes than this is written
/// after the struct's smaller fields: see [the layout](self#layout).
const LARGE_FIELD: usize = 24;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    if s.len() <= SHORT_STR_MAX {
        out.push(SHORT_STR | s.len() as u8);
    } else {
        out.push(STR);
        put_varint(out, s.len() as u64);
    }
    out.extend_from_slice(s.as_bytes());
}

fn put_uint(out: &mut Vec<u8>, v: u64) {
    if v <= SMALL_UINT_MAX {
        out.push(SMALL_UINT | v as u8);
    } else {
        out.push(UINT);
        put_varint(out, v);
    }
}

/// The bytes reserved for a compound's length: a two-byte varint holds up to this.
const RESERVED_LEN_MAX: usize = (1 << 14) - 1;

/// Reserves the length of a compound whose content follows; [`fill_len`] writes it.
fn reserve_len(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0x80, 0]);
    at
}

/// Writes the length of the content that follows the two bytes reserved at `at`: in those
/// two bytes when it fits, else in a longer varint, moving the content over.
fn fill_len(out: &mut Vec<u8>, at: usize) {
    let len = out.len() - at - 2;
    if len <= RESERVED_LEN_MAX {
        out[at] = 0x80 | (len & 0x7f) as u8;
        out[at + 1] = (len >> 7) as u8;
    } else {
        let mut varint = Vec::with_capacity(10);
        put_varint(&mut varint, len as u64);
        out.splice(at..at + 2, varint);
    }
}

impl<N: NameIds> Encoder<'_, N> {
    /// Writes `value` at `level`, then goes back to this encoder's level.
    fn at_level<T: Serialize + ?Sized>(&mut self, level: Level, value: &T) -> Result<(), Stop> {
        let outer = std::mem::replace(&mut self.level, level);
        let written = value.serialize(&mut *self);
        self.level = outer;
        written
    }

    /// Opens a compound: its tag and its reserved length, after `{variant: ` for an enum
    /// variant (a one-entry map, whose length is filled in too).
    fn open(&mut self, variant: Option<&str>, tag: u8) -> Compound<'_, N> {
        let outer = variant.map(|variant| {
            self.out.push(MAP);
            let at = reserve_len(self.out);
            put_str(self.out, variant);
            at
        });
        self.out.push(tag);
        let inner = reserve_len(self.out);
        let large = (tag == STRUCT).then(|| self.spare.pop().unwrap_or_default());
        Compound {
            enc: Encoder {
                out: &mut *self.out,
                ids: &mut *self.ids,
                spare: &mut *self.spare,
                level: self.level,
                left_out: self.left_out,
            },
            lens: [Some(inner), outer],
            large,
            value_level: Level::Below,
        }
    }

    fn field_name(&mut self, name: &'static str) -> Result<(), Stop> {
        match self.ids.id(name) {
            None => Err(Stop::NewName),
            Some(INLINE_NAME) => {
                put_varint(self.out, u64::from(INLINE_NAME));
                put_str(self.out, name);
                Ok(())
            }
            Some(id) => {
                put_varint(self.out, u64::from(id));
                Ok(())
            }
        }
    }
}

impl<'a, N: NameIds> ser::Serializer for &'a mut Encoder<'_, N> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Compound<'a, N>;
    type SerializeTuple = Compound<'a, N>;
    type SerializeTupleStruct = Compound<'a, N>;
    type SerializeTupleVariant = Compound<'a, N>;
    type SerializeMap = Compound<'a, N>;
    type SerializeStruct = Compound<'a, N>;
    type SerializeStructVariant = Compound<'a, N>;

    fn serialize_bool(self, v: bool) -> Result<(), Stop> {
        self.out.push(if v { TRUE } else { FALSE });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Stop> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Stop> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Stop> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Stop> {
        if v >= 0 {
            put_uint(self.out, v.unsigned_abs());
        } else {
            self.out.push(NEG);
            // -1 - v, without overflow for i64::MIN.
            put_varint(self.out, (v + 1).unsigned_abs());
        }
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Stop> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Stop> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Stop> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Stop> {
        put_uint(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Stop> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Stop> {
        self.out.push(F64);
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Stop> {
        put_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Stop> {
        put_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Stop> {
        self.out.push(BYTES);
        put_varint(self.out, v.len() as u64);
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Stop> {
        self.out.push(NULL);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Stop> {
        self.out.push(NULL);
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Stop> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Stop> {
        put_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        if !RAW_JSON_TYPES.contains(&name) {
            return value.serialize(self);
        }
        // The JSON goes straight to the end of `out`, after its reserved length.
        self.out.push(RAW_JSON);
        let at = reserve_len(self.out);
        serde_json::to_writer(&mut *self.out, value)
            .map_err(|e| Stop::Failed(CodecError::Encode(json_error_kind(&e).into())))?;
        fill_len(self.out, at);
        Ok(())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        self.out.push(MAP);
        let at = reserve_len(self.out);
        put_str(self.out, variant);
        value.serialize(&mut *self)?;
        fill_len(self.out, at);
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, N>, Stop> {
        Ok(self.open(None, SEQ))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, N>, Stop> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, N>, Stop> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, N>, Stop> {
        Ok(self.open(Some(variant), SEQ))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, N>, Stop> {
        Ok(self.open(None, MAP))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a, N>, Stop> {
        Ok(self.open(None, STRUCT))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, N>, Stop> {
        Ok(self.open(Some(variant), STRUCT))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Stop> {
        match i64::try_from(v) {
            Ok(v) => self.serialize_i64(v),
            Err(_) => Err(Stop::Failed(CodecError::Encode(
                "an integer out of the 64-bit range".into(),
            ))),
        }
    }
    fn serialize_u128(self, v: u128) -> Result<(), Stop> {
        match u64::try_from(v) {
            Ok(v) => self.serialize_u64(v),
            Err(_) => Err(Stop::Failed(CodecError::Encode(
                "an integer out of the 64-bit range".into(),
            ))),
        }
    }
}

/// A sequence, map or struct being written; at its end the lengths reserved at `lens`
/// are filled in (its own, then an enum variant's around it).
struct Compound<'a, N> {
    enc: Encoder<'a, N>,
    lens: [Option<usize>; 2],
    /// For a struct: its large fields, written after the others at its end.
    large: Option<Vec<u8>>,
    /// For a map: the level of the value of the key just written.
    value_level: Level,
}

impl<N> Compound<'_, N> {
    fn end(self) -> Result<(), Stop> {
        let Compound {
            enc, lens, large, ..
        } = self;
        if let Some(mut large) = large {
            enc.out.extend_from_slice(&large);
            large.clear();
            enc.spare.push(large);
        }
        for at in lens.into_iter().flatten() {
            fill_len(enc.out, at);
        }
        Ok(())
    }

    /// A struct's field written at `at` and after: moved to the large fields when large.
    fn place_field(&mut self, at: usize) {
        if let Some(large) = &mut self.large
            && self.enc.out.len() - at > LARGE_FIELD
        {
            large.extend_from_slice(&self.enc.out[at..]);
            self.enc.out.truncate(at);
        }
    }
}

/// The sequence-like compounds write each element in turn, as they come.
macro_rules! elements_in_turn {
    ($($trait:ident :: $method:ident),* $(,)?) => {$(
        impl<N: NameIds> ser::$trait for Compound<'_, N> {
            type Ok = ();
            type Error = Stop;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
                self.enc.at_level(Level::Below, value)
            }
            fn end(self) -> Result<(), Stop> {
                Compound::end(self)
            }
        }
    )*};
}

elements_in_turn!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl<N: NameIds> ser::SerializeMap for Compound<'_, N> {
    type Ok = ();
    type Error = Stop;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        let at = self.enc.out.len();
        self.enc.at_level(Level::Below, key)?;
        // The top-level map of a type with flattened fields (`DynamicObject`): its
        // `metadata` entry's value is the metadata.
        self.value_level = if self.enc.level == Level::Top
            && self.enc.out[at..]
                == [
                    SHORT_STR | 8,
                    b'm',
                    b'e',
                    b't',
                    b'a',
                    b'd',
                    b'a',
                    b't',
                    b'a',
                ] {
            Level::Metadata
        } else {
            Level::Below
        };
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        self.enc.at_level(self.value_level, value)
    }
    fn end(self) -> Result<(), Stop> {
        Compound::end(self)
    }
}

/// The struct-like compounds write each field's name (its number, or the name when it has
/// none), then its value.
macro_rules! fields_by_name {
    ($($trait:ident),* $(,)?) => {$(
        impl<N: NameIds> ser::$trait for Compound<'_, N> {
            type Ok = ();
            type Error = Stop;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Stop> {
                if self.enc.level == Level::Metadata && key == "managedFields" {
                    self.enc.left_out.set(true);
                    return Ok(());
                }
                let at = self.enc.out.len();
                self.enc.field_name(key)?;
                self.enc.at_level(self.enc.level.of_field(key), value)?;
                self.place_field(at);
                Ok(())
            }
            fn end(self) -> Result<(), Stop> {
                Compound::end(self)
            }
        }
    )*};
}

fields_by_name!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests;
