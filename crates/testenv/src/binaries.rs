//! Where the etcd and kube-apiserver binaries are.
//!
//! Looked for, in order: the dir `KINFORMER_CONTROLPLANE_BIN` names (alone, when set); in
//! kinformer's own repository, `<target dir>/controlplane/bin` (`cargo xtask controlplane
//! build`'s); then this user's cache dir ([`user_binary_dir`], `kinformer-testenv install`'s).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::install::{BINARIES, go_version_needed, user_binary_dir_in};

/// The environment the lookup reads, passed in so that tests need not change the
/// process's.
#[derive(Debug, Default, Clone)]
pub(crate) struct Env {
    /// `KINFORMER_CONTROLPLANE_BIN`.
    pub(crate) controlplane_bin: Option<OsString>,
    /// `CARGO_TARGET_DIR`.
    pub(crate) cargo_target_dir: Option<OsString>,
    /// `XDG_CACHE_HOME`.
    pub(crate) xdg_cache_home: Option<OsString>,
    /// `HOME`.
    pub(crate) home: Option<OsString>,
    /// kinformer's repository, when this crate was compiled from it (`None` from crates.io).
    pub(crate) repo_root: Option<PathBuf>,
}

impl Env {
    /// This process's environment.
    pub(crate) fn current() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            controlplane_bin: var("KINFORMER_CONTROLPLANE_BIN"),
            cargo_target_dir: var("CARGO_TARGET_DIR"),
            xdg_cache_home: var("XDG_CACHE_HOME"),
            home: var("HOME"),
            repo_root: repo_root(),
        }
    }

    /// The dirs to look in, in order.
    fn candidates(&self) -> Vec<PathBuf> {
        if let Some(dir) = &self.controlplane_bin {
            return vec![dir.into()];
        }
        let mut dirs = Vec::new();
        if let Some(root) = &self.repo_root {
            dirs.push(workspace_dir(root, self.cargo_target_dir.as_deref()));
        }
        if let Some(dir) = user_binary_dir_in(self.xdg_cache_home.clone(), self.home.clone()) {
            dirs.push(dir);
        }
        dirs
    }

    /// The first dir that holds both binaries, or [`Error::NotBuilt`] naming where it
    /// looked.
    pub(crate) fn locate(&self) -> Result<PathBuf, Error> {
        let searched = self.candidates();
        let mut missing = None;
        for dir in &searched {
            match BINARIES.iter().map(|b| dir.join(b)).find(|p| !p.is_file()) {
                None => return Ok(dir.clone()),
                Some(path) => missing = Some(path),
            }
        }
        Err(Error::NotBuilt {
            path: missing.unwrap_or_else(|| PathBuf::from(BINARIES[0])),
            searched,
            go: go_version_needed(),
        })
    }
}

/// kinformer's repository root when this crate is compiled from it: the dir holding
/// `xtask/` above the manifest of the package being run (`cargo test` and `cargo run` set
/// `CARGO_MANIFEST_DIR` at run time), else above this crate's own manifest, two levels up.
/// The run-time dir comes first because cargo reuses a build made from another clone that
/// shares the target dir, whose compiled-in dir is that clone's. A copy from crates.io (in
/// cargo's registry dir) has none, and looks only in the user's cache dir.
fn repo_root() -> Option<PathBuf> {
    let is_root = |dir: &Path| dir.join("xtask").join("Cargo.toml").is_file();
    let running = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let from_run = running.as_deref().and_then(|m| {
        m.ancestors()
            .take(3)
            .find(|dir| is_root(dir))
            .map(Path::to_owned)
    });
    from_run.or_else(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2)?;
        is_root(root).then(|| root.to_owned())
    })
}

/// `<target dir>/controlplane/bin` of the repository at `root`.
fn workspace_dir(root: &Path, cargo_target_dir: Option<&std::ffi::OsStr>) -> PathBuf {
    cargo_target_dir
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("controlplane")
        .join("bin")
}

/// The directory holding the `etcd` and `kube-apiserver` binaries that
/// [`ControlPlane::start`](crate::ControlPlane::start) runs: the first of
///
/// 1. the `KINFORMER_CONTROLPLANE_BIN` environment variable, if set (then nothing else);
/// 2. in kinformer's own repository, `<target dir>/controlplane/bin`, where `cargo xtask
///    controlplane build` puts them (and the client-go peers);
/// 3. [`user_binary_dir`], where `kinformer-testenv install` puts them
///
/// that holds both. When none does, the first of them (where a build would be looked for
/// first).
pub fn binary_dir() -> PathBuf {
    let env = Env::current();
    env.locate()
        .unwrap_or_else(|_| env.candidates().into_iter().next().unwrap_or_default())
}

/// The dir [`ControlPlane::start`](crate::ControlPlane::start) takes the binaries from:
/// the first place of [`binary_dir`]'s order that holds both.
///
/// # Errors
/// [`Error::NotBuilt`], naming every place looked in, when none does.
pub fn find_binary_dir() -> Result<PathBuf, Error> {
    Env::current().locate()
}

