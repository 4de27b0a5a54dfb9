//! The crate's one error type.

/// What can go wrong in this crate. Every variant says what the caller can do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The informer has already been started: its transform, its watch error handler and
    /// its FIFO are fixed from then on, and it cannot be run a second time. Configure it
    /// before [`run`](crate::SharedIndexInformer::run) / [`start`](crate::SharedIndexInformer::start).
    #[error("the informer has already been started")]
    AlreadyStarted,

    /// The informer has stopped: it takes no more handlers or indexers. Build a new one.
    #[error("the informer has stopped")]
    Stopped,

    /// The informer's indexer refused a change (for example a duplicate index name in
    /// [`add_indexers`](crate::SharedIndexInformer::add_indexers)).
    #[error(transparent)]
    Indexer(#[from] kinformer_indexer::Error),

    /// The FIFO could not be built from the chosen options.
    #[error("cannot build the informer's FIFO")]
    Fifo(#[from] kinformer_deltafifo::Error),

    /// The reflector could not start (for example: no Tokio runtime), or it stopped with
    /// an error.
    #[error("the reflector failed")]
    Reflector(#[from] kinformer_reflector::Error),

    /// The informer's snapshot could not be written (see
    /// [`SnapshotOptions`](crate::SnapshotOptions)); a snapshot that cannot be read is
    /// not an error: the informer lists instead, and its stats say why.
    #[error("snapshot")]
    Snapshot(#[from] kinformer_compact_store::snapshot::SnapshotError),

    /// The operating system refused to start a listener's thread.
    #[error("cannot start the thread of an event handler")]
    SpawnThread(#[source] std::io::Error),
}
