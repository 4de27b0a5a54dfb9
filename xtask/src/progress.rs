//! Progress for long steps: a spinner on a terminal, a line every 20 s otherwise (CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

const PLAIN_EVERY: Duration = Duration::from_secs(20);

/// One long step, shown with its elapsed time and a running detail.
pub(crate) struct Step {
    name: String,
    bar: Option<ProgressBar>,
    start: Instant,
    last_plain: Instant,
}

impl Step {
    pub(crate) fn start(name: impl Into<String>) -> Self {
        let name = name.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} [{elapsed_precise}] {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(name.clone());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        if bar.is_none() {
            eprintln!("==> {name}");
        }
        let now = Instant::now();
        Self {
            name,
            bar,
            start: now,
            last_plain: now,
        }
    }

    /// Updates the detail; without a terminal, prints it at most every 20 s.
    pub(crate) fn detail(&mut self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(msg.to_owned()),
            None if self.last_plain.elapsed() >= PLAIN_EVERY => {
                self.last_plain = Instant::now();
                eprintln!(
                    "    {} ({}s): {msg}",
                    self.name,
                    self.start.elapsed().as_secs()
                );
            }
            None => {}
        }
    }

    pub(crate) fn finish(self, outcome: &str) {
        let line = format!(
            "{} {} in {:.1}s",
            self.name,
            outcome,
            self.start.elapsed().as_secs_f64()
        );
        match self.bar {
            Some(bar) => bar.finish_with_message(format!(
                "{outcome} in {:.1}s",
                self.start.elapsed().as_secs_f64()
            )),
            None => eprintln!("    {line}"),
        }
    }
}
