//! Seccomp: Skiff's RuntimeDefault profile and the CRI profile choice (containerd's
//! `generateSeccompSpecOpts`).
//!
//! # The RuntimeDefault profile
//!
//! A deny list, not an allow list: every syscall is allowed except those below, which
//! fail with `EPERM` (`clone3` with `ENOSYS`, so libc falls back to `clone`, whose flags a
//! filter can inspect). An allow list breaks programs that use new syscalls; a deny list
//! keeps the container working while closing what the container's capabilities would
//! otherwise leave open to kernel attack surface. Each group is denied unless the container
//! holds the capability that legitimately needs it (the capability-conditioned rules of
//! Docker's and containerd's default profiles):
//!
//! - always: kernel keyrings (`add_key`, `keyctl`, `request_key`: not namespaced), `bpf`,
//!   `perf_event_open`, `userfaultfd` (exploit primitive), `io_uring_*` (large attack
//!   surface, bypasses the other rules), obsolete or dangerous calls (`uselib`, `ustat`,
//!   `sysfs`, `_sysctl`, `nfsservctl`, `vm86`, `vm86old`, `lookup_dcookie`,
//!   `get_kernel_syms`, `query_module`, `create_module`);
//! - without `CAP_SYS_ADMIN`: mounting and namespaces (`mount`, `umount`, `umount2`,
//!   `pivot_root`, the new mount API, `unshare`, `setns`, `clone` with namespace flags,
//!   `clone3`), `swapon`, `swapoff`, `quotactl`, `name_to_handle_at`;
//! - without `CAP_SYS_MODULE`: `init_module`, `finit_module`, `delete_module`;
//! - without `CAP_SYS_BOOT`: `reboot`, `kexec_load`, `kexec_file_load`;
//! - without `CAP_SYS_TIME`: `settimeofday`, `stime`, `clock_settime`, `clock_adjtime`;
//! - without `CAP_SYS_PACCT`: `acct`; without `CAP_SYS_RAWIO`: `iopl`, `ioperm`;
//! - without `CAP_DAC_READ_SEARCH`: `open_by_handle_at` (the "shocker" escape);
//! - without `CAP_SYS_PTRACE`: `kcmp`, `process_vm_readv`, `process_vm_writev`, `ptrace`
//!   (ptrace is only unsafe in combination with seccomp on kernels before 4.8, and
//!   Skiff does not support those; it is still denied without the capability because
//!   debugging other processes of the pod is what `CAP_SYS_PTRACE` grants).

use std::collections::HashSet;
use std::path::Path;

use k8s_cri::v1::{LinuxContainerSecurityContext, SecurityProfile, security_profile::ProfileType};
use oci_spec::runtime::{Capability, LinuxSeccomp};

use crate::error::{Error, Result};

/// `EPERM`.
const EPERM: u32 = 1;
/// `ENOSYS`.
const ENOSYS: u32 = 38;

/// Namespace flags of `clone(2)` denied without `CAP_SYS_ADMIN`: NEWNS, NEWCGROUP, NEWUTS,
/// NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME.
const CLONE_NAMESPACE_FLAGS: &[u64] = &[
    0x0002_0000,
    0x0200_0000,
    0x0400_0000,
    0x0800_0000,
    0x1000_0000,
    0x2000_0000,
    0x4000_0000,
    0x0000_0080,
];

/// Syscalls denied unless the container holds the capability (`None`: always denied).
const DENIED: &[(Option<Capability>, &[&str])] = &[
    (
        None,
        &[
            "add_key",
            "keyctl",
            "request_key",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "uselib",
            "ustat",
            "sysfs",
            "_sysctl",
            "nfsservctl",
            "vm86",
            "vm86old",
            "lookup_dcookie",
            "get_kernel_syms",
            "query_module",
            "create_module",
        ],
    ),
    (
        Some(Capability::SysAdmin),
        &[
            "mount",
            "umount",
            "umount2",
            "pivot_root",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "move_mount",
            "open_tree",
            "mount_setattr",
            "unshare",
            "setns",
            "swapon",
            "swapoff",
            "quotactl",
            "name_to_handle_at",
        ],
    ),
    (
        Some(Capability::SysModule),
        &["init_module", "finit_module", "delete_module"],
    ),
    (
        Some(Capability::SysBoot),
        &["reboot", "kexec_load", "kexec_file_load"],
    ),
    (
        Some(Capability::SysTime),
        &["settimeofday", "stime", "clock_settime", "clock_adjtime"],
    ),
    (Some(Capability::SysPacct), &["acct"]),
    (Some(Capability::SysRawio), &["iopl", "ioperm"]),
    (Some(Capability::DacReadSearch), &["open_by_handle_at"]),
    (
        Some(Capability::SysPtrace),
        &["kcmp", "process_vm_readv", "process_vm_writev", "ptrace"],
    ),
];

