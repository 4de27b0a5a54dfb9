//! Graceful shutdown on signals (feature `signal`): the first SIGTERM or SIGINT cancels a
//! [`CancellationToken`], the second exits the process.
//!
//! A pod being deleted gets SIGTERM, then SIGKILL after its grace period (30 s by default).
//! Given to kinformer-controller's `Controller::run` (or `run_elected`), the token makes
//! the first signal a drain: the queue is shut down, the workers finish what is queued,
//! `run` returns, the program stops its informers and exits 0. A second signal
//! means "now": the process exits at once with the shell's code for the signal, 130 after
//! SIGINT and 143 after SIGTERM (128 + the signal's number), without running destructors.
//! So Ctrl-C drains and a second Ctrl-C quits.
//!
//! ```no_run
//! # async fn run() -> Result<(), kinformer_runtime::Error> {
//! let shutdown = kinformer_runtime::shutdown::signals()?;
//! // controller.run(reconcile, context, shutdown.clone()).await;
//! shutdown.cancelled().await; // here: until the first signal
//! # Ok(()) }
//! ```
//!
//! Once its handlers are registered, SIGINT and SIGTERM no longer end the process by
//! themselves (Tokio's handlers stay for the process' life): the watcher does, on the
//! second signal, while its runtime runs. Outside Unix only Ctrl-C is watched.

use std::fmt;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::Error;

/// A signal that asks the process to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: the kubelet, systemd, `kill`.
    Terminate,
}

impl Signal {
    /// The exit code of a process ended by the signal, as shells report it: 128 plus the
    /// signal's number (130 for SIGINT, 143 for SIGTERM). The second signal exits with it.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Interrupt => 130,
            Self::Terminate => 143,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        })
    }
}

/// The signal watcher: its token is cancelled on the first SIGTERM or SIGINT; the second
/// exits the process (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// Registers handlers for SIGINT and SIGTERM and spawns the task that watches them.
    /// Call it early, within the Tokio runtime that runs the program, with its IO driver on
    /// (`#[tokio::main]` and `enable_all` have it): signals are caught from here on.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime; [`Error::Signal`] when a handler
    /// cannot be registered.
    pub fn install() -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let signals = os_signals()?;
        let token = CancellationToken::new();
        runtime.spawn(watch(signals, token.clone(), exit));
        Ok(Self { token })
    }

    /// The token the first signal cancels: give a clone to everything that should drain.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Waits for the first signal (or another cancel of the token).
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// Whether the first signal came (or the token was cancelled otherwise).
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }
}

/// [`Shutdown::install`]'s token: cancelled on the first SIGTERM or SIGINT; the second
/// signal exits the process with 130 (SIGINT) or 143 (SIGTERM).
///
/// # Errors
/// As [`Shutdown::install`].
pub fn signals() -> Result<CancellationToken, Error> {
    Shutdown::install().map(|shutdown| shutdown.token)
}

/// The real second step: exit now.
fn exit(signal: Signal) {
    std::process::exit(signal.exit_code());
}

/// The shutdown's steps over any stream of signals: the first cancels `token`, the second
/// calls `exit`. Returns when the stream ends or after `exit` (which does not return in the
/// real program).
pub(crate) async fn watch<S>(signals: S, token: CancellationToken, exit: impl FnOnce(Signal))
where
    S: Stream<Item = Signal>,
{
    let mut signals = std::pin::pin!(signals);
    let Some(first) = signals.next().await else {
        return;
    };
    tracing::info!(
        signal = %first,
        "received {first}: draining; a second signal exits at once"
    );
    token.cancel();
    let Some(second) = signals.next().await else {
        return;
    };
    tracing::warn!(
        signal = %second,
        code = second.exit_code(),
        "received {second} while draining: exiting without finishing"
    );
    exit(second);
}

/// SIGINT and SIGTERM as one stream; the handlers are registered when this returns.
#[cfg(unix)]
fn os_signals() -> Result<impl Stream<Item = Signal> + Send + 'static, Error> {
    use tokio::signal::unix::{SignalKind, signal};

    let stream = |kind, as_signal: Signal| {
        signal(kind)
            .map(|handler| {
                futures::stream::unfold(handler, move |mut handler| async move {
                    handler.recv().await.map(|()| (as_signal, handler))
                })
            })
            .map_err(|source| Error::Signal {
                signal: as_signal,
                source,
            })
    };
    let interrupt = stream(SignalKind::interrupt(), Signal::Interrupt)?;
    let terminate = stream(SignalKind::terminate(), Signal::Terminate)?;
    Ok(futures::stream::select(
        Box::pin(interrupt),
        Box::pin(terminate),
    ))
}

/// Ctrl-C as a stream (no SIGTERM outside Unix); the handler is registered on first poll.
#[cfg(not(unix))]
fn os_signals() -> Result<impl Stream<Item = Signal> + Send + 'static, Error> {
    Ok(futures::stream::unfold((), |()| async {
        tokio::signal::ctrl_c()
            .await
            .ok()
            .map(|()| (Signal::Interrupt, ()))
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;

    /// The watcher over a channel of signals, with an exit that records its signal.
    struct Watcher {
        signals: mpsc::UnboundedSender<Signal>,
        token: CancellationToken,
        exits: Arc<Mutex<Vec<Signal>>>,
        task: tokio::task::JoinHandle<()>,
    }

    fn watcher() -> Watcher {
        let (signals, mut rx) = mpsc::unbounded_channel();
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let token = CancellationToken::new();
        let exits = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&exits);
        let task = tokio::spawn(watch(stream, token.clone(), move |signal| {
            recorded.lock().unwrap().push(signal);
        }));
        Watcher {
            signals,
            token,
            exits,
            task,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_signal_drains_and_the_second_exits_with_its_code() {
        let Watcher {
            signals: tx,
            token,
            exits,
            task,
        } = watcher();
        // Nothing happens without a signal, however long.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!token.is_cancelled());

        tx.send(Signal::Terminate).unwrap();
        tokio::time::timeout(Duration::from_secs(1), token.cancelled())
            .await
            .expect("the first signal cancels the token");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(exits.lock().unwrap().is_empty(), "one signal never exits");
        assert!(!task.is_finished());

        tx.send(Signal::Interrupt).unwrap();
        task.await.unwrap();
        assert_eq!(*exits.lock().unwrap(), [Signal::Interrupt]);
        assert_eq!(Signal::Interrupt.exit_code(), 130);
        assert_eq!(Signal::Terminate.exit_code(), 143);
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_cancelled_elsewhere_still_needs_two_signals_to_exit() {
        let Watcher {
            signals: tx,
            token,
            exits,
            task,
        } = watcher();
        token.cancel();
        tx.send(Signal::Interrupt).unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(exits.lock().unwrap().is_empty());
        tx.send(Signal::Terminate).unwrap();
        task.await.unwrap();
        assert_eq!(*exits.lock().unwrap(), [Signal::Terminate]);
    }

    #[tokio::test(start_paused = true)]
    async fn no_signals_no_cancel() {
        let Watcher {
            signals: tx,
            token,
            exits,
            task,
        } = watcher();
        drop(tx);
        task.await.unwrap();
        assert!(!token.is_cancelled());
        assert!(exits.lock().unwrap().is_empty());
    }

    #[test]
    fn install_outside_a_runtime_is_an_error() {
        assert!(matches!(Shutdown::install(), Err(Error::NoRuntime)));
    }

    #[test]
    fn signals_read_as_the_shell_names_them() {
        assert_eq!(Signal::Interrupt.to_string(), "SIGINT");
        assert_eq!(Signal::Terminate.to_string(), "SIGTERM");
    }
}
