//! Lists (`PodList`, `PartialObjectMetadataList`, ...): their metadata, and their items one
//! at a time.

use std::marker::PhantomData;

use serde::Deserialize;

use crate::de::{MessageDe, nested_type_meta};
use crate::error::{Error, Segment};
use crate::object::Object;
use crate::schema::{Field, Message, Ty, flags, meta};
use crate::wire::{Reader, Value};

/// The metadata of a list: where it stands and how to get the next page.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListMeta {
    /// The resourceVersion the list was read at (empty if the server sent none).
    pub resource_version: String,
    /// The token for the next page; `None` on the last page (an empty token is `None`).
    pub continue_token: Option<String>,
    /// How many items remain after this page, when the server says (an estimate).
    pub remaining_item_count: Option<i64>,
    /// `shardInfo.selector`: the shard selector the server filtered the list with
    /// (Kubernetes 1.36, feature gate `ShardedListAndWatch`), `None` when it did not.
    pub shard_selector: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
    #[serde(default)]
    remaining_item_count: Option<i64>,
    #[serde(default)]
    shard_info: Option<RawShardInfo>,
}

#[derive(Deserialize)]
struct RawShardInfo {
    #[serde(default)]
    selector: String,
}

/// A decoded list envelope: its [`ListMeta`], and its items, decoded one at a time by
/// [`List::items`] so that each can be modified and put in an `Arc` as soon as it is
/// decoded, without the page ever holding all of them in another form.
///
/// ```
/// # let body = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pod-list.pb"));
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_protobuf::Object;
///
/// let list = Object::from_bytes(body)?.list()?;
/// assert_eq!(list.kind(), "PodList");
/// let mut pods = Vec::with_capacity(list.len());
/// for pod in list.items::<Pod>() {
///     let mut pod = pod?;
///     pod.metadata.managed_fields = None; // a transform, once per object
///     pods.push(Arc::new(pod));
/// }
/// assert_eq!(pods.len(), 2);
/// assert_eq!(list.meta().resource_version, "1234");
/// assert_eq!(list.meta().continue_token, None);
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct List<'a> {
    object: Object<'a>,
    list: &'static Message,
    items: &'static Field,
    item: &'static Message,
    meta: ListMeta,
    len: usize,
}

impl<'a> Object<'a> {
    /// Reads this object as a list: its metadata now, its items through
    /// [`List::items`]. Fails with [`Error::Rejected`] if the type is not a list (has no
    /// `items` of messages), and as [`Object::deserialize`] does otherwise.
    pub fn list(&self) -> Result<List<'a>, Error> {
        let list = self.message()?;
        let at_list = |e: Error| e.at(Segment::Message(list.short_name()));
        let (items, item) = match list.field_by_json("items") {
            Some(
                f @ Field {
                    ty: Ty::Message(item),
                    ..
                },
            ) if f.has(flags::REPEATED) => (f, *item),
            _ => {
                return Err(at_list(Error::rejected(
                    "not a list: no `items` of objects",
                )));
            }
        };
        let meta_number = list
            .field_by_json("metadata")
            .filter(|f| matches!(f.ty, Ty::Message(m) if std::ptr::eq(m, meta::LIST_META)))
            .map(|f| f.number);
        let mut raw_meta = None;
        let mut len = 0;
        let mut r = Reader::new(self.raw());
        while let Some((n, v)) = r.field().map_err(|f| at_list(Error::malformed(f)))? {
            match v {
                Value::Len(b) if Some(n) == meta_number => raw_meta = Some(b),
                Value::Len(_) if n == items.number => len += 1,
                _ if n == items.number || Some(n) == meta_number => {
                    return Err(at_list(Error::malformed("wrong wire type")));
                }
                _ => {}
            }
        }
        let meta = match raw_meta {
            None => ListMeta::default(),
            Some(buf) => {
                let raw = RawListMeta::deserialize(MessageDe {
                    msg: meta::LIST_META,
                    buf,
                    type_meta: None,
                })
                .map_err(|e| at_list(e.at(Segment::Field("metadata")).into_error()))?;
                ListMeta {
                    resource_version: raw.resource_version.unwrap_or_default(),
                    continue_token: raw.continue_token.filter(|c| !c.is_empty()),
                    remaining_item_count: raw.remaining_item_count,
                    shard_selector: raw.shard_info.map(|s| s.selector),
                }
            }
        };
        Ok(List {
            object: *self,
            list,
            items,
            item,
            meta,
            len,
        })
    }
}

