//! Reading the encoding where it lies: one value at a time, a struct's field by its id.
//!
//! Every value of the encoding says how long it is (see the codec's layout), so finding a
//! field of a struct steps over each field before it in one jump. Nothing here allocates.
//! The bytes were written by this crate's encoder; bytes that do not parse read as absent
//! (never a panic): a view cannot fail half-way, and [`Cached::decode`](crate::Cached::decode)
//! is the typed error for an entry that does not decode.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::codec::{self, tags::*};

/// One encoded value: its tag and its bytes after the tag (a string's text, a compound's
/// content, an integer's varint).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Raw<'a> {
    pub(crate) tag: u8,
    pub(crate) body: &'a [u8],
}

/// A LEB128 varint. Field ids and compound lengths are one or two bytes: those are read
/// without a loop.
#[inline(always)]
pub(crate) fn varint(input: &mut &[u8]) -> Option<u64> {
    match **input {
        [b, ref rest @ ..] if b < 0x80 => {
            *input = rest;
            Some(u64::from(b))
        }
        [b0, b1, ref rest @ ..] if b1 < 0x80 => {
            *input = rest;
            Some(u64::from(b0 & 0x7f) | (u64::from(b1) << 7))
        }
        _ => varint_long(input),
    }
}

#[cold]
fn varint_long(input: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    while shift < 64 {
        let (&b, rest) = input.split_first()?;
        *input = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
    None
}

/// Steps over the next value of `input` without looking into it: what a look-up does for
/// every field before the one it wants.
#[inline(always)]
fn skip(input: &mut &[u8]) -> Option<()> {
    let (&tag, rest) = input.split_first()?;
    *input = rest;
    let len = match tag {
        t if t >= SMALL_UINT => 0,
        t @ SHORT_STR..=0x7f => usize::from(t - SHORT_STR),
        NULL | FALSE | TRUE => 0,
        F64 => 8,
        UINT | NEG => return varint(input).map(drop),
        STR | BYTES | RAW_JSON | SEQ | MAP | STRUCT => usize::try_from(varint(input)?).ok()?,
        _ => return None,
    };
    *input = input.get(len..)?;
    Some(())
}

fn take<'a>(input: &mut &'a [u8], len: u64) -> Option<&'a [u8]> {
    let len = usize::try_from(len).ok()?;
    if len > input.len() {
        return None;
    }
    let (head, rest) = input.split_at(len);
    *input = rest;
    Some(head)
}

/// The next value of `input`, which is left after it.
#[inline]
pub(crate) fn next<'a>(input: &mut &'a [u8]) -> Option<Raw<'a>> {
    let (&tag, rest) = input.split_first()?;
    *input = rest;
    let body = match tag {
        NULL | FALSE | TRUE => &[][..],
        UINT | NEG => {
            let before = *input;
            varint(input)?;
            &before[..before.len() - input.len()]
        }
        F64 => take(input, 8)?,
        SHORT_STR..=0x7f => take(input, u64::from(tag - SHORT_STR))?,
        STR | BYTES | RAW_JSON | SEQ | MAP | STRUCT => {
            let len = varint(input)?;
            take(input, len)?
        }
        t if t >= SMALL_UINT => &[][..],
        _ => return None,
    };
    Some(Raw { tag, body })
}

impl<'a> Raw<'a> {
    /// The value as the only value of `bytes` (an entry's whole encoding).
    pub(crate) fn whole(bytes: &'a [u8]) -> Option<Self> {
        let mut input = bytes;
        let raw = next(&mut input)?;
        input.is_empty().then_some(raw)
    }

    pub(crate) fn is_null(&self) -> bool {
        self.tag == NULL
    }

