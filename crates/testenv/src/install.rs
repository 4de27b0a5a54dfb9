//! Building etcd and kube-apiserver from the Go module proxy: the Go module of
//! `crates/testenv/go`, shipped inside this crate, written to a work dir and built with the
//! `go` on `PATH`.
//!
//! [`install`] is what `kinformer-testenv install` (this crate's binary) runs, into
//! [`user_binary_dir`]; `cargo xtask controlplane build` runs it into the workspace's
//! target dir. Each binary is rebuilt only when its fingerprint — the Go toolchain, the
//! link flags and every file of the module — differs from the one stamped next to it.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::{Error, io};

/// The Kubernetes version the control plane is built at (and the name of its dir under
/// [`user_binary_dir`]'s parent). It matches the `k8s.io/kubernetes` requirement of the
/// Go module this crate ships.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// The binaries a control plane runs, in the order they are built.
pub const BINARIES: [&str; 2] = ["etcd", "kube-apiserver"];

/// The Go module: each file's path inside it and its bytes. Compiled into the crate, so
/// a user's copy of kinformer-testenv from crates.io carries it.
const SOURCES: [(&str, &str); 5] = [
    ("go.mod", include_str!("../go/go.mod")),
    ("go.sum", include_str!("../go/go.sum")),
    ("cmd/etcd/main.go", include_str!("../go/cmd/etcd/main.go")),
    (
        "cmd/kube-apiserver/main.go",
        include_str!("../go/cmd/kube-apiserver/main.go"),
    ),
    (
        "internal/parentwatch/parentwatch.go",
        include_str!("../go/internal/parentwatch/parentwatch.go"),
    ),
];

/// What [`install`] reports while it works: a caller shows it (the binary prints lines,
/// `cargo xtask` a spinner).
#[derive(Debug)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// Every binary was already built from these sources, in this dir: nothing to do.
    UpToDate {
        /// The binaries' dir.
        dir: &'a Path,
    },
    /// A build starts: `stale` will be built into `dir`.
    Building {
        /// The binaries that will be built.
        stale: &'a [&'static str],
        /// Where they go.
        dir: &'a Path,
    },
    /// A step (`go mod download`, `go build <binary>`) starts: step `index` of `total`.
    Step {
        /// 1-based.
        index: usize,
        /// How many steps this build has.
        total: usize,
        /// What the step runs.
        name: &'a str,
    },
    /// A line `go` printed (for `go build -v`, a package it compiled).
    Output(&'a str),
    /// Half a second without output (a download or the link).
    Waiting,
    /// The step ended well.
    StepDone,
}

