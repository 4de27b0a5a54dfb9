//! Wire recordings (feature `wire`): the file round trip, the layer and the replayed
//! client on canned exchanges, and end to end on the real API server: an informer of
//! `Cached<Pod>` recorded at the HTTP level (protobuf with gzip, then JSON) replays into a
//! fresh informer with the same cache and the same notifications, and becomes a decoded
//! recording whose final state is the live cache. `cargo xtask test` runs them all.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kinformer_compact_store::Cached;
use kinformer_core::{MetaObject, meta_namespace_key};
use kinformer_informer_factory::{Registration, SharedIndexInformer};
use kinformer_kube::{KubeListerWatcher, WireFormat, reflector_connection};
use kinformer_replay::format::FormatError;
use kinformer_replay::informer::Observer;
use kinformer_replay::wire::{
    BodyEnd, Chunk, Exchange, WireAnswer, WireFormatError, WireRecorder, WireRecording, WireReplay,
    WireReplayError, WireRequest, WireResponse,
};
use kinformer_replay::{Observation, RecordOptions, Recorder, Recording};

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","resourceVersion":"7"}}"#;

const BOOKMARK: &str = "{\"type\":\"BOOKMARK\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"8\"}}}\n";

fn response(at: u64, chunks: &[(u64, &str)], end: Option<(u64, BodyEnd)>) -> WireAnswer {
    let mut r = WireResponse::default();
    r.at = Duration::from_millis(at);
    r.status = 200;
    r.content_type = Some("application/json".into());
    r.chunks = chunks
        .iter()
        .map(|(t, b)| Chunk::new(Duration::from_millis(*t), Bytes::from(b.to_string())))
        .collect();
    r.end = end.map(|(t, how)| (Duration::from_millis(t), how));
    WireAnswer::Response(r)
}

fn exchange(at: u64, path: &str, query: Option<&str>, answer: WireAnswer) -> Exchange {
    Exchange::new(
        Duration::from_millis(at),
        WireRequest::new("GET", path, query),
        answer,
    )
}

/// A recording of every kind of answer, built by hand.
fn canned() -> WireRecording {
    let (a, b) = POD.split_at(20);
    let mut rec = WireRecording::new("pods in ns", true);
    rec.exchanges = vec![
        exchange(
            0,
            "/api/v1/namespaces/ns/pods/a",
            None,
            response(10, &[(20, a), (5000, b)], Some((5000, BodyEnd::Complete))),
        ),
        exchange(
            6000,
            "/api/v1/namespaces/ns/pods/down",
            None,
            WireAnswer::Failed {
                at: Duration::from_millis(6001),
                message: "client error (Connect): connection refused".into(),
            },
        ),
        exchange(
            7000,
            "/api/v1/namespaces/ns/secrets/token",
            None,
            WireAnswer::Response({
                let mut r = WireResponse::default();
                r.at = Duration::from_millis(7001);
                r.status = 200;
                r.redacted = true;
                r.end = Some((Duration::from_millis(7002), BodyEnd::Complete));
                r
            }),
        ),
        exchange(
            8000,
            "/api/v1/namespaces/ns/pods",
            Some("watch=true&resourceVersion=7"),
            response(8001, &[(8002, BOOKMARK)], Some((9000, BodyEnd::Dropped))),
        ),
        exchange(
            8500,
            "/api/v1/namespaces/ns/pods/b",
            None,
            response(
                8501,
                &[],
                Some((8502, BodyEnd::Failed("connection reset".into()))),
            ),
        ),
        exchange(
            9500,
            "/api/v1/namespaces/ns/pods/c",
            None,
            WireAnswer::Pending,
        ),
    ];
    rec
}

