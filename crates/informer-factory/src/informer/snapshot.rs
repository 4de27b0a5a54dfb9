//! The informer's cache kept on disk ([`SnapshotOptions`]): loaded before the reflector
//! starts and handed to it as a [`Resume`], written on a period and when the informer
//! stops. The file is kinformer-compact-store's `snapshot`; here is when and how.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use kinformer_compact_store::Cached;
use kinformer_compact_store::snapshot::{self, SnapshotError, Written};
use kinformer_core::{ErrorChain, ListPart, MetaObject};
use kinformer_reflector::Resume;

use crate::Error;

use super::core::Inner;

/// The default period between two snapshots of a running informer.
pub const DEFAULT_SNAPSHOT_PERIOD: Duration = Duration::from_secs(60);

/// How an informer started from its snapshot tells its handlers about the objects it held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotStart {
    /// Every object, as the adds of a first list (`is_in_initial_list`), as after a start
    /// without a snapshot: for a controller that reconciles everything when it starts. The
    /// default. The snapshot's objects reach the cache once the informer has caught up.
    #[default]
    AsAdds,
    /// Only what changed since the snapshot: updates, deletes (as tombstones) and adds; an
    /// object that did not change reaches no handler (a resync due reaches it, as ever). The
    /// snapshot's objects are in the cache (and listers) at once, before the informer has
    /// synced.
    ChangesOnly,
}

/// Where and how often an informer keeps its cache on disk, so that a restarted process
/// resumes from it instead of listing everything again (issue 40; rules 67–69 in
/// ARCHITECTURE.md).
///
/// A started informer with a snapshot of the same identity in `dir` loads it and watches from
/// its resourceVersion; it reports synced only once it has caught up with what the API
/// server was at when it started (see kinformer-reflector's [`Resume`]). A snapshot whose
/// version the server has compacted away (`410`) costs a list, which is compared with the
/// snapshot (handlers see only the differences with [`SnapshotStart::ChangesOnly`]). A
/// snapshot of another informer, truncated, corrupt, of another format, or older than what
/// the cache already applied is refused, logged, and the informer lists as without one.
///
/// It is written every [`period`](Self::period) once the informer has synced, and when the
/// informer stops, atomically (a process killed while writing leaves the last snapshot).
/// Only the default cache's objects (`Cached<K>`) are kept: an informer of decoded objects
/// has no snapshot.
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_informer_factory::{SharedInformerFactory, SnapshotOptions, SnapshotStart};
///
/// # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// // An emptyDir of the controller's pod, or a volume.
/// let factory = SharedInformerFactory::builder(client)
///     .snapshots(
///         SnapshotOptions::new("/var/cache/my-controller")
///             .period(Duration::from_secs(30))
///             .start(SnapshotStart::ChangesOnly),
///     )
///     .build();
/// let pods = factory.informer::<Pod>();
/// factory.start()?;
/// assert!(factory.wait_for_cache_sync(Duration::from_secs(60)).await.all_synced());
/// // ... on SIGTERM: the shutdown writes each informer's snapshot.
/// factory.shutdown().await?;
/// # let _ = pods;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotOptions {
    /// The directory the snapshots are in (one file per informer, named after its identity).
    pub dir: PathBuf,
    /// How often a running, synced informer writes its snapshot
    /// ([`DEFAULT_SNAPSHOT_PERIOD`]); zero: only when it stops.
    pub period: Duration,
    /// How the handlers of an informer started from a snapshot hear of its objects.
    pub start: SnapshotStart,
    /// A version of what the program keeps of each object, part of every identity: change
    /// it when a transform changes what is cached, so that snapshots of the old shape are
    /// refused.
    pub version: String,
}