/// Where [`install`] puts the binaries for this user by default, and the last place
/// [`ControlPlane::start`](crate::ControlPlane::start) looks:
/// `$XDG_CACHE_HOME/kinformer/controlplane/<KUBERNETES_VERSION>/bin`, or
/// `$HOME/.cache/kinformer/controlplane/<KUBERNETES_VERSION>/bin` without `XDG_CACHE_HOME`.
/// `None` when neither variable is set.
pub fn user_binary_dir() -> Option<PathBuf> {
    user_binary_dir_in(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

/// [`user_binary_dir`] for these values of `XDG_CACHE_HOME` and `HOME` (empty ones count
/// as unset, and a relative `XDG_CACHE_HOME` is ignored, as the XDG spec says).
pub(crate) fn user_binary_dir_in(
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let cache = xdg_cache_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            home.filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(
        cache
            .join("kinformer")
            .join("controlplane")
            .join(KUBERNETES_VERSION)
            .join("bin"),
    )
}

/// Builds etcd and kube-apiserver ([`KUBERNETES_VERSION`]) into `dir` with the Go
/// toolchain on `PATH`, each unless it is already built from the same sources and
/// toolchain (every one, with `force`), reporting to `progress`. Returns the binaries'
/// paths.
///
/// A cold build downloads about 800 MB of Go modules through the Go module proxy
/// (`GOPROXY`, as `go` is configured) and takes several minutes on two cores; a warm one
/// (Go's build cache filled) is mostly the link of kube-apiserver; an up-to-date one
/// returns at once. Each binary is written next to its final path and renamed into
/// place, then its fingerprint is stamped beside it (`.<name>.fingerprint`), so an
/// interrupted build leaves no half-written binary that looks built.
///
/// # Errors
/// [`Error::GoMissing`] without `go` on `PATH`; [`Error::GoTooOld`] when it is older than
/// the module's `go` line; [`Error::GoBuild`] when a step fails (with the end of its
/// output); [`Error::Io`] for the dirs and files.
pub fn install(
    dir: &Path,
    force: bool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Vec<PathBuf>, Error> {
    let go_version = check_go()?;
    let fingerprint = fingerprint(&go_version);
    let stale: Vec<&'static str> = BINARIES
        .into_iter()
        .filter(|b| force || !up_to_date(dir, b, &fingerprint))
        .collect();
    let paths = BINARIES.iter().map(|b| dir.join(b)).collect();
    if stale.is_empty() {
        progress(Progress::UpToDate { dir });
        return Ok(paths);
    }
    fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    progress(Progress::Building { stale: &stale, dir });
    // The module's files, in a work dir beside the binaries (removed when done). With
    // `-trimpath` where it is does not change the binaries.
    let work = tempfile::Builder::new()
        .prefix(".src-")
        .tempdir_in(dir)
        .map_err(io(format!("creating a work dir in {}", dir.display())))?;
    write_sources(work.path())?;
    let total = stale.len() + 1;
    run_step(
        &mut go(work.path(), &["mod", "download"]),
        (1, total, "go mod download"),
        progress,
    )?;
    for (i, name) in stale.iter().enumerate() {
        let stamp = stamp(dir, name);
        match fs::remove_file(&stamp) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(io(format!("removing {}", stamp.display()))(e));
            }
            _ => {}
        }
        let tmp = dir.join(format!(".{name}.tmp"));
        let mut cmd = go(
            work.path(),
            &["build", "-v", "-trimpath", "-buildvcs=false", "-pgo=off"],
        );
        cmd.arg("-ldflags")
            .arg(ldflags())
            .arg("-o")
            .arg(&tmp)
            .arg(format!("./cmd/{name}"));
        run_step(
            &mut cmd,
            (i + 2, total, &format!("go build {name}")),
            progress,
        )?;
        let path = dir.join(name);
        fs::rename(&tmp, &path).map_err(io(format!("moving {name} into {}", dir.display())))?;
        fs::write(&stamp, &fingerprint).map_err(io(format!("writing {}", stamp.display())))?;
    }
    Ok(paths)
}

/// The Go version the module needs: its `go.mod`'s `go` line (`1.26.0`).
pub fn go_version_needed() -> &'static str {
    SOURCES[0]
        .1
        .lines()
        .find_map(|l| l.strip_prefix("go "))
        .map_or("", str::trim)
}

/// `go env GOVERSION` (`go1.26.8`) of the `go` on `PATH`, checked against
/// [`go_version_needed`].
fn check_go() -> Result<String, Error> {
    check_go_program(Path::new("go"))
}

/// [`check_go`] for the Go program `go`.
fn check_go_program(go: &Path) -> Result<String, Error> {
    let needed = go_version_needed();
    let out = match Command::new(go)
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output()
    {
        Ok(out) if out.status.success() => out,
        Ok(_) => return Err(Error::GoMissing { needed }),
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(Error::GoMissing { needed }),
        Err(e) => return Err(io("running `go env GOVERSION`")(e)),
    };
    let found = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if version_at_least(found.trim_start_matches("go"), needed) {
        Ok(found)
    } else {
        Err(Error::GoTooOld { found, needed })
    }
}

/// Whether Go version `found` (`1.26.8`, `1.27rc1`, `1.26`) is at least `needed`
/// (`1.26.0`): compared by their numeric parts, a pre-release counting as its release.
fn version_at_least(found: &str, needed: &str) -> bool {
    fn parts(v: &str) -> Vec<u64> {
        v.split('.')
            .map(|p| {
                let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap_or(0)
            })
            .collect()
    }
    let (mut f, mut n) = (parts(found), parts(needed));
    let len = f.len().max(n.len());
    f.resize(len, 0);
    n.resize(len, 0);
    f >= n
}

/// A `go` command in the module's work dir: no cgo (static binaries), and the toolchain
/// on `PATH` (never one `go` would download), as checked by [`check_go`].
fn go(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("go");
    cmd.args(args)
        .current_dir(dir)
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local");
    cmd
}