#[test]
fn a_wire_recording_round_trips_through_a_file_and_each_reader_refuses_the_other_encoding() {
    let rec = canned();
    let path = std::env::temp_dir().join(format!("kinformer-wire-{}.jsonl", std::process::id()));
    rec.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let back = WireRecording::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();

    assert!(text.starts_with(
        r#"{"format":"kinformer-recording","version":1,"encoding":"http","resource":"pods in ns","redacted":true}"#
    ));
    // Bodies are base64; no header is ever written.
    assert!(!text.contains("\"name\":\"a\""), "{text}");
    assert!(!text.to_ascii_lowercase().contains("authorization"));
    assert_eq!(back.exchanges.len(), rec.exchanges.len());
    for (a, b) in rec.exchanges.iter().zip(&back.exchanges) {
        assert_eq!((a.at, &a.request), (b.at, &b.request));
        match (&a.answer, &b.answer) {
            (WireAnswer::Response(x), WireAnswer::Response(y)) => {
                assert_eq!(
                    (
                        x.at,
                        x.status,
                        &x.content_type,
                        x.redacted,
                        &x.chunks,
                        &x.end
                    ),
                    (
                        y.at,
                        y.status,
                        &y.content_type,
                        y.redacted,
                        &y.chunks,
                        &y.end
                    )
                );
            }
            (WireAnswer::Failed { at, message }, WireAnswer::Failed { at: t, message: m }) => {
                assert_eq!((at, message), (t, m));
            }
            (WireAnswer::Pending, WireAnswer::Pending) => {}
            (x, y) => panic!("{x:?} read back as {y:?}"),
        }
    }
    let WireAnswer::Response(first) = &back.exchanges[0].answer else {
        panic!("a response");
    };
    assert_eq!(first.body(), POD.as_bytes());
    assert_eq!(back.span(), Duration::from_millis(9500));

    // A decoded recording's reader refuses a wire recording, and the reverse.
    let refused = Recording::parse(text.as_bytes()).unwrap_err();
    assert!(
        matches!(&refused, FormatError::Encoding { found } if found == "http"),
        "{refused:?}"
    );
    let decoded = r#"{"format":"kinformer-recording","version":1,"encoding":"json","resource":"pods","redacted":true}"#;
    let refused = WireRecording::parse(decoded.as_bytes()).unwrap_err();
    assert!(
        matches!(&refused, WireFormatError::Encoding { found } if found == "json"),
        "{refused:?}"
    );
    // A last line cut short is left out; a bad line in the middle is an error.
    let cut = &text[..text.len() - 10];
    assert_eq!(
        WireRecording::parse(cut.as_bytes())
            .unwrap()
            .exchanges
            .len(),
        5
    );
    let bad = text.replacen("\"chunk\":\"", "\"chunk\":\"!!", 1);
    assert!(matches!(
        WireRecording::parse(bad.as_bytes()),
        Err(WireFormatError::Format(FormatError::Line { .. }))
    ));
}

