//! DefaultPreemption (upstream `plugins/defaultpreemption/default_preemption.go`,
//! v1.33): the PostFilter plugin that, when no node fits a pod, evicts lower-priority
//! pods from one node so that the pod fits there, through the generic
//! [`Evaluator`](crate::framework::preemption::Evaluator).
//!
//! On a node, every lower-priority pod is removed; when the pod then fits, the removed
//! pods are put back one by one, most important first (those whose eviction would
//! violate a PodDisruptionBudget before the others), and those that make the pod no
//! longer fit are the victims.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use skiff_api::selector::LabelSelector;

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ClusterEventWithHint, NodeToStatus, Plugin, PostFilterPlugin, PostFilterResult,
};
use crate::framework::preemption::{Evaluator, Interface, importance_order};
use crate::framework::runtime::{Framework, Handle};
use crate::framework::snapshot::Snapshot;
use crate::framework::status::{Code, Status};
use crate::framework::types::{NodeInfo, PodInfo, pod_priority};

/// The plugin's name.
pub const NAME: &str = "DefaultPreemption";

/// The status of a node without lower-priority pods.
pub const NO_VICTIMS_FOUND: &str = "No preemption victims found for incoming pod";

/// `DefaultPreemptionArgs` (kubescheduler.config.k8s.io/v1): how many nodes the dry run
/// looks for candidates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultPreemptionArgs {
    /// At least this percentage of the nodes (0..=100; default 10).
    pub min_candidate_nodes_percentage: i32,
    /// At least this number of nodes (>= 0; default 100).
    pub min_candidate_nodes_absolute: i32,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        Self {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct RawArgs {
    api_version: Option<String>,
    kind: Option<String>,
    min_candidate_nodes_percentage: Option<i32>,
    min_candidate_nodes_absolute: Option<i32>,
}

impl DefaultPreemptionArgs {
    /// The args from a profile's `pluginConfig` `args` object, with the v1 defaults
    /// for absent fields, validated. Errors: unknown fields, wrong types, or values
    /// [`validate`](Self::validate) rejects.
    pub fn from_json(args: Option<&serde_json::Value>) -> Result<Self, Error> {
        let mut out = Self::default();
        if let Some(v) = args {
            let raw = RawArgs::deserialize(v)
                .map_err(|e| Error::Config(format!("decoding {NAME} args: {e}")))?;
            if let Some(p) = raw.min_candidate_nodes_percentage {
                out.min_candidate_nodes_percentage = p;
            }
            if let Some(a) = raw.min_candidate_nodes_absolute {
                out.min_candidate_nodes_absolute = a;
            }
        }
        out.validate()?;
        Ok(out)
    }

    /// Upstream's `ValidateDefaultPreemptionArgs`: the percentage in `[0, 100]`, the
    /// absolute number `>= 0`, not both zero; the field errors joined as upstream's
    /// aggregate.
    pub fn validate(&self) -> Result<(), Error> {
        let p = self.min_candidate_nodes_percentage;
        let a = self.min_candidate_nodes_absolute;
        let mut errs = Vec::new();
        if !(0..=100).contains(&p) {
            errs.push(format!(
                "minCandidateNodesPercentage: Invalid value: {p}: not in valid range [0, 100]"
            ));
        }
        if a < 0 {
            errs.push(format!(
                "minCandidateNodesAbsolute: Invalid value: {a}: not in valid range [0, inf)"
            ));
        }
        if p == 0 && a == 0 {
            errs.push(format!(
                "minCandidateNodesPercentage: Invalid value: {p}: cannot be zero at the same time as minCandidateNodesAbsolute"
            ));
            errs.push(format!(
                "minCandidateNodesAbsolute: Invalid value: {a}: cannot be zero at the same time as minCandidateNodesPercentage"
            ));
        }
        match errs.as_slice() {
            [] => Ok(()),
            [one] => Err(Error::Config(one.clone())),
            many => Err(Error::Config(format!("[{}]", many.join(", ")))),
        }
    }
}

/// A random offset in `0..n` (0 when `n` is 0).
fn random_offset(n: usize) -> usize {
    if n == 0 { 0 } else { rand::random_range(0..n) }
}

/// The DefaultPreemption plugin.
pub struct DefaultPreemption {
    handle: Arc<Handle>,
    args: DefaultPreemptionArgs,
    /// The source of the dry run's start offset (random; fixed in tests).
    offset_rand: fn(usize) -> usize,
}

impl std::fmt::Debug for DefaultPreemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultPreemption")
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

/// Builds the plugin (the [`PluginFactory`](crate::framework::runtime::PluginFactory)).
/// Errors: invalid args.
pub fn new(
    args: Option<&serde_json::Value>,
    handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(DefaultPreemption::new(
        DefaultPreemptionArgs::from_json(args)?,
        Arc::clone(handle),
    )))
}