/// The link flags: the version stamped into the binaries, as a release build does.
fn ldflags() -> String {
    let mut parts = KUBERNETES_VERSION.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or_default();
    let minor = parts.next().unwrap_or_default();
    format!(
        "-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION} \
         -X k8s.io/component-base/version.gitMajor={major} \
         -X k8s.io/component-base/version.gitMinor={minor} \
         -X k8s.io/client-go/pkg/version.gitVersion={KUBERNETES_VERSION}"
    )
}

/// Writes the module's files under `dir`.
fn write_sources(dir: &Path) -> Result<(), Error> {
    for (name, text) in SOURCES {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
        }
        fs::write(&path, text).map_err(io(format!("writing {}", path.display())))?;
    }
    Ok(())
}

/// A fingerprint of what the binaries are built from: the toolchain, the link flags and
/// every file of the module (its path and bytes). Nothing about where it is built, so a
/// clone elsewhere or a user's cache agrees.
fn fingerprint(go_version: &str) -> String {
    let mut hash = Fingerprint::default();
    hash.write(go_version.as_bytes());
    hash.write(ldflags().as_bytes());
    for (name, text) in SOURCES {
        hash.write(name.as_bytes());
        hash.write(text.as_bytes());
    }
    hash.finish()
}

/// Where the fingerprint of binary `name` in `dir` is written, once the binary is in place.
pub fn stamp(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.fingerprint"))
}

/// Whether binary `name` is in `dir`, built from the inputs whose fingerprint is
/// `fingerprint` (its [`stamp`] says so).
pub fn up_to_date(dir: &Path, name: &str, fingerprint: &str) -> bool {
    dir.join(name).is_file()
        && fs::read_to_string(stamp(dir, name)).is_ok_and(|s| s.trim() == fingerprint)
}

