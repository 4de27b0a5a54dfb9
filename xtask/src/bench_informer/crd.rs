//! `--crd-only`: custom resources with each program's defaults (JSON; `managedFields` kept,
//! no transform), and client-go and kinformer in CBOR, on a control plane that serves it
//! (`CBORServingAndStorage`, alpha in 1.37).
//!
//! The CRD of KEDA's `ScaledObject` (a structural schema and a status subresource:
//! [`kinformer_testenv::create_scaled_object_crd`]), then for every `--pods` count a
//! namespace of that many scaled objects as a cluster holds them
//! ([`kinformer_testenv::apply_realistic_scaled_objects`]: spec by `helm`, status by
//! `keda-operator`), their bytes on the wire (a list and a streaming list, JSON), and
//! `--runs` rounds of one process per contender, the order rotating each round: client-go's
//! dynamic informer (unstructured), kinformer's default informer over the typed
//! `ScaledObject` and over `DynamicObject`, kube-runtime's reflector over the typed one, and
//! client-go's and kinformer's (both types) asking for CBOR. The table: sync time, CPU
//! time, peak and settled RSS, bytes per cached object, each with its ratio to client-go's
//! default and the targets (bytes per object ≤ 0.5x client-go, sync ≤ 1.0x; in CBOR ≤ 0.2x
//! and ≤ 0.5x).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use kube::Api;
use kube::api::{ApiResource, DynamicObject};

use super::contenders::{Binaries, Contender, Running};
use super::measure::{self, Sample};
use super::report::{num, ratio};
use super::{CREATE_CHUNK, step_failed};
use crate::bench::median;
use crate::progress::Step;

/// One program syncing the custom resource with its defaults.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum CrdContender {
    /// client-go's dynamic informer: `unstructured.Unstructured` objects.
    ClientGo,
    /// kinformer's default informer of the typed `ScaledObject`.
    KinformerTyped,
    /// kinformer's default informer of `DynamicObject`.
    KinformerDynamic,
    /// kube-runtime's `reflector` over `watcher` of the typed `ScaledObject`.
    KubeRuntime,
    /// client-go's dynamic informer asking for CBOR (its alpha gates `ClientsAllowCBOR`
    /// and `ClientsPreferCBOR` on).
    ClientGoCbor,
    /// kinformer's default informer of the typed `ScaledObject`, `WireFormat::Cbor`.
    KinformerTypedCbor,
    /// kinformer's default informer of `DynamicObject`, `WireFormat::Cbor`.
    KinformerDynamicCbor,
}

impl CrdContender {
    /// Every contender, client-go's default first (what the ratios divide by).
    pub(super) const ALL: [Self; 7] = [
        Self::ClientGo,
        Self::KinformerTyped,
        Self::KinformerDynamic,
        Self::KubeRuntime,
        Self::ClientGoCbor,
        Self::KinformerTypedCbor,
        Self::KinformerDynamicCbor,
    ];

    /// The name in progress lines and tables.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::ClientGo => "client-go (dynamic, unstructured)",
            Self::KinformerTyped => "kinformer (typed ScaledObject)",
            Self::KinformerDynamic => "kinformer (DynamicObject)",
            Self::KubeRuntime => "kube-runtime (typed ScaledObject)",
            Self::ClientGoCbor => "client-go (dynamic, CBOR)",
            Self::KinformerTypedCbor => "kinformer (typed, CBOR)",
            Self::KinformerDynamicCbor => "kinformer (DynamicObject, CBOR)",
        }
    }

    /// The short name of one of kinformer's in the targets' verdicts; `None` for the
    /// others (the targets are about kinformer).
    fn verdict_name(self) -> Option<&'static str> {
        match self {
            Self::KinformerTyped => Some("typed"),
            Self::KinformerDynamic => Some("DynamicObject"),
            Self::KinformerTypedCbor => Some("typed CBOR"),
            Self::KinformerDynamicCbor => Some("DynamicObject CBOR"),
            Self::ClientGo | Self::KubeRuntime | Self::ClientGoCbor => None,
        }
    }

    fn cbor(self) -> bool {
        matches!(
            self,
            Self::ClientGoCbor | Self::KinformerTypedCbor | Self::KinformerDynamicCbor
        )
    }

    /// Its process, to sync the `n` objects of `ar` in `ns` and settle.
    fn command(
        self,
        bins: &Binaries,
        kubeconfig: &Path,
        ns: &str,
        n: usize,
        ar: &ApiResource,
    ) -> Command {
        let program = match self {
            Self::ClientGo | Self::ClientGoCbor => Contender::ClientGo,
            Self::KinformerTyped
            | Self::KinformerDynamic
            | Self::KinformerTypedCbor
            | Self::KinformerDynamicCbor => Contender::Kinformer,
            Self::KubeRuntime => Contender::KubeRuntime,
        };
        let mut cmd = Command::new(bins.path(program));
        cmd.arg("--kubeconfig").arg(kubeconfig).args([
            "--namespace",
            ns,
            "--expect",
            &n.to_string(),
            "--resource",
            &format!("{}/{}/{}", ar.group, ar.version, ar.plural),
            "--settle",
        ]);
        // client-go's dynamic informer needs no kind; kube's types carry one.
        if program != Contender::ClientGo {
            cmd.args(["--kind", &ar.kind]);
        }
        if matches!(self, Self::KinformerDynamic | Self::KinformerDynamicCbor) {
            cmd.arg("--dynamic");
        }
        if self.cbor() {
            cmd.args(["--wire", "cbor"]);
        }
        if self == Self::ClientGoCbor {
            // Also set by the peer itself; here too in case a gate is read before it runs.
            cmd.env("KUBE_FEATURE_ClientsAllowCBOR", "true")
                .env("KUBE_FEATURE_ClientsPreferCBOR", "true");
        }
        cmd
    }
}

