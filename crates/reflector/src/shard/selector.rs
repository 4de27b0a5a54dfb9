//! The shard selector: which objects a shard holds ([`ShardSelector`], its [`ShardKey`] and
//! [`ShardRange`]s, the API server's FNV-1a hash), and its text form, printed and parsed as
//! the API server does.

use std::fmt;

use kinformer_core::MetaObject;

use crate::{Error, Undecodable};

/// 2^64, the exclusive end of the whole hash space.
const SPACE: u128 = 1 << 64;

/// The 64-bit FNV-1a hash of `bytes`: what the API server hashes a shard key with
/// (k8s.io/apimachinery `sharding.HashField`).
///
/// ```
/// use kinformer_reflector::fnv1a_64;
/// assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
/// assert_eq!(fnv1a_64(b"default"), 0xebad_a516_8620_c5fe);
/// ```
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// Which field of an object decides its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ShardKey {
    /// `metadata.uid`: objects spread evenly over the shards, whatever their namespace.
    Uid,
    /// `metadata.namespace`: every object of a namespace is in one shard, so a controller
    /// that reads several objects of a namespace together (an owner and its children) finds
    /// them in the same shard. Cluster-scoped objects all hash the empty namespace.
    Namespace,
}

impl ShardKey {
    /// The field path the selector names: `object.metadata.uid` or
    /// `object.metadata.namespace`.
    pub fn field_path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// The value of this field of `obj`, empty when unset (as the API server reads it).
    pub fn value_of<K: MetaObject + ?Sized>(self, obj: &K) -> &str {
        match self {
            Self::Uid => obj.object_uid(),
            Self::Namespace => obj.object_namespace(),
        }
        .unwrap_or("")
    }

    fn from_field_path(path: &str) -> Option<Self> {
        [Self::Uid, Self::Namespace]
            .into_iter()
            .find(|k| k.field_path() == path)
    }
}

/// One range of the 64-bit hash space: `start` inclusive, `end` exclusive; `end` may be
/// 2^64 (the end of the space).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    start: u64,
    end: u128,
}

impl ShardRange {
    /// The range `[start, end)`.
    ///
    /// # Errors
    /// [`Error::InvalidShard`] unless `start < end <= 2^64`.
    pub fn new(start: u64, end: u128) -> Result<Self, Error> {
        if end > SPACE {
            return Err(Error::InvalidShard(
                "a range ends at 2^64 (0x10000000000000000) at most".into(),
            ));
        }
        if u128::from(start) >= end {
            return Err(Error::InvalidShard(format!(
                "range start {} must be less than its end {}",
                hex(u128::from(start)),
                hex(end)
            )));
        }
        Ok(Self { start, end })
    }

    /// Range `index` of `count` equal ranges: `[index·2^64/count, (index+1)·2^64/count)`,
    /// rounded down, so that the `count` ranges cover the space without gaps or overlaps.
    /// For a power of two these are the bounds of the KEP's examples.
    ///
    /// # Errors
    /// [`Error::InvalidShard`] unless `index < count`.
    pub fn index_of(index: u32, count: u32) -> Result<Self, Error> {
        if index >= count {
            return Err(Error::InvalidShard(format!(
                "shard index {index} is not below the shard count {count}"
            )));
        }
        let bound = |i: u32| u128::from(i) * SPACE / u128::from(count);
        // `index < count`, so the start is below 2^64.
        let start = u64::try_from(bound(index)).unwrap_or(u64::MAX);
        Self::new(start, bound(index + 1))
    }

    /// The inclusive start.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The exclusive end (at most 2^64).
    pub fn end(&self) -> u128 {
        self.end
    }

    /// Whether `hash` is in the range.
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.start && u128::from(hash) < self.end
    }
}

/// `0x` and 16 lowercase hex digits, or `0x10000000000000000` for 2^64: the only forms the
/// API server accepts.
fn hex(v: u128) -> String {
    format!("0x{v:016x}")
}

