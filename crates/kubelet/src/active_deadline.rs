//! `activeDeadlineSeconds` (upstream `pkg/kubelet/active_deadline.go`): a pod active on
//! the node longer than its deadline is killed and fails.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Pod status reason of a pod past its deadline.
pub const DEADLINE_EXCEEDED_REASON: &str = "DeadlineExceeded";
/// Pod status message of a pod past its deadline.
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

/// Time left until `pod` passes its `activeDeadlineSeconds`, counted from its
/// `startTime` (zero once past it); `None` when it has no deadline or no start time yet.
pub fn time_left(pod: &Pod, start_time: Option<&Time>, now: Timestamp) -> Option<Duration> {
    let deadline = pod.spec.as_ref()?.active_deadline_seconds?;
    let start = start_time?.0;
    let active = Duration::try_from(now.duration_since(start)).unwrap_or(Duration::ZERO);
    let allowed = Duration::from_secs(u64::try_from(deadline).unwrap_or(0));
    Some(allowed.saturating_sub(active))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn deadline_counts_from_start_time() {
        let pod = |deadline| Pod {
            spec: Some(PodSpec {
                active_deadline_seconds: deadline,
                ..Default::default()
            }),
            ..Default::default()
        };
        let at = |s: i64| Timestamp::from_second(1_700_000_000 + s).unwrap();
        let start = Time(at(0));
        assert_eq!(time_left(&pod(None), Some(&start), at(5)), None);
        assert_eq!(time_left(&pod(Some(2)), None, at(5)), None);
        assert_eq!(
            time_left(&pod(Some(2)), Some(&start), at(1)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            time_left(&pod(Some(2)), Some(&start), at(2)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            time_left(&pod(Some(2)), Some(&start), at(9)),
            Some(Duration::ZERO)
        );
    }
}