/// A fingerprint of what a binary is built from (64-bit FNV-1a: stable across Rust
/// releases, unlike `DefaultHasher`): what [`install`] stamps etcd and kube-apiserver
/// with, and `cargo xtask controlplane build` the client-go peers.
#[derive(Clone, Debug)]
pub struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fingerprint {
    /// Adds `bytes` to what is fingerprinted.
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The fingerprint so far, as 16 hex digits.
    pub fn finish(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// Runs one step, passing each line the command prints to `progress`; on failure,
/// [`Error::GoBuild`] with its last 40 lines.
fn run_step(
    cmd: &mut Command,
    (index, total, name): (usize, usize, &str),
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), Error> {
    progress(Progress::Step { index, total, name });
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(format!("starting `{name}`")))?;
    let (tx, rx) = mpsc::channel();
    let pipes: [Option<Box<dyn Read + Send>>; 2] = [
        child.stdout.take().map(|p| Box::new(p) as _),
        child.stderr.take().map(|p| Box::new(p) as _),
    ];
    for pipe in pipes.into_iter().flatten() {
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
    let mut tail = VecDeque::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) => {
                progress(Progress::Output(&line));
                tail.push_back(line);
                if tail.len() > 40 {
                    tail.pop_front();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => progress(Progress::Waiting),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().map_err(io(format!("waiting for `{name}`")))?;
    if !status.success() {
        return Err(Error::GoBuild {
            step: name.to_owned(),
            status: status.to_string(),
            tail: Vec::from(tail).join("\n"),
        });
    }
    progress(Progress::StepDone);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_builds_the_kubernetes_version_it_names() {
        let go_mod = SOURCES[0].1;
        assert!(
            go_mod
                .lines()
                .any(|l| l.trim() == format!("k8s.io/kubernetes {KUBERNETES_VERSION}")),
            "go.mod does not require k8s.io/kubernetes {KUBERNETES_VERSION}"
        );
        assert_eq!(go_version_needed(), "1.26.0");
    }

    /// A `go` that answers `go env GOVERSION` with `version`.
    #[cfg(unix)]
    fn fake_go(dir: &Path, version: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(format!("go-{version}"));
        fs::write(&path, format!("#!/bin/sh\necho {version}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// [`check_go_program`], again if the script was busy: another test's thread may have
    /// forked while it was open for writing (ETXTBSY), which is not what is tested.
    #[cfg(unix)]
    fn check(go: &Path) -> Result<String, Error> {
        for _ in 0..20 {
            match check_go_program(go) {
                Err(Error::Io { source, .. }) if source.raw_os_error() == Some(26) => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
        check_go_program(go)
    }

    #[test]
    #[cfg(unix)]
    fn a_missing_or_old_go_is_a_typed_error_naming_the_version_needed() {
        let dir = tempfile::tempdir().unwrap();
        let missing = check_go_program(&dir.path().join("no-go-here")).unwrap_err();
        assert!(
            matches!(missing, Error::GoMissing { needed: "1.26.0" }),
            "{missing}"
        );
        assert!(
            missing.to_string().contains("Go 1.26.0 or newer"),
            "{missing}"
        );

        let old = check(&fake_go(dir.path(), "go1.25.7")).unwrap_err();
        match &old {
            Error::GoTooOld { found, needed } => {
                assert_eq!((found.as_str(), *needed), ("go1.25.7", "1.26.0"));
            }
            e => panic!("{e}"),
        }
        assert!(old.to_string().contains("go1.25.7"), "{old}");

        let new = check(&fake_go(dir.path(), "go1.26.8")).unwrap();
        assert_eq!(new, "go1.26.8");
    }

    #[test]
    fn go_versions_compare_by_their_numbers() {
        assert!(version_at_least("1.26.8", "1.26.0"));
        assert!(version_at_least("1.26", "1.26.0"));
        assert!(version_at_least("1.27rc1", "1.26.0"));
        assert!(version_at_least("1.100.0", "1.26.0"));
        assert!(!version_at_least("1.25.9", "1.26.0"));
        assert!(!version_at_least("1.9", "1.26.0"));
    }

    #[test]
    fn the_user_dir_is_under_xdg_cache_home_else_home() {
        let dir = user_binary_dir_in(Some("/x/cache".into()), Some("/home/u".into()));
        assert_eq!(
            dir,
            Some(PathBuf::from(format!(
                "/x/cache/kinformer/controlplane/{KUBERNETES_VERSION}/bin"
            )))
        );
        for xdg in [None, Some("".into()), Some("relative".into())] {
            assert_eq!(
                user_binary_dir_in(xdg, Some("/home/u".into())),
                Some(PathBuf::from(format!(
                    "/home/u/.cache/kinformer/controlplane/{KUBERNETES_VERSION}/bin"
                )))
            );
        }
        assert_eq!(user_binary_dir_in(None, None), None);
        assert_eq!(user_binary_dir_in(None, Some("".into())), None);
    }

    #[test]
    fn the_fingerprint_follows_the_toolchain_only_by_its_version() {
        assert_eq!(fingerprint("go1.26.8"), fingerprint("go1.26.8"));
        assert_ne!(fingerprint("go1.26.8"), fingerprint("go1.26.9"));
    }

    #[test]
    fn a_binary_is_up_to_date_only_with_its_own_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(!up_to_date(d, "etcd", "abc"));
        fs::write(d.join("etcd"), "").unwrap();
        assert!(
            !up_to_date(d, "etcd", "abc"),
            "a binary without a stamp is stale"
        );
        fs::write(stamp(d, "etcd"), "abc\n").unwrap();
        assert!(up_to_date(d, "etcd", "abc"));
        assert!(!up_to_date(d, "etcd", "abd"));
        assert!(!up_to_date(d, "kube-apiserver", "abc"));
    }

    #[test]
    fn the_sources_are_written_as_a_module() {
        let dir = tempfile::tempdir().unwrap();
        write_sources(dir.path()).unwrap();
        for (name, text) in SOURCES {
            assert_eq!(fs::read_to_string(dir.path().join(name)).unwrap(), text);
        }
        let main = fs::read_to_string(dir.path().join("cmd/etcd/main.go")).unwrap();
        let module = go_mod_module();
        assert!(
            main.contains(&format!("\"{module}/internal/parentwatch\"")),
            "{main}"
        );
    }

    fn go_mod_module() -> &'static str {
        SOURCES[0]
            .1
            .lines()
            .find_map(|l| l.strip_prefix("module "))
            .unwrap()
            .trim()
    }
}
