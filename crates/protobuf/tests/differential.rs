//! Differential correctness against Go's own encoders: for every Go type in client-go's
//! scheme, objects filled by apimachinery's round-trip fuzzer from fixed seeds (100 per
//! type, by `xtask/go/cmd/proto-corpus`), encoded by Go to protobuf and to JSON, decode to
//! the same value here. Compared twice: as `serde_json::Value` (every type; the stricter
//! check, since it sees every key and the kind of every number), and as the k8s-openapi
//! type where k8s-openapi has one (`PartialEq` on the typed objects). Each decoded value
//! also goes through the encoding of kinformer's default cache (kinformer-compact-store)
//! and must come back equal: decode(encode(x)) == x for every type the schema knows. And the
//! protobuf transcoded without decoding (`Object::transcoder`) must say the same: into
//! serde_json, the same JSON value; into the cache's encoding, the same typed object.
//!
//! A failing record is written to `tests/regressions/` (the protobuf and the JSON); the
//! `regressions` test decodes every file there, so a fixed difference stays fixed.

use std::collections::BTreeMap;

use crate::support::{first_difference, without_embedded_type_meta, without_nulls};
use serde::de::DeserializeOwned;
use serde_json::Value;

const PER_TYPE: usize = 100;
const SEED: u64 = 1;
const VIEW_EVERY: usize = 4;

/// Compares the two decodes of one record; `Err` says how they differ.
fn compare_value(protobuf: &[u8], json: &[u8]) -> Result<(), String> {
    let from_json: Value =
        serde_json::from_slice(json).map_err(|e| format!("Go's JSON does not parse: {e}"))?;
    let from_pb: Value =
        kinformer_protobuf::from_slice(protobuf).map_err(|e| format!("protobuf: {e}"))?;
    let cached = compact_round_trip(&from_pb)?;
    let transcoded = transcode(protobuf, |t| {
        serde_json::to_value(t).map_err(|e| e.to_string())
    })?;
    if let Some(d) = first_difference(
        &without_nulls(transcoded),
        &without_nulls(from_pb.clone()),
        "",
    ) {
        return Err(format!("transcoded into JSON vs decoded: {d}"));
    }
    compare_list_items(protobuf)?;
    let (a, b) = (without_nulls(from_pb), without_nulls(from_json));
    if let Some(d) = first_difference(&a, &b, "") {
        return Err(format!("as JSON values (protobuf vs JSON): {d}"));
    }
    match first_difference(&without_nulls(cached), &a, "") {
        None => Ok(()),
        Some(d) => Err(format!(
            "as JSON values, through the compact store's encoding: {d}"
        )),
    }
}

/// `value` through the encoding of kinformer's default cache (kinformer-compact-store),
/// which every object an informer caches goes through.
fn compact_round_trip<T: serde::Serialize + DeserializeOwned>(value: &T) -> Result<T, String> {
    let bytes = kinformer_compact_store::encode_to_vec(value)
        .map_err(|e| format!("the compact encoding refuses it: {e}"))?;
    kinformer_compact_store::decode_from_slice(&bytes)
        .map_err(|e| format!("the compact encoding does not decode back: {e}"))
}

