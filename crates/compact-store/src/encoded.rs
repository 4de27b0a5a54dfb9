//! [`Encoded<K>`]: an object kept in this crate's encoding, with the metadata the pipeline
//! reads, as an informer's object type — so that a list or watch goes from the bytes on
//! the wire to the cached entry without building a `K`.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use kinformer_core::MetaObject;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::codec::{self, CodecError};

/// An object of type `K` kept in the store's encoding ([the encoding](crate#the-encoding)),
/// with its name, namespace, resource version, uid and labels beside it, decoded into a
/// `K` only when [`decode`](Self::decode) is called.
///
/// The default informer of `K` carries its objects as `Encoded<K>` from the wire to the
/// cache and decodes them for its handlers and readers (see the [crate docs](crate)). It
/// can also be an informer's object type itself, where handlers and listers should take
/// the encoded objects and decode where they choose. It is made:
///
/// - from protobuf, [`from_protobuf`](Self::from_protobuf) transcodes the bytes on the wire
///   straight into the encoding (kinformer-protobuf's `Object::transcoder`): no `K` is
///   built, `managedFields` stay the JSON text the server sent. Hand it to
///   kinformer-reflector's `KubeListerWatcher::decode_protobuf_with`;
/// - from JSON (custom resources), its `Deserialize` decodes a `K` and encodes it;
/// - a `K` you have: [`Encoded::new`].
///
/// An informer of `Encoded<K>` keeps it in a decoded store (`CacheKind::Decoded`): the
/// objects are encoded already. Its `Serialize` (which the encoded cache would use) decodes
/// `K` and serializes it, for completeness, not for speed.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact_store::Encoded;
/// use kinformer_core::MetaObject;
///
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-0".into());
/// pod.metadata.namespace = Some("default".into());
/// pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
/// let encoded = Encoded::new(&pod)?;
/// // Metadata without decoding ...
/// assert_eq!(encoded.object_name(), Some("web-0"));
/// assert_eq!(encoded.object_labels().and_then(|l| l.get("app")).map(String::as_str), Some("web"));
/// // ... and the object when it is needed.
/// assert_eq!(encoded.decode()?, pod);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Encoded<K> {
    /// namespace, name, resource version and uid, one after the other.
    text: Box<str>,
    /// Where each of `text`'s parts ends, and whether the optional ones are set.
    ends: [u32; 4],
    set: u8,
    labels: Option<Arc<BTreeMap<String, String>>>,
    bytes: Box<[u8]>,
    _k: PhantomData<fn() -> K>,
}

const NAMESPACE: u8 = 1;
const NAME: u8 = 2;
const RESOURCE_VERSION: u8 = 4;
const UID: u8 = 8;

/// The metadata an [`Encoded`] keeps beside the bytes.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// An object's metadata, the rest skipped.
#[derive(Deserialize)]
struct WithMeta {
    #[serde(default)]
    metadata: Option<Meta>,
}

impl<K> Encoded<K> {
    fn from_parts(meta: Meta, bytes: Vec<u8>) -> Self {
        let parts = [
            (meta.namespace, NAMESPACE),
            (meta.name, NAME),
            (meta.resource_version, RESOURCE_VERSION),
            (meta.uid, UID),
        ];
        let mut text = String::new();
        let mut ends = [0u32; 4];
        let mut set = 0;
        for (i, (part, bit)) in parts.into_iter().enumerate() {
            if let Some(part) = part {
                text.push_str(&part);
                set |= bit;
            }
            // An object's metadata is far below 4 GiB; a longer one would read back cut.
            ends[i] = u32::try_from(text.len()).unwrap_or(u32::MAX);
        }
        Encoded {
            text: text.into_boxed_str(),
            ends,
            set,
            labels: meta.labels.map(Arc::new),
            bytes: bytes.into_boxed_slice(),
            _k: PhantomData,
        }
    }

    fn part(&self, index: usize, bit: u8) -> Option<&str> {
        if self.set & bit == 0 {
            return None;
        }
        let start = index.checked_sub(1).map_or(0, |i| self.ends[i] as usize);
        self.text.get(start..self.ends[index] as usize)
    }

