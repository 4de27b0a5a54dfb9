//! The subjects: building the Rust one, starting every subject process and reading what
//! it prints (the protocol is in the crate docs of `bench/soak`).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

/// One informer under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Subject {
    /// kinformer with client-go's `DeltaFIFO`.
    DeltaFifo,
    /// kinformer with the in-order FIFO.
    InOrder,
    /// kinformer with the in-order FIFO in atomic mode (its default).
    InOrderAtomic,
    /// kinformer's defaults with its cache kept on disk, killed at random and started again
    /// from its snapshot (handlers told only what changed).
    Snapshots,
    /// client-go (`xtask/go/cmd/soak-peer`).
    ClientGo,
}

impl Subject {
    pub(super) const ALL: [Self; 5] = [
        Self::DeltaFifo,
        Self::InOrder,
        Self::InOrderAtomic,
        Self::Snapshots,
        Self::ClientGo,
    ];

    /// The name in tables, file names and messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::DeltaFifo => "kinformer DeltaFifo",
            Self::InOrder => "kinformer InOrder",
            Self::InOrderAtomic => "kinformer InOrderAtomic",
            Self::Snapshots => "kinformer restarted from snapshots",
            Self::ClientGo => "client-go",
        }
    }

    /// A short name for file names.
    pub(super) fn slug(self) -> &'static str {
        match self {
            Self::DeltaFifo => "kinformer-delta-fifo",
            Self::InOrder => "kinformer-in-order",
            Self::InOrderAtomic => "kinformer-in-order-atomic",
            Self::Snapshots => "kinformer-snapshots",
            Self::ClientGo => "client-go",
        }
    }

    /// Whether this is one of the project's own subjects (whose failures fail the soak).
    pub(super) fn is_kinformer(self) -> bool {
        self != Self::ClientGo
    }

    fn fifo_arg(self) -> Option<&'static str> {
        match self {
            Self::DeltaFifo => Some("delta-fifo"),
            Self::InOrder => Some("in-order"),
            Self::InOrderAtomic | Self::Snapshots => Some("in-order-atomic"),
            Self::ClientGo => None,
        }
    }
}

/// `cargo build -p kinformer-soak` (`--release` or not); returns the executable.
pub(super) fn build_rust_subject(release: bool) -> anyhow::Result<PathBuf> {
    let profile = if release { "release" } else { "dev" };
    crate::cargo::bins("kinformer-soak", profile)?
        .remove("kinformer-soak")
        .context("cargo built no kinformer-soak executable")
}

/// One notification the recorder got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Event {
    /// When the handler got it.
    pub(super) unix_ns: u64,
    pub(super) op: EventOp,
    pub(super) name: String,
    /// The object's resourceVersion (0 when it had none).
    pub(super) rv: u64,
    /// A delete for a deletion the informer missed (`DeletedFinalStateUnknown`).
    pub(super) tombstone: bool,
}

/// The handler method called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EventOp {
    Add,
    Update,
    Delete,
}

/// One resource sample; a field the subject could not read is `None`.
#[derive(Clone, Debug, Default)]
pub(super) struct Sample {
    pub(super) unix_ns: u64,
    pub(super) rss_kib: Option<u64>,
    pub(super) fds: Option<u64>,
    pub(super) threads: Option<u64>,
    /// Tokio alive tasks, or goroutines.
    pub(super) tasks: Option<u64>,
    pub(super) recorded: u64,
    pub(super) slow: u64,
    pub(super) panics: u64,
    /// Lists after the first (kinformer only).
    pub(super) relists: Option<u64>,
}

/// What the subject said on a `dump`.
#[derive(Clone, Debug, Default)]
pub(super) struct Dump {
    pub(super) store: BTreeMap<String, u64>,
    pub(super) last_sync_rv: String,
    /// Lists after the first (kinformer only).
    pub(super) relists: Option<u64>,
    pub(super) lists_by_reason: BTreeMap<String, u64>,
    pub(super) recorded: u64,
    pub(super) panicky: u64,
    pub(super) slow: u64,
    pub(super) panics: u64,
}

