//! Repeated fields and maps: gathered wherever their elements are in the message, packed or
//! not.

use std::cell::Cell;

use serde::de::{self, DeserializeSeed, Visitor};
use serde::forward_to_deserialize_any;

use crate::error::{DeError as Error, Segment};
use crate::schema::{Field, Ty};
use crate::wire::{Reader, Value, WireType};

use super::value::{GoStrDe, ValueDe};
use super::{Result, malformed, wire_type_of};

/// A repeated field (a slice or a map): every occurrence of its number in the message, from
/// the first one on.
pub(super) struct RepeatedDe<'de, 'a> {
    pub(super) field: &'static Field,
    pub(super) reader: Reader<'de>,
    /// Set when the occurrences are one run (they end at the first other field): where the
    /// run ends is written there once the last element was read.
    pub(super) run_end: Option<&'a Cell<Option<usize>>>,
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
pub(super) struct RepeatedAccess<'de, 'a> {
    pub(super) elem: &'static Ty,
    pub(super) occurrences: Occurrences<'de, 'a>,
    pub(super) packed: Option<Reader<'de>>,
    pub(super) index: usize,
}

/// The occurrences of one field number in a message, from a first one on.
pub(super) struct Occurrences<'de, 'a> {
    pub(super) number: u32,
    pub(super) reader: Reader<'de>,
    /// Set when the occurrences are one run: the first other field ends them, and where it
    /// starts is written there (see [`MessageAccess::run_end`]).
    pub(super) run_end: Option<&'a Cell<Option<usize>>>,
}

impl<'de> Occurrences<'de, '_> {
    pub(super) fn next(&mut self) -> Result<Option<Value<'de>>> {
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
    pub(super) fn new(elem: &'static Ty, occurrences: Occurrences<'de, 'a>) -> Self {
        RepeatedAccess {
            elem,
            occurrences,
            packed: None,
            index: 0,
        }
    }

    pub(super) fn next_value(&mut self) -> Result<Option<Value<'de>>> {
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
pub(super) struct MapEntries<'de, 'a> {
    pub(super) value: &'static Ty,
    pub(super) occurrences: Occurrences<'de, 'a>,
    pub(super) pending: Option<Value<'de>>,
}

impl<'de> MapEntries<'de, '_> {
    /// The next entry's key (a Go string's bytes) and value (the Go zero value when the
    /// entry has none).
    pub(super) fn next_entry(&mut self) -> Result<Option<(&'de [u8], Value<'de>)>> {
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
        let value = value.unwrap_or(match want {
            WireType::Varint => Value::Varint(0),
            WireType::Fixed64 => Value::Fixed64(0),
            WireType::Fixed32 => Value::Fixed32(0),
            WireType::Len => Value::Len(&[]),
        });
        Ok(Some((key, value)))
    }
}

impl<'de> de::MapAccess<'de> for MapEntries<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some((key, value)) = self.next_entry()? else {
            return Ok(None);
        };
        self.pending = Some(value);
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
