//! Robustness: arbitrary bytes, and truncations, bit flips and splices of real bodies and
//! frames (written by Go's encoders), never make the decoder panic or allocate what a
//! length prefix announces; every input gives a value or a typed error, and no error
//! message carries a byte of the body.
//!
//! The heap of this test binary is capped ([`HEAP_LIMIT`]): a decoder that reserved memory
//! for a hostile length would abort the run.

use std::sync::Once;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kinformer_protobuf::{Error, FrameDecoder, MAGIC, Object, WatchEvent};
use proptest::prelude::*;
use serde_json::Value;

#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// Far above what decoding these small inputs needs, far below the 4 GiB lengths the
/// hostile inputs announce.
const HEAP_LIMIT: usize = 512 * 1024 * 1024;

fn cap_heap() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        ALLOCATOR.set_limit(HEAP_LIMIT).expect("below the limit");
    });
}

const POD: &[u8] = include_bytes!("data/pod.pb");
const LIST: &[u8] = include_bytes!("data/pod-list.pb");
const WATCH: &[u8] = include_bytes!("data/watch-stream.pb");

/// A value of the body that must never appear in an error message.
const CANARY: &str = "CANARY-s3cr3t-value";

/// A Secret whose data holds the canary, in protobuf.
fn secret_body() -> Vec<u8> {
    let secret_msg = msg(&[
        field(1, &msg(&[field(1, b"creds"), field(3, b"default")])), // metadata
        field(
            2,
            &msg(&[field(1, CANARY.as_bytes()), field(2, CANARY.as_bytes())]),
        ), // data entry
        field(3, CANARY.as_bytes()),                                 // type
    ]);
    envelope("v1", "Secret", &secret_msg)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field.
fn field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(number) << 3 | 2, &mut out);
    varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn msg(fields: &[Vec<u8>]) -> Vec<u8> {
    fields.concat()
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = msg(&[field(1, api_version.as_bytes()), field(2, kind.as_bytes())]);
    let mut out = MAGIC.to_vec();
    out.extend(msg(&[field(1, &type_meta), field(2, raw)]));
    out
}

/// The frames of the watch fixture.
fn watch_frames() -> Vec<Vec<u8>> {
    let mut d = FrameDecoder::new();
    d.push(WATCH);
    let mut out = Vec::new();
    while let Some(f) = d.next_frame().expect("fixture frames") {
        out.push(f.to_vec());
    }
    out
}

fn check_error(e: &Error) {
    let msg = e.to_string();
    assert!(!msg.contains(CANARY), "an error carries the body: {msg}");
    assert!(!msg.contains("CANARY"), "an error carries the body: {msg}");
}

fn ok_or_typed<T>(r: Result<T, Error>) {
    if let Err(e) = r {
        check_error(&e);
    }
}

/// Everything a caller can do with a body: decode it as an object into several targets,
/// as a list item by item, and as a watch frame.
fn decode_everything(body: &[u8]) {
    if let Ok(object) = Object::from_bytes(body) {
        let _ = object.is_known();
        ok_or_typed(object.deserialize::<Value>());
        ok_or_typed(object.deserialize::<Pod>());
        ok_or_typed(object.deserialize::<Secret>());
        ok_or_typed(object.deserialize::<kube::core::PartialObjectMeta<Pod>>());
        ok_or_typed(object.deserialize::<kube::core::Status>());
        transcode_everything(object);
        match object.list() {
            Ok(list) => {
                let _ = list.meta();
                for item in list.items::<Value>() {
                    ok_or_typed(item);
                }
                for item in list.items::<Pod>() {
                    ok_or_typed(item);
                }
                for object in list.objects() {
                    match object {
                        Ok(object) => transcode_everything(object),
                        Err(e) => check_error(&e),
                    }
                }
            }
            Err(e) => check_error(&e),
        }
    } else if let Err(e) = Object::from_bytes(body) {
        check_error(&e);
    }
    match WatchEvent::from_frame(body) {
        Ok(ev) => {
            let _ = ev.event_type();
            ok_or_typed(ev.object().deserialize::<Value>());
            ok_or_typed(ev.object().deserialize::<Pod>());
        }
        Err(e) => check_error(&e),
    }
}

