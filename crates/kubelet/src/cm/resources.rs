//! The cgroup settings derived from a pod's resources (upstream
//! `pkg/kubelet/cm/helpers_linux.go` `ResourceConfigForPod`, `MilliCPUToShares`,
//! `MilliCPUToQuota`).

use k8s_openapi::api::core::v1::Pod;

use super::qos::{QosClass, pod_qos};
use skiff_api::core::pod::requests::{self, PodResourcesOptions};
pub use skiff_api::core::pod::requests::{ResourceAmounts, pod_requests};

/// Smallest and largest cgroup v1 `cpu.shares` the kernel accepts.
pub const MIN_SHARES: u64 = 2;
/// See [`MIN_SHARES`].
pub const MAX_SHARES: u64 = 262_144;
/// `cpu.shares` of one CPU.
const SHARES_PER_CPU: i64 = 1024;
/// CFS period, microseconds (upstream `QuotaPeriod`, 100 ms).
pub const QUOTA_PERIOD: u64 = 100_000;
/// Smallest CFS quota, microseconds (1 ms).
const MIN_QUOTA_PERIOD: i64 = 1000;

/// Limits applied to one cgroup. `None` leaves the setting alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// v1 `cpu.shares` (v2 `cpu.weight` is derived from it).
    pub cpu_shares: Option<u64>,
    /// CFS quota in microseconds per `cpu_period`; -1 for no limit.
    pub cpu_quota: Option<i64>,
    /// CFS period in microseconds.
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes; 0 leaves it unlimited.
    pub memory: Option<i64>,
    /// Maximum number of tasks; -1 for no limit.
    pub pids_limit: Option<i64>,
}

/// `cpu.shares` for `milli_cpu` (upstream `MilliCPUToShares`): 1024 per CPU, clamped to
/// [2, 262144]; 0 gives 2.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = u64::try_from(milli_cpu.saturating_mul(SHARES_PER_CPU) / 1000).unwrap_or(0);
    shares.clamp(MIN_SHARES, MAX_SHARES)
}

/// CFS quota in microseconds for `milli_cpu` over `period` (upstream `MilliCPUToQuota`):
/// 0 for no cpu, at least 1 ms otherwise.
pub fn milli_cpu_to_quota(milli_cpu: i64, period: u64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let period = i64::try_from(period).unwrap_or(i64::MAX);
    (milli_cpu.saturating_mul(period) / 1000).max(MIN_QUOTA_PERIOD)
}

/// The pod's effective limits (upstream `PodLimits`) and whether every container declares
/// a cpu and a memory limit (pod-level limits count for all).
fn pod_limits(pod: &Pod) -> (ResourceAmounts, bool, bool) {
    let (mut cpu_declared, mut memory_declared) = (true, true);
    let opts = PodResourcesOptions::default();
    let total = requests::pod_limits(pod, &opts, &mut |l, _| {
        cpu_declared &= l.get("cpu").is_some_and(|v| *v != 0);
        memory_declared &= l.get("memory").is_some_and(|v| *v != 0);
    });
    if let Some(pod_level) = pod.spec.as_ref().and_then(|s| s.resources.as_ref()) {
        let l = requests::resource_amounts(pod_level.limits.as_ref());
        cpu_declared |= l.get("cpu").is_some_and(|v| *v != 0);
        memory_declared |= l.get("memory").is_some_and(|v| *v != 0);
    }
    (total, cpu_declared, memory_declared)
}

