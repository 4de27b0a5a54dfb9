//! The command line.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use kinformer::informer::FifoKind;

const USAGE: &str = "usage: kinformer-soak --kubeconfig PATH --namespace NS \
                     --fifo delta-fifo|in-order|in-order-atomic [--sample-ms MS] \
                     [--snapshot-dir DIR]";

/// The subject's options.
pub(crate) struct Args {
    /// The kubeconfig whose current context to use (the driver's proxy).
    pub(crate) kubeconfig: PathBuf,
    /// The namespace whose pods to inform on.
    pub(crate) namespace: String,
    /// The informer's FIFO.
    pub(crate) fifo: FifoKind,
    /// How often to print a resource sample.
    pub(crate) sample: Duration,
    /// Keep the cache on disk here, every second, and start from it, handlers told only
    /// what changed (`SnapshotStart::ChangesOnly`).
    pub(crate) snapshot_dir: Option<PathBuf>,
}

impl Args {
    /// Parses `std::env::args`.
    pub(crate) fn parse() -> anyhow::Result<Self> {
        parse_from(std::env::args().skip(1))
    }
}

fn parse_from(args: impl IntoIterator<Item = String>) -> anyhow::Result<Args> {
    let mut kubeconfig = None;
    let mut namespace = None;
    let mut fifo = None;
    let mut sample = Duration::from_secs(2);
    let mut snapshot_dir = None;
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value()?)),
            "--namespace" => namespace = Some(value()?),
            "--fifo" => fifo = Some(fifo_kind(&value()?)?),
            "--sample-ms" => {
                sample = Duration::from_millis(value()?.parse().context("--sample-ms")?);
            }
            "--snapshot-dir" => snapshot_dir = Some(PathBuf::from(value()?)),
            other => bail!("unknown flag {other:?}; {USAGE}"),
        }
    }
    if sample.is_zero() {
        bail!("--sample-ms must be positive");
    }
    Ok(Args {
        kubeconfig: kubeconfig.context(USAGE)?,
        namespace: namespace.context(USAGE)?,
        fifo: fifo.context(USAGE)?,
        sample,
        snapshot_dir,
    })
}

/// The FIFO kind by its name on the driver's command line.
fn fifo_kind(name: &str) -> anyhow::Result<FifoKind> {
    Ok(match name {
        "delta-fifo" => FifoKind::DeltaFifo,
        "in-order" => FifoKind::InOrder,
        "in-order-atomic" => FifoKind::InOrderAtomic,
        other => bail!("unknown FIFO kind {other:?}; {USAGE}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn every_fifo_kind_parses_and_sampling_defaults_to_two_seconds() {
        for (name, kind) in [
            ("delta-fifo", FifoKind::DeltaFifo),
            ("in-order", FifoKind::InOrder),
            ("in-order-atomic", FifoKind::InOrderAtomic),
        ] {
            let a = parse_from(strings(&[
                "--kubeconfig",
                "/k",
                "--namespace",
                "ns",
                "--fifo",
                name,
            ]))
            .unwrap();
            assert_eq!(a.fifo, kind);
            assert_eq!(a.sample, Duration::from_secs(2));
        }
    }

    #[test]
    fn missing_or_unknown_flags_are_errors() {
        assert!(parse_from(strings(&["--kubeconfig", "/k"])).is_err());
        assert!(parse_from(strings(&["--bogus"])).is_err());
        let bad_fifo = parse_from(strings(&[
            "--kubeconfig",
            "/k",
            "--namespace",
            "ns",
            "--fifo",
            "lifo",
        ]));
        assert!(bad_fifo.is_err());
    }
}
