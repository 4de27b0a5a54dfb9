//! Where events are written: the [`EventSink`] trait (client-go's `EventSink`, of
//! `tools/events` and of `tools/record`) and its Kubernetes implementation.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::events::v1::Event;
use kinformer_core::BoxFuture;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;

/// Stores events: a broadcaster's only way out, and the swap point for tests or for
/// another destination.
///
/// `E` is the kind of Event: `events.k8s.io/v1` (the default, for the
/// [`Broadcaster`](crate::Broadcaster)) or core/v1 (for
/// [`record::Broadcaster`](crate::record::Broadcaster)). [`KubeSink`] is the default for
/// both. An implementation answers with the crate's [`Error`] so that the broadcaster can
/// tell, as client-go does, a refusal by the server ([`Error::Api`], not retried except as
/// noted there) from a failed transport ([`Error::Transport`], retried) and from a
/// request that cannot be built ([`Error::Request`], not retried).
pub trait EventSink<E = Event>: Send + Sync + 'static {
    /// Creates `event` in its namespace and returns what the server stored.
    fn create<'a>(&'a self, event: &'a E) -> BoxFuture<'a, Result<E, Error>>;

    /// Applies `patch`, a strategic-merge patch in JSON, to the event named
    /// `event.metadata.name` in its namespace, and returns the patched event. `event` is
    /// the whole event as the broadcaster has it, the patch already applied.
    ///
    /// The patches: for an `events.k8s.io/v1` series,
    /// `{"series":{"count":N,"lastObservedTime":"..."}}`; for a core/v1 repeat,
    /// `{"count":N,"lastTimestamp":"...","message":"..."}` (no `message` when it is empty).
    fn patch<'a>(&'a self, event: &'a E, patch: &'a [u8]) -> BoxFuture<'a, Result<E, Error>>;
}

/// A shared or boxed sink, so that the caller can keep a handle on it (to read what a test
/// sink recorded, say) or choose it at run time.
macro_rules! forward_pointers {
    ($($ty:ty),*) => {$(
        impl<E, S: EventSink<E> + ?Sized> EventSink<E> for $ty {
            fn create<'a>(&'a self, event: &'a E) -> BoxFuture<'a, Result<E, Error>> {
                (**self).create(event)
            }
            fn patch<'a>(&'a self, event: &'a E, patch: &'a [u8]) -> BoxFuture<'a, Result<E, Error>> {
                (**self).patch(event, patch)
            }
        }
    )*};
}

forward_pointers!(Arc<S>, Box<S>);

mod sealed {
    pub trait Sealed {}
    impl Sealed for k8s_openapi::api::events::v1::Event {}
    impl Sealed for k8s_openapi::api::core::v1::Event {}
}

/// The two kinds of Kubernetes Event this crate writes: `events.k8s.io/v1`'s
/// ([`k8s_openapi::api::events::v1::Event`]) and core/v1's
/// ([`k8s_openapi::api::core::v1::Event`]). Sealed: [`KubeSink`] writes these two, and the
/// broadcasters log them without their free text.
pub trait EventObject:
    sealed::Sealed
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The event in a log line: type, reason, which object, the event's own name and its
    /// count. Never the note or message, which are free text.
    #[doc(hidden)]
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// A field as Go prints it: absent is empty.
fn s(v: Option<&String>) -> &str {
    v.map_or("", String::as_str)
}

impl EventObject for Event {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let regarding = self.regarding.as_ref();
        write!(
            f,
            "{} {}/{} about {} {} (event {}/{}, count {})",
            s(self.type_.as_ref()),
            s(self.reason.as_ref()),
            s(self.action.as_ref()),
            s(regarding.and_then(|r| r.kind.as_ref())),
            s(regarding.and_then(|r| r.name.as_ref())),
            s(self.metadata.namespace.as_ref()),
            s(self.metadata.name.as_ref()),
            self.series.as_ref().map_or(1, |series| series.count),
        )
    }
}

impl EventObject for k8s_openapi::api::core::v1::Event {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let object = &self.involved_object;
        write!(
            f,
            "{} {} about {} {} (event {}/{}, count {})",
            s(self.type_.as_ref()),
            s(self.reason.as_ref()),
            s(object.kind.as_ref()),
            s(object.name.as_ref()),
            s(self.metadata.namespace.as_ref()),
            s(self.metadata.name.as_ref()),
            self.count.unwrap_or(1),
        )
    }
}

