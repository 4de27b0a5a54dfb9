//! What a reflector's error handler saw.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use kinformer_reflector::Error;

/// Every error the handler was given, in order.
#[derive(Clone, Default)]
pub struct Errors(Arc<Mutex<Vec<Seen>>>);

/// One error: when, its status code, whether the server was unreachable, its text.
struct Seen {
    at: Instant,
    code: Option<u16>,
    unreachable: bool,
    text: String,
}

impl Errors {
    /// A handler for [`Reflector::on_watch_error`](kinformer_reflector::Reflector::on_watch_error)
    /// that records each error and still logs it, as the default handler does.
    pub fn handler(&self) -> impl Fn(&Error) + Send + Sync + 'static {
        let me = self.clone();
        move |e: &Error| {
            tracing::warn!(error = %e, "reflector error");
            me.0.lock().unwrap().push(Seen {
                at: Instant::now(),
                code: e.status_code(),
                unreachable: e.is_unreachable(),
                text: e.to_string(),
            });
        }
    }

    /// `f` of each error seen, in order.
    fn each<T>(&self, f: impl FnMut(&Seen) -> Option<T>) -> Vec<T> {
        self.0.lock().unwrap().iter().filter_map(f).collect()
    }

    pub fn codes(&self) -> Vec<Option<u16>> {
        self.each(|e| Some(e.code))
    }

    pub fn times(&self) -> Vec<Instant> {
        self.each(|e| Some(e.at))
    }

    pub fn unreachable_times(&self) -> Vec<Instant> {
        self.each(|e| e.unreachable.then_some(e.at))
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn texts(&self) -> Vec<String> {
        self.each(|e| Some(e.text.clone()))
    }
}
