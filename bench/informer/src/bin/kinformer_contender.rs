//! kinformer's contender: a `SharedIndexInformer` of the namespace's pods, in protobuf
//! (`WireFormat::Auto`, the default) or with `--wire json` in JSON. With no `--store` (or
//! `--store default`) it builds what the factory builds: the default informer, over
//! `KubeListerWatcher::cached` (protobuf transcoded into `Cached<Pod>`s, read in place);
//! `--store decoded` keeps decoded pods (the informer over `KubeListerWatcher::new`,
//! client-go's cache). With `--strip` it drops `managedFields`: the default cache with
//! `KubeListerWatcher::drop_managed_fields` (asked of the server, stripped while transcoding
//! where the server sends them), the decoded store with the informer's transform; with
//! `--strip --modify` while decoding (`KubeListerWatcher::modify`);
//! `--project` caches `PodView`s (stripped while decoding), `--relist` measures a relist
//! (see the crate docs for the protocol).
//!
//! With `--resource` it syncs that custom resource with the factory's defaults (cached,
//! JSON, which `WireFormat::Auto` picks for custom resources; CBOR with `--wire cbor`), as the
//! typed [`ScaledObject`] or with `--dynamic` as kube's `DynamicObject`.
//!
//! With `--reads` it builds the default pod informer (no transform; `--store decoded` for
//! the decoded one) with one more index, `byNode`, and one add handler that reads each
//! pod's `spec.nodeName` (through its view in the default cache), and after the sync runs the read workload of
//! [`kinformer_bench_informer::reads`] over the informer's lister and indexer.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kinformer_bench_informer::reads::{self, BY_NODE, PodReads};
use kinformer_bench_informer::{
    Args, CustomResource, Latency, PodView, ScaledObject, Store, Wire, check_count,
    has_relist_label, kube_config, measure_relist, print_synced, wait_for,
};
use kinformer_compact_store::Cached;
use kinformer_core::KnownObjects as _;
use kinformer_indexer::{IndexFunc, Indexer, Indexers, Lister, Selector, parse_selector};
use kinformer_informer_factory::{
    ResourceEventHandlerFuncs, SharedIndexInformer, SnapshotOptions, SnapshotStart,
};
use kinformer_kube::{Compression, KubeListerWatcher, WireFormat, reflector_client};
use kube::api::DynamicObject;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Pods the transform could not strip in place (their `Arc` was shared).
static CLONED: AtomicU64 = AtomicU64::new(0);

/// The contender (also `kinformer-contender-mimalloc`'s).
pub(crate) fn main() -> anyhow::Result<()> {
    let start = Instant::now();
    let args = Args::parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        if args.reads {
            run_reads(start, args).await
        } else if let Some(resource) = args.resource.clone() {
            run_custom_resource(start, args, &resource).await
        } else if args.project {
            run::<PodView>(start, args).await
        } else {
            run::<Pod>(start, args).await
        }
    })
}

async fn run<K>(start: Instant, args: Args) -> anyhow::Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static,
{
    let client = reflector_client(kube_config(&args).await?)?;
    let mut pods = KubeListerWatcher::new(Api::<K>::namespaced(client, &args.namespace))
        .wire_format(wire_format(&args))
        .compression(compression(&args));
    // A projection is always stripped: client-go's projecting transform clears
    // managedFields too.
    if (args.strip && args.modify) || args.project {
        // Stripped as each pod is decoded, before the rest of its list.
        pods = pods.modify(|obj: &mut K| obj.meta_mut().managed_fields = None);
    }
    let transform = args.strip && !args.modify && !args.project;
    match args.store {
        Store::Default => {
            // The default cache drops them as it transcodes: what a user is told to use
            // instead of a transform (which would decode, change and encode each pod).
            if transform {
                pods = pods.drop_managed_fields();
            }
            let mut builder = SharedIndexInformer::builder(pods.cached()).name("pods");
            if let Some(dir) = &args.snapshot_dir {
                let start = if args.snapshot_changes_only {
                    SnapshotStart::ChangesOnly
                } else {
                    SnapshotStart::AsAdds
                };
                let options = SnapshotOptions::new(dir)
                    .period(Duration::ZERO)
                    .start(start);
                let identity = format!("v1/pods ns={} strip={}", args.namespace, args.strip);
                builder = builder.snapshot(options, identity);
            }
            finish_snapshot(builder.build(), start, args).await
        }
        Store::Decoded => {
            let informer = SharedIndexInformer::builder(pods).name("pods").build();
            if transform {
                // The Arc should be the transform's alone here, so that make_mut strips
                // in place; the result line counts the pods it had to clone instead.
                informer.set_transform(|mut obj: Arc<K>| {
                    if Arc::get_mut(&mut obj).is_none() {
                        CLONED.fetch_add(1, Ordering::Relaxed);
                    }
                    Arc::make_mut(&mut obj).meta_mut().managed_fields = None;
                    Ok(obj)
                })?;
            }
            finish(informer, start, args).await
        }
    }
}