impl DefaultPreemption {
    /// The plugin with `args` over `handle`.
    pub fn new(args: DefaultPreemptionArgs, handle: Arc<Handle>) -> Self {
        Self {
            handle,
            args,
            offset_rand: random_offset,
        }
    }

    /// The number of candidates the dry run looks for among `num_nodes` nodes
    /// (upstream `calculateNumCandidates`): `num_nodes * percentage / 100`, at least the
    /// absolute number, at most `num_nodes`.
    pub fn calculate_num_candidates(&self, num_nodes: usize) -> usize {
        let nodes = i64::try_from(num_nodes).unwrap_or(i64::MAX);
        let n = (nodes.saturating_mul(i64::from(self.args.min_candidate_nodes_percentage)) / 100)
            .max(i64::from(self.args.min_candidate_nodes_absolute))
            .min(nodes);
        usize::try_from(n).unwrap_or(0)
    }
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        NAME
    }

    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }

    fn as_pre_enqueue(&self) -> Option<&dyn crate::framework::interface::PreEnqueuePlugin> {
        Some(self)
    }

    /// No events: the plugin never rejects a pod (it is PostFilter only).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(Vec::new())
    }
}

/// Upstream's PreEnqueue holds a pod while its asynchronous preemption runs; Skiff
/// preempts within the cycle, so no pod is ever held.
impl crate::framework::interface::PreEnqueuePlugin for DefaultPreemption {
    fn pre_enqueue(&self, _pod: &Pod) -> Status {
        Status::success()
    }
}

#[async_trait]
impl PostFilterPlugin for DefaultPreemption {
    async fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        filtered: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        // Upstream counts every run of this PostFilter as an attempt.
        self.handle.observer.preemption_attempt();
        let evaluator = Evaluator {
            plugin_name: NAME,
            handle: &self.handle,
            interface: self,
        };
        let (result, status) = evaluator.preempt(state, pod, snapshot, filtered).await;
        let msg = status.message();
        if msg.is_empty() {
            return (result, status);
        }
        (
            result,
            Status::new(status.code(), [format!("preemption: {msg}")]),
        )
    }
}

/// Whether `p` is terminating because the scheduler preempted it (a deletion timestamp
/// and the `DisruptionTarget` condition True with reason `PreemptionByScheduler`).
fn terminating_by_preemption(p: &Pod) -> bool {
    if p.metadata.deletion_timestamp.is_none() {
        return false;
    }
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == crate::framework::preemption::DISRUPTION_TARGET)
        })
        .is_some_and(|c| {
            c.status == "True"
                && c.reason.as_deref()
                    == Some(crate::framework::preemption::REASON_PREEMPTION_BY_SCHEDULER)
        })
}

/// Splits `pods` (kept in order) into those whose eviction would violate a
/// PodDisruptionBudget and the others (upstream `filterPodsWithPDBViolation`): a pod
/// matches a budget of its namespace whose selector (neither null nor empty) selects
/// its labels; each matching pod not already in `status.disruptedPods` uses one of the
/// budget's `status.disruptionsAllowed`, and violates it once none is left.
pub fn filter_pods_with_pdb_violation(
    pods: &[Arc<PodInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = pdbs
        .iter()
        .map(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.disruptions_allowed)
                .unwrap_or(0)
        })
        .collect();
    let selectors: Vec<Option<LabelSelector>> = pdbs
        .iter()
        .map(|p| {
            LabelSelector::from_meta_option(p.spec.as_ref().and_then(|s| s.selector.as_ref())).ok()
        })
        .collect();
    let mut violating = Vec::new();
    let mut non_violating = Vec::new();
    for info in pods {
        let pod = &info.pod;
        let mut violated = false;
        if let Some(labels) = pod.metadata.labels.as_ref().filter(|l| !l.is_empty()) {
            for (i, pdb) in pdbs.iter().enumerate() {
                if pdb.metadata.namespace != pod.metadata.namespace {
                    continue;
                }
                let Some(Some(selector)) = selectors.get(i) else {
                    continue;
                };
                if selector.is_empty() || !selector.matches(labels) {
                    continue;
                }
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let disrupted = pdb
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(name));
                if disrupted {
                    continue;
                }
                if let Some(a) = allowed.get_mut(i) {
                    *a -= 1;
                    if *a < 0 {
                        violated = true;
                    }
                }
            }
        }
        if violated {
            violating.push(Arc::clone(info));
        } else {
            non_violating.push(Arc::clone(info));
        }
    }
    (violating, non_violating)
}

impl Interface for DefaultPreemption {
    fn get_offset_and_num_candidates(&self, num_nodes: usize) -> (usize, usize) {
        (
            (self.offset_rand)(num_nodes),
            self.calculate_num_candidates(num_nodes),
        )
    }