/// Which objects a sharded list or watch selects: those whose [`ShardKey`] hashes into any of
/// the ranges (OR-ed). Sent as the `shardSelector` query parameter, in the API server's
/// canonical form (its `Display`):
///
/// ```
/// use kinformer_reflector::{ShardKey, ShardRange, ShardSelector};
///
/// let shard = ShardSelector::index_of(ShardKey::Uid, 1, 4)?;
/// assert_eq!(
///     shard.to_string(),
///     "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')"
/// );
/// let two = ShardSelector::ranges(
///     ShardKey::Namespace,
///     [ShardRange::new(0, 1 << 62)?, ShardRange::new(3 << 62, 1 << 64)?],
/// )?;
/// assert_eq!(ShardSelector::parse(&two.to_string())?, two);
/// assert!(two.matches_value("default")); // FNV-1a 64 of "default" is 0xebad…
/// # Ok::<(), kinformer_reflector::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardSelector {
    key: ShardKey,
    ranges: Vec<ShardRange>,
}

impl ShardSelector {
    /// Shard `index` of `count` equal shards of the hash space ([`ShardRange::index_of`]).
    ///
    /// # Errors
    /// [`Error::InvalidShard`] unless `index < count`.
    pub fn index_of(key: ShardKey, index: u32, count: u32) -> Result<Self, Error> {
        Ok(Self {
            key,
            ranges: vec![ShardRange::index_of(index, count)?],
        })
    }

    /// The objects in `range`: one range is always a valid selector.
    pub fn range(key: ShardKey, range: ShardRange) -> Self {
        Self {
            key,
            ranges: vec![range],
        }
    }

    /// The objects in any of `ranges` (at least one; they may overlap, as the API server
    /// allows).
    ///
    /// # Errors
    /// [`Error::InvalidShard`] when `ranges` is empty.
    pub fn ranges(
        key: ShardKey,
        ranges: impl IntoIterator<Item = ShardRange>,
    ) -> Result<Self, Error> {
        let ranges: Vec<ShardRange> = ranges.into_iter().collect();
        if ranges.is_empty() {
            return Err(Error::InvalidShard("a shard selector needs a range".into()));
        }
        Ok(Self { key, ranges })
    }

    /// Parses a selector in the API server's grammar: `shardRange(<field>, '<start>',
    /// '<end>')` calls joined by `||`, optionally in parentheses, the field
    /// `object.metadata.uid` or `object.metadata.namespace` (the same in every call), the
    /// bounds quoted in `'` or `"`, each `0x` and exactly 16 lowercase hex digits, or
    /// `0x10000000000000000`. What the server refuses is refused here.
    ///
    /// # Errors
    /// [`Error::InvalidShard`] saying what is wrong.
    pub fn parse(s: &str) -> Result<Self, Error> {
        Parser { rest: s.trim() }.selector()
    }

    /// The field that is hashed.
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// The ranges, in the order given.
    pub fn range_list(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// How many objects there are per object this selects, on average: 2^64 over the width
    /// of its ranges (overlaps counted twice), to the nearest whole number, at least 1.
    pub(crate) fn spread(&self) -> u128 {
        let width: u128 = self
            .ranges
            .iter()
            .map(|r| r.end - u128::from(r.start))
            .sum();
        let width = width.clamp(1, SPACE);
        ((SPACE + width / 2) / width).max(1)
    }

    /// Whether a key value (a uid, a namespace) hashing to `hash` is selected.
    pub fn matches_hash(&self, hash: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(hash))
    }

    /// Whether an object whose key field is `value` is selected.
    pub fn matches_value(&self, value: &str) -> bool {
        self.matches_hash(fnv1a_64(value.as_bytes()))
    }

    /// Whether `obj` is selected: its key field (empty when unset, as the API server reads
    /// it) hashes into a range.
    pub fn matches<K: MetaObject + ?Sized>(&self, obj: &K) -> bool {
        self.matches_value(self.key.value_of(obj))
    }

    /// Whether every object `other` selects is selected by this one too: the same key, and
    /// each of `other`'s ranges inside one of these.
    ///
    /// ```
    /// use kinformer_reflector::{ShardKey, ShardRange, ShardSelector};
    ///
    /// let half = ShardSelector::range(ShardKey::Uid, ShardRange::new(0, 1 << 63)?);
    /// let quarter = ShardSelector::index_of(ShardKey::Uid, 1, 4)?;
    /// assert!(half.covers(&quarter) && !quarter.covers(&half));
    /// # Ok::<(), kinformer_reflector::Error>(())
    /// ```
    pub fn covers(&self, other: &ShardSelector) -> bool {
        self.key == other.key
            && other.ranges.iter().all(|r| {
                self.ranges
                    .iter()
                    .any(|mine| mine.start <= r.start && r.end <= mine.end)
            })
    }

