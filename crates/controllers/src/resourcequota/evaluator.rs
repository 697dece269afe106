//! What each object charges to a quota (upstream `pkg/quota/v1/evaluator/core` and
//! `pkg/quota/v1/generic`): pure functions over pods, Services, PersistentVolumeClaims
//! and object counts, with the quota scopes that select pods.
//!
//! Amounts are thousandths of the resource's unit (millicores, millibytes, milli-objects)
//! so that every resource adds up exactly in one integer type; [`format_amount`] prints
//! them as upstream prints a `Quantity`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, ScopedResourceSelectorRequirement, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use skiff_api::core::pod::qos::{QosClass, pod_qos};
use skiff_api::core::pod::requests::{PodResourcesOptions, pod_limits, pod_requests};
use skiff_api::quantity;

/// Usage by quota resource name, in thousandths (see the module doc).
pub(crate) type Usage = BTreeMap<String, i64>;

/// The prefix of generic object counts (`count/deployments.apps`).
pub(crate) const COUNT_PREFIX: &str = "count/";
/// The suffix of per-StorageClass resources (`gold.storageclass.storage.k8s.io/...`).
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
/// One object, in thousandths.
const ONE: i64 = 1000;

/// The pod resources quota tracks by name (upstream `podResources`), besides the
/// `hugepages-` and extended-resource ones.
const POD_RESOURCES: [&str; 12] = [
    "pods",
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.storage",
];

/// The Service resources (upstream `serviceResources`).
const SERVICE_RESOURCES: [&str; 4] = [
    "services",
    "count/services",
    "services.loadbalancers",
    "services.nodeports",
];

/// The legacy object-count names and the `<resource>` they count (upstream's
/// `ResourceConfigMaps`, ...; `pods`, `services` and `persistentvolumeclaims` have
/// evaluators of their own).
pub(crate) const LEGACY_COUNTS: [(&str, &str); 4] = [
    ("configmaps", "configmaps"),
    ("secrets", "secrets"),
    ("replicationcontrollers", "replicationcontrollers"),
    ("resourcequotas", "resourcequotas"),
];

/// Which evaluator tracks a quota resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Family {
    /// Pods: counts and compute resources, subject to the quota's scopes.
    Pods,
    /// Services: counts, load balancers, node ports.
    Services,
    /// PersistentVolumeClaims: counts and storage, per StorageClass too.
    Claims,
    /// Objects of `<resource>` or `<resource>.<group>` (as in `count/...`).
    Count(String),
}

/// The evaluator of quota resource `name`; `None` for a resource no evaluator tracks
/// (its usage is left as it was, as upstream).
pub(crate) fn family(name: &str) -> Option<Family> {
    if name == "requests.storage"
        || name == "persistentvolumeclaims"
        || name == "count/persistentvolumeclaims"
        || name.contains(STORAGE_CLASS_SUFFIX)
    {
        return Some(Family::Claims);
    }
    if POD_RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
        || name
            .strip_prefix("requests.")
            .is_some_and(is_extended_resource)
    {
        return Some(Family::Pods);
    }
    if SERVICE_RESOURCES.contains(&name) {
        return Some(Family::Services);
    }
    if let Some((_, resource)) = LEGACY_COUNTS.iter().find(|(n, _)| *n == name) {
        return Some(Family::Count((*resource).to_owned()));
    }
    let counted = name.strip_prefix(COUNT_PREFIX)?;
    (!counted.is_empty()).then(|| Family::Count(counted.to_owned()))
}

/// True for an extended resource (upstream `IsExtendedResourceName`): a qualified name
/// outside the `kubernetes.io` domain, not itself `requests.`-prefixed.
fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// True when the pod counts toward compute quota (upstream `QuotaV1Pod`): not
/// `Succeeded` or `Failed`, and not still terminating past its deletion grace period.
pub(crate) fn quota_pod(pod: &Pod, now: Timestamp) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    if let (Some(deleted), Some(grace)) = (
        pod.metadata.deletion_timestamp.as_ref(),
        pod.metadata.deletion_grace_period_seconds,
    ) && let Ok(until) = deleted.0.checked_add(SignedDuration::from_secs(grace))
        && now > until
    {
        return false;
    }
    true
}

