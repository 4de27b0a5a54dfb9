//! Polling waits, and the timing of what was seen.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::pods::truth;
use super::sink::StateSink;

/// How long a test waits for one step of a run.
pub const MINUTE: Duration = Duration::from_secs(60);

/// Waits until the sink holds exactly what the API server holds.
pub async fn converge(sink: &StateSink, api: &Api<Pod>, limit: Duration) {
    let start = Instant::now();
    loop {
        let want = truth(api).await;
        if sink.objects() == want {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "the sink did not converge within {limit:?}:\n sink: {:?}\n server: {:?}",
            sink.objects(),
            want
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts that the first `n` gaps between consecutive `times` follow the reflector's
/// default backoff, capped at `cap` seconds: gap `i` lies in `[d, 2·d + 0.5)` s with
/// `d = min(0.8·2^i, cap)` (the delay doubles from 800 ms, its jitter adds up to as much
/// again; half a second for scheduling). The cap is 30 s for a server that answers with
/// errors and 1 s for one that cannot be reached. Returns all the gaps, in seconds.
pub fn assert_doubling_backoff(times: &[Instant], n: usize, cap: f64) -> Vec<f64> {
    let g: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    assert!(g.len() >= n, "want {n} gaps, got {g:?}");
    for (i, gap) in g.iter().take(n).enumerate() {
        let lo = (0.8 * 2f64.powi(i as i32)).min(cap);
        assert!(
            *gap >= lo && *gap < 2.0 * lo + 0.5,
            "gap {i}: {gap} s, want [{lo}, {}) s: {g:?}",
            2.0 * lo
        );
    }
    g
}
