use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use kinformer_core::{BoxFuture, Sink};

use crate::{Error, Item, Popped};

/// The queue the informer pops from; the reflector writes into it through its
/// [`Sink`] supertrait.
///
/// [`DeltaFifo`](crate::DeltaFifo) and [`InOrderFifo`](crate::InOrderFifo) implement it;
/// an informer written against `Arc<dyn FifoQueue<K>>` takes either, or your own. The
/// trait is object safe: the one required way to pop is [`pop_async`](Self::pop_async),
/// which returns a [`PopFuture`] (the built-in FIFOs make it without allocating; yours
/// makes it from any future with [`PopFuture::from_future`]); the blocking
/// [`pop`](Self::pop), [`try_pop`](Self::try_pop) and [`pop_with`](Self::pop_with) are
/// built on it.
///
/// Contract, as client-go's `Queue`:
/// - a pop returns the oldest item, and waits while there is none;
/// - once [`close`](Self::close)d, a pop still drains what is queued, then fails with
///   [`Error::Closed`]; writes fail with `Closed` (client-go accepts them), so that a
///   reflector feeding a stopped informer stops too;
/// - [`has_synced`](Self::has_synced) turns true after the first add, update or delete, or
///   once every entry queued by the first replace has been popped *and processed* (its
///   [`Popped`] dropped);
/// - a pop future dropped before it resolves pops nothing (cancel safety).
///
/// Pops are meant for one consumer (the informer's loop): two consumers could apply two
/// versions of one object in either order.
pub trait FifoQueue<K>: Sink<K> {
    /// Pops the oldest item, waiting without blocking the thread while the queue is
    /// empty: `queue.pop_async().await`. Safe on a tokio worker. Resolves to
    /// [`Error::Closed`] once the queue is closed and empty.
    ///
    /// Cancel safe: dropping the future before it resolves pops nothing.
    fn pop_async(&self) -> PopFuture<'_, K>;

    /// Pops the oldest item, blocking the calling thread while the queue is empty.
    /// For threads only: in async code use [`pop_async`](Self::pop_async).
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and empty.
    fn pop(&self) -> Result<Popped<'_, K>, Error> {
        let waker = THREAD_WAKER.with(Waker::clone);
        let mut cx = Context::from_waker(&waker);
        let mut future = self.pop_async();
        loop {
            match Pin::new(&mut future).poll(&mut cx) {
                Poll::Ready(result) => return result,
                // A spurious unpark only costs another poll.
                Poll::Pending => thread::park(),
            }
        }
    }

    /// Pops the oldest item if there is one, without waiting: `Ok(None)` when the queue
    /// is empty and open. (The default polls [`pop_async`](Self::pop_async) once and drops
    /// it, which the cancel-safety rule makes exact.)
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and empty.
    fn try_pop(&self) -> Result<Option<Popped<'_, K>>, Error> {
        // A no-op waker: nobody waits for this call.
        let mut future = self.pop_async();
        match Pin::new(&mut future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(popped)) => Ok(Some(popped)),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Ok(None),
        }
    }

    /// Pops the oldest item (blocking, as [`pop`](Self::pop)), hands it to `process`
    /// with its `is_in_initial_list` flag, marks it processed when `process` returns,
    /// and returns what `process` returned (client-go's `Pop(PopProcessFunc)`). The FIFO's
    /// lock is not held while `process` runs. Not on `dyn FifoQueue` (it is generic): there,
    /// [`pop`](Self::pop) and drop the [`Popped`] once applied.
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and empty.
    fn pop_with<R>(&self, process: impl FnOnce(&Item<K>, bool) -> R) -> Result<R, Error>
    where
        Self: Sized,
    {
        let popped = self.pop()?;
        let result = process(popped.item(), popped.is_in_initial_list());
        drop(popped);
        Ok(result)
    }

    /// Whether the initial list has been popped and processed (see the trait docs).
    fn has_synced(&self) -> bool;

    /// Closes the queue: writes fail from now on, pops drain what is left and then fail
    /// with [`Error::Closed`]; a pop waiting on an empty queue is woken and fails at once.
    fn close(&self);

    /// Whether [`close`](Self::close) was called.
    fn is_closed(&self) -> bool;

    /// How many entries wait to be popped (a DeltaFIFO counts keys, the in-order FIFO
    /// events and atomic entries).
    fn len(&self) -> usize;

    /// Whether nothing waits to be popped.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Wakes a thread parked in [`FifoQueue::pop`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    /// One waker per thread, so a blocking pop allocates nothing.
    static THREAD_WAKER: Waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
}

