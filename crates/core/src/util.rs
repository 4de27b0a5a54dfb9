//! Small pieces every layer needs the same way.

use std::any::Any;
use std::sync::Arc;

use crate::{Error, ObjectKey};

/// A boxed error from a layer below or beside kinformer: an HTTP client, a user's index
/// function or transform.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

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
    fn panic_message_reads_str_and_string_payloads() {
        let s: Box<dyn Any + Send> = Box::new("static");
        assert_eq!(panic_message(&*s), "static");
        let s: Box<dyn Any + Send> = Box::new(String::from("owned"));
        assert_eq!(panic_message(&*s), "owned");
        let s: Box<dyn Any + Send> = Box::new(7_u8);
        assert_eq!(panic_message(&*s), "(a panic payload that is not a string)");
    }
}
