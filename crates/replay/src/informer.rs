//! Running an informer on a [`Replay`] and reading what it did: an
//! [`Observer`] handler that notes every notification, [`settle`] to wait until the informer
//! has taken everything served, and [`outcome`] for the [`check`](crate::check)s.
//! (Feature `informer`, on by default.)

use std::sync::Arc;
use std::time::Duration;

use kinformer_core::{DeletedObject, MetaObject, deletion_handling_key, meta_namespace_key};
use kinformer_informer_factory::{Registration, ResourceEventHandler, SharedIndexInformer};
use parking_lot::Mutex;

use crate::check::{Observation, Outcome};
use crate::replay::Replay;

/// A handler that notes every notification as an [`Observation`], in order. Clones share
/// the notes.
#[derive(Clone, Debug, Default)]
pub struct Observer {
    seen: Arc<Mutex<Vec<Observation>>>,
}

impl Observer {
    /// An observer that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every notification so far, in order.
    pub fn observed(&self) -> Vec<Observation> {
        self.seen.lock().clone()
    }

    fn note<T: MetaObject>(&self, obj: &T, update: bool) {
        let Ok(key) = meta_namespace_key(obj) else {
            return;
        };
        let key = key.to_string();
        let rv = obj.object_resource_version().unwrap_or_default().to_owned();
        self.seen.lock().push(if update {
            Observation::Update { key, rv }
        } else {
            Observation::Add { key, rv }
        });
    }
}

impl<T: MetaObject> ResourceEventHandler<T> for Observer {
    fn on_add(&self, obj: &Arc<T>, _: bool) {
        self.note(obj.as_ref(), false);
    }
    fn on_update(&self, _: &Arc<T>, new: &Arc<T>) {
        self.note(new.as_ref(), true);
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        if let Ok(key) = deletion_handling_key(obj) {
            self.seen.lock().push(Observation::Delete {
                key: key.to_string(),
            });
        }
    }
}

/// The informer's cache (key → resourceVersion) and `observer`'s notes.
pub fn outcome<T: MetaObject + Send + Sync + 'static>(
    informer: &SharedIndexInformer<T>,
    observer: &Observer,
) -> Outcome {
    let store = informer
        .indexer()
        .list()
        .iter()
        .filter_map(|o| {
            let key = meta_namespace_key(o.as_ref()).ok()?.to_string();
            Some((
                key,
                o.object_resource_version().unwrap_or_default().to_owned(),
            ))
        })
        .collect();
    Outcome::new(store, observer.observed())
}

/// Waits until `replay` has served everything and the informer has taken it all: nothing
/// queued, `registration`'s handler idle, and both still so after another look. It gives
/// up (and the checks say what is missing) when the replay is not done ten minutes past the
/// recording's span on the replay's clock (at once under a paused clock: the client stopped
/// asking, so nothing else will happen), or after 60 s of wall time waiting for the
/// informer.
pub async fn settle<K, T>(
    replay: &Replay<K>,
    informer: &SharedIndexInformer<T>,
    registration: &Registration<T>,
) where
    T: MetaObject + Send + Sync + 'static,
{
    let patience = replay.span() + Duration::from_secs(600);
    if tokio::time::timeout(patience, replay.finished())
        .await
        .is_err()
    {
        tracing::warn!(
            left = replay.left(),
            "the replay did not finish: the client stopped asking"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut quiet = 0;
    while quiet < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        tokio::task::yield_now().await;
        if informer.stats().queued_items == 0 && registration.pending() == 0 {
            quiet += 1;
        } else {
            quiet = 0;
            // The handlers run on threads of their own: let them.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
