//! A process killed while it writes a snapshot leaves the old snapshot or the new one,
//! whole: never a file that reads as another cache. The writer is this test binary run
//! again as a child (`KINFORMER_SNAPSHOT_WRITER`), killed at a different moment each round.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kinformer_compact_store::{Cached, snapshot};
use kinformer_core::MetaObject;

const WRITER: &str = "KINFORMER_SNAPSHOT_WRITER";
const IDENTITY: &str = "v1/pods kill-test";

/// Snapshot `round`: `n` pods at resourceVersion `round`, every pod's own version that too.
fn cache(round: u64, n: usize) -> Vec<Arc<Cached<Pod>>> {
    (0..n)
        .map(|i| {
            let mut pod = Pod::default();
            pod.metadata.name = Some(format!("p-{i}"));
            pod.metadata.namespace = Some("default".into());
            pod.metadata.resource_version = Some(round.to_string());
            pod.spec = Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(format!("image-{round}-{}", "x".repeat(200))),
                    ..Default::default()
                }],
                ..Default::default()
            });
            Arc::new(Cached::new(&pod).unwrap())
        })
        .collect()
}

/// In the child: writes rounds 1, 2, 3, … to the file until killed.
#[test]
fn snapshot_writer_child() {
    let Ok(path) = std::env::var(WRITER) else {
        return; // run as a normal test: nothing to do
    };
    let path = Path::new(&path);
    for round in 1.. {
        snapshot::write(path, IDENTITY, &round.to_string(), &cache(round, 5_000)).unwrap();
    }
}

#[test]
fn a_writer_killed_at_any_moment_leaves_a_whole_snapshot_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    let exe = std::env::current_exe().unwrap();
    let mut seen_whole = 0;
    for round in 0..12u64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "snapshot_kill::snapshot_writer_child",
                "--nocapture",
            ])
            .env(WRITER, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // A different moment each round: within the first write, and well into later ones.
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(40 + round * 37));
        child.kill().unwrap();
        child.wait().unwrap();
        let ran = started.elapsed();
        match snapshot::read::<Pod>(&path, IDENTITY) {
            Ok(s) => {
                // Whole, and one round's cache throughout.
                let rv = s.resource_version.clone();
                assert_eq!(s.objects.len(), 5_000, "after {ran:?}");
                assert!(
                    s.objects
                        .iter()
                        .all(|o| o.object_resource_version() == Some(rv.as_str()))
                );
                seen_whole += 1;
            }
            Err(e) if e.is_missing() => {}
            Err(e) => panic!("killed after {ran:?}: {e}"),
        }
        snapshot::remove_temporaries(&path).unwrap();
    }
    assert!(seen_whole > 0, "no write ever finished");
}