/// Everything a subject printed, parsed, and the state rebuilt from its events.
#[derive(Debug, Default)]
pub(super) struct Log {
    pub(super) synced_ns: Option<u64>,
    pub(super) events: Vec<Event>,
    pub(super) samples: Vec<Sample>,
    pub(super) dumps: Vec<Dump>,
    /// name → resourceVersion, from the events so far.
    pub(super) state: HashMap<String, u64>,
    /// Lines that were not what the protocol says.
    pub(super) bad_lines: Vec<String>,
    /// Each process after the first ([`Running::respawn`]): where its events start in
    /// `events`, and the state it started from (its snapshot's pods, as the driver read the
    /// file before starting it; empty when there was none to read).
    pub(super) epochs: Vec<(usize, BTreeMap<String, u64>)>,
    /// Set when stdout closed.
    pub(super) closed: bool,
}

impl Log {
    fn take_line(&mut self, line: &str) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            self.bad_lines.push(line.to_owned());
            return;
        };
        let ok = match v["type"].as_str() {
            Some("event") => parse_event(&v).map(|e| {
                match e.op {
                    EventOp::Add | EventOp::Update => {
                        self.state.insert(e.name.clone(), e.rv);
                    }
                    EventOp::Delete => {
                        self.state.remove(&e.name);
                    }
                }
                self.events.push(e);
            }),
            Some("sample") => v["unix_ns"].as_u64().map(|unix_ns| {
                self.samples.push(Sample {
                    unix_ns,
                    rss_kib: v["rss_kib"].as_u64(),
                    fds: v["fds"].as_u64(),
                    threads: v["threads"].as_u64(),
                    tasks: v["tasks"].as_u64(),
                    recorded: v["recorded"].as_u64().unwrap_or_default(),
                    slow: v["slow"].as_u64().unwrap_or_default(),
                    panics: v["panics"].as_u64().unwrap_or_default(),
                    relists: v["relists"].as_u64(),
                });
            }),
            Some("dump") => parse_dump(&v).map(|d| self.dumps.push(d)),
            Some("synced") => v["unix_ns"].as_u64().map(|t| self.synced_ns = Some(t)),
            _ => None,
        };
        if ok.is_none() {
            self.bad_lines.push(line.to_owned());
        }
    }
}

/// A resourceVersion as a number: etcd's revision. (Opaque to clients in general; the
/// soak runs on etcd, whose revisions order every write.)
pub(super) fn rv_number(rv: &str) -> u64 {
    rv.parse().unwrap_or_default()
}

fn parse_event(v: &Value) -> Option<Event> {
    Some(Event {
        unix_ns: v["unix_ns"].as_u64()?,
        op: match v["op"].as_str()? {
            "add" => EventOp::Add,
            "update" => EventOp::Update,
            "delete" => EventOp::Delete,
            _ => return None,
        },
        name: v["name"].as_str()?.to_owned(),
        rv: rv_number(v["rv"].as_str()?),
        tombstone: v["tombstone"].as_bool()?,
    })
}

fn parse_dump(v: &Value) -> Option<Dump> {
    let store = v["store"]
        .as_object()?
        .iter()
        .map(|(k, rv)| (k.clone(), rv_number(rv.as_str().unwrap_or_default())))
        .collect();
    let lists_by_reason = v["lists_by_reason"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    Some(Dump {
        store,
        last_sync_rv: v["last_sync_rv"].as_str()?.to_owned(),
        relists: v["relists"].as_u64(),
        lists_by_reason,
        recorded: v["recorded"].as_u64()?,
        panicky: v["panicky"].as_u64()?,
        slow: v["slow"].as_u64()?,
        panics: v["panics"].as_u64()?,
    })
}

/// A running subject.
pub(super) struct Running {
    pub(super) subject: Subject,
    child: Child,
    stdin: Option<ChildStdin>,
    log: Arc<Mutex<Log>>,
    reader: Option<JoinHandle<()>>,
    stderr_path: PathBuf,
    /// How to start it again.
    launch: Launch,
}

/// What a subject's process is started with.
struct Launch {
    exe: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    sample: Duration,
    out_dir: PathBuf,
}

/// Where the subjects connect and what they watch.
pub(super) struct Target<'a> {
    pub(super) kubeconfig: &'a Path,
    pub(super) namespace: &'a str,
    pub(super) sample: Duration,
    /// Raw stdout and stderr of each subject go here.
    pub(super) out_dir: &'a Path,
}

