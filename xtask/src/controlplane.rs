//! Building etcd and kube-apiserver (kinformer-testenv's installer, from the Go module it
//! ships in `crates/testenv/go`) and client-go's peer programs (from `xtask/go`), and running a
//! control plane.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use kinformer_testenv::install::{self, KUBERNETES_VERSION as K8S_VERSION, Progress};

use crate::progress::Step;

/// A program built from Go: etcd and kube-apiserver by kinformer-testenv's installer, the
/// others from the Go module in `xtask/go` (its name, and its package's under `cmd/`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Binary(&'static str);

pub(crate) const ETCD: Binary = Binary("etcd");
pub(crate) const KUBE_APISERVER: Binary = Binary("kube-apiserver");
/// client-go's side of `cargo xtask conformance`.
pub(crate) const CLIENTGO_PEER: Binary = Binary("clientgo-peer");
/// client-go's contender in `cargo xtask bench informer`.
pub(crate) const INFORMER_PEER: Binary = Binary("informer-peer");
/// client-go's events recorder, checked against kinformer-events' (crates/events/tests).
pub(crate) const EVENTS_PEER: Binary = Binary("events-peer");
/// client-go's subject in `cargo xtask soak`.
pub(crate) const SOAK_PEER: Binary = Binary("soak-peer");
/// client-go's elector in the leader election interop and chaos tests.
pub(crate) const LEADER_PEER: Binary = Binary("leader-peer");
/// client-go's pod controller in the leader election failover test (examples/tests).
pub(crate) const CONTROLLER_PEER: Binary = Binary("controller-peer");
/// The generator of kinformer-protobuf's schema table (`cargo xtask gen-proto`): built and
/// kept like the others, so that its check does not link it again on every run.
pub(crate) const GEN_PROTO: Binary = Binary("gen-proto");

/// What a control plane runs: all `cargo xtask demo` and `controlplane up` need.
pub(crate) const CONTROL_PLANE: [Binary; 2] = [ETCD, KUBE_APISERVER];
/// Everything: what `controlplane build` and the workspace tests of `cargo xtask test` need.
pub(crate) const ALL: [Binary; 8] = [
    ETCD,
    KUBE_APISERVER,
    CLIENTGO_PEER,
    INFORMER_PEER,
    EVENTS_PEER,
    SOAK_PEER,
    LEADER_PEER,
    CONTROLLER_PEER,
];

impl Binary {
    /// Where it is built (and where kinformer-testenv looks for it first).
    pub(crate) fn path(self) -> PathBuf {
        kinformer_testenv::workspace_binary_dir().join(self.0)
    }

    /// Its fingerprint stamp: written once the binary is in place.
    fn stamp(self) -> PathBuf {
        install::stamp(&kinformer_testenv::workspace_binary_dir(), self.0)
    }

    /// Built, and from the sources whose fingerprint is `fingerprint`.
    fn up_to_date(self, fingerprint: &str) -> bool {
        install::up_to_date(
            &kinformer_testenv::workspace_binary_dir(),
            self.0,
            fingerprint,
        )
    }
}

/// Before each binary had a stamp of its own, one `.fingerprint` stood for all of them (written
/// once all were built, removed before building any): it becomes each one's stamp, so that a
/// build made then is not redone.
fn adopt_shared_stamp() -> anyhow::Result<()> {
    let shared = kinformer_testenv::workspace_binary_dir().join(".fingerprint");
    let Ok(fingerprint) = fs::read_to_string(&shared) else {
        return Ok(());
    };
    for b in ALL {
        fs::write(b.stamp(), &fingerprint).context("writing a build fingerprint")?;
    }
    fs::remove_file(&shared).with_context(|| format!("removing {}", shared.display()))
}

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

