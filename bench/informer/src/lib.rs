//! What the two Rust contenders of `cargo xtask bench informer` share: their command line,
//! the peak RSS, the wall clock and the event-latency record.
//!
//! Each contender (and the Go peer, `xtask/go/cmd/informer-peer`) is started by the
//! driver as
//!
//! ```text
//! <contender> --kubeconfig PATH --namespace NS --expect N [--wire protobuf|json] [--compression gzip|none] [--strip [--modify]] [--latency M]
//!              [--store default|decoded] [--project] [--relist] [--settle [--trim]]
//! <contender> --kubeconfig PATH --namespace NS --expect N [--wire protobuf|json] --reads
//! <contender> --kubeconfig PATH --namespace NS --expect N --resource GROUP/VERSION/PLURAL --kind KIND [--dynamic]
//!              [--latency M] [--relist] [--settle]
//! ```
//!
//! `--resource` (with `--kind`) syncs that custom resource instead of pods, in JSON (the
//! only format the API server serves custom resources in), each program with its defaults
//! and no transform: as the typed struct [`ScaledObject`] (`#[derive(CustomResource)]`,
//! the only custom resource the contenders are built with: KEDA's, as
//! `kinformer_testenv::apply_realistic_scaled_objects` makes them), or with `--dynamic`
//! (kinformer only) as kube's `DynamicObject`. The Go peer takes the same `--resource`
//! and syncs it with client-go's dynamic informer.
//!
//! `--wire` is the encoding kinformer and client-go ask the API server for: `protobuf`
//! (the default of both for built-in types) or `json`; kube-runtime speaks JSON only and
//! refuses `--wire protobuf`. It syncs the pods of `NS` and prints one JSON line:
//! `{"contender", "wire", "transform", "synced_ms", "rss_kib", "rss_now_kib", "cpu_ms",
//! "objects"}` (kinformer's adds `transform_clones`: pods its transform could not strip in
//! place), where `synced_ms` is measured from the start of `main`, `rss_kib` is `VmHWM`
//! from `/proc/self/status` read right after the sync, and `cpu_ms` the user + system CPU
//! time of the whole process up to that moment (`getrusage(RUSAGE_SELF)`, all threads;
//! the Go peer's is the same call). With `--latency M` it then records, for every update whose
//! new pod carries the label [`SEQ_LABEL`] `= i` (`i < M`), the wall-clock time its
//! handler saw it, and prints `{"seen": [[i, unix_ns], ...]}` once it has seen all `M`
//! or a few seconds after its stdin closed (the driver closes it after the last patch).
//! `rss_now_kib` is `VmRSS` at the same moment as `rss_kib`.
//!
//! The memory rows add three flags (kinformer's contender and the Go peer; the store is
//! kinformer's only): `--store` picks kinformer's cache, `default` (no option: what a
//! factory's informer keeps, `Cached` pods read in place) or `decoded` (decoded pods,
//! client-go's cache: a factory's `decoded_informer`);
//! `--project` caches a projection of a pod ([`PodView`]: metadata without
//! `managedFields`, node name, containers' names and images, phase; client-go: a transform
//! that clears every other field); `--relist` measures a relist: a second after the sync
//! the contender resets its peak RSS (`5` into `/proc/self/clear_refs`) and prints
//! `{"steady_rss_kib"}` (`VmRSS`); the driver then cuts its connection, patches a pod with
//! the label [`RELIST_LABEL`], compacts etcd (on an API server without watch cache, so the
//! re-watch gets `410 Gone`) and reconnects it; once its handler saw that update and a
//! second passed, the contender prints `{"relist_hwm_kib", "after_rss_kib"}`.
//!
//! The allocator rows: `kinformer-contender-mimalloc` is kinformer's contender with
//! mimalloc as the global allocator. `--settle` (every contender): two seconds after the
//! result line (the handlers have had the initial adds by then), the contender prints
//! `{"settled_rss_kib"}` (`VmRSS`); with `--trim` (the Rust contenders) it calls glibc's
//! `malloc_trim(0)` first.
//!
//! `--reads` (kinformer's contender and the Go peer, pods only, each side's defaults
//! otherwise: no `--strip`, `--modify`, `--project`, `--resource`, `--latency`, `--relist`
//! or `--settle`; kinformer's `--store decoded` reads its decoded informer instead of the
//! default cache): the informer gets one more index, `byNode`
//! (`spec.nodeName`), and one add handler that reads a typed pod's `spec.nodeName`; after
//! the result line, once that handler has handled every initial add, the contender runs
//! the read workload of [`reads`] on one thread and prints its `{"reads": {...}}` line.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;

