//! `pop_async` for the informer's task: it waits without blocking a tokio worker, close
//! wakes it, and dropping it pops nothing.

use kinformer_core::{ListPart, Sink};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::*;
use kinformer_deltafifo::{DeltaFifo, Error, FifoQueue, InOrderFifo, Item};

/// Runs `fut` on a single-threaded runtime on its own thread; fails instead of hanging.
fn on_current_thread(fut: impl std::future::Future<Output = ()> + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(fut);
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the runtime's only thread was blocked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the async code panicked"),
    }
}

#[test]
fn an_async_pop_waits_without_blocking_the_runtime() {
    // One thread runs both tasks: a blocking pop would starve the producer forever.
    on_current_thread(async {
        let fifo = Arc::new(DeltaFifo::new(None));
        let consumer = tokio::spawn({
            let fifo = Arc::clone(&fifo);
            async move {
                let p = fifo.pop_async().await.unwrap();
                show_item(p.item())
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        fifo.add(obj("a", 1)).unwrap();
        assert_eq!(consumer.await.unwrap(), s(&["Added a=1"]));
    });
}

#[test]
fn close_wakes_a_pending_async_pop() {
    on_current_thread(async {
        let fifo = Arc::new(InOrderFifo::<Obj>::atomic());
        let consumer = tokio::spawn({
            let fifo = Arc::clone(&fifo);
            async move { matches!(fifo.pop_async().await, Err(Error::Closed)) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        fifo.close();
        assert!(consumer.await.unwrap());
    });
}

#[test]
fn a_dropped_pop_future_pops_nothing() {
    on_current_thread(async {
        let fifo = DeltaFifo::new(None);
        let timed_out = tokio::time::timeout(Duration::from_millis(10), fifo.pop_async()).await;
        assert!(timed_out.is_err());
        fifo.add(obj("a", 1)).unwrap();
        assert_eq!(fifo.len(), 1, "the abandoned pop took nothing");
        let p = fifo.pop_async().await.unwrap();
        assert_eq!(show_item(p.item()), s(&["Added a=1"]));
    });
}

/// The informer's loop, written once against the trait object.
async fn informer_loop(queue: Arc<dyn FifoQueue<Obj>>, store: Arc<Store>) -> usize {
    let mut pops = 0;
    loop {
        match queue.pop_async().await {
            Ok(p) => {
                store.apply(p.item());
                pops += 1;
            }
            Err(Error::Closed) => return pops,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn reflector_and_informer_tasks_share_a_fifo_on_a_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let fifos: [Arc<dyn FifoQueue<Obj>>; 2] = [
            Arc::new(DeltaFifo::new(None)),
            Arc::new(InOrderFifo::atomic()),
        ];
        for fifo in fifos {
            let store = Arc::new(Store::default());
            let informer = tokio::spawn(informer_loop(Arc::clone(&fifo), Arc::clone(&store)));
            let reflector = tokio::spawn({
                let fifo = Arc::clone(&fifo);
                async move {
                    fifo.replace(ListPart::whole(
                        (0..100).map(|i| obj(&format!("k{i}"), 0)).collect(),
                        "1",
                    ))
                    .unwrap();
                    for round in 1..=10 {
                        for i in 0..100 {
                            fifo.update(obj(&format!("k{i}"), round)).unwrap();
                        }
                        tokio::task::yield_now().await;
                    }
                }
            });
            reflector.await.unwrap();
            while !fifo.has_synced() || !fifo.is_empty() {
                tokio::task::yield_now().await;
            }
            fifo.close();
            assert!(informer.await.unwrap() > 0);
            let snap = store.snapshot();
            assert_eq!(snap.len(), 100);
            assert!(snap.values().all(|v| *v == 10));
        }
    });
}

#[test]
fn the_pop_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let fifo: Arc<dyn FifoQueue<Obj>> = Arc::new(DeltaFifo::new(None));
    let fut = fifo.pop_async();
    assert_send(&fut);
    drop(fut);
    fifo.add(obj("a", 1)).unwrap();
    let p = fifo.pop().unwrap();
    assert_send(&p);
    assert!(matches!(p.item(), Item::Deltas { .. }));
}
