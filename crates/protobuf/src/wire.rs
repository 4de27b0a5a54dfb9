//! The protobuf wire format: varints, field keys, and the four kinds of value.
//!
//! Every length is checked against the bytes that remain before it is used, so a hostile
//! length prefix can make a read fail but never makes it allocate or read out of bounds.
//! What is accepted follows the Go code Kubernetes generates (gogo-protobuf's `Unmarshal`):
//! a tenth varint byte's high bits are dropped, unknown fields of any wire type (groups
//! included) are skipped.

/// A field's value as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, messages, packed repeated scalars.
    Len(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
    /// Wire type 3: a group, only ever skipped (no Kubernetes type has one).
    Group,
}

/// Why the wire format is broken (no byte of the input in it).
pub(crate) type Fault = &'static str;

/// A forward-only cursor over an encoded message.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// The deepest group nesting skipped; deeper is treated as malformed.
const MAX_GROUP_DEPTH: u32 = 64;

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The whole message this reader walks.
    #[inline]
    pub(crate) fn buf(&self) -> &'a [u8] {
        self.buf
    }

    /// Reads a varint. Up to ten bytes, as Go reads them: bits past the 64th are dropped.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, Fault> {
        let buf = self.buf;
        let mut pos = self.pos;
        // Fast path: one byte (field keys, small numbers, short lengths).
        if let Some(&b) = buf.get(pos)
            && b < 0x80
        {
            self.pos = pos + 1;
            return Ok(u64::from(b));
        }
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            if shift >= 64 {
                return Err("varint longer than ten bytes");
            }
            let Some(&b) = buf.get(pos) else {
                return Err("truncated varint");
            };
            pos += 1;
            value |= u64::from(b & 0x7f).wrapping_shl(shift);
            if b < 0x80 {
                self.pos = pos;
                return Ok(value);
            }
            shift += 7;
        }
    }

    /// Reads `n` bytes.
    #[inline]
    fn take(&mut self, n: u64) -> Result<&'a [u8], Fault> {
        let rest = self.buf.len() - self.pos.min(self.buf.len());
        if n > rest as u64 {
            return Err("length past the end of the message");
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    /// Reads the next field: its number and value. `None` at the end of the message.
    ///
    /// Inlined, with a fast path for what Kubernetes objects are made of (a key of one or
    /// two bytes, then a varint or a length of one or two bytes that fits): this is called
    /// for every field, and an out-of-line call returning its result through memory costs
    /// more than the decoding itself.
    #[inline(always)]
    pub(crate) fn field(&mut self) -> Result<Option<(u32, Value<'a>)>, Fault> {
        let buf = self.buf;
        let mut pos = self.pos;
        let Some(key) = short_varint(buf, &mut pos) else {
            return self.field_slow();
        };
        let number = (key >> 3) as u32;
        if number == 0 {
            return self.field_slow();
        }
        match key & 7 {
            0 => {
                if let Some(v) = short_varint(buf, &mut pos) {
                    self.pos = pos;
                    return Ok(Some((number, Value::Varint(v))));
                }
            }
            2 => {
                if let Some(len) = short_varint(buf, &mut pos)
                    && let Some(payload) = buf.get(pos..pos + len as usize)
                {
                    self.pos = pos + len as usize;
                    return Ok(Some((number, Value::Len(payload))));
                }
            }
            _ => {}
        }
        self.field_slow()
    }

    #[inline(never)]
    fn field_slow(&mut self) -> Result<Option<(u32, Value<'a>)>, Fault> {
        if self.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > i32::MAX as u64 {
            return Err("invalid field number");
        }
        let value = self.value((key & 7) as u8)?;
        Ok(Some((number as u32, value)))
    }

    #[inline]
    fn value(&mut self, wire_type: u8) -> Result<Value<'a>, Fault> {
        Ok(match wire_type {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let n = self.varint()?;
                Value::Len(self.take(n)?)
            }
            3 => {
                self.skip_group()?;
                Value::Group
            }
            4 => return Err("end of a group that was not started"),
            5 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Value::Fixed32(u32::from_le_bytes(a))
            }
            _ => return Err("invalid wire type"),
        })
    }

    /// Skips to the end of a group whose start key was just read.
    fn skip_group(&mut self) -> Result<(), Fault> {
        let mut depth = 1u32;
        loop {
            if self.is_empty() {
                return Err("unterminated group");
            }
            let key = self.varint()?;
            match key & 7 {
                3 => {
                    depth += 1;
                    if depth > MAX_GROUP_DEPTH {
                        return Err("groups nested too deep");
                    }
                }
                4 => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                t => {
                    self.value(t as u8)?;
                }
            }
        }
    }
}

