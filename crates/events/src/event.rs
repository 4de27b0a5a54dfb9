//! Building an `events.k8s.io/v1` Event as client-go's `recorderImpl.makeEvent` does, and
//! the key under which isomorphic events fold (client-go's `getKey`).

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kinformer_compact_store::KubeObject;
use kube::Resource;

use crate::{EventType, Reporter};

/// Where an event about a cluster-scoped object goes (client-go's `metav1.NamespaceDefault`).
pub(crate) const DEFAULT_NAMESPACE: &str = "default";

/// What the caller said happened, before it becomes an [`Event`].
pub(crate) struct Occurrence<'a> {
    pub(crate) regarding: &'a ObjectReference,
    pub(crate) related: Option<&'a ObjectReference>,
    pub(crate) type_: EventType,
    pub(crate) reason: &'a str,
    pub(crate) action: &'a str,
    pub(crate) note: &'a str,
}

/// The event client-go's `makeEvent` builds: named `<regarding name>.<now in unix
/// nanoseconds, hex>` (or a random UUID when that is not a valid name), in the regarding
/// object's namespace (`default` for a cluster-scoped one), with `eventTime` = `now` and
/// no series. Empty strings are left out, as Go's `omitempty` leaves them out.
pub(crate) fn make_event(reporter: &Reporter, what: &Occurrence<'_>, now: SystemTime) -> Event {
    let namespace = match what.regarding.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns.to_owned(),
        _ => DEFAULT_NAMESPACE.to_owned(),
    };
    let name = generate_event_name(
        what.regarding.name.as_deref().unwrap_or_default(),
        unix_nanos(now),
    );
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        event_time: Some(micro_time(now)),
        series: None,
        reporting_controller: non_empty(reporter.controller()),
        reporting_instance: non_empty(reporter.instance()),
        action: non_empty(what.action),
        reason: non_empty(what.reason),
        regarding: Some(what.regarding.clone()),
        related: what.related.cloned(),
        note: non_empty(what.note),
        type_: Some(what.type_.as_str().to_owned()),
        ..Event::default()
    }
}

/// The reference client-go's `reference.GetReference` makes for an object: apiVersion,
/// kind, namespace, name, uid and resourceVersion (kube's `object_ref` leaves out the
/// resourceVersion), for a decoded object or a cached one alike. What the recorders put in
/// an Event's `regarding` / `involvedObject`; a controller that writes Events of its own,
/// or `ObjectReference`s into a status (a CronJob's `status.active`), uses the same.
///
/// ```
/// use k8s_openapi::api::batch::v1::Job;
/// use kinformer_events::get_reference;
///
/// let mut job = Job::default();
/// job.metadata.namespace = Some("default".into());
/// job.metadata.name = Some("backup-28340000".into());
/// job.metadata.uid = Some("7c1f".into());
/// job.metadata.resource_version = Some("4711".into());
/// let reference = get_reference(&job);
/// assert_eq!(reference.api_version.as_deref(), Some("batch/v1"));
/// assert_eq!(reference.kind.as_deref(), Some("Job"));
/// assert_eq!(reference.resource_version.as_deref(), Some("4711"));
/// ```
pub fn get_reference<K>(object: &K) -> ObjectReference
where
    K: KubeObject,
    K::Kind: Resource<DynamicType = ()>,
{
    let owned = |s: Option<&str>| s.map(str::to_owned);
    ObjectReference {
        api_version: Some(K::Kind::api_version(&()).into_owned()),
        kind: Some(K::Kind::kind(&()).into_owned()),
        namespace: owned(object.object_namespace()),
        name: owned(object.object_name()),
        uid: owned(object.object_uid()),
        resource_version: owned(object.object_resource_version()),
        field_path: None,
    }
}

pub(crate) fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// `t` as a `MicroTime`, clamped to what a timestamp can hold.
pub(crate) fn micro_time(t: SystemTime) -> MicroTime {
    MicroTime(Timestamp::try_from(t).unwrap_or(if t > UNIX_EPOCH {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    }))
}

/// The series client-go writes: `count` and `lastObservedTime`.
pub(crate) fn series(count: i32, last_observed: SystemTime) -> EventSeries {
    EventSeries {
        count,
        last_observed_time: micro_time(last_observed),
    }
}

/// `t` as a `Time` (written with a precision of seconds), clamped as [`micro_time`].
pub(crate) fn time(t: SystemTime) -> Time {
    Time(micro_time(t).0)
}

