//! The crate's one error type.

use kinformer_core::ObjectKey;

use kinformer_core::BoxError;

/// What can go wrong in this crate. Every variant says what the caller can do about it.
///
/// A failed write leaves the store exactly as it was: keys and index values are computed
/// before anything changes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key function could not make a key for an object (it has no name, or a name with
    /// a `/`). Fix the object; nothing was written.
    #[error("cannot make the key of an object")]
    Key(#[source] kinformer_core::Error),

    /// An index function failed for an object. client-go panics here; kinformer hands the
    /// error back and leaves the store unchanged. Fix the index function or the object.
    #[error("index function {index:?} failed for {}", key.as_ref().map_or("an object without a key", |k| k.as_str()))]
    IndexFunc {
        /// The index whose function failed.
        index: String,
        /// The key of the object it failed on; `None` when a query object
        /// ([`Indexer::index`](crate::Indexer::index)) had no valid key.
        key: Option<ObjectKey>,
        /// What the index function returned.
        #[source]
        source: BoxError,
    },

    /// No index with this name was registered. Add it with `add_indexers` first.
    #[error("index with name {0:?} does not exist")]
    UnknownIndex(String),

    /// `add_indexers` was given names that already exist; nothing was added. Pick other
    /// names (an index function cannot be replaced).
    #[error("indexer conflict: {0:?} already exist")]
    IndexerConflict(Vec<String>),

    /// A lister found no object with this name (client-go's `NotFound`).
    #[error("{} not found", match .namespace { Some(ns) => format!("{ns}/{name}"), None => name.clone() })]
    NotFound {
        /// The namespace looked in, or `None` for a cluster-scoped lookup.
        namespace: Option<String>,
        /// The name looked for.
        name: String,
    },

    /// A label selector string does not follow client-go's grammar or its key and value
    /// rules (see [`parse_selector`](crate::parse_selector)).
    #[error("unable to parse label selector {selector:?}: {reason}")]
    InvalidSelector {
        /// The selector as given.
        selector: String,
        /// What is wrong with it, worded as client-go does.
        reason: String,
    },

    /// The selector uses `>` or `<`, which client-go accepts but kube-core's `Expression`
    /// cannot express. Filter on the numeric label in code instead. Only for a selector
    /// client-go accepts: one it refuses (`a>x`, `a>1,b=-`) is [`Error::InvalidSelector`].
    #[error("label selector {selector:?}: the {operator:?} operator is not supported")]
    UnsupportedSelectorOperator {
        /// The selector as given.
        selector: String,
        /// `">"` or `"<"`.
        operator: &'static str,
    },

    /// An error from an `Indexer` implementation outside this crate.
    #[error(transparent)]
    Other(BoxError),
}

impl Error {
    /// Whether this is a lister's [`Error::NotFound`], the case a controller usually treats
    /// as "the object is gone" rather than as a failure.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

/// A key error as [`Error::Key`]; an error this crate boxed on its way through a
/// [`Sink`](kinformer_core::Sink) (see the `From` impl the other way) as itself again;
/// anything else as [`Error::Other`].
impl From<kinformer_core::Error> for Error {
    fn from(e: kinformer_core::Error) -> Self {
        use kinformer_core::Error as Core;
        match e {
            Core::InvalidKey { .. } | Core::MissingName | Core::SlashInName { .. } => Self::Key(e),
            Core::Other(boxed) => match boxed.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(other) => Self::Other(other),
            },
            other => Self::Other(Box::new(other)),
        }
    }
}

/// What a write through kinformer-core's [`Sink`](kinformer_core::Sink) reports: a key
/// error as itself, anything else (a failing index function) boxed in
/// [`kinformer_core::Error::Other`], from which it can be downcast back to this type.
impl From<Error> for kinformer_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Key(e) => e,
            other => Self::Other(Box::new(other)),
        }
    }
}