/// The pod cgroup's settings (upstream `ResourceConfigForPod`, CFS quota enforced):
/// Guaranteed: shares from the cpu requests, quota from the cpu limits, memory limit;
/// Burstable: shares, and quota / memory limit only when every container declares one;
/// BestEffort: 2 shares. `pod_pids_limit` (`podPidsLimit`) applies when positive.
pub fn resource_config_for_pod(pod: &Pod, pod_pids_limit: i64) -> ResourceConfig {
    let requests = pod_requests(pod, &PodResourcesOptions::default());
    let (limits, cpu_declared, memory_declared) = pod_limits(pod);
    let shares = milli_cpu_to_shares(requests.get("cpu").copied().unwrap_or(0));
    let quota = milli_cpu_to_quota(limits.get("cpu").copied().unwrap_or(0), QUOTA_PERIOD);
    let memory = limits.get("memory").copied().unwrap_or(0);
    let mut config = ResourceConfig {
        pids_limit: (pod_pids_limit > 0).then_some(pod_pids_limit),
        ..Default::default()
    };
    match pod_qos(pod) {
        QosClass::Guaranteed => {
            config.cpu_shares = Some(shares);
            config.cpu_quota = Some(quota);
            config.cpu_period = Some(QUOTA_PERIOD);
            config.memory = Some(memory);
        }
        QosClass::Burstable => {
            config.cpu_shares = Some(shares);
            if cpu_declared {
                config.cpu_quota = Some(quota);
                config.cpu_period = Some(QUOTA_PERIOD);
            }
            if memory_declared {
                config.memory = Some(memory);
            }
        }
        QosClass::BestEffort => config.cpu_shares = Some(MIN_SHARES),
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pods::container;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(init),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn shares_and_quota() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(100), 102);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
        assert_eq!(milli_cpu_to_quota(0, QUOTA_PERIOD), 0);
        assert_eq!(milli_cpu_to_quota(5, QUOTA_PERIOD), 1000);
        assert_eq!(milli_cpu_to_quota(250, QUOTA_PERIOD), 25_000);
        assert_eq!(milli_cpu_to_quota(2000, QUOTA_PERIOD), 200_000);
    }

    #[test]
    fn guaranteed_pod_gets_all_limits() {
        let full = [("cpu", "500m"), ("memory", "64Mi")];
        let p = pod(
            vec![container("a", &full, &full), container("b", &full, &full)],
            vec![],
        );
        let c = resource_config_for_pod(&p, -1);
        assert_eq!(
            c,
            ResourceConfig {
                cpu_shares: Some(1024),
                cpu_quota: Some(100_000),
                cpu_period: Some(QUOTA_PERIOD),
                memory: Some(128 << 20),
                pids_limit: None,
            }
        );
    }

    #[test]
    fn burstable_pod_limits_only_when_all_declared() {
        let p = pod(
            vec![
                container(
                    "a",
                    &[("cpu", "100m")],
                    &[("cpu", "200m"), ("memory", "32Mi")],
                ),
                container("b", &[("cpu", "300m")], &[("cpu", "1")]),
            ],
            vec![],
        );
        let c = resource_config_for_pod(&p, 1024);
        assert_eq!(c.cpu_shares, Some(409));
        assert_eq!(c.cpu_quota, Some(120_000));
        assert_eq!(c.memory, None, "b has no memory limit");
        assert_eq!(c.pids_limit, Some(1024));
    }

    #[test]
    fn best_effort_pod_gets_two_shares() {
        let p = pod(vec![container("a", &[], &[])], vec![]);
        assert_eq!(
            resource_config_for_pod(&p, -1),
            ResourceConfig {
                cpu_shares: Some(2),
                ..Default::default()
            }
        );
    }

    #[test]
    fn init_containers_count_as_the_max_against_the_sum() {
        let small = [("cpu", "100m"), ("memory", "10Mi")];
        let big = [("cpu", "1"), ("memory", "100Mi")];
        let p = pod(
            vec![
                container("a", &small, &small),
                container("b", &small, &small),
            ],
            vec![container("init", &big, &big)],
        );
        let r = pod_requests(&p, &PodResourcesOptions::default());
        assert_eq!((r["cpu"], r["memory"]), (1000, 100 << 20));
        let c = resource_config_for_pod(&p, -1);
        assert_eq!((c.cpu_shares, c.memory), (Some(1024), Some(100 << 20)));
        // A sidecar adds to the regular containers and to later init containers.
        let mut sidecar = container("side", &small, &small);
        sidecar.restart_policy = Some("Always".into());
        let p = pod(
            vec![container("a", &small, &small)],
            vec![sidecar, container("init", &small, &small)],
        );
        let r = pod_requests(&p, &PodResourcesOptions::default());
        assert_eq!(r["cpu"], 200);
    }
}