pub mod reads;
mod scaled_object;

pub use scaled_object::{
    Advanced, AuthenticationRef, Condition, GroupVersionKindResource, HpaBehavior, HpaConfig,
    ScaleTargetRef, ScaleTrigger, ScaledObject, ScaledObjectSpec, ScaledObjectStatus,
    ScalingPolicy, ScalingRules,
};

/// The label the driver's patch loop sets to the patch's sequence number.
pub const SEQ_LABEL: &str = "kinformer-bench/seq";

/// The label the driver sets on a pod while a `--relist` contender is cut off.
pub const RELIST_LABEL: &str = "kinformer-bench/relist";

/// How long a `--relist` contender waits for its relist.
const RELIST_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a contender waits for missing updates after its stdin closed.
const GRACE: Duration = Duration::from_secs(5);

/// The encoding a contender asks the API server for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`).
    Protobuf,
    /// JSON.
    Json,
    /// CBOR (`application/cbor`; the API server serves it behind `CBORServingAndStorage`).
    Cbor,
}

impl Wire {
    /// The name on the command line and in the result line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Protobuf => "protobuf",
            Self::Json => "json",
            Self::Cbor => "cbor",
        }
    }
}

/// kinformer's cache (`--store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Store {
    /// No option: the informer's default, `Cached` pods read in place.
    #[default]
    Default,
    /// Decoded pods, client-go's cache (a factory's `decoded_informer`).
    Decoded,
}

/// The command line every contender takes.
#[derive(Debug, Clone)]
pub struct Args {
    /// The kubeconfig of the control plane.
    pub kubeconfig: PathBuf,
    /// The namespace whose pods to sync.
    pub namespace: String,
    /// How many pods the namespace holds (checked after the sync).
    pub expect: usize,
    /// Strip `managedFields` from every pod before caching it.
    pub strip: bool,
    /// kinformer only: strip while decoding (`KubeListerWatcher::modify`) instead of with
    /// the informer's transform.
    pub modify: bool,
    /// How many labelled updates to wait for after the sync (0: exit after syncing).
    pub latency: usize,
    /// The encoding to ask for (`None`: the contender's default).
    pub wire: Option<Wire>,
    /// kinformer only: its cache.
    pub store: Store,
    /// Cache a [`PodView`] (client-go: clear every field it does not have).
    pub project: bool,
    /// Measure a relist after the sync (see the crate docs).
    pub relist: bool,
    /// kinformer only: glibc's `malloc_trim(0)` before the settled line.
    pub trim: bool,
    /// Two seconds after the result line, print `{"settled_rss_kib"}` (`VmRSS`).
    pub settle: bool,
    /// Sync this custom resource instead of pods (`--resource` and `--kind`).
    pub resource: Option<CustomResource>,
    /// kinformer only: the custom resource as `DynamicObject` rather than [`ScaledObject`].
    pub dynamic: bool,
    /// After the sync, run the read workload of [`reads`] (pods, each side's defaults).
    pub reads: bool,
    /// Whether to ask for gzip (`--compression gzip|none`; `None`: the contender's
    /// default). kinformer and client-go only.
    pub gzip: Option<bool>,
    /// kinformer only: keep the cache on disk here and start from it (`--snapshot-dir`);
    /// after the settled line, write it and print `{"snapshot_bytes", "snapshot_write_ms",
    /// "snapshot_objects"}`.
    pub snapshot_dir: Option<PathBuf>,
    /// kinformer only: with `--snapshot-dir`, hand handlers only what changed since the
    /// snapshot (`--snapshot-start changes`) rather than every object as an add (`adds`,
    /// the default).
    pub snapshot_changes_only: bool,
}

