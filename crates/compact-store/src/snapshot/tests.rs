use std::fs;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kinformer_core::MetaObject;

use super::*;

fn pod(i: usize) -> Arc<Cached<Pod>> {
    let mut pod = Pod::default();
    pod.metadata.name = Some(format!("web-{i}"));
    pod.metadata.namespace = Some("default".into());
    pod.metadata.resource_version = Some(format!("{}", 100 + i));
    pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    pod.spec = Some(PodSpec {
        node_name: Some(format!("node-{}", i % 3)),
        containers: vec![Container {
            name: "c".into(),
            image: Some("nginx".into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    Arc::new(Cached::new(&pod).unwrap())
}

fn pods(n: usize) -> Vec<Arc<Cached<Pod>>> {
    (0..n).map(pod).collect()
}

#[test]
fn a_snapshot_reads_back_the_objects_it_was_written_with() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    let objects = pods(50);
    let written = write(&path, "v1/pods", "777", &objects).unwrap();
    assert_eq!(written.objects, 50);
    assert_eq!(written.bytes, fs::metadata(&path).unwrap().len());
    let read = read::<Pod>(&path, "v1/pods").unwrap();
    assert_eq!(read.resource_version, "777");
    assert_eq!(read.bytes, written.bytes);
    assert_eq!(read.objects.len(), 50);
    for (a, b) in objects.iter().zip(&read.objects) {
        assert_eq!(a.encoding(), b.encoding());
        assert_eq!(a.object_name(), b.object_name());
        assert_eq!(a.object_namespace(), b.object_namespace());
        assert_eq!(a.object_resource_version(), b.object_resource_version());
        assert_eq!(a.object_labels(), b.object_labels());
        assert_eq!(
            a.spec().and_then(|s| s.node_name()),
            b.spec().and_then(|s| s.node_name())
        );
        assert_eq!(a.decode().unwrap(), b.decode().unwrap());
    }
    // Nothing left beside it.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["pods"]);
    assert_eq!(read_header(&path).unwrap().resource_version, "777");
}

#[test]
fn an_empty_cache_is_a_snapshot_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    write::<Pod>(&path, "v1/pods", "5", &[]).unwrap();
    let read = read::<Pod>(&path, "v1/pods").unwrap();
    assert!(read.objects.is_empty());
    assert_eq!(read.resource_version, "5");
}

#[test]
fn no_file_is_missing_and_a_file_of_something_else_is_not_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    assert!(read::<Pod>(&path, "v1/pods").unwrap_err().is_missing());
    fs::write(&path, b"{\"kind\":\"PodList\"}").unwrap();
    assert!(matches!(
        read::<Pod>(&path, "v1/pods"),
        Err(SnapshotError::NotASnapshot { .. })
    ));
    fs::write(&path, b"KIN").unwrap();
    assert!(matches!(
        read::<Pod>(&path, "v1/pods"),
        Err(SnapshotError::NotASnapshot { .. })
    ));
}

#[test]
fn another_identity_or_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    write(&path, "v1/pods ns=a", "9", &pods(3)).unwrap();
    match read::<Pod>(&path, "v1/pods ns=b") {
        Err(SnapshotError::Identity {
            expected, found, ..
        }) => {
            assert_eq!(
                (expected.as_str(), found.as_str()),
                ("v1/pods ns=b", "v1/pods ns=a")
            );
        }
        other => panic!("{other:?}"),
    }
    let mut bytes = fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        read::<Pod>(&path, "v1/pods ns=a"),
        Err(SnapshotError::Format { found: 2, .. })
    ));
}

#[test]
fn every_truncation_and_every_flipped_byte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    write(&path, "v1/pods", "12", &pods(4)).unwrap();
    let whole = fs::read(&path).unwrap();
    for len in 0..whole.len() {
        fs::write(&path, &whole[..len]).unwrap();
        match read::<Pod>(&path, "v1/pods") {
            Err(SnapshotError::Truncated { .. } | SnapshotError::NotASnapshot { .. }) => {}
            // A cut inside a length can read as a length over the limit.
            Err(SnapshotError::Corrupt { .. }) => {}
            other => panic!("cut at {len} of {}: {other:?}", whole.len()),
        }
    }
    for at in 0..whole.len() {
        let mut bytes = whole.clone();
        bytes[at] ^= 0x20;
        fs::write(&path, &bytes).unwrap();
        assert!(
            read::<Pod>(&path, "v1/pods").is_err(),
            "byte {at} flipped was read"
        );
    }
    let mut longer = whole.clone();
    longer.push(0);
    fs::write(&path, &longer).unwrap();
    assert!(matches!(
        read::<Pod>(&path, "v1/pods"),
        Err(SnapshotError::Corrupt { .. })
    ));
    fs::write(&path, &whole).unwrap();
    assert_eq!(read::<Pod>(&path, "v1/pods").unwrap().objects.len(), 4);
}

