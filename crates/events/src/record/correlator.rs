//! client-go's `EventCorrelator` (`tools/record/events_cache.go`): the aggregator of
//! similar events, the logger that turns an identical event into a count patch, and the
//! per-object spam filter, each over an LRU of client-go's size, all on the injected clock.
//! The [`Correlator`] of `record`'s broadcaster task.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::lru::Lru;
use super::{Config, Source};
use crate::EventType;
use crate::event::{DEFAULT_NAMESPACE, generate_event_name, go_hex, non_empty, time, unix_nanos};
use crate::sink::Described;
use crate::task::Correlator;
use crate::write::Write;

/// The prefix of an aggregated event's message (client-go's
/// `EventAggregatorByReasonMessageFunc`).
pub(crate) const COMBINED: &str = "(combined from similar events): ";

/// A correlation key: the fields client-go joins into its key strings, kept apart.
type Key = Vec<String>;

fn field(v: Option<&String>) -> String {
    v.cloned().unwrap_or_default()
}

fn source(event: &Event) -> (String, String) {
    let source = event.source.as_ref();
    (
        field(source.and_then(|s| s.component.as_ref())),
        field(source.and_then(|s| s.host.as_ref())),
    )
}

/// The involved object as every key takes it: kind, namespace, name, uid, apiVersion.
/// Never the resourceVersion: every version of an object is the same object here.
fn object(r: &ObjectReference) -> [String; 5] {
    [
        field(r.kind.as_ref()),
        field(r.namespace.as_ref()),
        field(r.name.as_ref()),
        field(r.uid.as_ref()),
        field(r.api_version.as_ref()),
    ]
}

/// client-go's `getEventKey`: source, involved object (with its fieldPath), type, reason
/// and message. Identical events by this key are one Event with a count.
fn event_key(event: &Event) -> Key {
    let (component, host) = source(event);
    let mut key = vec![component, host];
    key.extend(object(&event.involved_object));
    key.extend([
        field(event.involved_object.field_path.as_ref()),
        field(event.type_.as_ref()),
        field(event.reason.as_ref()),
        field(event.message.as_ref()),
    ]);
    key
}

/// client-go's `getSpamKey`: source, involved object and type (not the reason).
fn spam_key(event: &Event) -> Key {
    let (component, host) = source(event);
    let mut key = vec![component, host];
    key.extend(object(&event.involved_object));
    key.push(field(event.type_.as_ref()));
    key
}

/// client-go's `EventAggregatorByReasonFunc`: the group (source, involved object, type,
/// reason, reporting controller and instance) and, within it, the message.
fn aggregate_key(event: &Event) -> (Key, String) {
    let (component, host) = source(event);
    let mut key = vec![component, host];
    key.extend(object(&event.involved_object));
    key.extend([
        field(event.type_.as_ref()),
        field(event.reason.as_ref()),
        field(event.reporting_component.as_ref()),
        field(event.reporting_instance.as_ref()),
    ]);
    (key, field(event.message.as_ref()))
}

/// The logger's key: an event's own, or its aggregate group's once it was aggregated
/// (client-go keeps both in one cache of strings).
#[derive(Clone, PartialEq, Eq, Hash)]
enum LogKey {
    Event(Key),
    Aggregate(Key),
}

/// client-go's `aggregateRecord`.
struct AggregateRecord {
    /// The distinct messages seen in the group.
    messages: HashSet<String>,
    last: SystemTime,
}

/// client-go's `EventAggregator`.
struct Aggregator {
    cache: Lru<Key, AggregateRecord>,
    max_events: usize,
    max_interval: Duration,
}

