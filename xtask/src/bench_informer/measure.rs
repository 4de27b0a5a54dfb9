//! What a run measures: sync time, CPU time, peak and settled RSS, event latency, churn,
//! and the statistics the report and the charts take of them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::Opts;
use super::contenders::{After, Binaries, Contender, RUN_TIMEOUT, Running};
use crate::bench::median;
use crate::progress::Step;

/// The label the latency loop sets (the contenders read it).
const SEQ_LABEL: &str = "kinformer-bench/seq";
/// A second label that makes every patch a change, also when a pod gets a sequence
/// number it had before (from an earlier contender's round).
const ROUND_LABEL: &str = "kinformer-bench/round";

/// What the runs on one pod count share: the runtime that patches, the programs, the
/// control plane, the pods (their namespace and names) and the options.
pub(super) struct Setup<'a> {
    pub(super) rt: &'a tokio::runtime::Runtime,
    pub(super) bins: &'a Binaries,
    pub(super) cp: &'a kinformer_testenv::ControlPlane,
    pub(super) api: &'a Api<Pod>,
    pub(super) ns: &'a str,
    pub(super) names: &'a [String],
    pub(super) opts: &'a Opts,
}

impl Setup<'_> {
    /// Starts `c` on these pods, to do `after` after its sync.
    fn spawn(&self, c: Contender, strip: bool, after: After) -> anyhow::Result<Running> {
        Running::spawn(
            self.bins,
            c,
            self.cp.kubeconfig(),
            self.ns,
            self.names.len(),
            strip,
            after,
        )
    }
}

/// One sync run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    /// Spawn to result line, as this driver saw it.
    pub(super) spawn_ms: f64,
    /// Peak RSS right after the sync.
    pub(super) rss_kib: f64,
    /// User + system CPU time of the contender's process up to its result line.
    pub(super) cpu_ms: f64,
    /// `VmRSS` two seconds after the result line.
    pub(super) settled_kib: f64,
}

/// Event latencies of one contender.
#[derive(Debug, Default)]
pub(super) struct Latencies {
    /// Handler time − the time the patch request was sent, ms, sorted.
    pub(super) from_send: Vec<f64>,
    /// Handler time − the time the patch's response arrived, ms, sorted.
    pub(super) from_ack: Vec<f64>,
    pub(super) patched: usize,
}

/// (pods, managedFields stripped, contender)
pub(super) type Key = (usize, bool, Contender);

/// One churn step of one contender.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChurnStep {
    /// Patches per second asked for.
    pub(super) target: usize,
    /// Patches per second the generator reached (first send to last send).
    pub(super) achieved: f64,
    /// Updates per second the handler saw (first send to last sighting).
    pub(super) handled: f64,
    /// p99 from send to handler, ms.
    pub(super) p99_ms: f64,
    pub(super) sent: usize,
    pub(super) seen: usize,
}

/// Bytes per pod on the wire, uncompressed, in each format: `[protobuf, JSON]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct WireBytes {
    /// One list of every pod (what List+Watch reads).
    pub(super) list: [f64; 2],
    /// A streaming list up to its `k8s.io/initial-events-end` bookmark (what both
    /// informers sync with by default): an event envelope around each pod.
    pub(super) stream: [f64; 2],
}

/// The `Accept` header of each format: client-go's typed clients' for protobuf.
const ACCEPT: [&str; 2] = [
    "application/vnd.kubernetes.protobuf,application/json",
    "application/json",
];

