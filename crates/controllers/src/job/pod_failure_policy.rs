//! `spec.podFailurePolicy` (upstream `pkg/controller/job/pod_failure_policy.go`,
//! KEP-3329): the first rule matching a failed pod decides whether the Job fails at
//! once (`FailJob`), the failure is not counted against `backoffLimit` and
//! `backoffLimitPerIndex` (`Ignore`), it counts as usual (`Count`), or it fails the pod's
//! index at once (`FailIndex`, which needs `backoffLimitPerIndex`; see
//! [`super::backoff_limit_per_index`]).

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// The action that fails the pod's index (upstream `PodFailurePolicyActionFailIndex`).
pub(crate) const FAIL_INDEX: &str = "FailIndex";

/// What a failed pod means under the policy (upstream `matchPodFailurePolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The Job's failure message when a `FailJob` rule matched.
    pub(crate) fail_job: Option<String>,
    /// Whether the failure counts against `backoffLimit`.
    pub(crate) count_failed: bool,
    /// The matching rule's action, if any rule matched.
    pub(crate) action: Option<String>,
}

/// Applies `policy` to the failed `pod`: rules in order, the first match wins; no match
/// counts the failure.
pub(crate) fn match_policy(policy: &PodFailurePolicy, pod: &Pod) -> Verdict {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let action = rule.action.as_str();
        let matched = if let Some(req) = &rule.on_exit_codes {
            matching_container(pod, req).map(|(container, code)| {
                format!(
                    "Container {container} for pod {ns}/{name} failed with exit code {code} \
                     matching {action} rule at index {index}"
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let conditions = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            // The pod's first condition that any pattern matches (upstream
            // `matchOnPodConditions`).
            conditions
                .iter()
                .find(|c| {
                    patterns.iter().any(|p| {
                        c.type_ == p.type_ && c.status == p.status.as_deref().unwrap_or("True")
                    })
                })
                .map(|c| {
                    format!(
                        "Pod {ns}/{name} has condition {} matching {action} rule at index {index}",
                        c.type_
                    )
                })
        } else {
            None
        };
        let Some(message) = matched else {
            continue;
        };
        return match action {
            "FailJob" => Verdict {
                fail_job: Some(message),
                count_failed: true,
                action: Some(action.to_owned()),
            },
            "Ignore" => Verdict {
                fail_job: None,
                count_failed: false,
                action: Some(action.to_owned()),
            },
            _ => Verdict {
                fail_job: None,
                count_failed: true,
                action: Some(action.to_owned()),
            },
        };
    }
    Verdict {
        fail_job: None,
        count_failed: true,
        action: None,
    }
}

/// The first container (regular containers before init containers) that terminated with
/// a non-zero exit code matching `req`: its name and code (upstream `matchOnExitCodes`,
/// `getMatchingContainerFromList`).
fn matching_container(
    pod: &Pod,
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<(String, i32)> {
    let status = pod.status.as_ref()?;
    let lists: [&[ContainerStatus]; 2] = [
        status.container_statuses.as_deref().unwrap_or_default(),
        status
            .init_container_statuses
            .as_deref()
            .unwrap_or_default(),
    ];
    lists.into_iter().flatten().find_map(|cs| {
        let code = cs.state.as_ref()?.terminated.as_ref()?.exit_code;
        if code == 0 {
            return None;
        }
        if req.container_name.as_deref().is_some_and(|n| n != cs.name) {
            return None;
        }
        let listed = req.values.contains(&code);
        let hit = match req.operator.as_str() {
            "In" => listed,
            "NotIn" => !listed,
            _ => false,
        };
        hit.then(|| (cs.name.clone(), code))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn failed_pod(exit: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [
                {"name": "ok", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0}}},
                {"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": exit}}},
            ]},
        }))
        .expect("a pod")
    }

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).expect("a policy")
    }

    #[test]
    fn exit_codes_decide_as_upstream() {
        let p = policy(json!([
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "main",
                "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}},
        ]));
        let v = match_policy(&p, &failed_pod(42, json!([])));
        assert_eq!(
            v.fail_job.as_deref(),
            Some(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at \
                 index 1"
            )
        );
        let ignored = match_policy(&p, &failed_pod(1, json!([])));
        assert!(!ignored.count_failed && ignored.fail_job.is_none());
        let counted = match_policy(&p, &failed_pod(7, json!([])));
        assert_eq!(
            (counted.count_failed, counted.action.as_deref()),
            (true, Some("Count"))
        );
    }

    #[test]
    fn pod_conditions_match_type_and_status() {
        let p = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        ]));
        let disrupted = failed_pod(137, json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert!(!match_policy(&p, &disrupted).count_failed);
        let other = failed_pod(
            137,
            json!([{"type": "DisruptionTarget", "status": "False"}]),
        );
        let v = match_policy(&p, &other);
        assert!(v.count_failed && v.action.is_none());
    }

    #[test]
    fn fail_index_counts_and_is_named() {
        let p = policy(json!([
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},
        ]));
        let v = match_policy(&p, &failed_pod(42, json!([])));
        assert_eq!(
            (v.fail_job, v.count_failed, v.action.as_deref()),
            (None, true, Some(FAIL_INDEX))
        );
    }

    #[test]
    fn regular_containers_and_the_first_pod_condition_come_first() {
        let mut pod = failed_pod(
            3,
            json!([{"type": "Custom", "status": "True"},
                   {"type": "DisruptionTarget", "status": "True"}]),
        );
        let status = pod.status.as_mut().expect("status");
        status.init_container_statuses = serde_json::from_value(json!([
            {"name": "init", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"terminated": {"exitCode": 3}}}]))
        .expect("init statuses");
        let p = policy(json!([
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}},
        ]));
        let message = match_policy(&p, &pod).fail_job.unwrap_or_default();
        assert!(message.starts_with("Container main "), "{message}");
        let p = policy(json!([
            {"action": "FailJob", "onPodConditions": [
                {"type": "DisruptionTarget", "status": "True"},
                {"type": "Custom", "status": "True"}]},
        ]));
        assert_eq!(
            match_policy(&p, &pod).fail_job.as_deref(),
            Some("Pod ns/p has condition Custom matching FailJob rule at index 0")
        );
    }
}
