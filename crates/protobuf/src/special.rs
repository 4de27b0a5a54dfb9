//! The JSON forms of the types whose JSON is not their protobuf structure: what Go's
//! `MarshalJSON` methods (and encoding/json for strings, bytes and floats) write, rebuilt
//! from the protobuf values.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::wire::{Fault, Reader, Value};

/// A string as encoding/json writes a Go string: invalid UTF-8 bytes each become U+FFFD
/// (Go decodes rune by rune and replaces every byte that does not start a valid rune).
pub(crate) fn go_str(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(lossy(b)),
    }
}

#[cold]
fn lossy(mut b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len() + 8);
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (valid, rest) = b.split_at(e.valid_up_to());
                // `valid` is valid UTF-8 by construction.
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = e.error_len().unwrap_or(rest.len());
                for _ in 0..bad {
                    out.push('\u{fffd}');
                }
                b = &rest[bad..];
            }
        }
    }
}

/// Bytes as encoding/json writes a `[]byte`: standard base64 with padding.
pub(crate) fn base64(b: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    let mut chunks = b.chunks_exact(3);
    for c in &mut chunks {
        let n = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        for shift in [18, 12, 6, 0] {
            out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
        }
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.push(char::from(ALPHABET[(n >> 18 & 63) as usize]));
            out.push(char::from(ALPHABET[(n >> 12 & 63) as usize]));
            out.push_str("==");
        }
        [a, b] => {
            let n = u32::from(a) << 16 | u32::from(b) << 8;
            out.push(char::from(ALPHABET[(n >> 18 & 63) as usize]));
            out.push(char::from(ALPHABET[(n >> 12 & 63) as usize]));
            out.push(char::from(ALPHABET[(n >> 6 & 63) as usize]));
            out.push('=');
        }
        _ => {}
    }
    out
}

/// A `Timestamp { seconds = 1; nanos = 2 }` payload.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timestamp {
    seconds: i64,
    nanos: i32,
    /// The payload was empty: Go's `Unmarshal` leaves the zero time.
    empty: bool,
}

/// Seconds from 0001-01-01T00:00:00Z (Go's zero time) to the Unix epoch.
const ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// A short ASCII string built on the stack (a formatted time: at most 34 bytes).
pub(crate) struct Ascii {
    buf: [u8; 40],
    len: usize,
}