#[test]
fn an_older_snapshot_does_not_replace_a_newer_one_of_the_same_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    write(&path, "v1/pods", "200", &pods(2)).unwrap();
    match write(&path, "v1/pods", "150", &pods(1)) {
        Err(SnapshotError::Older {
            on_disk, writing, ..
        }) => {
            assert_eq!((on_disk.as_str(), writing.as_str()), ("200", "150"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(read::<Pod>(&path, "v1/pods").unwrap().objects.len(), 2);
    // The same version again, a newer one, or another identity's file: written.
    write(&path, "v1/pods", "200", &pods(3)).unwrap();
    write(&path, "v1/pods", "201", &pods(4)).unwrap();
    write(&path, "v1/pods ns=x", "1", &pods(5)).unwrap();
    assert_eq!(read::<Pod>(&path, "v1/pods ns=x").unwrap().objects.len(), 5);
}

/// A snapshot whose writer numbered field names otherwise than this process does is
/// renumbered as it is read: the same objects, read the same way.
#[test]
fn a_snapshot_numbered_otherwise_is_renumbered_as_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    let objects = pods(20);
    write(&path, "v1/pods", "3", &objects).unwrap();
    let mut bytes = fs::read(&path).unwrap();
    // The writer's table, its first two names swapped, and every id in the objects with
    // them: what a process that met those names in the other order wrote.
    let names = crate::codec::names();
    assert!(names.len() > 2);
    let mut swapped: Vec<u32> = (0..names.len() as u32).map(|i| i + 2).collect();
    swapped.swap(0, 1);
    let header = 8 + 4 + (4 + "v1/pods".len()) + (4 + 1) + 8;
    let mut out = bytes[..header].to_vec();
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    let mut order: Vec<&str> = names.clone();
    order.swap(0, 1);
    for n in &order {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
    }
    out.extend_from_slice(&(objects.len() as u64).to_le_bytes());
    for o in &objects {
        let e = crate::codec::renumber(o.encoding(), &swapped).unwrap();
        out.extend_from_slice(&(e.len() as u32).to_le_bytes());
        out.extend_from_slice(&e);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(END);
    bytes.clear();
    fs::write(&path, &out).unwrap();
    let got = read::<Pod>(&path, "v1/pods").unwrap();
    for (a, b) in objects.iter().zip(&got.objects) {
        assert_eq!(
            a.encoding(),
            b.encoding(),
            "renumbered back to this process's ids"
        );
        assert_eq!(a.decode().unwrap(), b.decode().unwrap());
    }
    // A table with a name twice is no table.
    assert!(crate::codec::adopt_names(&["kind".into(), "kind".into()]).is_err());
}

#[test]
fn what_killed_writers_left_is_removed_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    write(&path, "v1/pods", "8", &pods(2)).unwrap();
    // A writer killed before its rename leaves its temporary file, half written.
    fs::write(dir.path().join("pods.tmp-4242"), b"KINFSNAP\x01\0\0\0").unwrap();
    fs::write(dir.path().join("other.tmp-4242"), b"not ours").unwrap();
    assert_eq!(read::<Pod>(&path, "v1/pods").unwrap().objects.len(), 2);
    assert_eq!(remove_temporaries(&path).unwrap(), 1);
    assert!(dir.path().join("other.tmp-4242").exists());
}

#[test]
fn two_writers_of_one_process_never_share_a_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods");
    let objects = pods(200);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    // The same version each time: none is refused as older.
                    write(&path, "v1/pods", "9", &objects).unwrap();
                }
            });
        }
    });
    assert_eq!(read::<Pod>(&path, "v1/pods").unwrap().objects.len(), 200);
    assert_eq!(
        remove_temporaries(&path).unwrap(),
        0,
        "every temporary file was renamed"
    );
}