    fn pod_eligible_to_preempt_others(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        nominated_node_status: &Status,
    ) -> Option<String> {
        let policy = pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref());
        if policy == Some("Never") {
            return Some("not eligible due to preemptionPolicy=Never.".to_owned());
        }
        let nominated = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .unwrap_or_default();
        if nominated.is_empty() {
            return None;
        }
        // A nominated node that Filter found unresolvable: preempt elsewhere.
        if nominated_node_status.code() == Code::UnschedulableAndUnresolvable {
            return None;
        }
        let priority = pod_priority(pod);
        let node = snapshot.get(nominated)?;
        node.pods()
            .iter()
            .any(|p| pod_priority(&p.pod) < priority && terminating_by_preemption(&p.pod))
            .then(|| "not eligible due to a terminating pod on the nominated node.".to_owned())
    }

    fn select_victims_on_node(
        &self,
        framework: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        node_info: &mut NodeInfo,
        pdbs: &[Arc<PodDisruptionBudget>],
    ) -> (Vec<Arc<Pod>>, usize, Status) {
        let remove = |state: &mut CycleState, node_info: &mut NodeInfo, p: &Arc<PodInfo>| {
            if !node_info.remove_pod(p.uid()) {
                return Status::error(format!(
                    "no corresponding pod {} in pods of node {}",
                    p.key(),
                    node_info.name()
                ));
            }
            let s = framework.run_pre_filter_extension_remove_pod(state, &pod.pod, p, node_info);
            if s.is_success() {
                s
            } else {
                Status::error(s.message())
            }
        };
        let add = |state: &mut CycleState, node_info: &mut NodeInfo, p: &Arc<PodInfo>| {
            node_info.add_pod(Arc::clone(p));
            let s = framework.run_pre_filter_extension_add_pod(state, &pod.pod, p, node_info);
            if s.is_success() {
                s
            } else {
                Status::error(s.message())
            }
        };

        // Remove every lower-priority pod and see whether the pod fits then.
        let priority = pod_priority(&pod.pod);
        let mut potential: Vec<Arc<PodInfo>> = node_info
            .pods()
            .iter()
            .filter(|p| pod_priority(&p.pod) < priority)
            .cloned()
            .collect();
        for p in &potential {
            let s = remove(state, node_info, p);
            if !s.is_success() {
                return (Vec::new(), 0, s);
            }
        }
        if potential.is_empty() {
            return (Vec::new(), 0, Status::unresolvable(NO_VICTIMS_FOUND));
        }
        let s = framework.run_filter_plugins_with_nominated_pods(state, pod, node_info);
        if !s.is_success() {
            return (Vec::new(), 0, s);
        }

        // Put back as many as possible, most important first: the PDB-violating ones,
        // then the others.
        let now = Timestamp::now();
        potential.sort_by(|a, b| importance_order(&a.pod, &b.pod, now));
        let (violating, non_violating) = filter_pods_with_pdb_violation(&potential, pdbs);
        let mut victims: Vec<Arc<PodInfo>> = Vec::new();
        let mut num_violating = 0;
        let mut reprieve = |state: &mut CycleState,
                            node_info: &mut NodeInfo,
                            p: &Arc<PodInfo>|
         -> Result<bool, Status> {
            let s = add(state, node_info, p);
            if !s.is_success() {
                return Err(s);
            }
            let fits = framework
                .run_filter_plugins_with_nominated_pods(state, pod, node_info)
                .is_success();
            if !fits {
                let s = remove(state, node_info, p);
                if !s.is_success() {
                    return Err(s);
                }
                victims.push(Arc::clone(p));
            }
            Ok(fits)
        };
        for p in &violating {
            match reprieve(state, node_info, p) {
                Ok(true) => {}
                Ok(false) => num_violating += 1,
                Err(s) => return (Vec::new(), 0, s),
            }
        }
        for p in &non_violating {
            if let Err(s) = reprieve(state, node_info, p) {
                return (Vec::new(), 0, s);
            }
        }
        if !violating.is_empty() && !non_violating.is_empty() {
            victims.sort_by(|a, b| importance_order(&a.pod, &b.pod, now));
        }
        (
            victims.into_iter().map(|p| Arc::clone(&p.pod)).collect(),
            num_violating,
            Status::success(),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector as MetaLabelSelector, ObjectMeta, Time,
    };
    use skiff_api::core::scheduling_predicates::fits_requests;

    use super::*;
    use crate::framework::interface::FilterPlugin;
    use crate::framework::plugins::helper::testing::{node, on_node, pod as base_pod};
    use crate::framework::preemption::{Candidate, Victims};
    use crate::framework::runtime::{
        ExtensionPoint, LogRecorder, Nominator, ProfileSpec, Registry,
    };
    use crate::informers::Listers;

    /// Fits when the node's pods leave room for the pod's requests (NodeResourcesFit's
    /// rule, without its PreFilter state).
    struct FakeFit;

    impl Plugin for FakeFit {
        fn name(&self) -> &'static str {
            "FakeFit"
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            Some(self)
        }
    }

    impl FilterPlugin for FakeFit {
        fn filter(&self, _: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
            let insufficient = fits_requests(&pod.requests, node_info.resources());
            if insufficient.is_empty() {
                Status::success()
            } else {
                Status::new(
                    Code::Unschedulable,
                    insufficient.into_iter().map(|r| r.reason),
                )
            }
        }
    }

    fn fake_fit(_: Option<&serde_json::Value>, _: &Arc<Handle>) -> Result<Arc<dyn Plugin>, Error> {
        Ok(Arc::new(FakeFit))
    }

    #[derive(Default)]
    struct TestNominator(Mutex<HashMap<String, Vec<Arc<PodInfo>>>>);

    impl Nominator for TestNominator {
        fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
            self.0
                .lock()
                .unwrap()
                .get(node)
                .cloned()
                .unwrap_or_default()
        }
        fn add_nominated_pod(&self, pod: Arc<PodInfo>, node: &str) {
            self.0
                .lock()
                .unwrap()
                .entry(node.to_owned())
                .or_default()
                .push(pod);
        }
        fn delete_nominated_pod(&self, uid: &str) {
            for pods in self.0.lock().unwrap().values_mut() {
                pods.retain(|p| p.uid() != uid);
            }
        }
    }

    struct Env {
        framework: Arc<Framework>,
        nominator: Arc<TestNominator>,
        listers: Arc<Listers>,
    }

    fn env() -> Env {
        let nominator = Arc::new(TestNominator::default());
        let listers = Arc::new(Listers::default());
        let mut spec = ProfileSpec {
            scheduler_name: "default-scheduler".into(),
            ..ProfileSpec::default()
        };
        spec.points
            .insert(ExtensionPoint::Filter, vec!["FakeFit".into()]);
        spec.points
            .insert(ExtensionPoint::PostFilter, vec![NAME.into()]);
        let mut registry = Registry::new();
        registry.insert("FakeFit", fake_fit);
        registry.insert(NAME, new);
        let handle = Handle::new(
            None,
            Arc::clone(&listers),
            Arc::clone(&nominator) as Arc<dyn Nominator>,
            Arc::new(LogRecorder),
        );
        let framework = Framework::new(&spec, &registry, handle).unwrap();
        Env {
            framework,
            nominator,
            listers,
        }
    }

    impl Env {
        /// A plugin over the framework's handle, with the dry run starting at node 0.
        fn plugin(&self) -> DefaultPreemption {
            DefaultPreemption {
                offset_rand: |_| 0,
                ..DefaultPreemption::new(
                    DefaultPreemptionArgs::default(),
                    Arc::clone(self.framework.handle()),
                )
            }
        }
    }

    /// A pod with `priority` requesting `cpu` millicores, started at second `start`.
    fn pod(name: &str, priority: i32, cpu: i64, start: Option<i64>) -> Pod {
        let cpu = format!("{cpu}m");
        let mut p = base_pod(name, &[&[("cpu", cpu.as_str())]]);
        if let Some(spec) = p.spec.as_mut() {
            spec.priority = Some(priority);
        }
        p.status = Some(PodStatus {
            start_time: start.map(|s| Time(Timestamp::from_second(s).unwrap())),
            ..PodStatus::default()
        });
        p
    }

    fn labeled(mut p: Pod, key: &str, value: &str) -> Pod {
        p.metadata.labels = Some(BTreeMap::from([(key.to_owned(), value.to_owned())]));
        p
    }

    /// A node with `cpu` millicores holding `pods`.
    fn node_info(name: &str, cpu: i64, pods: Vec<Pod>) -> NodeInfo {
        let cpu = format!("{cpu}m");
        let mut n = NodeInfo::new(node(name, &[("cpu", cpu.as_str()), ("pods", "110")]));
        for p in pods {
            n.add_pod(Arc::new(PodInfo::new(on_node(p, name))));
        }
        n
    }

    fn pdb(name: &str, app: &str, allowed: i32, disrupted: &[&str]) -> Arc<PodDisruptionBudget> {
        Arc::new(PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector: Some(MetaLabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
                    ..MetaLabelSelector::default()
                }),
                ..PodDisruptionBudgetSpec::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: Some(allowed),
                disrupted_pods: (!disrupted.is_empty()).then(|| {
                    disrupted
                        .iter()
                        .map(|d| ((*d).to_owned(), Time(Timestamp::UNIX_EPOCH)))
                        .collect()
                }),
                ..PodDisruptionBudgetStatus::default()
            }),
        })
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn select(
        env: &Env,
        preemptor: Pod,
        node: NodeInfo,
        pdbs: &[Arc<PodDisruptionBudget>],
    ) -> (Vec<String>, usize, Status) {
        let mut state = CycleState::new();
        let mut node = node;
        let (victims, violations, status) = env.plugin().select_victims_on_node(
            &env.framework,
            &mut state,
            &PodInfo::new(preemptor),
            &mut node,
            pdbs,
        );
        (names(&victims), violations, status)
    }

    #[test]
    fn args_defaults_overrides_and_validation() {
        assert_eq!(
            DefaultPreemptionArgs::from_json(None).unwrap(),
            DefaultPreemptionArgs {
                min_candidate_nodes_percentage: 10,
                min_candidate_nodes_absolute: 100
            }
        );
        let v =
            serde_json::json!({"kind": "DefaultPreemptionArgs", "minCandidateNodesAbsolute": 5});
        assert_eq!(
            DefaultPreemptionArgs::from_json(Some(&v)).unwrap(),
            DefaultPreemptionArgs {
                min_candidate_nodes_percentage: 10,
                min_candidate_nodes_absolute: 5
            }
        );
        let cases = [
            (
                serde_json::json!({"minCandidateNodesPercentage": 101}),
                "invalid configuration: minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
            ),
            (
                serde_json::json!({"minCandidateNodesAbsolute": -1}),
                "invalid configuration: minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            ),
            (
                serde_json::json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
                "invalid configuration: [minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]",
            ),
        ];
        for (v, want) in cases {
            let err = DefaultPreemptionArgs::from_json(Some(&v)).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
        let unknown = serde_json::json!({"minCandidateNodes": 3});
        assert!(DefaultPreemptionArgs::from_json(Some(&unknown)).is_err());
    }

    #[test]
    fn num_candidates() {
        let env = env();
        // (nodes, percentage, absolute, want)
        let cases = [
            (10, 10, 100, 10),
            (1000, 10, 100, 100),
            (2000, 10, 100, 200),
            (50, 40, 10, 20),
            (50, 0, 3, 3),
            (0, 10, 100, 0),
        ];
        for (nodes, percentage, absolute, want) in cases {
            let p = DefaultPreemption::new(
                DefaultPreemptionArgs {
                    min_candidate_nodes_percentage: percentage,
                    min_candidate_nodes_absolute: absolute,
                },
                Arc::clone(env.framework.handle()),
            );
            assert_eq!(
                p.calculate_num_candidates(nodes),
                want,
                "{nodes} {percentage} {absolute}"
            );
        }
    }

    #[test]
    fn victims_are_the_fewest_lowest_priority_pods() {
        let env = env();
        // 4 cores full: p1 (1, 1 core), p2 (2, 1 core), p3 (3, 2 cores).
        let node = node_info(
            "n",
            4000,
            vec![
                pod("p1", 1, 1000, Some(10)),
                pod("p2", 2, 1000, Some(10)),
                pod("p3", 3, 2000, Some(10)),
            ],
        );
        let (victims, violations, status) =
            select(&env, pod("preemptor", 10, 2000, None), node.clone(), &[]);
        assert!(status.is_success(), "{status}");
        assert_eq!(victims, ["p2", "p1"]);
        assert_eq!(violations, 0);

        // 1 core is enough: only the lowest-priority pod goes.
        let (victims, _, _) = select(&env, pod("preemptor", 10, 1000, None), node.clone(), &[]);
        assert_eq!(victims, ["p1"]);

        // Equal priority is not lower: only p1 and p2 may go, and 3 cores do not fit.
        let (victims, _, status) = select(&env, pod("preemptor", 3, 3000, None), node.clone(), &[]);
        assert!(victims.is_empty());
        assert_eq!(status.code(), Code::Unschedulable);
        assert_eq!(status.reasons(), ["Insufficient cpu"]);

        // No lower-priority pod at all.
        let (_, _, status) = select(&env, pod("preemptor", 1, 1000, None), node, &[]);
        assert_eq!(status.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(status.reasons(), [NO_VICTIMS_FOUND]);
    }

    #[test]
    fn equal_priority_victims_reprieve_the_earlier_started_first() {
        let env = env();
        let node = node_info(
            "n",
            2000,
            vec![
                pod("old", 1, 1000, Some(100)),
                pod("young", 1, 1000, Some(200)),
            ],
        );
        let (victims, _, _) = select(&env, pod("preemptor", 10, 1000, None), node, &[]);
        assert_eq!(victims, ["young"]);
    }

    #[test]
    fn pdb_violating_victims_are_reprieved_first() {
        let env = env();
        // p1 (priority 1) is protected, p2 (priority 2) is not; one of them must go.
        let node = || {
            node_info(
                "n",
                4000,
                vec![
                    labeled(pod("p1", 1, 2000, Some(10)), "app", "a"),
                    labeled(pod("p2", 2, 2000, Some(10)), "app", "b"),
                ],
            )
        };
        let preemptor = || pod("preemptor", 10, 2000, None);
        let (victims, violations, _) = select(&env, preemptor(), node(), &[]);
        assert_eq!((victims, violations), (vec!["p1".to_owned()], 0));

        let (victims, violations, _) = select(&env, preemptor(), node(), &[pdb("a", "a", 0, &[])]);
        assert_eq!((victims, violations), (vec!["p2".to_owned()], 0));

        // Both must go: the protected one counts as a violation.
        let big = || pod("preemptor", 10, 4000, None);
        let (victims, violations, _) = select(&env, big(), node(), &[pdb("a", "a", 0, &[])]);
        assert_eq!(
            (victims, violations),
            (vec!["p2".to_owned(), "p1".to_owned()], 1)
        );

        // A budget that still allows one disruption is not violated by one pod.
        let (victims, violations, _) = select(&env, big(), node(), &[pdb("a", "a", 1, &[])]);
        assert_eq!(
            (victims, violations),
            (vec!["p2".to_owned(), "p1".to_owned()], 0)
        );

        // A pod already in disruptedPods does not use the budget.
        let (_, violations, _) = select(&env, big(), node(), &[pdb("a", "a", 0, &["p1"])]);
        assert_eq!(violations, 0);

        // A budget of another namespace does not apply.
        let mut other = (*pdb("a", "a", 0, &[])).clone();
        other.metadata.namespace = Some("other".into());
        let (_, violations, _) = select(&env, big(), node(), &[Arc::new(other)]);
        assert_eq!(violations, 0);
    }

    #[test]
    fn budget_shared_by_victims_is_used_up_in_importance_order() {
        let (violating, non_violating) = filter_pods_with_pdb_violation(
            &[
                Arc::new(PodInfo::new(labeled(pod("high", 5, 1, None), "app", "a"))),
                Arc::new(PodInfo::new(labeled(pod("low", 1, 1, None), "app", "a"))),
                Arc::new(PodInfo::new(pod("unlabeled", 1, 1, None))),
            ],
            &[pdb("a", "a", 1, &[])],
        );
        let n = |v: &[Arc<PodInfo>]| v.iter().map(|p| p.key()).collect::<Vec<_>>();
        assert_eq!(n(&violating), ["default/low"]);
        assert_eq!(n(&non_violating), ["default/high", "default/unlabeled"]);
    }

    #[test]
    fn nominated_pods_of_higher_priority_take_their_room() {
        let env = env();
        let node = node_info(
            "n",
            4000,
            vec![pod("p1", 1, 1000, None), pod("p2", 1, 1000, None)],
        );
        // A pod of priority 20 nominated to the node uses 2 cores there.
        env.nominator.add_nominated_pod(
            Arc::new(PodInfo::new(pod("nominated", 20, 2000, None))),
            "n",
        );
        let (victims, _, status) = select(&env, pod("preemptor", 10, 2000, None), node, &[]);
        assert!(status.is_success(), "{status}");
        assert_eq!(victims.len(), 2);
    }

    fn terminating_preempted(name: &str, priority: i32, condition: bool) -> Pod {
        let mut p = pod(name, priority, 1000, Some(1));
        p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        if condition {
            p.status.get_or_insert_default().conditions = Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("PreemptionByScheduler".into()),
                ..PodCondition::default()
            }]);
        }
        p
    }

    fn nominated_to(mut p: Pod, node: &str) -> Pod {
        p.status.get_or_insert_default().nominated_node_name = Some(node.into());
        p
    }

    #[test]
    fn eligibility() {
        let env = env();
        let plugin = env.plugin();
        let snapshot = Snapshot::from_node_infos(vec![
            node_info("n1", 4000, vec![terminating_preempted("victim", 1, true)]),
            node_info("n2", 4000, vec![terminating_preempted("deleted", 1, false)]),
        ]);
        let unschedulable = Status::unschedulable("Insufficient cpu");
        let mut never = pod("p", 10, 1000, None);
        never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
        let cases: Vec<(&str, Pod, Status, Option<&str>)> = vec![
            (
                "plain pod",
                pod("p", 10, 1000, None),
                unschedulable.clone(),
                None,
            ),
            (
                "preemptionPolicy Never",
                never,
                unschedulable.clone(),
                Some("not eligible due to preemptionPolicy=Never."),
            ),
            (
                "terminating victim on the nominated node",
                nominated_to(pod("p", 10, 1000, None), "n1"),
                unschedulable.clone(),
                Some("not eligible due to a terminating pod on the nominated node."),
            ),
            (
                "nominated node unresolvable",
                nominated_to(pod("p", 10, 1000, None), "n1"),
                Status::unresolvable("node(s) didn't match Pod's node affinity/selector"),
                None,
            ),
            (
                "terminating pod of higher priority",
                nominated_to(pod("p", 1, 1000, None), "n1"),
                unschedulable.clone(),
                None,
            ),
            (
                "terminating without the preemption condition",
                nominated_to(pod("p", 10, 1000, None), "n2"),
                unschedulable.clone(),
                None,
            ),
            (
                "nominated node gone",
                nominated_to(pod("p", 10, 1000, None), "n9"),
                unschedulable,
                None,
            ),
        ];
        for (name, p, status, want) in cases {
            assert_eq!(
                plugin
                    .pod_eligible_to_preempt_others(&p, &snapshot, &status)
                    .as_deref(),
                want,
                "{name}"
            );
        }
    }

    fn statuses(pairs: &[(&str, Status)]) -> NodeToStatus {
        NodeToStatus {
            statuses: pairs
                .iter()
                .map(|(n, s)| ((*n).to_owned(), s.clone()))
                .collect(),
            absent: None,
        }
    }

    #[tokio::test]
    async fn no_candidate_message() {
        let env = env();
        let snapshot = Snapshot::from_node_infos(vec![
            node_info("a", 1000, vec![pod("a1", 1, 1000, None)]),
            node_info("b", 1000, vec![pod("b1", 20, 1000, None)]),
            node_info("c", 1000, vec![pod("c1", 1, 500, None)]),
        ]);
        let m = statuses(&[
            (
                "a",
                Status::unresolvable("node(s) had untolerated taint {x: }"),
            ),
            ("b", Status::unschedulable("Insufficient cpu")),
            ("c", Status::unschedulable("Insufficient cpu")),
        ]);
        let preemptor = PodInfo::new(pod("p", 10, 2000, None));
        let (result, status) = env
            .framework
            .run_post_filter_plugins(&CycleState::new(), &preemptor, &snapshot, &m)
            .await;
        assert_eq!(status.code(), Code::Unschedulable);
        assert_eq!(
            status.message(),
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims \
             found for incoming pod, 1 Preemption is not helpful for scheduling."
        );
        assert_eq!(
            result,
            Some(PostFilterResult {
                nominated_node_name: None
            })
        );

        // Every node without lower-priority pods.
        let m = statuses(&[
            ("a", Status::unschedulable("Insufficient cpu")),
            ("b", Status::unschedulable("Insufficient cpu")),
            ("c", Status::unschedulable("Insufficient cpu")),
        ]);
        let low = PodInfo::new(pod("p", 1, 500, None));
        let (_, status) = env
            .framework
            .run_post_filter_plugins(&CycleState::new(), &low, &snapshot, &m)
            .await;
        assert_eq!(
            status.message(),
            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        );

        // No node where preemption may help.
        let m = NodeToStatus {
            statuses: HashMap::new(),
            absent: Some(Status::unresolvable("x")),
        };
        let (_, status) = env
            .framework
            .run_post_filter_plugins(&CycleState::new(), &preemptor, &snapshot, &m)
            .await;
        assert_eq!(
            status.message(),
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[tokio::test]
    async fn not_eligible_and_no_client() {
        let env = env();
        let snapshot =
            Snapshot::from_node_infos(vec![node_info("a", 1000, vec![pod("a1", 1, 1000, None)])]);
        let m = statuses(&[("a", Status::unschedulable("Insufficient cpu"))]);
        let mut never = pod("p", 10, 1000, None);
        never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
        let (result, status) = env
            .framework
            .run_post_filter_plugins(&CycleState::new(), &PodInfo::new(never), &snapshot, &m)
            .await;
        assert_eq!(result, None);
        assert_eq!(status.code(), Code::Unschedulable);
        assert_eq!(
            status.message(),
            "preemption: not eligible due to preemptionPolicy=Never."
        );

        // A candidate is found, but there is no client to evict with.
        let (result, status) = env
            .framework
            .run_post_filter_plugins(
                &CycleState::new(),
                &PodInfo::new(pod("p", 10, 1000, None)),
                &snapshot,
                &m,
            )
            .await;
        assert_eq!(result, None);
        assert_eq!(status.code(), Code::Error);
        assert_eq!(
            status.message(),
            "preemption: no API client to preempt pods with"
        );
    }

    #[tokio::test]
    async fn prepare_candidate_without_client_is_an_error() {
        let env = env();
        let plugin = env.plugin();
        let evaluator = Evaluator {
            plugin_name: NAME,
            handle: env.framework.handle(),
            interface: &plugin,
        };
        let c = Candidate {
            name: "n".into(),
            victims: Victims {
                pods: vec![Arc::new(pod("v", 1, 1000, None))],
                num_pdb_violations: 0,
            },
        };
        let s = evaluator
            .prepare_candidate(&c, &PodInfo::new(pod("p", 10, 1000, None)))
            .await;
        assert_eq!(s.code(), Code::Error);
        assert_eq!(s.message(), "no API client to preempt pods with");
    }

    /// Finds the candidates over `nodes` (all Unschedulable) and the chosen one.
    fn choose(env: &Env, preemptor: Pod, nodes: Vec<NodeInfo>) -> (Vec<String>, Option<String>) {
        let plugin = env.plugin();
        let evaluator = Evaluator {
            plugin_name: NAME,
            handle: env.framework.handle(),
            interface: &plugin,
        };
        let names: Vec<String> = nodes.iter().map(|n| n.name().to_owned()).collect();
        let snapshot = Snapshot::from_node_infos(nodes);
        let m = NodeToStatus {
            statuses: names
                .iter()
                .map(|n| (n.clone(), Status::unschedulable("Insufficient cpu")))
                .collect(),
            absent: None,
        };
        let r = evaluator
            .find_candidates(
                &env.framework,
                &CycleState::new(),
                &PodInfo::new(preemptor),
                &snapshot,
                &m,
            )
            .unwrap();
        let chosen = evaluator
            .select_candidate(&r.candidates)
            .map(|c| c.name.clone());
        (
            r.candidates.iter().map(|c| c.name.clone()).collect(),
            chosen,
        )
    }

    #[test]
    fn node_choice_by_each_criterion() {
        let env = env();
        let p = || pod("preemptor", 10, 2000, None);
        // (case, nodes, budgets, the node chosen)
        type Case = (
            &'static str,
            Vec<NodeInfo>,
            Vec<Arc<PodDisruptionBudget>>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                "fewest PDB violations",
                vec![
                    node_info(
                        "a",
                        2000,
                        vec![labeled(pod("a1", 1, 2000, Some(1)), "app", "a")],
                    ),
                    node_info("b", 2000, vec![pod("b1", 5, 2000, Some(1))]),
                ],
                vec![pdb("a", "a", 0, &[])],
                "b",
            ),
            (
                "lowest highest-victim priority",
                vec![
                    node_info(
                        "a",
                        2000,
                        vec![pod("a1", 3, 1000, Some(1)), pod("a2", 1, 1000, Some(1))],
                    ),
                    node_info("b", 2000, vec![pod("b1", 2, 2000, Some(1))]),
                ],
                vec![],
                "b",
            ),
            (
                "smallest sum of priorities",
                vec![
                    node_info(
                        "a",
                        2000,
                        vec![pod("a1", 2, 1000, Some(1)), pod("a2", 2, 1000, Some(1))],
                    ),
                    node_info(
                        "b",
                        2000,
                        vec![pod("b1", 2, 1000, Some(1)), pod("b2", 1, 1000, Some(1))],
                    ),
                ],
                vec![],
                "b",
            ),
            (
                "smallest sum (negative priorities)",
                vec![
                    node_info(
                        "a",
                        2000,
                        vec![pod("a1", -5, 1000, Some(1)), pod("a2", -5, 1000, Some(1))],
                    ),
                    node_info("b", 2000, vec![pod("b1", -5, 2000, Some(1))]),
                ],
                vec![],
                "b",
            ),
            (
                "latest start of the highest-priority victims",
                vec![
                    node_info("a", 2000, vec![pod("a1", 1, 2000, Some(100))]),
                    node_info("b", 2000, vec![pod("b1", 1, 2000, Some(200))]),
                    node_info("c", 2000, vec![pod("c1", 1, 2000, Some(50))]),
                ],
                vec![],
                "b",
            ),
            (
                "first node",
                vec![
                    node_info("a", 2000, vec![pod("a1", 1, 2000, Some(100))]),
                    node_info("b", 2000, vec![pod("b1", 1, 2000, Some(100))]),
                ],
                vec![],
                "a",
            ),
        ];
        for (name, nodes, pdbs, want) in cases {
            for (i, b) in pdbs.iter().enumerate() {
                env.listers
                    .pdbs
                    .insert(format!("default/{i}"), Arc::clone(b));
            }
            let (candidates, chosen) = choose(&env, p(), nodes);
            for i in 0..pdbs.len() {
                env.listers.pdbs.remove(&format!("default/{i}"));
            }
            assert!(candidates.len() >= 2, "{name}: {candidates:?}");
            assert_eq!(chosen.as_deref(), Some(want), "{name}");
        }
    }

    #[test]
    fn dry_run_starts_at_the_offset_and_stops_at_enough_candidates() {
        let env = env();
        let mut plugin = env.plugin();
        plugin.offset_rand = |_| 3;
        plugin.args.min_candidate_nodes_absolute = 2;
        let evaluator = Evaluator {
            plugin_name: NAME,
            handle: env.framework.handle(),
            interface: &plugin,
        };
        let nodes: Vec<Arc<NodeInfo>> = (0..5)
            .map(|i| {
                let victim = if i == 3 {
                    labeled(pod(&format!("v{i}"), 1, 2000, Some(1)), "app", "a")
                } else {
                    pod(&format!("v{i}"), 1, 2000, Some(1))
                };
                Arc::new(node_info(&format!("n{i}"), 2000, vec![victim]))
            })
            .collect();
        let (offset, num) = plugin.get_offset_and_num_candidates(nodes.len());
        assert_eq!((offset, num), (3, 2));
        let r = evaluator.dry_run_preemption(
            &env.framework,
            &CycleState::new(),
            &PodInfo::new(pod("p", 10, 2000, None)),
            &nodes,
            &[pdb("a", "a", 0, &[])],
            offset,
            num,
        );
        // n3 violates its budget: the non-violating n4 comes first; two found, stop.
        let names: Vec<&str> = r.candidates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["n4", "n3"]);
        assert_eq!(r.candidates[1].victims.num_pdb_violations, 1);
        assert!(r.errors.is_empty());
    }
}