/// Lists the pods and streams them once in each format, and divides the bytes by the
/// number of pods.
pub(super) fn wire_bytes(setup: &Setup<'_>) -> anyhow::Result<WireBytes> {
    let n = setup.names.len();
    let step = Step::start(format!("bytes on the wire per pod ({n} pods)"));
    let client = setup.api.clone().into_client();
    let mut out = WireBytes {
        list: [f64::NAN; 2],
        stream: [f64::NAN; 2],
    };
    for (i, accept) in ACCEPT.into_iter().enumerate() {
        let (list, stream) =
            bytes_per_object(setup.rt, &client, setup.api.resource_url(), n, accept)?;
        out.list[i] = list;
        out.stream[i] = stream;
    }
    step.finish(&format!(
        "list {:.0} / {:.0} B, streaming list {:.0} / {:.0} B (protobuf / JSON)",
        out.list[0], out.list[1], out.stream[0], out.stream[1]
    ));
    Ok(out)
}

/// Bytes per object of the `n` objects at `url` (a resource's collection), uncompressed,
/// asking with `accept`: `(one list, a streaming list up to its end bookmark)`.
pub(super) fn bytes_per_object(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    url: &str,
    n: usize,
    accept: &str,
) -> anyhow::Result<(f64, f64)> {
    use kube::api::{ListParams, WatchParams};

    let request = kube::core::Request::new(url);
    #[allow(clippy::cast_precision_loss)]
    let per_object = |bytes: usize| bytes as f64 / n as f64;
    let framing = if accept.starts_with("application/vnd.kubernetes.protobuf") {
        Framing::Protobuf
    } else if accept.starts_with("application/cbor") {
        Framing::Cbor
    } else {
        Framing::Json
    };
    let list = request.list(&ListParams::default())?;
    // The server ends the stream after the timeout: everything up to the end bookmark
    // is counted, the rest (a periodic bookmark at most) is not. The timeout grows with
    // the objects: 50,000 pods in JSON take longer than 2 s to stream.
    let timeout = 2 + u32::try_from(n / 2000).unwrap_or(u32::MAX / 2);
    let stream = request.watch(&WatchParams::streaming_lists().timeout(timeout), "")?;
    let mut out = (f64::NAN, f64::NAN);
    for (is_stream, mut req) in [(false, list), (true, stream)] {
        req.headers_mut().insert("accept", accept.parse()?);
        req.headers_mut()
            .insert("accept-encoding", "identity".parse()?);
        let body = rt.block_on(async {
            let resp = client.send(req.map(kube::client::Body::from)).await?;
            anyhow::ensure!(resp.status().is_success(), "{accept}: {}", resp.status());
            Ok(resp.into_body().collect_bytes().await?)
        })?;
        if is_stream {
            let end = initial_events_end(&body, framing).with_context(|| {
                format!("no initial-events-end bookmark in the {accept} stream")
            })?;
            out.1 = per_object(end);
        } else {
            out.0 = per_object(body.len());
        }
    }
    Ok(out)
}

/// How a watch body is framed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Length-delimited frames.
    Protobuf,
    /// One document a line.
    Json,
    /// A CBOR sequence: no framing to step by.
    Cbor,
}

/// Where the event that ends a streaming list ends in `body`: a protobuf stream of
/// length-delimited frames, or JSON lines; in a CBOR sequence, where its end-of-list mark
/// ends (the bookmark's last few bytes are not counted).
fn initial_events_end(body: &[u8], framing: Framing) -> Option<usize> {
    const MARK: &[u8] = b"k8s.io/initial-events-end";
    let has_mark = |event: &[u8]| event.windows(MARK.len()).any(|w| w == MARK);
    if framing == Framing::Cbor {
        return body
            .windows(MARK.len())
            .position(|w| w == MARK)
            .map(|at| at + MARK.len());
    }
    let mut at = 0;
    while at < body.len() {
        let end = if framing == Framing::Protobuf {
            let len = u32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?);
            at + 4 + usize::try_from(len).ok()?
        } else {
            at + body[at..].iter().position(|&b| b == b'\n')? + 1
        };
        if has_mark(body.get(at..end)?) {
            return Some(end);
        }
        at = end;
    }
    None
}