impl Running {
    /// Starts `subject`; its stdout is parsed into its [`Log`] (and kept raw in
    /// `<out_dir>/<slug>.jsonl`), its stderr goes to `<out_dir>/<slug>.log`.
    pub(super) fn spawn(subject: Subject, exe: &Path, target: &Target<'_>) -> anyhow::Result<Self> {
        let launch = Launch {
            exe: exe.to_owned(),
            kubeconfig: target.kubeconfig.to_owned(),
            namespace: target.namespace.to_owned(),
            sample: target.sample,
            out_dir: target.out_dir.to_owned(),
        };
        let log = Arc::new(Mutex::new(Log::default()));
        let (child, reader, stderr_path) = start(subject, &launch, &log)?;
        let mut me = Self {
            subject,
            child,
            stdin: None,
            log,
            reader: Some(reader),
            stderr_path,
            launch,
        };
        me.stdin = me.child.stdin.take();
        Ok(me)
    }

    /// The directory a [`Subject::Snapshots`] keeps its snapshot in.
    pub(super) fn snapshot_dir(&self) -> PathBuf {
        self.launch
            .out_dir
            .join(format!("{}-snapshots", self.subject.slug()))
    }

    /// Kills the process at once (SIGKILL: as a crash, no snapshot at shutdown) and waits
    /// for what it printed.
    pub(super) fn kill(&mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let _ = self.child.kill();
        self.child.wait()?;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Ok(())
    }

    /// Starts the process again after [`kill`](Self::kill): its events go on in the same
    /// log, as a new epoch whose state starts from `base` (what its snapshot holds).
    pub(super) fn respawn(&mut self, base: BTreeMap<String, u64>) -> anyhow::Result<()> {
        {
            let mut log = lock(&self.log);
            let at = log.events.len();
            log.state = base.iter().map(|(k, v)| (k.clone(), *v)).collect();
            log.epochs.push((at, base));
            log.synced_ns = None;
            log.closed = false;
        }
        let (child, reader, stderr_path) = start(self.subject, &self.launch, &self.log)?;
        self.child = child;
        self.stdin = self.child.stdin.take();
        self.reader = Some(reader);
        self.stderr_path = stderr_path;
        Ok(())
    }