impl SnapshotOptions {
    /// Snapshots in `dir`, every [`DEFAULT_SNAPSHOT_PERIOD`], objects handed on as adds.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            period: DEFAULT_SNAPSHOT_PERIOD,
            start: SnapshotStart::default(),
            version: String::new(),
        }
    }

    /// How often a running informer writes its snapshot; zero: only when it stops.
    #[must_use]
    pub fn period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// How handlers hear of the objects of the snapshot an informer started from.
    #[must_use]
    pub fn start(mut self, start: SnapshotStart) -> Self {
        self.start = start;
        self
    }

    /// A version of what the program caches (see the field).
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The file of the informer of `identity`: its identity made a file name (letters,
    /// digits, `.`, `-`, `_`; others `_`), cut, and a hash of the whole.
    pub fn path_for(&self, identity: &str) -> PathBuf {
        let mut name: String = identity
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .take(96)
            .collect();
        name.push_str(&format!("-{:016x}.snapshot", fnv1a(identity.as_bytes())));
        self.dir.join(name)
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// What an informer's snapshot did: see [`InformerStats::snapshot`](crate::InformerStats::snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotStatus {
    /// The file.
    pub path: PathBuf,
    /// What the informer started from: the snapshot's resourceVersion, its objects, the
    /// file's size and how long reading it (and, for [`SnapshotStart::ChangesOnly`], filling
    /// the cache) took.
    pub loaded: Option<Loaded>,
    /// Why there was no snapshot to start from, or why it was refused.
    pub not_loaded: Option<String>,
    /// The last snapshot written: resourceVersion, objects, bytes, how long, when.
    pub last_written: Option<LastWritten>,
    /// Why the last attempt to write one failed or was skipped, if it did.
    pub last_write_error: Option<String>,
}

/// The snapshot an informer started from ([`SnapshotStatus::loaded`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Loaded {
    /// Its resourceVersion.
    pub resource_version: String,
    /// How many objects.
    pub objects: usize,
    /// The file's size.
    pub bytes: u64,
    /// How long reading it took.
    pub took: Duration,
}

/// The last snapshot an informer wrote ([`SnapshotStatus::last_written`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LastWritten {
    /// Its resourceVersion.
    pub resource_version: String,
    /// How many objects.
    pub objects: usize,
    /// The file's size.
    pub bytes: u64,
    /// How long writing it took (the cache's list under the informer's lock not included:
    /// it is a copy of pointers).
    pub took: Duration,
    /// When.
    pub at: SystemTime,
}

type Load<T> =
    dyn Fn(&Path, &str) -> Result<(String, Vec<Arc<T>>, u64), SnapshotError> + Send + Sync;
type Write<T> =
    dyn Fn(&Path, &str, &str, &[Arc<T>]) -> Result<Written, SnapshotError> + Send + Sync;

/// An informer's snapshot: its options and identity, how its objects are read and written
/// (type-erased: only `Cached<K>` has them), and what it did.
pub(in crate::informer) struct Snapshots<T> {
    pub(super) options: SnapshotOptions,
    /// What the informer lists and watches (the file is named after it).
    identity: String,
    /// The shards it selects, for an informer of shards that change
    /// ([`SharedIndexInformerBuilder::shards`](crate::SharedIndexInformerBuilder::shards)):
    /// part of the identity written and asked for, as they are at the time, so that a
    /// snapshot of other shards is refused.
    pub(super) shards: Option<kinformer_reflector::ShardSelection>,
    path: PathBuf,
    load: Box<Load<T>>,
    write: Box<Write<T>>,
    status: Mutex<SnapshotStatus>,
}

impl<K: Send + Sync + 'static> Snapshots<Cached<K>> {
    pub(super) fn new(options: SnapshotOptions, identity: String) -> Self {
        let identity = if options.version.is_empty() {
            identity
        } else {
            format!("{identity} version={}", options.version)
        };
        let path = options.path_for(&identity);
        Self {
            status: Mutex::new(SnapshotStatus {
                path: path.clone(),
                ..SnapshotStatus::default()
            }),
            options,
            identity,
            shards: None,
            path,
            load: Box::new(|path, identity| {
                snapshot::read::<K>(path, identity)
                    .map(|s| (s.resource_version, s.objects, s.bytes))
            }),
            write: Box::new(|path, identity, rv, objects| {
                snapshot::write(path, identity, rv, objects)
            }),
        }
    }
}

impl<T> Snapshots<T> {
    /// The identity a snapshot written or read now has: with the shards selected now.
    fn identity_now(&self) -> String {
        match &self.shards {
            None => self.identity.clone(),
            Some(selection) => format!(
                "{} shards={}",
                self.identity,
                selection.get().map(|s| s.to_string()).unwrap_or_default()
            ),
        }
    }

