//! `cargo xtask record`: a real list/watch stream recorded to a file in kinformer-replay's
//! format, for tests that replay it (`Recording::load`, `Replay`).
//!
//! The default informer (`Cached<K>`) runs over `Recorder::to_file(KubeListerWatcher::new(api)
//! .cached(), ..)` for `--seconds`, on a fresh local control plane (etcd and kube-apiserver
//! from `target/controlplane/bin`, built first if needed) with `--churn N` writes (creates,
//! label and annotation updates, deletes) spread over the recording in a namespace of its
//! own; or, with `--kubeconfig`, on the cluster `kube::Config::infer()` finds (every namespace
//! unless `--namespace`; writes only when `--churn` asks, and then only with `--namespace`).
//! Secrets' values are redacted unless `--keep-secrets`.
//!
//! The churn model ([`Churn`], [`apply`]) is shared with `cargo xtask bench replay`.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kinformer::compact_store::Cached;
use kinformer::informer::SharedIndexInformer;
use kinformer::reflector::{KubeListerWatcher, reflector_client};
use kinformer_replay::{RecordOptions, Recorder, Recording};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

use crate::controlplane;
use crate::progress::Step;

/// Writes of a churn on the local control plane when `--churn` is not given.
const DEFAULT_CHURN: usize = 200;
/// The most objects one churn writer keeps at once (then it updates or deletes).
const MAX_LIVE: usize = 250;

/// `cargo xtask record`'s options.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// What to record.
    #[arg(long, value_enum, default_value_t = Resource::Pods)]
    resource: Resource,
    /// The namespace (default: a new one on the local control plane; every namespace with
    /// `--kubeconfig`).
    #[arg(long, short)]
    namespace: Option<String>,
    /// How long to record.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The file to write (default: `<resource>.jsonl` in the current directory).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Record the cluster `kube::Config::infer()` finds (KUBECONFIG, ~/.kube/config, or the
    /// pod's service account) instead of starting the local control plane.
    #[arg(long)]
    kubeconfig: bool,
    /// Keep Secrets' values (only for recordings that never leave the machine).
    #[arg(long)]
    keep_secrets: bool,
    /// Writes (creates, updates, deletes) spread over the recording, in the namespace
    /// (default: 200 on the local control plane, none with `--kubeconfig`).
    #[arg(long)]
    churn: Option<usize>,
}

/// The resources `record` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Resource {
    Pods,
    Configmaps,
    Secrets,
}

impl Resource {
    fn name(self) -> &'static str {
        match self {
            Self::Pods => "pods",
            Self::Configmaps => "configmaps",
            Self::Secrets => "secrets",
        }
    }
}

/// Records what `opts` asks for.
pub(crate) fn run(opts: &Opts) -> anyhow::Result<()> {
    let churn = opts
        .churn
        .unwrap_or(if opts.kubeconfig { 0 } else { DEFAULT_CHURN });
    anyhow::ensure!(
        !(opts.kubeconfig && churn > 0 && opts.namespace.is_none()),
        "--churn on a cluster of your own writes objects: name their namespace with --namespace"
    );
    anyhow::ensure!(opts.seconds > 0, "--seconds must be at least 1");
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.jsonl", opts.resource.name())));
    if !opts.kubeconfig {
        controlplane::build(&controlplane::CONTROL_PLANE, false)?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // The control plane lives until the recording has stopped.
        let (_cp, config, namespace) = if opts.kubeconfig {
            let config = kube::Config::infer()
                .await
                .context("kube::Config::infer found no cluster")?;
            (None, config, opts.namespace.clone())
        } else {
            let step = Step::start("starting etcd and kube-apiserver");
            let cp = kinformer_testenv::ControlPlane::start().await?;
            step.finish("ready");
            let ns = match &opts.namespace {
                Some(ns) => {
                    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cp.client()?);
                    let object = serde_json::from_value(serde_json::json!({
                        "metadata": { "name": ns }
                    }))?;
                    ns_api.create(&PostParams::default(), &object).await?;
                    ns.clone()
                }
                None => cp.create_namespace("record").await?,
            };
            let config = cp.admin_config();
            (Some(cp), config, Some(ns))
        };
        let target = Target {
            config,
            namespace,
            churn,
        };
        match opts.resource {
            Resource::Pods => record(&target, opts, &out, kinformer_testenv::pod).await,
            Resource::Configmaps => record(&target, opts, &out, config_map).await,
            Resource::Secrets => record(&target, opts, &out, secret).await,
        }
    })?;
    let recording = Recording::load(&out)
        .with_context(|| format!("reading the recording back from {}", out.display()))?;
    let path = std::fs::canonicalize(&out).unwrap_or(out);
    println!(
        "recorded {}: {} calls, {} events ({:.1} KB) in {}",
        recording.header.resource,
        recording.calls.len(),
        recording.event_count(),
        std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / 1024.0,
        path.display(),
    );
    Ok(())
}

/// Where to record: the cluster, the namespace (`None`: all) and how many writes to make.
struct Target {
    config: kube::Config,
    namespace: Option<String>,
    churn: usize,
}

