//! A background task that runs until asked to stop.

use std::fmt;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A task started on the Tokio runtime with a cancellation token: what
/// [`ReflectorHandle`](crate::ReflectorHandle) and the informer's handle are made of.
///
/// [`stop`](Self::stop) cancels the task and waits for it. Dropping the handle leaves the
/// task running, as dropping a Tokio `JoinHandle` does (and as a client-go informer runs
/// until its stop channel closes): `informer.start()?;` starts an informer that keeps
/// running, with no way left to stop it or wait for it other than ending the runtime. The
/// handle is `#[must_use]` for that reason, so the compiler warns where it can see a
/// handle thrown away (not behind `?`, which the lint does not look through).
///
/// ```compile_fail
/// use kinformer_reflector::Reflector;
/// # use kinformer_reflector::BoxFuture;
/// # use k8s_openapi::api::core::v1::Pod;
/// # use kinformer_reflector::{Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
/// # struct Quiet;
/// # impl ListerWatcher<Pod> for Quiet {
/// #     fn list<'a>(&'a self, _: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<Pod>, Error>> { Box::pin(std::future::pending()) }
/// #     fn watch<'a>(&'a self, _: &'a WatchOptions) -> BoxFuture<'a, Result<WatchStream<Pod>, Error>> { Box::pin(std::future::pending()) }
/// #     fn supports_watch_list(&self) -> bool { false }
/// # }
/// # use std::sync::Arc;
/// # struct Nothing;
/// # impl kinformer_core::Sink<k8s_openapi::api::core::v1::Pod> for Nothing {
/// #     fn add(&self, _: Arc<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn update(&self, _: Arc<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn delete(&self, _: Arc<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn replace(&self, _: kinformer_core::ListPart<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn resync(&self) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn bookmark(&self, _: &str) -> Result<(), kinformer_core::Error> { Ok(()) }
/// # }
/// #[deny(unused_must_use)] // rustdoc allows `unused` lints in examples; crates do not
/// async fn run() {
///     Reflector::new(Quiet, Nothing).spawn().unwrap(); // error: unused handle
/// }
/// ```
///
/// Keep it for as long as you may want to stop the task:
///
/// ```
/// # use kinformer_reflector::Reflector;
/// # use kinformer_reflector::BoxFuture;
/// # use k8s_openapi::api::core::v1::Pod;
/// # use kinformer_reflector::{Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
/// # struct Quiet;
/// # impl ListerWatcher<Pod> for Quiet {
/// #     fn list<'a>(&'a self, _: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<Pod>, Error>> { Box::pin(std::future::pending()) }
/// #     fn watch<'a>(&'a self, _: &'a WatchOptions) -> BoxFuture<'a, Result<WatchStream<Pod>, Error>> { Box::pin(std::future::pending()) }
/// #     fn supports_watch_list(&self) -> bool { false }
/// # }
/// # use std::sync::Arc;
/// # struct Nothing;
/// # impl kinformer_core::Sink<k8s_openapi::api::core::v1::Pod> for Nothing {
/// #     fn add(&self, _: Arc<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn update(&self, _: Arc<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn delete(&self, _: Arc<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn replace(&self, _: kinformer_core::ListPart<k8s_openapi::api::core::v1::Pod>) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn resync(&self) -> Result<(), kinformer_core::Error> { Ok(()) }
/// #     fn bookmark(&self, _: &str) -> Result<(), kinformer_core::Error> { Ok(()) }
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let handle = Reflector::new(Quiet, Nothing).spawn()?;
/// // ... the reflector runs until:
/// handle.stop().await?;
/// # Ok::<(), kinformer_reflector::Error>(())
/// # }).unwrap();
/// ```
#[must_use = "the handle is the way to stop the task and wait for it; dropping it leaves the task running"]
pub struct TaskHandle<E> {
    cancel: CancellationToken,
    task: JoinHandle<Result<(), E>>,
}

impl<E> fmt::Debug for TaskHandle<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("cancelled", &self.cancel.is_cancelled())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<E> TaskHandle<E> {
    /// Wraps `task`, which ends once `cancel` is cancelled.
    pub fn new(cancel: CancellationToken, task: JoinHandle<Result<(), E>>) -> Self {
        Self { cancel, task }
    }

    /// The token that stops the task when cancelled.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Whether the task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Cancels the task and waits until it has ended; returns what it returned (`Ok` if
    /// the runtime dropped it first).
    ///
    /// # Errors
    /// The task's error.
    ///
    /// # Panics
    /// Resumes a panic of the task.
    pub async fn stop(self) -> Result<(), E> {
        self.cancel.cancel();
        match self.task.await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}
