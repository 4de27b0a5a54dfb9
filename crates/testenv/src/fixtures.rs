//! What tests create on the server: namespaces to isolate themselves, a minimal pod, and
//! many pods at once.

use std::sync::atomic::{AtomicU64, Ordering};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::ControlPlane;
use crate::error::{Error, kube_err};
use crate::random::random_hex;

impl ControlPlane {
    /// Creates a namespace named `<prefix>-<unique suffix>` and returns its name.
    /// (No namespace controller runs, so namespaces are never deleted.)
    ///
    /// # Errors
    /// When the API server refuses.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let clean: String = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let name = format!(
            "{}-{}-{}",
            clean.trim_matches('-'),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            random_hex(2)?
        );
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(self.client()?)
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {name}")))?;
        Ok(name)
    }
}

/// A minimal pod the API server accepts (one `busybox` container, label
/// `app=kinformer`). No scheduler runs, so it stays `Pending`.
pub fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), "kinformer".to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates `n` pods named `{prefix}-{i}` through `api`, at most 32 requests in flight,
/// and returns them as the server stored them (in no particular order).
///
/// # Errors
/// The first request the API server refuses.
pub async fn create_pods(api: &Api<Pod>, prefix: &str, n: usize) -> Result<Vec<Pod>, Error> {
    futures::stream::iter(0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &pod(&name))
                    .await
                    .map_err(kube_err(format!("creating pod {name}")))
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
}