    pub(crate) fn as_str(&self) -> Option<&'a str> {
        match self.tag {
            STR | SHORT_STR..=0x7f => std::str::from_utf8(self.body).ok(),
            _ => None,
        }
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self.tag {
            TRUE => Some(true),
            FALSE => Some(false),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self.tag {
            UINT => varint(&mut { self.body }),
            t if t >= SMALL_UINT => Some(u64::from(t - SMALL_UINT)),
            _ => None,
        }
    }

    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self.tag {
            NEG => {
                let n = i64::try_from(varint(&mut { self.body })?).ok()?;
                Some(-1 - n)
            }
            _ => i64::try_from(self.as_u64()?).ok(),
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self.tag {
            F64 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(self.body);
                Some(f64::from_le_bytes(a))
            }
            // JSON has one kind of number: an integral float may have been written as one.
            NEG => self.as_i64().map(|v| v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The JSON text of a free-form JSON value (`managedFields`' `fieldsV1`).
    pub(crate) fn as_json(&self) -> Option<&'a str> {
        match self.tag {
            RAW_JSON => std::str::from_utf8(self.body).ok(),
            _ => None,
        }
    }

    /// The content of a struct, or of a map in its place (an object kept as a JSON map by
    /// its type: a `serde_json::Value`, a `DynamicObject`'s fields), whose keys are its
    /// fields' names.
    pub(crate) fn as_struct(&self) -> Option<Fields<'a>> {
        match self.tag {
            STRUCT => Some(Fields {
                content: self.body,
                keyed: false,
                index: None,
            }),
            MAP => Some(Fields {
                content: self.body,
                keyed: true,
                index: None,
            }),
            _ => None,
        }
    }

    /// The content of a sequence.
    pub(crate) fn as_seq(&self) -> Option<&'a [u8]> {
        (self.tag == SEQ).then_some(self.body)
    }

    /// The content of a map.
    pub(crate) fn as_map(&self) -> Option<&'a [u8]> {
        (self.tag == MAP).then_some(self.body)
    }
}

/// A struct's content: (field id, value) pairs.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Fields<'a> {
    pub(crate) content: &'a [u8],
    /// Whether the fields are a map's entries (string keys) rather than numbered.
    keyed: bool,
    /// Where the fields lie, found once: an object's top-level fields
    /// ([`Cached`](crate::Cached) keeps their index).
    index: Option<&'a TopIndex>,
}

/// An empty struct, for a view of a field the object does not have.
pub(crate) const NO_FIELDS: Fields<'static> = Fields {
    content: &[],
    keyed: false,
    index: None,
};

/// How many top-level fields an object's index holds: a Kubernetes object has
/// `apiVersion`, `kind`, `metadata`, `spec` and `status` (protobuf leaves out the first
/// two); a kind with more top-level fields has its first five indexed.
const TOP: usize = 5;

/// Where an object's top-level fields lie in its struct's content, found when the object
/// is made, so that a read of `spec` goes straight to it without reading the bytes before
/// it (which lie in other cache lines than the field it wants). Kept beside the encoding
/// in the object's handle, in the cache line its reference count is in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TopIndex {
    /// Each field's value's offset in the content.
    offsets: [u32; TOP],
    /// Each field's id.
    ids: [u16; TOP],
    /// How many fields are indexed.
    len: u8,
    /// Whether they are all the struct's fields (a name missing is then absent).
    complete: bool,
    /// Whether the struct is a map in a struct's place (its keys are names).
    keyed: bool,
}

/// What the index says of a field.
enum Indexed {
    At(usize),
    Absent,
    Unknown,
}

impl TopIndex {
    /// The index of the struct `content`; empty for one it cannot index (the fields of a
    /// map, named inline, or past the index's offsets).
    pub(crate) fn of(fields: Fields<'_>) -> Self {
        let mut index = Self::default();
        if fields.keyed {
            index.keyed = true;
            return index;
        }
        let content = fields.content;
        let mut input = content;
        while !input.is_empty() {
            let Some(at) = varint(&mut input) else {
                return Self::default();
            };
            let offset = content.len() - input.len();
            let (Ok(id), Ok(offset)) = (u16::try_from(at), u32::try_from(offset)) else {
                return Self::default();
            };
            let len = usize::from(index.len);
            if id == 0 || u32::from(id) == codec::INLINE_NAME || len == TOP {
                // More fields than the index holds, or one named inline: look the rest up.
                return index;
            }
            index.offsets[len] = offset;
            index.ids[len] = id;
            index.len += 1;
            if skip(&mut input).is_none() {
                return Self::default();
            }
        }
        index.complete = true;
        index
    }

