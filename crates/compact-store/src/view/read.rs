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

pub(crate) fn varint(input: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = input.split_first()?;
        *input = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
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
            }),
            MAP => Some(Fields {
                content: self.body,
                keyed: true,
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
}

/// An empty struct, for a view of a field the object does not have.
pub(crate) const NO_FIELDS: Fields<'static> = Fields {
    content: &[],
    keyed: false,
};

impl<'a> Fields<'a> {
    /// The value of the field `name`, stepping over the fields before it.
    #[inline]
    pub(crate) fn get(&self, name: &FieldName) -> Option<Raw<'a>> {
        if self.keyed {
            return self.get_keyed(name.name);
        }
        let id = name.id()?;
        let mut input = self.content;
        while !input.is_empty() {
            let at = varint(&mut input)?;
            if at == u64::from(codec::INLINE_NAME) {
                let key = next(&mut input)?;
                let value = next(&mut input)?;
                if key.as_str() == Some(name.name) {
                    return Some(value);
                }
                continue;
            }
            let value = next(&mut input)?;
            if at == u64::from(id) {
                return Some(value);
            }
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

    proptest! {
        /// Bytes that are not the encoding read as absent, never a panic.
        #[test]
        fn arbitrary_bytes_read_as_absent_never_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let fields = Fields { content: &bytes, keyed: false };
            let _ = fields.get(&SPEC);
            let _ = fields.iter().count();
            let keyed = Fields { content: &bytes, keyed: true };
            let _ = keyed.get(&SPEC);
            let _ = keyed.iter().count();
            if let Some(raw) = Raw::whole(&bytes) {
                let _ = (raw.as_str(), raw.as_i64(), raw.as_f64(), raw.as_json(), raw.as_bool());
            }
        }
    }
}
