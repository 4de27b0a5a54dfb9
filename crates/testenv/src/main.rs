//! `kinformer-testenv install`: builds etcd and kube-apiserver from the Go module proxy into
//! this user's cache dir, where `kinformer_testenv::ControlPlane` finds them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kinformer_testenv::install::{self, KUBERNETES_VERSION, Progress};

const USAGE: &str = "\
kinformer-testenv: the control plane for kinformer-testenv's tests

Usage:
  kinformer-testenv install [--dir DIR] [--force]
      Build etcd and kube-apiserver from the Go module proxy (Go on PATH) into DIR,
      by default the user's cache dir that kinformer-testenv looks in:
      $XDG_CACHE_HOME/kinformer/controlplane/<version>/bin, else
      $HOME/.cache/kinformer/controlplane/<version>/bin.
      Skipped when already built from the same sources and Go; --force rebuilds.
  kinformer-testenv dir
      Print the dir a test would take the binaries from, or why there is none.";

/// A line of progress at most this often while a step prints nothing new.
const EVERY: Duration = Duration::from_secs(15);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("install") => {
            parse_install(&args[1..]).and_then(|(dir, force)| run_install(dir, force))
        }
        Some("dir") if args.len() == 1 => where_binaries(),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("{USAGE}\n")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_install(args: &[String]) -> Result<(Option<PathBuf>, bool), String> {
    let (mut dir, mut force) = (None, false);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--force" => force = true,
            "--dir" => {
                let value = it.next().ok_or("--dir needs a value")?;
                dir = Some(PathBuf::from(value));
            }
            other => match other.strip_prefix("--dir=") {
                Some(value) => dir = Some(PathBuf::from(value)),
                None => return Err(format!("unknown argument {other:?}\n\n{USAGE}")),
            },
        }
    }
    Ok((dir, force))
}

fn run_install(dir: Option<PathBuf>, force: bool) -> Result<(), String> {
    let dir = match dir {
        Some(dir) => dir,
        None => kinformer_testenv::user_binary_dir()
            .ok_or("neither XDG_CACHE_HOME nor HOME is set: pass --dir")?,
    };
    let start = Instant::now();
    let mut printer = Printer::default();
    let paths =
        install::install(&dir, force, &mut |p| printer.show(p)).map_err(|e| e.to_string())?;
    for path in &paths {
        println!("{}", path.display());
    }
    eprintln!(
        "etcd and kube-apiserver {KUBERNETES_VERSION} are in {} ({:.1}s)",
        dir.display(),
        start.elapsed().as_secs_f64()
    );
    if Some(&dir) != kinformer_testenv::user_binary_dir().as_ref() {
        eprintln!(
            "point tests at them with KINFORMER_CONTROLPLANE_BIN={}",
            dir.display()
        );
    }
    Ok(())
}

fn where_binaries() -> Result<(), String> {
    let dir = kinformer_testenv::find_binary_dir().map_err(|e| e.to_string())?;
    println!("{}", dir.display());
    Ok(())
}

/// Shows progress as lines on stderr: each step as it starts and ends, and while it runs a
/// line every 15 s with the packages compiled so far.
#[derive(Default)]
struct Printer {
    step: Option<(String, Instant)>,
    last: Option<Instant>,
    lines: usize,
    last_line: String,
    /// Whether a line came since the last progress line.
    fresh: bool,
}

impl Printer {
    fn show(&mut self, p: Progress<'_>) {
        match p {
            Progress::UpToDate { dir } => {
                eprintln!("up to date in {}", dir.display());
            }
            Progress::Building { stale, dir } => eprintln!(
                "building {} ({KUBERNETES_VERSION}) into {}\n\
                 (a cold build downloads ~800 MB of Go modules and takes several minutes on 2 cores)",
                stale.join(", "),
                dir.display()
            ),
            Progress::Step { index, total, name } => {
                let name = format!("[{index}/{total}] {name}");
                eprintln!("==> {name}");
                let now = Instant::now();
                self.step = Some((name, now));
                self.last = Some(now);
                self.lines = 0;
            }
            Progress::Output(line) => {
                self.lines += 1;
                line.clone_into(&mut self.last_line);
                self.fresh = true;
                self.tick();
            }
            Progress::Waiting => self.tick(),
            Progress::StepDone => {
                if let Some((name, start)) = self.step.take() {
                    let compiled = match self.lines {
                        0 => String::new(),
                        n => format!(" ({n} packages compiled)"),
                    };
                    eprintln!(
                        "    {name} done in {:.1}s{compiled}",
                        start.elapsed().as_secs_f64()
                    );
                }
            }
            _ => {}
        }
    }

    fn tick(&mut self) {
        let (Some((name, start)), Some(last)) = (&self.step, self.last) else {
            return;
        };
        if last.elapsed() < EVERY {
            return;
        }
        self.last = Some(Instant::now());
        let what = if self.fresh {
            format!("last: {}", self.last_line)
        } else {
            "downloading or linking".to_owned()
        };
        self.fresh = false;
        eprintln!(
            "    {name} ({}s): {} packages, {what}",
            start.elapsed().as_secs(),
            self.lines
        );
    }
}
