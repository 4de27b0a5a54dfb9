//! kube-runtime's contender: `reflector` over `watcher` into a `Store` of the
//! namespace's pods, or with `--resource` of the typed custom resource
//! [`ScaledObject`] (`#[derive(CustomResource)]`,
//! as kube-rs programs type custom resources), ready at the watcher's `InitDone` (see the
//! crate docs for the protocol).

use std::fmt::Debug;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_bench_informer::{
    Args, Latency, ScaledObject, Wire, check_count, kube_config, print_synced,
};
use kube::{Api, Resource};
use kube_runtime::WatchStreamExt;
use kube_runtime::reflector::{self, store};
use kube_runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

fn main() -> anyhow::Result<()> {
    let start = Instant::now();
    let args = Args::parse()?;
    if matches!(args.wire, Some(Wire::Protobuf | Wire::Cbor)) {
        anyhow::bail!("kube-runtime speaks JSON only (kube-rs has no protobuf or CBOR path)");
    }
    if args.reads {
        anyhow::bail!("--reads is for kinformer's contender and the Go peer");
    }
    if args.dynamic {
        anyhow::bail!("kube-runtime's contender syncs the typed custom resource only");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // kube-runtime's users build the client from the config as it is.
        let client = kube::Client::try_from(kube_config(&args).await?)?;
        match &args.resource {
            Some(resource) => {
                resource.check_typed()?;
                let api = Api::<ScaledObject>::namespaced(client, &args.namespace);
                run(api, start, args).await
            }
            None => run(Api::<Pod>::namespaced(client, &args.namespace), start, args).await,
        }
    })
}

async fn run<K>(api: Api<K>, start: Instant, args: Args) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = store::<K>();
    let strip = args.strip;
    let latency = Latency::new(args.latency);
    let seen = std::sync::Arc::clone(&latency);
    let stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |obj: &mut K| {
            if strip {
                obj.meta_mut().managed_fields = None;
            }
        });
    let mut events = reflector::reflector(writer, stream).boxed();
    tokio::spawn(async move {
        // The "handler": what a consumer of the reflector's stream sees.
        while let Some(event) = events.next().await {
            if let Ok(Event::Apply(obj)) = event {
                seen.saw(&obj);
            }
        }
    });
    reader.wait_until_ready().await?;
    let objects = reader.len();
    print_synced("kube-runtime", &args, start, objects, &[]);
    check_count(&args, objects)?;
    kinformer_bench_informer::settle(&args).await;
    latency.wait_and_print().await;
    std::process::exit(0)
}
