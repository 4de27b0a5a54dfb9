//! kube-apiserver: the key it signs service-account tokens with, its flags, and starting
//! it on a free loopback port until it has written its serving certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Options;
use crate::error::Error;
use crate::ports::{START_ATTEMPTS, free_addr, port_taken};
use crate::process::Process;
use crate::workdir::write_private;

/// How long the API server may take to write its certificate, and then to be ready.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Writes the service-account signing key pair (`dir/sa.key`, `dir/sa.pub`), which the
/// API server refuses to start without.
pub(crate) fn write_service_account_key(dir: &Path) -> Result<(), Error> {
    let sa_key =
        rcgen::KeyPair::generate().map_err(|e| Error::Etcd(format!("generating a key: {e}")))?;
    write_private(&dir.join("sa.key"), &sa_key.serialize_pem())?;
    write_private(&dir.join("sa.pub"), &sa_key.public_key_pem())
}

/// The self-signed serving certificate the API server writes into its `--cert-dir`.
pub(crate) fn serving_cert(dir: &Path) -> PathBuf {
    dir.join("certs").join("apiserver.crt")
}

/// Starts the API server with `args`, logging to `dir/kube-apiserver.log`.
pub(crate) fn spawn(bin: &Path, args: &[String], dir: &Path) -> Result<Process, Error> {
    Process::spawn("kube-apiserver", bin, args, &dir.join("kube-apiserver.log"))
}

/// Whether the API server has written its serving certificate whole. It writes the
/// certificate and then its key, each with Go's `os.WriteFile`, which creates the file
/// empty before it writes: a client that trusted the certificate file as soon as it
/// existed could trust no certificate at all, and fail every TLS handshake with the
/// server it waits for. Once the key file exists, the certificate's write has returned.
fn wrote_serving_cert(dir: &Path) -> bool {
    serving_cert(dir).is_file() && dir.join("certs").join("apiserver.key").is_file()
}

/// Starts the API server on a free port and waits until it has written its serving
/// certificate and serves on the port (its log says so); on a port another process took
/// first, it starts again on another. Returns the process, its address and the
/// flags it was started with (to start it again on the same port).
pub(crate) async fn start(
    bin: &Path,
    dir: &Path,
    etcd_url: &str,
    options: &Options,
) -> Result<(Process, SocketAddr, Vec<String>), Error> {
    let mut last_err = None;
    for _ in 0..START_ATTEMPTS {
        let addr = free_addr()?;
        let args = args(dir, etcd_url, addr, options);
        let mut apiserver = spawn(bin, &args, dir)?;
        let start = Instant::now();
        // It writes its certificate, then binds its port: wait for both, so that a port
        // another process took in between is retried here rather than failing readiness.
        let serving = format!("Serving securely on {addr}");
        let mut listening = false;
        while apiserver.exited().is_none() && start.elapsed() <= READY_TIMEOUT {
            listening = wrote_serving_cert(dir)
                && std::fs::read_to_string(&apiserver.log).is_ok_and(|log| log.contains(&serving));
            if listening {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if listening {
            return Ok((apiserver, addr, args));
        }
        let err = apiserver.not_ready("it did not start serving on its port");
        if !port_taken(&apiserver) {
            return Err(err);
        }
        last_err = Some(err);
    }
    Err(last_err.unwrap_or(Error::State("the API server could not bind a port")))
}

/// `args` with the `--watch-cache` flag set to `on`.
pub(crate) fn with_watch_cache(args: &[String], on: bool) -> Vec<String> {
    args.iter()
        .map(|a| {
            if a.starts_with(WATCH_CACHE_FLAG) {
                format!("{WATCH_CACHE_FLAG}{on}")
            } else {
                a.clone()
            }
        })
        .collect()
}

const WATCH_CACHE_FLAG: &str = "--watch-cache=";

fn args(dir: &Path, etcd_url: &str, addr: SocketAddr, options: &Options) -> Vec<String> {
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--bind-address={}", addr.ip()),
        format!("--advertise-address={}", addr.ip()),
        format!("--secure-port={}", addr.port()),
        format!("--cert-dir={}", dir.join("certs").display()),
        "--endpoint-reconciler-type=none".into(),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        format!(
            "--service-account-key-file={}",
            dir.join("sa.pub").display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            dir.join("sa.key").display()
        ),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--authorization-mode=RBAC".into(),
        format!("--token-auth-file={}", dir.join("tokens.csv").display()),
        "--disable-admission-plugins=ServiceAccount".into(),
        format!("{WATCH_CACHE_FLAG}{}", options.watch_cache),
    ];
    args.extend(options.feature_gates_flag());
    args.extend(options.apiserver_args.iter().cloned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_counts_as_written_once_its_key_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("certs")).unwrap();
        assert!(!wrote_serving_cert(dir.path()));
        // The moment os.WriteFile has created the certificate file, before it writes it.
        std::fs::write(serving_cert(dir.path()), "").unwrap();
        assert!(!wrote_serving_cert(dir.path()));
        std::fs::write(dir.path().join("certs").join("apiserver.key"), "").unwrap();
        assert!(wrote_serving_cert(dir.path()));
    }

    #[test]
    fn with_watch_cache_switches_only_that_flag() {
        let base = args(
            Path::new("/d"),
            "http://127.0.0.1:1",
            "127.0.0.1:2".parse().unwrap(),
            &Options::default().apiserver_arg("--v=2"),
        );
        assert!(base.contains(&"--watch-cache=true".to_owned()));
        let off = with_watch_cache(&base, false);
        assert_eq!(off.len(), base.len());
        assert!(off.contains(&"--watch-cache=false".to_owned()));
        assert!(!off.contains(&"--watch-cache=true".to_owned()));
        assert_eq!(with_watch_cache(&off, true), base);
    }
}
