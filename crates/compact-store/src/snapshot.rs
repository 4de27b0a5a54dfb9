//! Snapshot files: an informer's cache of [`Cached<K>`] objects written to disk and read
//! back, so that a restarted process resumes from where its cache was instead of listing
//! everything again (kinformer-informer-factory's `SnapshotOptions` decides when and
//! where; this module is the file).
//!
//! A snapshot holds the objects' encodings as they are in memory (no object is decoded
//! or encoded to write or read one), the resourceVersion the cache was at, the identity of
//! the informer that wrote it (what it lists and watches, in words the informer chooses),
//! and the writing process's numbering of field names (the encoding numbers struct field
//! names per process: a reader adopts the writer's numbering, see below).
//!
//! It is written atomically: to a temporary file beside it, flushed to disk (`fsync`),
//! renamed over the old one, and the directory flushed; a process killed at any point
//! leaves the old snapshot or the new one, whole. A CRC-32 of everything before it ends
//! the file. Reading refuses, with a typed [`SnapshotError`], a file that is not a snapshot,
//! of another format version, truncated, corrupted (its checksum), of another identity, or
//! whose field numbering this process cannot adopt; nothing of such a file is used.
//!
//! # Layout (format 1, integers little-endian)
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | `KINFSNAP` |
//! | 4 | format version (`1`) |
//! | 4 + n | identity: length, UTF-8 |
//! | 4 + n | resourceVersion: length, UTF-8 |
//! | 8 | when it was written, milliseconds since the Unix epoch |
//! | 4, then 2 + n each | the field names, in id order: count, then length and UTF-8 of each |
//! | 8 | object count |
//! | 4 + n each | each object's encoding: length, bytes |
//! | 4 | CRC-32 (IEEE) of every byte before it |
//! | 8 | `KINFEND.` |
//!
//! # Field names
//!
//! The encoding writes a struct field's name as a number from a table the process builds
//! as it meets names. A snapshot carries its writer's table. When this process has
//! numbered nothing yet, or only the first names of the same table (which holds for every
//! snapshot one process wrote: its table only grows), reading one makes this process number
//! names as the writer did, and the entries are used as they are. Otherwise (this process
//! met names in another order first: another informer cached objects before this snapshot
//! was read) each entry is renumbered as it is read, one pass over its bytes.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_compact_store::{Cached, snapshot};
//! use kinformer_core::MetaObject;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("pods.snapshot");
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("web-0".into());
//! pod.metadata.namespace = Some("default".into());
//! pod.metadata.resource_version = Some("41".into());
//! let objects = vec![Arc::new(Cached::new(&pod)?)];
//!
//! let written = snapshot::write(&path, "v1/pods", "42", &objects)?;
//! assert_eq!(written.objects, 1);
//!
//! let read = snapshot::read::<Pod>(&path, "v1/pods")?;
//! assert_eq!(read.resource_version, "42");
//! assert_eq!(read.objects[0].object_name(), Some("web-0"));
//! // Another informer's identity is refused.
//! assert!(matches!(
//!     snapshot::read::<Pod>(&path, "v1/pods ns=kube-system"),
//!     Err(snapshot::SnapshotError::Identity { .. })
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Cached;
use crate::codec::{self, Numbering};
use crate::view::read::Raw;

const MAGIC: &[u8; 8] = b"KINFSNAP";
const END: &[u8; 8] = b"KINFEND.";
/// The format version this crate writes and reads.
pub const FORMAT: u32 = 1;
/// The longest identity or resourceVersion a snapshot may hold.
const MAX_TEXT: u32 = 64 * 1024;
/// The largest object a snapshot may hold: far above what the API server stores (1.5 MiB by
/// default), low enough that a corrupt length cannot ask for gigabytes.
const MAX_OBJECT: u32 = 64 * 1024 * 1024;
/// The most field names a table may hold (the encoding's own cap).
const MAX_NAMES: u32 = 1 << 16;