impl Target {
    fn api<K>(&self, client: kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

/// Runs the default informer of `K` over a recorder for `opts.seconds`, with the churn.
async fn record<K>(
    target: &Target,
    opts: &Opts,
    out: &Path,
    make: fn(&str) -> K,
) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    let what = match &target.namespace {
        Some(ns) => format!("{} in {ns}", opts.resource.name()),
        None => format!("{} in every namespace", opts.resource.name()),
    };
    let mut options = RecordOptions::new(what.clone());
    if opts.keep_secrets {
        options = options.keep_secrets();
    }
    let lw = KubeListerWatcher::new(target.api::<K>(reflector_client(target.config.clone())?));
    let recorder = Recorder::to_file(lw.cached(), out, options)
        .with_context(|| format!("creating {}", out.display()))?;
    let tape = recorder.tape();
    let informer = SharedIndexInformer::<Cached<K>>::builder(recorder)
        .name(opts.resource.name())
        .build();
    let mut step = Step::start(format!("recording {what} for {} s", opts.seconds));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(opts.seconds);
    let running = informer.start()?;

    let mut writes = 0;
    if target.churn > 0 {
        let api = target.api::<K>(kube::Client::try_from(target.config.clone())?);
        let every = Duration::from_secs(opts.seconds) / u32::try_from(target.churn + 1)?;
        let mut churn = Churn::new("rec", fastrand::u64(..));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        while writes < target.churn && Instant::now() < deadline {
            tick.tick().await;
            apply(&api, &churn.next(true), make).await?;
            writes += 1;
            step.detail(&format!(
                "{writes}/{} writes, {} objects cached",
                target.churn,
                informer.stats().objects
            ));
        }
    }
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        step.detail(&format!(
            "{writes} writes, {} objects cached",
            informer.stats().objects
        ));
    }
    running.stop().await?;
    step.finish(&format!("stopped ({writes} writes)"));
    if let Some(error) = tape.error() {
        anyhow::bail!("the recording is incomplete: {error}");
    }
    Ok(())
}

/// A ConfigMap `record` creates.
fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: named(name),
        data: Some([("key".to_string(), "value".to_string())].into()),
        ..Default::default()
    }
}

/// A Secret `record` creates (its value is redacted in the recording by default).
fn secret(name: &str) -> Secret {
    Secret {
        metadata: named(name),
        string_data: Some([("password".to_string(), "not-a-secret".to_string())].into()),
        ..Default::default()
    }
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// One write of a [`Churn`].
#[derive(Clone, Debug)]
pub(crate) enum Write {
    /// Create the object of this name.
    Create(String),
    /// Set its label (`n` even) or annotation (`n` odd) `churn` to `n`.
    Update(String, u64),
    /// Delete it (grace period 0).
    Delete(String),
}

/// One writer's churn over objects of its own, `<prefix>-<i>`: half of its writes update a
/// label or an annotation, a quarter create, a quarter delete; a create when it has none, no
/// create when it has [`MAX_LIVE`]. Each write is one watch event, but a pod's delete two
/// (`MODIFIED` with its `deletionTimestamp`, then `DELETED`): in events of pods, 40 % updates,
/// 20 % creates, 40 % of deletes.
pub(crate) struct Churn {
    prefix: String,
    live: Vec<String>,
    created: usize,
    writes: u64,
    rng: fastrand::Rng,
}

impl Churn {
    pub(crate) fn new(prefix: impl Into<String>, seed: u64) -> Self {
        Self {
            prefix: prefix.into(),
            live: Vec::new(),
            created: 0,
            writes: 0,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The next write (an update where it would delete, unless `may_delete`).
    pub(crate) fn next(&mut self, may_delete: bool) -> Write {
        self.writes += 1;
        let roll = self.rng.u8(0..100);
        let full = self.live.len() >= MAX_LIVE;
        if self.live.is_empty() || (roll < 25 && !full) {
            let name = format!("{}-{}", self.prefix, self.created);
            self.created += 1;
            self.live.push(name.clone());
            return Write::Create(name);
        }
        let i = self.rng.usize(..self.live.len());
        if roll < 50 && may_delete {
            Write::Delete(self.live.swap_remove(i))
        } else {
            Write::Update(self.live[i].clone(), self.writes)
        }
    }
}

/// Makes `write` through `api`; `make` builds the object of a create.
pub(crate) async fn apply<K>(api: &Api<K>, write: &Write, make: fn(&str) -> K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    match write {
        Write::Create(name) => {
            api.create(&PostParams::default(), &make(name))
                .await
                .with_context(|| format!("creating {name}"))?;
        }
        Write::Update(name, n) => {
            let field = if n % 2 == 0 { "labels" } else { "annotations" };
            let patch = serde_json::json!({ "metadata": { field: { "churn": n.to_string() } } });
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("patching {name}"))?;
        }
        Write::Delete(name) => {
            api.delete(name, &DeleteParams::default().grace_period(0))
                .await
                .with_context(|| format!("deleting {name}"))?;
        }
    }
    Ok(())
}
