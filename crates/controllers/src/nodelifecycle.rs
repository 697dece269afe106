//! The node lifecycle controller (upstream `pkg/controller/nodelifecycle`) and the taint
//! eviction controller (upstream `pkg/controller/tainteviction`, the former taint
//! manager).
//!
//! - **Node health.** Every `--node-monitor-period` (5 s) each Node's last heartbeat is
//!   checked: a change of its Lease's `renewTime` in `kube-node-lease` or of its Ready
//!   condition's `lastHeartbeatTime`, as this controller observed them. A Node silent for
//!   longer than `--node-monitor-grace-period` (50 s, upstream's since 1.32) gets its
//!   Ready, MemoryPressure, DiskPressure and PIDPressure conditions set to Unknown
//!   (`NodeStatusUnknown`, "Kubelet stopped posting node status.") and the pods on it
//!   marked not Ready.
//! - **Taints** (upstream `TaintNodesByCondition` and `doNoExecuteTaintingPass`): Ready
//!   False gives `node.kubernetes.io/not-ready`, Unknown `node.kubernetes.io/unreachable`,
//!   both as NoExecute and as NoSchedule; MemoryPressure, DiskPressure, PIDPressure and
//!   NetworkUnavailable True give their NoSchedule taints, and `spec.unschedulable`
//!   (`kubectl cordon`, `drain`) `node.kubernetes.io/unschedulable`. Other taints are
//!   kept; a taint that stays keeps its `timeAdded`.
//! - **Taint eviction.** A pod bound to a Node with a NoExecute taint it does not
//!   tolerate is deleted at once; one that tolerates all of them with
//!   `tolerationSeconds` is deleted that long after the taint's `timeAdded` (the
//!   shortest of its tolerations); one tolerating without a limit stays. Before the
//!   delete the pod gets the `DisruptionTarget` condition (`DeletionByTaintManager`);
//!   the event `TaintManagerEviction` ("Marking for deletion Pod ns/name") is recorded.
//!
//! Most pods tolerate `not-ready` and `unreachable` for 300 s: the API server's
//! DefaultTolerationSeconds admission plugin adds those tolerations. Not here: the
//! zone-aware rate limiting of taint additions (`--node-eviction-rate`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use skiff_api::core::scheduling_predicates::taints::{
    TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE, tolerates_taint,
};
use skiff_client::cache::{SharedInformer, SharedInformerFactory};
use skiff_client::events::{EventDetails, EventRecorder, reference};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::wait_for_cache_sync;

/// The controller's name (`--controllers`).
pub const NAME: &str = "node-lifecycle-controller";
/// The taint eviction controller's name (`--controllers`, its events).
pub const TAINT_EVICTION_NAME: &str = "taint-eviction-controller";
/// The taint of a Node whose Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint of a Node whose Ready condition is Unknown.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint of a cordoned Node.
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// The namespace of the kubelets' Leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The condition-driven NoSchedule taints (upstream `nodeConditionToTaintKeyStatusMap`).
const CONDITION_TAINTS: &[(&str, &str, &str)] = &[
    ("Ready", "False", TAINT_NOT_READY),
    ("Ready", "Unknown", TAINT_UNREACHABLE),
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
];

/// Timing of the controller (the flags).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// `--node-monitor-period` (5 s).
    pub monitor_period: Duration,
    /// `--node-monitor-grace-period` (50 s).
    pub grace_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            monitor_period: Duration::from_secs(5),
            grace_period: Duration::from_secs(50),
        }
    }
}

