//! Stdout: one writer thread prints the lines every other part hands it, so a handler
//! only pays for a channel send, and lines never interleave.

use std::io::Write;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// A handle to the writer thread; cheap to clone.
#[derive(Clone)]
pub(crate) struct Out {
    tx: mpsc::Sender<serde_json::Value>,
}

impl Out {
    /// Queues one line. A writer that is gone (stdout closed) drops it: the driver is
    /// gone too.
    pub(crate) fn send(&self, line: serde_json::Value) {
        let _ = self.tx.send(line);
    }
}

/// Starts the writer thread; it ends when every [`Out`] is dropped.
pub(crate) fn spawn_writer() -> (Out, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<serde_json::Value>();
    let handle = std::thread::spawn(move || {
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::new(stdout.lock());
        while let Ok(first) = rx.recv() {
            let mut next = Some(first);
            // Write what is queued, then flush once: few syscalls under load, no delay
            // when idle.
            while let Some(line) = next {
                if writeln!(w, "{line}").is_err() {
                    return;
                }
                next = rx.try_recv().ok();
            }
            if w.flush().is_err() {
                return;
            }
        }
    });
    (Out { tx }, handle)
}

/// Nanoseconds since the Unix epoch: the clock the driver and every subject share.
pub(crate) fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
