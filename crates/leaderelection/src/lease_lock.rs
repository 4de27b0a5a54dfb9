//! The default lock: a `coordination.k8s.io/v1` Lease, as client-go's `LeaseLock`.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::{BoxFuture, Error, LeaderElectionRecord, Lock};

/// A [`Lock`] over one `coordination.k8s.io/v1` Lease: the record is the Lease's spec, the
/// version its `resourceVersion`. Interoperates with client-go's `resourcelock.LeaseLock`:
/// the two read and write the same fields the same way, so Go and Rust candidates can share
/// one Lease.
///
/// [`get`](Lock::get) keeps the Lease it read; [`update`](Lock::update) writes the new spec
/// into that Lease and sends it back whole (an HTTP PUT), so the API server refuses it with
/// 409 if anyone wrote in between. The identity needs RBAC `get`, `create` and `update` on
/// `leases` in the namespace.
///
/// Each request runs to its end on a task of its own, even when the caller stops waiting
/// for it (the elector's request timeout): a request cut off mid-way may have reached the
/// server anyway, so this changes nothing of what the caller knows, but the connection it
/// was setting up goes on to the pool instead of being dropped. On a loaded machine, where
/// a TLS handshake can take longer than the timeout, dropping each one at the timeout left
/// a replica holding many Leases (one connection per request in flight) with none ever
/// finished, retry after retry.
///
/// ```no_run
/// # async fn f(client: kube::Client) {
/// use kinformer_leaderelection::LeaseLock;
///
/// let lock = LeaseLock::new(client, "kube-system", "my-controller", "my-controller-7d9f-xk2p");
/// # let _ = lock;
/// # }
/// ```
pub struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    /// The Lease as last read or written: its resourceVersion is the version `update` expects.
    last: Mutex<Option<Lease>>,
}

impl LeaseLock {
    /// A lock on the Lease `namespace/name` (created on first acquisition when missing), for
    /// the candidate `identity` (unique among the candidates; a pod name is usual).
    ///
    /// client-go's `NewFromKubeconfig` also caps each request at max(1 s, renew deadline / 2);
    /// here the elector does that (see
    /// [`LeaderElectionConfig::request_timeout`](crate::LeaderElectionConfig::request_timeout)),
    /// so any `client` will do.
    pub fn new(
        client: Client,
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        let namespace = namespace.into();
        Self {
            api: Api::namespaced(client, &namespace),
            namespace,
            name: name.into(),
            identity: identity.into(),
            last: Mutex::new(None),
        }
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn remember(&self, lease: Option<Lease>) {
        // A panic while this was held left a whole `Option<Lease>`: use it as it is.
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = lease;
    }
}

impl fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the client: its config holds credentials.
        f.debug_struct("LeaseLock")
            .field("lease", &self.describe())
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Lock for LeaseLock {
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, Error>> {
        Box::pin(async move {
            let (api, name) = (self.api.clone(), self.name.clone());
            let lease = to_the_end(async move { api.get_opt(&name).await }).await?;
            let record = lease
                .as_ref()
                .map(|l| l.spec.as_ref().map(spec_to_record).unwrap_or_default());
            self.remember(lease);
            Ok(record)
        })
    }

    fn create<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(record_to_spec(record)),
            };
            let api = self.api.clone();
            let created =
                to_the_end(async move { api.create(&PostParams::default(), &lease).await }).await?;
            self.remember(Some(created));
            Ok(())
        })
    }

    fn update<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let mut lease = self
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .ok_or(Error::NotLoaded)?;
            lease.spec = Some(record_to_spec(record));
            let (api, name) = (self.api.clone(), self.name.clone());
            let updated =
                to_the_end(async move { api.replace(&name, &PostParams::default(), &lease).await })
                    .await?;
            self.remember(Some(updated));
            Ok(())
        })
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// client-go's `LeaseSpecToLeaderElectionRecord`: missing fields read as empty, zero or none.
/// The coordinated-election fields (`strategy`, `preferredHolder`) are not part of the record.
pub(crate) fn spec_to_record(spec: &LeaseSpec) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: spec.holder_identity.clone().unwrap_or_default(),
        lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
        acquire_time: spec.acquire_time.as_ref().map(|t| SystemTime::from(t.0)),
        renew_time: spec.renew_time.as_ref().map(|t| SystemTime::from(t.0)),
        leader_transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// client-go's `LeaderElectionRecordToLeaseSpec`: every field is written, the holder too when