/// What was last seen of a Node's heartbeats, and when it changed.
#[derive(Debug, Clone)]
struct Health {
    heartbeat: Option<Timestamp>,
    lease_renew: Option<Timestamp>,
    probed: Instant,
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn taint(key: &str, effect: &str, now: Option<Timestamp>) -> Taint {
    Taint {
        key: key.to_owned(),
        value: None,
        effect: effect.to_owned(),
        time_added: now.map(Time),
    }
}

/// The taints this controller manages that `node` should carry, from its conditions and
/// `spec.unschedulable` (without `timeAdded`).
fn desired_taints(node: &Node) -> Vec<Taint> {
    let mut out = Vec::new();
    for (type_, status, key) in CONDITION_TAINTS {
        if condition(node, type_).is_some_and(|c| c.status == *status) {
            out.push(taint(key, TAINT_EFFECT_NO_SCHEDULE, None));
        }
    }
    match condition(node, "Ready").map(|c| c.status.as_str()) {
        Some("False") => out.push(taint(TAINT_NOT_READY, TAINT_EFFECT_NO_EXECUTE, None)),
        Some("Unknown") => out.push(taint(TAINT_UNREACHABLE, TAINT_EFFECT_NO_EXECUTE, None)),
        _ => {}
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        out.push(taint(TAINT_UNSCHEDULABLE, TAINT_EFFECT_NO_SCHEDULE, None));
    }
    out
}

fn managed(t: &Taint) -> bool {
    t.key == TAINT_UNSCHEDULABLE || CONDITION_TAINTS.iter().any(|(_, _, k)| *k == t.key)
}

/// `current` with the managed taints replaced by `desired`: other taints kept in place,
/// a managed taint that stays keeps its `timeAdded`, a new one gets `now`. None when
/// nothing changes.
fn reconcile_taints(current: &[Taint], desired: &[Taint], now: Timestamp) -> Option<Vec<Taint>> {
    let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| !managed(t) || desired.iter().any(|d| same(d, t)))
        .cloned()
        .collect();
    for d in desired {
        if !out.iter().any(|t| same(t, d)) {
            let mut t = d.clone();
            if t.effect == TAINT_EFFECT_NO_EXECUTE {
                t.time_added = Some(Time(now));
            }
            out.push(t);
        }
    }
    (out.len() != current.len() || out.iter().zip(current).any(|(a, b)| a != b)).then_some(out)
}

/// When a pod with `tolerations` must go from a Node with the NoExecute `taints`
/// (upstream `getMinTolerationTime` over the matching tolerations): `Some(now)` when one
/// is not tolerated, the earliest `timeAdded + tolerationSeconds`, or None to stay.
fn eviction_time(
    tolerations: &[Toleration],
    taints: &[Taint],
    now: Timestamp,
) -> Option<Timestamp> {
    let mut due: Option<Timestamp> = None;
    for taint in taints
        .iter()
        .filter(|t| t.effect == TAINT_EFFECT_NO_EXECUTE)
    {
        let matching: Vec<&Toleration> = tolerations
            .iter()
            .filter(|t| tolerates_taint(t, taint))
            .collect();
        if matching.is_empty() {
            return Some(now);
        }
        // A matching toleration without a limit keeps the pod for this taint.
        if matching.iter().any(|t| t.toleration_seconds.is_none()) {
            continue;
        }
        let seconds = matching
            .iter()
            .filter_map(|t| t.toleration_seconds)
            .min()
            .unwrap_or(0)
            .max(0);
        let added = taint.time_added.as_ref().map_or(now, |t| t.0);
        let at = added
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds))
            .unwrap_or(now);
        due = Some(due.map_or(at, |d| d.min(at)));
    }
    due
}

/// The node lifecycle and taint eviction controllers; see the module doc.
pub struct NodeLifecycleController {
    client: kube::Client,
    nodes: Arc<SharedInformer<Node>>,
    leases: Arc<SharedInformer<Lease>>,
    pods: Arc<SharedInformer<Pod>>,
    recorder: EventRecorder,
    timing: Timing,
    health: Mutex<HashMap<String, Health>>,
    /// Whether taint eviction runs (`taint-eviction-controller` enabled).
    evict: bool,
}

impl std::fmt::Debug for NodeLifecycleController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleController")
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

