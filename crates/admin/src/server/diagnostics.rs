//! `/debug/diagnostics`: what the registered informers, queues, Leases and shard managers
//! know now, as one JSON document (see the [server docs](super)).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use kinformer_informer_factory::{InformerStats, SharedIndexInformer};
use kinformer_workqueue::{Item, Queue, QueueStats, RateLimitingQueue};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Server;
use kinformer_controller::controller::Controller;

/// What a source gives at each request: one entry, or an array of entries.
type Source = Box<dyn Fn() -> Value + Send + Sync>;

/// The sections every document has, empty or not; sections of one's own come beside them.
const SECTIONS: [&str; 4] = ["informers", "queues", "leases", "shards"];

/// The registered sources, by section.
#[derive(Default)]
pub(super) struct Diagnostics(Vec<(String, Source)>);

impl Diagnostics {
    /// How many sources are registered.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The document: an object with an array per section, each source's entries in the
    /// order the sources were registered.
    pub(super) fn render(&self) -> Value {
        let mut doc = Map::new();
        for section in SECTIONS {
            doc.insert(section.to_owned(), Value::Array(Vec::new()));
        }
        for (section, source) in &self.0 {
            let entries = doc
                .entry(section.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(entries) = entries {
                match source() {
                    Value::Array(many) => entries.extend(many),
                    one => entries.push(one),
                }
            }
        }
        Value::Object(doc)
    }
}

/// Registration of what `/debug/diagnostics` shows.
impl Server {
    /// Adds `source` to the section `section` of `/debug/diagnostics`: what it returns,
    /// serialized with serde, is one entry of the section's array (a sequence: one entry
    /// per element). Called on each request: keep it cheap. A value that does not serialize
    /// shows as `{"error": "..."}`.
    ///
    /// The typed methods below use the sections `informers`, `queues` and `leases`; a
    /// kinformer-sharding `ShardManager` goes in `shards`:
    /// `.diagnose("shards", move || manager.status())`.
    #[must_use]
    pub fn diagnose<S: Serialize>(
        mut self,
        section: &str,
        source: impl Fn() -> S + Send + Sync + 'static,
    ) -> Self {
        let source = move || {
            serde_json::to_value(source()).unwrap_or_else(|e| json!({ "error": e.to_string() }))
        };
        self.routes
            .diagnostics
            .0
            .push((section.to_owned(), Box::new(source)));
        self
    }

    /// Shows `informer` under `informers`: name, started, synced, objects cached, the last
    /// resourceVersion seen, and what its reflector did ([`InformerStats`]).
    #[must_use]
    pub fn diagnose_informer<K>(self, informer: &SharedIndexInformer<K>) -> Self
    where
        K: kinformer_core::MetaObject + Send + Sync + 'static,
    {
        let informer = informer.clone();
        self.diagnose_raw("informers", move || informer_entry(&informer.stats()))
    }

    /// Shows every informer of `factory` under `informers`, those requested later included.
    #[cfg(feature = "kube")]
    #[must_use]
    pub fn diagnose_factory(
        self,
        factory: &kinformer_informer_factory::SharedInformerFactory,
    ) -> Self {
        let factory = factory.clone();
        self.diagnose_raw("informers", move || {
            Value::Array(
                factory
                    .informer_stats()
                    .iter()
                    .map(informer_entry)
                    .collect(),
            )
        })
    }

    /// Shows `queue` under `queues`, named `name`: its depth (by priority for a priority
    /// queue), items held and waiting, retries, and the longest running processor and
    /// unfinished work in seconds ([`Queue::stats`]; `null` for a queue that records no
    /// metrics).
    #[must_use]
    pub fn diagnose_queue<T: 'static, Q>(self, name: &str, queue: Arc<Q>) -> Self
    where
        Q: Queue<T> + ?Sized + 'static,
    {
        let name = name.to_owned();
        self.diagnose_raw("queues", move || queue_entry(&name, &queue.stats()))
    }

    /// Shows `controller`'s queue under `queues`, named after the controller.
    #[must_use]
    pub fn diagnose_controller<T: Item, Q: RateLimitingQueue<T> + 'static>(
        self,
        controller: &Controller<T, Q>,
    ) -> Self {
        self.diagnose_queue(&controller.config().name, Arc::clone(controller.queue()))
    }

    /// Shows `elector`'s Lease under `leases`: name, holder, whether this process holds it,
    /// the record's acquire and renew times and lease duration, when this process saw it
    /// last change and when it expires
    /// ([`LeaseStatus`](kinformer_leaderelection::LeaseStatus)).
    #[cfg(feature = "kube")]
    #[must_use]
    pub fn diagnose_elector(self, elector: &kinformer_leaderelection::LeaderElector) -> Self {
        let elector = elector.clone();
        self.diagnose("leases", move || elector.status())
    }