    /// The object as its protobuf says, transcoded into the encoding without building a
    /// `K`: for kinformer-reflector's `KubeListerWatcher::decode_protobuf_with`.
    ///
    /// ```
    /// # let body = include_bytes!("../../protobuf/tests/data/pod.pb");
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Encoded;
    /// use kinformer_core::MetaObject;
    ///
    /// let object = kinformer_protobuf::Object::from_bytes(body)?;
    /// let encoded = Encoded::<Pod>::from_protobuf(&object)?;
    /// assert_eq!(encoded.object_name(), Some("web-0"));
    /// assert_eq!(encoded.decode()?, object.deserialize::<Pod>()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// What decoding the object would fail with on malformed protobuf or an unknown type
    /// (kinformer-protobuf's `Error`, with the path). That the bytes fit `K` is found when
    /// they are decoded: [`decode`](Self::decode) fails then.
    pub fn from_protobuf(
        object: &kinformer_protobuf::Object<'_>,
    ) -> Result<Self, kinformer_protobuf::Error> {
        let meta = object
            .deserialize::<WithMeta>()?
            .metadata
            .unwrap_or_default();
        let transcoder = object.transcoder()?;
        let mut bytes = Vec::with_capacity(object_size_hint(object));
        match codec::encode(&transcoder, &mut bytes) {
            Ok(()) => Ok(Self::from_parts(meta, bytes)),
            Err(_) => Err(transcoder.into_error()),
        }
    }

    /// The encoded object's size in bytes (without the metadata kept beside it).
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// The encoding.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// What a store's entry holds, as an `Encoded` (a copy of the bytes).
    pub(crate) fn from_entry(entry: &crate::entry::Entry) -> Self {
        let meta = Meta {
            name: entry.object_name().map(str::to_owned),
            namespace: entry.object_namespace().map(str::to_owned),
            resource_version: entry.object_resource_version().map(str::to_owned),
            uid: entry.object_uid().map(str::to_owned),
            labels: None,
        };
        Self {
            labels: entry.shared_labels(),
            ..Self::from_parts(meta, entry.encoded().to_vec())
        }
    }
}

/// The encoding of an object is about its protobuf's size (BENCHMARKS.md): one allocation.
fn object_size_hint(object: &kinformer_protobuf::Object<'_>) -> usize {
    object.byte_len() + object.byte_len() / 8
}

impl<K: Serialize + MetaObject> Encoded<K> {
    /// `obj` encoded, its metadata kept beside it.
    ///
    /// # Errors
    /// [`CodecError::Encode`] when `obj` cannot be encoded.
    pub fn new(obj: &K) -> Result<Self, CodecError> {
        let mut bytes = Vec::new();
        codec::encode(obj, &mut bytes)?;
        let meta = Meta {
            name: obj.object_name().map(str::to_owned),
            namespace: obj.object_namespace().map(str::to_owned),
            resource_version: obj.object_resource_version().map(str::to_owned),
            uid: obj.object_uid().map(str::to_owned),
            labels: obj.object_labels().cloned(),
        };
        Ok(Self::from_parts(meta, bytes))
    }
}

impl<K: DeserializeOwned> Encoded<K> {
    /// The object, decoded (each call decodes it again).
    ///
    /// # Errors
    /// [`CodecError::Rejected`] when `K` refuses what the bytes hold (protobuf of another
    /// type, transcoded by [`from_protobuf`](Self::from_protobuf)); no value is reported.
    pub fn decode(&self) -> Result<K, CodecError> {
        codec::decode(&self.bytes)
    }

    /// The object's `apiVersion`, `kind` and `metadata` (without `managedFields`) decoded
    /// as a `K` whose other fields are absent, as a `PartialObjectMetadata` has them: what
    /// a handler that reads only metadata needs (keys, labels, owner references,
    /// generation, deletion timestamp), at the cost of the metadata alone.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::{Pod, PodSpec};
    /// use kinformer_compact_store::Encoded;
    ///
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web-0".into());
    /// pod.spec = Some(PodSpec::default());
    /// let meta = Encoded::new(&pod)?.decode_metadata()?;
    /// assert_eq!(meta.metadata, pod.metadata);
    /// assert_eq!(meta.spec, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`decode`](Self::decode); also when `K` requires a field other than those (a
    /// custom resource whose `spec` is not optional): decode it whole then.
    pub fn decode_metadata(&self) -> Result<K, CodecError> {
        codec::decode_metadata(&self.bytes)
    }
}

impl<K> MetaObject for Encoded<K> {
    fn object_name(&self) -> Option<&str> {
        self.part(1, NAME)
    }
    fn object_namespace(&self) -> Option<&str> {
        self.part(0, NAMESPACE)
    }
    fn object_resource_version(&self) -> Option<&str> {
        self.part(2, RESOURCE_VERSION)
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.labels.as_deref()
    }
    fn object_uid(&self) -> Option<&str> {
        self.part(3, UID)
    }
}