/// The protobuf body transcoded by `f` (`Object::transcoder`), with the transcoder's
/// typed error when `f` fails.
fn transcode<T>(
    protobuf: &[u8],
    f: impl FnOnce(&kinformer_protobuf::Transcoder<'_>) -> Result<T, String>,
) -> Result<T, String> {
    let object = kinformer_protobuf::Object::from_bytes(protobuf).map_err(|e| e.to_string())?;
    let transcoder = object
        .transcoder()
        .map_err(|e| format!("transcoder: {e}"))?;
    match f(&transcoder) {
        Ok(v) => Ok(v),
        Err(e) => Err(format!("transcoding: {e}: {}", transcoder.into_error())),
    }
}

/// For a list: each item as an `Object` (`List::objects`) decodes and transcodes to what
/// `List::items` decodes.
fn compare_list_items(protobuf: &[u8]) -> Result<(), String> {
    let Ok(list) = kinformer_protobuf::Object::from_bytes(protobuf).and_then(|o| o.list()) else {
        return Ok(());
    };
    for (i, (object, item)) in list.objects().zip(list.items::<Value>()).enumerate() {
        let (object, item) = match (object, item) {
            (Ok(o), Ok(v)) => (o, v),
            (Err(_), Err(_)) => continue,
            _ => return Err(format!("item {i}: objects() and items() disagree")),
        };
        let decoded: Value = object.deserialize().map_err(|e| format!("item {i}: {e}"))?;
        if decoded != item {
            return Err(format!("item {i}: decoded as an object, it differs"));
        }
        let transcoder = object.transcoder().map_err(|e| format!("item {i}: {e}"))?;
        let transcoded = serde_json::to_value(&transcoder).map_err(|e| format!("item {i}: {e}"))?;
        if let Some(d) = first_difference(&without_nulls(transcoded), &without_nulls(item), "") {
            return Err(format!("item {i} transcoded vs decoded: {d}"));
        }
    }
    Ok(())
}

/// The protobuf body transcoded into the compact store's encoding, then decoded as `T`.
fn transcoded_compact<T: DeserializeOwned>(protobuf: &[u8]) -> Result<T, String> {
    let bytes = transcode(protobuf, |t| {
        kinformer_compact_store::encode_to_vec(t).map_err(|e| e.to_string())
    })?;
    kinformer_compact_store::decode_from_slice(&bytes)
        .map_err(|e| format!("transcoded into the compact encoding, it does not decode: {e}"))
}

fn compare_typed<T: serde::Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    protobuf: &[u8],
    json: &[u8],
) -> Result<(), String> {
    let from_json = serde_json::from_slice::<T>(json);
    let from_pb = kinformer_protobuf::from_slice::<T>(protobuf);
    match (from_pb, from_json) {
        (Ok(a), Ok(b)) if a == b => match compact_round_trip(&a)? {
            cached if cached != a => {
                Err("typed objects differ through the compact store's encoding".into())
            }
            _ if transcoded_compact::<T>(protobuf)? != a => {
                Err("typed objects differ transcoded into the compact store's encoding".into())
            }
            _ => Ok(()),
        },
        (Ok(a), Ok(b)) => {
            let (a, b) = (format!("{a:#?}"), format!("{b:#?}"));
            let line = a
                .lines()
                .zip(b.lines())
                .find(|(x, y)| x != y)
                .map(|(x, y)| format!("{} vs {}", x.trim(), y.trim()))
                .unwrap_or_default();
            Err(format!("typed objects differ: {line}"))
        }
        // Both refusing is agreement: the target cannot hold the value either way.
        (Err(_), Err(_)) => Ok(()),
        (Err(e), Ok(_)) => Err(format!("typed: protobuf fails, JSON decodes: {e}")),
        (Ok(_), Err(e)) => Err(format!("typed: JSON fails ({e}), protobuf decodes")),
    }
}

