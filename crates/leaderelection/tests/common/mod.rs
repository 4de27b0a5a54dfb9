//! What the end-to-end tests share: elector processes ([`peers`]), their journals
//! ([`journal`]), and reading the Lease straight from the API server.
#![allow(dead_code, unreachable_pub)]

pub mod journal;
pub mod peers;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use peers::Arena;

impl Arena {
    /// The Lease as stored, read past every proxy.
    pub async fn lease_now(&self) -> Option<Lease> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        api.get_opt(&self.lease).await.expect("read the Lease")
    }

    /// The Lease's holder as stored (`None` when there is no Lease or nobody holds it).
    pub async fn holder(&self) -> Option<String> {
        self.lease_now()
            .await
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
    }

    /// Waits until the Lease's holder satisfies `want`, for at most `limit`.
    pub async fn wait_for_holder(
        &self,
        limit: Duration,
        want: impl Fn(Option<&str>) -> bool,
    ) -> Option<String> {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let holder = self.holder().await;
            if want(holder.as_deref()) {
                return holder;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "the Lease's holder is still {holder:?} after {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
