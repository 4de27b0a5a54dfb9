//! KEDA's `ScaledObject` as a Rust program types a custom resource: a struct made with
//! kube's `#[derive(CustomResource)]`, its fields as kopium generates them from a CRD
//! (optional fields `Option`s skipped when unset, dates as strings), covering the schema of
//! `kinformer_testenv::create_scaled_object_crd`.

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// What a `ScaledObject` asks for: the workload to scale, its bounds and what drives it.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "keda.sh",
    version = "v1alpha1",
    kind = "ScaledObject",
    plural = "scaledobjects",
    namespaced,
    status = "ScaledObjectStatus",
    schema = "disabled",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    /// The workload to scale.
    pub scale_target_ref: ScaleTargetRef,
    /// Seconds between two checks of the triggers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_interval: Option<i32>,
    /// Seconds after the last active trigger before scaling to the minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_period: Option<i32>,
    /// The fewest replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replica_count: Option<i32>,
    /// The most replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replica_count: Option<i32>,
    /// The HPA's configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced: Option<Advanced>,
    /// What drives the scaling.
    pub triggers: Vec<ScaleTrigger>,
}

/// `spec.scaleTargetRef`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTargetRef {
    /// The target's `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The target's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The target's name.
    pub name: String,
}

/// `spec.advanced`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Advanced {
    /// Whether the target gets its original replica count back when the object goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_to_original_replica_count: Option<bool>,
    /// The HPA KEDA makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizontal_pod_autoscaler_config: Option<HpaConfig>,
}

/// `spec.advanced.horizontalPodAutoscalerConfig`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaConfig {
    /// The HPA's name, when not KEDA's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The HPA's scaling behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HpaBehavior>,
}

/// `behavior`: how fast to scale each way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaBehavior {
    /// Scaling down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<ScalingRules>,
    /// Scaling up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<ScalingRules>,
}

/// One direction's scaling rules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRules {
    /// Seconds of past recommendations considered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilization_window_seconds: Option<i32>,
    /// Which policy wins: `Max`, `Min` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_policy: Option<String>,
    /// The policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<ScalingPolicy>>,
}

/// One scaling policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingPolicy {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub type_: String,
    /// How many pods, or what percentage.
    pub value: i32,
    /// Over how many seconds.
    pub period_seconds: i32,
}

/// One trigger of `spec.triggers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTrigger {
    /// The scaler: `prometheus`, `cpu`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// The trigger's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Utilization`, `AverageValue` or `Value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_type: Option<String>,
    /// The scaler's settings.
    pub metadata: BTreeMap<String, String>,
    /// Where the scaler's credentials are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_ref: Option<AuthenticationRef>,
}

/// A trigger's `authenticationRef`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthenticationRef {
    /// The `TriggerAuthentication`'s name.
    pub name: String,
    /// `TriggerAuthentication` or `ClusterTriggerAuthentication`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// What KEDA reports about a `ScaledObject`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectStatus {
    /// The target's `apiVersion.Kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_target_kind: Option<String>,
    /// The target's group, version, kind and resource.
    #[serde(
        rename = "scaleTargetGVKR",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub scale_target_gvkr: Option<GroupVersionKindResource>,
    /// The target's replicas before KEDA scaled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_replica_count: Option<i32>,
    /// When a trigger was last active (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_active_time: Option<String>,
    /// The external metrics the HPA reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_metric_names: Option<Vec<String>>,
    /// The resource metrics the HPA reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_metric_names: Option<Vec<String>>,
    /// The HPA's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpa_name: Option<String>,
    /// `Ready`, `Active`, `Fallback`, `Paused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// `status.scaleTargetGVKR`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupVersionKindResource {
    /// The group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The resource.
    pub resource: String,
    /// The version.
    pub version: String,
}

/// One condition of `status.conditions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// The condition.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, in one word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How the informer's default cache (kinformer-compact-store's `Cached<K>`, which a
/// factory's informer keeps from the wire on) holds a scaled object as each Rust type:
/// checked without a cluster on an object as the API server sends it.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kinformer_compact_store::{Cached, decode_from_slice, encode_to_vec};
    use kinformer_core::{KnownObjects as _, MetaObject as _, Sink as _};
    use kinformer_indexer::{ThreadSafeStore, namespace_indexers};
    use kube::api::DynamicObject;
    use serde::de::DeserializeOwned;

    use super::*;

    /// A scaled object as `kinformer_testenv::apply_realistic_scaled_objects` leaves it:
    /// what the local control plane answered, indented.
    fn served() -> serde_json::Value {
        serde_json::from_str(include_str!("../tests/data/scaled-object.json")).unwrap()
    }

    /// What the default informer does with a JSON object of `K` (`Cached<K>`'s
    /// `Deserialize`: decode `K`, encode it), then the cache keeps it and reads hand it
    /// out, decoding to the same `K`. Returns the encoding's length.
    fn round_trips_through_the_default_cache<K>() -> usize
    where
        K: kinformer_core::MetaObject
            + Serialize
            + DeserializeOwned
            + PartialEq
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let json = serde_json::to_string(&served()).unwrap();
        let direct: K = serde_json::from_str(&json).unwrap();
        let cached: Cached<K> = serde_json::from_str(&json).unwrap();
        assert_eq!(cached.decode().unwrap(), direct);
        assert_eq!(cached.object_name(), Some("web-2"));
        assert_eq!(
            decode_from_slice::<K>(&encode_to_vec(&direct).unwrap()).unwrap(),
            direct
        );
        let store = Arc::new(ThreadSafeStore::<Cached<K>>::new(namespace_indexers()));
        store.add(Arc::new(cached.clone())).unwrap();
        let key = format!("{}/web-2", direct.object_namespace().unwrap());
        assert_eq!(store.get_by_key(&key).unwrap().decode().unwrap(), direct);
        cached.encoded_len()
    }

    #[test]
    fn both_types_round_trip_through_the_default_cache_the_typed_one_smaller() {
        let typed = round_trips_through_the_default_cache::<ScaledObject>();
        let dynamic = round_trips_through_the_default_cache::<DynamicObject>();
        // As compact as the server sends it.
        let json = serde_json::to_vec(&served()).unwrap().len();
        // Struct field names are numbered in the encoding; a `DynamicObject`'s spec and
        // status are a `serde_json::Value`, whose keys are strings.
        assert!(
            typed < dynamic && dynamic < json,
            "{typed} {dynamic} {json}"
        );
    }
}
