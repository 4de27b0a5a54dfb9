//! Kubernetes protobuf (the `k8s\0` envelope, lists, watch frames) decoded into any serde
//! type that decodes the same object's JSON.
//!
//! ```
//! # let body = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pod.pb"));
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_protobuf::Object;
//!
//! // `body`: the answer to a GET with `Accept: application/vnd.kubernetes.protobuf`.
//! let object = Object::from_bytes(body)?;
//! assert_eq!(object.kind(), "Pod");
//!
//! // A k8s-openapi type, exactly as if it were decoded from the JSON of the same pod ...
//! let pod: Pod = object.deserialize()?;
//! assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
//!
//! // ... or a struct of your own: the fields it does not name are skipped, not decoded.
//! #[derive(serde::Deserialize)]
//! struct Slim {
//!     metadata: Meta,
//! }
//! #[derive(serde::Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! struct Meta {
//!     name: String,
//!     resource_version: String,
//! }
//! let slim: Slim = object.deserialize()?;
//! assert_eq!(slim.metadata.name, "web-0");
//! # Ok::<(), kinformer_protobuf::Error>(())
//! ```
//!
//! # What it decodes
//!
//! - One object: [`Object::from_bytes`] reads the envelope (`k8s\0`, then a
//!   `runtime.Unknown` naming the apiVersion and kind), [`Object::deserialize`] decodes it
//!   ([`from_slice`] does both). Error bodies (`Status`) are objects too: decode them into
//!   `kube::core::Status` or k8s-openapi's `Status`.
//! - A list page: [`Object::list`] gives its [`ListMeta`] (resourceVersion, continue token,
//!   remaining item count) and [`List::items`] its items one at a time, so that each can be
//!   transformed and put in an `Arc` as it is decoded.
//! - A watch stream (`application/vnd.kubernetes.protobuf;stream=watch`): [`FrameDecoder`]
//!   splits the bytes into frames without I/O, with a limit on the frame size and a
//!   [`FrameDecoder::finish`] that tells a stream cut mid-frame; [`WatchEvent::from_frame`]
//!   reads each event's type and object (`ERROR` events carry a `Status`; `BOOKMARK`s an
//!   object with only its metadata).
//!
//! - Transcoding: [`Object::transcoder`] hands the same view to any `serde::Serializer`
//!   instead of a target type, with struct field names as the schema's `&'static str`s and
//!   `managedFields`' JSON as the text the server sent: kinformer-compact-store's encoding
//!   straight from the wire with no object built in between (or protobuf to JSON).
//!
//! The target is any `Deserialize` type that decodes the object's JSON: k8s-openapi types
//! (whatever version feature you enable), `kube::core::PartialObjectMeta<K>`,
//! `serde_json::Value`, your own projections. Nothing here is specific to k8s-openapi.
//!
//! # How: a deserializer that shows protobuf as its JSON
//!
//! The decoder is a `serde::Deserializer` over the protobuf bytes that presents each
//! message as the map serde_json would present for the JSON encoding/json writes of the
//! same Go value. It is driven by a schema table, one entry per protobuf message: field
//! number → JSON name, kind of value, nested message, repeated or map, and what
//! encoding/json does that protobuf does not:
//!
//! - zero values: protobuf carries a non-pointer `int32`, `bool` or `string` even when it
//!   is zero, JSON leaves it out under `omitempty` (`None` rather than `Some(0)` in
//!   k8s-openapi). The table knows which fields are `omitempty` (and `omitzero`).
//! - inlined structs (`json:",inline"`, e.g. a Volume's `VolumeSource`): a nested message
//!   in protobuf, fields of the parent in JSON.
//! - types with their own `MarshalJSON`, shown in their JSON form: `Time` (RFC 3339 to the
//!   second, `null` when zero; protobuf carries no fraction for it), `MicroTime` (six
//!   fractional digits), `Duration` (Go's `1h2m3s`), `Quantity` (its canonical string,
//!   which is what protobuf carries), `IntOrString` (a number or a string), `RawExtension`
//!   and `FieldsV1` (managedFields; JSON bytes inside the protobuf, handed over through
//!   serde_json), wrapped lists (`ExtraValue`, `Verbs`: a message in protobuf, an array in
//!   JSON).
//! - byte fields are base64 strings (k8s-openapi's `ByteString` decodes them back); strings
//!   that are not valid UTF-8 get U+FFFD for each invalid byte, as encoding/json writes them;
//!   integral floats read back as integers, as serde_json reads Go's output.
//! - a top-level object starts with `apiVersion` and `kind` (from the envelope); list items
//!   have neither (as in the JSON of built-in lists), except metadata-only lists.
//!
//! The deserializer is self-describing (`deserialize_any` always knows what comes next), so
//! `#[serde(flatten)]`, untagged enums and `serde_json::Value` work; fields the target
//! ignores are skipped without decoding. Unknown protobuf fields are skipped, as Go skips
//! them. Repeated fields are gathered wherever their elements are in the message, packed or
//! not. No length prefix is trusted: every one is checked against the bytes that remain,
//! and nothing is allocated from it.
//!
//! # The schema table, and keeping it fresh
//!
//! The table (`src/schema/table.rs`) is generated by `cargo xtask gen-proto`, which runs a
//! Go program (`xtask/go/cmd/gen-proto`) that walks, by reflection, every type registered in
//! client-go's `kubernetes/scheme` plus the meta.k8s.io/v1 types a client meets (`Status`,
//! `WatchEvent`, `PartialObjectMetadata`, `PartialObjectMetadataList`). Field numbers come
//! from the `protobuf:"..."` struct tags, JSON names and omit options from the `json:"..."`
//! tags, kinds of value from the Go types; every message is then checked against the Go
//! type's own generated `Marshal` (each field written under the number and wire type the
//! table says, nothing written that the table lacks). The generator stops on anything the
//! decoder would not reproduce exactly (a type with an unknown `MarshalJSON`, a `,string`
//! option, a JSON field without a protobuf number, non-string map keys), so a new
//! Kubernetes version cannot silently produce a table that decodes differently from JSON.
//! `cargo xtask gen-proto --check` (run by `cargo xtask test`) fails when the checked-in
//! table differs from what the Go modules in `xtask/go/go.mod` give; [`schema_source`] says
//! which versions it was made from.
//!
//! # What it does not do, and why
//!
//! - Custom resources and aggregated APIs that are not in client-go's scheme: the API server
//!   serves custom resources as JSON only, and the table cannot know a CRD's fields. Such an
//!   envelope is [`Error::UnknownKind`]; ask for JSON ([`is_known`] tells in advance).
//! - Types newer than the table: regenerate it for a newer Kubernetes.
//! - `Table` (`kubectl get`'s server-side printing): its cells are arbitrary JSON values with
//!   no protobuf form.
//! - CBOR inside a `RawExtension` or `FieldsV1` (the API server writes JSON there), and
//!   envelopes with a content encoding: typed errors.
//! - Encoding into protobuf: this crate reads protobuf; it writes other formats from it
//!   (transcoding), never protobuf.
//!
//! # Performance
//!
//! A protobuf pod takes fewer bytes than its JSON (BENCHMARKS.md's "informer-defaults" wire
//! table measures realistic pods both ways). Decoding time depends on the target:
//!
//! - into a projection struct that names a few fields, protobuf is faster than serde_json on
//!   the JSON: a field the target does not name is stepped over by its length, where JSON
//!   has to be scanned;
//! - into a whole k8s-openapi `Pod`, building the object (strings, vectors, maps, the
//!   `serde_json::Value` of managedFields) is most of the time either way, and this crate's
//!   per-field work (a schema lookup, the omitempty and inline rules, the special types'
//!   JSON forms) is not cheaper than serde_json's parsing of the same field;
//! - into another encoding ([`Object::transcoder`]), no object is built at all: what the
//!   default informer does (BENCHMARKS.md's "compact-store" section has the per-pod times
//!   of transcoding against decoding and encoding).
//!
//! `cargo bench -p kinformer-protobuf --bench decode` measures both formats in one run.
//!
//! # Errors
//!
//! One enum, [`Error`]. Decoding never panics, on any input. No error message contains a
//! byte of the body (it may be a Secret): they name where the decoder was, from the schema
//! (`Pod.spec.containers[2].image`), and what was wrong, never the value.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod de;
mod error;
mod frame;
mod list;
mod object;
mod schema;
mod special;
mod watch;
mod wire;

pub use error::{Error, Path};
pub use frame::FrameDecoder;
pub use list::{Items, List, ListMeta, Objects};
pub use object::{MAGIC, MEDIA_TYPE, Object, Transcoder, from_slice};
pub use schema::{is_known, schema_source};

/// The schema table, read-only: how each protobuf message of the Kubernetes types maps
/// onto its JSON, for code generated from it.
pub mod schema_table {
    pub use crate::schema::{Field, Kind, Message, Ty, flags, kinds};
}
pub use watch::{EventType, WATCH_MEDIA_TYPE, WatchEvent};
