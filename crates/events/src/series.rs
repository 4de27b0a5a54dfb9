//! The cache of recent events that folds isomorphic ones into series: client-go's
//! `eventBroadcasterImpl.eventCache` and what `recordToSink`, `finishSeries` and
//! `refreshExistingEventSeries` do to it; the `tools/events` [`Correlator`] of the
//! broadcaster's task.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::events::v1::Event;

use crate::EventSink;
use crate::event::{EventKey, series};
use crate::task::Correlator;
use crate::write::{RetryPolicy, Write, Written, record_event};

/// One cached event: as last written (or as the server answered a refresh), the time it
/// was first published, and its series once a second isomorphic event came.
struct Cached {
    event: Event,
    event_time: SystemTime,
    series: Option<Series>,
}

#[derive(Clone, Copy)]
struct Series {
    count: i32,
    last_observed: SystemTime,
    /// The count last sent to the sink.
    written: i32,
}

impl Cached {
    /// The event to write: the cached one with the series as it stands.
    fn to_write(&self) -> Event {
        let mut event = self.event.clone();
        event.series = self.series.map(|s| series(s.count, s.last_observed));
        event
    }
}

/// What became of an observed event.
pub(crate) enum Observed {
    /// A new event: create it (it is now cached).
    Create(Event),
    /// The second of its kind: the cached event now has a series of 2; write it.
    StartSeries(Event),
    /// A third or later: the series' count and last observation moved, nothing to write
    /// until the series is finished or refreshed.
    Counted,
    /// A new event, but the cache is full: create it without caching it, so its repeats
    /// are not folded.
    CreateUncached(Event),
}

/// The series write of `event` (client-go's `createPatchBytesForSeries`: only `series`
/// differs); `None` for an event without a series or a series that does not encode.
pub(crate) fn series_write(event: Event) -> Option<Write<Event>> {
    let patch = match &event.series {
        None => None,
        Some(series) => match serde_json::to_vec(&serde_json::json!({ "series": series })) {
            Ok(patch) => Some(patch),
            Err(err) => {
                tracing::error!(error = %err, "cannot encode an event series patch; dropping it");
                return None;
            }
        },
    };
    Some(Write { event, patch })
}

pub(crate) struct SeriesCache {
    entries: HashMap<EventKey, Cached>,
    capacity: usize,
    finish_time: Duration,
    refresh_time: Duration,
}

impl SeriesCache {
    pub(crate) fn new(capacity: usize, finish_time: Duration, refresh_time: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
            finish_time,
            refresh_time,
        }
    }

    /// client-go's `recordToSink`: an event isomorphic to a cached one with a series bumps
    /// the series (count + 1, last observed `now`) and writes nothing; isomorphic to a
    /// cached one without a series starts a series of 2 and writes it; else it is cached
    /// and created.
    pub(crate) fn fold(
        &mut self,
        event: Event,
        event_time: SystemTime,
        now: SystemTime,
    ) -> Observed {
        let len = self.entries.len();
        match self.entries.entry(EventKey::of(&event)) {
            Entry::Occupied(mut cached) => {
                let cached = cached.get_mut();
                match &mut cached.series {
                    Some(series) => {
                        series.count = series.count.saturating_add(1);
                        series.last_observed = now;
                        Observed::Counted
                    }
                    None => {
                        cached.series = Some(Series {
                            count: 2,
                            last_observed: now,
                            written: 2,
                        });
                        Observed::StartSeries(cached.to_write())
                    }
                }
            }
            Entry::Vacant(_) if len >= self.capacity => Observed::CreateUncached(event),
            Entry::Vacant(slot) => {
                slot.insert(Cached {
                    event: event.clone(),
                    event_time,
                    series: None,
                });
                Observed::Create(event)
            }
        }
    }

    /// client-go's `finishSeries`, first half: the keys of series last observed more than
    /// the finish time before `now` (to be written one last time, then forgotten), after
    /// forgetting the single events published more than the finish time before `now`.
    fn finished(&mut self, now: SystemTime) -> Vec<(EventKey, Event)> {
        let Some(horizon) = now.checked_sub(self.finish_time) else {
            return Vec::new();
        };
        self.entries
            .retain(|_, cached| cached.series.is_some() || cached.event_time >= horizon);
        self.entries
            .iter()
            .filter(|(_, cached)| cached.series.is_some_and(|s| s.last_observed < horizon))
            .map(|(key, cached)| (key.clone(), cached.to_write()))
            .collect()
    }

    /// Every series as it stands, or only those counted past what was last written.
    fn series(&self, only_unwritten: bool) -> Vec<(EventKey, Event)> {
        self.entries
            .iter()
            .filter(|(_, cached)| {
                cached
                    .series
                    .is_some_and(|s| !only_unwritten || s.count > s.written)
            })
            .map(|(key, cached)| (key.clone(), cached.to_write()))
            .collect()
    }

    /// The series of `key` was written with `count`.
    fn wrote(&mut self, key: &EventKey, count: i32) {
        if let Some(series) = self.entries.get_mut(key).and_then(|c| c.series.as_mut()) {
            series.written = series.written.max(count);
        }
    }
}

