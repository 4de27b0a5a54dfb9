//! kinformer's contender: a `SharedIndexInformer` of the namespace's pods, in protobuf
//! (`WireFormat::Auto`, the default) or with `--wire json` in JSON; with `--strip` it
//! strips `managedFields` with the informer's transform, or with `--strip --modify` while
//! decoding (`KubeListerWatcher::modify`) (see the crate docs for the protocol).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kinformer_bench_informer::{
    Args, Latency, Wire, check_count, kube_config, print_synced, wait_for,
};
use kinformer_core::KnownObjects as _;
use kinformer_informer_factory::{ResourceEventHandlerFuncs, SharedIndexInformer};
use kinformer_reflector::{KubeListerWatcher, WireFormat, reflector_client};
use kube::Api;

/// Pods the transform could not strip in place (their `Arc` was shared).
static CLONED: AtomicU64 = AtomicU64::new(0);

fn main() -> anyhow::Result<()> {
    let start = Instant::now();
    let args = Args::parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = reflector_client(kube_config(&args).await?)?;
        let mut pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client, &args.namespace))
            .wire_format(match args.wire {
                None => WireFormat::Auto,
                Some(Wire::Protobuf) => WireFormat::Protobuf,
                Some(Wire::Json) => WireFormat::Json,
            });
        if args.strip && args.modify {
            // Stripped as each pod is decoded, before the rest of its list.
            pods = pods.modify(|pod: &mut Pod| pod.metadata.managed_fields = None);
        }
        let informer = SharedIndexInformer::builder(pods).name("pods").build();
        if args.strip && !args.modify {
            // The Arc should be the transform's alone here, so that make_mut strips in
            // place; the result line counts the pods it had to clone instead.
            informer.set_transform(|mut pod: Arc<Pod>| {
                if Arc::get_mut(&mut pod).is_none() {
                    CLONED.fetch_add(1, Ordering::Relaxed);
                }
                Arc::make_mut(&mut pod).metadata.managed_fields = None;
                Ok(pod)
            })?;
        }
        let latency = Latency::new(args.latency);
        let seen = Arc::clone(&latency);
        informer.add_event_handler(
            ResourceEventHandlerFuncs::new().update_func(move |_old, new: &Arc<Pod>| seen.saw(new)),
        )?;
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
        latency.wait_and_print().await;
        // Exit without tearing the informer down: the driver only waits for the process.
        std::process::exit(0)
    })
}
