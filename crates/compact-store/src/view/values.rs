//! What a view's accessors hand out: scalars as they lie, lists and maps as iterable views,
//! Kubernetes' special values (quantities, times, int-or-string, free-form JSON) as borrowed
//! text, and untyped views for objects without generated ones.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::read::{self, FieldName, Fields, Raw};

/// A value a view can read out of the encoding: what a list's elements, a map's values
/// and the fields of a struct view are.
///
/// Implemented for `&str`, `bool`, the integer and float types, every generated view, and
/// the special values of this module. A value of another shape than the type reads as
/// absent.
pub trait ViewValue<'a>: Sized {
    /// The value, if `raw` holds one of this shape.
    #[doc(hidden)]
    fn from_raw(raw: Raw<'a>) -> Option<Self>;
}

impl<'a> ViewValue<'a> for &'a str {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        raw.as_str()
    }
}

impl<'a> ViewValue<'a> for bool {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        raw.as_bool()
    }
}

macro_rules! integers {
    ($($t:ty: $via:ident),*) => {$(
        impl<'a> ViewValue<'a> for $t {
            fn from_raw(raw: Raw<'a>) -> Option<Self> {
                <$t>::try_from(raw.$via()?).ok()
            }
        }
    )*};
}
integers!(i32: as_i64, i64: as_i64, u32: as_u64, u64: as_u64);

impl<'a> ViewValue<'a> for f64 {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        raw.as_f64()
    }
}

impl<'a> ViewValue<'a> for f32 {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        // As serde_json reads a JSON number into an `f32`.
        raw.as_f64().map(|v| v as f32)
    }
}

/// Reads field `name` of `fields` as a `T` (absent, null or of another shape: `None`).
#[inline]
pub(crate) fn field<'a, T: ViewValue<'a>>(fields: Fields<'a>, name: &FieldName) -> Option<T> {
    let raw = fields.get(name)?;
    if raw.is_null() {
        return None;
    }
    T::from_raw(raw)
}

/// A list in the encoding: iterate it ([`iter`](Self::iter), `for x in list`), count it,
/// index it. Each step reads one element where it lies.
pub struct Seq<'a, T> {
    content: &'a [u8],
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Seq<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Seq<'_, T> {}

impl<T> Default for Seq<'_, T> {
    /// An empty list.
    fn default() -> Self {
        Self {
            content: &[],
            _t: PhantomData,
        }
    }
}

impl<'a, T: ViewValue<'a>> Seq<'a, T> {
    /// The elements, in order. An element of another shape than `T` (a `null`) is skipped.
    pub fn iter(&self) -> SeqIter<'a, T> {
        SeqIter {
            input: self.content,
            _t: PhantomData,
        }
    }

    /// How many elements the list has (each one stepped over).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
    }

    /// The element at `index`.
    pub fn get(&self, index: usize) -> Option<T> {
        self.iter().nth(index)
    }

    /// The first element.
    pub fn first(&self) -> Option<T> {
        self.iter().next()
    }
}

impl<'a, T: ViewValue<'a>> ViewValue<'a> for Seq<'a, T> {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        Some(Self {
            content: raw.as_seq()?,
            _t: PhantomData,
        })
    }
}

impl<'a, T: ViewValue<'a>> IntoIterator for Seq<'a, T> {
    type Item = T;
    type IntoIter = SeqIter<'a, T>;
    fn into_iter(self) -> SeqIter<'a, T> {
        self.iter()
    }
}

impl<'a, T: ViewValue<'a> + fmt::Debug> fmt::Debug for Seq<'a, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The elements of a [`Seq`].
pub struct SeqIter<'a, T> {
    input: &'a [u8],
    _t: PhantomData<fn() -> T>,
}

impl<'a, T: ViewValue<'a>> Iterator for SeqIter<'a, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        while !self.input.is_empty() {
            let raw = read::next(&mut self.input)?;
            if let Some(v) = T::from_raw(raw) {
                return Some(v);
            }
        }
        None
    }
}

/// A map with string keys in the encoding (labels, annotations, a ConfigMap's data):
/// look a key up ([`get`](Self::get): a walk over the keys, which are few), iterate the
/// entries in key order.
pub struct Map<'a, T> {
    content: &'a [u8],
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Map<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Map<'_, T> {}

impl<T> Default for Map<'_, T> {
    /// An empty map.
    fn default() -> Self {
        Self {
            content: &[],
            _t: PhantomData,
        }
    }
}

impl<'a, T: ViewValue<'a>> Map<'a, T> {
    /// The entries, in the order they were written (sorted by key for every Kubernetes map).
    pub fn iter(&self) -> MapIter<'a, T> {
        MapIter {
            input: self.content,
            _t: PhantomData,
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<T> {
        let mut input = self.content;
        while !input.is_empty() {
            let k = read::next(&mut input)?;
            let v = read::next(&mut input)?;
            if k.as_str() == Some(key) {
                return T::from_raw(v);
            }
        }
        None
    }

    /// Whether the map has `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.iter().any(|(k, _)| k == key)
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + use<'a, T> {
        self.iter().map(|(k, _)| k)
    }

    /// How many entries the map has.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
    }
}