/// Adds `amount` to `usage[name]`.
fn add(usage: &mut Usage, name: &str, amount: i64) {
    let e = usage.entry(name.to_owned()).or_default();
    *e = e.saturating_add(amount);
}

/// Thousandths of an amount from the pod helpers (cpu is already in millicores).
fn milli(resource: &str, amount: i64) -> i64 {
    if resource == "cpu" {
        amount
    } else {
        amount.saturating_mul(ONE)
    }
}

/// What a pod charges (upstream `PodUsageFunc`): `count/pods` always; when
/// [`quota_pod`], `pods` and its requests and limits as `cpu`, `requests.cpu`,
/// `limits.cpu` and likewise for memory and ephemeral storage, `hugepages-*` with their
/// `requests.` names, and extended resources as `requests.<name>`.
pub(crate) fn pod_usage(pod: &Pod, now: Timestamp) -> Usage {
    let mut usage = Usage::new();
    add(&mut usage, "count/pods", ONE);
    if !quota_pod(pod, now) {
        return usage;
    }
    add(&mut usage, "pods", ONE);
    let opts = PodResourcesOptions::default();
    let requests = pod_requests(pod, &opts);
    let limits = pod_limits(pod, &opts, &mut |_, _| {});
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(r) = requests.get(resource) {
            add(&mut usage, resource, milli(resource, *r));
            add(
                &mut usage,
                &format!("requests.{resource}"),
                milli(resource, *r),
            );
        }
        if let Some(l) = limits.get(resource) {
            add(
                &mut usage,
                &format!("limits.{resource}"),
                milli(resource, *l),
            );
        }
    }
    for (resource, r) in &requests {
        if resource.starts_with("hugepages-") {
            add(&mut usage, resource, milli(resource, *r));
            add(
                &mut usage,
                &format!("requests.{resource}"),
                milli(resource, *r),
            );
        } else if is_extended_resource(resource) {
            add(
                &mut usage,
                &format!("requests.{resource}"),
                milli(resource, *r),
            );
        }
    }
    usage
}

/// What a Service charges (upstream `ServiceUsageFunc`): `services` and
/// `count/services`; a `LoadBalancer` one `services.loadbalancers`; a `NodePort` one its
/// ports as `services.nodeports`, a `LoadBalancer` one too unless it does not allocate
/// node ports (then the ports that have one).
pub(crate) fn service_usage(svc: &Service) -> Usage {
    let mut usage = Usage::new();
    add(&mut usage, "services", ONE);
    add(&mut usage, "count/services", ONE);
    let spec = svc.spec.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let all = i64::try_from(ports.len()).unwrap_or(i64::MAX);
    match spec.type_.as_deref() {
        Some("NodePort") => add(&mut usage, "services.nodeports", all.saturating_mul(ONE)),
        Some("LoadBalancer") => {
            add(&mut usage, "services.loadbalancers", ONE);
            let node_ports = if spec.allocate_load_balancer_node_ports == Some(false) {
                let n = ports
                    .iter()
                    .filter(|p| p.node_port.unwrap_or(0) != 0)
                    .count();
                i64::try_from(n).unwrap_or(i64::MAX)
            } else {
                all
            };
            add(
                &mut usage,
                "services.nodeports",
                node_ports.saturating_mul(ONE),
            );
        }
        _ => {}
    }
    usage
}

/// The claim's StorageClass (upstream `GetPersistentVolumeClaimClass`): the beta
/// annotation, else `spec.storageClassName`; empty for none.
fn claim_class(pvc: &PersistentVolumeClaim) -> String {
    pvc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .cloned()
        .or_else(|| pvc.spec.as_ref()?.storage_class_name.clone())
        .unwrap_or_default()
}

