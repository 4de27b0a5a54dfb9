//! CBOR on the wire (KEP-4222; Kubernetes 1.37 serves it behind the alpha gate
//! `CBORServingAndStorage`, for custom resources and built-in types): list pages, watch
//! events, bookmarks and error bodies, as the JSON path reads them, without ever quoting a
//! value from the body in an error.
//!
//! A list is one data item (`application/cbor`); a watch is a CBOR sequence (RFC 8742,
//! `application/cbor-seq`): events one after the other with no framing, each found by
//! where its data item ends ([`Sequence`]). Objects are decoded with serde straight from
//! the bytes ([`de`]) into the type asked for, as JSON is; a list's items and an event's
//! object are taken undecoded first ([`de::Raw`]), so that one that fails is reported and
//! skipped alone and a wrong kind is told apart from a malformed object.

mod de;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::decode::{self, BookmarkObject, Expected, Modify, RawList};
use de::Raw;
use kinformer_reflector::{Bookmark, Error, ListPage, WatchEvent};

/// The media type of a CBOR object or list.
pub(super) const MEDIA_TYPE: &str = "application/cbor";
/// The media type of a CBOR watch stream.
pub(super) const SEQUENCE_MEDIA_TYPE: &str = "application/cbor-seq";

/// client-go's limit on one watch event, as for protobuf frames.
const MAX_EVENT_LEN: usize = 16 * 1024 * 1024;

fn decode_error(what: impl Into<String>, e: &de::Error) -> Error {
    Error::decode(what, e.to_string())
}

/// `apiVersion` and `kind`, wherever they are in an object.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeOnly<'a> {
    #[serde(default, borrow)]
    api_version: Option<&'a str>,
    #[serde(default, borrow)]
    kind: Option<&'a str>,
}

/// Decodes one object, telling a wrong kind from a malformed object.
fn decode_object<K: DeserializeOwned>(
    raw: Raw<'_>,
    expected: &Expected,
    what: impl FnOnce() -> String,
) -> Result<K, Error> {
    if let Ok(t) = de::from_slice::<TypeOnly<'_>>(raw.0) {
        expected.check(t.api_version, t.kind)?;
    }
    de::from_slice(raw.0).map_err(|e| decode_error(what(), &e))
}

/// Decodes a list page: each item on its own, so that one that fails is skipped alone.
pub(super) fn decode_list<K: DeserializeOwned>(
    body: &[u8],
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<ListPage<K>, Error> {
    let raw: RawList<Raw<'_>> = de::from_slice(body).map_err(|e| decode_error("list", &e))?;
    raw.page(
        modify,
        |item, i| decode_object(item, expected, || format!("list item {i}")),
        |item| de::from_slice(item.0).ok(),
    )
}

/// Decodes one event of a watch stream.
pub(super) fn decode_event<K: DeserializeOwned>(
    item: &[u8],
    expected: &Expected,
    modify: Option<&Modify<K>>,
) -> Result<WatchEvent<K>, Error> {
    #[derive(Deserialize)]
    struct RawEvent<'a> {
        #[serde(rename = "type", borrow)]
        kind: &'a str,
        #[serde(borrow)]
        object: Raw<'a>,
    }
    let ev: RawEvent<'_> = match de::from_slice(item) {
        Ok(ev) => ev,
        Err(e) => {
            // A bare Status instead of an event: the server failed mid-stream.
            if let Ok(status) = de::from_slice::<kube::core::Status>(item)
                && (status.code != 0 || !status.reason.is_empty())
            {
                return Err(Error::Api(crate::response::api_status(status)));
            }
            return Err(decode_error("watch event", &e));
        }
    };
    decode::event(
        ev.kind,
        |what| {
            let decoded = decode_object(ev.object, expected, || format!("{what} object"));
            decode::event_object(what, decoded, || de::from_slice(ev.object.0).ok(), modify)
        },
        || {
            de::from_slice::<BookmarkObject>(ev.object.0)
                .map(Bookmark::from)
                .map_err(|e| decode_error("BOOKMARK object", &e))
        },
        || de::from_slice(ev.object.0).map_err(|e| decode_error("ERROR event", &e)),
    )
}

/// A body in decoded `Status` form, if it is one (an error response in CBOR).
pub(super) fn decode_status(body: &[u8]) -> Option<kube::core::Status> {
    de::from_slice(body).ok()
}

/// A CBOR sequence cut into its data items as its chunks arrive (the watch's framing).
#[derive(Debug, Default)]
pub(super) struct Sequence {
    buf: Vec<u8>,
    /// Where the next item starts in `buf` (the bytes before it are consumed).
    start: usize,
}

impl Sequence {
    pub(super) fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole data item, `None` until all of it is in.
    ///
    /// # Errors
    /// When the bytes cannot start a data item, or an item grows past 16 MiB.
    pub(super) fn next_item(&mut self) -> Result<Option<&[u8]>, Error> {
        let avail = &self.buf[self.start..];
        match de::item_len(avail) {
            Ok(Some(n)) => {
                let at = self.start;
                self.start += n;
                Ok(Some(&self.buf[at..at + n]))
            }
            Ok(None) if avail.len() > MAX_EVENT_LEN => Err(Error::decode(
                "watch stream",
                format!("an event over {MAX_EVENT_LEN} bytes"),
            )),
            Ok(None) => Ok(None),
            Err(e) => Err(decode_error("watch stream", &e)),
        }
    }

    /// Bytes of an item not all in when the stream ended (a cut mid-event), if any.
    pub(super) fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests;