/// Where `cargo xtask controlplane build` builds: `KINFORMER_CONTROLPLANE_BIN` if set,
/// else `<target dir>/controlplane/bin` of kinformer's repository (`CARGO_TARGET_DIR`, or
/// `target/` beside the workspace's manifest). Outside the repository, the user's cache
/// dir, as [`install`](crate::install::install) uses.
pub fn workspace_binary_dir() -> PathBuf {
    let env = Env::current();
    if let Some(dir) = env.controlplane_bin {
        return dir.into();
    }
    match &env.repo_root {
        Some(root) => workspace_dir(root, env.cargo_target_dir.as_deref()),
        None => user_binary_dir().unwrap_or_default(),
    }
}

pub use crate::install::user_binary_dir;

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A dir holding (empty) binaries named `names`.
    fn bin_dir(root: &Path, rel: &str, names: &[&str]) -> PathBuf {
        let dir = root.join(rel);
        fs::create_dir_all(&dir).unwrap();
        for n in names {
            fs::write(dir.join(n), "").unwrap();
        }
        dir
    }

    fn user_dir(home: &Path) -> PathBuf {
        user_binary_dir_in(None, Some(home.as_os_str().to_owned())).unwrap()
    }

    /// A repository at `<tmp>/repo`, a home at `<tmp>/home`.
    fn env(tmp: &Path) -> Env {
        Env {
            home: Some(tmp.join("home").into()),
            repo_root: Some(tmp.join("repo")),
            ..Env::default()
        }
    }

    #[test]
    fn the_variable_wins_and_is_the_only_place_looked_in() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        bin_dir(t, "repo/target/controlplane/bin", &BINARIES);
        bin_dir(&user_dir(&t.join("home")), "", &BINARIES);
        let chosen = bin_dir(t, "chosen", &BINARIES);
        let env = Env {
            controlplane_bin: Some(chosen.clone().into()),
            ..env(t)
        };
        assert_eq!(env.locate().unwrap(), chosen);

        // Set but empty of binaries: an error, not a silent fallback to another build.
        let empty = bin_dir(t, "empty", &[]);
        let env = Env {
            controlplane_bin: Some(empty.clone().into()),
            ..env
        };
        match env.locate().unwrap_err() {
            Error::NotBuilt { path, searched, .. } => {
                assert_eq!(searched, std::slice::from_ref(&empty));
                assert_eq!(path, empty.join("etcd"));
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn the_repositorys_target_dir_comes_before_the_users_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let user = bin_dir(&user_dir(&t.join("home")), "", &BINARIES);
        // Only one of the two in the target dir: not a control plane, the next dir is used.
        let target = bin_dir(t, "repo/target/controlplane/bin", &["etcd"]);
        assert_eq!(env(t).locate().unwrap(), user);
        bin_dir(&target, "", &["kube-apiserver"]);
        assert_eq!(env(t).locate().unwrap(), target);
        // CARGO_TARGET_DIR moves the target dir.
        let other = bin_dir(t, "other-target/controlplane/bin", &BINARIES);
        let moved = Env {
            cargo_target_dir: Some(t.join("other-target").into()),
            ..env(t)
        };
        assert_eq!(moved.locate().unwrap(), other);
    }

    #[test]
    fn outside_the_repository_only_the_users_cache_is_looked_in() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        bin_dir(t, "repo/target/controlplane/bin", &BINARIES);
        let outside = Env {
            repo_root: None,
            ..env(t)
        };
        let user = user_dir(&t.join("home"));
        match outside.locate().unwrap_err() {
            Error::NotBuilt { searched, .. } => assert_eq!(searched, std::slice::from_ref(&user)),
            e => panic!("{e}"),
        }
        bin_dir(&user, "", &BINARIES);
        assert_eq!(outside.locate().unwrap(), user);
        // XDG_CACHE_HOME moves the user's cache.
        let xdg = Env {
            xdg_cache_home: Some(t.join("xdg").into()),
            ..outside
        };
        let xdg_dir = user_binary_dir_in(Some(t.join("xdg").into()), None).unwrap();
        assert!(xdg_dir.starts_with(t.join("xdg")));
        assert!(xdg.locate().is_err());
        bin_dir(&xdg_dir, "", &BINARIES);
        assert_eq!(xdg.locate().unwrap(), xdg_dir);
    }

    #[test]
    fn missing_binaries_name_every_dir_and_the_install_command() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        bin_dir(t, "repo/target/controlplane/bin", &[]);
        bin_dir(&user_dir(&t.join("home")), "", &["etcd"]);
        let err = env(t).locate().unwrap_err();
        let Error::NotBuilt { path, searched, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            searched,
            &[
                t.join("repo/target/controlplane/bin"),
                user_dir(&t.join("home"))
            ]
        );
        assert_eq!(path, &user_dir(&t.join("home")).join("kube-apiserver"));
        let msg = err.to_string();
        for part in [
            "kinformer-testenv install",
            "cargo install kinformer-testenv@",
            "cargo xtask controlplane build",
            "KINFORMER_CONTROLPLANE_BIN",
            "Go 1.26.0",
        ] {
            assert!(msg.contains(part), "{part:?} missing: {msg}");
        }
        for dir in searched {
            assert!(msg.contains(&dir.display().to_string()), "{msg}");
        }
    }
}