/// An event in a log line (see [`EventObject::describe`]).
pub(crate) struct Described<'a, E>(pub(crate) &'a E);

impl<E: EventObject> fmt::Display for Described<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.describe(f)
    }
}

/// Writes events to the API server through a [`kube::Client`] (client-go's
/// `EventSinkImpl`, of `tools/events` and of `tools/record`): `events.k8s.io/v1` events
/// to that group's `events`, core/v1 events to the core group's.
///
/// The client needs `create` and `patch` on that `events` resource in every namespace it
/// records events for (and in `default` for cluster-scoped objects).
#[derive(Clone)]
pub struct KubeSink {
    client: kube::Client,
}

impl KubeSink {
    /// A sink writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api<E: EventObject>(&self, event: &E) -> Result<Api<E>, Error> {
        match event.meta().namespace.as_deref() {
            Some(ns) if !ns.is_empty() => Ok(Api::namespaced(self.client.clone(), ns)),
            _ => Err(Error::Request("an event needs a namespace".into())),
        }
    }
}

impl fmt::Debug for KubeSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeSink").finish_non_exhaustive()
    }
}

impl<E: EventObject> EventSink<E> for KubeSink {
    fn create<'a>(&'a self, event: &'a E) -> BoxFuture<'a, Result<E, Error>> {
        Box::pin(async move {
            let api = self.api(event)?;
            Ok(api.create(&PostParams::default(), event).await?)
        })
    }

    fn patch<'a>(&'a self, event: &'a E, patch: &'a [u8]) -> BoxFuture<'a, Result<E, Error>> {
        Box::pin(async move {
            let api = self.api(event)?;
            let name = event
                .meta()
                .name
                .as_deref()
                .ok_or_else(|| Error::Request("an event to patch needs a name".into()))?;
            let patch: serde_json::Value =
                serde_json::from_slice(patch).map_err(|err| Error::Request(Box::new(err)))?;
            Ok(api
                .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await?)
        })
    }
}

/// Forwards [`EventSink`](crate::EventSink) methods to a field: inside the trait's `impl` for a
/// decorator, `forward_event_sink!(K, field: all)` writes every method as a call of the same
/// method on `self.field`; `forward_event_sink!(K, field: method, ..)` writes only those named,
/// for a decorator that writes the others itself. `all` is: `create`, `patch`.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use k8s_openapi::api::events::v1::Event;
/// use kinformer_events::{BoxFuture, Error, EventSink, forward_event_sink};
///
/// /// Counts the events created; patches are the wrapped sink's.
/// struct CountCreates<S> {
///     inner: S,
///     created: AtomicUsize,
/// }
/// impl<S: EventSink<Event>> EventSink<Event> for CountCreates<S> {
///     fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<Event, Error>> {
///         self.created.fetch_add(1, Ordering::Relaxed);
///         self.inner.create(event)
///     }
///     forward_event_sink!(Event, inner: patch);
/// }
///
/// /// A sink that stores nothing and answers with what it was given.
/// struct Echo;
/// impl EventSink<Event> for Echo {
///     fn create<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, Result<Event, Error>> {
///         Box::pin(std::future::ready(Ok(event.clone())))
///     }
///     fn patch<'a>(&'a self, event: &'a Event, _: &'a [u8]) -> BoxFuture<'a, Result<Event, Error>> {
///         Box::pin(std::future::ready(Ok(event.clone())))
///     }
/// }
///
/// let sink = CountCreates { inner: Echo, created: AtomicUsize::new(0) };
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// runtime.block_on(sink.create(&Event::default()))?;
/// runtime.block_on(sink.patch(&Event::default(), b"{}"))?;
/// assert_eq!(sink.created.load(Ordering::Relaxed), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[macro_export]
macro_rules! forward_event_sink {
    ($item:ty, $field:tt: all) => {
        $crate::forward_event_sink!($item, $field: create, patch);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_event_sink!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, create) => {
        fn create<'a>(&'a self, event: &'a $item) -> $crate::BoxFuture<'a, ::std::result::Result<$item, $crate::Error>> {
            self.$f.create(event)
        }
    };
    (@method $item:ty, $f:tt, patch) => {
        fn patch<'a>(
            &'a self,
            event: &'a $item,
            patch: &'a [u8],
        ) -> $crate::BoxFuture<'a, ::std::result::Result<$item, $crate::Error>> {
            self.$f.patch(event, patch)
        }
    };
}