/// Why a snapshot could not be written or read. No variant quotes an object's content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// There is no snapshot at the path: the informer lists, as on a first start.
    #[error("no snapshot at {}", path.display())]
    Missing {
        /// The path looked at.
        path: PathBuf,
    },
    /// Reading or writing failed.
    #[error("snapshot {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// The file does not start as a snapshot does.
    #[error("{} is not a snapshot", path.display())]
    NotASnapshot {
        /// The file.
        path: PathBuf,
    },
    /// The snapshot is of a format version this crate does not read.
    #[error("snapshot {} is of format {found}, this build reads format {FORMAT}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Its format version.
        found: u32,
    },
    /// The file ends before the snapshot does: cut short.
    #[error("snapshot {} is truncated", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
    },
    /// The checksum does not match the content, or a length or a text in it is not what
    /// the format allows: the file was damaged.
    #[error("snapshot {} is corrupt: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: &'static str,
    },
    /// The snapshot is of another informer (other resource, namespace, selectors, shards or
    /// wire format): its objects are not what this informer would hold.
    #[error("snapshot {} is of {found:?}, not of {expected:?}", path.display())]
    Identity {
        /// The file.
        path: PathBuf,
        /// The identity asked for.
        expected: String,
        /// The identity it holds.
        found: String,
    },
    /// The snapshot's table of field names is not one (a name twice, too many names).
    #[error("snapshot {}: {source}", path.display())]
    FieldNames {
        /// The file.
        path: PathBuf,
        /// Why the numbering could not be adopted.
        source: codec::CodecError,
    },
    /// The snapshot is older than what the cache it would fill has applied already: a cache
    /// never goes back in time, so it is not started from.
    #[error("snapshot {} is at resourceVersion {snapshot}, older than the {applied} its cache has applied", path.display())]
    BehindCache {
        /// The file.
        path: PathBuf,
        /// The snapshot's version.
        snapshot: String,
        /// The version the cache has applied.
        applied: String,
    },
    /// Writing would replace a snapshot of the same identity at a newer resourceVersion
    /// with an older one: a cache never goes back in time.
    #[error("snapshot {} is at resourceVersion {on_disk}, newer than {writing}: not replaced", path.display())]
    Older {
        /// The file.
        path: PathBuf,
        /// The version of the snapshot on disk.
        on_disk: String,
        /// The version that was to be written.
        writing: String,
    },
}

impl SnapshotError {
    /// Whether there was simply no snapshot (not a failure: a first start).
    pub fn is_missing(&self) -> bool {
        matches!(self, Self::Missing { .. })
    }
}

/// What [`write()`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// How many objects.
    pub objects: usize,
    /// The file's size.
    pub bytes: u64,
    /// How long writing took, the `fsync`s included.
    pub took: Duration,
}

/// A snapshot as [`read()`] found it.
#[non_exhaustive]
pub struct Snapshot<K> {
    /// The resourceVersion the cache was at when it was written: everything up to it, and
    /// nothing after it, is in [`objects`](Self::objects).
    pub resource_version: String,
    /// When it was written (the writer's clock).
    pub written_at: SystemTime,
    /// The objects.
    pub objects: Vec<Arc<Cached<K>>>,
    /// The file's size.
    pub bytes: u64,
}

impl<K> std::fmt::Debug for Snapshot<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("resource_version", &self.resource_version)
            .field("written_at", &self.written_at)
            .field("objects", &self.objects.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Writes `objects`, the cache at `resource_version`, as the snapshot of `identity` at
/// `path`, atomically (see the [module docs](self)). A snapshot of the same identity at
/// `path` at a newer resourceVersion (both integers) is not replaced: a cache never goes back
/// in time ([`SnapshotError::Older`]).
///
/// # Errors
/// [`SnapshotError::Io`] when a file cannot be written, flushed or renamed (the old
/// snapshot, if any, is then left as it was); [`SnapshotError::Older`].
pub fn write<K>(
    path: &Path,
    identity: &str,
    resource_version: &str,
    objects: &[Arc<Cached<K>>],
) -> Result<Written, SnapshotError> {
    let started = Instant::now();
    if let Ok(on_disk) = read_header(path)
        && on_disk.identity == identity
        && newer(&on_disk.resource_version, resource_version)
    {
        return Err(SnapshotError::Older {
            path: path.to_owned(),
            on_disk: on_disk.resource_version,
            writing: resource_version.to_owned(),
        });
    }
    let io = |source| SnapshotError::Io {
        path: path.to_owned(),
        source,
    };
    let tmp = temporary(path);
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut out = Checksummed::new(BufWriter::with_capacity(1 << 20, file));
        out.put(MAGIC)?;
        out.put(&FORMAT.to_le_bytes())?;
        out.text(identity)?;
        out.text(resource_version)?;
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        out.put(&millis.to_le_bytes())?;
        // Taken after the objects were encoded (they were, before this call): a table only
        // grows, so it numbers every name they use.
        let names = codec::names();
        out.put(&len32(names.len())?.to_le_bytes())?;
        for name in names {
            let len = u16::try_from(name.len()).map_err(|_| invalid("a field name too long"))?;
            out.put(&len.to_le_bytes())?;
            out.put(name.as_bytes())?;
        }
        out.put(&(objects.len() as u64).to_le_bytes())?;
        for obj in objects {
            let bytes = obj.encoding();
            out.put(&len32(bytes.len())?.to_le_bytes())?;
            out.put(bytes)?;
        }
        let crc = out.crc.clone().finalize();
        let mut file = out
            .inner
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        file.write_all(&crc.to_le_bytes())?;
        file.write_all(END)?;
        let bytes = out.written + 4 + END.len() as u64;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        // The rename itself reaches the disk with the directory.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(bytes)
    })();
    match result {
        Ok(bytes) => Ok(Written {
            objects: objects.len(),
            bytes,
            took: started.elapsed(),
        }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(io(e))
        }
    }
}

