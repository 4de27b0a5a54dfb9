//! `--reads`: the read workload a contender runs on its synced cache, on one thread, the
//! same steps as the Go peer's (`xtask/go/cmd/informer-peer`, `reads.go`):
//!
//! 1. every pod got by name through the namespaced lister, three passes over all names
//!    (listed once before timing, sorted, then shuffled by [`shuffle`]: the same order on
//!    both sides); ns per get of pass 1 and of pass 3;
//! 2. one hot key (the first name of that order) got [`HOT_GETS`] times: ns per get;
//! 3. the namespace listed by the label selector [`SELECTOR`] (every realistic pod carries
//!    it) through the namespaced lister, [`REPEATS`] times: the median ms per list;
//! 4. the index [`BY_NODE`] asked for each of the [`NODES`] nodes
//!    (`kinformer_testenv::apply_realistic_pods` puts pod `i` of a chunk on
//!    `node-{i % 64}`), [`REPEATS`] sweeps: the median ms per sweep of 64;
//! 5. the CPU time (user + system, `getrusage`) of steps 1–4 and the peak RSS (`VmHWM`)
//!    once they are done.
//!
//! Every step reads one field of every object it gets, `spec.nodeName`, and sums its
//! length into a checksum (black-boxed), the same on both sides when they read the same
//! pods. The result line is `{"reads": {"get_pass1_ns", "get_pass3_ns", "hot_get_ns",
//! "selector_list_ms", "index_sweep_ms", "cpu_ms", "rss_kib", "checksum", "handled_ms"}}`,
//! where `handled_ms` is the time from the start of `main` to the moment the add handler
//! had handled every pod of the first list (the reads start then).
//!
//! The workload is generic over [`PodReads`], what it asks of a cache: kinformer's
//! contender implements it over its informer's lister and indexer; another cache (typed
//! views over an encoded store) implements it the same way.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{cpu_ms, emit, peak_rss_kib};

/// Passes over all names by name (step 1).
pub const PASSES: usize = 3;
/// Gets of the hot key (step 2).
pub const HOT_GETS: usize = 100_000;
/// Lists by selector (step 3) and sweeps of the index (step 4); their median is reported.
pub const REPEATS: usize = 5;
/// The nodes the realistic pods are on: `node-0` to `node-63`.
pub const NODES: usize = 64;
/// The label selector of step 3: every realistic pod carries `app=web`.
pub const SELECTOR: &str = "app=web";
/// The name of the extra index, by `spec.nodeName`.
pub const BY_NODE: &str = "byNode";
/// The seed of [`shuffle`]'s xorshift64 (the Go peer's too).
pub const SHUFFLE_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// What the read workload does on a cache; each method reads `spec.nodeName`'s length of
/// every object it gets and returns the sum.
pub trait PodReads {
    /// The names of the cached pods of `namespace`, in any order (listed once, untimed).
    fn names(&self, namespace: &str) -> Vec<String>;
    /// The pod `name` of `namespace`, through the namespaced lister (0 when it is missing).
    fn get(&self, namespace: &str, name: &str) -> usize;
    /// The pods of `namespace` that [`SELECTOR`] matches, through the namespaced lister.
    fn list_all(&self, namespace: &str) -> usize;
    /// The pods the [`BY_NODE`] index lists under `node`.
    fn by_node(&self, node: &str) -> usize;
}

/// `names` sorted, then shuffled (Fisher–Yates, from the last element down, over xorshift64
/// seeded with [`SHUFFLE_SEED`]): the Go peer's order too.
pub fn shuffle(names: &mut [String]) {
    names.sort_unstable();
    let mut x = SHUFFLE_SEED;
    for i in (1..names.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bound = u64::try_from(i + 1).unwrap_or(u64::MAX);
        let j = usize::try_from(x % bound).unwrap_or_default();
        names.swap(i, j);
    }
}

/// What the workload measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reads {
    /// ns per get, first pass over every name.
    pub get_pass1_ns: f64,
    /// ns per get, third pass.
    pub get_pass3_ns: f64,
    /// ns per get of the hot key.
    pub hot_get_ns: f64,
    /// Median ms per list by selector.
    pub selector_list_ms: f64,
    /// Median ms per sweep of the 64 nodes through the index.
    pub index_sweep_ms: f64,
    /// User + system CPU ms of the whole workload.
    pub cpu_ms: f64,
    /// `VmHWM` once the workload is done.
    pub rss_kib: u64,
    /// Every `spec.nodeName` length read, summed.
    pub checksum: u64,
}