impl Aggregator {
    /// client-go's `EventAggregate`: the event to go on with and its logger key. After
    /// `max_events` distinct messages in one group, each less than `max_interval` after the
    /// previous, the event becomes the group's aggregate: a new event with the message
    /// prefixed by [`COMBINED`], keyed by the group, so that its repeats count on one Event.
    fn aggregate(&mut self, event: Event, now: SystemTime) -> (Event, LogKey) {
        let (group, message) = aggregate_key(&event);
        let fresh = || AggregateRecord {
            messages: HashSet::new(),
            last: now,
        };
        let mut record = self
            .cache
            .get_mut(&group)
            .map_or_else(fresh, |r| AggregateRecord {
                messages: std::mem::take(&mut r.messages),
                last: r.last,
            });
        // Too old (or never seen): start again. A clock gone backwards keeps the record.
        if now
            .duration_since(record.last)
            .is_ok_and(|since| since > self.max_interval)
        {
            record = fresh();
        }
        record.messages.insert(message);
        record.last = now;
        if record.messages.len() < self.max_events {
            self.cache.insert(group, record);
            let key = event_key(&event);
            return (event, LogKey::Event(key));
        }
        // Do not grow the set past the maximum (client-go's `PopAny`).
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        self.cache.insert(group.clone(), record);
        let name = format!(
            "{}.{}",
            event.involved_object.name.as_deref().unwrap_or_default(),
            go_hex(unix_nanos(now))
        );
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(time(now)),
            last_timestamp: Some(time(now)),
            message: Some(format!(
                "{COMBINED}{}",
                event.message.as_deref().unwrap_or_default()
            )),
            type_: event.type_,
            reason: event.reason,
            source: event.source,
            involved_object: event.involved_object,
            ..Event::default()
        };
        (aggregate, LogKey::Aggregate(group))
    }
}

/// client-go's `eventLog`: what the logger remembers of the Event an identical one would
/// count on.
#[derive(Clone)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

impl EventLog {
    fn of(event: &Event) -> Self {
        Self {
            count: event.count.unwrap_or(0),
            first_timestamp: event.first_timestamp.clone(),
            name: event.metadata.name.clone(),
            resource_version: event.metadata.resource_version.clone(),
        }
    }
}

/// client-go's `eventLogger`.
struct Logger {
    cache: Lru<LogKey, EventLog>,
}

impl Logger {
    /// client-go's `eventObserve`: an event whose key was seen becomes the Event written
    /// then (its name, resourceVersion and first timestamp) with the count one higher,
    /// and a patch of what changes (client-go's two-way merge patch against the event
    /// with no count, message or last timestamp): `count`, `lastTimestamp` and `message`
    /// (left out when empty). Either way the observation is remembered.
    fn observe(&mut self, mut event: Event, key: LogKey) -> (Event, Option<Vec<u8>>) {
        let last = self.cache.get_mut(&key).filter(|l| l.count > 0).cloned();
        let mut patch = None;
        if let Some(last) = last {
            event.metadata.name = last.name;
            event.metadata.resource_version = last.resource_version;
            event.first_timestamp = last.first_timestamp;
            event.count = Some(last.count.saturating_add(1));
            let mut fields = serde_json::Map::new();
            fields.insert("count".into(), event.count.into());
            fields.insert(
                "lastTimestamp".into(),
                serde_json::to_value(&event.last_timestamp).unwrap_or_default(),
            );
            if let Some(message) = event.message.as_ref().filter(|m| !m.is_empty()) {
                fields.insert("message".into(), message.clone().into());
            }
            patch = serde_json::to_vec(&fields).ok();
        }
        self.cache.insert(key, EventLog::of(&event));
        (event, patch)
    }

    /// client-go's `updateState`: what the server stored, under the stored event's own key.
    fn update_state(&mut self, stored: &Event) {
        self.cache
            .insert(LogKey::Event(event_key(stored)), EventLog::of(stored));
    }
}

/// The token bucket of one source and object (client-go's passive token-bucket rate
/// limiter, `golang.org/x/time/rate` underneath): full at first, `qps` tokens a second
/// back, never more than `burst`.
struct TokenBucket {
    tokens: f64,
    last: SystemTime,
}

impl TokenBucket {
    fn try_accept(&mut self, now: SystemTime, qps: f64, burst: usize) -> bool {
        // A clock gone backwards refills nothing.
        let elapsed = now.duration_since(self.last).unwrap_or_default();
        #[allow(clippy::cast_precision_loss)] // a burst is small
        let tokens = (self.tokens + elapsed.as_secs_f64() * qps).min(burst as f64);
        if tokens < 1.0 {
            return false;
        }
        self.tokens = tokens - 1.0;
        self.last = now.max(self.last);
        true
    }
}