/// Reads the snapshot of `identity` at `path` (see the [module docs](self) for what is
/// refused). The objects are checked to be whole encodings; what their bytes say is read
/// where it lies, as for any cached object.
///
/// # Errors
/// [`SnapshotError::Missing`] when there is no file; otherwise the variant that says why the
/// file is refused. Nothing of a refused file is kept.
pub fn read<K>(path: &Path, identity: &str) -> Result<Snapshot<K>, SnapshotError> {
    let file = open(path)?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut input = Input::new(path, BufReader::with_capacity(1 << 20, file));
    let header = input.header()?;
    if header.identity != identity {
        return Err(SnapshotError::Identity {
            path: path.to_owned(),
            expected: identity.to_owned(),
            found: header.identity,
        });
    }
    let names = input.names()?;
    let count = input.u64()?;
    let mut encodings: Vec<Vec<u8>> =
        Vec::with_capacity(usize::try_from(count.min(1 << 20)).unwrap_or(0));
    for _ in 0..count {
        let len = input.u32()?;
        if len > MAX_OBJECT {
            return Err(input.corrupt("an object longer than allowed"));
        }
        let encoding = input.bytes(len as usize)?;
        encodings.push(encoding);
    }
    input.end()?;
    // The whole file checked: only now is anything of it used.
    let numbering = codec::adopt_names(&names).map_err(|source| SnapshotError::FieldNames {
        path: path.to_owned(),
        source,
    })?;
    let mut objects = Vec::with_capacity(encodings.len());
    for encoding in encodings {
        let encoding = match &numbering {
            Numbering::Same => encoding,
            Numbering::Renumber(ids) => codec::renumber(&encoding, ids)
                .ok_or_else(|| input.corrupt("an object that does not parse"))?,
        };
        if Raw::whole(&encoding).and_then(|r| r.as_struct()).is_none() {
            return Err(input.corrupt("an object that is not one encoded value"));
        }
        objects.push(Arc::new(Cached::from_bytes(encoding)));
    }
    Ok(Snapshot {
        resource_version: header.resource_version,
        written_at: UNIX_EPOCH + Duration::from_millis(header.written_at),
        objects,
        bytes,
    })
}

/// What a snapshot says of itself, read without its objects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// The identity of the informer that wrote it.
    pub identity: String,
    /// The resourceVersion it is at.
    pub resource_version: String,
    /// When it was written, milliseconds since the Unix epoch.
    pub written_at: u64,
}

/// The header of the snapshot at `path`, without reading (or checking) the rest.
///
/// # Errors
/// As [`read()`], for the header.
pub fn read_header(path: &Path) -> Result<Header, SnapshotError> {
    let file = open(path)?;
    Input::new(path, BufReader::with_capacity(64 * 1024, file)).header()
}

/// Whether `a` is a newer resourceVersion than `b`: both integers and `a` greater (other
/// versions are opaque, and compare as not newer).
fn newer(a: &str, b: &str) -> bool {
    matches!((a.parse::<u64>(), b.parse::<u64>()), (Ok(a), Ok(b)) if a > b)
}

fn open(path: &Path) -> Result<File, SnapshotError> {
    File::open(path).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            SnapshotError::Missing {
                path: path.to_owned(),
            }
        } else {
            SnapshotError::Io {
                path: path.to_owned(),
                source,
            }
        }
    })
}

/// The temporary file a snapshot is written to before it is renamed over `path`: beside it
/// (a rename does not cross file systems), named by the process and the write so that two
/// writers, of two processes or of one, never share one.
fn temporary(path: &Path) -> PathBuf {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}-{n}", std::process::id()));
    path.with_file_name(name)
}

/// Removes what writers of the snapshot at `path` that were killed midway left beside it
/// (their temporary files); returns how many. Call it only where no other process writes
/// that snapshot (an informer's own directory).
///
/// # Errors
/// When the directory cannot be read.
pub fn remove_temporaries(path: &Path) -> io::Result<usize> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(0);
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut prefix = name.to_os_string();
    prefix.push(".tmp-");
    let prefix = prefix.to_string_lossy().into_owned();
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(&prefix)
            && fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

