//! The security context pieces of the OCI spec that are not mounts or seccomp:
//! capabilities, privileged mode and devices (containerd's `WithCapabilities`,
//! `WithPrivileged`, `WithHostDevices`, `WithDevices`).

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use k8s_cri::v1::{Device, LinuxContainerSecurityContext};
use oci_spec::runtime::{
    Capability, LinuxCapabilities, LinuxCapabilitiesBuilder, LinuxDevice, LinuxDeviceBuilder,
    LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, LinuxDeviceType,
};

use crate::error::{Error, Result};

/// Capabilities a container gets by default (containerd's `defaultUnixCaps`).
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// Every capability by its number (linux/capability.h): index N is capability N.
const CAPABILITIES_BY_NUMBER: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// Directories under `/dev` whose devices privileged containers do not get
/// (containerd's `getDevices` skips the same).
const SKIPPED_DEV_DIRS: &[&str] = &["pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev"];

fn parse_capability(name: &str) -> Result<Capability> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    Capability::from_str(bare)
        .map_err(|_| Error::InvalidArgument(format!("unknown capability {name:?}")))
}

/// The capabilities in the bounding set of the runtime process: what `ALL` and privileged
/// mean (containerd's `WithAllCurrentCapabilities`); asking runc for more would fail.
pub fn current_capabilities() -> HashSet<Capability> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    capabilities_in_mask(&status, "CapBnd:")
}

/// The capabilities whose bits are set in the `field` line (e.g. `CapBnd:`) of a
/// `/proc/<pid>/status` text.
fn capabilities_in_mask(status: &str, field: &str) -> HashSet<Capability> {
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    CAPABILITIES_BY_NUMBER
        .iter()
        .enumerate()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .filter_map(|(_, name)| Capability::from_str(name).ok())
        .collect()
}

/// The container's capability set: all of `current` when privileged, else the defaults
/// with the security context's additions and drops (names with or without `CAP_`), in
/// containerd's order: `add: [ALL]` starts from every capability, `drop: [ALL]` from none,
/// then the named additions, then the named drops.
pub fn capabilities(
    sc: &LinuxContainerSecurityContext,
    current: &HashSet<Capability>,
) -> Result<HashSet<Capability>> {
    if sc.privileged {
        return Ok(current.clone());
    }
    let requested = sc.capabilities.clone().unwrap_or_default();
    let is_all = |name: &String| name.eq_ignore_ascii_case("ALL");
    let mut caps: HashSet<Capability> = if requested.drop_capabilities.iter().any(is_all) {
        HashSet::new()
    } else if requested.add_capabilities.iter().any(is_all) {
        current.clone()
    } else {
        DEFAULT_CAPABILITIES
            .iter()
            .map(|c| parse_capability(c))
            .collect::<Result<_>>()?
    };
    for name in requested.add_capabilities.iter().filter(|c| !is_all(c)) {
        caps.insert(parse_capability(name)?);
    }
    for name in requested.drop_capabilities.iter().filter(|c| !is_all(c)) {
        caps.remove(&parse_capability(name)?);
    }
    Ok(caps)
}

/// `caps` as the bounding, effective and permitted sets (no inheritable or ambient
/// capabilities, as containerd).
pub fn capability_sets(caps: &HashSet<Capability>) -> Result<LinuxCapabilities> {
    let mut sets = LinuxCapabilitiesBuilder::default()
        .bounding(caps.clone())
        .effective(caps.clone())
        .permitted(caps.clone())
        .build()
        .map_err(super::spec::spec_error)?;
    sets.set_inheritable(None).set_ambient(None);
    Ok(sets)
}

/// Rejects a privileged container in a sandbox that is not privileged, with containerd's
/// error (gRPC `Unknown`).
pub fn check_privileged(
    sc: &LinuxContainerSecurityContext,
    sandbox_privileged: bool,
) -> Result<()> {
    if sc.privileged && !sandbox_privileged {
        return Err(Error::Unknown(
            "no privileged container allowed in sandbox".into(),
        ));
    }
    Ok(())
}

/// The device node at `path` as an OCI device seen at `container_path`; `None` when `path`
/// is not a character or block device.
fn device_at(path: &Path, container_path: &Path) -> Result<Option<LinuxDevice>> {
    let meta = std::fs::metadata(path)
        .map_err(|err| Error::Unknown(format!("device {}: {err}", path.display())))?;
    let typ = match meta.file_type() {
        t if t.is_char_device() => LinuxDeviceType::C,
        t if t.is_block_device() => LinuxDeviceType::B,
        _ => return Ok(None),
    };
    let rdev = meta.rdev();
    LinuxDeviceBuilder::default()
        .path(container_path)
        .typ(typ)
        .major(nix::sys::stat::major(rdev) as i64)
        .minor(nix::sys::stat::minor(rdev) as i64)
        .file_mode(meta.mode() & 0o7777)
        .uid(meta.uid())
        .gid(meta.gid())
        .build()
        .map(Some)
        .map_err(super::spec::spec_error)
}