/// The replayed client's error under kube's.
fn replay_error(e: &kube::Error) -> Option<&WireReplayError> {
    match e {
        kube::Error::Service(e) => e.downcast_ref::<WireReplayError>(),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_replayed_client_answers_as_recorded_on_the_recorded_clock() {
    let replay = WireReplay::new(canned());
    let client = replay.client("ns");
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "ns");
    let wall = std::time::Instant::now();
    let start = tokio::time::Instant::now();
    let pod = pods.get("a").await.unwrap();
    assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
    // Its second chunk came 5 s after the request: 5 s on the paused clock, not in wall time.
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(wall.elapsed() < Duration::from_secs(5));

    let down = pods.get("down").await.unwrap_err();
    assert!(
        matches!(
            replay_error(&down),
            Some(WireReplayError::Connection { .. })
        ),
        "{down:?}"
    );
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), "ns");
    let redacted = secrets.get("token").await.unwrap_err();
    assert!(
        matches!(
            replay_error(&redacted),
            Some(WireReplayError::Redacted { .. })
        ),
        "{redacted:?}"
    );
    // Nothing left for the path: as an unreachable server.
    let gone = pods.get("a").await.unwrap_err();
    assert!(
        matches!(replay_error(&gone), Some(WireReplayError::Exhausted { .. })),
        "{gone:?}"
    );
    // A body that failed when recorded fails the same.
    let failed = pods.get("b").await.unwrap_err();
    assert!(!matches!(failed, kube::Error::Api(_)), "{failed:?}");
    assert!(
        replay.divergences().is_empty(),
        "{:?}",
        replay.divergences()
    );

    // A watch asked with another query: answered, noted; its body stays open (the
    // recorded client dropped it).
    let req = http::Request::get("/api/v1/namespaces/ns/pods?watch=true&resourceVersion=6")
        .body(Vec::new())
        .unwrap();
    let mut lines = Box::pin(client.request_events::<Pod>(req).await.unwrap());
    use futures::StreamExt as _;
    let first = tokio::time::timeout(Duration::from_secs(3600), lines.next()).await;
    assert!(
        matches!(first, Ok(Some(Ok(_)))),
        "the recorded frame: {first:?}"
    );
    let more = tokio::time::timeout(Duration::from_secs(3600), lines.next()).await;
    assert!(more.is_err(), "open and quiet: {more:?}");
    let divergences = replay.divergences();
    assert_eq!(divergences.len(), 1, "{divergences:?}");
    assert!(
        divergences[0].contains("resourceVersion=6"),
        "{divergences:?}"
    );
    // One exchange was never asked for: pods/c.
    assert_eq!(replay.left(), 1);
    let c = tokio::time::timeout(Duration::from_secs(3600), pods.get("c")).await;
    assert!(c.is_err(), "recorded without an answer: no answer");
    drop(lines);
    tokio::time::timeout(Duration::from_secs(1), replay.finished())
        .await
        .unwrap();
    assert_eq!(replay.requests().len(), 7);
}

/// A server of canned answers: a pod in two chunks, a Secret, a refused connection.
fn server() -> tower::util::BoxService<
    http::Request<kube::client::Body>,
    http::Response<kube::client::Body>,
    Box<dyn std::error::Error + Send + Sync>,
> {
    tower::util::BoxService::new(tower::service_fn(
        |req: http::Request<kube::client::Body>| async move {
            let path = req.uri().path().to_owned();
            let body = if path.ends_with("/pods/a") {
                POD.to_owned()
            } else if path.ends_with("/secrets/token") {
                r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"token","namespace":"ns"},"data":{"t":"c2VjcmV0"}}"#.to_owned()
            } else {
                return Err::<_, Box<dyn std::error::Error + Send + Sync>>(
                    std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into(),
                );
            };
            Ok(http::Response::builder()
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(kube::client::Body::from(body.into_bytes()))
                .unwrap())
        },
    ))
}

