//! The sysctl admission handler (upstream `pkg/kubelet/sysctl`: `SafeSysctlAllowlist`,
//! `patternAllowlist`; `k8s.io/component-helpers/node/util/sysctl` namespaces). Without
//! `allowedUnsafeSysctls` only the safe sysctls pass: each is namespaced per pod and
//! isolated from other pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::admission::PodAdmitRejection;

/// The admission reason of a forbidden sysctl (upstream `ForbiddenReason`).
pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// The safe sysctls of v1.33, each with the kernel (major, minor) that namespaced it,
/// when that came later than the oldest supported kernel.
const SAFE_SYSCTLS: [(&str, Option<(u32, u32)>); 12] = [
    ("kernel.shm_rmid_forced", None),
    ("net.ipv4.ip_local_port_range", None),
    ("net.ipv4.tcp_syncookies", None),
    ("net.ipv4.ping_group_range", None),
    ("net.ipv4.ip_unprivileged_port_start", None),
    ("net.ipv4.ip_local_reserved_ports", Some((3, 16))),
    ("net.ipv4.tcp_keepalive_time", Some((4, 5))),
    ("net.ipv4.tcp_fin_timeout", Some((4, 6))),
    ("net.ipv4.tcp_keepalive_intvl", Some((4, 5))),
    ("net.ipv4.tcp_keepalive_probes", Some((4, 5))),
    ("net.ipv4.tcp_rmem", Some((4, 15))),
    ("net.ipv4.tcp_wmem", Some((4, 15))),
];

/// The kernel namespace a sysctl lives in (upstream `utilsysctl.Namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    /// Upstream's names, as in its messages.
    fn as_str(self) -> &'static str {
        match self {
            Self::Ipc => "IPC",
            Self::Net => "Net",
        }
    }
}

/// The namespace of a sysctl (upstream `NamespacedBy`), `None` when not namespaced.
fn namespaced_by(sysctl: &str) -> Option<Namespace> {
    const IPC_NAMES: [&str; 10] = [
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.shm",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.msg",
    ];
    if IPC_NAMES.contains(&sysctl) {
        return Some(Namespace::Ipc);
    }
    if sysctl.starts_with("net.") {
        return Some(Namespace::Net);
    }
    sysctl.starts_with("fs.mqueue.").then_some(Namespace::Ipc)
}

