//! The schema table: how each protobuf message maps onto the JSON of its Go type.
//!
//! `table.rs` is generated from the Go types by `cargo xtask gen-proto` (the Go program
//! `xtask/go/cmd/gen-proto`); this module holds the types it is written in and the lookups.

#[rustfmt::skip]
mod table;

pub(crate) use table::SOURCES;

/// One protobuf message (a Go struct).
#[derive(Debug)]
#[non_exhaustive]
pub struct Message {
    /// The protobuf message name, e.g. `k8s.io.api.core.v1.Pod`.
    pub name: &'static str,
    /// Its fields, sorted by number.
    pub fields: &'static [Field],
}

/// One field of a message.
#[derive(Debug)]
#[non_exhaustive]
pub struct Field {
    /// The protobuf field number.
    pub number: u32,
    /// The JSON name (the key encoding/json writes).
    pub json: &'static str,
    /// The type of one value (of one element, for repeated fields and maps).
    pub ty: Ty,
    /// [`flags`].
    pub flags: u8,
}

/// Bits of [`Field::flags`].
pub mod flags {
    /// A slice or a map: one protobuf field occurrence per element (or one packed run).
    pub const REPEATED: u8 = 1;
    /// `omitempty` on a non-pointer scalar, string, slice or map: encoding/json leaves a zero
    /// value out, while protobuf writes it.
    pub const OMIT_EMPTY: u8 = 2;
    /// `omitzero` on a Time or MicroTime: left out of the JSON when zero.
    pub const OMIT_ZERO: u8 = 4;
    /// An embedded struct whose fields JSON writes into the parent (`json:",inline"`), while
    /// protobuf nests it as a message.
    pub const INLINE: u8 = 8;
}

/// The type of a value, as far as the decoder needs to know it.
#[derive(Debug)]
// The generator writes every variant a Go type needs; those no Kubernetes type of the
// version in the table uses (Uint32, Uint64, Double, Float, Duration today) are still
// decoded, so that a newer table needs no decoder change, and are tested on hand-made
// messages.
#[cfg_attr(not(test), allow(dead_code))]
#[non_exhaustive]
pub enum Ty {
    /// A Go string: protobuf bytes holding UTF-8 (encoding/json replaces invalid bytes).
    String,
    /// A Go `[]byte`: base64 (standard alphabet, padded) in JSON.
    Bytes,
    /// Go bool, varint.
    Bool,
    /// Go int32, varint (negative values sign-extended to 64 bits).
    Int32,
    /// Go int64, varint.
    Int64,
    /// Go uint32, varint.
    Uint32,
    /// Go uint64, varint.
    Uint64,
    /// Go float64, fixed64.
    Double,
    /// Go float32, fixed32.
    Float,
    /// A nested struct.
    Message(&'static Message),
    /// A Go map with string keys: repeated entry messages `{ key = 1; value = 2 }`.
    Map(&'static Ty),
    /// A named slice with a message of its own (`ExtraValue`, `Verbs`): `{ repeated items = 1 }`
    /// in protobuf, a plain array in JSON.
    WrappedList(&'static Ty),
    /// `metav1.Time`: `Timestamp { seconds = 1; nanos = 2 }`, RFC 3339 to the second in JSON.
    Time,
    /// `metav1.MicroTime`: a `Timestamp`, RFC 3339 with six fractional digits in JSON.
    MicroTime,
    /// `metav1.Duration`: `{ duration = 1 }` in nanoseconds, Go's `Duration.String()` in JSON.
    Duration,
    /// `resource.Quantity`: `{ string = 1 }`, the canonical string in both.
    Quantity,
    /// `intstr.IntOrString`: `{ type = 1; intVal = 2; strVal = 3 }`, a number or a string in JSON.
    IntOrString,
    /// `runtime.RawExtension`: `{ raw = 1 }` holding JSON, written verbatim in JSON.
    RawExtension,
    /// `metav1.FieldsV1`: `{ Raw = 1 }` holding JSON, written verbatim in JSON.
    FieldsV1,
}

/// An (apiVersion, kind) the table knows, and its message.
#[derive(Debug)]
#[non_exhaustive]
pub struct Kind {
    /// `v1`, `apps/v1`.
    pub api_version: &'static str,
    /// `Pod`.
    pub kind: &'static str,
    /// Its message.
    pub message: &'static Message,
}

/// Every (apiVersion, kind) the table knows, sorted: for generators of code over the
/// Kubernetes types (kinformer-compact-store's read views are generated from it by
/// `cargo xtask gen-proto`).
pub fn kinds() -> &'static [Kind] {
    &table::KINDS
}

/// The message of an (apiVersion, kind), if the table has it.
pub(crate) fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    table::KINDS
        .binary_search_by(|k| (k.api_version, k.kind).cmp(&(api_version, kind)))
        .ok()
        .map(|i| table::KINDS[i].message)
}

/// The meta.k8s.io/v1 messages the decoder reads itself.
pub(crate) mod meta {
    use super::{Message, table};

    pub(crate) static LIST_META: &Message = &table::K8S_IO_APIMACHINERY_PKG_APIS_META_V1_LISTMETA;
    pub(crate) static PARTIAL_OBJECT_METADATA: &Message =
        &table::K8S_IO_APIMACHINERY_PKG_APIS_META_V1_PARTIALOBJECTMETADATA;
}

impl Message {
    /// The field with `number`, starting the search at `*hint` (fields usually come in
    /// order, so the next one is most often the one after the previous) and leaving the
    /// found index there.
    #[inline]
    pub(crate) fn field(&self, number: u32, hint: &mut usize) -> Option<(usize, &'static Field)> {
        let fields = self.fields;
        if let Some(f) = fields.get(*hint)
            && f.number == number
        {
            return Some((*hint, f));
        }
        if let Some(f) = fields.get(*hint + 1)
            && f.number == number
        {
            *hint += 1;
            return Some((*hint, f));
        }
        let i = fields.binary_search_by_key(&number, |f| f.number).ok()?;
        *hint = i;
        Some((i, &fields[i]))
    }