/// What `--compression` asks for; the default without it.
fn compression(args: &Args) -> Compression {
    match args.gzip {
        None => Compression::default(),
        Some(true) => Compression::Gzip,
        Some(false) => Compression::None,
    }
}

/// The wire format `--wire` asks for; the default `WireFormat::Auto` without it.
fn wire_format(args: &Args) -> WireFormat {
    match args.wire {
        None => WireFormat::Auto,
        Some(Wire::Protobuf) => WireFormat::Protobuf,
        Some(Wire::Json) => WireFormat::Json,
        Some(Wire::Cbor) => WireFormat::Cbor,
    }
}

/// `--resource`: the custom resource with the factory's defaults, as the typed
/// `ScaledObject` or (`--dynamic`) as `DynamicObject`.
async fn run_custom_resource(
    start: Instant,
    args: Args,
    resource: &CustomResource,
) -> anyhow::Result<()> {
    let client = reflector_client(kube_config(&args).await?)?;
    if args.dynamic {
        let ar = resource.api_resource();
        let api = Api::<DynamicObject>::namespaced_with(client, &args.namespace, &ar);
        let lw = KubeListerWatcher::new_with(api, &ar)
            .wire_format(wire_format(&args))
            .cached();
        let informer = SharedIndexInformer::builder(lw)
            .name(resource.plural.clone())
            .build();
        finish(informer, start, args).await
    } else {
        resource.check_typed()?;
        let api = Api::<ScaledObject>::namespaced(client, &args.namespace);
        let lw = KubeListerWatcher::new(api).wire_format(wire_format(&args));
        let informer = SharedIndexInformer::builder(lw.cached())
            .name(resource.plural.clone())
            .build();
        finish(informer, start, args).await
    }
}

/// [`finish`], with what the snapshot did in the result line (`resumed`, `resume_failures`,
/// `snapshot_load_ms`) and, with `--snapshot-dir`, the snapshot written after the settled
/// line.
async fn finish_snapshot<K: Send + Sync + 'static>(
    informer: SharedIndexInformer<Cached<K>>,
    start: Instant,
    args: Args,
) -> anyhow::Result<()> {
    if args.snapshot_dir.is_none() {
        return finish(informer, start, args).await;
    }
    let _handle = informer.start()?;
    wait_for(|| informer.has_synced()).await;
    let objects = informer.indexer().list_keys().len();
    let stats = informer.stats();
    let loaded = stats.snapshot.as_ref().and_then(|s| s.loaded.as_ref());
    print_synced(
        "kinformer",
        &args,
        start,
        objects,
        &[
            ("resumed", stats.reflector.resumed.into()),
            ("resume_failures", stats.reflector.resume_failures.into()),
            (
                "snapshot_load_ms",
                loaded.map_or(0.0, |l| l.took.as_secs_f64() * 1e3).into(),
            ),
            (
                "snapshot_objects_loaded",
                loaded.map_or(0, |l| l.objects).into(),
            ),
            (
                "lists",
                stats
                    .reflector
                    .lists
                    .iter()
                    .map(|(_, n)| n)
                    .sum::<u64>()
                    .into(),
            ),
            (
                "snapshot_rv",
                loaded
                    .map(|l| l.resource_version.clone())
                    .unwrap_or_default()
                    .into(),
            ),
            (
                "last_error",
                stats
                    .last_error
                    .map(|e| e.message)
                    .unwrap_or_default()
                    .into(),
            ),
        ],
    );
    check_count(&args, objects)?;
    kinformer_bench_informer::settle(&args).await;
    let written = informer
        .write_snapshot()
        .await?
        .context("no snapshot written")?;
    kinformer_bench_informer::print_json(&serde_json::json!({
        "snapshot_bytes": written.bytes,
        "snapshot_write_ms": written.took.as_secs_f64() * 1e3,
        "snapshot_objects": written.objects,
    }));
    std::process::exit(0)
}