fn len32(len: usize) -> io::Result<u32> {
    u32::try_from(len).map_err(|_| invalid("longer than a snapshot holds"))
}

fn invalid(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// A writer that keeps the CRC of what went through it.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
    written: u64,
}

impl<W: Write> Checksummed<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            crc: crc32fast::Hasher::new(),
            written: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.written += bytes.len() as u64;
        self.inner.write_all(bytes)
    }

    fn text(&mut self, s: &str) -> io::Result<()> {
        self.put(&len32(s.len())?.to_le_bytes())?;
        self.put(s.as_bytes())
    }
}

/// A reader of a snapshot that keeps the CRC of what it read and says why it stopped.
struct Input<'p, R> {
    path: &'p Path,
    inner: R,
    crc: crc32fast::Hasher,
}

impl<'p, R: Read> Input<'p, R> {
    fn new(path: &'p Path, inner: R) -> Self {
        Self {
            path,
            inner,
            crc: crc32fast::Hasher::new(),
        }
    }

    fn corrupt(&self, what: &'static str) -> SnapshotError {
        SnapshotError::Corrupt {
            path: self.path.to_owned(),
            what,
        }
    }

    /// Exactly `buf.len()` bytes, not counted in the checksum.
    fn raw(&mut self, buf: &mut [u8]) -> Result<(), SnapshotError> {
        self.inner.read_exact(buf).map_err(|source| {
            if source.kind() == io::ErrorKind::UnexpectedEof {
                SnapshotError::Truncated {
                    path: self.path.to_owned(),
                }
            } else {
                SnapshotError::Io {
                    path: self.path.to_owned(),
                    source,
                }
            }
        })
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), SnapshotError> {
        self.raw(buf)?;
        self.crc.update(buf);
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut buf = [0u8; N];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, SnapshotError> {
        self.array().map(u64::from_le_bytes)
    }

    fn bytes(&mut self, len: usize) -> Result<Vec<u8>, SnapshotError> {
        let mut buf = vec![0u8; len];
        self.fill(&mut buf)?;
        Ok(buf)
    }

    fn text(&mut self, max: u32) -> Result<String, SnapshotError> {
        let len = self.u32()?;
        if len > max {
            return Err(self.corrupt("a text longer than allowed"));
        }
        let bytes = self.bytes(len as usize)?;
        String::from_utf8(bytes).map_err(|_| self.corrupt("a text that is not UTF-8"))
    }

    fn header(&mut self) -> Result<Header, SnapshotError> {
        let mut magic = [0u8; 8];
        self.fill(&mut magic).map_err(|e| match e {
            SnapshotError::Truncated { path } => SnapshotError::NotASnapshot { path },
            e => e,
        })?;
        if &magic != MAGIC {
            return Err(SnapshotError::NotASnapshot {
                path: self.path.to_owned(),
            });
        }
        let format = self.u32()?;
        if format != FORMAT {
            return Err(SnapshotError::Format {
                path: self.path.to_owned(),
                found: format,
            });
        }
        Ok(Header {
            identity: self.text(MAX_TEXT)?,
            resource_version: self.text(MAX_TEXT)?,
            written_at: self.u64()?,
        })
    }

    fn names(&mut self) -> Result<Vec<String>, SnapshotError> {
        let count = self.u32()?;
        if count > MAX_NAMES {
            return Err(self.corrupt("more field names than allowed"));
        }
        let mut names = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let len = u16::from_le_bytes(self.array()?);
            let bytes = self.bytes(usize::from(len))?;
            names.push(
                String::from_utf8(bytes)
                    .map_err(|_| self.corrupt("a field name that is not UTF-8"))?,
            );
        }
        Ok(names)
    }

    /// The checksum and the end mark, and nothing after them.
    fn end(&mut self) -> Result<(), SnapshotError> {
        let expected = self.crc.clone().finalize();
        let mut crc = [0u8; 4];
        self.raw(&mut crc)?;
        let mut end = [0u8; 8];
        self.raw(&mut end)?;
        if u32::from_le_bytes(crc) != expected {
            return Err(self.corrupt("the checksum does not match"));
        }
        if &end != END {
            return Err(self.corrupt("no end mark"));
        }
        let mut rest = [0u8; 1];
        match self.inner.read(&mut rest) {
            Ok(0) => Ok(()),
            Ok(_) => Err(self.corrupt("bytes after the end mark")),
            Err(source) => Err(SnapshotError::Io {
                path: self.path.to_owned(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
