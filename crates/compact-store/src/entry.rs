//! What the store keeps per object: its encoding and what reads need without decoding it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kinformer_core::{MetaObject, ObjectKey};

/// Labels, shared by every object that has the same ones (see [`crate::labels`]).
pub(crate) type Labels = BTreeMap<String, String>;

/// One stored object: its name, namespace, resource version, uid and (with a custom key
/// function) key, then its encoding, in one allocation; its labels, interned; and the
/// values of the index functions that could not be answered from the name and namespace,
/// computed when it was written.
///
/// It is what the inner `ThreadSafeStore` holds: its `MetaObject` impl gives that store the
/// key (`namespace/name`), the namespace index and the labels, so keys, indices, listers'
/// label matching and the consistency guarantee are the thread-safe store's, unchanged.
pub(crate) struct Entry {
    /// `namespace ‖ name ‖ resource version ‖ uid ‖ custom key ‖ encoded object`.
    data: Box<[u8]>,
    /// Where each part of `data` ends.
    ends: [u32; 5],
    labels: Option<Arc<Labels>>,
    /// By position of the store's computed indices.
    values: Box<[Box<[Box<str>]>]>,
}

/// The parts of an entry that are not the encoding.
pub(crate) struct Head<'a> {
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) resource_version: Option<&'a str>,
    pub(crate) uid: Option<&'a str>,
    /// The key, when the store has a key function of its own (else it is made from the
    /// namespace and name, as the thread-safe store makes it).
    pub(crate) custom_key: Option<&'a ObjectKey>,
}

impl Entry {
    /// An entry of `head` and the `encoded` object.
    pub(crate) fn new(
        head: &Head<'_>,
        encoded: &[u8],
        labels: Option<Arc<Labels>>,
        values: Box<[Box<[Box<str>]>]>,
    ) -> Self {
        let parts = [
            head.namespace.unwrap_or(""),
            head.name.unwrap_or(""),
            head.resource_version.unwrap_or(""),
            head.uid.unwrap_or(""),
            head.custom_key.map_or("", ObjectKey::as_str),
        ];
        let len = parts.iter().map(|p| p.len()).sum::<usize>() + encoded.len();
        let mut data = Vec::with_capacity(len);
        let mut ends = [0u32; 5];
        for (end, part) in ends.iter_mut().zip(parts) {
            data.extend_from_slice(part.as_bytes());
            // Objects are far below 4 GiB (the API server refuses requests over 3 MiB).
            *end = u32::try_from(data.len()).unwrap_or(u32::MAX);
        }
        data.extend_from_slice(encoded);
        Self {
            data: data.into_boxed_slice(),
            ends,
            labels,
            values,
        }
    }

    fn part(&self, i: usize) -> &str {
        let start = if i == 0 {
            0
        } else {
            self.ends.get(i - 1).copied().unwrap_or(0) as usize
        };
        let end = self.ends.get(i).copied().unwrap_or(0) as usize;
        // The parts were written from `&str`s at these offsets.
        self.data
            .get(start..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// The encoded object.
    pub(crate) fn encoded(&self) -> &[u8] {
        let start = self.ends[4] as usize;
        self.data.get(start..).unwrap_or_default()
    }

    /// The key the store's own key function made, if it has one.
    pub(crate) fn custom_key(&self) -> &str {
        self.part(4)
    }

    /// The computed values of the index at `position`.
    pub(crate) fn values(&self, position: usize) -> &[Box<str>] {
        self.values.get(position).map_or(&[], |v| &v[..])
    }

    /// Heap bytes this entry holds besides its labels (which are shared): for the docs'
    /// and the benches' accounting.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.data.len()
            + self
                .values
                .iter()
                .map(|v| {
                    std::mem::size_of_val::<[Box<str>]>(v)
                        + v.iter().map(|s| s.len()).sum::<usize>()
                })
                .sum::<usize>()
    }
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

impl MetaObject for Entry {
    fn object_name(&self) -> Option<&str> {
        non_empty(self.part(1))
    }
    fn object_namespace(&self) -> Option<&str> {
        non_empty(self.part(0))
    }
    fn object_resource_version(&self) -> Option<&str> {
        non_empty(self.part(2))
    }
    fn object_labels(&self) -> Option<&Labels> {
        self.labels.as_deref()
    }
    fn object_uid(&self) -> Option<&str> {
        non_empty(self.part(3))
    }
}

impl Entry {
    /// The labels, shared.
    pub(crate) fn shared_labels(&self) -> Option<Arc<Labels>> {
        self.labels.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_come_back_as_written() {
        let key = ObjectKey::parse("custom/key").unwrap();
        let head = Head {
            namespace: Some("ns"),
            name: Some("web-0"),
            resource_version: Some("42"),
            uid: Some("u-1"),
            custom_key: Some(&key),
        };
        let values: Box<[Box<[Box<str>]>]> = vec![vec!["a".into(), "b".into()].into()].into();
        let e = Entry::new(&head, b"\x01\x02", None, values);
        assert_eq!(e.object_namespace(), Some("ns"));
        assert_eq!(e.object_name(), Some("web-0"));
        assert_eq!(e.object_resource_version(), Some("42"));
        assert_eq!(e.object_uid(), Some("u-1"));
        assert_eq!(e.custom_key(), "custom/key");
        assert_eq!(e.encoded(), b"\x01\x02");
        assert_eq!(e.values(0).len(), 2);
        assert!(e.values(1).is_empty());

        let bare = Entry::new(
            &Head {
                namespace: None,
                name: Some("node-1"),
                resource_version: None,
                uid: None,
                custom_key: None,
            },
            b"",
            None,
            Box::new([]),
        );
        assert_eq!(bare.object_namespace(), None);
        assert_eq!(bare.object_resource_version(), None);
        assert_eq!(bare.custom_key(), "");
        assert!(bare.encoded().is_empty());
    }
}
