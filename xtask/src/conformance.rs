//! `cargo xtask conformance`: replay operation traces on kinformer and on client-go (the
//! peer in `xtask/go/cmd/clientgo-peer`) and fail on any difference.
//!
//! The trace format is documented in `xtask/traces/README.md`. Hand-written traces live
//! under `xtask/traces/<kind>/`; on top of them every run generates random traces from
//! fixed seeds, so a run is reproducible. A generated trace that diverges is copied to
//! `xtask/traces/failed/` so it can be kept as a regression case.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::progress::Step;

mod fifo;
mod selector;
mod store;
mod workqueue;

/// Makes the random trace of a seed.
type Generator = fn(u64) -> String;

/// Every trace kind with its generator: hand-written traces of a kind live in
/// `xtask/traces/<kind>/`, and each run adds [`GENERATED_PER_KIND`] generated ones.
///
/// FIFO traces come as two kinds of 200 generated traces each: `fifo` (client-go's
/// DeltaFIFO; every hand-written FIFO trace, whichever FIFO it names, lives in
/// `xtask/traces/fifo/`) and `fifo_real` (RealFIFO per object, batched, or atomic).
const KINDS: [(&str, Generator); 5] = [
    ("workqueue", workqueue::generate),
    ("store", store::generate),
    ("selector", selector::generate),
    ("fifo", fifo::generate_delta),
    ("fifo_real", fifo::generate_real),
];

/// How many random traces each run generates per trace kind.
pub(crate) const GENERATED_PER_KIND: u64 = 200;

/// One observation line, as both sides print it: canonical JSON with sorted keys.
pub(crate) type Observations = Vec<String>;

/// Builds an observation line from key/value pairs, keys sorted as Go's encoding/json
/// sorts map keys.
pub(crate) fn observation(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> String {
    let map: BTreeMap<&str, Value> = pairs.into_iter().collect();
    serde_json::to_string(&map).unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
}

/// A small deterministic generator (SplitMix64), so that seeds give the same traces on
/// every machine and every Rust release.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Picks one of `items`.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Replays one trace file on kinformer.
fn replay_rust(path: &Path) -> anyhow::Result<Observations> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Value =
        serde_json::from_str(lines.next().unwrap_or("{}")).context("parsing the header")?;
    let ops: Vec<Value> = lines
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("parsing an op")?;
    match header["trace"].as_str() {
        Some("workqueue") => workqueue::replay(&header, &ops),
        Some("store") => store::replay(&header, &ops),
        Some("selector") => selector::replay(&header, &ops),
        Some("fifo") => fifo::replay(&header, &ops),
        other => bail!("unknown trace kind {other:?}"),
    }
}

/// Replays trace files on client-go, returning each file's observations.
fn replay_go(peer: &Path, files: &[PathBuf]) -> anyhow::Result<BTreeMap<PathBuf, Observations>> {
    let mut all = BTreeMap::new();
    // A few hundred paths per call keeps the command line short.
    for chunk in files.chunks(200) {
        let out = Command::new(peer)
            .arg("replay")
            .args(chunk)
            .output()
            .context("running clientgo-peer")?;
        if !out.status.success() {
            bail!(
                "clientgo-peer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut current: Option<PathBuf> = None;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(path) = line.strip_prefix("# ") {
                current = Some(PathBuf::from(path));
                all.insert(PathBuf::from(path), Vec::new());
            } else if let Some(p) = &current {
                all.entry(p.clone())
                    .or_insert_with(Vec::new)
                    .push(line.to_owned());
            }
        }
    }
    Ok(all)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs every hand-written and generated trace on both sides and diffs them.
pub(crate) fn run() -> anyhow::Result<()> {
    let peer = crate::controlplane::CLIENTGO_PEER;
    crate::controlplane::build(&[peer], false)?;
    let peer = peer.path();
    let traces = crate::workspace_root().join("xtask").join("traces");
    let generated_dir = tempfile_dir()?;
    let mut files = Vec::new();
    // Each file's kind and each kind's number of hand-written traces, for the summary.
    let mut kind_of = BTreeMap::new();
    let mut hand_written = BTreeMap::new();
    for (kind, generate) in KINDS {
        let mut kind_files = Vec::new();
        collect(&traces.join(kind), &mut kind_files)?;
        kind_files.sort();
        hand_written.insert(kind, kind_files.len());
        for seed in 1..=GENERATED_PER_KIND {
            let path = generated_dir.join(format!("{kind}-seed-{seed:03}.jsonl"));
            fs::write(&path, generate(seed))
                .with_context(|| format!("writing {}", path.display()))?;
            kind_files.push(path);
        }
        for file in &kind_files {
            kind_of.insert(file.clone(), kind);
        }
        files.extend(kind_files);
    }

    let mut step = Step::start(format!(
        "replaying {} traces on client-go and kinformer",
        files.len()
    ));
    let go = replay_go(&peer, &files)?;
    let mut failures = Vec::new();
    for (i, file) in files.iter().enumerate() {
        step.detail(&format!("{}/{}", i + 1, files.len()));
        let rust = replay_rust(file)
            .unwrap_or_else(|e| vec![observation([("error", Value::from(format!("{e:#}")))])]);
        let want = go.get(file).cloned().unwrap_or_default();
        if rust != want {
            failures.push((file.clone(), want, rust));
        }
    }
    step.finish(&format!("{} differences", failures.len()));
    for (file, want, got) in &failures {
        eprintln!("\nDIFFERENCE in {}", file.display());
        for (i, line) in want.iter().enumerate() {
            if got.get(i) != Some(line) {
                eprintln!(
                    "  first difference at observation {}:\n    client-go: {line}\n    kinformer: {}",
                    i + 1,
                    got.get(i).map_or("(none)", String::as_str)
                );
                break;
            }
        }
        if got.len() > want.len() {
            eprintln!("  kinformer observed more: {}", got[want.len()]);
        }
        if file.starts_with(&generated_dir) {
            let keep = traces.join("failed");
            fs::create_dir_all(&keep)?;
            if let Some(name) = file.file_name() {
                fs::copy(file, keep.join(name))?;
                eprintln!("  kept as {}", keep.join(name).display());
            }
        }
    }
    let _ = fs::remove_dir_all(&generated_dir);
    let per_kind: Vec<String> = KINDS
        .iter()
        .map(|(kind, _)| {
            let differ = failures
                .iter()
                .filter(|(f, _, _)| kind_of.get(f) == Some(kind))
                .count();
            format!(
                "{kind}: {} hand-written + {GENERATED_PER_KIND} generated, {differ} differences",
                hand_written.get(kind).copied().unwrap_or_default()
            )
        })
        .collect();
    eprintln!(
        "conformance: {}; {} differences in all",
        per_kind.join("; "),
        failures.len()
    );
    if !failures.is_empty() {
        bail!("{} traces differ from client-go", failures.len());
    }
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kinformer-traces-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