/// What a claim charges (upstream `pvcEvaluator.Usage`): `persistentvolumeclaims`,
/// `count/persistentvolumeclaims`, `requests.storage` (the larger of the request and
/// the allocated size), and the class's `<class>.storageclass.storage.k8s.io/` versions
/// of the count and the storage.
pub(crate) fn claim_usage(pvc: &PersistentVolumeClaim) -> Usage {
    let mut usage = Usage::new();
    add(&mut usage, "persistentvolumeclaims", ONE);
    add(&mut usage, "count/persistentvolumeclaims", ONE);
    let requested = pvc
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(quantity::value);
    let allocated = pvc
        .status
        .as_ref()
        .and_then(|s| s.allocated_resources.as_ref())
        .and_then(|r| r.get("storage"))
        .map(quantity::value);
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) => Some(r.max(a)),
        (r, a) => r.or(a),
    };
    let class = claim_class(pvc);
    if !class.is_empty() {
        add(
            &mut usage,
            &format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            ONE,
        );
    }
    if let Some(bytes) = storage {
        add(&mut usage, "requests.storage", milli("storage", bytes));
        if !class.is_empty() {
            add(
                &mut usage,
                &format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                milli("storage", bytes),
            );
        }
    }
    usage
}

/// A quota's scopes as selector requirements (upstream `getScopeSelectorsFromQuota`):
/// each of `spec.scopes` as `Exists`, then `spec.scopeSelector`'s expressions.
pub(crate) fn scope_requirements(
    scopes: Option<&[String]>,
    selector: Option<&[ScopedResourceSelectorRequirement]>,
) -> Vec<ScopedResourceSelectorRequirement> {
    let mut all: Vec<ScopedResourceSelectorRequirement> = scopes
        .unwrap_or_default()
        .iter()
        .map(|s| ScopedResourceSelectorRequirement {
            scope_name: s.clone(),
            operator: "Exists".to_owned(),
            values: None,
        })
        .collect();
    all.extend(selector.unwrap_or_default().iter().cloned());
    all
}

/// True when the pod has a non-negative `activeDeadlineSeconds` (upstream
/// `isTerminating`).
fn is_terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|d| d >= 0)
}

/// True when the pod's affinity names other namespaces (upstream
/// `usesCrossNamespacePodAffinity`).
fn uses_cross_namespace_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let cross = |ns: Option<&Vec<String>>, sel: bool| ns.is_some_and(|n| !n.is_empty()) || sel;
    let pa = affinity.pod_affinity.as_ref();
    let anti = affinity.pod_anti_affinity.as_ref();
    let required = pa
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
        .chain(
            anti.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten(),
        );
    let preferred = pa
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
        .chain(
            anti.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten(),
        )
        .map(|w| &w.pod_affinity_term);
    required
        .chain(preferred)
        .any(|t| cross(t.namespaces.as_ref(), t.namespace_selector.is_some()))
}

/// True when the pod matches one scope requirement (upstream `podMatchesScopeFunc`):
/// `Terminating`, `NotTerminating`, `BestEffort`, `NotBestEffort`,
/// `CrossNamespacePodAffinity` with `Exists` (`DoesNotExist` negates), and
/// `PriorityClass` with `In`, `NotIn`, `Exists`, `DoesNotExist` against the pod's
/// `priorityClassName` (a pod without one has no value: `NotIn` and `DoesNotExist`
/// match it). An unknown scope or operator matches nothing.
pub(crate) fn pod_matches_scope(pod: &Pod, req: &ScopedResourceSelectorRequirement) -> bool {
    let predicate = match req.scope_name.as_str() {
        "Terminating" => is_terminating(pod),
        "NotTerminating" => !is_terminating(pod),
        "BestEffort" => pod_qos(pod) == QosClass::BestEffort,
        "NotBestEffort" => pod_qos(pod) != QosClass::BestEffort,
        "CrossNamespacePodAffinity" => uses_cross_namespace_affinity(pod),
        "PriorityClass" => {
            let class = pod
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref())
                .filter(|c| !c.is_empty());
            let values = req.values.clone().unwrap_or_default();
            let listed = class.is_some_and(|c| values.iter().any(|v| v == c));
            return match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                "Exists" => class.is_some(),
                "DoesNotExist" => class.is_none(),
                _ => false,
            };
        }
        _ => return false,
    };
    match req.operator.as_str() {
        "Exists" => predicate,
        "DoesNotExist" => !predicate,
        _ => false,
    }
}

/// The objects of one namespace a quota is computed over.
#[derive(Debug, Default)]
pub(crate) struct Objects<'a> {
    /// The namespace's pods.
    pub(crate) pods: Vec<&'a Pod>,
    /// The namespace's Services.
    pub(crate) services: Vec<&'a Service>,
    /// The namespace's PersistentVolumeClaims.
    pub(crate) claims: Vec<&'a PersistentVolumeClaim>,
    /// Object counts by `<resource>` / `<resource>.<group>`, for every
    /// [`Family::Count`] the quota names.
    pub(crate) counts: BTreeMap<String, i64>,
}

