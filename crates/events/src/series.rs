//! The cache of recent events that folds isomorphic ones into series: client-go's
//! `eventBroadcasterImpl.eventCache` and what `recordToSink`, `finishSeries` and
//! `refreshExistingEventSeries` do to it. Owned by the broadcaster's task alone, so it
//! needs no lock; the writes it asks for are done by the caller.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::events::v1::Event;

use crate::event::{EventKey, series};

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

pub(crate) struct SeriesCache {
    entries: HashMap<EventKey, Cached>,
    capacity: usize,
}

impl SeriesCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// client-go's `recordToSink`: an event isomorphic to a cached one with a series bumps
    /// the series (count + 1, last observed `now`) and writes nothing; isomorphic to a
    /// cached one without a series starts a series of 2 and writes it; else it is cached
    /// and created.
    pub(crate) fn observe(
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
    /// `finish_time` before `now` (to be written one last time, then forgotten), after
    /// forgetting the single events published more than `finish_time` before `now`.
    pub(crate) fn finished(
        &mut self,
        now: SystemTime,
        finish_time: Duration,
    ) -> Vec<(EventKey, Event)> {
        let Some(horizon) = now.checked_sub(finish_time) else {
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

    /// Forgets `key` (a finished series that was written or given up on).
    pub(crate) fn forget(&mut self, key: &EventKey) {
        self.entries.remove(key);
    }

    /// client-go's `refreshExistingEventSeries`, first half: every series as it stands.
    pub(crate) fn series(&self) -> Vec<(EventKey, Event)> {
        self.entries
            .iter()
            .filter(|(_, cached)| cached.series.is_some())
            .map(|(key, cached)| (key.clone(), cached.to_write()))
            .collect()
    }

    /// After a refresh was stored: the cached event becomes what the server answered (as
    /// client-go replaces its cache entry), keeping the series as counted since.
    pub(crate) fn refreshed(&mut self, key: &EventKey, stored: Event) {
        if let Some(cached) = self.entries.get_mut(key) {
            cached.event = stored;
        }
    }
}