/// Registers the handler, starts the informer, prints the result line and what follows.
async fn finish<K>(
    informer: SharedIndexInformer<K>,
    start: Instant,
    args: Args,
) -> anyhow::Result<()>
where
    K: kinformer_core::MetaObject + Send + Sync + 'static,
{
    let latency = Latency::new(args.latency);
    let seen = Arc::clone(&latency);
    let relisted = Arc::new(AtomicBool::new(false));
    let relist_seen = Arc::clone(&relisted);
    informer.add_event_handler(ResourceEventHandlerFuncs::new().update_func(
        move |_old, new: &Arc<K>| {
            seen.saw(&**new);
            if has_relist_label(&**new) {
                relist_seen.store(true, Ordering::SeqCst);
            }
        },
    ))?;
    let _handle = informer.start()?;
    wait_for(|| informer.has_synced()).await;
    let objects = informer.indexer().list_keys().len();
    let cloned = CLONED.load(Ordering::Relaxed);
    print_synced(
        "kinformer",
        &args,
        start,
        objects,
        &[("transform_clones", cloned.into())],
    );
    check_count(&args, objects)?;
    kinformer_bench_informer::settle(&args).await;
    latency.wait_and_print().await;
    if args.relist {
        measure_relist(&relisted).await?;
    }
    // Exit without tearing the informer down: the driver only waits for the process.
    std::process::exit(0)
}

/// `--reads`: the default pod informer (or with `--store decoded` the decoded one) with the
/// `byNode` index and an add handler that reads each pod's node; after the sync line, once
/// the handler has handled every initial add, the read workload.
async fn run_reads(start: Instant, args: Args) -> anyhow::Result<()> {
    let client = reflector_client(kube_config(&args).await?)?;
    let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client, &args.namespace))
        .wire_format(wire_format(&args));
    match args.store {
        Store::Default => read_cache(start, args, pods.cached()).await,
        Store::Decoded => read_cache(start, args, pods).await,
    }
}

/// The read workload over an informer of `T`s (`Cached<Pod>` or `Pod`).
async fn read_cache<T: NodeName + DeserializeOwned>(
    start: Instant,
    args: Args,
    pods: KubeListerWatcher<T>,
) -> anyhow::Result<()> {
    let mut by_node = Indexers::new();
    by_node.insert(BY_NODE.to_owned(), IndexFunc::single(T::node_name));
    let informer = SharedIndexInformer::builder(pods)
        .name("pods")
        .indexers(by_node)
        .build();
    let registration = informer.add_event_handler(ResourceEventHandlerFuncs::new().add_func(
        |pod: &Arc<T>, _initial| {
            std::hint::black_box(node_name_len(&**pod));
        },
    ))?;
    let _handle = informer.start()?;
    wait_for(|| informer.has_synced()).await;
    let objects = informer.indexer().list_keys().len();
    print_synced("kinformer", &args, start, objects, &[]);
    check_count(&args, objects)?;
    wait_for(|| registration.has_synced()).await;
    let handled_ms = start.elapsed().as_secs_f64() * 1e3;
    let cache = InformerReads {
        lister: informer.lister(),
        indexer: informer.indexer(),
        selector: parse_selector(reads::SELECTOR)?,
    };
    let namespace = args.namespace.clone();
    let result = tokio::task::block_in_place(|| reads::run(&cache, &namespace))?;
    reads::print(&result, handled_ms);
    std::process::exit(0)
}

/// A cached pod's `spec.nodeName`, the one field every read reads: through the view of a
/// `Cached<Pod>`, the field of a decoded `Pod`.
trait NodeName: kinformer_core::MetaObject + Send + Sync + 'static {
    fn node_name(&self) -> Option<&str>;
}

impl NodeName for Cached<Pod> {
    fn node_name(&self) -> Option<&str> {
        self.spec()?.node_name()
    }
}

impl NodeName for Pod {
    fn node_name(&self) -> Option<&str> {
        self.spec.as_ref()?.node_name.as_deref()
    }
}

/// The length of a pod's `spec.nodeName`.
fn node_name_len(pod: &impl NodeName) -> usize {
    pod.node_name().map_or(0, str::len)
}

/// The reads over the informer's cache as a controller makes them: the cached pods from its
/// lister and indexer, read where they lie.
struct InformerReads<T> {
    lister: Lister<T>,
    indexer: Arc<dyn Indexer<T>>,
    selector: Selector,
}

impl<T: NodeName> PodReads for InformerReads<T> {
    fn names(&self, namespace: &str) -> Vec<String> {
        self.indexer
            .list_keys()
            .iter()
            .filter(|k| k.namespace() == Some(namespace))
            .map(|k| k.name().to_owned())
            .collect()
    }

    fn get(&self, namespace: &str, name: &str) -> usize {
        self.lister
            .namespaced(namespace)
            .get(name)
            .map_or(0, |pod| node_name_len(&*pod))
    }

    fn list_all(&self, namespace: &str) -> usize {
        self.lister
            .namespaced(namespace)
            .list(&self.selector)
            .iter()
            .map(|pod| node_name_len(&**pod))
            .sum()
    }

    fn by_node(&self, node: &str) -> usize {
        self.indexer
            .by_index(BY_NODE, node)
            .map_or(0, |pods| pods.iter().map(|pod| node_name_len(&**pod)).sum())
    }
}