/// Every field read through the generated view of the cached object is the field of the
/// decoded object, in both wire formats: transcoded from the protobuf and encoded from the
/// object decoded from it, and made from the JSON (`Cached`'s `Deserialize`, the path of
/// JSON responses) against the object decoded from that JSON. The view written out as JSON
/// equals the object written out, but for what k8s-openapi writes and a view leaves out
/// (nulls, and required fields the object does not have); the metadata `Cached` found when
/// it was made is the object's.
fn compare_view<T>(protobuf: &[u8], json: &[u8]) -> Result<(), String>
where
    T: kinformer_compact_store::HasView
        + serde::Serialize
        + DeserializeOwned
        + kinformer_core::MetaObject,
    for<'a> T::View<'a>: serde::Serialize,
{
    use kinformer_compact_store::Cached;
    let object = kinformer_protobuf::Object::from_bytes(protobuf).map_err(|e| e.to_string())?;
    let Ok(typed) = object.deserialize::<T>() else {
        return Ok(());
    };
    let transcoded = Cached::<T>::from_protobuf(&object).map_err(|e| e.to_string())?;
    let encoded = Cached::new(&typed).map_err(|e| e.to_string())?;
    let mut cases = vec![
        ("transcoded", transcoded, &typed),
        ("encoded", encoded, &typed),
    ];
    let from_json = serde_json::from_slice::<T>(json).ok();
    if let Some(from_json) = &from_json {
        let cached: Cached<T> = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        cases.push(("JSON", cached, from_json));
    }
    for (how, cached, typed) in cases {
        // Protobuf carries no embedded apiVersion and kind (see `without_embedded_type_meta`);
        // k8s-openapi writes its own constants for them whatever it decoded.
        let want = without_embedded_type_meta(without_nulls(
            serde_json::to_value(typed).map_err(|e| e.to_string())?,
        ));
        let got = without_embedded_type_meta(without_nulls(
            serde_json::to_value(cached.view()).map_err(|e| e.to_string())?,
        ));
        if let Some(d) = first_difference(&got, &want, "") {
            if std::env::var_os("VIEW_DEBUG").is_some() {
                eprintln!("got {got:#}\nwant {want:#}");
            }
            return Err(format!(
                "the view of the {how} object differs from the object: {d}"
            ));
        }
        // What keys, selectors and the relist comparison read, found when it was made.
        if head(&cached) != head(typed) {
            return Err(format!(
                "the metadata of the {how} object differs from the object's: {:?} {:?}",
                head(&cached),
                head(typed)
            ));
        }
    }
    Ok(())
}

/// Namespace, name, resource version, uid and labels (none and empty alike), as
/// `MetaObject` reads them.
fn head<T: kinformer_core::MetaObject>(
    o: &T,
) -> (Vec<Option<String>>, Option<BTreeMap<String, String>>) {
    let parts = [
        o.object_namespace(),
        o.object_name(),
        o.object_resource_version(),
        o.object_uid(),
    ];
    let labels = o.object_labels().filter(|l| !l.is_empty()).cloned();
    (parts.iter().map(|p| p.map(str::to_owned)).collect(), labels)
}

type Compare = fn(&[u8], &[u8]) -> Result<(), String>;