/// A custom resource to sync (`--resource GROUP/VERSION/PLURAL --kind KIND`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomResource {
    /// The API group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The plural: the resource's name in URLs.
    pub plural: String,
    /// The kind its objects carry.
    pub kind: String,
}

impl CustomResource {
    /// `group/version/plural` and `kind`.
    ///
    /// # Errors
    /// When `resource` does not have three parts, or its version, plural or `kind` is
    /// empty (the group may be: the core group's name is empty).
    pub fn parse(resource: &str, kind: &str) -> anyhow::Result<Self> {
        let parts: Vec<&str> = resource.split('/').collect();
        let [group, version, plural] = parts[..] else {
            bail!("--resource {resource:?}: want group/version/plural");
        };
        if [version, plural, kind].iter().any(|p| p.is_empty()) {
            bail!("--resource {resource:?} --kind {kind:?}: version, plural and kind must be set");
        }
        Ok(Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            kind: kind.to_owned(),
        })
    }

    /// kube's description of the resource, for `DynamicObject`.
    pub fn api_resource(&self) -> kube::api::ApiResource {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(&self.group, &self.version, &self.kind),
            &self.plural,
        )
    }

    /// Fails unless this is [`ScaledObject`]'s resource, the one typed custom resource the
    /// contenders know.
    ///
    /// # Errors
    /// When it is another resource.
    pub fn check_typed(&self) -> anyhow::Result<()> {
        use kube::Resource as _;
        let ours = Self {
            group: ScaledObject::group(&()).into_owned(),
            version: ScaledObject::version(&()).into_owned(),
            plural: ScaledObject::plural(&()).into_owned(),
            kind: ScaledObject::kind(&()).into_owned(),
        };
        if *self != ours {
            bail!(
                "the typed contenders know {}/{}/{} ({}) only, not {}/{}/{} ({}); use --dynamic",
                ours.group,
                ours.version,
                ours.plural,
                ours.kind,
                self.group,
                self.version,
                self.plural,
                self.kind
            );
        }
        Ok(())
    }
}

impl Args {
    /// Parses `std::env::args`.
    ///
    /// # Errors
    /// On an unknown flag, a missing value or a missing required flag.
    pub fn parse() -> anyhow::Result<Self> {
        Self::parse_from(std::env::args().skip(1))
    }