impl Ascii {
    fn new() -> Self {
        Ascii {
            buf: [0; 40],
            len: 0,
        }
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits and punctuation are ever pushed.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl Timestamp {
    pub(crate) fn parse(payload: &[u8]) -> Result<Self, Fault> {
        let mut t = Timestamp {
            empty: payload.is_empty(),
            ..Timestamp::default()
        };
        let mut r = Reader::new(payload);
        while let Some((n, v)) = r.field()? {
            match (n, v) {
                (1, Value::Varint(s)) => t.seconds = s as i64,
                // Go reads an int32 from the low 32 bits of the varint.
                (2, Value::Varint(ns)) => t.nanos = ns as i32,
                (1 | 2, _) => return Err("wrong wire type in a Timestamp"),
                _ => {}
            }
        }
        Ok(t)
    }

    /// `metav1.Time` as Go holds it: the seconds only (`time.Unix(seconds, 0)`); `None` for
    /// the zero time, which `MarshalJSON` writes as `null`.
    fn time(&self) -> Option<(i64, i64)> {
        (!self.empty && self.seconds != ZERO_TIME_UNIX).then_some((self.seconds, 0))
    }

    /// `metav1.MicroTime` as Go holds it: nanoseconds truncated (toward zero) to
    /// microseconds, then normalised into [0, 1e9) by `time.Unix` (its int64 arithmetic
    /// wraps, as here); `None` for the zero time.
    fn micro_time(&self) -> Option<(i64, i64)> {
        if self.empty {
            return None;
        }
        let nanos = i64::from(self.nanos);
        let nanos = nanos - nanos % 1000;
        let seconds = self.seconds.wrapping_add(nanos.div_euclid(1_000_000_000));
        let nanos = nanos.rem_euclid(1_000_000_000);
        (seconds != ZERO_TIME_UNIX || nanos != 0).then_some((seconds, nanos))
    }

    /// Whether the JSON of this time is `null` (`micro`: as a MicroTime, else a Time).
    pub(crate) fn is_zero(&self, micro: bool) -> bool {
        if micro {
            self.micro_time().is_none()
        } else {
            self.time().is_none()
        }
    }

    /// The JSON string of this time: RFC 3339 to the second for a Time, with six fractional
    /// digits for a MicroTime; `None` when it is `null`.
    pub(crate) fn json(&self, micro: bool) -> Option<Ascii> {
        let mut out = Ascii::new();
        if micro {
            let (seconds, nanos) = self.micro_time()?;
            write_civil(&mut out, seconds);
            out.push(b'.');
            push_digits(&mut out, (nanos / 1000) as u64, 6);
        } else {
            let (seconds, _) = self.time()?;
            write_civil(&mut out, seconds);
        }
        out.push(b'Z');
        Some(out)
    }
}

/// Writes `YYYY-MM-DDTHH:MM:SS` for Unix seconds, in UTC, as Go's `Format` writes the year
/// (at least four digits, a minus sign before negative years). By hand rather than through
/// `core::fmt`: a pod has a dozen timestamps, and this is on the hot path.
fn write_civil(out: &mut Ascii, unix_seconds: i64) {
    // No intermediate below can overflow for any i64 input (|days| < 2^47).
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400) as u64;
    // Howard Hinnant's days_from_civil inverse, on the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u64;
    let year = yoe + era * 400 + i64::from(month <= 2);
    if year < 0 {
        out.push(b'-');
    }
    push_digits(out, year.unsigned_abs(), 4);
    out.push(b'-');
    push_digits(out, month, 2);
    out.push(b'-');
    push_digits(out, day, 2);
    out.push(b'T');
    push_digits(out, secs / 3600, 2);
    out.push(b':');
    push_digits(out, secs / 60 % 60, 2);
    out.push(b':');
    push_digits(out, secs % 60, 2);
}

/// `v` in decimal, zero-padded to at least `width` digits.
fn push_digits(out: &mut Ascii, mut v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    while v > 0 {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    let start = i.min(buf.len() - width.min(buf.len()));
    for &b in &buf[start..] {
        out.push(b);
    }
}

/// A `metav1.Duration { duration = 1 }` payload as Go's `time.Duration.String()` writes it:
/// `1h2m3.5s`, `1.5ms`, `0s`.
pub(crate) fn duration_json(payload: &[u8]) -> Result<String, Fault> {
    let mut nanos = 0i64;
    let mut r = Reader::new(payload);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Varint(d)) => nanos = d as i64,
            (1, _) => return Err("wrong wire type in a Duration"),
            _ => {}
        }
    }
    Ok(go_duration(nanos))
}

fn go_duration(d: i64) -> String {
    let mut out = String::new();
    if d < 0 {
        out.push('-');
    }
    let u = d.unsigned_abs();
    if u == 0 {
        return "0s".to_owned();
    }
    if u < 1_000_000_000 {
        // Below a second: the largest unit that keeps an integer part.
        let (unit, prec) = match u {
            0..1_000 => ("ns", 0),
            1_000..1_000_000 => ("µs", 3),
            _ => ("ms", 6),
        };
        push_with_fraction(&mut out, u, prec);
        out.push_str(unit);
        return out;
    }
    let secs = u / 1_000_000_000;
    let (h, m) = (secs / 3600, secs / 60 % 60);
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if h > 0 || m > 0 {
        let _ = write!(out, "{m}m");
    }
    push_with_fraction(&mut out, u % 60_000_000_000, 9);
    out.push('s');
    out
}