/// The usage of every resource of `hard` an evaluator tracks (upstream
/// `CalculateUsage`), in thousandths: pods are counted only when they match every scope
/// requirement; a resource nothing uses is 0; a count missing from `objects.counts` and
/// resources no evaluator knows are left out.
pub(crate) fn calculate_usage<'a>(
    hard: impl IntoIterator<Item = &'a String>,
    scopes: &[ScopedResourceSelectorRequirement],
    objects: &Objects<'_>,
    now: Timestamp,
) -> Usage {
    let mut wanted: BTreeMap<&str, Family> = BTreeMap::new();
    for name in hard {
        if let Some(f) = family(name) {
            wanted.insert(name.as_str(), f);
        }
    }
    let needs = |f: &Family| wanted.values().any(|w| w == f);
    let mut total = Usage::new();
    if needs(&Family::Pods) {
        for pod in &objects.pods {
            if scopes.iter().all(|s| pod_matches_scope(pod, s)) {
                for (k, v) in pod_usage(pod, now) {
                    add(&mut total, &k, v);
                }
            }
        }
    }
    if needs(&Family::Services) {
        for svc in &objects.services {
            for (k, v) in service_usage(svc) {
                add(&mut total, &k, v);
            }
        }
    }
    if needs(&Family::Claims) {
        for pvc in &objects.claims {
            for (k, v) in claim_usage(pvc) {
                add(&mut total, &k, v);
            }
        }
    }
    let mut used = Usage::new();
    for (name, f) in wanted {
        let amount = match f {
            Family::Count(resource) => match objects.counts.get(&resource) {
                Some(n) => n.saturating_mul(ONE),
                None => continue,
            },
            _ => total.get(name).copied().unwrap_or(0),
        };
        used.insert(name.to_owned(), amount);
    }
    used
}

/// True for resources measured in bytes, printed in binary SI when whole multiples of
/// 1024.
fn is_bytes(name: &str) -> bool {
    name.ends_with("memory") || name.ends_with("storage") || name.contains("hugepages-")
}

/// `amount` thousandths of resource `name` as a canonical quantity: cpu and counts in
/// decimal SI (`1500m`, `2`, `10`), bytes in binary SI when a whole multiple of 1024
/// (`256Mi`), else decimal SI (`1G`). Upstream keeps the format of the first quantity
/// added; whole multiples of 1024 bytes almost always come from binary suffixes.
pub(crate) fn format_amount(name: &str, amount: i64) -> Quantity {
    let bytes = is_bytes(name);
    let binary = bytes && amount % (1024 * ONE) == 0;
    Quantity(quantity::format_milli(amount, binary))
}

