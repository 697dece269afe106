//! Linux part of a container config (upstream `kuberuntime_container_linux.go`,
//! `security_context.go`): cgroup resources, OOM score and security context.

use k8s_cri::v1::{
    Capability, Int64Value, LinuxContainerConfig, LinuxContainerResources,
    LinuxContainerSecurityContext,
};
use k8s_openapi::api::core::v1::{Container, Pod};

use super::sandbox::namespace_options;
use crate::cm::qos::container_oom_score_adj;
use skiff_api::quantity;

/// CFS period used with CPU limits (100 ms in microseconds).
const CPU_PERIOD: i64 = 100_000;
/// Smallest cpu.shares value (cgroup v1 minimum).
const MIN_SHARES: i64 = 2;
/// Largest cpu.shares value.
const MAX_SHARES: i64 = 262_144;
/// Smallest CFS quota (1 ms).
const MIN_QUOTA: i64 = 1000;

/// cpu.shares for a CPU amount in millicores: `milli * 1024 / 1000`, at least 2.
pub fn milli_cpu_to_shares(milli: i64) -> i64 {
    if milli == 0 {
        return MIN_SHARES;
    }
    (milli * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// CFS quota for a CPU limit in millicores over `period` microseconds; 0 means no limit.
pub fn milli_cpu_to_quota(milli: i64, period: i64) -> i64 {
    if milli == 0 {
        return 0;
    }
    (milli * period / 1000).max(MIN_QUOTA)
}

/// The container's cgroup resources: cpu shares from the request (or the limit when
/// there is no request), CFS quota from the CPU limit, memory limit, and the QoS
/// oom_score_adj given the machine's `memory_capacity` in bytes.
pub fn container_resources(
    pod: &Pod,
    container: &Container,
    memory_capacity: i64,
) -> LinuxContainerResources {
    let resources = container.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let cpu_request = requests
        .and_then(|r| r.get("cpu"))
        .map_or(0, quantity::milli_value);
    let cpu_limit = limits
        .and_then(|l| l.get("cpu"))
        .map_or(0, quantity::milli_value);
    let memory_limit = limits
        .and_then(|l| l.get("memory"))
        .map_or(0, quantity::value);
    let shares = if cpu_request == 0 && cpu_limit != 0 {
        cpu_limit
    } else {
        cpu_request
    };
    let mut linux = LinuxContainerResources {
        cpu_shares: milli_cpu_to_shares(shares),
        memory_limit_in_bytes: memory_limit,
        oom_score_adj: container_oom_score_adj(pod, container, memory_capacity),
        ..Default::default()
    };
    if cpu_limit != 0 {
        linux.cpu_period = CPU_PERIOD;
        linux.cpu_quota = milli_cpu_to_quota(cpu_limit, CPU_PERIOD);
    }
    linux
}

/// The container's security context: the container's settings over the pod's
/// (runAsUser, runAsGroup), privileged, read-only rootfs, capabilities,
/// supplemental groups, no_new_privs and the pod's namespaces.
pub fn container_security_context(
    pod: &Pod,
    container: &Container,
) -> LinuxContainerSecurityContext {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = container.security_context.as_ref();
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    let run_as_group = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group));
    let mut supplemental_groups: Vec<i64> = pod_sc.and_then(|s| s.fs_group).into_iter().collect();
    supplemental_groups.extend(
        pod_sc
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default(),
    );
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);
    LinuxContainerSecurityContext {
        capabilities: sc
            .and_then(|s| s.capabilities.as_ref())
            .map(|caps| Capability {
                add_capabilities: caps.add.clone().unwrap_or_default(),
                drop_capabilities: caps.drop.clone().unwrap_or_default(),
                add_ambient_capabilities: Vec::new(),
            }),
        privileged,
        namespace_options: Some(namespace_options(pod)),
        run_as_user: run_as_user.map(|value| Int64Value { value }),
        run_as_group: run_as_group.map(|value| Int64Value { value }),
        readonly_rootfs: sc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        supplemental_groups,
        no_new_privs: sc.and_then(|s| s.allow_privilege_escalation) == Some(false),
        ..Default::default()
    }
}

/// The Linux container config: [`container_resources`] and [`container_security_context`].
pub fn linux_container_config(
    pod: &Pod,
    container: &Container,
    memory_capacity: i64,
) -> LinuxContainerConfig {
    LinuxContainerConfig {
        resources: Some(container_resources(pod, container, memory_capacity)),
        security_context: Some(container_security_context(pod, container)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn shares_and_quota() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(500), 512);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_quota(0, CPU_PERIOD), 0);
        assert_eq!(milli_cpu_to_quota(250, CPU_PERIOD), 25_000);
        assert_eq!(milli_cpu_to_quota(5, CPU_PERIOD), 1000);
    }

    #[test]
    fn resources_from_requests_and_limits() {
        let q = |s: &str| Quantity(s.into());
        let container = Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: Some(
                    [
                        ("cpu".to_owned(), q("500m")),
                        ("memory".to_owned(), q("64Mi")),
                    ]
                    .into(),
                ),
                requests: Some(
                    [
                        ("cpu".to_owned(), q("500m")),
                        ("memory".to_owned(), q("64Mi")),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![container.clone()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = container_resources(&pod, &container, 8 << 30);
        assert_eq!(r.cpu_shares, 512);
        assert_eq!((r.cpu_period, r.cpu_quota), (100_000, 50_000));
        assert_eq!(r.memory_limit_in_bytes, 64 << 20);
        assert_eq!(r.oom_score_adj, -997);
        let empty = Container::default();
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![empty.clone()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let r = container_resources(&pod, &empty, 8 << 30);
        assert_eq!(
            (
                r.cpu_shares,
                r.cpu_quota,
                r.memory_limit_in_bytes,
                r.oom_score_adj
            ),
            (2, 0, 0, 1000)
        );
    }
}