    /// What this selects that `other` does not: `None` when `other` covers it all. With
    /// another key, all of it.
    ///
    /// ```
    /// use kinformer_reflector::{ShardKey, ShardRange, ShardSelector};
    ///
    /// let half = ShardSelector::range(ShardKey::Uid, ShardRange::new(0, 1 << 63)?);
    /// let quarter = ShardSelector::index_of(ShardKey::Uid, 1, 4)?;
    /// assert_eq!(half.without(&quarter), Some(ShardSelector::index_of(ShardKey::Uid, 0, 4)?));
    /// assert_eq!(quarter.without(&half), None);
    /// # Ok::<(), kinformer_reflector::Error>(())
    /// ```
    pub fn without(&self, other: &ShardSelector) -> Option<ShardSelector> {
        if self.key != other.key {
            return Some(self.clone());
        }
        let mut left: Vec<ShardRange> = Vec::new();
        for r in &self.ranges {
            let mut pieces = vec![(u128::from(r.start), r.end)];
            for cut in &other.ranges {
                let (cut_start, cut_end) = (u128::from(cut.start), cut.end);
                pieces = pieces
                    .into_iter()
                    .flat_map(|(start, end)| {
                        [(start, end.min(cut_start)), (start.max(cut_end), end)]
                    })
                    .filter(|(start, end)| start < end)
                    .collect();
            }
            for (start, end) in pieces {
                // Pieces of a range start below 2^64 and end above their start.
                if let Ok(start) = u64::try_from(start) {
                    left.push(ShardRange { start, end });
                }
            }
        }
        (!left.is_empty()).then_some(ShardSelector {
            key: self.key,
            ranges: left,
        })
    }

    /// Whether an object that did not decode may be in the shard: by its namespace, or its
    /// uid when its metadata had one; an object without a uid is kept (nothing tells).
    pub fn may_match_undecodable(&self, object: &Undecodable) -> bool {
        match self.key {
            ShardKey::Uid => object
                .uid
                .as_deref()
                .is_none_or(|uid| self.matches_value(uid)),
            ShardKey::Namespace => self.matches_value(object.key.namespace().unwrap_or("")),
        }
    }
}

impl fmt::Display for ShardSelector {
    /// The API server's canonical form (what it echoes in `metadata.shardInfo.selector`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.key.field_path(),
                hex(u128::from(r.start)),
                hex(r.end)
            )?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ShardSelector {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::parse(s)
    }
}

