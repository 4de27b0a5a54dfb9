//! What both recorders and both readers share: a JSON Lines output written a flushed line
//! at a time, with its clock, its call numbers and the first error kept; and the reading
//! loop of a recording's lines.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use kinformer_core::Clock;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::format::{FormatError, Header, MAGIC, VERSION, micros, write_json_line};

/// Where a recorder writes, shared by its clones, its tapes and whatever it hands out.
pub(crate) struct LineWriter {
    writer: Mutex<Box<dyn Write + Send>>,
    memory: Option<Arc<Mutex<Vec<u8>>>>,
    /// The clock and when the recording began on it.
    timing: Mutex<(Arc<dyn Clock>, Instant)>,
    next_call: AtomicU64,
    error: Mutex<Option<String>>,
    /// What is recorded, for the warning when writing fails ("recording").
    what: &'static str,
}

impl LineWriter {
    /// Writes and flushes `header` to `writer`, and times the lines after it on `clock`
    /// from now. `memory`: the buffer `writer` writes to, if in memory.
    pub(crate) fn start(
        mut writer: Box<dyn Write + Send>,
        memory: Option<Arc<Mutex<Vec<u8>>>>,
        header: &impl Serialize,
        clock: Arc<dyn Clock>,
        what: &'static str,
    ) -> Result<Self, FormatError> {
        write_json_line(&mut writer, header)?;
        writer.flush()?;
        Ok(Self {
            writer: Mutex::new(writer),
            memory,
            timing: Mutex::new((Arc::clone(&clock), clock.now())),
            next_call: AtomicU64::new(0),
            error: Mutex::new(None),
            what,
        })
    }

    /// An in-memory writer and the buffer it writes to.
    pub(crate) fn memory() -> (Box<dyn Write + Send>, Arc<Mutex<Vec<u8>>>) {
        let memory = Arc::new(Mutex::new(Vec::new()));
        (Box::new(Shared(Arc::clone(&memory))), memory)
    }

    /// Times the lines on `clock` instead, from now on.
    pub(crate) fn set_clock(&self, clock: Arc<dyn Clock>) {
        let start = clock.now();
        *self.timing.lock() = (clock, start);
    }

    /// Microseconds since the recording began.
    pub(crate) fn now(&self) -> u64 {
        let timing = self.timing.lock();
        micros(timing.0.now().saturating_duration_since(timing.1))
    }

    /// The next call's number.
    pub(crate) fn call(&self) -> u64 {
        self.next_call.fetch_add(1, Ordering::Relaxed)
    }

    /// How many calls were numbered.
    pub(crate) fn calls(&self) -> u64 {
        self.next_call.load(Ordering::Relaxed)
    }

    /// Writes `line` and flushes it; a failure is kept (the first one).
    pub(crate) fn write(&self, line: &impl Serialize) {
        let mut w = self.writer.lock();
        // One line a write, flushed: a recorder killed midway leaves whole lines.
        let result = write_json_line(&mut *w, line).and_then(|()| Ok(w.flush()?));
        if let Err(e) = result {
            let mut first = self.error.lock();
            if first.is_none() {
                tracing::warn!(error = %e, "{} stopped: cannot write", self.what);
                *first = Some(e.to_string());
            }
        }
    }

    /// Keeps `e` as the error, unless one is kept already (and warns of it then).
    pub(crate) fn fail(&self, e: &FormatError, warning: &str) {
        let mut first = self.error.lock();
        if first.is_none() {
            tracing::warn!(error = %e, "{warning}");
            *first = Some(e.to_string());
        }
    }

    /// The first thing that could not be recorded, if any.
    pub(crate) fn error(&self) -> Option<String> {
        self.error.lock().clone()
    }

    /// What was written so far, for an in-memory writer; for another, an error that says
    /// `elsewhere`.
    pub(crate) fn written(&self, elsewhere: &str) -> std::io::Result<Vec<u8>> {
        match &self.memory {
            Some(memory) => Ok(memory.lock().clone()),
            None => Err(std::io::Error::other(elsewhere)),
        }
    }
}

/// The in-memory output's writer.
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes a whole recording: `header`, then `lines`, then flushes.
pub(crate) fn write_all<L: Serialize>(
    mut out: impl Write,
    header: &Header,
    lines: impl IntoIterator<Item = L>,
) -> Result<(), FormatError> {
    write_json_line(&mut out, header)?;
    for line in lines {
        write_json_line(&mut out, &line)?;
    }
    out.flush()?;
    Ok(())
}

/// The file at `path`, to read.
pub(crate) fn open(path: impl AsRef<Path>) -> std::io::Result<BufReader<File>> {
    Ok(BufReader::new(File::open(path)?))
}

/// The file at `path` (created, or replaced), to write.
pub(crate) fn create(path: impl AsRef<Path>) -> std::io::Result<BufWriter<File>> {
    Ok(BufWriter::new(File::create(path)?))
}

/// Why [`read_lines`] stopped.
pub(crate) enum ReadError {
    /// Not a recording, another version, a bad line, I/O.
    Format(FormatError),
    /// A header of another `encoding` (the one found).
    Encoding(String),
}

impl From<FormatError> for ReadError {
    fn from(e: FormatError) -> Self {
        Self::Format(e)
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        Self::Format(FormatError::Io(e))
    }
}

/// Reads a recording's JSON Lines: checks its header (the format, the version, and
/// `encoding`), then gives each line after it, decoded as `L`, to `each`, in order. Blank
/// lines are skipped, a last line cut short is left out, and any other line that does not
/// decode, or that `each` refuses (with why), is a [`FormatError::Line`] with its number.
/// Returns the header.
pub(crate) fn read_lines<L: DeserializeOwned>(
    reader: impl BufRead,
    encoding: &str,
    mut each: impl FnMut(L) -> Result<(), String>,
) -> Result<Header, ReadError> {
    let mut lines = reader.lines().enumerate().peekable();
    let header: Header = match lines.next() {
        Some((_, line)) => serde_json::from_str(&line?).map_err(|_| FormatError::NotARecording)?,
        None => return Err(FormatError::NotARecording.into()),
    };
    if header.format != MAGIC {
        return Err(FormatError::NotARecording.into());
    }
    if header.version != VERSION {
        return Err(FormatError::Version {
            found: header.version,
        }
        .into());
    }
    if header.encoding != encoding {
        return Err(ReadError::Encoding(header.encoding));
    }
    while let Some((n, line)) = lines.next() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |detail: String| FormatError::Line {
            line: n + 1,
            detail,
        };
        let parsed: L = match serde_json::from_str(&line) {
            Ok(l) => l,
            // A last line cut short: the recorder died while writing it.
            Err(e) if lines.peek().is_none() && e.is_eof() => break,
            Err(e) => {
                return Err(bad(format!("{:?} at column {}", e.classify(), e.column())).into());
            }
        };
        each(parsed).map_err(bad)?;
    }
    Ok(header)
}