    pub(super) fn status(&self) -> SnapshotStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, f: impl FnOnce(&mut SnapshotStatus)) {
        f(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// The informer's start from its snapshot: the [`Resume`] for its reflector, if there is a
/// snapshot of its identity that is not older than its cache. Only the header is read here;
/// the objects load (and, for [`SnapshotStart::ChangesOnly`], fill the cache) off the
/// runtime's threads while the reflector asks the server and catches up.
pub(super) async fn load<T: MetaObject + Send + Sync + 'static>(
    inner: &Arc<Inner<T>>,
) -> Option<Resume<T>> {
    let snapshots = inner.snapshots()?;
    let started = Instant::now();
    let header = {
        let inner = Arc::clone(inner);
        tokio::task::spawn_blocking(move || {
            let s = inner.snapshots()?;
            if let Ok(n) = snapshot::remove_temporaries(&s.path)
                && n > 0
            {
                tracing::info!(informer = %inner.name(), removed = n, "removed what a writer killed midway left");
            }
            let identity = s.identity_now();
            Some(snapshot::read_header(&s.path).and_then(|h| {
                if h.identity != identity {
                    return Err(SnapshotError::Identity {
                        path: s.path.clone(),
                        expected: identity,
                        found: h.identity,
                    });
                }
                // Never back in time: a cache that applied a newer version keeps it.
                let applied = inner.store().last_sync_resource_version();
                if matches!((applied.parse::<u64>(), h.resource_version.parse::<u64>()), (Ok(a), Ok(r)) if a > r) {
                    return Err(SnapshotError::BehindCache {
                        path: s.path.clone(),
                        snapshot: h.resource_version,
                        applied,
                    });
                }
                Ok((h.resource_version, h.identity))
            }))
        })
        .await
    };
    let (rv, identity) = match header {
        Ok(Some(Ok(found))) => found,
        Ok(None) => return None,
        Ok(Some(Err(e))) => {
            refused(inner, snapshots, &e);
            return None;
        }
        Err(e) => {
            tracing::warn!(informer = %inner.name(), error = %e, "reading the snapshot failed: listing instead");
            return None;
        }
    };
    let changes_only = snapshots.options.start == SnapshotStart::ChangesOnly;
    let resume_rv = rv.clone();
    let inner = Arc::clone(inner);
    let snapshot_rv = rv.clone();
    // Started now, not when the reflector first awaits it: the file is read while the
    // reflector asks the server and watches.
    let task_inner = Arc::clone(&inner);
    let read_task = tokio::task::spawn_blocking(move || {
        let s = task_inner
            .snapshots()
            .ok_or_else(|| std::io::Error::other("no snapshot"))?;
        let read = (s.load)(&s.path, &identity)
            .map_err(kinformer_core::BoxError::from)
            .and_then(|(rv, objects, bytes)| {
                if rv != snapshot_rv {
                    return Err("the snapshot was replaced while it was read".into());
                }
                let count = objects.len();
                let held = if changes_only {
                    task_inner
                        .store()
                        .replace(ListPart::whole(objects, rv.clone()))
                        .map_err(|e| ErrorChain(&e).to_string())?;
                    None
                } else {
                    Some(objects)
                };
                Ok((rv, held, count, bytes))
            });
        // Noted here, when it is read: the reflector may never await it (it could not
        // catch up, and lists).
        match read {
            Ok((rv, held, objects, bytes)) => {
                let took = started.elapsed();
                tracing::info!(informer = %task_inner.name(), path = %s.path.display(), resource_version = %rv,
                    objects, bytes, took_ms = took.as_millis() as u64, "loaded the snapshot");
                s.update(|st| {
                    st.loaded = Some(Loaded {
                        resource_version: rv,
                        objects,
                        bytes,
                        took,
                    });
                    st.not_loaded = None;
                });
                Ok(held)
            }
            Err(e) => {
                tracing::warn!(informer = %task_inner.name(), error = %ErrorChain(&*e), "snapshot refused: listing instead");
                s.update(|st| st.not_loaded = Some(ErrorChain(&*e).to_string()));
                Err(e)
            }
        }
    });
    let loading = async move {
        read_task
            .await
            .map_err(|e| kinformer_core::BoxError::from(e.to_string()))
            .and_then(|r| r)
    };
    Some(if changes_only {
        Resume::loading_into_known(resume_rv, async move { loading.await.map(drop) })
    } else {
        Resume::loading(resume_rv, async move {
            loading.await?.ok_or_else(|| "no objects".into())
        })
    })
}

/// Notes and logs why the snapshot was not started from.
fn refused<T: MetaObject + Send + Sync + 'static>(
    inner: &Inner<T>,
    snapshots: &Snapshots<T>,
    e: &SnapshotError,
) {
    if e.is_missing() {
        tracing::info!(informer = %inner.name(), path = %snapshots.path.display(), "no snapshot: listing");
    } else {
        tracing::warn!(informer = %inner.name(), error = %ErrorChain(e), "snapshot refused: listing instead");
    }
    snapshots.update(|s| s.not_loaded = Some(ErrorChain(e).to_string()));
}