/// The object transcoded into JSON and into the compact store's encoding: the same answer
/// as decoding it into a JSON value (the same value, or an error in both), and a typed
/// error that stays silent about the body.
fn transcode_everything(object: Object<'_>) {
    let transcoder = match object.transcoder() {
        Ok(t) => t,
        Err(e) => return check_error(&e),
    };
    let json = serde_json::to_vec(&transcoder);
    let compact = kinformer_compact_store::encode_to_vec(&transcoder);
    let decoded = object.deserialize::<Value>();
    match (json, &decoded) {
        (Ok(json), Ok(value)) => {
            let transcoded: Value = serde_json::from_slice(&json)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json)));
            assert_eq!(&transcoded, value, "transcoded and decoded differ");
            assert!(
                compact.is_ok(),
                "transcodes into JSON but not into the cache's encoding"
            );
        }
        (Err(_), Err(_)) => check_error(&transcoder.into_error()),
        (Ok(_), Err(e)) => panic!("transcodes, but does not decode: {e}"),
        (Err(_), Ok(_)) => panic!(
            "decodes, but does not transcode: {}",
            transcoder.into_error()
        ),
    }
}

/// A real body under a mutation.
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        bit: u8,
    },
    Set {
        at: usize,
        byte: u8,
    },
    Truncate {
        at: usize,
    },
    Remove {
        at: usize,
        len: usize,
    },
    Duplicate {
        at: usize,
        len: usize,
    },
    /// A huge length prefix written over a byte.
    HugeLength {
        at: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<prop::sample::Index>();
    prop_oneof![
        4 => (at.clone(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at: at.index(usize::MAX), bit }),
        2 => (at.clone(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at: at.index(usize::MAX), byte }),
        1 => at.clone().prop_map(|at| Mutation::Truncate { at: at.index(usize::MAX) }),
        1 => (at.clone(), 1usize..64).prop_map(|(at, len)| Mutation::Remove { at: at.index(usize::MAX), len }),
        1 => (at.clone(), 1usize..64).prop_map(|(at, len)| Mutation::Duplicate { at: at.index(usize::MAX), len }),
        1 => at.prop_map(|at| Mutation::HugeLength { at: at.index(usize::MAX) }),
    ]
}

fn apply(body: &mut Vec<u8>, m: &Mutation) {
    if body.is_empty() {
        return;
    }
    let n = body.len();
    match *m {
        Mutation::Flip { at, bit } => body[at % n] ^= 1 << bit,
        Mutation::Set { at, byte } => body[at % n] = byte,
        Mutation::Truncate { at } => body.truncate(at % n),
        Mutation::Remove { at, len } => {
            let start = at % n;
            body.drain(start..(start + len).min(n));
        }
        Mutation::Duplicate { at, len } => {
            let start = at % n;
            let piece = body[start..(start + len).min(n)].to_vec();
            body.splice(start..start, piece);
        }
        Mutation::HugeLength { at } => {
            let start = at % n;
            body.splice(start..(start + 1).min(n), [0xff, 0xff, 0xff, 0xff, 0x0f]);
        }
    }
}

fn real_bodies() -> Vec<Vec<u8>> {
    let mut out = vec![POD.to_vec(), LIST.to_vec(), secret_body()];
    out.extend(watch_frames());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Real bodies and frames, mutated one to four times.
    #[test]
    fn mutated_real_bodies_decode_or_fail_typed(
        which in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        cap_heap();
        let bodies = real_bodies();
        let mut body = which.get(&bodies).clone();
        for m in &mutations {
            apply(&mut body, m);
        }
        decode_everything(&body);
    }

    /// Arbitrary bytes: bare, after the magic, and as the object of an envelope of a known
    /// kind (so that they reach the schema-driven deserializer).
    #[test]
    fn arbitrary_bytes_decode_or_fail_typed(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        kind in prop::sample::select(vec![
            ("v1", "Pod"), ("v1", "PodList"), ("v1", "Secret"), ("v1", "ConfigMap"),
            ("v1", "Status"), ("apps/v1", "Deployment"), ("meta.k8s.io/v1", "PartialObjectMetadataList"),
            ("events.k8s.io/v1", "Event"), ("v1", "Node"),
        ]),
    ) {
        cap_heap();
        decode_everything(&bytes);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&bytes);
        decode_everything(&with_magic);
        decode_everything(&envelope(kind.0, kind.1, &bytes));
    }

    /// A watch stream cut anywhere and fed in arbitrary chunks: the whole frames come out,
    /// then `finish` reports the cut, or the stream ended between frames.
    #[test]
    fn a_watch_stream_cut_anywhere_reports_the_cut(
        cut in 0..=WATCH.len(),
        chunk in 1usize..300,
    ) {
        cap_heap();
        let stream = &WATCH[..cut];
        let mut d = FrameDecoder::new();
        let mut frames = 0;
        for c in stream.chunks(chunk) {
            d.push(c);
            while let Some(f) = d.next_frame().expect("the fixture's frames are small") {
                WatchEvent::from_frame(f).expect("a whole frame decodes");
                frames += 1;
            }
        }
        let boundaries = frame_ends();
        match d.finish() {
            Ok(()) => prop_assert!(boundaries.contains(&cut)),
            Err(Error::CutMidFrame { have, .. }) => {
                prop_assert!(!boundaries.contains(&cut));
                prop_assert_eq!(have, cut - boundaries[frames]);
            }
            Err(e) => prop_assert!(false, "unexpected {}", e),
        }
    }
}

