use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use kinformer_core::Sink;

use crate::{Error, Item, Popped};

/// The queue the informer pops from; the reflector writes into it through its
/// [`Sink`] supertrait.
///
/// [`DeltaFifo`](crate::DeltaFifo) and [`InOrderFifo`](crate::InOrderFifo) implement it;
/// an informer written against `Arc<dyn FifoQueue<K>>` takes either, or your own. The
/// trait is object safe: the one required way to pop is [`poll_pop`](Self::poll_pop),
/// from which the blocking [`pop`](Self::pop) and, through [`FifoQueueExt`], the async
/// [`pop_async`](FifoQueueExt::pop_async) and the closure-taking
/// [`pop_with`](FifoQueueExt::pop_with) are built.
///
/// Contract, as client-go's `Queue`:
/// - a pop returns the oldest item, and waits while there is none;
/// - once [`close`](Self::close)d, a pop still drains what is queued, then fails with
///   [`Error::Closed`]; writes fail with `Closed` (client-go accepts them), so that a
///   reflector feeding a stopped informer stops too;
/// - [`has_synced`](Self::has_synced) turns true after the first add, update or delete, or
///   once every entry queued by the first replace has been popped *and processed* (its
///   [`Popped`] dropped).
///
/// Pops are meant for one consumer (the informer's loop): two consumers could apply two
/// versions of one object in either order.
pub trait FifoQueue<K>: Sink<K> {
    /// Pops the oldest item if there is one. Otherwise returns [`Error::Closed`] when
    /// closed, or registers `cx`'s waker, to be woken by the next write or by
    /// [`close`](Self::close), and returns `Pending`. Never blocks.
    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Result<Popped<'_, K>, Error>>;

    /// Pops the oldest item, blocking the calling thread while the queue is empty.
    /// For threads only: in async code use [`FifoQueueExt::pop_async`].
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and empty.
    fn pop(&self) -> Result<Popped<'_, K>, Error> {
        let waker = THREAD_WAKER.with(Waker::clone);
        let mut cx = Context::from_waker(&waker);
        loop {
            match self.poll_pop(&mut cx) {
                Poll::Ready(result) => return result,
                // A spurious unpark only costs another poll.
                Poll::Pending => thread::park(),
            }
        }
    }

    /// Pops the oldest item if there is one, without waiting: `Ok(None)` when the queue
    /// is empty and open.
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and empty.
    fn try_pop(&self) -> Result<Option<Popped<'_, K>>, Error> {
        // A no-op waker: nobody waits for this call.
        match self.poll_pop(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(popped)) => Ok(Some(popped)),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Ok(None),
        }
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

/// The ways to pop built on [`FifoQueue::poll_pop`], for every queue including
/// `dyn FifoQueue<K>`.
pub trait FifoQueueExt<K>: FifoQueue<K> {
    /// Pops the oldest item, waiting without blocking the thread while the queue is
    /// empty: `queue.pop_async().await`. Safe on a tokio worker.
    ///
    /// Cancel safe: dropping the future before it resolves pops nothing.
    fn pop_async(&self) -> PopFuture<'_, K, Self> {
        PopFuture {
            queue: self,
            _item: PhantomData,
        }
    }

    /// Pops the oldest item (blocking, as [`FifoQueue::pop`]), hands it to `process`
    /// with its `is_in_initial_list` flag, marks it processed when `process` returns,
    /// and returns what `process` returned. The FIFO's lock is not held while
    /// `process` runs.
    ///
    /// # Errors
    /// [`Error::Closed`] once the queue is closed and empty.
    fn pop_with<R>(&self, process: impl FnOnce(&Item<K>, bool) -> R) -> Result<R, Error> {
        let popped = self.pop()?;
        let result = process(popped.item(), popped.is_in_initial_list());
        drop(popped);
        Ok(result)
    }
}

impl<K, Q: FifoQueue<K> + ?Sized> FifoQueueExt<K> for Q {}

/// The future of [`FifoQueueExt::pop_async`].
#[must_use = "futures do nothing unless awaited"]
pub struct PopFuture<'q, K, Q: ?Sized> {
    queue: &'q Q,
    _item: PhantomData<fn() -> K>,
}

impl<'q, K: 'q, Q: FifoQueue<K> + ?Sized> Future for PopFuture<'q, K, Q> {
    type Output = Result<Popped<'q, K>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let queue: &'q Q = self.queue;
        queue.poll_pop(cx)
    }
}
