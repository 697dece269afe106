//! Pod sandbox configuration (upstream `kuberuntime_sandbox.go`,
//! `generatePodSandboxConfig` and its Linux part).

use std::path::Path;

use k8s_cri::v1::{
    DnsConfig, Int64Value, LinuxPodSandboxConfig, LinuxSandboxSecurityContext, NamespaceMode,
    NamespaceOption, PodSandboxConfig, PodSandboxMetadata, PortMapping, Protocol,
};
use k8s_openapi::api::core::v1::Pod;

use super::labels::sandbox_labels;
use crate::cm::cgroups::pod_cgroup_parent;
use crate::cm::qos::pod_qos;

/// The pod's log directory: `<pod_logs_dir>/<namespace>_<name>_<uid>`.
pub fn pod_log_directory(
    pod_logs_dir: &Path,
    namespace: &str,
    name: &str,
    uid: &str,
) -> std::path::PathBuf {
    pod_logs_dir.join(format!("{namespace}_{name}_{uid}"))
}

/// Builds the RunPodSandbox config of `pod` for sandbox `attempt`, with the pod's DNS
/// config `dns_config` (see [`super::dns::DnsConfigurer::get_pod_dns`]).
pub fn generate_pod_sandbox_config(
    pod: &Pod,
    attempt: u32,
    pod_logs_dir: &Path,
    cgroup_root: &Path,
    dns_config: DnsConfig,
) -> PodSandboxConfig {
    let meta = &pod.metadata;
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let uid = meta.uid.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    // As upstream, host-network pods get no hostname: they share the node's UTS
    // namespace (runc refuses a hostname without a private one).
    let hostname = if spec.and_then(|s| s.host_network).unwrap_or(false) {
        String::new()
    } else {
        spec.and_then(|s| s.hostname.clone()).unwrap_or_else(|| {
            name.chars()
                .take(63)
                .collect::<String>()
                .trim_end_matches(['-', '.'])
                .to_owned()
        })
    };
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: namespace.clone(),
            attempt,
        }),
        hostname,
        log_directory: pod_log_directory(pod_logs_dir, &namespace, &name, &uid)
            .display()
            .to_string(),
        dns_config: Some(dns_config),
        port_mappings: port_mappings(pod),
        labels: sandbox_labels(pod),
        annotations: meta
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        linux: Some(LinuxPodSandboxConfig {
            cgroup_parent: pod_cgroup_parent(cgroup_root, pod_qos(pod), &uid)
                .display()
                .to_string(),
            security_context: Some(LinuxSandboxSecurityContext {
                namespace_options: Some(namespace_options(pod)),
                run_as_user: spec
                    .and_then(|s| s.security_context.as_ref())
                    .and_then(|c| c.run_as_user)
                    .map(|value| Int64Value { value }),
                run_as_group: spec
                    .and_then(|s| s.security_context.as_ref())
                    .and_then(|c| c.run_as_group)
                    .map(|value| Int64Value { value }),
                privileged: spec.is_some_and(|s| {
                    s.containers.iter().any(|c| {
                        c.security_context
                            .as_ref()
                            .and_then(|sc| sc.privileged)
                            .unwrap_or(false)
                    })
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        windows: None,
    }
}

/// Namespace modes from hostNetwork / hostPID / hostIPC / shareProcessNamespace.
pub fn namespace_options(pod: &Pod) -> NamespaceOption {
    let spec = pod.spec.as_ref();
    let flag = |f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>| {
        spec.and_then(f).unwrap_or(false)
    };
    let mode = |host: bool, otherwise: NamespaceMode| if host { NamespaceMode::Node } else { otherwise } as i32;
    NamespaceOption {
        network: mode(flag(|s| s.host_network), NamespaceMode::Pod),
        pid: mode(
            flag(|s| s.host_pid),
            if flag(|s| s.share_process_namespace) {
                NamespaceMode::Pod
            } else {
                NamespaceMode::Container
            },
        ),
        ipc: mode(flag(|s| s.host_ipc), NamespaceMode::Pod),
        ..Default::default()
    }
}

/// One port mapping per container port with a hostPort.
fn port_mappings(pod: &Pod) -> Vec<PortMapping> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| PortMapping {
            protocol: match p.protocol.as_deref() {
                Some("UDP") => Protocol::Udp,
                Some("SCTP") => Protocol::Sctp,
                _ => Protocol::Tcp,
            } as i32,
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// The sandbox config of `pod` with logs under `/var/log/pods` and no DNS settings.
    fn sandbox_config(pod: &Pod, attempt: u32) -> PodSandboxConfig {
        generate_pod_sandbox_config(
            pod,
            attempt,
            Path::new("/var/log/pods"),
            Path::new("/"),
            DnsConfig::default(),
        )
    }

    #[test]
    fn sandbox_config_follows_upstream() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-node1".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![
                        ContainerPort {
                            container_port: 80,
                            host_port: Some(8080),
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        },
                        ContainerPort {
                            container_port: 81,
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        let c = sandbox_config(&pod, 2);
        let meta = c.metadata.clone().unwrap_or_default();
        assert_eq!(
            (
                meta.name.as_str(),
                meta.namespace.as_str(),
                meta.uid.as_str(),
                meta.attempt
            ),
            ("web-node1", "default", "u1", 2)
        );
        assert_eq!(c.hostname, "web-node1");
        assert_eq!(c.log_directory, "/var/log/pods/default_web-node1_u1");
        assert_eq!(c.labels["io.kubernetes.pod.uid"], "u1");
        assert_eq!(c.labels["app"], "web");
        assert_eq!(c.port_mappings.len(), 1);
        assert_eq!(
            (
                c.port_mappings[0].container_port,
                c.port_mappings[0].host_port
            ),
            (80, 8080)
        );
        let linux = c.linux.unwrap_or_default();
        assert_eq!(linux.cgroup_parent, "/kubepods/besteffort/podu1");
        let ns = linux
            .security_context
            .and_then(|s| s.namespace_options)
            .unwrap_or_default();
        assert_eq!(ns.network, NamespaceMode::Pod as i32);
        assert_eq!(ns.pid, NamespaceMode::Container as i32);
    }

    #[test]
    fn host_network_pods_get_no_hostname() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("hostweb-node1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                host_network: Some(true),
                hostname: Some("ignored".into()),
                ..Default::default()
            }),
            status: None,
        };
        let c = sandbox_config(&pod, 0);
        assert_eq!(c.hostname, "");
    }
}