/// Offsets in the watch fixture where a frame ends (and 0).
fn frame_ends() -> Vec<usize> {
    let mut ends = vec![0];
    let mut at = 0;
    while at + 4 <= WATCH.len() {
        let len = u32::from_be_bytes([WATCH[at], WATCH[at + 1], WATCH[at + 2], WATCH[at + 3]]);
        at += 4 + len as usize;
        ends.push(at);
    }
    ends
}

#[test]
fn every_truncation_of_a_real_body_decodes_or_fails_typed() {
    cap_heap();
    for body in real_bodies() {
        for cut in 0..body.len() {
            decode_everything(&body[..cut]);
        }
    }
}

#[test]
fn hostile_length_prefixes_are_refused_without_allocating_them() {
    cap_heap();
    // A frame that announces 4 GiB.
    let mut d = FrameDecoder::new();
    d.push(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
    assert!(matches!(
        d.next_frame(),
        Err(Error::FrameTooLarge {
            len: 4_294_967_295,
            ..
        })
    ));
    // Fields that announce lengths far past the end: in the envelope, in the object, in a
    // nested message, in a repeated field, in a map entry.
    let huge = [0xff, 0xff, 0xff, 0xff, 0x0f];
    let mut bodies = Vec::new();
    let mut envelope_huge = MAGIC.to_vec();
    envelope_huge.push(0x12); // raw, bytes
    envelope_huge.extend(huge);
    bodies.push(envelope_huge);
    for raw in [
        [vec![0x0a], huge.to_vec()].concat(),             // metadata
        [vec![0x12, 0x05, 0x22], huge.to_vec()].concat(), // spec.containers
        field(1, &[vec![0x5a], huge.to_vec()].concat()),  // metadata.labels entry
        [vec![0x0a, 0x03, 0x0a, 0x01], huge.to_vec()].concat(),
    ] {
        bodies.push(envelope("v1", "Pod", &raw));
        bodies.push(envelope("v1", "PodList", &raw));
    }
    let before = ALLOCATOR.allocated();
    for body in &bodies {
        let r: Result<Value, _> = kinformer_protobuf::from_slice(body);
        assert!(
            matches!(r, Err(Error::Malformed { .. })),
            "a length past the end is malformed: {r:?}"
        );
        decode_everything(body);
    }
    assert!(
        ALLOCATOR.allocated() < before + 1024 * 1024,
        "nothing of the announced sizes stays allocated"
    );
}

#[test]
fn the_canary_secret_decodes_and_errors_about_it_stay_silent() {
    cap_heap();
    let body = secret_body();
    let s: Secret = kinformer_protobuf::from_slice(&body).expect("decodes");
    let data = s.data.unwrap_or_default();
    assert_eq!(
        data.get(CANARY).map(|b| b.0.as_slice()),
        Some(CANARY.as_bytes())
    );
    // A target that refuses the canary's value.
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Wrong {
        #[serde(rename = "type")]
        ty: u32,
    }
    let e = kinformer_protobuf::from_slice::<Wrong>(&body).expect_err("a string is no u32");
    check_error(&e);
    assert_eq!(
        e.to_string(),
        "cannot decode Secret.type into the target type: invalid type: string, expected u32"
    );
}