fn count_of(event: &Event) -> i32 {
    event.series.as_ref().map_or(1, |s| s.count)
}

impl Correlator for SeriesCache {
    type Event = Event;
    const IN_ORDER: bool = false;

    fn observe(
        &mut self,
        event: Event,
        published: SystemTime,
        now: SystemTime,
    ) -> Option<Write<Event>> {
        match self.fold(event, published, now) {
            Observed::Create(event) | Observed::StartSeries(event) => series_write(event),
            Observed::CreateUncached(event) => {
                tracing::debug!(
                    capacity = self.capacity,
                    "the event cache is full; writing the event without folding its repeats"
                );
                series_write(event)
            }
            Observed::Counted => None,
        }
    }

    fn periods(&self) -> Vec<Duration> {
        // Finishing before refreshing, so that a series due for both is written once.
        vec![self.finish_time, self.refresh_time]
    }

    /// 0: client-go's `finishSeries`: one write (no retries) of each series quiet for the
    /// finish time, forgotten unless the write may pass later; single events that old are
    /// forgotten. 1: client-go's `refreshExistingEventSeries`: one write (no retries) of
    /// every series; the cached event becomes the server's answer, keeping the series as
    /// counted since. Done inline, as client-go does them under its cache lock.
    async fn on_period<S: EventSink<Event>>(
        &mut self,
        which: usize,
        sink: &S,
        policy: &RetryPolicy,
        now: SystemTime,
    ) {
        if which == 0 {
            for (key, event) in self.finished(now) {
                let Some(mut write) = series_write(event) else {
                    self.entries.remove(&key);
                    continue;
                };
                match record_event(sink, &mut write, policy).await {
                    Written::Stored(_) | Written::GaveUp => {
                        self.entries.remove(&key);
                    }
                    Written::Retry => {}
                }
            }
        } else {
            for (key, event) in self.series(false) {
                let count = count_of(&event);
                let Some(mut write) = series_write(event) else {
                    continue;
                };
                if let Written::Stored(stored) = record_event(sink, &mut write, policy).await {
                    if let Some(cached) = self.entries.get_mut(&key) {
                        cached.event = *stored;
                    }
                    self.wrote(&key, count);
                }
            }
        }
    }

    /// Writes each series counted past its last write, once: a shutdown loses no count
    /// (client-go's `Shutdown` leaves them to the next check, which never comes).
    async fn on_shutdown<S: EventSink<Event>>(&mut self, sink: &S, policy: &RetryPolicy) {
        for (key, event) in self.series(true) {
            let count = count_of(&event);
            let Some(mut write) = series_write(event) else {
                continue;
            };
            if let Written::Stored(_) = record_event(sink, &mut write, policy).await {
                self.wrote(&key, count);
            }
        }
    }
}