/// One initial sync: spawns the contender, times it to its result line, reads the peak
/// RSS and CPU time it reports there and the RSS it reports two seconds later.
pub(super) fn sync_once(setup: &Setup<'_>, c: Contender, strip: bool) -> anyhow::Result<Sample> {
    let run = setup.spawn(c, strip, After::Settle)?;
    settled_sample(run, c.name(), setup.names.len())
}

/// The sample of a contender started with `--settle` on `n` objects: the time from its
/// spawn to its result line, the peak RSS and CPU time it reports there, the RSS it
/// reports two seconds later; waits for its exit.
pub(super) fn settled_sample(mut run: Running, name: &str, n: usize) -> anyhow::Result<Sample> {
    let v = run.next_json(RUN_TIMEOUT)?;
    let spawn_ms = run.spawned.elapsed().as_secs_f64() * 1e3;
    let settled = run
        .next_json(Duration::from_secs(30))
        .with_context(|| format!("{name}: settled RSS"))?;
    run.finish()?;
    let positive = |v: &Value, field: &str| {
        v[field]
            .as_f64()
            .filter(|r| *r > 0.0)
            .with_context(|| format!("{name} reported no {field}: {v}"))
    };
    let rss_kib = positive(&v, "rss_kib")?;
    let cpu_ms = positive(&v, "cpu_ms")?;
    let settled_kib = positive(&settled, "settled_rss_kib")?;
    if let Some(k) = v["transform_clones"].as_u64().filter(|&k| k > 0) {
        eprintln!(
            "\nnote: {name}'s transform had to clone {k} of {n} objects (their Arc was shared)"
        );
    }
    // Give the API server a moment between runs (it answered a big list).
    std::thread::sleep(Duration::from_millis(300));
    Ok(Sample {
        spawn_ms,
        rss_kib,
        cpu_ms,
        settled_kib,
    })
}

/// Event latency of one contender: once it has synced, patches `--latency-patches` pods at
/// `--latency-rate` and pairs each patch's send and response times with when the handler
/// saw it.
pub(super) fn latency(setup: &Setup<'_>, c: Contender, round: usize) -> anyhow::Result<Latencies> {
    let m = setup.opts.latency_patches;
    let mut step = Step::start(format!(
        "event latency: {}, {m} label patches at {}/s",
        c.name(),
        setup.opts.latency_rate
    ));
    let mut run = setup.spawn(c, false, After::Latency(m))?;
    run.next_json(RUN_TIMEOUT)?;
    // Let the watch that follows the list start before the first patch.
    std::thread::sleep(Duration::from_secs(1));
    let acked = setup.rt.block_on(async {
        let period = Duration::from_secs_f64(1.0 / setup.opts.latency_rate);
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut acked = Vec::with_capacity(m);
        for i in 0..m {
            ticker.tick().await;
            let sent = unix_nanos();
            let patch = serde_json::json!({
                "metadata": { "labels": { SEQ_LABEL: i.to_string(), ROUND_LABEL: format!("{round}-{i}") } }
            });
            let name = &setup.names[i % setup.names.len()];
            setup
                .api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("patch {i}"))?;
            acked.push((sent, unix_nanos()));
            if i % 50 == 0 {
                step.detail(&format!("{i}/{m} patched"));
            }
        }
        anyhow::Ok(acked)
    })?;
    drop(run.stdin.take());
    let v = run.next_json(Duration::from_secs(60))?;
    run.finish()?;
    let (mut from_send, mut from_ack): (Vec<f64>, Vec<f64>) = seen_pairs(&v)?
        .into_iter()
        .filter_map(|(seq, seen)| {
            let (sent, ack) = *acked.get(seq)?;
            Some((ms_between(sent, seen)?, ms_between(ack, seen)?))
        })
        .unzip();
    from_send.sort_by(f64::total_cmp);
    from_ack.sort_by(f64::total_cmp);
    step.finish(&format!("{}/{m} seen", from_send.len()));
    Ok(Latencies {
        from_send,
        from_ack,
        patched: m,
    })
}

