use std::error::Error as StdError;

/// The one error type of kinformer-core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key did not have the form `name` or `namespace/name`.
    #[error("unexpected key format: {key:?} (want \"name\" or \"namespace/name\")")]
    InvalidKey {
        /// The key that was rejected.
        key: String,
    },
    /// The object has no `metadata.name`, so no key can be made for it.
    #[error("object has no name")]
    MissingName,
    /// A name or namespace contained a `/`, which would make the key ambiguous.
    #[error("{what} {value:?} contains '/'")]
    SlashInName {
        /// `"name"` or `"namespace"`.
        what: &'static str,
        /// The offending value.
        value: String,
    },
    /// The sink (a FIFO, a store) was closed and takes no more writes.
    #[error("the sink is closed")]
    Closed,
    /// An error from a sink implementation outside this workspace.
    #[error(transparent)]
    Other(Box<dyn StdError + Send + Sync + 'static>),
}