/// The future of [`FifoQueue::pop_async`]: resolves to the oldest item, or to
/// [`Error::Closed`] once the queue is closed and empty.
///
/// The built-in FIFOs return it without allocating. A [`FifoQueue`] of your own wraps its
/// own future with [`from_future`](Self::from_future); a decorator returns the one of the
/// queue it wraps.
#[must_use = "futures do nothing unless polled"]
pub struct PopFuture<'q, K> {
    inner: PopInner<'q, K>,
}

enum PopInner<'q, K> {
    Native(&'q dyn PollPop<K>),
    Boxed(BoxFuture<'q, Result<Popped<'q, K>, Error>>),
    /// Completed: polling again must not pop another item.
    Finished,
}

impl<'q, K> PopFuture<'q, K> {
    /// Wraps any future (boxing it): for [`FifoQueue`] implementations other than this
    /// crate's. One that pops through a poll function of its own passes
    /// `std::future::poll_fn(move |cx| self.poll_pop(cx))`.
    pub fn from_future(
        future: impl Future<Output = Result<Popped<'q, K>, Error>> + Send + 'q,
    ) -> Self {
        Self {
            inner: PopInner::Boxed(Box::pin(future)),
        }
    }

    pub(crate) fn native(queue: &'q dyn PollPop<K>) -> Self {
        Self {
            inner: PopInner::Native(queue),
        }
    }
}

impl<'q, K> Future for PopFuture<'q, K> {
    type Output = Result<Popped<'q, K>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            PopInner::Native(queue) => queue.poll_pop(cx),
            PopInner::Boxed(future) => future.as_mut().poll(cx),
            // A completed future stays pending rather than popping a second item.
            PopInner::Finished => return Poll::Pending,
        };
        if polled.is_ready() {
            this.inner = PopInner::Finished;
        }
        polled
    }
}

impl<K> fmt::Debug for PopFuture<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PopFuture").finish_non_exhaustive()
    }
}

/// The queue side of [`PopFuture`]'s native form: pops the oldest item if there is one,
/// otherwise fails with [`Error::Closed`] when closed or registers `cx`'s waker (woken by
/// the next write or by `close`) and returns `Pending`.
pub(crate) trait PollPop<K>: Sync {
    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Result<Popped<'_, K>, Error>>;
}

/// Forwards [`FifoQueue`](crate::FifoQueue) methods to a field: inside the trait's `impl` for a
/// decorator, `forward_fifo_queue!(K, field: all)` writes every method as a call of the same
/// method on `self.field`; `forward_fifo_queue!(K, field: method, ..)` writes only those named,
/// for a decorator that writes the others itself. `all` is: `pop_async`, `pop`, `try_pop`,
/// `has_synced`, `close`, `is_closed`, `len`, `is_empty`.
#[macro_export]
macro_rules! forward_fifo_queue {
    ($item:ty, $field:tt: all) => {
        $crate::forward_fifo_queue!($item, $field: pop_async, pop, try_pop, has_synced, close, is_closed, len, is_empty);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_fifo_queue!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, pop_async) => {
        fn pop_async(&self) -> $crate::PopFuture<'_, $item> {
            self.$f.pop_async()
        }
    };
    (@method $item:ty, $f:tt, pop) => {
        fn pop(&self) -> ::std::result::Result<$crate::Popped<'_, $item>, $crate::Error> {
            self.$f.pop()
        }
    };
    (@method $item:ty, $f:tt, try_pop) => {
        fn try_pop(&self) -> ::std::result::Result<::std::option::Option<$crate::Popped<'_, $item>>, $crate::Error> {
            self.$f.try_pop()
        }
    };
    (@method $item:ty, $f:tt, has_synced) => {
        fn has_synced(&self) -> bool {
            self.$f.has_synced()
        }
    };
    (@method $item:ty, $f:tt, close) => {
        fn close(&self) {
            self.$f.close()
        }
    };
    (@method $item:ty, $f:tt, is_closed) => {
        fn is_closed(&self) -> bool {
            self.$f.is_closed()
        }
    };
    (@method $item:ty, $f:tt, len) => {
        fn len(&self) -> usize {
            self.$f.len()
        }
    };
    (@method $item:ty, $f:tt, is_empty) => {
        fn is_empty(&self) -> bool {
            self.$f.is_empty()
        }
    };
}