/// `kernel/shm_rmid_forced` as `kernel.shm_rmid_forced` (upstream
/// `ConvertSysctlVariableToDotsSeparator`): when the first separator is `/`, dots and
/// slashes swap.
fn to_dots(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes().get(i) == Some(&b'/') => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

/// The running kernel's (major, minor), from `/proc/sys/kernel/osrelease`.
pub(crate) fn kernel_version() -> Option<(u32, u32)> {
    parse_kernel_version(&std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?)
}

fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The sysctls pods may set (upstream `patternAllowlist` over `SafeSysctlAllowlist`).
#[derive(Debug, Clone)]
pub struct SysctlAllowlist {
    sysctls: BTreeMap<String, Namespace>,
}

impl SysctlAllowlist {
    /// The safe sysctls available on a kernel of version `kernel` (major, minor); those
    /// namespaced by a later kernel, or all gated ones when the version is unknown, are
    /// left out, as upstream does.
    pub fn safe(kernel: Option<(u32, u32)>) -> Self {
        let sysctls = SAFE_SYSCTLS
            .iter()
            .filter(|(_, min)| min.is_none_or(|min| kernel.is_some_and(|k| k >= min)))
            .filter_map(|(name, _)| Some(((*name).to_owned(), namespaced_by(name)?)))
            .collect();
        Self { sysctls }
    }

    /// Why `sysctl` may not be set by a pod with the given host namespaces (upstream
    /// `validateSysctl`), `None` when it may.
    fn validate(&self, sysctl: &str, host_net: bool, host_ipc: bool) -> Option<String> {
        let sysctl = to_dots(sysctl);
        let Some(ns) = self.sysctls.get(&sysctl) else {
            return Some(format!("{sysctl:?} not allowlisted"));
        };
        let host = match ns {
            Namespace::Ipc => host_ipc,
            Namespace::Net => host_net,
        };
        host.then(|| format!("{sysctl:?} not allowed with host {} enabled", ns.as_str()))
    }

    /// Admits `pod` unless one of its `securityContext.sysctls` is not allowed: the
    /// rejection is `SysctlForbidden`, `forbidden sysctl: <why>` (upstream `Admit`).
    pub fn admit(&self, pod: &Pod) -> Result<(), PodAdmitRejection> {
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(());
        };
        let sysctls = spec
            .security_context
            .as_ref()
            .and_then(|s| s.sysctls.as_ref());
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        for s in sysctls.into_iter().flatten() {
            if let Some(why) = self.validate(&s.name, host_net, host_ipc) {
                return Err(PodAdmitRejection {
                    reason: FORBIDDEN_REASON.to_owned(),
                    message: format!("forbidden sysctl: {why}"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, Sysctl};

    fn pod(names: &[&str], host_net: bool, host_ipc: bool) -> Pod {
        Pod {
            spec: Some(PodSpec {
                host_network: Some(host_net),
                host_ipc: Some(host_ipc),
                security_context: Some(PodSecurityContext {
                    sysctls: Some(
                        names
                            .iter()
                            .map(|n| Sysctl {
                                name: (*n).to_owned(),
                                value: "1".into(),
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn safe_sysctls_pass_and_others_are_forbidden() {
        let allow = SysctlAllowlist::safe(Some((6, 8)));
        let message = |p: &Pod| allow.admit(p).err().map(|r| (r.reason, r.message));
        assert_eq!(message(&Pod::default()), None);
        assert_eq!(
            message(&pod(
                &["net.ipv4.tcp_syncookies", "kernel.shm_rmid_forced"],
                false,
                false
            )),
            None
        );
        assert_eq!(message(&pod(&["net/ipv4/tcp_rmem"], false, false)), None);
        assert_eq!(
            message(&pod(
                &["net.ipv4.tcp_syncookies", "kernel.msgmax"],
                false,
                false
            )),
            Some((
                "SysctlForbidden".to_owned(),
                "forbidden sysctl: \"kernel.msgmax\" not allowlisted".to_owned()
            ))
        );
        assert_eq!(
            message(&pod(&["net.ipv4.ip_local_port_range"], true, false)),
            Some((
                "SysctlForbidden".to_owned(),
                "forbidden sysctl: \"net.ipv4.ip_local_port_range\" not allowed with host Net enabled"
                    .to_owned()
            ))
        );
        assert_eq!(
            message(&pod(&["kernel.shm_rmid_forced"], false, true)).map(|m| m.1),
            Some(
                "forbidden sysctl: \"kernel.shm_rmid_forced\" not allowed with host IPC enabled"
                    .to_owned()
            )
        );
        assert_eq!(
            message(&pod(&["kernel.shm_rmid_forced"], true, false)),
            None
        );
    }

    #[test]
    fn kernel_version_gates_newer_sysctls() {
        let old = SysctlAllowlist::safe(Some((4, 14)));
        assert!(
            old.admit(&pod(&["net.ipv4.tcp_fin_timeout"], false, false))
                .is_ok()
        );
        assert!(
            old.admit(&pod(&["net.ipv4.tcp_wmem"], false, false))
                .is_err()
        );
        let unknown = SysctlAllowlist::safe(None);
        assert!(
            unknown
                .admit(&pod(&["net.ipv4.tcp_syncookies"], false, false))
                .is_ok()
        );
        assert!(
            unknown
                .admit(&pod(&["net.ipv4.tcp_keepalive_time"], false, false))
                .is_err()
        );
        assert_eq!(parse_kernel_version("6.8.0-45-generic\n"), Some((6, 8)));
        assert_eq!(
            parse_kernel_version("5.15.153.1-microsoft-standard-WSL2"),
            Some((5, 15))
        );
        assert_eq!(parse_kernel_version("garbage"), None);
        assert_eq!(to_dots("kernel/shm_rmid_forced"), "kernel.shm_rmid_forced");
        assert_eq!(
            to_dots("net.ipv4.conf.eth0/1.rp_filter"),
            "net.ipv4.conf.eth0/1.rp_filter"
        );
    }
}