/// Thousandths of `q` (0 when malformed), to compare quantities semantically.
pub(crate) fn amount_of(q: &Quantity) -> i64 {
    quantity::milli_value(q)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, PersistentVolumeClaimSpec, PodSpec, PodStatus, ResourceRequirements,
        ServicePort, ServiceSpec, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    fn list(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        (!pairs.is_empty()).then(|| pairs.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect())
    }

    fn pod(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: list(requests),
                        limits: list(limits),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn hard(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn formatted(usage: &Usage) -> BTreeMap<String, String> {
        usage
            .iter()
            .map(|(k, v)| (k.clone(), format_amount(k, *v).0))
            .collect()
    }

    fn expect(usage: &Usage, pairs: &[(&str, &str)]) {
        let want: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(formatted(usage), want);
    }

    #[test]
    fn compute_resources_of_live_pods() {
        let a = pod(
            &[
                ("cpu", "500m"),
                ("memory", "128Mi"),
                ("ephemeral-storage", "1Gi"),
            ],
            &[("cpu", "1"), ("memory", "256Mi")],
        );
        let b = pod(&[("cpu", "700m"), ("memory", "1G")], &[]);
        let mut done = pod(&[("cpu", "4")], &[]);
        done.status = Some(PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        // Deleted with a 30 s grace a minute ago: past its grace, not charged.
        let mut stuck = pod(&[("cpu", "4")], &[]);
        stuck.metadata.deletion_timestamp = Some(Time("2025-12-31T23:59:00Z".parse().unwrap()));
        stuck.metadata.deletion_grace_period_seconds = Some(30);
        // Within its grace: still charged.
        let mut leaving = pod(&[("cpu", "100m")], &[]);
        leaving.metadata.deletion_timestamp = Some(Time("2025-12-31T23:59:50Z".parse().unwrap()));
        leaving.metadata.deletion_grace_period_seconds = Some(30);
        let objects = Objects {
            pods: vec![&a, &b, &done, &stuck, &leaving],
            ..Default::default()
        };
        let used = calculate_usage(
            &hard(&[
                "pods",
                "count/pods",
                "requests.cpu",
                "cpu",
                "limits.cpu",
                "requests.memory",
                "memory",
                "limits.memory",
                "requests.ephemeral-storage",
                "limits.ephemeral-storage",
                "services",
                "bogus.example.com/thing",
            ]),
            &[],
            &objects,
            now(),
        );
        expect(
            &used,
            &[
                ("pods", "3"),
                ("count/pods", "5"),
                ("requests.cpu", "1300m"),
                ("cpu", "1300m"),
                ("limits.cpu", "1"),
                // 128Mi + 1G is no whole multiple of 1024 bytes: decimal.
                ("requests.memory", "1134217728"),
                ("memory", "1134217728"),
                ("limits.memory", "256Mi"),
                ("requests.ephemeral-storage", "1Gi"),
                ("limits.ephemeral-storage", "0"),
                ("services", "0"),
            ],
        );
    }

    #[test]
    fn hugepages_and_extended_resources() {
        let p = pod(
            &[("hugepages-2Mi", "4Mi"), ("example.com/gpu", "2")],
            &[("hugepages-2Mi", "4Mi"), ("example.com/gpu", "2")],
        );
        let objects = Objects {
            pods: vec![&p],
            ..Default::default()
        };
        let used = calculate_usage(
            &hard(&[
                "requests.hugepages-2Mi",
                "hugepages-2Mi",
                "requests.example.com/gpu",
            ]),
            &[],
            &objects,
            now(),
        );
        expect(
            &used,
            &[
                ("requests.hugepages-2Mi", "4Mi"),
                ("hugepages-2Mi", "4Mi"),
                ("requests.example.com/gpu", "2"),
            ],
        );
    }

    fn req(scope: &str, op: &str, values: &[&str]) -> ScopedResourceSelectorRequirement {
        ScopedResourceSelectorRequirement {
            scope_name: scope.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }
    }

    #[test]
    fn scopes_select_pods() {
        let best_effort = pod(&[], &[]);
        let burstable = pod(&[("cpu", "100m")], &[]);
        let mut deadline = pod(&[("cpu", "200m")], &[]);
        deadline.spec.as_mut().unwrap().active_deadline_seconds = Some(60);
        let mut high = pod(&[("cpu", "300m")], &[]);
        high.spec.as_mut().unwrap().priority_class_name = Some("high".into());
        let objects = Objects {
            pods: vec![&best_effort, &burstable, &deadline, &high],
            ..Default::default()
        };
        let usage = |scopes: Vec<ScopedResourceSelectorRequirement>| {
            let u = calculate_usage(&hard(&["pods", "requests.cpu"]), &scopes, &objects, now());
            formatted(&u).into_values().collect::<Vec<_>>()
        };
        // [pods, requests.cpu]
        assert_eq!(usage(vec![]), ["4", "600m"]);
        let from_scopes = |s: &[&str]| {
            let names: Vec<String> = s.iter().map(|x| (*x).to_owned()).collect();
            scope_requirements(Some(&names), None)
        };
        assert_eq!(usage(from_scopes(&["BestEffort"])), ["1", "0"]);
        assert_eq!(usage(from_scopes(&["NotBestEffort"])), ["3", "600m"]);
        assert_eq!(usage(from_scopes(&["Terminating"])), ["1", "200m"]);
        assert_eq!(usage(from_scopes(&["NotTerminating"])), ["3", "400m"]);
        assert_eq!(
            usage(from_scopes(&["NotTerminating", "NotBestEffort"])),
            ["2", "400m"]
        );
        assert_eq!(
            usage(vec![req("PriorityClass", "In", &["high", "low"])]),
            ["1", "300m"]
        );
        assert_eq!(
            usage(vec![req("PriorityClass", "NotIn", &["high"])]),
            ["3", "300m"]
        );
        assert_eq!(
            usage(vec![req("PriorityClass", "Exists", &[])]),
            ["1", "300m"]
        );
        assert_eq!(
            usage(vec![req("PriorityClass", "DoesNotExist", &[])]),
            ["3", "300m"]
        );
        // spec.scopes and scopeSelector together: all must match.
        let both = scope_requirements(
            Some(&["NotTerminating".to_owned()]),
            Some(&[req("PriorityClass", "NotIn", &["high"])]),
        );
        assert_eq!(usage(both), ["2", "100m"]);
    }

    #[test]
    fn services_and_claims() {
        let svc = |type_: &str, ports: usize, allocate: Option<bool>| Service {
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                allocate_load_balancer_node_ports: allocate,
                ports: Some(
                    (0..ports)
                        .map(|i| ServicePort {
                            port: 80 + i32::try_from(i).unwrap(),
                            node_port: (i == 0).then_some(30000),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (a, b, c, d) = (
            svc("ClusterIP", 1, None),
            svc("NodePort", 2, None),
            svc("LoadBalancer", 3, None),
            svc("LoadBalancer", 3, Some(false)),
        );
        let claim =
            |class: Option<&str>, size: &str, allocated: Option<&str>| PersistentVolumeClaim {
                spec: Some(PersistentVolumeClaimSpec {
                    storage_class_name: class.map(Into::into),
                    resources: Some(VolumeResourceRequirements {
                        requests: list(&[("storage", size)]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                status: allocated.map(|a| {
                    k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
                        allocated_resources: list(&[("storage", a)]),
                        ..Default::default()
                    }
                }),
                ..Default::default()
            };
        let (x, y, z) = (
            claim(Some("gold"), "1Gi", None),
            claim(Some("gold"), "1Gi", Some("2Gi")),
            claim(None, "500Mi", None),
        );
        let objects = Objects {
            services: vec![&a, &b, &c, &d],
            claims: vec![&x, &y, &z],
            counts: [("configmaps", 3), ("deployments.apps", 2)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            ..Default::default()
        };
        let used = calculate_usage(
            &hard(&[
                "services",
                "count/services",
                "services.loadbalancers",
                "services.nodeports",
                "persistentvolumeclaims",
                "requests.storage",
                "gold.storageclass.storage.k8s.io/requests.storage",
                "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
                "silver.storageclass.storage.k8s.io/requests.storage",
                "configmaps",
                "count/configmaps",
                "count/deployments.apps",
                "count/widgets.example.com",
            ]),
            &[],
            &objects,
            now(),
        );
        expect(
            &used,
            &[
                ("services", "4"),
                ("count/services", "4"),
                ("services.loadbalancers", "2"),
                // 2 + 3 + the one port of the last with a node port.
                ("services.nodeports", "6"),
                ("persistentvolumeclaims", "3"),
                ("requests.storage", "3572Mi"),
                ("gold.storageclass.storage.k8s.io/requests.storage", "3Gi"),
                (
                    "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
                    "2",
                ),
                ("silver.storageclass.storage.k8s.io/requests.storage", "0"),
                ("configmaps", "3"),
                ("count/configmaps", "3"),
                ("count/deployments.apps", "2"),
            ],
        );
    }

    #[test]
    fn families_of_resource_names() {
        assert_eq!(family("pods"), Some(Family::Pods));
        assert_eq!(family("requests.cpu"), Some(Family::Pods));
        assert_eq!(family("requests.example.com/gpu"), Some(Family::Pods));
        assert_eq!(family("requests.storage"), Some(Family::Claims));
        assert_eq!(family("services.nodeports"), Some(Family::Services));
        assert_eq!(family("secrets"), Some(Family::Count("secrets".into())));
        assert_eq!(
            family("count/jobs.batch"),
            Some(Family::Count("jobs.batch".into()))
        );
        assert_eq!(family("count/"), None);
        assert_eq!(family("example.com/foo"), None);
    }
}