impl<K> Clone for Encoded<K> {
    fn clone(&self) -> Self {
        Encoded {
            text: self.text.clone(),
            ends: self.ends,
            set: self.set,
            labels: self.labels.clone(),
            bytes: self.bytes.clone(),
            _k: PhantomData,
        }
    }
}

impl<K> PartialEq for Encoded<K> {
    /// The same metadata and the same bytes (two encodings of one object made in two
    /// ways may differ in bytes and still decode equal).
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
            && self.ends == other.ends
            && self.set == other.set
            && self.labels == other.labels
            && self.bytes == other.bytes
    }
}

impl<K> fmt::Debug for Encoded<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes: they may be a Secret's.
        f.debug_struct("Encoded")
            .field("namespace", &self.object_namespace())
            .field("name", &self.object_name())
            .field("resource_version", &self.object_resource_version())
            .field("len", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

impl<'de, K: DeserializeOwned + Serialize + MetaObject> Deserialize<'de> for Encoded<K> {
    /// Decodes a `K` and encodes it (the JSON path; protobuf goes through
    /// [`from_protobuf`](Self::from_protobuf) without a `K`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let obj = K::deserialize(deserializer)?;
        Encoded::new(&obj).map_err(serde::de::Error::custom)
    }
}

impl<K: DeserializeOwned + Serialize> Serialize for Encoded<K> {
    /// Decodes the `K` and serializes it.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.decode()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    use super::*;

    const POD: &[u8] = include_bytes!("../../protobuf/tests/data/pod.pb");
    const LIST: &[u8] = include_bytes!("../../protobuf/tests/data/pod-list.pb");

    #[test]
    fn transcoded_list_items_decode_as_the_list_decodes_with_their_metadata_beside() {
        let list = kinformer_protobuf::Object::from_bytes(LIST)
            .and_then(|o| o.list())
            .unwrap();
        let pods: Vec<Pod> = list.items::<Pod>().map(Result::unwrap).collect();
        assert!(!pods.is_empty());
        for (object, pod) in list.objects().zip(&pods) {
            let encoded = Encoded::<Pod>::from_protobuf(&object.unwrap()).unwrap();
            assert_eq!(&encoded.decode().unwrap(), pod);
            let m = &pod.metadata;
            assert_eq!(encoded.object_name(), m.name.as_deref());
            assert_eq!(encoded.object_namespace(), m.namespace.as_deref());
            assert_eq!(
                encoded.object_resource_version(),
                m.resource_version.as_deref()
            );
            assert_eq!(encoded.object_uid(), m.uid.as_deref());
            assert_eq!(encoded.object_labels(), m.labels.as_ref());
            // The same as encoding the decoded pod, as far as a reader can tell.
            let direct = Encoded::new(pod).unwrap();
            assert_eq!(direct.decode().unwrap(), encoded.decode().unwrap());
        }
    }

    #[test]
    fn unset_metadata_reads_as_none_and_empty_strings_as_empty() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("n".into());
        ns.metadata.resource_version = Some(String::new());
        let e = Encoded::new(&ns).unwrap();
        assert_eq!(e.object_name(), Some("n"));
        assert_eq!(e.object_namespace(), None);
        assert_eq!(e.object_resource_version(), Some(""));
        assert_eq!(e.object_uid(), None);
        assert_eq!(e.object_labels(), None);
        assert_eq!(e.decode().unwrap(), ns);
    }

    #[test]
    fn json_goes_through_k_and_another_type_is_refused_on_decode_not_before() {
        let pod: Pod = kinformer_protobuf::from_slice(POD).unwrap();
        let json = serde_json::to_vec(&pod).unwrap();
        let e: Encoded<Pod> = serde_json::from_slice(&json).unwrap();
        assert_eq!(e.decode().unwrap(), pod);
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::to_value(&pod).unwrap()
        );

        // A ConfigMap held as a pod: kept, then refused by Pod when decoded.
        let as_pod = Encoded::<Pod>::from_parts(
            Meta::default(),
            crate::encode_to_vec(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"}))
                .unwrap(),
        );
        assert!(matches!(as_pod.decode(), Err(CodecError::Rejected(_))));
    }

    #[test]
    fn debug_shows_metadata_never_the_bytes() {
        let object = kinformer_protobuf::Object::from_bytes(POD).unwrap();
        let e = Encoded::<Pod>::from_protobuf(&object).unwrap();
        let shown = format!("{e:?}");
        assert!(shown.contains("web-0"), "{shown}");
        assert!(!shown.contains("bytes:"), "{shown}");
    }
}