/// One row of the table at each count.
struct Row {
    /// What it measures, in the table.
    what: &'static str,
    /// The figure of one contender at one count.
    measure: fn(&CrdRuns, usize, CrdContender) -> f64,
    /// Decimals shown.
    precision: usize,
    /// The target: kinformer ÷ client-go at most this in JSON, at most this in CBOR, and
    /// how the table says it.
    target: Option<(f64, f64, &'static str)>,
}

/// The rows, in order.
const ROWS: [Row; 6] = [
    Row {
        what: "sync ms",
        measure: |r, n, c| r.med(n, c, |s| s.spawn_ms),
        precision: 0,
        target: Some((1.0, 0.5, "≤ 1.0x, CBOR ≤ 0.5x")),
    },
    Row {
        what: "CPU ms",
        measure: |r, n, c| r.med(n, c, |s| s.cpu_ms),
        precision: 0,
        target: None,
    },
    Row {
        what: "peak RSS MiB",
        measure: |r, n, c| r.med(n, c, |s| s.rss_kib / 1024.0),
        precision: 1,
        target: None,
    },
    Row {
        what: "RSS 2 s later MiB",
        measure: |r, n, c| r.med(n, c, |s| s.settled_kib / 1024.0),
        precision: 1,
        target: None,
    },
    Row {
        what: "bytes per cached object (peak)",
        measure: |r, n, c| r.per_object(n, c, |s| s.rss_kib),
        precision: 0,
        target: Some((0.5, 0.2, "≤ 0.5x, CBOR ≤ 0.2x")),
    },
    Row {
        what: "bytes per cached object (2 s later)",
        measure: |r, n, c| r.per_object(n, c, |s| s.settled_kib),
        precision: 0,
        target: Some((0.5, 0.2, "≤ 0.5x, CBOR ≤ 0.2x")),
    },
];

/// What the custom resource runs measured.
#[derive(Default)]
pub(super) struct CrdRuns {
    /// Sync samples by object count and contender.
    samples: BTreeMap<(usize, CrdContender), Vec<Sample>>,
    /// Bytes per object on the wire by object count: (list, streaming list) in JSON, then
    /// in CBOR.
    wire: BTreeMap<usize, [(f64, f64); 2]>,
}

/// Creates the CRD and, for every count of `counts`, the objects, their bytes on the wire
/// and `runs` rounds of every contender.
pub(super) fn measure(
    rt: &tokio::runtime::Runtime,
    cp: &kinformer_testenv::ControlPlane,
    bins: &Binaries,
    counts: &[usize],
    runs: usize,
) -> anyhow::Result<CrdRuns> {
    let client = cp.client()?;
    let step = Step::start("creating the ScaledObject CRD (structural schema, status subresource)");
    let ar = rt.block_on(kinformer_testenv::create_scaled_object_crd(&client))?;
    step.finish("served");
    let mut out = CrdRuns::default();
    for &n in counts {
        let ns = rt.block_on(cp.create_namespace(&format!("crd-{n}")))?;
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &ar);
        create_objects(rt, &api, n)?;
        if n > 0 {
            let step = Step::start(format!("bytes on the wire per object ({n} objects)"));
            let [json, cbor] = ["application/json", "application/cbor"].map(|accept| {
                measure::bytes_per_object(rt, &client, api.resource_url(), n, accept)
            });
            let wire = [json?, cbor?];
            step.finish(&format!(
                "list {:.0} / {:.0} B, streaming list {:.0} / {:.0} B (JSON / CBOR)",
                wire[0].0, wire[1].0, wire[0].1, wire[1].1
            ));
            out.wire.insert(n, wire);
        }
        let all = CrdContender::ALL;
        let total = runs * all.len();
        let mut step = Step::start(format!(
            "{n} scaled objects: {total} syncs ({runs} runs x {} contenders)",
            all.len()
        ));
        let mut done = 0;
        for round in 0..runs {
            for k in 0..all.len() {
                let c = all[(round + k) % all.len()];
                step.detail(&format!("{done}/{total}: {}", c.name()));
                let cmd = c.command(bins, cp.kubeconfig(), &ns, n, &ar);
                let sample = Running::start(c.name(), cmd, false)
                    .and_then(|run| measure::settled_sample(run, c.name(), n))
                    .inspect_err(|_| step_failed(&format!("{} syncing {n} objects", c.name())))?;
                out.samples.entry((n, c)).or_default().push(sample);
                done += 1;
            }
        }
        step.finish("done");
    }
    Ok(out)
}