impl<'a, T: ViewValue<'a>> ViewValue<'a> for Map<'a, T> {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        Some(Self {
            content: raw.as_map()?,
            _t: PhantomData,
        })
    }
}

impl<'a, T: ViewValue<'a>> IntoIterator for Map<'a, T> {
    type Item = (&'a str, T);
    type IntoIter = MapIter<'a, T>;
    fn into_iter(self) -> MapIter<'a, T> {
        self.iter()
    }
}

impl<'a, T: ViewValue<'a> + fmt::Debug> fmt::Debug for Map<'a, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The entries of a [`Map`].
pub struct MapIter<'a, T> {
    input: &'a [u8],
    _t: PhantomData<fn() -> T>,
}

impl<'a, T: ViewValue<'a>> Iterator for MapIter<'a, T> {
    type Item = (&'a str, T);
    fn next(&mut self) -> Option<Self::Item> {
        while !self.input.is_empty() {
            let k = read::next(&mut self.input)?;
            let v = read::next(&mut self.input)?;
            if let (Some(k), Some(v)) = (k.as_str(), T::from_raw(v)) {
                return Some((k, v));
            }
        }
        None
    }
}

/// Text a view reads as it lies: one type per kind of Kubernetes value kept as a string.
macro_rules! text_values {
    ($($(#[$doc:meta])* $name:ident => $owned:ty, $to_owned:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name<'a>(&'a str);

        impl<'a> $name<'a> {
            /// The value as the API server wrote it.
            pub fn as_str(&self) -> &'a str {
                self.0
            }

            /// The value as k8s-openapi's type (`None` when the text is not one).
            pub fn to_owned(&self) -> Option<$owned> {
                #[allow(clippy::redundant_closure_call)]
                ($to_owned)(self.0)
            }
        }

        impl<'a> ViewValue<'a> for $name<'a> {
            fn from_raw(raw: Raw<'a>) -> Option<Self> {
                raw.as_str().map($name)
            }
        }

        impl fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.0, f)
            }
        }

        impl fmt::Display for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }

        impl PartialEq<str> for $name<'_> {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
    )*};
}

text_values! {
    /// A `resource.Quantity` (`"500m"`, `"128Mi"`), its canonical text.
    QuantityView => Quantity, |s: &str| Some(Quantity(s.to_owned()));
    /// A `metav1.Time` (`"2026-12-04T22:26:14Z"`), RFC 3339 to the second.
    TimeView => Time, |s: &str| s.parse().ok().map(Time);
    /// A `metav1.MicroTime`, RFC 3339 with microseconds.
    MicroTimeView => MicroTime, |s: &str| s.parse().ok().map(MicroTime);
    /// A `metav1.Duration` (`"1m30s"`), Go's `Duration.String()`.
    DurationView => String, |s: &str| Some(s.to_owned());
    /// A Go `[]byte`, base64 (standard alphabet, padded) as in JSON.
    BytesView => String, |s: &str| Some(s.to_owned());
}

/// An `intstr.IntOrString` (a port, `maxUnavailable`): a number or a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntOrStr<'a> {
    /// A number.
    Int(i32),
    /// A string (`"25%"`, `"http"`).
    Str(&'a str),
}

impl Default for IntOrStr<'_> {
    /// `0`.
    fn default() -> Self {
        Self::Int(0)
    }
}

impl IntOrStr<'_> {
    /// As k8s-openapi's type.
    pub fn to_owned(&self) -> IntOrString {
        match *self {
            Self::Int(i) => IntOrString::Int(i),
            Self::Str(s) => IntOrString::String(s.to_owned()),
        }
    }
}

impl<'a> ViewValue<'a> for IntOrStr<'a> {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        match raw.as_str() {
            Some(s) => Some(Self::Str(s)),
            None => i32::try_from(raw.as_i64()?).ok().map(Self::Int),
        }
    }
}

/// Free-form JSON (a `managedFields` entry's `fieldsV1`, a `RawExtension`, a custom
/// resource's schema): its text, kept as the server sent it.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct JsonView<'a>(&'a str);

impl<'a> JsonView<'a> {
    /// The JSON text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }

    /// The JSON parsed as a `T`.
    ///
    /// # Errors
    /// `serde_json`'s, when the text is not a `T`.
    pub fn parse<T: serde::Deserialize<'a>>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0)
    }
}

impl<'a> ViewValue<'a> for JsonView<'a> {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        raw.as_json().map(JsonView)
    }
}

impl fmt::Debug for JsonView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Free-form JSON may be a Secret's; only its size.
        write!(f, "JsonView({} bytes)", self.0.len())
    }
}

/// Any value of an object, for code that reads a type without generated views (a custom
/// resource) or a field by name: [`Object::get`] a field, then read it as what it is.
#[derive(Clone, Copy)]
pub struct Value<'a>(Raw<'a>);