/// Runs the contender while patching at each of `--churn-rates` for `--churn-secs`,
/// with at most 64 patches in flight.
pub(super) fn churn(
    setup: &Setup<'_>,
    c: Contender,
    round: usize,
) -> anyhow::Result<Vec<ChurnStep>> {
    let plan: Vec<(usize, usize)> = setup
        .opts
        .churn_rates
        .iter()
        .filter(|&&r| r > 0)
        .map(|&r| (r, r * setup.opts.churn_secs))
        .collect();
    let total: usize = plan.iter().map(|(_, m)| m).sum();
    let mut step = Step::start(format!(
        "churn: {}, {total} patches at {:?}/s, {} s each",
        c.name(),
        setup.opts.churn_rates,
        setup.opts.churn_secs
    ));
    let mut run = setup.spawn(c, false, After::Latency(total))?;
    run.next_json(RUN_TIMEOUT)?;
    std::thread::sleep(Duration::from_secs(1));
    let times = setup.rt.block_on(async {
        let mut times: Vec<Option<(u64, u64)>> = vec![None; total];
        let mut first = 0;
        for &(rate, m) in &plan {
            #[allow(clippy::cast_precision_loss)]
            let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut in_flight = tokio::task::JoinSet::new();
            for i in first..first + m {
                ticker.tick().await;
                while in_flight.len() >= 64 {
                    if let Some(Ok(Ok((i, t)))) = in_flight.join_next().await {
                        times[i] = Some(t);
                    }
                }
                let api = setup.api.clone();
                let name = setup.names[i % setup.names.len()].clone();
                let patch = serde_json::json!({
                    "metadata": { "labels": { SEQ_LABEL: i.to_string(), ROUND_LABEL: format!("churn-{round}-{i}") } }
                });
                in_flight.spawn(async move {
                    let sent = unix_nanos();
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| (i, (sent, unix_nanos())))
                });
            }
            while let Some(r) = in_flight.join_next().await {
                if let Ok(Ok((i, t))) = r {
                    times[i] = Some(t);
                }
            }
            first += m;
            step.detail(&format!("{first}/{total} patched"));
        }
        times
    });
    drop(run.stdin.take());
    let v = run.next_json(Duration::from_secs(120))?;
    run.finish()?;
    let seen: BTreeMap<usize, i64> = seen_pairs(&v)?.into_iter().collect();
    let mut out = Vec::new();
    let mut first = 0;
    for &(rate, m) in &plan {
        let range = first..first + m;
        first += m;
        let sent: Vec<(usize, u64)> = range
            .clone()
            .filter_map(|i| Some((i, times[i]?.0)))
            .collect();
        let (Some(t0), Some(t1)) = (
            sent.iter().map(|s| s.1).min(),
            sent.iter().map(|s| s.1).max(),
        ) else {
            continue;
        };
        let mut lat: Vec<f64> = sent
            .iter()
            .filter_map(|&(i, t)| ms_between(t, *seen.get(&i)?))
            .collect();
        lat.sort_by(f64::total_cmp);
        let last_seen = range.filter_map(|i| seen.get(&i).copied()).max();
        #[allow(clippy::cast_precision_loss)]
        let per_s = |count: usize, ms: Option<f64>| match ms {
            Some(ms) if ms > 0.0 => count as f64 / (ms / 1e3),
            _ => f64::NAN,
        };
        out.push(ChurnStep {
            target: rate,
            achieved: per_s(
                sent.len(),
                ms_between(t0, i64::try_from(t1).unwrap_or(i64::MAX)),
            ),
            handled: per_s(lat.len(), last_seen.and_then(|t| ms_between(t0, t))),
            p99_ms: quantile(&lat, 0.99),
            sent: sent.len(),
            seen: lat.len(),
        });
    }
    step.finish(&format!("{}/{total} seen", seen.len()));
    Ok(out)
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `(sequence number, handler wall-clock ns)` from a contender's `seen` line.
fn seen_pairs(v: &Value) -> anyhow::Result<Vec<(usize, i64)>> {
    Ok(v["seen"]
        .as_array()
        .context("no \"seen\" in the contender's last line")?
        .iter()
        .filter_map(|pair| {
            Some((
                usize::try_from(pair.get(0)?.as_u64()?).ok()?,
                pair.get(1)?.as_i64()?,
            ))
        })
        .collect())
}