/// `v / 10^prec` with its fraction, trailing zeros (and a bare point) left out.
fn push_with_fraction(out: &mut String, v: u64, prec: u32) {
    let scale = 10u64.pow(prec);
    let _ = write!(out, "{}", v / scale);
    let frac = v % scale;
    if frac != 0 {
        let digits = format!("{frac:0width$}", width = prec as usize);
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

/// How encoding/json's output for a float reads back through serde_json: Go writes an
/// integral value below 1e21 without a fraction or exponent, which serde_json then reads
/// as an integer when it fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum JsonNumber {
    U64(u64),
    I64(i64),
    F64(f64),
}

pub(crate) fn float_json(f: f64) -> Result<JsonNumber, Fault> {
    if !f.is_finite() {
        return Err("a NaN or infinite float, which JSON cannot carry");
    }
    if f == 0.0 {
        // Go writes -0 as "-0", which serde_json reads as a float.
        return Ok(if f.is_sign_negative() {
            JsonNumber::F64(f)
        } else {
            JsonNumber::U64(0)
        });
    }
    if f.fract() == 0.0 && f.abs() < 1e21 {
        // 2^64 and -2^63 are exact in f64.
        if (0.0..18_446_744_073_709_551_616.0).contains(&f) {
            return Ok(JsonNumber::U64(f as u64));
        }
        if (-9_223_372_036_854_775_808.0..0.0).contains(&f) {
            return Ok(JsonNumber::I64(f as i64));
        }
    }
    Ok(JsonNumber::F64(f))
}

/// A float32: Go writes the shortest decimal that reads back as the same float32, which
/// serde_json then reads as a float64.
pub(crate) fn float32_json(f: f32) -> Result<JsonNumber, Fault> {
    if !f.is_finite() {
        return Err("a NaN or infinite float, which JSON cannot carry");
    }
    // Rust's Display of f32 is the shortest round-tripping decimal too.
    let widened: f64 = f.to_string().parse().unwrap_or(f64::from(f));
    float_json(widened)
}

/// An `IntOrString { type = 1; intVal = 2; strVal = 3 }` payload.
pub(crate) enum IntOrString<'a> {
    Int(i32),
    Str(&'a [u8]),
}

pub(crate) fn int_or_string(payload: &[u8]) -> Result<IntOrString<'_>, Fault> {
    let (mut ty, mut int, mut s) = (0u64, 0i32, &[][..]);
    let mut r = Reader::new(payload);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Varint(t)) => ty = t,
            (2, Value::Varint(i)) => int = i as i32,
            (3, Value::Len(b)) => s = b,
            (1..=3, _) => return Err("wrong wire type in an IntOrString"),
            _ => {}
        }
    }
    // Go reads the type as an int64 and MarshalJSON fails for anything but 0 and 1.
    match ty {
        0 => Ok(IntOrString::Int(int)),
        1 => Ok(IntOrString::Str(s)),
        _ => Err("an IntOrString of an unknown type"),
    }
}

/// Whether the raw bytes of a RawExtension are JSON, as Go's `guessContentType` tells.
pub(crate) fn looks_like_json(raw: &[u8]) -> bool {
    matches!(
        raw.first(),
        Some(
            b'\t' | b'\r' | b'\n' | b' ' | b'{' | b'[' | b'n' | b't' | b'f' | b'"' | b'-' | b'0'
                ..=b'9'
        )
    )
}

