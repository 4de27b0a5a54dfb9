//! How the store keys its map: keys up to 46 bytes inline in the entry, lookups without
//! allocating.

use kinformer_core::ObjectKey;

/// Room for a `namespace/name` key on the stack: a DNS-1123 subdomain name (253) plus a
/// namespace label (63) and the slash. Longer keys are allocated.
pub(super) const KEY_BUF: usize = 320;

/// The key a write or lookup is for.
#[allow(
    clippy::large_enum_variant,
    reason = "a short-lived stack value; boxing the buffer would be the allocation it avoids"
)]
pub(super) enum LookupKey {
    /// Made by a key function (or too long for the buffer).
    Owned(ObjectKey),
    /// The default `namespace/name` key, validated, written into `buf[..len]`.
    Parts { buf: [u8; KEY_BUF], len: usize },
}

impl LookupKey {
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            LookupKey::Owned(key) => key.as_str().as_bytes(),
            LookupKey::Parts { buf, len } => buf.get(..*len).unwrap_or(&[]),
        }
    }

    pub(super) fn as_str(&self) -> &str {
        match self {
            LookupKey::Owned(key) => key.as_str(),
            // Concatenated from two `&str`s, so always UTF-8.
            LookupKey::Parts { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or(""),
        }
    }
}

/// Longest key kept inline in a map entry.
pub(super) const INLINE_KEY: usize = 46;

/// A key as the map holds it: up to [`INLINE_KEY`] bytes inside the entry, longer ones
/// boxed. Hashed and compared as bytes, and looked up with `key.as_bytes()`.
pub(super) enum MapKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl MapKey {
    /// From the bytes of a valid key (so UTF-8).
    pub(super) fn new(key: &[u8]) -> Self {
        let mut bytes = [0u8; INLINE_KEY];
        match (bytes.get_mut(..key.len()), u8::try_from(key.len())) {
            (Some(dst), Ok(len)) => {
                dst.copy_from_slice(key);
                Self::Inline { len, bytes }
            }
            _ => Self::Heap(key.into()),
        }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(&[]),
            Self::Heap(s) => s,
        }
    }

    /// Stored keys were valid `ObjectKey`s, so this gives the same key back.
    pub(super) fn to_object_key(&self) -> Option<ObjectKey> {
        ObjectKey::parse(std::str::from_utf8(self.as_bytes()).ok()?).ok()
    }
}

impl std::borrow::Borrow<[u8]> for MapKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::hash::Hash for MapKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for MapKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for MapKey {}
