use kinformer_core::BoxError;

/// The one error type of kinformer-deltafifo.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key function rejected an object (no name, a `/` in a name, or whatever a custom
    /// key function refuses). Nothing was queued: fix or drop the object.
    #[error("the key function rejected an object")]
    Key(#[source] kinformer_core::Error),

    /// The transform failed on an incoming object. Nothing was queued for this call.
    #[error("the transform failed")]
    Transform(#[source] BoxError),

    /// The FIFO is closed and has nothing left to pop: the consumer should stop.
    #[error("the FIFO is closed")]
    Closed,

    /// A builder was given options that do not go together (see the message).
    #[error("invalid FIFO configuration: {0}")]
    Config(&'static str),
}

/// What the reflector sees through [`kinformer_core::Sink`]: key errors stay core key errors,
/// a closed FIFO is [`kinformer_core::Error::Closed`], anything else is boxed.
impl From<Error> for kinformer_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Key(inner) => inner,
            Error::Closed => kinformer_core::Error::Closed,
            Error::Transform(inner) => kinformer_core::Error::Other(inner),
            other @ Error::Config(_) => kinformer_core::Error::Other(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_to_core_keeps_key_errors_and_closed() {
        let core: kinformer_core::Error = Error::Key(kinformer_core::Error::MissingName).into();
        assert!(matches!(core, kinformer_core::Error::MissingName));
        let core: kinformer_core::Error = Error::Closed.into();
        assert!(matches!(core, kinformer_core::Error::Closed));
        let core: kinformer_core::Error = Error::Transform("boom".into()).into();
        assert_eq!(core.to_string(), "boom");
        let core: kinformer_core::Error = Error::Config("bad").into();
        assert!(core.to_string().contains("bad"));
    }
}
