//! Shared by the integration tests: the Go-made corpus (built once, cached under the
//! target dir) and the comparison of protobuf and JSON decodes.

#![allow(dead_code, unreachable_pub)] // each test binary uses a part

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// One record of the corpus.
pub struct Record {
    pub api_version: String,
    pub kind: String,
    pub seed: String,
    pub protobuf: Vec<u8>,
    pub json: Vec<u8>,
}

fn go_dir() -> PathBuf {
    manifest_dir().join("../../xtask/go")
}

/// This crate's dir: `cargo test` sets it when it runs the test, which is right even when
/// the binary was built from another clone sharing the target dir (the compiled-in one,
/// the fallback, would be that clone's).
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from)
}

/// 64-bit FNV-1a, stable across Rust releases.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The randomized corpus: `go run ./cmd/proto-corpus -n PER_TYPE -seed SEED`, run only
/// when the Go program, go.mod, go.sum or the Go toolchain changed (the output is cached
/// under the target dir, keyed by all of them).
pub fn corpus(per_type: usize, seed: u64) -> Vec<Record> {
    let dir = go_dir();
    let version = Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("Go is needed to build the corpus (`go version` failed)");
    let mut inputs: Vec<Vec<u8>> = vec![
        version.stdout,
        format!("{per_type}/{seed}").into_bytes(),
        std::fs::read(dir.join("go.mod")).expect("go.mod"),
        std::fs::read(dir.join("go.sum")).expect("go.sum"),
    ];
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir.join("cmd/proto-corpus"))
        .expect("xtask/go/cmd/proto-corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "go"))
        .collect();
    sources.sort();
    for s in &sources {
        inputs.push(std::fs::read(s).expect("Go source"));
    }
    let parts: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proto-corpus");
    let path = cache.join(format!("{:016x}.bin", fnv(&parts)));
    if !path.is_file() {
        std::fs::create_dir_all(&cache).expect("cache dir");
        let tmp = cache.join(format!(".{}.tmp", std::process::id()));
        let status = Command::new("go")
            .args(["run", "./cmd/proto-corpus", "-n"])
            .arg(per_type.to_string())
            .arg("-seed")
            .arg(seed.to_string())
            .arg("-out")
            .arg(&tmp)
            .current_dir(&dir)
            .env("CGO_ENABLED", "0")
            .env("GOTOOLCHAIN", "local")
            .status()
            .expect("running go run ./cmd/proto-corpus");
        assert!(status.success(), "proto-corpus failed: {status}");
        std::fs::rename(&tmp, &path).expect("moving the corpus into the cache");
    }
    parse(&std::fs::read(&path).expect("reading the corpus"))
}

fn parse(mut b: &[u8]) -> Vec<Record> {
    fn next(b: &mut &[u8]) -> Vec<u8> {
        let (len, rest) = b.split_first_chunk::<4>().expect("record length");
        let len = u32::from_be_bytes(*len) as usize;
        let (field, rest) = rest.split_at(len);
        *b = rest;
        field.to_vec()
    }
    let text = |b: &mut &[u8]| String::from_utf8(next(b)).expect("UTF-8");
    let mut out = Vec::new();
    while !b.is_empty() {
        out.push(Record {
            api_version: text(&mut b),
            kind: text(&mut b),
            seed: text(&mut b),
            protobuf: next(&mut b),
            json: next(&mut b),
        });
    }
    out
}

/// JSON with the `null`s of absent Go values removed: protobuf does not carry a nil slice,
/// map or pointer, so the protobuf side leaves the key out where JSON writes `null`.
pub fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        v => v,
    }
}

/// JSON without the apiVersion and kind of embedded objects (a nested object with its own
/// `metadata`, such as a StatefulSet's `volumeClaimTemplates`): the API server's JSON may
/// carry them, protobuf never does (it writes the type of the top-level object only, in its
/// envelope), so Go clients reading protobuf do not see them either. Top-level objects and
/// list items keep theirs.
pub fn without_embedded_type_meta(v: Value) -> Value {
    fn strip(v: Value, depth: usize) -> Value {
        match v {
            Value::Object(m) => {
                let embedded = depth > 1 && m.contains_key("metadata");
                Value::Object(
                    m.into_iter()
                        .filter(|(k, _)| !(embedded && (k == "apiVersion" || k == "kind")))
                        .map(|(k, v)| (k, strip(v, depth + 1)))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|v| strip(v, depth)).collect()),
            v => v,
        }
    }
    strip(v, 0)
}

/// The first place two JSON values differ, as a JSON pointer.
pub fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => {
                        if let Some(d) = first_difference(p, q, &format!("{at}/{k}")) {
                            return Some(d);
                        }
                    }
                    (p, q) => {
                        return Some(format!(
                            "{at}/{k}: {} vs {}",
                            p.map_or("absent", |_| "present"),
                            q.map_or("absent", |_| "present")
                        ));
                    }
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}