    /// Parses `args` (the arguments without the program's name).
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_from(args: impl IntoIterator<Item = String>) -> anyhow::Result<Self> {
        let mut kubeconfig = None;
        let mut namespace = None;
        let mut expect = None;
        let mut strip = false;
        let mut modify = false;
        let mut latency = 0;
        let mut wire = None;
        let mut store = Store::Default;
        let (mut project, mut relist, mut trim, mut settle) = (false, false, false, false);
        let (mut resource, mut kind, mut dynamic) = (None, None, false);
        let mut reads = false;
        let mut gzip = None;
        let (mut snapshot_dir, mut snapshot_changes_only) = (None, false);
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
                "--namespace" => namespace = Some(value()?),
                "--expect" => expect = Some(value()?.parse().context("--expect")?),
                "--latency" => latency = value()?.parse().context("--latency")?,
                "--wire" => {
                    wire = Some(match value()?.as_str() {
                        "protobuf" => Wire::Protobuf,
                        "json" => Wire::Json,
                        "cbor" => Wire::Cbor,
                        other => bail!("--wire {other:?}: want protobuf, json or cbor"),
                    });
                }
                "--store" => {
                    store = match value()?.as_str() {
                        "default" => Store::Default,
                        "decoded" => Store::Decoded,
                        other => bail!("--store {other:?}: want default or decoded"),
                    };
                }
                "--project" => project = true,
                "--relist" => relist = true,
                "--trim" => trim = true,
                "--settle" => settle = true,
                "--strip" => strip = true,
                "--modify" => modify = true,
                "--resource" => resource = Some(value()?),
                "--kind" => kind = Some(value()?),
                "--dynamic" => dynamic = true,
                "--reads" => reads = true,
                "--compression" => {
                    gzip = Some(match value()?.as_str() {
                        "gzip" => true,
                        "none" => false,
                        other => bail!("--compression {other:?}: want gzip or none"),
                    });
                }
                "--snapshot-dir" => snapshot_dir = Some(PathBuf::from(value()?)),
                "--snapshot-start" => {
                    snapshot_changes_only = match value()?.as_str() {
                        "adds" => false,
                        "changes" => true,
                        other => bail!("--snapshot-start {other:?}: want adds or changes"),
                    };
                }
                other => bail!(
                    "unknown flag {other:?}; usage: --kubeconfig PATH --namespace NS --expect N [--wire protobuf|json] [--compression gzip|none] [--strip [--modify]] [--latency M] [--store default|decoded] [--project] [--relist] [--trim] [--settle] [--resource GROUP/VERSION/PLURAL --kind KIND [--dynamic]] [--reads] [--snapshot-dir DIR [--snapshot-start adds|changes]]"
                ),
            }
        }
        let resource = match (resource, kind) {
            (Some(r), Some(k)) => Some(CustomResource::parse(&r, &k)?),
            (None, None) => None,
            _ => bail!("--resource and --kind go together"),
        };
        if resource.is_some()
            && (strip
                || modify
                || project
                || store != Store::Default
                || wire == Some(Wire::Protobuf))
        {
            bail!(
                "--resource syncs with each program's defaults in JSON (or --wire cbor): no --strip, --modify, --project, --store or --wire protobuf"
            );
        }
        if dynamic && resource.is_none() {
            bail!("--dynamic needs --resource");
        }
        if reads
            && (strip
                || modify
                || project
                || resource.is_some()
                || latency > 0
                || relist
                || settle
                || trim)
        {
            bail!(
                "--reads reads a pod informer's cache with its defaults: no --strip, --modify, --project, --resource, --latency, --relist, --settle or --trim"
            );
        }
        Ok(Self {
            kubeconfig: kubeconfig.context("--kubeconfig is required")?,
            namespace: namespace.context("--namespace is required")?,
            expect: expect.context("--expect is required")?,
            strip,
            modify,
            latency,
            wire,
            store,
            project,
            relist,
            trim,
            settle,
            resource,
            dynamic,
            reads,
            gzip,
            snapshot_dir,
            snapshot_changes_only,
        })
    }
}

/// The kube config of the kubeconfig's current context.
///
/// # Errors
/// When the file cannot be read or its context is unusable.
pub async fn kube_config(args: &Args) -> anyhow::Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    Ok(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?)
}

/// The process's peak resident set (`VmHWM`) in KiB, if `/proc` has it.
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM:")
}

/// The process's resident set now (`VmRSS`) in KiB, if `/proc` has it.
pub fn rss_now_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

/// User + system CPU time of the whole process so far (all its threads, those that
/// exited included), in milliseconds: `getrusage(RUSAGE_SELF)`, as the Go peer reads it.
#[cfg(unix)]
pub fn cpu_ms() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // The bench's second unsafe call: `getrusage` writes one `rusage` through a pointer to
    // a live, writable, properly aligned `rusage`, and has no other preconditions.
    #[allow(unsafe_code)]
    // SAFETY: see above.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `getrusage` succeeded, so it filled the struct (which was zeroed anyway, and
    // all-zero bytes are a valid `rusage`).
    #[allow(unsafe_code)]
    let usage = unsafe { usage.assume_init() };
    #[allow(clippy::cast_precision_loss)]
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    Some(ms(usage.ru_utime) + ms(usage.ru_stime))
}

/// No `getrusage` here.
#[cfg(not(unix))]
pub fn cpu_ms() -> Option<f64> {
    None
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What a pod controller typically reads of a pod: the `--project` contenders' type. The
/// fields it does not name are skipped while decoding, JSON or protobuf.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, kube::Resource)]
#[resource(inherit = Pod)]
pub struct PodView {
    /// Name, namespace, labels, owners, resource version (`managedFields` stripped).
    pub metadata: kube::api::ObjectMeta,
    /// Node and containers.
    pub spec: Option<PodViewSpec>,
    /// Phase.
    pub status: Option<PodViewStatus>,
}

/// [`PodView`]'s spec.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodViewSpec {
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// Each container's name and image.
    #[serde(default)]
    pub containers: Vec<ContainerView>,
}