/// How long a periodic write waits for the informer to have applied everything queued.
pub(super) const QUIET_PATIENCE: Duration = Duration::from_secs(2);

/// Writes the informer's snapshot now: the cache at the reflector's last synced version,
/// waiting up to `patience` for a moment when nothing is queued. `Ok(None)` when there is
/// nothing to write yet (not synced, no snapshot configured).
pub(super) async fn write<T: MetaObject + Send + Sync + 'static>(
    inner: &Arc<Inner<T>>,
    patience: Duration,
) -> Result<Option<Written>, Error> {
    let Some(snapshots) = inner.snapshots() else {
        return Ok(None);
    };
    let result = capture_and_write(inner, patience).await;
    match &result {
        Ok(Some((rv, w))) => {
            tracing::debug!(informer = %inner.name(), resource_version = %rv, objects = w.objects, bytes = w.bytes,
                took_ms = w.took.as_millis() as u64, "snapshot written");
            snapshots.update(|s| {
                s.last_written = Some(LastWritten {
                    resource_version: rv.clone(),
                    objects: w.objects,
                    bytes: w.bytes,
                    took: w.took,
                    at: SystemTime::now(),
                });
                s.last_write_error = None;
            });
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(informer = %inner.name(), error = %ErrorChain(e), "cannot write the snapshot");
            snapshots.update(|s| s.last_write_error = Some(ErrorChain(e).to_string()));
        }
    }
    result.map(|w| w.map(|(_, w)| w))
}

async fn capture_and_write<T: MetaObject + Send + Sync + 'static>(
    inner: &Arc<Inner<T>>,
    patience: Duration,
) -> Result<Option<(String, Written)>, Error> {
    if !inner.has_synced() {
        return Ok(None);
    }
    let deadline = tokio::time::Instant::now() + patience;
    let (rv, identity, objects) = loop {
        // The version first, then the cache with nothing queued: everything the reflector
        // handed on up to that version is applied, so the snapshot holds at least that
        // (an event it holds past it is sent again from there: an update of the same
        // version, which changes nothing).
        let rv = inner.last_sync_resource_version();
        let identity = inner
            .snapshots()
            .map(Snapshots::identity_now)
            .unwrap_or_default();
        if let Some(objects) = inner.quiet_list() {
            break (rv, identity, objects);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Snapshot(SnapshotError::Io {
                path: inner
                    .snapshots()
                    .map(|s| s.path.clone())
                    .unwrap_or_default(),
                source: std::io::Error::other("the informer never had nothing queued: skipped"),
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if rv.is_empty() {
        return Ok(None);
    }
    let inner = Arc::clone(inner);
    let written = tokio::task::spawn_blocking(move || {
        let s = inner
            .snapshots()
            .ok_or_else(|| std::io::Error::other("no snapshot"))?;
        std::fs::create_dir_all(&s.options.dir)?;
        Ok::<_, std::io::Error>((s.write)(&s.path, &identity, &rv, &objects).map(|w| (rv, w)))
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))
    .and_then(|r| r);
    match written {
        Ok(Ok(w)) => Ok(Some(w)),
        Ok(Err(e)) => Err(Error::Snapshot(e)),
        Err(source) => Err(Error::Snapshot(SnapshotError::Io {
            path: PathBuf::new(),
            source,
        })),
    }
}