impl NodeLifecycleController {
    /// The controller over the factory's Node, Lease and Pod informers; `evict` runs the
    /// taint eviction controller with it.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        timing: Timing,
        evict: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            nodes: factory.informer::<Node>(),
            leases: factory.informer::<Lease>(),
            pods: factory.informer::<Pod>(),
            recorder,
            timing,
            health: Mutex::new(HashMap::new()),
            evict,
        })
    }

    /// Waits for the informers, then checks Nodes every monitor period and evicts every
    /// second, until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if !wait_for_cache_sync(&cancel, &[&*self.nodes, &*self.leases, &*self.pods]).await {
            return;
        }
        let mut monitor = tokio::time::interval(self.timing.monitor_period);
        let mut evict = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = monitor.tick() => {
                    if let Err(e) = self.monitor_node_health().await {
                        tracing::warn!(controller = NAME, error = %e, "monitoring node health");
                    }
                }
                _ = evict.tick(), if self.evict => {
                    if let Err(e) = self.evict_pods().await {
                        tracing::warn!(controller = TAINT_EVICTION_NAME, error = %e, "evicting pods");
                    }
                }
            }
        }
    }

    /// One pass over the Nodes (upstream `monitorNodeHealth` and the tainting passes).
    async fn monitor_node_health(&self) -> Result<(), Error> {
        let now_instant = Instant::now();
        let mut first_err = None;
        let nodes = self.nodes.store().list();
        let stale: Vec<String> = {
            let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
            health.retain(|name, _| {
                nodes
                    .iter()
                    .any(|n| n.metadata.name.as_deref() == Some(name))
            });
            let mut stale = Vec::new();
            for node in &nodes {
                let name = node.metadata.name.clone().unwrap_or_default();
                let heartbeat = condition(node, "Ready")
                    .and_then(|c| c.last_heartbeat_time.as_ref())
                    .map(|t| t.0);
                let lease_renew = self
                    .leases
                    .store()
                    .get(&format!("{NODE_LEASE_NAMESPACE}/{name}"))
                    .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
                let entry = health.entry(name.clone()).or_insert_with(|| Health {
                    heartbeat,
                    lease_renew,
                    probed: now_instant,
                });
                if entry.heartbeat != heartbeat || entry.lease_renew != lease_renew {
                    entry.heartbeat = heartbeat;
                    entry.lease_renew = lease_renew;
                    entry.probed = now_instant;
                }
                let ready_unknown = condition(node, "Ready").is_some_and(|c| c.status == "Unknown");
                if now_instant.duration_since(entry.probed) > self.timing.grace_period
                    && !ready_unknown
                {
                    stale.push(name);
                }
            }
            stale
        };
        for name in stale {
            tracing::info!(node = %name, grace = ?self.timing.grace_period, "node stopped posting status; marking it Unknown");
            if let Err(e) = self.mark_unknown(&name).await {
                first_err.get_or_insert(e);
            }
        }
        let now = Timestamp::now();
        for node in self.nodes.store().list() {
            let current = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            if let Some(taints) = reconcile_taints(&current, &desired_taints(&node), now)
                && let Err(e) = self.write_taints(&node, taints).await
            {
                first_err.get_or_insert(e);
            }
            if condition(&node, "Ready").is_some_and(|c| c.status != "True")
                && let Err(e) = self.mark_pods_not_ready(&node).await
            {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Sets the kubelet's conditions to Unknown (upstream `tryUpdateNodeHealth`).
    async fn mark_unknown(&self, name: &str) -> Result<(), Error> {
        let now = Timestamp::now().to_string();
        let conditions: Vec<serde_json::Value> =
            ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
                .iter()
                .map(|type_| {
                    json!({
                        "type": type_, "status": "Unknown", "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status.",
                        "lastTransitionTime": now,
                    })
                })
                .collect();
        let api: Api<Node> = Api::all(self.client.clone());
        match api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Strategic(json!({"status": {"conditions": conditions}})),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces the Node's taints, guarded by its resourceVersion (a concurrent change
    /// conflicts and the next pass tries again).
    async fn write_taints(&self, node: &Node, taints: Vec<Taint>) -> Result<(), Error> {
        let name = node.metadata.name.as_deref().unwrap_or("");
        tracing::info!(node = name, taints = ?taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(), "updating the node's taints");
        let api: Api<Node> = Api::all(self.client.clone());
        // No taints left: the field goes, as a Go client's omitempty list would.
        let taints = if taints.is_empty() {
            serde_json::Value::Null
        } else {
            json!(taints)
        };
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets Ready False on the pods of a Node that is not Ready (upstream
    /// `MarkPodsNotReady`).
    async fn mark_pods_not_ready(&self, node: &Node) -> Result<(), Error> {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let now = Timestamp::now().to_string();
        for pod in self.pods.store().list() {
            if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(name) {
                continue;
            }
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if !ready {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(
                self.client.clone(),
                pod.metadata.namespace.as_deref().unwrap_or(""),
            );
            let patch = json!({"status": {"conditions": [{
                "type": "Ready", "status": "False", "lastTransitionTime": now,
            }]}});
            match api
                .patch_status(
                    pod.metadata.name.as_deref().unwrap_or(""),
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await
            {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Deletes the pods whose NoExecute taints have run out (the taint eviction
    /// controller's pass).
    async fn evict_pods(&self) -> Result<(), Error> {
        let now = Timestamp::now();
        let tainted: HashMap<String, Vec<Taint>> = self
            .nodes
            .store()
            .list()
            .iter()
            .filter_map(|n| {
                let taints: Vec<Taint> = n
                    .spec
                    .as_ref()?
                    .taints
                    .iter()
                    .flatten()
                    .filter(|t| t.effect == TAINT_EFFECT_NO_EXECUTE)
                    .cloned()
                    .collect();
                (!taints.is_empty()).then(|| (n.metadata.name.clone().unwrap_or_default(), taints))
            })
            .collect();
        if tainted.is_empty() {
            return Ok(());
        }
        let mut first_err = None;
        for pod in self.pods.store().list() {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(taints) = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .and_then(|n| tainted.get(n))
            else {
                continue;
            };
            let tolerations = pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.clone())
                .unwrap_or_default();
            if eviction_time(&tolerations, taints, now).is_some_and(|at| at <= now)
                && let Err(e) = self.evict(&pod).await
            {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    async fn evict(&self, pod: &Pod) -> Result<(), Error> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        tracing::info!(pod = %format!("{ns}/{name}"), "evicting a pod from a NoExecute-tainted node");
        self.recorder.eventf(
            reference(pod),
            None,
            EventDetails {
                type_: "Normal",
                reason: "TaintManagerEviction",
                action: "Delete",
                note: &format!("Marking for deletion Pod {ns}/{name}"),
            },
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": Timestamp::now().to_string(),
        }]}});
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "adding the DisruptionTarget condition");
        }
        let params = DeleteParams {
            preconditions: pod
                .metadata
                .uid
                .clone()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(conditions: serde_json::Value, unschedulable: bool, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"unschedulable": unschedulable, "taints": taints},
            "status": {"conditions": conditions},
        }))
        .expect("a node")
    }

    fn keys(taints: &[Taint]) -> Vec<String> {
        taints
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    }

    #[test]
    fn taints_follow_conditions_and_cordon() {
        let n = node(
            json!([{"type": "Ready", "status": "Unknown"}, {"type": "DiskPressure", "status": "True"}]),
            true,
            json!([]),
        );
        assert_eq!(
            keys(&desired_taints(&n)),
            [
                "node.kubernetes.io/unreachable:NoSchedule",
                "node.kubernetes.io/disk-pressure:NoSchedule",
                "node.kubernetes.io/unreachable:NoExecute",
                "node.kubernetes.io/unschedulable:NoSchedule",
            ]
        );
        let ready = node(
            json!([{"type": "Ready", "status": "True"}]),
            false,
            json!([]),
        );
        assert!(desired_taints(&ready).is_empty());
    }

    #[test]
    fn reconcile_keeps_foreign_taints_and_time_added() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().expect("ts");
        let current: Vec<Taint> = serde_json::from_value(json!([
            {"key": "dedicated", "value": "x", "effect": "NoSchedule"},
            {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
            {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"},
        ]))
        .expect("taints");
        let desired = vec![
            taint(TAINT_UNREACHABLE, TAINT_EFFECT_NO_EXECUTE, None),
            taint(TAINT_UNREACHABLE, TAINT_EFFECT_NO_SCHEDULE, None),
        ];
        let out = reconcile_taints(&current, &desired, now).expect("a change");
        assert_eq!(
            keys(&out),
            [
                "dedicated:NoSchedule",
                "node.kubernetes.io/unreachable:NoExecute",
                "node.kubernetes.io/unreachable:NoSchedule",
            ]
        );
        assert_eq!(
            out[1]
                .time_added
                .as_ref()
                .map(|t| t.0.to_string())
                .as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert!(reconcile_taints(&out, &desired, now).is_none());
    }

    #[test]
    fn eviction_waits_for_the_shortest_toleration() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().expect("ts");
        let taints: Vec<Taint> = serde_json::from_value(json!([
            {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
        ]))
        .expect("taints");
        let tol = |v: serde_json::Value| -> Vec<Toleration> {
            serde_json::from_value(v).expect("tolerations")
        };
        assert_eq!(eviction_time(&[], &taints, now), Some(now));
        let forever =
            tol(json!([{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]));
        assert_eq!(eviction_time(&forever, &taints, now), None);
        let limited = tol(json!([
            {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"operator": "Exists", "tolerationSeconds": 30},
        ]));
        assert_eq!(
            eviction_time(&limited, &taints, now)
                .map(|t| t.to_string())
                .as_deref(),
            Some("2026-01-01T00:00:30Z")
        );
    }
}
