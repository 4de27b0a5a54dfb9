//! [`ShardSelection`]: a shard selector that changes while its informer runs.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use super::ShardSelector;

/// The selector in force and the number of times it changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selected {
    /// `None`: nothing is selected.
    pub(crate) selector: Option<ShardSelector>,
    pub(crate) generation: u64,
}

/// A shard selector that may change while the informer that uses it runs: the union of
/// the shards a replica holds, which grows when it takes a shard and shrinks when it gives
/// one up. Hand it to
/// [`ShardedListerWatcher::selected`](crate::ShardedListerWatcher::selected) (or an
/// informer builder's `shards`); keep a clone to [`set`](Self::set) it. Cheap to clone;
/// clones share the selection.
///
/// A change reaches the lister-watcher at once, and none relists what stays selected. One
/// that selects anything new ends its watch saying what is new
/// ([`ShardChange::Widened`](crate::ShardChange::Widened)); the reflector
/// lists only that, at exactly the resourceVersion the watch had reached, and watches the
/// new selector from there. As a relist would, objects of the shards no longer selected
/// leave the cache as deletions (tombstones), objects of the new shards arrive as additions,
/// and the objects of the shards still selected stay (noted as synced, not as changed).
/// Where it cannot list at that version (compacted away) it relists, without a backoff
/// (relist reason `shard_selection_changed`). One that only
/// selects less (the new selector [`covers`](crate::ShardSelector::covers)ed by the one
/// watched) needs no list: the watch goes on under the narrower selector
/// ([`ShardChange::Narrowed`](crate::ShardChange::Narrowed)), and the
/// reflector drops the rest of the cache the same way, from the cache's own keys. With
/// nothing selected ([`set`](Self::set)`(None)`), nothing is listed and nothing is watched.
///
/// ```
/// use kinformer_reflector::{ShardKey, ShardSelection, ShardSelector};
///
/// let selection = ShardSelection::new(None);
/// assert_eq!(selection.get(), None);
/// let two = ShardSelector::index_of(ShardKey::Uid, 2, 12)?;
/// selection.set(Some(two.clone()));
/// assert_eq!(selection.get(), Some(two));
/// assert_eq!(selection.generation(), 1);
/// # Ok::<(), kinformer_reflector::Error>(())
/// ```
#[derive(Clone)]
pub struct ShardSelection {
    tx: Arc<watch::Sender<Selected>>,
}

impl fmt::Debug for ShardSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let selected = self.tx.borrow();
        f.debug_struct("ShardSelection")
            .field(
                "selector",
                &selected.selector.as_ref().map(ToString::to_string),
            )
            .field("generation", &selected.generation)
            .finish()
    }
}

impl ShardSelection {
    /// A selection of `selector` (`None`: nothing).
    pub fn new(selector: Option<ShardSelector>) -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(Selected {
                selector,
                generation: 0,
            })),
        }
    }

    /// Selects `selector` (`None`: nothing). A selector equal to the one in force changes
    /// nothing.
    pub fn set(&self, selector: Option<ShardSelector>) {
        self.tx.send_if_modified(|selected| {
            if selected.selector == selector {
                return false;
            }
            selected.selector = selector;
            selected.generation += 1;
            true
        });
    }

    /// The selector in force (`None`: nothing).
    pub fn get(&self) -> Option<ShardSelector> {
        self.tx.borrow().selector.clone()
    }

    /// How many times the selector changed.
    pub fn generation(&self) -> u64 {
        self.tx.borrow().generation
    }

    pub(crate) fn selected(&self) -> Selected {
        self.tx.borrow().clone()
    }

    /// A receiver that wakes on each change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Selected> {
        self.tx.subscribe()
    }
}