    /// The field whose JSON name is `json`.
    pub(crate) fn field_by_json(&self, json: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.json == json)
    }

    /// The short name of the message (`Pod` of `k8s.io.api.core.v1.Pod`), for error paths.
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }
}

impl Field {
    /// Whether the field has `flag` (one of [`flags`]).
    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Whether the schema table knows `apiVersion`/`kind`: then objects of that type can be
/// decoded from protobuf. Built-in types of the Kubernetes version the table was generated
/// from (and the meta.k8s.io/v1 types `Status`, `WatchEvent`, `PartialObjectMetadata` and
/// `PartialObjectMetadataList`) are known; custom resources are not, since the API server
/// serves them as JSON only.
///
/// ```
/// assert!(kinformer_protobuf::is_known("v1", "Pod"));
/// assert!(kinformer_protobuf::is_known("apps/v1", "DeploymentList"));
/// assert!(kinformer_protobuf::is_known("meta.k8s.io/v1", "PartialObjectMetadataList"));
/// assert!(!kinformer_protobuf::is_known("example.com/v1", "Widget"));
/// ```
pub fn is_known(api_version: &str, kind: &str) -> bool {
    lookup(api_version, kind).is_some()
}

/// The Go modules (and versions) the schema table was generated from, e.g.
/// `"k8s.io/api v0.36.3, k8s.io/apimachinery v0.36.3, k8s.io/client-go v0.36.3"`.
pub fn schema_source() -> &'static str {
    SOURCES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_sorted_and_unique_so_that_binary_search_finds_each() {
        for w in table::KINDS.windows(2) {
            assert!(
                (w[0].api_version, w[0].kind) < (w[1].api_version, w[1].kind),
                "{}/{} before {}/{}",
                w[0].api_version,
                w[0].kind,
                w[1].api_version,
                w[1].kind
            );
        }
        for k in &table::KINDS {
            assert!(lookup(k.api_version, k.kind).is_some());
        }
    }

    #[test]
    fn fields_are_sorted_by_number() {
        for k in &table::KINDS {
            for w in k.message.fields.windows(2) {
                assert!(w[0].number < w[1].number, "{}", k.message.name);
            }
        }
    }

    #[test]
    fn inlined_messages_nest_no_deeper_than_the_decoder_holds() {
        fn depth(m: &Message) -> usize {
            m.fields
                .iter()
                .filter(|f| f.has(flags::INLINE))
                .map(|f| match f.ty {
                    Ty::Message(inner) => 1 + depth(inner),
                    _ => 1,
                })
                .max()
                .unwrap_or(0)
        }
        let deepest = table::KINDS
            .iter()
            .map(|k| depth_all(k.message, &depth, &mut Vec::new()))
            .max();
        assert_eq!(deepest, Some(2));
        assert!(deepest <= Some(crate::de::MAX_INLINE_DEPTH));
    }

    /// The deepest inline nesting anywhere under `m`. Since 1.37 some kinds hold a message
    /// that holds itself (through a field that is not inlined): a message already on `path`
    /// is not walked again.
    fn depth_all(
        m: &'static Message,
        depth: &dyn Fn(&Message) -> usize,
        path: &mut Vec<*const Message>,
    ) -> usize {
        if path.contains(&std::ptr::from_ref(m)) {
            return 0;
        }
        path.push(m);
        let nested = m
            .fields
            .iter()
            .filter_map(|f| match &f.ty {
                Ty::Message(inner) => Some(depth_all(inner, depth, path)),
                Ty::Map(Ty::Message(inner)) => Some(depth_all(inner, depth, path)),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        path.pop();
        depth(m).max(nested)
    }

    #[test]
    fn every_map_field_is_repeated_and_every_inline_a_message() {
        for k in &table::KINDS {
            for f in k.message.fields {
                if matches!(f.ty, Ty::Map(_)) {
                    assert!(f.has(flags::REPEATED), "{}.{}", k.message.name, f.json);
                }
                if f.has(flags::INLINE) {
                    assert!(
                        matches!(f.ty, Ty::Message(_)),
                        "{}.{}",
                        k.message.name,
                        f.json
                    );
                }
            }
        }
    }

    #[test]
    fn field_lookup_finds_in_order_out_of_order_and_missing_numbers() {
        let pod = lookup("v1", "Pod").map(|m| m.fields).unwrap_or_default();
        assert_eq!(pod.len(), 3, "metadata, spec, status");
        let msg = lookup("v1", "Pod").expect("Pod");
        let mut hint = 0;
        assert_eq!(
            msg.field(1, &mut hint).map(|(i, f)| (i, f.json)),
            Some((0, "metadata"))
        );
        assert_eq!(
            msg.field(2, &mut hint).map(|(i, f)| (i, f.json)),
            Some((1, "spec"))
        );
        assert_eq!(
            msg.field(3, &mut hint).map(|(i, f)| (i, f.json)),
            Some((2, "status"))
        );
        assert_eq!(
            msg.field(1, &mut hint).map(|(i, f)| (i, f.json)),
            Some((0, "metadata"))
        );
        assert!(msg.field(99, &mut hint).is_none());
        assert_eq!(msg.short_name(), "Pod");
    }
}