    /// Adds a source that makes its JSON itself.
    fn diagnose_raw(
        mut self,
        section: &str,
        source: impl Fn() -> Value + Send + Sync + 'static,
    ) -> Self {
        self.routes
            .diagnostics
            .0
            .push((section.to_owned(), Box::new(source)));
        self
    }
}

/// An informer's entry.
fn informer_entry(s: &InformerStats) -> Value {
    let counts = |pairs: &[(&'static str, u64)]| {
        pairs
            .iter()
            .map(|(k, n)| ((*k).to_owned(), Value::from(*n)))
            .collect::<Map<_, _>>()
    };
    json!({
        "name": s.name,
        "started": s.started,
        "synced": s.synced,
        "objects": s.objects,
        "last_sync_resource_version": s.last_sync_resource_version,
        "lists": counts(&s.reflector.lists),
        "syncs": s.reflector.syncs,
        "watches": s.reflector.watches,
        "watch_events": counts(&s.reflector.events),
        "undecodable": s.reflector.undecodable,
        "queued_items": s.queued_items,
        "processing_latency": json!({
            "count": s.processing_latency.count,
            "sum": s.processing_latency.sum.as_secs_f64(),
        }),
        "identity": s.identity.as_ref().map(|id| json!({
            "name": id.name, "group": id.group, "version": id.version, "resource": id.resource,
        })),
        "last_error": s.last_error.as_ref().map(|e| json!({
            "message": e.message,
            "time": rfc3339(e.at),
            "backoff": e.backoff.as_secs_f64(),
            "relist_reason": e.relist_reason,
        })),
    })
}

/// `t` in UTC as RFC 3339 with microseconds (`2026-01-02T03:04:05.123456Z`); `None` for a
/// time before 1970 or after 9999.
fn rfc3339(t: SystemTime) -> Option<String> {
    let since = t.duration_since(UNIX_EPOCH).ok()?;
    let secs = since.as_secs();
    let (days, rem) = (i64::try_from(secs / 86_400).ok()?, secs % 86_400);
    // Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day count.
    let z = days.checked_add(719_468)?;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era.checked_mul(400)? + i64::from(month <= 2);
    if year > 9999 {
        return None;
    }
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros()
    ))
}

/// A queue's entry; durations in seconds.
fn queue_entry(name: &str, s: &QueueStats) -> Value {
    let by_priority: Vec<Value> = s
        .depth_by_priority
        .iter()
        .map(|(priority, depth)| json!({ "priority": priority, "depth": depth }))
        .collect();
    json!({
        "name": name,
        "depth": s.depth,
        "depth_by_priority": by_priority,
        "processing": s.processing,
        "waiting": s.waiting,
        "retries": s.retries,
        "longest_running_processor_seconds": s.longest_running_processor.map(|d| d.as_secs_f64()),
        "unfinished_work_seconds": s.unfinished_work.map(|d| d.as_secs_f64()),
        "shutting_down": s.shutting_down,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc_with_microseconds() {
        let at = |secs: u64, nanos: u32| rfc3339(UNIX_EPOCH + Duration::new(secs, nanos));
        assert_eq!(at(0, 0).as_deref(), Some("1970-01-01T00:00:00.000000Z"));
        assert_eq!(
            at(1_700_000_000, 123_456_789).as_deref(),
            Some("2023-11-14T22:13:20.123456Z")
        );
        assert_eq!(
            at(951_782_400, 0).as_deref(),
            Some("2000-02-29T00:00:00.000000Z")
        );
        assert_eq!(
            at(1_709_251_199, 0).as_deref(),
            Some("2024-02-29T23:59:59.000000Z")
        );
        assert_eq!(
            at(4_107_542_400, 0).as_deref(),
            Some("2100-03-01T00:00:00.000000Z")
        );
        assert_eq!(
            at(253_402_300_799, 0).as_deref(),
            Some("9999-12-31T23:59:59.000000Z")
        );
        assert_eq!(at(253_402_300_800, 0), None, "year 10000");
        let far = UNIX_EPOCH.checked_add(Duration::from_secs(i64::MAX.unsigned_abs()));
        assert_eq!(far.and_then(rfc3339), None, "no overflow either");
        assert_eq!(rfc3339(UNIX_EPOCH - Duration::from_secs(1)), None);
    }
}