/// empty (a released Lease says `holderIdentity: ""`).
pub(crate) fn record_to_spec(record: &LeaderElectionRecord) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(record.holder_identity.clone()),
        lease_duration_seconds: Some(record.lease_duration_seconds),
        acquire_time: record.acquire_time.and_then(micro_time),
        renew_time: record.renew_time.and_then(micro_time),
        lease_transitions: Some(record.leader_transitions),
        ..LeaseSpec::default()
    }
}

/// A time as a Lease's `MicroTime`; `None` for a time a Timestamp cannot hold (before year
/// -9999 or after 9999), which no clock produces.
fn micro_time(t: SystemTime) -> Option<MicroTime> {
    Timestamp::try_from(t).ok().map(MicroTime)
}

/// Runs `request` on a task of its own (see [`LeaseLock`]): dropping the future this returns
/// leaves it running to its end. Outside a Tokio runtime, in place.
async fn to_the_end<T: Send + 'static>(
    request: impl Future<Output = Result<T, kube::Error>> + Send + 'static,
) -> Result<T, Error> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return request.await.map_err(kube_error);
    };
    match runtime.spawn(request).await {
        Ok(done) => done.map_err(kube_error),
        // Cancelled by a runtime shutting down, or a panic in kube's client.
        Err(e) => Err(Error::Unreachable(Box::new(e))),
    }
}

fn kube_error(e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => match status.code {
            409 => Error::Conflict,
            404 => Error::NotFound,
            code => Error::Api {
                code,
                reason: status.reason,
                message: status.message,
            },
        },
        other => Error::Unreachable(Box::new(other)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn a_record_survives_the_round_trip_through_a_lease_spec() {
        let record = LeaderElectionRecord {
            holder_identity: "foo".into(),
            lease_duration_seconds: 10,
            acquire_time: Some(UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_000)),
            renew_time: Some(UNIX_EPOCH + Duration::new(1_700_000_010, 1_000)),
            leader_transitions: 1,
        };
        let spec = record_to_spec(&record);
        assert_eq!(spec_to_record(&spec), record);
        assert_eq!(record_to_spec(&spec_to_record(&spec)), spec);
    }

    #[test]
    fn a_lease_without_a_spec_reads_as_an_unheld_record_and_a_released_one_keeps_its_empty_holder()
    {
        let empty = spec_to_record(&LeaseSpec::default());
        assert_eq!(empty, LeaderElectionRecord::default());
        assert!(!empty.is_held());
        let spec = record_to_spec(&LeaderElectionRecord {
            lease_duration_seconds: 1,
            ..LeaderElectionRecord::default()
        });
        assert_eq!(spec.holder_identity.as_deref(), Some(""));
    }

    #[test]
    fn the_spec_serializes_with_client_gos_field_names_and_microsecond_times() {
        let spec = record_to_spec(&LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_000)),
            renew_time: Some(UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_000)),
            leader_transitions: 2,
        });
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "holderIdentity": "a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2023-11-14T22:13:20.123456Z",
                "renewTime": "2023-11-14T22:13:20.123456Z",
                "leaseTransitions": 2,
            })
        );
    }

    #[test]
    fn api_statuses_map_onto_conflict_not_found_and_api() {
        let status = |code: u16, reason: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                reason: reason.into(),
                message: "m".into(),
                ..kube::core::Status::default()
            }))
        };
        assert!(matches!(
            kube_error(status(409, "Conflict")),
            Error::Conflict
        ));
        assert!(matches!(
            kube_error(status(409, "AlreadyExists")),
            Error::Conflict
        ));
        assert!(matches!(
            kube_error(status(404, "NotFound")),
            Error::NotFound
        ));
        assert!(matches!(
            kube_error(status(403, "Forbidden")),
            Error::Api { code: 403, .. }
        ));
    }
}