    /// The subject's log so far.
    pub(super) fn log(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    /// Fails when the process has exited, with the end of its stderr.
    pub(super) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); the end of its stderr ({}):\n{}",
                self.subject.name(),
                self.stderr_path.display(),
                tail(&self.stderr_path, 30)
            );
        }
        Ok(())
    }

    /// Asks for a dump and waits for it.
    pub(super) fn dump(&mut self, timeout: Duration) -> anyhow::Result<Dump> {
        let before = self.log().dumps.len();
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        writeln!(stdin, "dump")
            .and_then(|()| stdin.flush())
            .with_context(|| format!("asking {} for a dump", self.subject.name()))?;
        let start = Instant::now();
        loop {
            if let Some(d) = self.log().dumps.get(before) {
                return Ok(d.clone());
            }
            self.check_alive()?;
            if start.elapsed() > timeout {
                bail!("{} sent no dump within {timeout:?}", self.subject.name());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes stdin and waits for a clean exit (killing it after `timeout`); returns the
    /// log and, unless it exited cleanly, what went wrong.
    pub(super) fn finish(mut self, timeout: Duration) -> (Log, Option<String>) {
        drop(self.stdin.take());
        let start = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if start.elapsed() <= timeout => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) | Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let log = std::mem::take(&mut *self.log());
        let problem = match status {
            Some(s) if s.success() => None,
            Some(s) => Some(format!(
                "it exited with {s} when its stdin closed; the end of its stderr ({}):\n{}",
                self.stderr_path.display(),
                tail(&self.stderr_path, 30)
            )),
            None => Some(format!(
                "it did not exit within {timeout:?} of its stdin closing"
            )),
        };
        (log, problem)
    }
}

/// Starts `subject`'s process; its stdout is parsed into `log` (and appended raw to
/// `<out_dir>/<slug>.jsonl`), its stderr appended to `<out_dir>/<slug>.log`.
fn start(
    subject: Subject,
    launch: &Launch,
    log: &Arc<Mutex<Log>>,
) -> anyhow::Result<(Child, JoinHandle<()>, PathBuf)> {
    let append = |path: &Path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))
    };
    let stderr_path = launch.out_dir.join(format!("{}.log", subject.slug()));
    let stderr = append(&stderr_path)?;
    let mut cmd = Command::new(&launch.exe);
    cmd.arg("--kubeconfig")
        .arg(&launch.kubeconfig)
        .args(["--namespace", &launch.namespace])
        .args(["--sample-ms", &launch.sample.as_millis().to_string()]);
    if let Some(fifo) = subject.fifo_arg() {
        cmd.args(["--fifo", fifo]);
    }
    if subject == Subject::Snapshots {
        cmd.arg("--snapshot-dir")
            .arg(launch.out_dir.join(format!("{}-snapshots", subject.slug())));
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr));
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", launch.exe.display()))?;
    let raw_path = launch.out_dir.join(format!("{}.jsonl", subject.slug()));
    let mut raw = BufWriter::new(append(&raw_path)?);
    let out = child.stdout.take().context("no stdout")?;
    let log = Arc::clone(log);
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(raw, "{line}");
            lock(&log).take_line(&line);
        }
        let _ = raw.flush();
        lock(&log).closed = true;
    });
    Ok((child, reader, stderr_path))
}

impl Drop for Running {
    fn drop(&mut self) {
        // Only when `finish` was not reached (an error elsewhere): leave no process behind.
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The last `n` lines of a file.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_every_type_are_parsed_and_events_rebuild_the_state() {
        let mut log = Log::default();
        for line in [
            r#"{"type":"synced","unix_ns":5}"#,
            r#"{"type":"event","op":"add","name":"a","rv":"10","tombstone":false,"unix_ns":6}"#,
            r#"{"type":"event","op":"add","name":"b","rv":"11","tombstone":false,"unix_ns":7}"#,
            r#"{"type":"event","op":"update","name":"a","rv":"12","tombstone":false,"unix_ns":8}"#,
            r#"{"type":"event","op":"delete","name":"b","rv":"11","tombstone":true,"unix_ns":9}"#,
            r#"{"type":"sample","unix_ns":10,"rss_kib":100,"fds":9,"threads":4,"tasks":3,"recorded":4,"panicky":4,"slow":2,"panics":0,"lists":1,"relists":0,"watches":1}"#,
            r#"{"type":"sample","unix_ns":11,"rss_kib":100,"fds":9,"threads":4,"tasks":30,"recorded":4,"panicky":4,"slow":2,"panics":0,"lists":null,"relists":null,"watches":null}"#,
            r#"{"type":"dump","unix_ns":12,"store":{"a":"12"},"last_sync_rv":"12","relists":null,"lists_by_reason":null,"recorded":4,"panicky":4,"slow":4,"panics":0}"#,
            "not json",
            r#"{"type":"event","op":"poke","name":"a","rv":"1","tombstone":false,"unix_ns":1}"#,
        ] {
            log.take_line(line);
        }
        assert_eq!(log.synced_ns, Some(5));
        assert_eq!(log.events.len(), 4);
        assert!(log.events[3].tombstone);
        assert_eq!(log.state, HashMap::from([("a".to_owned(), 12)]));
        assert_eq!(log.samples.len(), 2);
        assert_eq!(log.samples[0].relists, Some(0));
        assert_eq!(log.samples[1].relists, None);
        assert_eq!(log.dumps.len(), 1);
        assert_eq!(log.dumps[0].store, BTreeMap::from([("a".to_owned(), 12)]));
        assert_eq!(log.bad_lines.len(), 2);
    }
}