#[tokio::test]
async fn the_layer_records_every_exchange_and_redacts_secrets_unless_kept() {
    for keep in [false, true] {
        let options = RecordOptions::new("canned");
        let options = if keep {
            options.keep_secrets()
        } else {
            options
        };
        let recorder = WireRecorder::in_memory(options);
        let tape = recorder.tape();
        let client = kube::client::ClientBuilder::new(server(), "ns")
            .with_layer(&recorder.layer())
            .build();
        let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "ns");
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client, "ns");
        let pod = pods.get("a").await.unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("a"));
        let secret = secrets.get("token").await.unwrap();
        assert!(secret.data.is_some(), "passed on unchanged");
        assert!(pods.get("down").await.is_err());

        let rec = tape.recording().unwrap();
        assert_eq!(tape.error(), None);
        assert_eq!(rec.header.encoding, "http");
        assert_eq!(rec.header.redacted, !keep);
        let paths: Vec<_> = rec
            .exchanges
            .iter()
            .map(|x| x.request.path.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "/api/v1/namespaces/ns/pods/a",
                "/api/v1/namespaces/ns/secrets/token",
                "/api/v1/namespaces/ns/pods/down"
            ]
        );
        let WireAnswer::Response(a) = &rec.exchanges[0].answer else {
            panic!("{:?}", rec.exchanges[0]);
        };
        assert_eq!(
            (
                a.status,
                a.content_type.as_deref(),
                a.body(),
                &a.end.as_ref().map(|e| &e.1)
            ),
            (
                200,
                Some("application/json"),
                POD.as_bytes().to_vec(),
                &Some(&BodyEnd::Complete)
            )
        );
        let WireAnswer::Response(s) = &rec.exchanges[1].answer else {
            panic!("{:?}", rec.exchanges[1]);
        };
        assert_eq!(s.redacted, !keep);
        assert_eq!(s.body().is_empty(), !keep);
        assert!(
            matches!(&rec.exchanges[2].answer, WireAnswer::Failed { message, .. } if message.contains("refused")),
            "{:?}",
            rec.exchanges[2]
        );

        // Replayed: the same answers, the Secret's only when kept.
        let replay = WireReplay::new(rec);
        let client = replay.client("ns");
        let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "ns");
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client, "ns");
        assert_eq!(pods.get("a").await.unwrap(), pod);
        match secrets.get("token").await {
            Ok(s) => assert!(keep && s == secret),
            Err(e) => assert!(
                !keep && matches!(replay_error(&e), Some(WireReplayError::Redacted { .. })),
                "{e:?}"
            ),
        }
        assert!(pods.get("down").await.is_err());
        replay.finished().await;
        assert!(replay.divergences().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn a_recorder_to_a_file_reads_back_and_an_immediate_replay_does_not_wait() {
    let path = std::env::temp_dir().join(format!(
        "kinformer-wire-recorder-{}.jsonl",
        std::process::id()
    ));
    let recorder = WireRecorder::to_file(&path, RecordOptions::new("to a file")).unwrap();
    let client = kube::client::ClientBuilder::new(server(), "ns")
        .with_layer(&recorder.layer())
        .build();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "ns");
    pods.get("a").await.unwrap();
    // Each line is flushed as it is written: the file is whole while the recorder lives.
    let rec = WireRecording::load(&path).unwrap();
    assert!(
        recorder.tape().recording().is_err(),
        "a file's tape: load the file"
    );
    drop(recorder);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(rec.exchanges.len(), 1);
    let WireAnswer::Response(r) = &rec.exchanges[0].answer else {
        panic!("{:?}", rec.exchanges[0]);
    };
    assert_eq!(r.body(), POD.as_bytes());
    assert_eq!(r.end.as_ref().map(|e| &e.1), Some(&BodyEnd::Complete));

    // The canned recording's 5 s body, at once.
    let replay = WireReplay::with(
        canned(),
        Arc::new(kinformer_core::TokioClock),
        kinformer_replay::Timing::Immediate,
    );
    let pods: kube::Api<Pod> = kube::Api::namespaced(replay.client("ns"), "ns");
    let start = tokio::time::Instant::now();
    pods.get("a").await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

// ---- end to end ------------------------------------------------------------------------

mod e2e {
    use super::*;
    use kinformer_testenv::{ControlPlane, eventually, eventually_async, pod};
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

    const TIMEOUT: Duration = Duration::from_secs(60);

    type Cache = BTreeMap<String, String>;

    fn cache(informer: &SharedIndexInformer<Cached<Pod>>) -> Cache {
        informer
            .indexer()
            .list()
            .iter()
            .map(|p| {
                (
                    meta_namespace_key(p.as_ref()).unwrap().to_string(),
                    p.object_resource_version().unwrap().to_owned(),
                )
            })
            .collect()
    }

    async fn truth(api: &Api<Pod>) -> Cache {
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| {
                (
                    meta_namespace_key(p).unwrap().to_string(),
                    p.metadata.resource_version.clone().unwrap(),
                )
            })
            .collect()
    }

    fn lister_watcher(
        client: kube::Client,
        ns: &str,
        format: Option<WireFormat>,
    ) -> KubeListerWatcher<Cached<Pod>> {
        let lw = KubeListerWatcher::new(Api::<Pod>::namespaced(client, ns));
        match format {
            Some(f) => lw.wire_format(f).cached(),
            None => lw.cached(),
        }
    }

    /// A pod with 40 KiB of annotation: four make a list the API server gzips (over 128 KiB).
    fn big_pod(name: &str) -> Pod {
        let mut p = pod(name);
        p.metadata.annotations = Some(
            [("kinformer.test/padding".to_owned(), "x".repeat(40 * 1024))]
                .into_iter()
                .collect(),
        );
        p
    }

    struct Live {
        ns: String,
        recording: WireRecording,
        cache: Cache,
        observed: Vec<Observation>,
    }

    /// An informer of `Cached<Pod>` through the recording layer while pods are created,
    /// changed and deleted; stopped once it has the server's state.
    async fn record(cp: &ControlPlane, format: Option<WireFormat>, watch_list: bool) -> Live {
        let ns = cp.create_namespace("wire").await.unwrap();
        let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
        for i in 0..4 {
            direct
                .create(&PostParams::default(), &big_pod(&format!("p-{i}")))
                .await
                .unwrap();
        }
        let recorder = WireRecorder::in_memory(RecordOptions::new(format!("pods in {ns}")));
        let tape = recorder.tape();
        let client = reflector_connection(cp.admin_config())
            .unwrap()
            .with_layer(&recorder.layer())
            .build();
        let informer = SharedIndexInformer::builder(lister_watcher(client, &ns, format))
            .watch_list(watch_list)
            .build();
        let observer = Observer::new();
        informer.add_event_handler(observer.clone()).unwrap();
        let running = informer.start().unwrap();
        eventually("synced", TIMEOUT, || informer.has_synced()).await;

        let label = |v: &str| serde_json::json!({"metadata": {"labels": {"step": v}}});
        let grace = DeleteParams::default().grace_period(0);
        direct
            .patch("p-0", &PatchParams::default(), &Patch::Merge(&label("one")))
            .await
            .unwrap();
        direct.delete("p-1", &grace).await.unwrap();
        direct
            .create(&PostParams::default(), &pod("new-0"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        direct
            .patch(
                "new-0",
                &PatchParams::default(),
                &Patch::Merge(&label("two")),
            )
            .await
            .unwrap();
        direct.delete("p-2", &grace).await.unwrap();
        eventually_async("the informer caught up", TIMEOUT, || {
            let (api, informer) = (direct.clone(), informer.clone());
            async move { cache(&informer) == truth(&api).await }
        })
        .await;
        // Every notification handed out before the stop.
        tokio::time::sleep(Duration::from_millis(200)).await;
        running.stop().await.unwrap();
        assert_eq!(tape.error(), None);
        Live {
            cache: cache(&informer),
            observed: observer.observed(),
            recording: tape.recording().unwrap(),
            ns,
        }
    }

    /// Waits until `replay` has served everything and the informer has taken it all.
    async fn settle(
        replay: &WireReplay,
        informer: &SharedIndexInformer<Cached<Pod>>,
        registration: &Registration<Cached<Pod>>,
    ) {
        let patience = replay.span() + Duration::from_secs(600);
        tokio::time::timeout(patience, replay.finished())
            .await
            .unwrap_or_else(|_| panic!("the replay did not finish: {replay:?}"));
        let mut quiet = 0;
        for _ in 0..3000 {
            if quiet >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            if informer.stats().queued_items == 0 && registration.pending() == 0 {
                quiet += 1;
            } else {
                quiet = 0;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    struct Replayed {
        cache: Cache,
        observed: Vec<Observation>,
        divergences: Vec<String>,
        decoded: Option<Recording>,
        virtual_time: Duration,
    }

    /// Replays `recording` as a client under the same lister-watcher into a fresh
    /// informer, on a paused clock of a runtime of its own; with `decode`, through a
    /// (decoded) `Recorder` too.
    fn replay(
        recording: WireRecording,
        ns: String,
        format: Option<WireFormat>,
        watch_list: bool,
        decode: bool,
    ) -> Replayed {
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async move {
                let start = tokio::time::Instant::now();
                let replay = WireReplay::new(recording);
                let lw = lister_watcher(replay.client(&ns), &ns, format);
                let (informer, tape) = if decode {
                    let recorder = Recorder::in_memory(lw, RecordOptions::new("decoded"));
                    let tape = recorder.tape();
                    let informer = SharedIndexInformer::builder(recorder)
                        .watch_list(watch_list)
                        .build();
                    (informer, Some(tape))
                } else {
                    let informer = SharedIndexInformer::builder(lw)
                        .watch_list(watch_list)
                        .build();
                    (informer, None)
                };
                let observer = Observer::new();
                let registration = informer.add_event_handler(observer.clone()).unwrap();
                let running = informer.start().unwrap();
                settle(&replay, &informer, &registration).await;
                let out = Replayed {
                    cache: cache(&informer),
                    observed: observer.observed(),
                    divergences: replay.divergences(),
                    decoded: tape.map(|t| t.recording().unwrap()),
                    virtual_time: start.elapsed(),
                };
                running.stop().await.unwrap();
                out
            })
        })
        .join()
        .unwrap()
    }

    /// Records live, replays, replays into a decoded recording; compares. With
    /// `watch_list`, the informer starts with a streaming list (the whole watch response
    /// gzipped, as the 1.37 API server does); without, with a List (gzipped: over 128 KiB)
    /// and a Watch.
    async fn round_trip(format: Option<WireFormat>, media: &str, watch_list: bool) {
        let cp = ControlPlane::shared().await.expect("control plane");
        let live = record(cp, format, watch_list).await;
        let rec = &live.recording;
        // What came over the wire: the asked-for format, and gzip where the server used it.
        let responses: Vec<&WireResponse> = rec
            .exchanges
            .iter()
            .filter_map(|x| match &x.answer {
                WireAnswer::Response(r) => Some(r),
                _ => None,
            })
            .collect();
        // A streaming list (a watch with sendInitialEvents), or a list and a watch.
        assert!(!responses.is_empty(), "{} exchanges", rec.exchanges.len());
        assert!(
            responses.iter().all(|r| r
                .content_type
                .as_deref()
                .is_some_and(|c| c.starts_with(media))),
            "{:?}",
            responses
                .iter()
                .map(|r| &r.content_type)
                .collect::<Vec<_>>()
        );
        assert!(
            responses
                .iter()
                .any(|r| r.content_encoding.as_deref() == Some("gzip")),
            "the 160 KiB list gzipped"
        );
        if !watch_list {
            let listed = rec.exchanges.iter().any(|x| {
                !x.request
                    .query
                    .as_deref()
                    .unwrap_or_default()
                    .contains("watch=true")
                    && matches!(&x.answer, WireAnswer::Response(r)
                        if r.content_encoding.as_deref() == Some("gzip") && r.body().len() > 1024)
            });
            assert!(listed, "a gzipped list page");
        }
        assert!(live.observed.len() >= 4 + 4, "{:?}", live.observed);

        let replayed = replay(
            live.recording.clone(),
            live.ns.clone(),
            format,
            watch_list,
            false,
        );
        assert_eq!(replayed.cache, live.cache);
        assert_eq!(replayed.observed, live.observed);
        // Only the watches' random timeoutSeconds may differ, and that is not noted.
        assert!(
            replayed.divergences.is_empty(),
            "{:?}",
            replayed.divergences
        );
        assert!(replayed.virtual_time >= rec.span().saturating_sub(Duration::from_secs(1)));

        // A wire recording becomes a decoded one: replayed under a Recorder.
        let decoded = replay(
            live.recording.clone(),
            live.ns.clone(),
            format,
            watch_list,
            true,
        );
        assert_eq!(decoded.cache, live.cache);
        let decoded = decoded.decoded.unwrap();
        assert_eq!(decoded.final_state().versions(), live.cache);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn an_informer_recorded_on_the_wire_in_protobuf_replays_to_the_same_cache_and_notifications()
     {
        round_trip(None, "application/vnd.kubernetes.protobuf", true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn an_informer_that_lists_and_watches_recorded_on_the_wire_in_protobuf_replays_the_same()
    {
        round_trip(None, "application/vnd.kubernetes.protobuf", false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn an_informer_recorded_on_the_wire_in_json_replays_to_the_same_cache_and_notifications()
    {
        round_trip(Some(WireFormat::Json), "application/json", true).await;
    }
}