/// A varint of one or two bytes at `*pos`, advancing past it; `None` (and `*pos` untouched)
/// for anything else, which the slow path reads.
#[inline(always)]
fn short_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let b0 = *buf.get(*pos)?;
    if b0 < 0x80 {
        *pos += 1;
        return Some(u64::from(b0));
    }
    let b1 = *buf.get(*pos + 1)?;
    if b1 < 0x80 {
        *pos += 2;
        return Some(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
    }
    None
}

/// The wire type a single value of a field is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

impl Value<'_> {
    pub(crate) fn wire_type(&self) -> Option<WireType> {
        match self {
            Value::Varint(_) => Some(WireType::Varint),
            Value::Fixed64(_) => Some(WireType::Fixed64),
            Value::Len(_) => Some(WireType::Len),
            Value::Fixed32(_) => Some(WireType::Fixed32),
            Value::Group => None,
        }
    }
}

/// The last occurrence of field `number` in `msg` of wire type length-delimited, as protobuf
/// reads a non-repeated field written more than once (the last one wins).
pub(crate) fn last_len(msg: &[u8], number: u32) -> Result<Option<&[u8]>, Fault> {
    let mut found = [None];
    len_fields_into(msg, [number], &mut found)?;
    Ok(found[0])
}

/// The length-delimited fields `numbers` of `msg` (each its last occurrence, empty when
/// absent), for the small fixed messages read by hand: the envelope, its TypeMeta, a
/// watch event.
pub(crate) fn len_fields<const N: usize>(
    msg: &[u8],
    numbers: [u32; N],
) -> Result<[&[u8]; N], Fault> {
    let mut found = [None; N];
    len_fields_into(msg, numbers, &mut found)?;
    Ok(found.map(Option::unwrap_or_default))
}

fn len_fields_into<'a, const N: usize>(
    msg: &'a [u8],
    numbers: [u32; N],
    found: &mut [Option<&'a [u8]>; N],
) -> Result<(), Fault> {
    let mut r = Reader::new(msg);
    while let Some((n, v)) = r.field()? {
        if let Some(i) = numbers.iter().position(|&k| k == n) {
            match v {
                Value::Len(b) => found[i] = Some(b),
                _ => return Err("wrong wire type"),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_as_go_reads_them() {
        let cases: &[(&[u8], u64)] = &[
            (&[0], 0),
            (&[1], 1),
            (&[0xac, 0x02], 300),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                u64::MAX,
            ),
            // A tenth byte's bits past the 64th are dropped, as in Go.
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
                u64::MAX,
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(Reader::new(bytes).varint(), Ok(*want), "{bytes:?}");
        }
        assert!(Reader::new(&[0x80]).varint().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
    }

    #[test]
    fn fields_of_every_wire_type_are_read_and_groups_skipped() {
        let msg = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 0x02, b'h', b'i', // 3: "hi"
            0x23, 0x08, 0x01, 0x24, // 4: group { 1: 1 }
            0x2d, 2, 0, 0, 0, // 5: fixed32 2
        ];
        let mut r = Reader::new(&msg);
        assert_eq!(r.field(), Ok(Some((1, Value::Varint(150)))));
        assert_eq!(r.field(), Ok(Some((2, Value::Fixed64(1)))));
        assert_eq!(r.field(), Ok(Some((3, Value::Len(b"hi")))));
        assert_eq!(r.field(), Ok(Some((4, Value::Group))));
        assert_eq!(r.field(), Ok(Some((5, Value::Fixed32(2)))));
        assert_eq!(r.field(), Ok(None));
    }

    #[test]
    fn lengths_past_the_end_and_bad_keys_are_faults() {
        for bad in [
            &[0x0a, 0x05, b'a'][..],                   // length 5, one byte left
            &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f][..], // a 4 GiB length prefix
            &[0x00][..],                               // field number 0
            &[0x0c][..],                               // end group without a start
            &[0x0e][..],                               // wire type 6
            &[0x0b, 0x08][..],                         // unterminated group
            &[0x09, 1, 2, 3][..],                      // short fixed64
        ] {
            let mut r = Reader::new(bad);
            assert!(r.field().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_last_occurrence_of_a_field_wins() {
        let msg = [0x0a, 0x01, b'a', 0x10, 0x01, 0x0a, 0x01, b'b'];
        assert_eq!(last_len(&msg, 1), Ok(Some(&b"b"[..])));
        assert_eq!(last_len(&msg, 3), Ok(None));
        assert!(last_len(&msg, 2).is_err());
    }
}