/// A container's name and image.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct ContainerView {
    /// `name`.
    pub name: String,
    /// `image`.
    pub image: Option<String>,
}

/// [`PodView`]'s status.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct PodViewStatus {
    /// `status.phase`.
    pub phase: Option<String>,
}

/// The `--relist` measurement (see the crate docs): call after the sync line, with the
/// flag the handler sets once it saw an update carrying [`RELIST_LABEL`].
///
/// # Errors
/// When the relist does not show up within two minutes.
pub async fn measure_relist(relisted: &AtomicBool) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Linux: resets VmHWM to the current RSS for this process.
    std::fs::write("/proc/self/clear_refs", "5").context("resetting the peak RSS")?;
    emit(&serde_json::json!({ "steady_rss_kib": rss_now_kib() }).to_string());
    let start = Instant::now();
    while !relisted.load(Ordering::SeqCst) {
        if start.elapsed() > RELIST_TIMEOUT {
            bail!("no update labelled {RELIST_LABEL} within {RELIST_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    emit(
        &serde_json::json!({ "relist_hwm_kib": peak_rss_kib(), "after_rss_kib": rss_now_kib() })
            .to_string(),
    );
    Ok(())
}

/// glibc's `malloc_trim(0)`: gives the heap's free pages back to the system (the top of
/// each arena and whole free pages inside them).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn malloc_trim() {
    // For the allocator rows only: `malloc_trim` takes a plain
    // integer, has no preconditions and is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    // SAFETY: see above; the return value only says whether memory was released.
    let _released = unsafe { libc::malloc_trim(0) };
}

/// Nothing to trim without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn malloc_trim() {}