/// Nanoseconds since the Unix epoch, negative before it (Go's `Time.UnixNano`), saturated.
pub(crate) fn unix_nanos(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos())
            .map(|n| -n)
            .unwrap_or(i64::MIN),
    }
}

/// client-go's `util.GenerateEventName`: `<name>.<unix nanos in hex>` (Go's `%x`, so a
/// negative number gets a minus sign), or a random UUID when that is not a valid
/// DNS-1123 subdomain (kubernetes/kubernetes#127594).
pub(crate) fn generate_event_name(ref_name: &str, unix_nanos: i64) -> String {
    let name = format!("{ref_name}.{}", go_hex(unix_nanos));
    if is_dns1123_subdomain(&name) {
        name
    } else {
        uuid_v4()
    }
}

/// `n` as Go's `%x` prints an `int64`: lowercase hex, a minus sign when negative.
pub(crate) fn go_hex(n: i64) -> String {
    if n < 0 {
        format!("-{:x}", n.unsigned_abs())
    } else {
        format!("{n:x}")
    }
}

/// At most 253 characters of dot-separated labels, each of lowercase letters, digits and
/// `-`, starting and ending with a letter or digit (apimachinery's `IsDNS1123Subdomain`).
pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
                }
                _ => false,
            }
        })
}

/// A random (version 4) UUID in its usual lowercase form, as `uuid.New().String()`.
fn uuid_v4() -> String {
    let mut b: [u8; 16] = fastrand::u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// client-go's `eventKey`: two events with equal keys are isomorphic and fold into one
/// series. The note is not part of it (the first note stays), nor is the time. Absent and
/// empty fields are equal, as Go's zero values are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct EventKey {
    type_: String,
    action: String,
    reason: String,
    reporting_controller: String,
    reporting_instance: String,
    regarding: RefKey,
    related: RefKey,
}

/// Every field of an `ObjectReference`, as Go compares the struct: kind, namespace, name,
/// uid, apiVersion, resourceVersion and fieldPath. An object's new resourceVersion is
/// therefore a new key, as in client-go.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct RefKey {
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    api_version: String,
    resource_version: String,
    field_path: String,
}

/// A field as Go holds it: absent is empty.
fn owned(field: &Option<String>) -> String {
    field.clone().unwrap_or_default()
}

impl RefKey {
    fn of(reference: &ObjectReference) -> Self {
        let s = owned;
        Self {
            kind: s(&reference.kind),
            namespace: s(&reference.namespace),
            name: s(&reference.name),
            uid: s(&reference.uid),
            api_version: s(&reference.api_version),
            resource_version: s(&reference.resource_version),
            field_path: s(&reference.field_path),
        }
    }
}

impl EventKey {
    /// The key of `event` (client-go's `getKey`).
    pub(crate) fn of(event: &Event) -> Self {
        let s = owned;
        Self {
            type_: s(&event.type_),
            action: s(&event.action),
            reason: s(&event.reason),
            reporting_controller: s(&event.reporting_controller),
            reporting_instance: s(&event.reporting_instance),
            regarding: event.regarding.as_ref().map(RefKey::of).unwrap_or_default(),
            related: event.related.as_ref().map(RefKey::of).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_name_is_the_object_name_and_the_time_in_hex() {
        assert_eq!(generate_event_name("web-0", 0x1a2b), "web-0.1a2b");
        assert_eq!(generate_event_name("web-0.x", 255), "web-0.x.ff");
        // Before 1970 Go's %x prints a minus sign, which makes no valid name: a UUID.
        assert_eq!(generate_event_name("web-0", -0x10).len(), 36);
    }

    #[test]
    fn an_invalid_event_name_becomes_a_uuid() {
        for bad in ["Web", "", "-a", &"a".repeat(250)] {
            let name = generate_event_name(bad, 0x1a2b);
            assert_eq!(name.len(), 36, "{name}");
            let groups: Vec<_> = name.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{name}");
            assert_eq!(&name[14..15], "4", "version 4: {name}");
            assert!("89ab".contains(&name[19..20]), "RFC 4122 variant: {name}");
        }
    }

    #[test]
    fn dns1123_subdomain_follows_apimachinery() {
        for good in ["a", "a.b", "a-b.c-d", "0.1", &"a".repeat(253)] {
            assert!(is_dns1123_subdomain(good), "{good}");
        }
        for bad in [
            "",
            "A",
            "a..b",
            ".a",
            "a.",
            "-a",
            "a-",
            "a_b",
            &"a".repeat(254),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }
}