/// A fingerprint of everything the peers are built from: the Go toolchain, go.mod, go.sum,
/// every .go file of `xtask/go` (its path within the module and its bytes) and the link
/// flags. (etcd and kube-apiserver have kinformer-testenv's, of its own module: a change to
/// a peer does not relink them.)
fn fingerprint() -> anyhow::Result<String> {
    let version = go(&["version"])
        .output()
        .context("running `go version`: Go is needed to build the control plane")?;
    let mut hash = install::Fingerprint::default();
    hash.write(&version.stdout);
    hash.write(ldflags().as_bytes());
    let mut files = Vec::new();
    let root = go_dir();
    collect_sources(&root, &mut files)?;
    files.sort();
    for f in files {
        // Relative: a clone elsewhere (CI's) has the same sources, and must not relink
        // every binary (minutes on two cores).
        hash.write(
            f.strip_prefix(&root)
                .unwrap_or(&f)
                .to_string_lossy()
                .as_bytes(),
        );
        hash.write(&fs::read(&f).with_context(|| format!("reading {}", f.display()))?);
    }
    Ok(hash.finish())
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

/// Builds `wanted` into `target/controlplane/bin`, each unless it is up to date (every one,
/// with `force`).
///
/// Each command asks for what it runs, no more: building every peer too made a fresh clone's
/// `cargo xtask demo`, which runs none, take 8 minutes (issue 23).
pub(crate) fn build(wanted: &[Binary], force: bool) -> anyhow::Result<()> {
    adopt_shared_stamp()?;
    let (control_plane, peers): (Vec<Binary>, Vec<Binary>) =
        wanted.iter().partition(|b| CONTROL_PLANE.contains(b));
    if !control_plane.is_empty() {
        build_control_plane(force)?;
    }
    if !peers.is_empty() {
        build_peers(&peers, force)?;
    }
    Ok(())
}

/// etcd and kube-apiserver, by kinformer-testenv's installer (the one `kinformer-testenv
/// install` runs outside this repository), into the workspace's binary dir.
fn build_control_plane(force: bool) -> anyhow::Result<()> {
    let bin_dir = kinformer_testenv::workspace_binary_dir();
    let mut step: Option<Step> = None;
    let mut count = 0usize;
    let result = kinformer_testenv::install::install(&bin_dir, force, &mut |p| match p {
        Progress::UpToDate { dir } => {
            eprintln!("etcd, kube-apiserver up to date in {}", dir.display());
        }
        Progress::Building { stale, dir } => eprintln!(
            "building {} ({K8S_VERSION}) from crates/testenv/go into {}\n\
             (a cold build downloads ~800 MB of Go modules and takes several minutes on 2 cores)",
            stale.join(", "),
            dir.display()
        ),
        Progress::Step { index, total, name } => {
            step = Some(Step::start(format!("[{index}/{total}] {name}")));
            count = 0;
        }
        Progress::Output(line) => {
            count += 1;
            if let Some(s) = &mut step {
                s.detail(&format!("{count} packages, last: {line}"));
            }
        }
        Progress::Waiting => {
            if let Some(s) = &mut step {
                s.detail(&format!("{count} packages, linking or downloading"));
            }
        }
        Progress::StepDone => {
            if let Some(s) = step.take() {
                s.finish(&format!("done ({count} packages compiled)"));
            }
        }
        _ => {}
    });
    if let Some(s) = step.take() {
        s.finish("FAILED");
    }
    result.context("building etcd and kube-apiserver")?;
    Ok(())
}

/// The client-go peers, from `xtask/go`.
fn build_peers(wanted: &[Binary], force: bool) -> anyhow::Result<()> {
    let bin_dir = kinformer_testenv::workspace_binary_dir();
    let fingerprint = fingerprint()?;
    let stale: Vec<Binary> = wanted
        .iter()
        .copied()
        .filter(|b| force || !b.up_to_date(&fingerprint))
        .collect();
    let names = |bins: &[Binary]| bins.iter().map(|b| b.0).collect::<Vec<_>>().join(", ");
    if stale.is_empty() {
        eprintln!("{} up to date in {}", names(wanted), bin_dir.display());
        return Ok(());
    }
    fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    eprintln!(
        "building {} ({K8S_VERSION}) from {} into {}",
        names(&stale),
        go_dir().display(),
        bin_dir.display()
    );
    let steps = stale.len() + 1;
    run_step(
        &format!("[1/{steps}] go mod download"),
        go(&["mod", "download"]),
    )?;
    for (i, b) in stale.iter().enumerate() {
        let _ = fs::remove_file(b.stamp());
        let tmp = bin_dir.join(format!(".{}.tmp", b.0));
        let tmp_str = tmp.to_string_lossy().into_owned();
        let pkg = format!("./cmd/{}", b.0);
        let cmd = go(&[
            "build",
            "-v",
            "-trimpath",
            "-pgo=off",
            "-ldflags",
            &ldflags(),
            "-o",
            &tmp_str,
            &pkg,
        ]);
        run_step(&format!("[{}/{steps}] go build {}", i + 2, b.0), cmd)?;
        fs::rename(&tmp, b.path()).with_context(|| format!("moving {} into place", b.0))?;
        fs::write(b.stamp(), &fingerprint).context("writing the build fingerprint")?;
    }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    /// Each requirement of a go.mod (`module` → `version`) and each replacement (`module =>` →
    /// the version it is replaced with).
    fn versions(go_mod: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for line in go_mod.lines().map(str::trim) {
            let line = line.strip_prefix("require ").unwrap_or(line);
            let tokens: Vec<&str> = line.split_whitespace().collect();
            match tokens[..] {
                [from, "=>", _, version] => {
                    out.insert(format!("{from} =>"), version.to_owned());
                }
                [module, version, ..] if version.starts_with('v') => {
                    out.insert(module.to_owned(), version.to_owned());
                }
                _ => {}
            }
        }
        out
    }

    /// The peers (xtask/go) and the control plane (crates/testenv/go) are separate modules; a
    /// version bumped in one must be bumped in the other, or client-go's peers would be checked
    /// against another Kubernetes than the API server they talk to.
    #[test]
    fn the_peers_use_the_control_planes_module_versions() {
        let root = crate::workspace_root();
        let read = |p: &[&str]| {
            let path = p.iter().fold(root.clone(), |d, c| d.join(c));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let control_plane = versions(&read(&["crates", "testenv", "go", "go.mod"]));
        let peers = versions(&read(&["xtask", "go", "go.mod"]));
        assert_eq!(
            control_plane.get("k8s.io/kubernetes").map(String::as_str),
            Some(super::K8S_VERSION)
        );
        assert!(control_plane.len() > 100, "{control_plane:?}");
        let differing: Vec<_> = control_plane
            .iter()
            .filter_map(|(m, v)| {
                let other = peers.get(m)?;
                (other != v).then(|| format!("{m}: {v} (crates/testenv/go) vs {other} (xtask/go)"))
            })
            .collect();
        assert!(differing.is_empty(), "{differing:#?}");
        assert!(
            peers.contains_key("k8s.io/client-go =>"),
            "xtask/go no longer pins client-go: {peers:?}"
        );
    }
}