impl<'a> List<'a> {
    /// The list's apiVersion, e.g. `v1`.
    pub fn api_version(&self) -> &'a str {
        self.object.api_version()
    }

    /// The list's kind, e.g. `PodList`.
    pub fn kind(&self) -> &'a str {
        self.object.kind()
    }

    /// The list's metadata.
    pub fn meta(&self) -> &ListMeta {
        &self.meta
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list has no items.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The items, decoded into `T` one at a time, in order. An item that `T` refuses is an
    /// [`Error::Rejected`] naming its index, and the next item can still be read; malformed
    /// protobuf ends the iteration after its error.
    ///
    /// Items carry no `apiVersion`/`kind` (as in the JSON of built-in lists), except the
    /// items of a `PartialObjectMetadataList`, which get `meta.k8s.io/v1`
    /// `PartialObjectMetadata`, as the API server writes them in JSON.
    pub fn items<T: Deserialize<'a>>(&self) -> Items<'a, T> {
        Items {
            raw: self.raw_items(),
            _t: PhantomData,
        }
    }

    /// The items as [`Object`]s, without decoding them: to [`Object::deserialize`] or
    /// [`Object::transcode`](Object::transcoder) each one. An item shows what
    /// [`items`](Self::items) would decode (no `apiVersion`/`kind`, except in a
    /// `PartialObjectMetadataList`); its [`Object::kind`] is the item's type (`Pod`), its
    /// [`Object::api_version`] the list's. Malformed protobuf ends the iteration after its
    /// error.
    ///
    /// ```
    /// # let body = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pod-list.pb"));
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_protobuf::Object;
    ///
    /// let list = Object::from_bytes(body)?.list()?;
    /// for item in list.objects() {
    ///     let item = item?;
    ///     assert_eq!(item.kind(), "Pod");
    ///     let pod: Pod = item.deserialize()?;
    ///     assert!(pod.metadata.name.is_some());
    /// }
    /// # Ok::<(), kinformer_protobuf::Error>(())
    /// ```
    pub fn objects(&self) -> Objects<'a> {
        Objects {
            raw: self.raw_items(),
            api_version: self.object.api_version(),
        }
    }

    fn raw_items(&self) -> RawItems<'a> {
        RawItems {
            reader: Reader::new(self.object.raw()),
            number: self.items.number,
            item: self.item,
            list: self.list,
            index: 0,
            remaining: self.len,
            done: false,
        }
    }
}

/// The items of a [`List`], decoded one at a time.
pub struct Items<'a, T> {
    raw: RawItems<'a>,
    _t: PhantomData<fn() -> T>,
}

impl<'a, T: Deserialize<'a>> Iterator for Items<'a, T> {
    type Item = Result<T, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let (index, buf) = match self.raw.next()? {
            Ok(item) => item,
            Err(e) => return Some(Err(e)),
        };
        let raw = &self.raw;
        Some(
            T::deserialize(MessageDe {
                msg: raw.item,
                buf,
                type_meta: nested_type_meta(raw.item),
            })
            .map_err(|e| raw.at(e.into_error(), index)),
        )
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.raw.size_hint()
    }
}

/// The items of a [`List`] as [`Object`]s ([`List::objects`]).
pub struct Objects<'a> {
    raw: RawItems<'a>,
    api_version: &'a str,
}

impl<'a> Iterator for Objects<'a> {
    type Item = Result<Object<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(
            self.raw
                .next()?
                .map(|(_, buf)| Object::item(self.api_version, self.raw.item, buf)),
        )
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.raw.size_hint()
    }
}

/// The bytes of each item of a list, in order, with its index.
struct RawItems<'a> {
    reader: Reader<'a>,
    number: u32,
    item: &'static Message,
    list: &'static Message,
    index: usize,
    remaining: usize,
    done: bool,
}

impl<'a> RawItems<'a> {
    /// `e` at item `index` of the list.
    fn at(&self, e: Error, index: usize) -> Error {
        e.at(Segment::Index(index))
            .at(Segment::Field("items"))
            .at(Segment::Message(self.list.short_name()))
    }

    fn next(&mut self) -> Option<Result<(usize, &'a [u8]), Error>> {
        if self.done {
            return None;
        }
        loop {
            match self.reader.field() {
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Ok(Some((n, Value::Len(buf)))) if n == self.number => {
                    let index = self.index;
                    self.index += 1;
                    self.remaining = self.remaining.saturating_sub(1);
                    return Some(Ok((index, buf)));
                }
                Ok(Some(_)) => {}
                Err(fault) => {
                    self.done = true;
                    return Some(Err(self.at(Error::malformed(fault), self.index)));
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (self.remaining, Some(self.remaining))
        }
    }
}
