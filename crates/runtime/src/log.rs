//! [`LogArgs`]: the log format and level, and the tracing subscriber they make.

use std::io::IsTerminal;

use tracing::Dispatch;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use crate::Error;

/// Where `--help` lists these flags.
const HEADING: &str = "Logs";

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum LogFormat {
    /// One line of text per event (colours on a terminal only).
    #[default]
    Plain,
    /// One JSON object per event: timestamp, level, target, the event's fields (message
    /// among them) at the top level, and its spans.
    Json,
}

/// The logs' flags: `--log-format plain|json` (default `plain`) and `--log-level FILTER`
/// (default: `RUST_LOG`, else `info`), a tracing-subscriber `EnvFilter` such as `info`,
/// `warn,my_controller=debug` or `kinformer_reflector=trace`.
///
/// ```
/// use clap::Parser;
/// use kinformer_runtime::{LogArgs, LogFormat};
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     log: LogArgs,
/// }
///
/// let cli = Cli::try_parse_from(["prog", "--log-format", "json", "--log-level", "debug"])?;
/// assert_eq!(cli.log.log_format, LogFormat::Json);
/// // cli.log.init()? installs the subscriber, once per process.
/// # Ok::<(), clap::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct LogArgs {
    /// How log lines look
    #[arg(
        id = "log-format",
        help_heading = HEADING,
        long = "log-format",
        value_name = "FORMAT",
        value_enum,
        default_value_t = LogFormat::Plain,
    )]
    pub log_format: LogFormat,

    /// Which events to log, as RUST_LOG says it: "debug", "warn,my_controller=debug", ...
    /// (default: $RUST_LOG, else "info")
    #[arg(id = "log-level", help_heading = HEADING, long = "log-level", value_name = "FILTER")]
    pub log_level: Option<String>,
}

impl LogArgs {
    /// The filter: `--log-level`, else `RUST_LOG` (when set and not empty), else `info`.
    ///
    /// # Errors
    /// [`Error::LogFilter`] when the filter (from the flag or from `RUST_LOG`) does not
    /// parse.
    pub fn filter(&self) -> Result<EnvFilter, Error> {
        filter(
            self.log_level.as_deref(),
            std::env::var("RUST_LOG").ok().as_deref(),
        )
    }

    /// Installs the global tracing subscriber (and a bridge for the `log` crate's
    /// records): events that pass [`filter`](Self::filter), in `--log-format`, on stdout.
    ///
    /// # Errors
    /// [`Error::LogFilter`] as [`filter`](Self::filter); [`Error::LogInit`] when a global
    /// subscriber is installed already.
    pub fn init(&self) -> Result<(), Error> {
        let ansi = std::io::stdout().is_terminal();
        self.dispatch(self.filter()?, std::io::stdout, ansi)
            .try_init()
            .map_err(|source| Error::LogInit { source })
    }

    /// The subscriber [`init`](Self::init) installs, writing to `writer`.
    fn dispatch<W>(&self, filter: EnvFilter, writer: W, ansi: bool) -> Dispatch
    where
        W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
    {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer);
        match self.log_format {
            LogFormat::Plain => Dispatch::new(builder.with_ansi(ansi).finish()),
            LogFormat::Json => Dispatch::new(builder.json().flatten_event(true).finish()),
        }
    }
}

/// The filter of `flag`, else of `env` (`RUST_LOG`) when not empty, else `info`.
fn filter(flag: Option<&str>, env: Option<&str>) -> Result<EnvFilter, Error> {
    let (directives, from) = match (flag, env.map(str::trim).filter(|e| !e.is_empty())) {
        (Some(flag), _) => (flag, "--log-level"),
        (None, Some(env)) => (env, "RUST_LOG"),
        (None, None) => ("info", "the default"),
    };
    EnvFilter::try_new(directives).map_err(|source| Error::LogFilter {
        directives: directives.to_owned(),
        from,
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Self;
        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// What `args` logs of an info and a debug event.
    fn logged(args: &LogArgs, env: Option<&str>) -> String {
        let buffer = Buffer::default();
        let filter = filter(args.log_level.as_deref(), env).unwrap();
        let dispatch = args.dispatch(filter, buffer.clone(), false);
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::info!(key = "web-0", "reconciled");
            tracing::debug!("details");
        });
        buffer.text()
    }

    #[test]
    fn the_level_comes_from_the_flag_else_rust_log_else_info() {
        let plain = LogArgs::default();
        let out = logged(&plain, None);
        assert!(out.contains("INFO") && out.contains("reconciled"), "{out}");
        assert!(!out.contains("details"), "{out}");
        assert!(logged(&plain, Some("debug")).contains("details"));
        // An empty RUST_LOG is no RUST_LOG.
        assert!(!logged(&plain, Some(" ")).contains("details"));
        let warn = LogArgs {
            log_level: Some("warn".into()),
            ..LogArgs::default()
        };
        assert_eq!(logged(&warn, Some("debug")), "");
        let debug = LogArgs {
            log_level: Some("debug".into()),
            ..LogArgs::default()
        };
        assert!(logged(&debug, None).contains("details"));
    }

    #[test]
    fn json_writes_one_object_per_event_with_its_fields_on_top() {
        let json = LogArgs {
            log_format: LogFormat::Json,
            ..LogArgs::default()
        };
        let out = logged(&json, None);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let line = lines[0];
        assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
        for field in [
            r#""level":"INFO""#,
            r#""message":"reconciled""#,
            r#""key":"web-0""#,
            r#""timestamp":"#,
        ] {
            assert!(line.contains(field), "{field} in {line}");
        }
        // Plain text is no JSON.
        assert!(!logged(&LogArgs::default(), None).starts_with('{'));
    }

    #[test]
    fn a_bad_filter_is_an_error_naming_where_it_came_from() {
        let e = filter(Some("info,=x=y"), None).unwrap_err();
        assert!(matches!(
            &e,
            Error::LogFilter { from: "--log-level", directives, .. } if directives == "info,=x=y"
        ));
        let e = filter(None, Some("[[")).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::LogFilter {
                    from: "RUST_LOG",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("RUST_LOG"), "{e}");
    }

    #[test]
    fn init_installs_once() {
        let args = LogArgs {
            log_level: Some("off".into()),
            ..LogArgs::default()
        };
        args.init().unwrap();
        assert!(matches!(args.init(), Err(Error::LogInit { .. })));
    }
}
