//! etcd: started on free loopback ports, and reached through its JSON gateway.

mod gateway;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) use gateway::{compact, revision};

use crate::error::Error;
use crate::ports::{START_ATTEMPTS, free_addr, port_taken};
use crate::process::Process;

const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts etcd with its data in `dir/etcd` and waits until it is healthy. Returns the
/// process and its client URL.
pub(crate) async fn start(bin: &Path, dir: &Path) -> Result<(Process, String), Error> {
    let mut last_err = None;
    for _ in 0..START_ATTEMPTS {
        let client = free_addr()?;
        let peer = free_addr()?;
        let url = format!("http://{client}");
        let args = vec![
            "--name=kinformer".into(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls=http://{peer}"),
            format!("--initial-advertise-peer-urls=http://{peer}"),
            format!("--initial-cluster=kinformer=http://{peer}"),
            "--unsafe-no-fsync".into(),
            // Room for the 100,000-pod benches (etcd's 2 GiB default holds fewer realistic
            // pods with their history); 8 GiB is etcd's suggested maximum.
            "--quota-backend-bytes=8589934592".into(),
            "--watch-progress-notify-interval=5s".into(),
            "--log-level=warn".into(),
        ];
        let mut p = Process::spawn("etcd", bin, &args, &dir.join("etcd.log"))?;
        let start = Instant::now();
        loop {
            if gateway::healthy(&url).await {
                return Ok((p, url));
            }
            if p.exited().is_some() || start.elapsed() > READY_TIMEOUT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let err = p.not_ready("/health did not answer true");
        if !port_taken(&p) {
            return Err(err);
        }
        last_err = Some(err);
        let _ = fs::remove_dir_all(dir.join("etcd"));
    }
    Err(last_err.unwrap_or(Error::State("etcd could not bind a port")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binaries::find_binary_dir;

    #[tokio::test]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn etcd_exits_by_itself_when_the_parent_pipe_closes() {
        let dir = tempfile::tempdir().unwrap();
        let bins = find_binary_dir().unwrap();
        let (mut etcd, _url) = start(&bins.join("etcd"), dir.path()).await.unwrap();
        // What the kernel does when the test binary dies: the stdin pipe closes.
        etcd.close_stdin();
        let start = Instant::now();
        while etcd.exited().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "etcd outlived its parent's pipe"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