/// A cgroup device rule allowing `access` (`r`, `w`, `m` letters) on `device`.
fn device_rule(device: &LinuxDevice, access: &str) -> Result<LinuxDeviceCgroup> {
    LinuxDeviceCgroupBuilder::default()
        .allow(true)
        .typ(device.typ())
        .major(device.major())
        .minor(device.minor())
        .access(access)
        .build()
        .map_err(super::spec::spec_error)
}

/// The CRI devices (`host_path` → `container_path` with cgroup `permissions`, default
/// `rwm`): spec devices plus their cgroup rules. A missing host path or one that is not a
/// device node fails CreateContainer (`Unknown`, as containerd's `WithDevices`).
pub fn devices(cri: &[Device]) -> Result<(Vec<LinuxDevice>, Vec<LinuxDeviceCgroup>)> {
    let mut devices = Vec::new();
    let mut rules = Vec::new();
    for d in cri {
        let container_path = match d.container_path.as_str() {
            "" => d.host_path.as_str(),
            path => path,
        };
        let device = device_at(Path::new(&d.host_path), Path::new(container_path))?
            .ok_or_else(|| Error::Unknown(format!("{:?} is not a device node", d.host_path)))?;
        let access = match d.permissions.as_str() {
            "" => "rwm",
            p if p.chars().all(|c| "rwm".contains(c)) => p,
            p => {
                return Err(Error::InvalidArgument(format!(
                    "invalid device permissions {p:?}"
                )));
            }
        };
        rules.push(device_rule(&device, access)?);
        devices.push(device);
    }
    Ok((devices, rules))
}

/// Every device node under the host's `/dev` (privileged containers get them all), except
/// those in the directories containerd skips too (`pts`, `shm`, `fd`, `mqueue`, ...) and
/// `/dev/console`.
pub fn host_devices() -> Result<Vec<LinuxDevice>> {
    let mut out = Vec::new();
    collect_devices(Path::new("/dev"), &mut out)?;
    Ok(out)
}

fn collect_devices(dir: &Path, out: &mut Vec<LinuxDevice>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path: PathBuf = entry.path();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            let name = entry.file_name();
            if !SKIPPED_DEV_DIRS.iter().any(|s| name == *s) {
                collect_devices(&path, out)?;
            }
        } else if (file_type.is_char_device() || file_type.is_block_device())
            && path != Path::new("/dev/console")
        {
            // A device that vanished meanwhile is skipped.
            if let Ok(Some(device)) = device_at(&path, &path) {
                out.push(device);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::Capability as CriCapability;

    fn sc(add: &[&str], drop: &[&str]) -> LinuxContainerSecurityContext {
        LinuxContainerSecurityContext {
            capabilities: Some(CriCapability {
                add_capabilities: add.iter().map(|s| s.to_string()).collect(),
                drop_capabilities: drop.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn capabilities_add_drop() {
        let current = capabilities_in_mask("CapBnd:\t000001fffeffffff\n", "CapBnd:");
        assert_eq!(current.len(), CAPABILITIES_BY_NUMBER.len() - 1);
        assert!(!current.contains(&Capability::SysResource));
        let caps = capabilities(&sc(&["NET_ADMIN"], &["CAP_KILL"]), &current).unwrap();
        assert!(caps.contains(&Capability::NetAdmin));
        assert!(!caps.contains(&Capability::Kill));
        assert_eq!(caps.len(), DEFAULT_CAPABILITIES.len());
        assert!(
            capabilities(&sc(&[], &["all"]), &current)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            capabilities(&sc(&["KILL"], &["ALL"]), &current).unwrap(),
            HashSet::from([Capability::Kill])
        );
        let all = capabilities(&sc(&["ALL"], &["SYS_ADMIN"]), &current).unwrap();
        assert_eq!(all.len(), current.len() - 1);
        assert!(matches!(
            capabilities(&sc(&["NOPE"], &[]), &current),
            Err(Error::InvalidArgument(_))
        ));
        let privileged = LinuxContainerSecurityContext {
            privileged: true,
            ..sc(&[], &["ALL"])
        };
        assert_eq!(capabilities(&privileged, &current).unwrap(), current);
    }

    #[test]
    fn privileged_needs_a_privileged_sandbox() {
        let privileged = LinuxContainerSecurityContext {
            privileged: true,
            ..Default::default()
        };
        assert!(matches!(
            check_privileged(&privileged, false),
            Err(Error::Unknown(_))
        ));
        assert!(check_privileged(&privileged, true).is_ok());
    }

    #[test]
    fn device_nodes() {
        let (devices, rules) = devices(&[Device {
            host_path: "/dev/null".into(),
            container_path: "/dev/xnull".into(),
            permissions: "rw".into(),
        }])
        .unwrap();
        assert_eq!(devices[0].path(), Path::new("/dev/xnull"));
        assert_eq!((devices[0].major(), devices[0].minor()), (1, 3));
        assert_eq!(rules[0].access().as_deref(), Some("rw"));
        assert!(
            super::devices(&[Device {
                host_path: "/etc/hostname".into(),
                ..Default::default()
            }])
            .is_err()
        );
        assert!(
            host_devices()
                .unwrap()
                .iter()
                .any(|d| d.path() == Path::new("/dev/null"))
        );
    }
}
