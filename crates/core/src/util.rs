//! Small pieces every layer needs the same way.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{Error, ObjectKey};

/// A boxed error from a layer below or beside kinformer: an HTTP client, a user's index
/// function or transform.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The future an async method of a swap-point trait returns: the one async idiom of
/// kinformer's layers (the same type as `futures::future::BoxFuture`).
///
/// Every swap-point trait is object safe, so that a layer can be held as `Arc<dyn Trait>`
/// and a decorator forwards a method in one line; its async methods therefore return a
/// future *value*. For calls made per list, watch, lease renewal or event
/// ([`ListerWatcher`], `Lock`, `EventSink`, [`Clock::sleep_until`](crate::Clock::sleep_until))
/// that value is a `BoxFuture`: an implementation writes `Box::pin(async move { .. })`.
/// The two calls made per item (a FIFO's pop and a work queue's get) return a future type
/// their crate names (`PopFuture`, `GetFuture`), which the built-in layers make without
/// allocating and any other implementation makes from a future with `from_future`.
///
/// [`ListerWatcher`]: https://docs.rs/kinformer-reflector/latest/kinformer_reflector/trait.ListerWatcher.html
///
/// ```
/// use kinformer_core::BoxFuture;
///
/// fn answer(n: &u32) -> BoxFuture<'_, u32> {
///     Box::pin(async move { *n * 2 })
/// }
/// # let _ = answer(&21);
/// ```
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Makes the key an object is stored and queued under (client-go's `KeyFunc`). The default
/// everywhere is [`meta_namespace_key`](crate::meta_namespace_key): `namespace/name`, or
/// `name` for cluster-scoped objects. The stores and the FIFOs take one.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{KeyFunc, ObjectKey};
///
/// // Key strings by themselves.
/// let by_value: KeyFunc<String> = Arc::new(|s: &String| ObjectKey::new(None, s));
/// assert_eq!(by_value(&"web-0".to_string())?.as_str(), "web-0");
/// # Ok::<(), kinformer_core::Error>(())
/// ```
pub type KeyFunc<K> = Arc<dyn Fn(&K) -> Result<ObjectKey, Error> + Send + Sync>;

/// Shows an error with its causes: `message: cause: root cause`. kinformer's errors print
/// their own message only and hand out their cause through `source()` (so callers can walk
/// and downcast it); logs use this to show the whole chain whatever the subscriber.
///
/// ```
/// use kinformer_core::ErrorChain;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("cannot load the kubeconfig")]
/// struct Load(#[source] std::io::Error);
///
/// let err = Load(std::io::Error::other("permission denied"));
/// assert_eq!(err.to_string(), "cannot load the kubeconfig");
/// assert_eq!(ErrorChain(&err).to_string(), "cannot load the kubeconfig: permission denied");
/// // In a log line: tracing::warn!(error = %ErrorChain(&err), "...");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    /// A cause whose message the text so far already holds is left out: many errors print
    /// their cause in their own message too (`#[error("request failed: {0}")]`), and a log
    /// line should say each thing once.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let message = c.to_string();
            if !text.contains(&message) {
                text.push_str(": ");
                text.push_str(&message);
            }
            cause = c.source();
        }
        f.write_str(&text)
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The message of a caught panic's payload: the `&str` or `String` that `panic!` was
/// given, or a placeholder. Used where kinformer catches a panic of user code (an event
/// handler, a reconcile function) to log it and go on.
///
/// ```
/// let payload = std::panic::catch_unwind(|| panic!("handler failed on {}", 7)).unwrap_err();
/// assert_eq!(kinformer_core::panic_message(&*payload), "handler failed on 7");
/// ```
pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic payload that is not a string)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_shows_every_cause_once() {
        let err = crate::Error::Other(Box::new(std::io::Error::other("disk full")));
        // `Other` is transparent: its message is its cause's, which has no cause.
        assert_eq!(ErrorChain(&err).to_string(), "disk full");
        let plain = std::io::Error::other("alone");
        assert_eq!(ErrorChain(&plain).to_string(), "alone");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("patch failed: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("reconcile failed")]
    struct Wraps(#[source] Repeats);

    #[test]
    fn error_chain_leaves_out_a_cause_the_message_already_shows() {
        let err = Wraps(Repeats(std::io::Error::other("conflict")));
        assert_eq!(
            ErrorChain(&err).to_string(),
            "reconcile failed: patch failed: conflict"
        );
    }

    #[test]
    fn panic_message_reads_str_and_string_payloads() {
        let s: Box<dyn Any + Send> = Box::new("static");
        assert_eq!(panic_message(&*s), "static");
        let s: Box<dyn Any + Send> = Box::new(String::from("owned"));
        assert_eq!(panic_message(&*s), "owned");
        let s: Box<dyn Any + Send> = Box::new(7_u8);
        assert_eq!(panic_message(&*s), "(a panic payload that is not a string)");
    }
}