/// The architectures a profile covers: the native one and its 32-bit companions.
fn architectures() -> &'static [&'static str] {
    if cfg!(target_arch = "aarch64") {
        &["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]
    } else {
        &["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    }
}

/// Skiff's RuntimeDefault profile for a container holding `caps` (see the module docs).
pub fn runtime_default(caps: &HashSet<Capability>) -> Result<LinuxSeccomp> {
    let denied: Vec<&str> = DENIED
        .iter()
        .filter(|(cap, _)| cap.is_none_or(|cap| !caps.contains(&cap)))
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    let mut syscalls = vec![serde_json::json!({
        "names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
    })];
    if !caps.contains(&Capability::SysAdmin) {
        syscalls.push(serde_json::json!({
            "names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS,
        }));
        // One rule per flag: the rules of a syscall are alternatives, the args of one rule
        // must all match. `clone`'s flags are argument 0 on x86_64 and aarch64.
        syscalls.extend(CLONE_NAMESPACE_FLAGS.iter().map(|flag| {
            serde_json::json!({
                "names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
                "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
            })
        }));
    }
    let profile = serde_json::json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": architectures(),
        "syscalls": syscalls,
    });
    serde_json::from_value(profile)
        .map_err(|err| Error::Internal(anyhow::anyhow!("building the seccomp profile: {err}")))
}

/// A profile read from a JSON file on the node (CRI `Localhost`). A missing or unreadable
/// file fails CreateContainer with `Unknown`, as containerd's `seccomp.WithProfile` error.
pub fn localhost(path: &str) -> Result<LinuxSeccomp> {
    let path = path.strip_prefix("localhost/").unwrap_or(path);
    if !Path::new(path).is_absolute() {
        return Err(Error::InvalidArgument(format!(
            "seccomp profile path {path:?} is not absolute"
        )));
    }
    let text = std::fs::read(path)
        .map_err(|err| Error::Unknown(format!("cannot load seccomp profile {path:?}: {err}")))?;
    serde_json::from_slice(&text)
        .map_err(|err| Error::Unknown(format!("decoding seccomp profile {path:?}: {err}")))
}

/// The profile the security context asks for, `None` for unconfined. Privileged
/// containers are unconfined. The `seccomp` field wins over the deprecated
/// `seccomp_profile_path` (`""` and `unconfined`: none; `runtime/default` or
/// `docker/default`: RuntimeDefault; `localhost/<path>`: that file).
pub fn profile(
    sc: &LinuxContainerSecurityContext,
    caps: &HashSet<Capability>,
) -> Result<Option<LinuxSeccomp>> {
    if sc.privileged {
        return Ok(None);
    }
    if let Some(SecurityProfile {
        profile_type,
        localhost_ref,
    }) = &sc.seccomp
    {
        return match ProfileType::try_from(*profile_type) {
            Ok(ProfileType::RuntimeDefault) => runtime_default(caps).map(Some),
            Ok(ProfileType::Unconfined) => Ok(None),
            Ok(ProfileType::Localhost) => localhost(localhost_ref).map(Some),
            Err(_) => Err(Error::InvalidArgument(format!(
                "unknown seccomp profile type {profile_type}"
            ))),
        };
    }
    #[allow(deprecated)]
    let path = sc.seccomp_profile_path.as_str();
    match path {
        "" | "unconfined" => Ok(None),
        "runtime/default" | "docker/default" => runtime_default(caps).map(Some),
        path if path.starts_with("localhost/") => localhost(path).map(Some),
        path => Err(Error::InvalidArgument(format!(
            "unsupported seccomp profile {path:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied_names(profile: &LinuxSeccomp) -> Vec<String> {
        profile
            .syscalls()
            .clone()
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.names().clone())
            .collect()
    }

    #[test]
    fn capabilities_lift_their_rules() {
        let none = runtime_default(&HashSet::new()).unwrap();
        let names = denied_names(&none);
        for name in [
            "mount",
            "unshare",
            "kexec_load",
            "keyctl",
            "clone",
            "clone3",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} not denied");
        }
        let admin = runtime_default(&HashSet::from([Capability::SysAdmin])).unwrap();
        let names = denied_names(&admin);
        assert!(!names.iter().any(|n| n == "mount" || n == "clone"));
        assert!(names.iter().any(|n| n == "keyctl"));
        let json = serde_json::to_value(&none).unwrap();
        assert_eq!(json["defaultAction"], "SCMP_ACT_ALLOW");
        assert_eq!(json["syscalls"][0]["errnoRet"], EPERM);
    }

    #[test]
    fn profile_choice() {
        let caps = HashSet::new();
        let mut sc = LinuxContainerSecurityContext::default();
        assert!(profile(&sc, &caps).unwrap().is_none());
        #[allow(deprecated)]
        {
            sc.seccomp_profile_path = "runtime/default".into();
        }
        assert!(profile(&sc, &caps).unwrap().is_some());
        sc.seccomp = Some(SecurityProfile {
            profile_type: ProfileType::Unconfined as i32,
            localhost_ref: String::new(),
        });
        assert!(profile(&sc, &caps).unwrap().is_none());
        sc.seccomp = Some(SecurityProfile {
            profile_type: ProfileType::Localhost as i32,
            localhost_ref: "/nonexistent/skiff-profile.json".into(),
        });
        assert!(matches!(profile(&sc, &caps), Err(Error::Unknown(_))));
        sc.privileged = true;
        assert!(profile(&sc, &caps).unwrap().is_none());
    }

    #[test]
    fn reads_a_localhost_profile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        std::fs::write(
            &path,
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}"#,
        )
        .unwrap();
        let profile = localhost(path.to_str().unwrap()).unwrap();
        assert_eq!(
            profile.default_action(),
            oci_spec::runtime::LinuxSeccompAction::ScmpActErrno
        );
    }
}
