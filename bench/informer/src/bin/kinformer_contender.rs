//! kinformer's contender: a `SharedIndexInformer` of the namespace's pods, in protobuf
//! (`WireFormat::Auto`, the default) or with `--wire json` in JSON; with `--strip` it
//! strips `managedFields` with the informer's transform, or with `--strip --modify` while
//! decoding (`KubeListerWatcher::modify`); with no `--store` (or `--store default`) it
//! keeps the informer's default cache (`SharedIndexInformer::builder(lw).build()`),
//! `--store decoded` caches decoded pods (`CacheKind::Decoded`), `--store compact` in a
//! `CompactStore` given as the informer's store, `--store encoded-items` makes the
//! informer's objects `Encoded<Pod>`s transcoded from protobuf (no `Pod` built); `--project` caches `PodView`s (stripped while decoding), `--relist` measures a relist
//! (see the crate docs for the protocol).
//!
//! With `--resource` it syncs that custom resource with the informer's defaults,
//! `SharedIndexInformer::builder(lw).build()` over `KubeListerWatcher` (JSON, the only
//! format of custom resources; `WireFormat::Auto` picks it), as the typed
//! [`ScaledObject`] or with `--dynamic` as kube's
//! `DynamicObject`.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kinformer_bench_informer::{
    Args, CustomResource, Latency, PodView, ScaledObject, Store, Wire, check_count,
    has_relist_label, kube_config, measure_relist, print_synced, wait_for,
};
use kinformer_compact_store::{CompactStore, Encoded};
use kinformer_core::KnownObjects as _;
use kinformer_indexer::namespace_indexers;
use kinformer_informer_factory::{CacheKind, ResourceEventHandlerFuncs, SharedIndexInformer};
use kinformer_reflector::{KubeListerWatcher, WireFormat, reflector_client};
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
        if let Some(resource) = args.resource.clone() {
            run_custom_resource(start, args, &resource).await
        } else if args.store == Store::EncodedItems {
            run_encoded(start, args).await
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
        .wire_format(wire_format(&args));
    // A projection is always stripped: client-go's projecting transform clears
    // managedFields too.
    if (args.strip && args.modify) || args.project {
        // Stripped as each pod is decoded, before the rest of its list.
        pods = pods.modify(|obj: &mut K| obj.meta_mut().managed_fields = None);
    }
    let mut builder = SharedIndexInformer::builder(pods).name("pods");
    match args.store {
        Store::Default => {}
        Store::Decoded => builder = builder.cache(CacheKind::Decoded),
        Store::Compact => builder = builder.store(CompactStore::<K>::new(namespace_indexers())),
        Store::EncodedItems => unreachable!("run_encoded"),
    }
    let informer = builder.build();
    if args.strip && !args.modify && !args.project {
        // The Arc should be the transform's alone here, so that make_mut strips in
        // place; the result line counts the pods it had to clone instead.
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

/// The wire format `--wire` asks for; the default `WireFormat::Auto` without it.
fn wire_format(args: &Args) -> WireFormat {
    match args.wire {
        None => WireFormat::Auto,
        Some(Wire::Protobuf) => WireFormat::Protobuf,
        Some(Wire::Json) => WireFormat::Json,
    }
}

/// `--resource`: the custom resource with the informer's defaults, as the typed
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
        let lw = KubeListerWatcher::new_with(api, &ar);
        let informer = SharedIndexInformer::builder(lw)
            .name(resource.plural.clone())
            .build();
        finish(informer, start, args).await
    } else {
        resource.check_typed()?;
        let lw = KubeListerWatcher::new(Api::<ScaledObject>::namespaced(client, &args.namespace));
        let informer = SharedIndexInformer::builder(lw)
            .name(resource.plural.clone())
            .build();
        finish(informer, start, args).await
    }
}

/// `--store encoded-items`: the informer's objects are `Encoded<Pod>`s, transcoded from
/// protobuf without building a `Pod`.
async fn run_encoded(start: Instant, args: Args) -> anyhow::Result<()> {
    if args.strip || args.project {
        anyhow::bail!("--store encoded-items takes neither --strip nor --project");
    }
    let client = reflector_client(kube_config(&args).await?)?;
    let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client, &args.namespace))
        .wire_format(wire_format(&args))
        .decode_protobuf_with(Encoded::<Pod>::from_protobuf);
    let informer = SharedIndexInformer::builder(pods)
        .name("pods")
        .cache(CacheKind::Decoded)
        .build();
    finish(informer, start, args).await
}

/// Registers the handler, starts the informer, prints the result line and what follows.
async fn finish<K>(
    informer: SharedIndexInformer<K>,
    start: Instant,
    args: Args,
) -> anyhow::Result<()>
where
    K: kinformer_core::MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
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