/// Every k8s-openapi (v1_37) resource type, and the `List<T>` of the listable ones. The
/// list is every `impl crate::Resource` of k8s-openapi's `src/v1_37`. A resource type is
/// compared twice: decoded, and read through its view.
fn typed() -> BTreeMap<(String, String), Vec<Compare>> {
    use k8s_openapi::{List, Resource};
    let mut m: BTreeMap<(String, String), Vec<Compare>> = BTreeMap::new();
    macro_rules! single {
        ($($t:ty),* $(,)?) => {$(
            m.insert(
                (<$t as Resource>::API_VERSION.to_owned(), <$t as Resource>::KIND.to_owned()),
                vec![compare_typed::<$t>],
            );
        )*};
    }
    macro_rules! listable {
        ($($t:ty),* $(,)?) => {$(
            single!($t);
            m.entry((<$t as Resource>::API_VERSION.to_owned(), <$t as Resource>::KIND.to_owned()))
                .or_default()
                .push(compare_view::<$t>);
            m.insert(
                (<$t as Resource>::API_VERSION.to_owned(), format!("{}List", <$t as Resource>::KIND)),
                vec![compare_typed::<List<$t>>],
            );
        )*};
    }
    use k8s_openapi::api::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    listable!(
        admissionregistration::v1::MutatingAdmissionPolicy,
        admissionregistration::v1::MutatingAdmissionPolicyBinding,
        admissionregistration::v1::MutatingWebhookConfiguration,
        admissionregistration::v1::ValidatingAdmissionPolicy,
        admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        admissionregistration::v1::ValidatingWebhookConfiguration,
        admissionregistration::v1alpha1::MutatingAdmissionPolicy,
        admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
        admissionregistration::v1beta1::MutatingAdmissionPolicy,
        admissionregistration::v1beta1::MutatingAdmissionPolicyBinding,
        apiserverinternal::v1alpha1::StorageVersion,
        apps::v1::ControllerRevision,
        apps::v1::DaemonSet,
        apps::v1::Deployment,
        apps::v1::ReplicaSet,
        apps::v1::StatefulSet,
        autoscaling::v1::HorizontalPodAutoscaler,
        autoscaling::v2::HorizontalPodAutoscaler,
        batch::v1::CronJob,
        batch::v1::Job,
        certificates::v1::CertificateSigningRequest,
        certificates::v1::ClusterTrustBundle,
        certificates::v1::PodCertificateRequest,
        certificates::v1beta1::ClusterTrustBundle,
        certificates::v1beta1::PodCertificateRequest,
        coordination::v1::Lease,
        coordination::v1alpha2::LeaseCandidate,
        coordination::v1beta1::LeaseCandidate,
        core::v1::ComponentStatus,
        core::v1::ConfigMap,
        core::v1::Endpoints,
        core::v1::Event,
        core::v1::LimitRange,
        core::v1::Namespace,
        core::v1::Node,
        core::v1::PersistentVolume,
        core::v1::PersistentVolumeClaim,
        core::v1::Pod,
        core::v1::PodTemplate,
        core::v1::ReplicationController,
        core::v1::ResourceQuota,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        discovery::v1::EndpointSlice,
        events::v1::Event,
        flowcontrol::v1::FlowSchema,
        flowcontrol::v1::PriorityLevelConfiguration,
        lifecycle::v1alpha1::Eviction,
        lifecycle::v1alpha1::EvictionRequest,
        networking::v1::IPAddress,
        networking::v1::Ingress,
        networking::v1::IngressClass,
        networking::v1::NetworkPolicy,
        networking::v1::ServiceCIDR,
        node::v1::RuntimeClass,
        policy::v1::PodDisruptionBudget,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        resource::v1::DeviceClass,
        resource::v1::DeviceTaintRule,
        resource::v1::ResourceClaim,
        resource::v1::ResourceClaimTemplate,
        resource::v1::ResourceSlice,
        resource::v1alpha3::DeviceTaintRule,
        resource::v1alpha3::ResourcePoolStatusRequest,
        resource::v1beta1::DeviceClass,
        resource::v1beta1::ResourceClaim,
        resource::v1beta1::ResourceClaimTemplate,
        resource::v1beta1::ResourceSlice,
        resource::v1beta2::DeviceClass,
        resource::v1beta2::DeviceTaintRule,
        resource::v1beta2::ResourceClaim,
        resource::v1beta2::ResourceClaimTemplate,
        resource::v1beta2::ResourceSlice,
        scheduling::v1::PriorityClass,
        scheduling::v1alpha3::CompositePodGroup,
        scheduling::v1alpha3::PodGroup,
        scheduling::v1alpha3::Workload,
        scheduling::v1beta1::PodGroup,
        scheduling::v1beta1::Workload,
        storage::v1::CSIDriver,
        storage::v1::CSINode,
        storage::v1::CSIStorageCapacity,
        storage::v1::StorageClass,
        storage::v1::VolumeAttachment,
        storage::v1::VolumeAttributesClass,
        storagemigration::v1::StorageVersionMigration,
        storagemigration::v1beta1::StorageVersionMigration,
    );
    single!(
        authentication::v1::SelfSubjectReview,
        authentication::v1::TokenRequest,
        authentication::v1::TokenReview,
        authorization::v1::LocalSubjectAccessReview,
        authorization::v1::SelfSubjectAccessReview,
        authorization::v1::SelfSubjectRulesReview,
        authorization::v1::SubjectAccessReview,
        autoscaling::v1::Scale,
        core::v1::Binding,
        policy::v1::Eviction,
        meta::APIGroup,
        meta::APIGroupList,
        meta::APIResourceList,
        meta::APIVersions,
        meta::Status,
    );
    m
}