/// CBOR's self-described tag, which marks a CBOR RawExtension or FieldsV1.
pub(crate) fn looks_like_cbor(raw: &[u8]) -> bool {
    raw.starts_with(&[0xd9, 0xd9, 0xf7])
        || matches!(raw.first(), Some(0xa0..=0xbf | 0xc6..=0xdb | 0xf6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(seconds: i64, nanos: i32) -> Vec<u8> {
        let mut b = vec![0x08];
        push_varint(&mut b, seconds as u64);
        b.push(0x10);
        push_varint(&mut b, i64::from(nanos) as u64);
        b
    }

    fn push_varint(b: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            b.push((v as u8) | 0x80);
            v >>= 7;
        }
        b.push(v as u8);
    }

    fn time(p: &[u8]) -> Option<String> {
        let t = Timestamp::parse(p).ok()?;
        assert_eq!(t.is_zero(false), t.json(false).is_none());
        t.json(false).map(|s| s.as_str().to_owned())
    }

    fn micro(p: &[u8]) -> Option<String> {
        let t = Timestamp::parse(p).ok()?;
        assert_eq!(t.is_zero(true), t.json(true).is_none());
        t.json(true).map(|s| s.as_str().to_owned())
    }

    #[test]
    fn time_is_rfc3339_to_the_second_and_zero_is_null() {
        assert_eq!(time(&ts(0, 0)).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            time(&ts(1_700_000_000, 999_999_999)).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(
            time(&ts(951_782_400, 0)).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
        assert_eq!(time(&ts(-1, 0)).as_deref(), Some("1969-12-31T23:59:59Z"));
        assert_eq!(
            time(&ts(253_402_300_800, 0)).as_deref(),
            Some("10000-01-01T00:00:00Z")
        );
        assert_eq!(
            time(&ts(-62_198_755_200, 0)).as_deref(),
            Some("-0001-01-01T00:00:00Z")
        );
        assert_eq!(time(&[]), None, "an empty Timestamp is Go's zero time");
        assert_eq!(time(&ts(ZERO_TIME_UNIX, 0)), None, "so is 0001-01-01");
    }

    #[test]
    fn micro_time_truncates_to_microseconds_as_go_does() {
        assert_eq!(
            micro(&ts(1_700_000_000, 123_456_789)).as_deref(),
            Some("2023-11-14T22:13:20.123456Z")
        );
        assert_eq!(
            micro(&ts(0, 0)).as_deref(),
            Some("1970-01-01T00:00:00.000000Z")
        );
        // Negative nanos truncate toward zero, then time.Unix borrows a second.
        assert_eq!(
            micro(&ts(10, -1_500)).as_deref(),
            Some("1970-01-01T00:00:09.999999Z")
        );
        assert_eq!(
            micro(&ts(0, 1_999_999_999)).as_deref(),
            Some("1970-01-01T00:00:01.999999Z")
        );
        assert_eq!(micro(&[]), None);
        assert_eq!(
            micro(&ts(ZERO_TIME_UNIX, 999)),
            None,
            "999 ns truncate to zero"
        );
    }

    #[test]
    fn durations_read_as_go_prints_them() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (1_000_000_000, "1s"),
            (3_500_000_000, "3.5s"),
            (60_000_000_000, "1m0s"),
            (3_723_000_000_000, "1h2m3s"),
            (3_600_000_000_001, "1h0m0.000000001s"),
            (-90_000_000_000, "-1m30s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, want) in cases {
            assert_eq!(go_duration(nanos), want, "{nanos}");
        }
    }

    #[test]
    fn base64_matches_the_standard_padded_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0xfe, 0xfd, 0x00]), "//79AA==");
    }

    #[test]
    fn invalid_utf8_becomes_one_replacement_per_byte_as_in_go() {
        assert_eq!(go_str(b"ok"), "ok");
        assert_eq!(go_str(b"a\xffb"), "a\u{fffd}b");
        // A truncated three-byte sequence: Go replaces each byte.
        assert_eq!(go_str(b"\xe2\x82"), "\u{fffd}\u{fffd}");
        assert_eq!(go_str(b"\xe2\x82A"), "\u{fffd}\u{fffd}A");
        // An encoded surrogate is three invalid bytes.
        assert_eq!(go_str(b"\xed\xa0\x80"), "\u{fffd}\u{fffd}\u{fffd}");
    }

    #[test]
    fn floats_read_back_as_serde_json_reads_gos_output() {
        assert_eq!(float_json(1.0), Ok(JsonNumber::U64(1)));
        assert_eq!(float_json(-3.0), Ok(JsonNumber::I64(-3)));
        assert_eq!(float_json(1.5), Ok(JsonNumber::F64(1.5)));
        assert_eq!(float_json(1e20), Ok(JsonNumber::F64(1e20)));
        assert_eq!(float_json(1e21), Ok(JsonNumber::F64(1e21)));
        assert!(matches!(float_json(-0.0), Ok(JsonNumber::F64(f)) if f.is_sign_negative()));
        assert!(float_json(f64::NAN).is_err());
        assert_eq!(float32_json(0.1), Ok(JsonNumber::F64(0.1)));
    }
}