/// Creates `n` realistic scaled objects in chunks, showing progress.
fn create_objects(
    rt: &tokio::runtime::Runtime,
    api: &Api<DynamicObject>,
    n: usize,
) -> anyhow::Result<()> {
    let mut step = Step::start(format!(
        "creating {n} scaled objects (server-side apply of spec and status)"
    ));
    let (mut created, mut chunk) = (0, 0);
    while created < n {
        let size = CREATE_CHUNK.min(n - created);
        rt.block_on(kinformer_testenv::apply_realistic_scaled_objects(
            api,
            &format!("p{chunk}"),
            size,
        ))
        .inspect_err(|_| step_failed("creating scaled objects"))?;
        created += size;
        chunk += 1;
        step.detail(&format!("{created}/{n} created"));
    }
    step.finish("done");
    Ok(())
}

/// "met" or "**missed**" for `ratio ≤ limit`; "–" without a ratio.
fn verdict(ratio: f64, limit: f64) -> &'static str {
    if !ratio.is_finite() {
        "–"
    } else if ratio <= limit {
        "met"
    } else {
        "**missed**"
    }
}

impl CrdRuns {
    /// The median of `f` over the samples of `c` at `n` objects; NaN without samples.
    fn med(&self, n: usize, c: CrdContender, f: fn(&Sample) -> f64) -> f64 {
        self.samples
            .get(&(n, c))
            .map_or(f64::NAN, |v| median(v.iter().map(f).collect()))
    }