/// Milliseconds from `from` (unix ns) to `to` (unix ns).
fn ms_between(from: u64, to: i64) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)]
    let d = (to - i64::try_from(from).ok()?) as f64 / 1e6;
    Some(d)
}

/// The nearest-rank quantile of sorted values.
pub(super) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The median of `f` over the samples of `key`; NaN when there are none.
pub(super) fn med(
    samples: &BTreeMap<Key, Vec<Sample>>,
    key: Key,
    f: impl Fn(&Sample) -> f64,
) -> f64 {
    samples
        .get(&key)
        .map_or(f64::NAN, |v| median(v.iter().map(f).collect()))
}

/// A contender syncing `ns`'s `n` pods through testenv's proxy, `--settle`d: the command
/// (`program` with `--kubeconfig` of the proxy, `--namespace`, `--expect`, `--settle`, then
/// `extra`), run by `run`; with what the proxy carried to it and the API server's CPU over it.
#[allow(clippy::too_many_arguments)]
pub(super) fn through_proxy<T>(
    rt: &tokio::runtime::Runtime,
    admin: &kube::Client,
    proxy: &kinformer_testenv::ApiProxy,
    program: &std::path::Path,
    ns: &str,
    n: usize,
    extra: &[&std::ffi::OsStr],
    run: impl FnOnce(std::process::Command) -> anyhow::Result<T>,
) -> anyhow::Result<(T, u64, f64)> {
    let mut cmd = std::process::Command::new(program);
    cmd.arg("--kubeconfig").arg(proxy.kubeconfig()).args([
        "--namespace",
        ns,
        "--expect",
        &n.to_string(),
        "--settle",
    ]);
    cmd.args(extra);
    let bytes_before = proxy.tcp().bytes_to_clients();
    let cpu_before = server_cpu_ms(rt, admin)?;
    let out = run(cmd)?;
    Ok((
        out,
        proxy.tcp().bytes_to_clients() - bytes_before,
        server_cpu_ms(rt, admin)? - cpu_before,
    ))
}

/// The API server's CPU time so far, in ms, from its metrics.
pub(super) fn server_cpu_ms(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
) -> anyhow::Result<f64> {
    let text = rt.block_on(async {
        let req = http::Request::get("/metrics").body(Vec::new())?;
        anyhow::Ok(client.request_text(req).await?)
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| s * 1e3)
        .context("no process_cpu_seconds_total in the API server's metrics")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_events_end_is_found_in_either_framing() {
        let mut pb = Vec::new();
        for frame in [
            &b"ADDED pod"[..],
            b"BOOKMARK k8s.io/initial-events-end",
            b"MODIFIED",
        ] {
            pb.extend_from_slice(&u32::try_from(frame.len()).unwrap().to_be_bytes());
            pb.extend_from_slice(frame);
        }
        assert_eq!(
            initial_events_end(&pb, Framing::Protobuf),
            Some(4 + 9 + 4 + 34)
        );
        assert_eq!(initial_events_end(&pb[..20], Framing::Protobuf), None);
        let json = b"{added}\n{\"k8s.io/initial-events-end\":\"true\"}\n{modified}\n";
        assert_eq!(initial_events_end(json, Framing::Json), Some(8 + 37));
        assert_eq!(initial_events_end(b"{added}\n", Framing::Json), None);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[3.0], 0.99), 3.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