    #[inline]
    fn find(&self, id: u64) -> Indexed {
        let len = usize::from(self.len);
        for (i, &have) in self.ids.iter().enumerate().take(len) {
            if u64::from(have) == id {
                return Indexed::At(self.offsets[i] as usize);
            }
        }
        if self.complete {
            Indexed::Absent
        } else {
            Indexed::Unknown
        }
    }
}

impl<'a> Fields<'a> {
    /// The fields of an object's top-level struct `content`, with its `index`.
    pub(crate) fn indexed(content: Fields<'a>, index: &'a TopIndex) -> Self {
        Self {
            index: Some(index),
            ..content
        }
    }

    /// The fields of an object's top-level struct whose content (after its header) is
    /// `content`, as `index` found them.
    #[inline]
    pub(crate) fn top(content: &'a [u8], index: &'a TopIndex) -> Self {
        Self {
            content,
            keyed: index.keyed,
            index: Some(index),
        }
    }

    /// The value of the field `name`: where the index says, or found by stepping over the
    /// fields before it.
    #[inline]
    pub(crate) fn get(&self, name: &FieldName) -> Option<Raw<'a>> {
        if self.keyed {
            return self.get_keyed(name.name);
        }
        let id = u64::from(name.id()?);
        if let Some(index) = self.index {
            match index.find(id) {
                Indexed::At(offset) => return next(&mut self.content.get(offset..)?),
                Indexed::Absent => return None,
                Indexed::Unknown => {}
            }
        }
        let mut input = self.content;
        while !input.is_empty() {
            let at = varint(&mut input)?;
            if at == id {
                return next(&mut input);
            }
            if at == u64::from(codec::INLINE_NAME) {
                let key = next(&mut input)?;
                if key.as_str() == Some(name.name) {
                    return next(&mut input);
                }
            }
            skip(&mut input)?;
        }
        None
    }

    /// The value under key `name` of a map's entries.
    #[cold]
    fn get_keyed(&self, name: &str) -> Option<Raw<'a>> {
        let mut input = self.content;
        while !input.is_empty() {
            let key = next(&mut input)?;
            let value = next(&mut input)?;
            if key.as_str() == Some(name) {
                return Some(value);
            }
        }
        None
    }

    /// Each field, by its name, in the order written.
    pub(crate) fn iter(&self) -> FieldsIter<'a> {
        FieldsIter {
            input: self.content,
            keyed: self.keyed,
        }
    }
}

/// The fields of a struct with their names.
pub(crate) struct FieldsIter<'a> {
    input: &'a [u8],
    keyed: bool,
}

impl<'a> Iterator for FieldsIter<'a> {
    type Item = (&'a str, Raw<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.input.is_empty() {
            return None;
        }
        if self.keyed {
            let key = next(&mut self.input)?.as_str()?;
            return Some((key, next(&mut self.input)?));
        }
        let at = varint(&mut self.input)?;
        let name: &'a str = if at == u64::from(codec::INLINE_NAME) {
            next(&mut self.input)?.as_str()?
        } else {
            codec::field_name(u32::try_from(at).ok()?)?
        };
        let value = next(&mut self.input)?;
        Some((name, value))
    }
}

/// A field name and the id the encoder numbered it with, looked up once: what a view
/// keeps per field it reads (`static`, one per name).
#[derive(Debug)]
pub(crate) struct FieldName {
    name: &'static str,
    /// `0` until the name has been seen numbered.
    id: AtomicU32,
}

impl FieldName {
    /// The field `name` (its JSON name, as serde writes it).
    pub(crate) const fn new(name: &'static str) -> Self {
        Self {
            name,
            id: AtomicU32::new(0),
        }
    }