fn ns_per(elapsed: std::time::Duration, count: usize) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let per = elapsed.as_secs_f64() * 1e9 / count.max(1) as f64;
    per
}

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the workload on this thread over the pods of `namespace` in `cache`.
///
/// # Errors
/// When the cache holds no pod of `namespace`, or a pass reads less than the pass before
/// (a pod it could not get).
pub fn run(cache: &impl PodReads, namespace: &str) -> anyhow::Result<Reads> {
    let mut names = cache.names(namespace);
    if names.is_empty() {
        bail!("no pods in {namespace} to read");
    }
    shuffle(&mut names);
    let nodes: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let cpu_before = cpu_ms().context("getrusage")?;
    let mut checksum = 0u64;
    let mut add = |sum: usize| checksum += u64::try_from(black_box(sum)).unwrap_or(u64::MAX);

    // 1. Every name, three passes.
    let mut pass_ns = Vec::with_capacity(PASSES);
    let mut pass_sums = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let started = Instant::now();
        let mut sum = 0;
        for name in &names {
            sum += cache.get(namespace, black_box(name));
        }
        pass_ns.push(ns_per(started.elapsed(), names.len()));
        pass_sums.push(sum);
        add(sum);
    }
    if pass_sums.iter().any(|&s| s != pass_sums[0]) || pass_sums[0] == 0 {
        bail!("the passes by name read {pass_sums:?} bytes of node names: a pod went missing");
    }

    // 2. The hot key.
    let hot = &names[0];
    let started = Instant::now();
    let mut sum = 0;
    for _ in 0..HOT_GETS {
        sum += cache.get(namespace, black_box(hot));
    }
    let hot_get_ns = ns_per(started.elapsed(), HOT_GETS);
    add(sum);

    // 3. By selector.
    let mut lists = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let started = Instant::now();
        let sum = cache.list_all(black_box(namespace));
        lists.push(started.elapsed().as_secs_f64() * 1e3);
        add(sum);
    }

    // 4. The index, every node.
    let mut sweeps = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let started = Instant::now();
        let mut sum = 0;
        for node in &nodes {
            sum += cache.by_node(black_box(node));
        }
        sweeps.push(started.elapsed().as_secs_f64() * 1e3);
        add(sum);
    }

    let cpu_ms = cpu_ms().context("getrusage")? - cpu_before;
    Ok(Reads {
        get_pass1_ns: pass_ns[0],
        get_pass3_ns: pass_ns[PASSES - 1],
        hot_get_ns,
        selector_list_ms: median_ms(lists),
        index_sweep_ms: median_ms(sweeps),
        cpu_ms,
        rss_kib: peak_rss_kib().unwrap_or_default(),
        checksum: black_box(checksum),
    })
}

/// Prints the result line, with `handled_ms` (start of `main` to the last initial add
/// handled).
pub fn print(reads: &Reads, handled_ms: f64) {
    let Reads {
        get_pass1_ns,
        get_pass3_ns,
        hot_get_ns,
        selector_list_ms,
        index_sweep_ms,
        cpu_ms,
        rss_kib,
        checksum,
    } = *reads;
    emit(
        &serde_json::json!({ "reads": {
            "get_pass1_ns": get_pass1_ns,
            "get_pass3_ns": get_pass3_ns,
            "hot_get_ns": hot_get_ns,
            "selector_list_ms": selector_list_ms,
            "index_sweep_ms": index_sweep_ms,
            "cpu_ms": cpu_ms,
            "rss_kib": rss_kib,
            "checksum": checksum,
            "handled_ms": handled_ms,
        }})
        .to_string(),
    );
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The Go peer's test (`reads_test.go`) pins the same order.
    #[test]
    fn the_shuffle_is_fixed_and_sorts_first() {
        let mut a: Vec<String> = (0..10).map(|i| format!("p0-{i}")).collect();
        let mut b = a.clone();
        b.reverse();
        shuffle(&mut a);
        shuffle(&mut b);
        assert_eq!(a, b);
        assert_eq!(
            a.join(","),
            "p0-5,p0-1,p0-4,p0-7,p0-8,p0-2,p0-3,p0-6,p0-0,p0-9"
        );
    }

    /// Pods `p-0`..`p-{n}` on `node-{i % 64}`.
    struct Fake(BTreeMap<String, String>);

    impl PodReads for Fake {
        fn names(&self, _: &str) -> Vec<String> {
            self.0.keys().cloned().collect()
        }
        fn get(&self, _: &str, name: &str) -> usize {
            self.0.get(name).map_or(0, String::len)
        }
        fn list_all(&self, _: &str) -> usize {
            self.0.values().map(String::len).sum()
        }
        fn by_node(&self, node: &str) -> usize {
            self.0
                .values()
                .filter(|n| *n == node)
                .map(String::len)
                .sum()
        }
    }

    #[test]
    fn the_checksum_counts_every_read() {
        let pods: BTreeMap<String, String> = (0..100)
            .map(|i| (format!("p-{i}"), format!("node-{}", i % 64)))
            .collect();
        let all: usize = pods.values().map(String::len).sum();
        let hot = {
            let mut names: Vec<String> = pods.keys().cloned().collect();
            shuffle(&mut names);
            pods[&names[0]].len()
        };
        let r = run(&Fake(pods), "ns").unwrap();
        let want = PASSES * all + HOT_GETS * hot + REPEATS * all + REPEATS * all;
        assert_eq!(r.checksum, u64::try_from(want).unwrap());
        assert!(r.get_pass1_ns > 0.0 && r.index_sweep_ms >= 0.0 && r.cpu_ms >= 0.0);
        assert!(run(&Fake(BTreeMap::new()), "ns").is_err());
    }
}
