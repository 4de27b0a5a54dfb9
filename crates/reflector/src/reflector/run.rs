//! The run loop: rounds of list-and-watch, with a backoff after each failed one, until the
//! sink closes.

use kinformer_core::{ErrorChain, MetaObject, Sink};

use super::Reflector;
use super::Resume;
use super::run_state::{RelistReason, RunState};
use crate::{Error, ListerWatcher};

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// client-go's `Run`: list-and-watch, and after each failed round a backoff.
    pub(super) async fn run_loop(&self) -> Result<(), Error> {
        let mut st = RunState::new(self.backoff.clone());
        let mut resume = self
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        st.whole_lists = resume.as_ref().is_some_and(Resume::is_from_known);
        loop {
            let err = if resume.is_some() {
                self.resume_and_watch(&mut st, &mut resume).await
            } else {
                self.list_and_watch(&mut st).await
            };
            self.report(&err);
            if err.is_sink_closed() {
                tracing::info!("the sink is closed: reflector stops");
                return Err(err);
            }
            st.reason = RelistReason::after(&err);
            if err.is_shard_selection_changed() {
                // Not a failure: the caller asked for other objects. Relist now.
                continue;
            }
            if err.is_expired() {
                // The server answered: only its history is short. Relist soon.
                st.backoff.succeeded();
            }
            let delay = st
                .backoff
                .next_delay(self.clock.now(), err.is_unreachable());
            self.shared.failed(
                ErrorChain(&err).to_string(),
                self.clock.wall_now(),
                delay,
                &st.reason,
            );
            tracing::info!(reason = %st.reason, delay_ms = delay.as_millis() as u64, "will relist after a backoff");
            self.clock.sleep(delay).await;
        }
    }

    /// One round: the initial state (streaming list or paged list), then watches until
    /// one fails in a way that needs a relist. Returns why it gave up.
    pub(super) async fn list_and_watch(&self, st: &mut RunState) -> Error {
        self.shared.count_list(&st.reason);
        let mut first = None;
        if self.watch_list && self.lw.supports_watch_list() {
            match self.stream_list(st).await {
                Ok(w) => first = Some(w),
                Err(e @ (Error::Sink(_) | Error::ShardSelectionChanged)) => return e,
                Err(e) => {
                    tracing::info!(error = %ErrorChain(&e), "streaming list failed: falling back to list + watch");
                }
            }
        }
        if first.is_none()
            && let Err(e) = self.list(st).await
        {
            return e;
        }
        self.watch(st, first).await
    }
}