/// With `--settle`: waits two seconds, trims with `--trim`, prints `{"settled_rss_kib"}`.
pub async fn settle(args: &Args) {
    if !args.settle {
        return;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    if args.trim {
        malloc_trim();
    }
    emit(&serde_json::json!({ "settled_rss_kib": rss_now_kib() }).to_string());
}

/// Whether `obj` carries [`RELIST_LABEL`].
pub fn has_relist_label<K: kinformer_core::MetaObject>(obj: &K) -> bool {
    obj.object_labels()
        .is_some_and(|l| l.contains_key(RELIST_LABEL))
}

/// Nanoseconds since the Unix epoch: a clock every process on the machine shares.
pub fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Prints the sync result line, with `extra` fields a contender adds.
pub fn print_synced(
    contender: &str,
    args: &Args,
    start: Instant,
    objects: usize,
    extra: &[(&str, serde_json::Value)],
) {
    let mut line = serde_json::json!({
        "contender": contender,
        "wire": args.wire.map(Wire::as_str),
        "transform": args.strip,
        "synced_ms": start.elapsed().as_secs_f64() * 1e3,
        "rss_kib": peak_rss_kib(),
        "rss_now_kib": rss_now_kib(),
        "cpu_ms": cpu_ms(),
        "objects": objects,
    });
    for (k, v) in extra {
        line[*k] = v.clone();
    }
    emit(&line.to_string());
}

/// Prints one more JSON line of results.
pub fn print_json(value: &serde_json::Value) {
    emit(&value.to_string());
}

#[allow(clippy::print_stdout)]
fn emit(line: &str) {
    println!("{line}");
}

/// When each labelled update reached a handler: the first sighting per sequence number.
#[derive(Debug)]
pub struct Latency {
    want: usize,
    seen: Mutex<HashMap<u64, u64>>,
    stdin_closed: Arc<AtomicBool>,
}

impl Latency {
    /// A record waiting for sequence numbers `0..want`; watches stdin for EOF when
    /// `want > 0`.
    pub fn new(want: usize) -> Arc<Self> {
        let stdin_closed = Arc::new(AtomicBool::new(false));
        if want > 0 {
            let closed = Arc::clone(&stdin_closed);
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut sink);
                closed.store(true, Ordering::SeqCst);
            });
        }
        Arc::new(Self {
            want,
            seen: Mutex::new(HashMap::with_capacity(want)),
            stdin_closed,
        })
    }

    /// Records the time now if `pod` carries a sequence label not seen before. Call it
    /// from the handler.
    pub fn saw<K: kinformer_core::MetaObject>(&self, obj: &K) {
        if self.want == 0 {
            return;
        }
        let Some(seq) = obj
            .object_labels()
            .and_then(|l| l.get(SEQ_LABEL))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return;
        };
        let now = unix_nanos();
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(seq)
            .or_insert(now);
    }

    fn count(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Waits until every sequence number was seen, or 5 s after stdin closed, and
    /// prints the `seen` line.
    pub async fn wait_and_print(&self) {
        if self.want == 0 {
            return;
        }
        let mut closed_at = None;
        while self.count() < self.want {
            if closed_at.is_none() && self.stdin_closed.load(Ordering::SeqCst) {
                closed_at = Some(Instant::now());
            }
            if closed_at.is_some_and(|t| t.elapsed() > GRACE) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut seen: Vec<(u64, u64)> = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        seen.sort_unstable();
        emit(&serde_json::json!({ "seen": seen }).to_string());
    }
}

/// Polls `synced` every millisecond (the same period for every contender).
pub async fn wait_for(synced: impl Fn() -> bool) {
    while !synced() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Fails unless the cache holds the objects the namespace holds.
///
/// # Errors
/// When `objects != args.expect`.
pub fn check_count(args: &Args, objects: usize) -> anyhow::Result<()> {
    if objects != args.expect {
        bail!(
            "synced {objects} objects, expected {} in {}",
            args.expect,
            args.namespace
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> anyhow::Result<Args> {
        Args::parse_from(
            format!("--kubeconfig k --namespace ns --expect 3 {args}")
                .split_whitespace()
                .map(str::to_owned),
        )
    }

    #[test]
    fn a_custom_resource_takes_its_resource_and_kind_and_nothing_but_the_defaults() {
        let a = parse("--resource keda.sh/v1alpha1/scaledobjects --kind ScaledObject --settle")
            .unwrap();
        let r = a.resource.as_ref().unwrap();
        assert_eq!(
            (&*r.group, &*r.version, &*r.plural, &*r.kind),
            ("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject")
        );
        assert!(a.settle && !a.dynamic && a.expect == 3);
        r.check_typed().unwrap();
        let ar = r.api_resource();
        assert_eq!(
            (&*ar.api_version, &*ar.plural),
            ("keda.sh/v1alpha1", "scaledobjects")
        );
        let d = parse("--resource g.io/v1/things --kind Thing --dynamic").unwrap();
        assert!(d.dynamic);
        assert!(d.resource.unwrap().check_typed().is_err());

        for wrong in [
            "--resource keda.sh/v1alpha1/scaledobjects",
            "--kind ScaledObject",
            "--dynamic",
            "--resource keda.sh/scaledobjects --kind ScaledObject",
            "--resource keda.sh/v1alpha1/ --kind ScaledObject",
            "--resource keda.sh/v1alpha1/scaledobjects --kind ScaledObject --strip",
            "--resource keda.sh/v1alpha1/scaledobjects --kind ScaledObject --store decoded",
            "--resource keda.sh/v1alpha1/scaledobjects --kind ScaledObject --wire protobuf",
        ] {
            assert!(parse(wrong).is_err(), "{wrong}");
        }
        // The core group has no name: `/v1/pods` is three parts.
        assert!(parse("--resource /v1/pods --kind Pod").is_ok());
        assert!(parse("").unwrap().resource.is_none());
    }

    #[test]
    fn reads_take_a_pod_informer_with_its_defaults_and_either_store() {
        let a = parse("--reads").unwrap();
        assert!(a.reads && a.store == Store::Default && !a.strip);
        assert_eq!(
            parse("--reads --store decoded").unwrap().store,
            Store::Decoded
        );
        assert!(parse("--reads --wire protobuf").unwrap().reads);
        assert!(!parse("").unwrap().reads);
        for wrong in [
            "--reads --strip",
            "--reads --strip --modify",
            "--reads --project",
            "--reads --latency 5",
            "--reads --relist",
            "--reads --settle",
            "--reads --resource keda.sh/v1alpha1/scaledobjects --kind ScaledObject",
        ] {
            assert!(parse(wrong).is_err(), "{wrong}");
        }
    }
}
