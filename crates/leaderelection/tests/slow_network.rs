//! A Lease behind a network slow to set connections up (each new connection waits longer
//! than the request timeout before it reaches the API server, as TLS handshakes do on a
//! loaded machine): the lock's requests that time out still finish their connection, so
//! a later try finds one ready and the Lease is taken, instead of every try starting a
//! connection that the timeout then drops.
//!
//! Run with `cargo xtask test`.

use std::time::Duration;

use kinformer_leaderelection::{Attempt, Error, LeaseAttempt, LeaseLock, TokioClock};
use kinformer_testenv::ControlPlane;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_lease_is_taken_when_connections_take_longer_to_set_up_than_the_request_timeout() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("slow-connect").await.unwrap();
    let proxy = cp.proxy().unwrap();
    let client = proxy.client().unwrap();
    proxy.tcp().slow_connections(Duration::from_millis(800));
    let lock = LeaseLock::new(client, &ns, "slow", "me");
    let attempt = LeaseAttempt::new(
        &lock,
        Duration::from_secs(15),
        Duration::from_millis(300),
        &TokioClock,
    );
    let mut observed = None;
    let mut timed_out = 0;
    for _ in 0..15 {
        match attempt.try_acquire_or_renew(&mut observed).await {
            Attempt::Held => {
                assert!(timed_out >= 1, "the first try waits for a new connection");
                return;
            }
            Attempt::Failed(Error::Timeout(_)) => {
                timed_out += 1;
            }
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("the Lease was never taken: {timed_out} tries timed out");
}
