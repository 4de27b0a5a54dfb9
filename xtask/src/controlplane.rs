//! Building etcd and kube-apiserver from `xtask/go`, and running a control plane.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::progress::Step;

/// The Kubernetes version the Go module builds; stamped into the binary like a release.
const K8S_VERSION: &str = "v1.36.3";
const BINARIES: [(&str, &str); 8] = [
    ("etcd", "./cmd/etcd"),
    ("kube-apiserver", "./cmd/kube-apiserver"),
    ("clientgo-peer", "./cmd/clientgo-peer"),
    // client-go's contender in `cargo xtask bench informer`.
    ("informer-peer", "./cmd/informer-peer"),
    // client-go's events recorder, checked against kinformer-events' (crates/events/tests).
    ("events-peer", "./cmd/events-peer"),
    // client-go's subject in `cargo xtask soak`.
    ("soak-peer", "./cmd/soak-peer"),
    // client-go's elector in the leader election interop and chaos tests.
    ("leader-peer", "./cmd/leader-peer"),
    // client-go's pod controller in the leader election failover test (examples/tests).
    ("controller-peer", "./cmd/controller-peer"),
];

fn go_dir() -> PathBuf {
    crate::workspace_root().join("xtask").join("go")
}

fn ldflags() -> String {
    let (major, minor) = match K8S_VERSION
        .trim_start_matches('v')
        .split('.')
        .collect::<Vec<_>>()[..]
    {
        [major, minor, ..] => (major.to_owned(), minor.to_owned()),
        _ => (String::new(), String::new()),
    };
    format!(
        "-X k8s.io/component-base/version.gitVersion={K8S_VERSION} \
         -X k8s.io/component-base/version.gitMajor={major} \
         -X k8s.io/component-base/version.gitMinor={minor} \
         -X k8s.io/client-go/pkg/version.gitVersion={K8S_VERSION}"
    )
}

fn go(args: &[&str]) -> Command {
    let mut cmd = Command::new("go");
    cmd.args(args)
        .current_dir(go_dir())
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local");
    cmd
}

/// A fingerprint of everything the binaries are built from: the Go toolchain, go.mod,
/// go.sum, every .go file of the module and the link flags.
fn fingerprint() -> anyhow::Result<String> {
    let version = go(&["version"])
        .output()
        .context("running `go version`: Go is needed to build the control plane")?;
    let mut hash = Fnv::default();
    hash.write(&version.stdout);
    hash.write(ldflags().as_bytes());
    let mut files = Vec::new();
    collect_sources(&go_dir(), &mut files)?;
    files.sort();
    for f in files {
        hash.write(f.to_string_lossy().as_bytes());
        hash.write(&fs::read(&f).with_context(|| format!("reading {}", f.display()))?);
    }
    Ok(format!("{:016x}", hash.0))
}

fn collect_sources(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_sources(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "go")
            || path
                .file_name()
                .is_some_and(|n| n == "go.mod" || n == "go.sum")
        {
            out.push(path);
        }
    }
    Ok(())
}

/// 64-bit FNV-1a: stable across Rust releases, unlike `DefaultHasher`.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Builds the binaries into `target/controlplane/bin` unless they are up to date.
pub(crate) fn build(force: bool) -> anyhow::Result<()> {
    let bin_dir = kinformer_testenv::binary_dir();
    let stamp_path = bin_dir.join(".fingerprint");
    let fingerprint = fingerprint()?;
    let present = BINARIES
        .iter()
        .all(|(name, _)| bin_dir.join(name).is_file());
    if !force && present && fs::read_to_string(&stamp_path).is_ok_and(|s| s.trim() == fingerprint) {
        eprintln!(
            "control plane binaries are up to date in {}",
            bin_dir.display()
        );
        return Ok(());
    }
    fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    let _ = fs::remove_file(&stamp_path);
    eprintln!(
        "building the control plane ({K8S_VERSION}) from {} into {}\n\
         (a cold build downloads ~800 MB of Go modules and takes several minutes on 2 cores)",
        go_dir().display(),
        bin_dir.display()
    );
    let steps = BINARIES.len() + 1;
    run_step(
        &format!("[1/{steps}] go mod download"),
        go(&["mod", "download"]),
    )?;
    for (i, (name, pkg)) in BINARIES.iter().enumerate() {
        let tmp = bin_dir.join(format!(".{name}.tmp"));
        let tmp_str = tmp.to_string_lossy().into_owned();
        let cmd = go(&[
            "build",
            "-v",
            "-trimpath",
            "-pgo=off",
            "-ldflags",
            &ldflags(),
            "-o",
            &tmp_str,
            pkg,
        ]);
        run_step(&format!("[{}/{steps}] go build {name}", i + 2), cmd)?;
        fs::rename(&tmp, bin_dir.join(name))
            .with_context(|| format!("moving {name} into place"))?;
    }
    fs::write(&stamp_path, &fingerprint).context("writing the build fingerprint")?;
    Ok(())
}

/// Runs a command as one progress step, counting the lines it prints (for `go build
/// -v`, the packages compiled) and showing the last one.
fn run_step(name: &str, mut cmd: Command) -> anyhow::Result<()> {
    let mut step = Step::start(name);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{name}: starting {cmd:?} (is Go 1.26+ installed?)"))?;
    let (tx, rx) = mpsc::channel();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child.stderr.take().map(|p| Box::new(p) as _),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let mut count = 0usize;
    let mut tail = VecDeque::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) => {
                count += 1;
                step.detail(&format!("{count} packages, last: {line}"));
                tail.push_back(line);
                if tail.len() > 40 {
                    tail.pop_front();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                step.detail(&format!("{count} packages, linking or downloading"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child
        .wait()
        .with_context(|| format!("{name}: waiting for go"))?;
    if !status.success() {
        step.finish("FAILED");
        bail!("{name} failed ({status}):\n{}", Vec::from(tail).join("\n"));
    }
    step.finish(&format!("done ({count} packages compiled)"));
    Ok(())
}

/// Runs a control plane until Ctrl-C.
pub(crate) fn up(watch_cache: bool) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let step = Step::start("starting etcd and kube-apiserver");
        let cp = kinformer_testenv::ControlPlane::start_with(kinformer_testenv::Options::default().watch_cache(watch_cache)).await?;
        step.finish("ready");
        let kubeconfig = cp.kubeconfig().display();
        println!(
            "\nkube-apiserver {K8S_VERSION} is up at {server} (etcd at {etcd}).\n\
             kubeconfig: {kubeconfig}\n  contexts: admin (system:masters, current) and restricted (list/watch pods only)\n\n\
             Use it from a shell:\n  export KUBECONFIG={kubeconfig}\n  kubectl get namespaces            # any kubectl-like tool reads KUBECONFIG\n  \
             kubectl --context restricted get pods -A\n\
             or from Rust: kube::Config::infer() picks up KUBECONFIG.\n\n\
             Logs and data: {dir}\nPress Ctrl-C to stop (everything is removed).",
            server = cp.server_url(),
            etcd = cp.etcd_url(),
            dir = cp.dir().display(),
        );
        tokio::signal::ctrl_c().await?;
        eprintln!("stopping...");
        drop(cp);
        eprintln!("stopped");
        anyhow::Ok(())
    })
}