impl Default for Value<'_> {
    /// `null`.
    fn default() -> Self {
        Self(Raw {
            tag: crate::codec::tags::NULL,
            body: &[],
        })
    }
}

impl<'a> Value<'a> {
    /// A string.
    pub fn as_str(&self) -> Option<&'a str> {
        self.0.as_str()
    }
    /// A boolean.
    pub fn as_bool(&self) -> Option<bool> {
        self.0.as_bool()
    }
    /// An integer that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.0.as_i64()
    }
    /// A non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        self.0.as_u64()
    }
    /// A number.
    pub fn as_f64(&self) -> Option<f64> {
        self.0.as_f64()
    }
    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        self.0.is_null()
    }
    /// A struct (an object of a typed struct).
    pub fn as_object(&self) -> Option<Object<'a>> {
        self.0.as_struct().map(Object)
    }
    /// A list.
    pub fn as_seq(&self) -> Option<Seq<'a, Value<'a>>> {
        Seq::from_raw(self.0)
    }
    /// A map with string keys (labels; a `DynamicObject`'s fields).
    pub fn as_map(&self) -> Option<Map<'a, Value<'a>>> {
        Map::from_raw(self.0)
    }
    /// Free-form JSON kept as text.
    pub fn as_json(&self) -> Option<JsonView<'a>> {
        self.0.as_json().map(JsonView)
    }
    /// The value as a field of `name` of a struct, or under key `name` of a map.
    pub fn get(&self, name: &str) -> Option<Value<'a>> {
        match self.as_object() {
            Some(o) => o.get(name),
            None => self.as_map()?.get(name),
        }
    }
}

impl<'a> ViewValue<'a> for Value<'a> {
    fn from_raw(raw: Raw<'a>) -> Option<Self> {
        Some(Self(raw))
    }
}

impl fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the value: it may be a Secret's.
        f.debug_struct("Value").finish_non_exhaustive()
    }
}

/// A struct in the encoding, read by field name: the untyped view every generated view is
/// built on ([`Cached::object`](crate::Cached::object) for the whole object).
#[derive(Clone, Copy, Default)]
pub struct Object<'a>(Fields<'a>);

impl<'a> Object<'a> {
    pub(crate) fn new(fields: Fields<'a>) -> Self {
        Self(fields)
    }

    /// The field whose JSON name is `name` (a look-up of its number, then a walk over the
    /// fields; generated views number their fields once).
    pub fn get(&self, name: &str) -> Option<Value<'a>> {
        self.fields().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Every field, by its JSON name, in the order written.
    pub fn fields(&self) -> impl Iterator<Item = (&'a str, Value<'a>)> + use<'a> {
        self.0.iter().map(|(n, raw)| (n, Value(raw)))
    }
}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.fields().map(|(n, _)| n))
            .finish()
    }
}

// Serialize: a view written out is the JSON it reads, as the object's own type writes it
// (for logs of your own, diagnostics, a JSON patch built from what is cached).

impl<'a, T: ViewValue<'a> + serde::Serialize> serde::Serialize for Seq<'a, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'a, T: ViewValue<'a> + serde::Serialize> serde::Serialize for Map<'a, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

macro_rules! serialize_as_str {
    ($($t:ident),*) => {$(
        impl serde::Serialize for $t<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.0)
            }
        }
    )*};
}
serialize_as_str!(
    QuantityView,
    TimeView,
    MicroTimeView,
    DurationView,
    BytesView
);

impl serde::Serialize for IntOrStr<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Int(i) => serializer.serialize_i32(i),
            Self::Str(s) => serializer.serialize_str(s),
        }
    }
}

impl serde::Serialize for JsonView<'_> {
    /// The JSON text as it is (through `serde_json`'s `RawValue`; into another format, the
    /// value it holds).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl serde::Serialize for Value<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use crate::codec::tags::*;
        let raw = self.0;
        match raw.tag {
            NULL => serializer.serialize_unit(),
            FALSE | TRUE => serializer.serialize_bool(raw.tag == TRUE),
            F64 => serializer.serialize_f64(raw.as_f64().unwrap_or_default()),
            NEG => serializer.serialize_i64(raw.as_i64().unwrap_or_default()),
            STR | SHORT_STR..=0x7f => serializer.serialize_str(raw.as_str().unwrap_or_default()),
            BYTES => serializer.serialize_bytes(raw.body),
            SEQ => Seq::<Value<'_>>::from_raw(raw)
                .unwrap_or_default()
                .serialize(serializer),
            MAP => Map::<Value<'_>>::from_raw(raw)
                .unwrap_or_default()
                .serialize(serializer),
            STRUCT => Object(raw.as_struct().unwrap_or_default()).serialize(serializer),
            RAW_JSON => JsonView(raw.as_json().unwrap_or("null")).serialize(serializer),
            _ => serializer.serialize_u64(raw.as_u64().unwrap_or_default()),
        }
    }
}

impl serde::Serialize for Object<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.fields())
    }
}