fn regressions_dir() -> std::path::PathBuf {
    crate::support::manifest_dir().join("tests/regressions")
}

fn check(
    typed: &BTreeMap<(String, String), Vec<Compare>>,
    api_version: &str,
    kind: &str,
    protobuf: &[u8],
    json: &[u8],
    views: bool,
) -> (Result<(), String>, bool) {
    let value = compare_value(protobuf, json);
    let key = (api_version.to_owned(), kind.to_owned());
    match typed.get(&key) {
        Some(cmps) => (
            cmps.iter()
                .take(if views { 2 } else { 1 })
                .try_for_each(|cmp| cmp(protobuf, json))
                .and(value),
            true,
        ),
        None => (value, false),
    }
}

#[test]
fn fuzzed_objects_of_every_type_decode_from_protobuf_as_from_json() {
    let records = crate::support::corpus(PER_TYPE, SEED);
    let typed = typed();
    let mut per_kind: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut typed_kinds = 0;
    let mut failures = Vec::new();
    for r in &records {
        let n = per_kind
            .entry((r.api_version.clone(), r.kind.clone()))
            .or_default();
        // Views are read for every fourth object of a type (25 a type): reading each one
        // costs as much as all the other checks of it.
        let views = n.is_multiple_of(VIEW_EVERY);
        let (outcome, was_typed) =
            check(&typed, &r.api_version, &r.kind, &r.protobuf, &r.json, views);
        if *n == 0 && was_typed {
            typed_kinds += 1;
        }
        *n += 1;
        if let Err(why) = outcome {
            failures.push((r, why));
        }
    }
    eprintln!(
        "{} objects of {} types compared ({} of them also as k8s-openapi types), {} differences",
        records.len(),
        per_kind.len(),
        typed_kinds,
        failures.len()
    );
    assert!(
        per_kind.len() > 300,
        "the corpus covers every type of the scheme"
    );
    for ((v, k), n) in &per_kind {
        assert!(*n >= PER_TYPE, "{v}/{k}: only {n} objects");
    }
    if failures.is_empty() {
        return;
    }
    let dir = regressions_dir();
    std::fs::create_dir_all(&dir).expect("tests/regressions");
    let mut report = String::new();
    for (r, why) in failures.iter().take(50) {
        let stem = format!("{}_{}_{}", r.api_version.replace('/', "_"), r.kind, r.seed);
        std::fs::write(dir.join(format!("{stem}.pb")), &r.protobuf).expect("write .pb");
        std::fs::write(dir.join(format!("{stem}.json")), &r.json).expect("write .json");
        report.push_str(&format!("{stem}: {why}\n"));
    }
    panic!(
        "{} of {} objects decode differently (first 50 written to {}):\n{report}",
        failures.len(),
        records.len(),
        dir.display()
    );
}

/// Every pair in tests/regressions (cases that once differed) decodes the same both ways.
#[test]
fn regressions() {
    let typed = typed();
    let Ok(entries) = std::fs::read_dir(regressions_dir()) else {
        return;
    };
    let mut checked = 0;
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "pb") {
            continue;
        }
        let protobuf = std::fs::read(&path).expect("read .pb");
        let json = std::fs::read(path.with_extension("json")).expect("the .json twin");
        let object = kinformer_protobuf::Object::from_bytes(&protobuf).expect("an envelope");
        let (outcome, _) = check(
            &typed,
            object.api_version(),
            object.kind(),
            &protobuf,
            &json,
            true,
        );
        if let Err(why) = outcome {
            panic!("{}: {why}", path.display());
        }
        checked += 1;
    }
    eprintln!("{checked} regression cases decode the same both ways");
}