    /// Bytes each cached object adds: (median at `n` − median at 0) ÷ `n`, of a KiB figure.
    fn per_object(&self, n: usize, c: CrdContender, f: fn(&Sample) -> f64) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let objects = n as f64;
        (self.med(n, c, f) - self.med(0, c, f)) * 1024.0 / objects
    }

    /// The table of every count > 0 and the bytes on the wire, with the prose that says
    /// what each contender is.
    pub(super) fn tables(&self, counts: &[usize], runs: usize) -> String {
        let mut t = String::new();
        let counts: Vec<usize> = counts.iter().copied().filter(|&n| n > 0).collect();
        if counts.is_empty() {
            return t;
        }
        let _ = writeln!(
            t,
            "Custom resources, each program with its defaults (JSON), and client-go and kinformer asking for \
             CBOR: the API server runs with `CBORServingAndStorage` on (alpha in 1.37, off by default), which \
             serves custom resources in CBOR to a client that asks; managedFields kept, no transform. \
             client-go: `informer-peer --resource`, \
             `dynamicinformer.NewFilteredDynamicSharedInformerFactory` (`NewDynamicSharedInformerFactory` for one \
             namespace: client-go's informer for a resource without generated clients), caching \
             `unstructured.Unstructured`, in JSON (its default) and with its alpha gates `ClientsAllowCBOR` and \
             `ClientsPreferCBOR` on (CBOR); kinformer: `SharedIndexInformer::builder(lw).build()` (its default \
             cache, objects kept encoded) over `KubeListerWatcher` (`WireFormat::Auto`: JSON for custom \
             resources; `WireFormat::Cbor` in the CBOR columns), once over a typed `ScaledObject` \
             (`#[derive(CustomResource)]`, fields as kopium generates them) and once over kube's \
             `DynamicObject`; kube-runtime: `reflector` over `watcher` of \
             the typed `ScaledObject` (JSON: kube-rs has no CBOR). Every ratio is to client-go's default (JSON). \
             Objects as `kinformer_testenv::apply_realistic_scaled_objects` makes them: \
             KEDA `ScaledObject`s (a CRD with a structural schema and a status subresource) whose spec `helm` \
             applied and whose status `keda-operator` applied on the status subresource, so managedFields have \
             two entries (bytes on the wire in the last table). Medians of {runs} runs, one process at a time, \
             the order rotating each round. Sync: from spawn to the synced line; CPU: user + system time of the \
             process up to that line (`getrusage(RUSAGE_SELF)`); peak RSS: `VmHWM` at that line; 2 s later: \
             `VmRSS` two seconds after it; per cached object: (median at N − median at 0 objects) ÷ N.\n"
        );
        let mut header = vec![
            "objects".to_owned(),
            "measure".to_owned(),
            CrdContender::ALL[0].name().to_owned(),
        ];
        for c in &CrdContender::ALL[1..] {
            header.push(c.name().to_owned());
            header.push("÷ client-go".to_owned());
        }
        header.push("target (kinformer ÷ client-go)".to_owned());
        let mut rule = vec!["---:", "---", "---:"];
        rule.extend(std::iter::repeat_n(
            "---:",
            2 * (CrdContender::ALL.len() - 1),
        ));
        rule.push("---");
        let _ = writeln!(t, "| {} |\n| {} |", header.join(" | "), rule.join(" | "));
        for &n in &counts {
            for Row {
                what,
                measure,
                precision,
                target,
            } in ROWS
            {
                let v = CrdContender::ALL.map(|c| measure(self, n, c));
                let go = v[0];
                let mut cells = vec![n.to_string(), what.to_owned(), num(go, precision)];
                for &x in &v[1..] {
                    cells.push(num(x, precision));
                    cells.push(ratio(x, go));
                }
                cells.push(match target {
                    None => "–".to_owned(),
                    Some((limit, cbor_limit, label)) => {
                        let verdicts: Vec<String> = CrdContender::ALL
                            .iter()
                            .zip(v)
                            .filter_map(|(c, x)| {
                                let limit = if c.cbor() { cbor_limit } else { limit };
                                c.verdict_name()
                                    .map(|which| format!("{which} {}", verdict(x / go, limit)))
                            })
                            .collect();
                        format!("{label}: {}", verdicts.join(", "))
                    }
                });
                let _ = writeln!(t, "| {} |", cells.join(" | "));
            }
        }
        if !self.wire.is_empty() {
            let _ = writeln!(
                t,
                "\nBytes on the wire per object, uncompressed (`Accept-Encoding: identity`): one list of every \
                 object, and a streaming list (`sendInitialEvents`, what the informers sync with) up to its \
                 end bookmark, each byte count divided by the objects.\n\n\
                 | objects | list, JSON | list, CBOR | streaming list, JSON | streaming list, CBOR |\n\
                 | ---: | ---: | ---: | ---: | ---: |"
            );
            for (n, [json, cbor]) in &self.wire {
                let _ = writeln!(
                    t,
                    "| {n} | {:.0} | {:.0} | {:.0} | {:.0} |",
                    json.0, cbor.0, json.1, cbor.1
                );
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of known samples, cell by cell.
    #[test]
    fn the_table_has_each_measure_its_ratios_and_verdicts() {
        let mut runs = CrdRuns::default();
        for n in [0, 1000] {
            for (c, ms, kib) in [
                (CrdContender::ClientGo, 100.0, 10_240.0),
                (CrdContender::KinformerTyped, 50.0, 5_120.0),
                (CrdContender::KinformerDynamic, 80.0, 6_144.0),
                (CrdContender::KubeRuntime, 120.0, 20_480.0),
                (CrdContender::ClientGoCbor, 90.0, 10_240.0),
                (CrdContender::KinformerTypedCbor, 30.0, 5_120.0),
                (CrdContender::KinformerDynamicCbor, 40.0, 6_144.0),
            ] {
                #[allow(clippy::cast_precision_loss)]
                let sample = |k: f64| Sample {
                    spawn_ms: ms + n as f64,
                    rss_kib: if n == 0 { kib } else { kib + k },
                    cpu_ms: 2.0 * ms,
                    settled_kib: if n == 0 { kib } else { kib + k / 2.0 },
                };
                // Per object at 1000: client-go 10,000 bytes (peak), kinformer typed 4,000,
                // DynamicObject 6,000, kube-runtime 20,000; the median of three samples.
                let k = match c {
                    CrdContender::ClientGo | CrdContender::ClientGoCbor => 10_000.0,
                    CrdContender::KinformerTyped => 4_000.0,
                    CrdContender::KinformerDynamic => 6_000.0,
                    CrdContender::KubeRuntime => 20_000.0,
                    CrdContender::KinformerTypedCbor => 1_500.0,
                    CrdContender::KinformerDynamicCbor => 2_500.0,
                } * 1000.0
                    / 1024.0;
                runs.samples
                    .insert((n, c), vec![sample(k), sample(k + 1.0), sample(k - 1.0)]);
            }
        }
        runs.wire.insert(1000, [(2812.4, 2850.6), (2012.0, 2040.4)]);
        let t = runs.tables(&[0, 1000], 3);
        for row in [
            "| 1000 | sync ms | 1100 | 1050 | 0.95x | 1080 | 0.98x | 1120 | 1.02x | 1090 | 0.99x | 1030 | 0.94x | 1040 | 0.95x | ≤ 1.0x, CBOR ≤ 0.5x: typed met, DynamicObject met, typed CBOR **missed**, DynamicObject CBOR **missed** |",
            "| 1000 | CPU ms | 200 | 100 | 0.50x | 160 | 0.80x | 240 | 1.20x | 180 | 0.90x | 60 | 0.30x | 80 | 0.40x | – |",
            "| 1000 | bytes per cached object (peak) | 10000 | 4000 | 0.40x | 6000 | 0.60x | 20000 | 2.00x | 10000 | 1.00x | 1500 | 0.15x | 2500 | 0.25x | ≤ 0.5x, CBOR ≤ 0.2x: typed met, DynamicObject **missed**, typed CBOR met, DynamicObject CBOR **missed** |",
            "| 1000 | 2812 | 2012 | 2851 | 2040 |",
        ] {
            assert!(t.lines().any(|line| line == row), "no row {row:?} in\n{t}");
        }
        assert!(!t.contains("| 0 |"), "{t}");
        crate::bench_informer::report::assert_tables_rectangular(&t);
    }

    #[test]
    fn without_a_count_at_zero_there_is_no_per_object_verdict() {
        let mut runs = CrdRuns::default();
        for c in CrdContender::ALL {
            runs.samples.insert(
                (10, c),
                vec![Sample {
                    spawn_ms: 1.0,
                    rss_kib: 1.0,
                    cpu_ms: 1.0,
                    settled_kib: 1.0,
                }],
            );
        }
        let t = runs.tables(&[10], 1);
        assert!(
            t.lines().any(|l| l
                == "| 10 | bytes per cached object (peak) | – | – | – | – | – | – | – | – | – | – | – | – | – | ≤ 0.5x, CBOR ≤ 0.2x: typed –, DynamicObject –, typed CBOR –, DynamicObject CBOR – |"),
            "{t}"
        );
    }

    #[test]
    fn each_contender_runs_its_program_with_the_resource() {
        let ar = kinformer_testenv::scaled_object_resource();
        let bins = Binaries::for_tests();
        let args = |c: CrdContender| {
            let cmd = c.command(&bins, Path::new("/k"), "ns", 7, &ar);
            (
                cmd.get_program().to_string_lossy().into_owned(),
                cmd.get_args()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        };
        let common = "--kubeconfig /k --namespace ns --expect 7 --resource keda.sh/v1alpha1/scaledobjects --settle";
        assert_eq!(
            args(CrdContender::ClientGo),
            ("go".to_owned(), common.to_owned())
        );
        assert_eq!(
            args(CrdContender::KinformerTyped),
            ("kin".to_owned(), format!("{common} --kind ScaledObject"))
        );
        assert_eq!(
            args(CrdContender::KinformerDynamic),
            (
                "kin".to_owned(),
                format!("{common} --kind ScaledObject --dynamic")
            )
        );
        assert_eq!(
            args(CrdContender::KubeRuntime),
            ("kr".to_owned(), format!("{common} --kind ScaledObject"))
        );
        assert_eq!(
            args(CrdContender::ClientGoCbor),
            ("go".to_owned(), format!("{common} --wire cbor"))
        );
        assert_eq!(
            args(CrdContender::KinformerDynamicCbor),
            (
                "kin".to_owned(),
                format!("{common} --kind ScaledObject --dynamic --wire cbor")
            )
        );
    }
}