/// client-go's `EventSourceObjectSpamFilter`.
struct SpamFilter {
    cache: Lru<Key, TokenBucket>,
    burst: usize,
    qps: f64,
}

impl SpamFilter {
    /// Whether to drop `event`: its source and object are out of tokens.
    fn filter(&mut self, event: &Event, now: SystemTime) -> bool {
        let key = spam_key(event);
        #[allow(clippy::cast_precision_loss)]
        let full = self.burst as f64;
        let accepted = match self.cache.get_mut(&key) {
            Some(bucket) => bucket.try_accept(now, self.qps, self.burst),
            None => {
                let mut bucket = TokenBucket {
                    tokens: full,
                    last: now,
                };
                let accepted = bucket.try_accept(now, self.qps, self.burst);
                self.cache.insert(key, bucket);
                accepted
            }
        };
        !accepted
    }
}

/// client-go's `EventCorrelator`: aggregate, then count, then filter.
pub(crate) struct EventCorrelator {
    aggregator: Aggregator,
    logger: Logger,
    spam: SpamFilter,
}

impl EventCorrelator {
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            aggregator: Aggregator {
                cache: Lru::new(config.cache_size),
                max_events: config.max_events,
                max_interval: config.max_interval,
            },
            logger: Logger {
                cache: Lru::new(config.cache_size),
            },
            spam: SpamFilter {
                cache: Lru::new(config.cache_size),
                burst: config.spam_burst,
                qps: config.spam_qps,
            },
        }
    }
}

impl Correlator for EventCorrelator {
    type Event = Event;
    const IN_ORDER: bool = true;

    /// client-go's `EventCorrelate`. The logger counts an event before the spam filter
    /// looks at it, as there: a dropped repeat still raises the next written count.
    fn observe(
        &mut self,
        event: Event,
        _published: SystemTime,
        now: SystemTime,
    ) -> Option<Write<Event>> {
        let (event, key) = self.aggregator.aggregate(event, now);
        let (event, patch) = self.logger.observe(event, key);
        if self.spam.filter(&event, now) {
            tracing::debug!(event = %Described(&event), "too many events about this object from this source; dropping the event");
            return None;
        }
        Some(Write { event, patch })
    }

    fn written(&mut self, stored: &Event) {
        self.logger.update_state(stored);
    }
}

/// The event client-go's `recorderImpl.makeEvent` builds, with the recorder's source:
/// named `<object name>.<now in unix nanoseconds, hex>` (a random UUID when that is no
/// valid name), in the object's namespace (`default` for a cluster-scoped one), count 1,
/// first and last timestamps `now`, `reportingComponent` the source's component and
/// `reportingInstance` its host. Empty strings are left out, as Go's `omitempty` leaves
/// them out.
pub(crate) fn make_event(
    source: &Source,
    reference: &ObjectReference,
    annotations: Option<BTreeMap<String, String>>,
    type_: EventType,
    reason: &str,
    message: &str,
    now: SystemTime,
) -> Event {
    let namespace = match reference.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns.to_owned(),
        _ => DEFAULT_NAMESPACE.to_owned(),
    };
    let name = generate_event_name(
        reference.name.as_deref().unwrap_or_default(),
        unix_nanos(now),
    );
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            annotations,
            ..ObjectMeta::default()
        },
        involved_object: reference.clone(),
        reason: non_empty(reason),
        message: non_empty(message),
        first_timestamp: Some(time(now)),
        last_timestamp: Some(time(now)),
        count: Some(1),
        type_: Some(type_.as_str().to_owned()),
        source: Some(EventSource {
            component: non_empty(source.component()),
            host: non_empty(source.host()),
        }),
        reporting_component: non_empty(source.component()),
        reporting_instance: non_empty(source.host()),
        ..Event::default()
    }
}
