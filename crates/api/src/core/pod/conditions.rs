//! A pod's phase and conditions as controllers read them (upstream
//! `pkg/api/v1/pod/util.go` and `pkg/controller/controller_utils.go`): ready, available
//! (ready for `minReadySeconds`), active.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The pod's `Ready` condition (upstream `GetPodReadyCondition`).
pub fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// True when the pod's `Ready` condition is `True` (upstream `IsPodReady`).
pub fn is_pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// True when the pod has been ready for at least `min_ready_seconds` at `now` (upstream
/// `IsPodAvailable`): with 0, ready is enough; otherwise the `Ready` condition's
/// `lastTransitionTime` must be that far back.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    let Some(c) = ready_condition(pod).filter(|c| c.status == "True") else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    c.last_transition_time.as_ref().is_some_and(|t| {
        t.0.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .is_ok_and(|ready_at| ready_at <= now)
    })
}

/// The pod's phase, `""` when unset.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// True for a pod that neither ended (`Succeeded`, `Failed`) nor is being deleted: the
/// pods a controller counts (upstream `IsPodActive`).
pub fn is_pod_active(pod: &Pod) -> bool {
    !matches!(pod_phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn pod(phase: &str, ready: Option<(&str, &str)>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                conditions: ready.map(|(status, at)| {
                    vec![PodCondition {
                        type_: "Ready".to_owned(),
                        status: status.to_owned(),
                        last_transition_time: Some(Time(at.parse().unwrap())),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn ready_available_and_active() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let ready = pod("Running", Some(("True", "2026-01-01T00:00:30Z")));
        assert!(is_pod_ready(&ready));
        assert!(is_pod_available(&ready, 0, now));
        assert!(is_pod_available(&ready, 30, now));
        assert!(!is_pod_available(&ready, 31, now));
        let not_ready = pod("Running", Some(("False", "2026-01-01T00:00:00Z")));
        assert!(!is_pod_ready(&not_ready));
        assert!(!is_pod_available(&not_ready, 0, now));
        assert!(!is_pod_ready(&pod("Pending", None)));
        assert!(is_pod_active(&pod("Pending", None)));
        assert!(!is_pod_active(&pod("Succeeded", None)));
        assert!(!is_pod_active(&pod("Failed", None)));
        let mut deleting = pod("Running", None);
        deleting.metadata.deletion_timestamp = Some(Time(now));
        assert!(!is_pod_active(&deleting));
    }
}