    /// The id the field is written with; `None` while no object of the process has been
    /// written with it (then no stored object has it).
    #[inline]
    fn id(&self) -> Option<u32> {
        match self.id.load(Ordering::Relaxed) {
            0 => {
                let id = codec::field_id(self.name)?;
                self.id.store(id, Ordering::Relaxed);
                Some(id)
            }
            id => Some(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    static SPEC: FieldName = FieldName::new("spec");
    static NODE_NAME: FieldName = FieldName::new("nodeName");
    static MISSING: FieldName = FieldName::new("a name no object of this test has");

    #[test]
    fn a_field_is_found_past_the_ones_before_it_and_a_missing_one_is_none() {
        let bytes = crate::encode_to_vec(&serde_json::json!({"x": 1})).unwrap();
        // A map in a struct's place is read by its keys.
        assert!(Raw::whole(&bytes).and_then(|r| r.as_struct()).is_some());
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Spec {
            volumes: Vec<String>,
            node_name: String,
        }
        #[derive(serde::Serialize)]
        struct Pod {
            metadata: std::collections::BTreeMap<String, String>,
            spec: Spec,
        }
        let pod = Pod {
            metadata: [("a".to_string(), "b".repeat(50_000))].into(),
            spec: Spec {
                volumes: vec!["v".repeat(1000); 10],
                node_name: "node-1".into(),
            },
        };
        let bytes = crate::encode_to_vec(&pod).unwrap();
        let top = Raw::whole(&bytes).and_then(|r| r.as_struct()).unwrap();
        let spec = top.get(&SPEC).and_then(|r| r.as_struct()).unwrap();
        assert_eq!(
            spec.get(&NODE_NAME).and_then(|r| r.as_str()),
            Some("node-1")
        );
        assert!(top.get(&MISSING).is_none());
        let names: Vec<&str> = top.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["metadata", "spec"]);
    }

    /// The index of an object's top-level fields finds what a walk finds, and knows
    /// what is absent when it holds every field.
    #[test]
    fn the_top_level_index_finds_what_a_walk_finds() {
        static NAMES: [FieldName; 7] = [
            FieldName::new("a"),
            FieldName::new("b"),
            FieldName::new("c"),
            FieldName::new("d"),
            FieldName::new("e"),
            FieldName::new("f"),
            FieldName::new("not there"),
        ];
        #[derive(serde::Serialize)]
        struct Few {
            a: u8,
            b: String,
        }
        #[derive(serde::Serialize)]
        struct Many {
            a: u8,
            b: String,
            c: Vec<u8>,
            d: bool,
            e: Option<u8>,
            f: String,
        }
        let few = crate::encode_to_vec(&Few {
            a: 1,
            b: "x".repeat(40),
        })
        .unwrap();
        let many = crate::encode_to_vec(&Many {
            a: 1,
            b: "x".repeat(40),
            c: vec![7; 30],
            d: true,
            e: None,
            f: "last".into(),
        })
        .unwrap();
        for (bytes, complete) in [(few, true), (many, false)] {
            let walked = Raw::whole(&bytes).and_then(|r| r.as_struct()).unwrap();
            let index = TopIndex::of(walked);
            assert_eq!(index.complete, complete);
            let indexed = Fields::indexed(walked, &index);
            for name in &NAMES {
                let (a, b) = (walked.get(name), indexed.get(name));
                assert_eq!(
                    a.map(|r| (r.tag, r.body)),
                    b.map(|r| (r.tag, r.body)),
                    "{name:?}"
                );
            }
        }
    }

    proptest! {
        /// Bytes that are not the encoding read as absent, never a panic.
        #[test]
        fn arbitrary_bytes_read_as_absent_never_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let fields = Fields { content: &bytes, keyed: false, index: None };
            let _ = fields.get(&SPEC);
            let _ = fields.iter().count();
            let index = TopIndex::of(fields);
            let _ = Fields::indexed(fields, &index).get(&SPEC);
            let keyed = Fields { content: &bytes, keyed: true, index: None };
            let _ = keyed.get(&SPEC);
            let _ = keyed.iter().count();
            if let Some(raw) = Raw::whole(&bytes) {
                let _ = (raw.as_str(), raw.as_i64(), raw.as_f64(), raw.as_json(), raw.as_bool());
            }
        }
    }
}