/// A recursive-descent parser of the selector grammar (a subset of CEL, as the API server
/// walks it: calls of `shardRange` and `||`, parentheses).
struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    fn fail<T>(what: impl Into<String>) -> Result<T, Error> {
        Err(Error::InvalidShard(what.into()))
    }

    fn skip_ws(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        match self.rest.strip_prefix(token) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), Error> {
        if self.eat(token) {
            Ok(())
        } else {
            Self::fail(format!("expected `{token}`"))
        }
    }

    fn selector(mut self) -> Result<ShardSelector, Error> {
        if self.rest.is_empty() {
            return Self::fail("an empty shard selector (omit it to select everything)");
        }
        let ranges = self.or_expr()?;
        self.skip_ws();
        if !self.rest.is_empty() {
            return Self::fail("only shardRange() calls joined by || are allowed");
        }
        let key = ranges[0].0;
        if ranges.iter().any(|(k, _)| *k != key) {
            return Self::fail("all shard ranges must use the same field");
        }
        Ok(ShardSelector {
            key,
            ranges: ranges.into_iter().map(|(_, r)| r).collect(),
        })
    }

    fn or_expr(&mut self) -> Result<Vec<(ShardKey, ShardRange)>, Error> {
        let mut out = self.term()?;
        while self.eat("||") {
            out.extend(self.term()?);
        }
        Ok(out)
    }

    fn term(&mut self) -> Result<Vec<(ShardKey, ShardRange)>, Error> {
        if self.eat("(") {
            let inner = self.or_expr()?;
            self.expect(")")?;
            return Ok(inner);
        }
        if !self.eat("shardRange") {
            return Self::fail("only shardRange() calls joined by || are allowed");
        }
        self.expect("(")?;
        self.skip_ws();
        let end = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
            .unwrap_or(self.rest.len());
        let (path, rest) = self.rest.split_at(end);
        self.rest = rest;
        let Some(key) = ShardKey::from_field_path(path) else {
            return Self::fail(format!(
                "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
            ));
        };
        self.expect(",")?;
        let start = self.bound("start")?;
        self.expect(",")?;
        let end = self.bound("end")?;
        self.expect(")")?;
        let start = u64::try_from(start).or_else(|_| Self::fail("a range cannot start at 2^64"))?;
        Ok(vec![(key, ShardRange::new(start, end)?)])
    }

    /// A quoted bound: `0x` and 16 lowercase hex digits, or `0x10000000000000000`.
    fn bound(&mut self, name: &str) -> Result<u128, Error> {
        self.skip_ws();
        let Some(quote) = self.rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            return Self::fail(format!("the {name} must be a quoted string like '0x…'"));
        };
        let body = &self.rest[1..];
        let Some(close) = body.find(quote) else {
            return Self::fail(format!("the {name} is not closed"));
        };
        let literal = &body[..close];
        self.rest = &body[close + 1..];
        let Some(digits) = literal.strip_prefix("0x") else {
            return Self::fail(format!("the {name} must start with 0x"));
        };
        if !digits.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            return Self::fail(format!("the {name} must be lowercase hex digits"));
        }
        match digits.len() {
            16 => u128::from_str_radix(digits, 16)
                .or_else(|_| Self::fail(format!("the {name} is not hex"))),
            17 if literal == "0x10000000000000000" => Ok(SPACE),
            _ => Self::fail(format!(
                "the {name} must be 0x and 16 hex digits, or 0x10000000000000000"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_selects_what_one_selects_and_the_other_does_not() {
        let of12 = |i: &[u32]| {
            ShardSelector::ranges(
                ShardKey::Uid,
                i.iter().map(|&i| ShardRange::index_of(i, 12).unwrap()),
            )
            .unwrap()
        };
        let pairs = [
            (of12(&[0, 1, 2, 3, 7, 9]), of12(&[1, 2, 8, 9])),
            (of12(&[4]), of12(&[0, 1, 2, 3, 4, 5])),
            (of12(&[0, 11]), of12(&[5])),
            (
                ShardSelector::range(ShardKey::Uid, ShardRange::new(0, SPACE).unwrap()),
                ShardSelector::range(ShardKey::Uid, ShardRange::new(10, 20).unwrap()),
            ),
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        let edges = [0, 9, 10, 19, 20, u64::MAX];
        for (a, b) in &pairs {
            let rest = a.without(b);
            let hashes = (0..2000).map(|_| rng.u64(..)).chain(edges);
            for h in hashes.chain(
                a.ranges
                    .iter()
                    .flat_map(|r| [r.start, r.start.wrapping_sub(1)]),
            ) {
                let want = a.matches_hash(h) && !b.matches_hash(h);
                assert_eq!(
                    rest.as_ref().is_some_and(|r| r.matches_hash(h)),
                    want,
                    "{a} without {b} at {h:#x}"
                );
            }
        }
        assert_eq!(of12(&[4]).without(&of12(&[0, 1, 2, 3, 4, 5])), None);
        let other_key = ShardSelector::index_of(ShardKey::Namespace, 0, 2).unwrap();
        assert_eq!(of12(&[3]).without(&other_key), Some(of12(&[3])));
    }

    /// Hashes computed by k8s.io/apimachinery v0.36.3 `sharding.HashField`.
    const GO_HASHES: &[(&str, u64)] = &[
        ("", 0xcbf2_9ce4_8422_2325),
        ("a", 0xaf63_dc4c_8601_ec8c),
        ("default", 0xebad_a516_8620_c5fe),
        ("kube-system", 0xdf65_c7bc_1d82_b35e),
        (
            "0b4f3c4e-8d3a-4a56-9f0e-2b7a1c9d5e11",
            0xa906_8085_f96b_2e45,
        ),
        (
            "d9a8f6e4-1c2b-4a3d-8e7f-6a5b4c3d2e1f",
            0x8a2f_556f_f9ab_5266,
        ),
        ("ns-07", 0x7e7e_2889_d8a6_2d8c),
        ("ünïcode", 0xb1b0_d403_50a2_5beb),
    ];

    #[test]
    fn the_hash_is_the_api_servers_fnv1a_64() {
        for (value, want) in GO_HASHES {
            assert_eq!(fnv1a_64(value.as_bytes()), *want, "{value:?}");
        }
    }

    #[test]
    fn index_of_count_splits_the_space_as_the_keps_examples_and_covers_it_without_gaps() {
        let wire = |i, n| {
            ShardSelector::index_of(ShardKey::Uid, i, n)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            wire(0, 2),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
        );
        assert_eq!(
            wire(1, 2),
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
        );
        assert_eq!(
            wire(2, 4),
            "shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')"
        );
        assert_eq!(
            wire(0, 1),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        for count in [1, 3, 7, 12, 1000] {
            let ranges: Vec<ShardRange> = (0..count)
                .map(|i| ShardRange::index_of(i, count).unwrap())
                .collect();
            assert_eq!(ranges[0].start(), 0);
            assert_eq!(ranges[ranges.len() - 1].end(), SPACE);
            for pair in ranges.windows(2) {
                assert_eq!(u128::from(pair[1].start()), pair[0].end(), "{count}");
            }
        }
        assert!(ShardRange::index_of(3, 3).is_err());
        assert!(ShardRange::index_of(0, 0).is_err());
    }

    #[test]
    fn bounds_are_inclusive_at_the_start_and_exclusive_at_the_end() {
        let r = ShardRange::new(10, 20).unwrap();
        assert!(!r.contains(9));
        assert!(r.contains(10));
        assert!(r.contains(19));
        assert!(!r.contains(20));
        let top = ShardRange::new(u64::MAX - 1, SPACE).unwrap();
        assert!(top.contains(u64::MAX));
        assert!(ShardRange::new(5, 5).is_err());
        assert!(ShardRange::new(0, SPACE + 1).is_err());
    }

    #[test]
    fn every_value_is_in_exactly_one_of_count_shards() {
        let mut rng = fastrand::Rng::with_seed(7);
        for count in [2, 3, 12] {
            let shards: Vec<ShardSelector> = (0..count)
                .map(|i| ShardSelector::index_of(ShardKey::Uid, i, count).unwrap())
                .collect();
            for _ in 0..2000 {
                let value: String = (0..36).map(|_| rng.alphanumeric()).collect();
                let n = shards.iter().filter(|s| s.matches_value(&value)).count();
                assert_eq!(n, 1, "{value} in {n} of {count} shards");
            }
        }
    }

    #[test]
    fn parse_accepts_what_the_api_server_accepts_and_gives_its_canonical_form() {
        // Inputs and outputs of k8s.io/apiserver v0.36.3 `sharding.Parse(..).String()`.
        let ok = [
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            ),
            (
                "  shardRange( object.metadata.namespace ,'0x0000000000000000','0x10000000000000000') ||shardRange(object.metadata.namespace, '0x1000000000000000', '0x2000000000000000')",
                "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000') || shardRange(object.metadata.namespace, '0x1000000000000000', '0x2000000000000000')",
            ),
            (
                "shardRange(object.metadata.uid, \"0x0000000000000000\", \"0x8000000000000000\")",
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            ),
            (
                "(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'))",
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            ),
        ];
        for (input, canonical) in ok {
            let s = ShardSelector::parse(input).unwrap();
            assert_eq!(s.to_string(), canonical);
            assert_eq!(ShardSelector::parse(canonical).unwrap(), s);
        }
        // Each refused by the API server too.
        let refused = [
            "",
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x9000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && true",
            "shardRange(object.metadata.uid, 0x0000000000000000, '0x8000000000000000')",
        ];
        for input in refused {
            assert!(
                matches!(ShardSelector::parse(input), Err(Error::InvalidShard(_))),
                "{input:?} was accepted"
            );
        }
    }

    #[test]
    fn several_ranges_are_ored() {
        let s = ShardSelector::ranges(
            ShardKey::Namespace,
            [
                ShardRange::new(0, 0x8000_0000_0000_0000).unwrap(),
                ShardRange::new(0xe000_0000_0000_0000, SPACE).unwrap(),
            ],
        )
        .unwrap();
        assert!(s.matches_value("ns-07")); // 0x7e7e…
        assert!(s.matches_value("default")); // 0xebad…
        assert!(!s.matches_value("a")); // 0xaf63…
        assert!(ShardSelector::ranges(ShardKey::Uid, []).is_err());
    }
}
