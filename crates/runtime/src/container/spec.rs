//! OCI runtime spec generation from the image config and the CRI ContainerConfig,
//! following containerd's CRI plugin (`pkg/cri/server/container_create_linux.go` and
//! `oci/spec.go` defaults).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use k8s_cri::v1::{
    ContainerConfig, LinuxContainerResources, LinuxContainerSecurityContext, MountPropagation,
};
use oci_spec::runtime::{
    Capabilities, Capability, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxCpuBuilder,
    LinuxDeviceCgroupBuilder, LinuxMemoryBuilder, LinuxNamespaceBuilder, LinuxNamespaceType,
    LinuxResourcesBuilder, Mount, MountBuilder, Process, Root, Spec,
};

use super::user;
use crate::error::{Error, Result};
use crate::sandbox::{Paths, Sandbox, files, ns};

/// PATH used when the image sets none (containerd's `defaultUnixEnv`).
const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// TERM of processes with a terminal (containerd sets it for tty containers and execs).
pub const TERM: &str = "TERM=xterm";

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

/// Every capability known to the OCI runtime spec, for `add: [ALL]`.
const ALL_CAPABILITIES: &[&str] = &[
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

/// Paths masked in every container (containerd's `defaultUnixMaskedPaths`).
pub const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    "/proc/scsi",
];

/// Paths mounted read-only in every container (containerd's `defaultUnixReadonlyPaths`).
pub const DEFAULT_READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Everything the spec is made from.
pub struct Inputs<'a> {
    /// The CRI container config.
    pub config: &'a ContainerConfig,
    /// The pod sandbox (namespaces, sysctls, hostname).
    pub sandbox: &'a Sandbox,
    /// The sandbox's volatile paths (namespace pins, hosts/hostname/resolv.conf).
    pub sandbox_paths: &'a Paths,
    /// The image configuration.
    pub image: &'a oci_spec::image::ImageConfiguration,
    /// The mounted rootfs (read for `/etc/passwd` and `/etc/group`).
    pub rootfs: &'a Path,
    /// linux.cgroupsPath.
    pub cgroups_path: &'a Path,
    /// Lowest oom_score_adj allowed, see [`crate::oom::floor`].
    pub oom_floor: Option<i32>,
}

/// Builds the OCI runtime spec (`config.json`) of a container. `InvalidArgument` for
/// requests that cannot be honoured (no command, unknown user or capability).
pub fn build(inputs: &Inputs<'_>) -> Result<Spec> {
    let config = inputs.config;
    let linux_config = config.linux.clone().unwrap_or_default();
    let sc = linux_config.security_context.clone().unwrap_or_default();
    if sc.privileged {
        return Err(Error::InvalidArgument(
            "privileged containers are not supported yet".into(),
        ));
    }
    let image = inputs.image.config().clone().unwrap_or_default();
    let hostname = std::fs::read_to_string(inputs.sandbox_paths.files.join(files::HOSTNAME))
        .unwrap_or_default();

    let user = user::resolve(
        inputs.rootfs,
        image.user().as_deref().unwrap_or(""),
        Some(&sc),
    )?;
    let mut process = Process::default();
    process
        .set_terminal(Some(config.tty))
        .set_args(Some(process_args(
            config,
            image.entrypoint().as_deref(),
            image.cmd().as_deref(),
        )?))
        .set_env(Some(environment(
            hostname.trim(),
            image.env().as_deref().unwrap_or_default(),
            config,
        )))
        .set_cwd(PathBuf::from(working_dir(
            config,
            image.working_dir().as_deref(),
        )))
        .set_capabilities(Some(capability_sets(&sc)?))
        .set_no_new_privileges(Some(sc.no_new_privs))
        .set_rlimits(None)
        .set_oom_score_adj(Some(crate::oom::restrict(
            linux_config
                .resources
                .as_ref()
                .map_or(0, |r| r.oom_score_adj),
            inputs.oom_floor,
        )));
    let process_user = process.user_mut();
    process_user.set_uid(user.uid).set_gid(user.gid);
    process_user
        .set_additional_gids((!user.additional_gids.is_empty()).then_some(user.additional_gids));

    let masked = if sc.masked_paths.is_empty() {
        strings(DEFAULT_MASKED_PATHS)
    } else {
        sc.masked_paths.clone()
    };
    let readonly = if sc.readonly_paths.is_empty() {
        strings(DEFAULT_READONLY_PATHS)
    } else {
        sc.readonly_paths.clone()
    };
    let (mounts, rootfs_propagation) = mounts(config, inputs.sandbox_paths, sc.readonly_rootfs)?;
    let sysctls = inputs
        .sandbox
        .config
        .linux
        .as_ref()
        .map(|l| l.sysctls.clone())
        .filter(|s| !s.is_empty());
    let linux = LinuxBuilder::default()
        .namespaces(namespaces(inputs.sandbox, inputs.sandbox_paths)?)
        .cgroups_path(inputs.cgroups_path.to_path_buf())
        .resources(resources(linux_config.resources.as_ref())?)
        .masked_paths(masked)
        .readonly_paths(readonly)
        .build()
        .map_err(spec_error)?;
    let mut linux = linux;
    linux
        .set_sysctl(sysctls)
        .set_rootfs_propagation(rootfs_propagation)
        .set_devices(None);

    let mut root = Root::default();
    root.set_path(PathBuf::from("rootfs"))
        .set_readonly(Some(sc.readonly_rootfs));
    let mut spec = Spec::default();
    spec.set_version("1.0.2-dev".into())
        .set_root(Some(root))
        .set_process(Some(process))
        .set_hostname(None)
        .set_mounts(Some(mounts))
        .set_annotations(None)
        .set_linux(Some(linux));
    Ok(spec)
}

fn spec_error(err: oci_spec::OciSpecError) -> Error {
    Error::Internal(anyhow::anyhow!("building the OCI spec: {err}"))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The process arguments by the Kubernetes rules: `command` replaces the image Entrypoint
/// and drops its Cmd; `args` replace Cmd.
pub fn process_args(
    config: &ContainerConfig,
    entrypoint: Option<&[String]>,
    cmd: Option<&[String]>,
) -> Result<Vec<String>> {
    let mut args: Vec<String> = if config.command.is_empty() {
        entrypoint.unwrap_or_default().to_vec()
    } else {
        config.command.clone()
    };
    if !config.args.is_empty() {
        args.extend(config.args.iter().cloned());
    } else if config.command.is_empty() {
        args.extend(cmd.unwrap_or_default().iter().cloned());
    }
    if args.is_empty() {
        return Err(Error::InvalidArgument("no command specified".into()));
    }
    Ok(args)
}

/// `HOSTNAME` (and [`TERM`] with a tty), then the image's environment, then the CRI envs;
/// a later entry replaces an earlier one with the same name. PATH defaults to [`DEFAULT_PATH`].
pub fn environment(hostname: &str, image_env: &[String], config: &ContainerConfig) -> Vec<String> {
    let mut env: Vec<String> = vec![DEFAULT_PATH.to_string(), format!("HOSTNAME={hostname}")];
    if config.tty {
        env.push(TERM.to_string());
    }
    let cri = config
        .envs
        .iter()
        .map(|kv| format!("{}={}", kv.key, kv.value));
    for entry in image_env.iter().cloned().chain(cri) {
        let key = entry.split('=').next().unwrap_or_default().to_string();
        env.retain(|existing| existing.split('=').next() != Some(key.as_str()));
        env.push(entry);
    }
    env
}

fn working_dir(config: &ContainerConfig, image_dir: Option<&str>) -> String {
    [config.working_dir.as_str(), image_dir.unwrap_or_default()]
        .into_iter()
        .find(|dir| !dir.is_empty())
        .unwrap_or("/")
        .to_string()
}

fn parse_capability(name: &str) -> Result<Capability> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    Capability::from_str(bare)
        .map_err(|_| Error::InvalidArgument(format!("unknown capability {name:?}")))
}

/// Default capabilities with the security context's additions and drops (`ALL` allowed in
/// either), as the bounding, effective and permitted sets.
fn capability_sets(
    sc: &LinuxContainerSecurityContext,
) -> Result<oci_spec::runtime::LinuxCapabilities> {
    let requested = sc.capabilities.clone().unwrap_or_default();
    let is_all = |list: &[String]| list.iter().any(|c| c.eq_ignore_ascii_case("ALL"));
    let mut caps: Capabilities = if is_all(&requested.drop_capabilities) {
        HashSet::new()
    } else {
        DEFAULT_CAPABILITIES
            .iter()
            .map(|c| parse_capability(c))
            .collect::<Result<_>>()?
    };
    if is_all(&requested.add_capabilities) {
        caps.extend(
            ALL_CAPABILITIES
                .iter()
                .map(|c| parse_capability(c))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    for name in requested
        .add_capabilities
        .iter()
        .filter(|c| !c.eq_ignore_ascii_case("ALL"))
    {
        caps.insert(parse_capability(name)?);
    }
    for name in requested
        .drop_capabilities
        .iter()
        .filter(|c| !c.eq_ignore_ascii_case("ALL"))
    {
        caps.remove(&parse_capability(name)?);
    }
    LinuxCapabilitiesBuilder::default()
        .bounding(caps.clone())
        .effective(caps.clone())
        .permitted(caps)
        .build()
        .map_err(spec_error)
        .map(|mut sets| {
            sets.set_inheritable(None).set_ambient(None);
            sets
        })
}

fn mount(destination: &str, typ: &str, source: &Path, options: &[&str]) -> Result<Mount> {
    MountBuilder::default()
        .destination(destination)
        .typ(typ)
        .source(source)
        .options(strings(options))
        .build()
        .map_err(spec_error)
}

/// The standard mounts, the sandbox's hosts/hostname/resolv.conf and the CRI mounts (CRI
/// mounts win on the same destination), plus the rootfs propagation the CRI mounts need.
fn mounts(
    config: &ContainerConfig,
    paths: &Paths,
    readonly_rootfs: bool,
) -> Result<(Vec<Mount>, Option<String>)> {
    let cri_destinations: HashSet<PathBuf> = config
        .mounts
        .iter()
        .map(|m| clean(&m.container_path))
        .collect();
    let rw = if readonly_rootfs { "ro" } else { "rw" };
    let mut out = vec![
        mount(
            "/proc",
            "proc",
            Path::new("proc"),
            &["nosuid", "noexec", "nodev"],
        )?,
        mount(
            "/dev",
            "tmpfs",
            Path::new("tmpfs"),
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            Path::new("devpts"),
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            Path::new("shm"),
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        mount(
            "/dev/mqueue",
            "mqueue",
            Path::new("mqueue"),
            &["nosuid", "noexec", "nodev"],
        )?,
        mount(
            "/sys",
            "sysfs",
            Path::new("sysfs"),
            &["nosuid", "noexec", "nodev", "ro"],
        )?,
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            Path::new("cgroup"),
            &["nosuid", "noexec", "nodev", "relatime", "ro"],
        )?,
    ];
    for (file, destination) in [
        (files::HOSTNAME, "/etc/hostname"),
        (files::HOSTS, "/etc/hosts"),
        (files::RESOLV_CONF, "/etc/resolv.conf"),
    ] {
        out.push(mount(
            destination,
            "bind",
            &paths.files.join(file),
            &["rbind", "rprivate", rw],
        )?);
    }
    out.retain(|m| !cri_destinations.contains(m.destination()));

    let mut cri_mounts = config.mounts.clone();
    cri_mounts.sort_by_key(|m| clean(&m.container_path).components().count());
    let mut propagation = None;
    for m in &cri_mounts {
        if !Path::new(&m.container_path).is_absolute() {
            return Err(Error::InvalidArgument(format!(
                "mount destination {:?} is not absolute",
                m.container_path
            )));
        }
        let source = host_source(&m.host_path)?;
        let mode = match MountPropagation::try_from(m.propagation)
            .unwrap_or(MountPropagation::PropagationPrivate)
        {
            MountPropagation::PropagationPrivate => "rprivate",
            MountPropagation::PropagationHostToContainer => {
                propagation.get_or_insert("rslave");
                "rslave"
            }
            MountPropagation::PropagationBidirectional => {
                propagation = Some("rshared");
                "rshared"
            }
        };
        let access = if m.readonly { "ro" } else { "rw" };
        out.push(mount(
            &m.container_path,
            "bind",
            &source,
            &["rbind", mode, access],
        )?);
    }
    Ok((out, propagation.map(str::to_string)))
}

/// The host side of a CRI mount: created as a directory when missing (as containerd and
/// dockershim do), symlinks resolved.
fn host_source(host_path: &str) -> Result<PathBuf> {
    let path = Path::new(host_path);
    if !path.is_absolute() {
        return Err(Error::InvalidArgument(format!(
            "mount source {host_path:?} is not absolute"
        )));
    }
    if std::fs::symlink_metadata(path).is_err() {
        std::fs::create_dir_all(path).map_err(|err| {
            Error::Internal(anyhow::anyhow!("creating mount source {host_path}: {err}"))
        })?;
    }
    Ok(path.canonicalize()?)
}

fn clean(path: &str) -> PathBuf {
    Path::new(path).components().collect()
}

/// Network, IPC and UTS joined from the sandbox pins (the node's when not pinned), new PID
/// and mount namespaces (the node's PID namespace for `pid: NODE` pods).
fn namespaces(sandbox: &Sandbox, paths: &Paths) -> Result<Vec<oci_spec::runtime::LinuxNamespace>> {
    let (_, pid, _) = sandbox.namespace_modes();
    let mut out = vec![
        LinuxNamespaceBuilder::default()
            .typ(LinuxNamespaceType::Mount)
            .build()
            .map_err(spec_error)?,
    ];
    if pid != k8s_cri::v1::NamespaceMode::Node {
        out.push(
            LinuxNamespaceBuilder::default()
                .typ(LinuxNamespaceType::Pid)
                .build()
                .map_err(spec_error)?,
        );
    }
    for (kind, typ) in [
        (ns::Kind::Net, LinuxNamespaceType::Network),
        (ns::Kind::Ipc, LinuxNamespaceType::Ipc),
        (ns::Kind::Uts, LinuxNamespaceType::Uts),
    ] {
        if sandbox.pinned.contains(&kind) {
            let path = ns::pin_path(&paths.ns, kind);
            out.push(
                LinuxNamespaceBuilder::default()
                    .typ(typ)
                    .path(path)
                    .build()
                    .map_err(spec_error)?,
            );
        }
    }
    Ok(out)
}

/// cgroup limits: device access denied except runc's defaults, CPU shares/quota/period and
/// cpuset, memory limit.
fn resources(res: Option<&LinuxContainerResources>) -> Result<oci_spec::runtime::LinuxResources> {
    let deny_all = LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()
        .map_err(spec_error)?;
    let mut builder = LinuxResourcesBuilder::default().devices(vec![deny_all]);
    if let Some(res) = res {
        let mut cpu = LinuxCpuBuilder::default();
        if res.cpu_shares > 0 {
            cpu = cpu.shares(res.cpu_shares as u64);
        }
        if res.cpu_quota != 0 {
            cpu = cpu.quota(res.cpu_quota);
        }
        if res.cpu_period > 0 {
            cpu = cpu.period(res.cpu_period as u64);
        }
        if !res.cpuset_cpus.is_empty() {
            cpu = cpu.cpus(res.cpuset_cpus.clone());
        }
        if !res.cpuset_mems.is_empty() {
            cpu = cpu.mems(res.cpuset_mems.clone());
        }
        builder = builder.cpu(cpu.build().map_err(spec_error)?);
        if res.memory_limit_in_bytes > 0 {
            builder = builder.memory(
                LinuxMemoryBuilder::default()
                    .limit(res.memory_limit_in_bytes)
                    .build()
                    .map_err(spec_error)?,
            );
        }
    }
    builder.build().map_err(spec_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::{Capability as CriCapability, KeyValue};

    #[test]
    fn kubernetes_command_rules() {
        let ep = vec!["/entry".to_string()];
        let cmd = vec!["default".to_string()];
        let cfg = |command: &[&str], args: &[&str]| ContainerConfig {
            command: command.iter().map(|s| s.to_string()).collect(),
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        assert_eq!(
            process_args(&cfg(&[], &[]), Some(&ep), Some(&cmd)).unwrap(),
            ["/entry", "default"]
        );
        assert_eq!(
            process_args(&cfg(&["/bin/x"], &[]), Some(&ep), Some(&cmd)).unwrap(),
            ["/bin/x"]
        );
        assert_eq!(
            process_args(&cfg(&[], &["a"]), Some(&ep), Some(&cmd)).unwrap(),
            ["/entry", "a"]
        );
        assert_eq!(
            process_args(&cfg(&["/bin/x"], &["a"]), Some(&ep), Some(&cmd)).unwrap(),
            ["/bin/x", "a"]
        );
        assert!(process_args(&cfg(&[], &[]), None, None).is_err());
    }

    #[test]
    fn env_order_and_override() {
        let cfg = ContainerConfig {
            envs: vec![KeyValue {
                key: "A".into(),
                value: "cri".into(),
            }],
            ..Default::default()
        };
        let env = environment(
            "pod",
            &["PATH=/bin".into(), "A=image".into(), "B=1".into()],
            &cfg,
        );
        assert_eq!(env, ["HOSTNAME=pod", "PATH=/bin", "B=1", "A=cri"]);
        let tty = ContainerConfig { tty: true, ..cfg };
        let env = environment("pod", &["TERM=vt100".into()], &tty);
        assert!(
            env.ends_with(&["TERM=vt100".into(), "A=cri".into()]),
            "{env:?}"
        );
        let env = environment("pod", &[], &tty);
        assert!(env.contains(&TERM.to_string()), "{env:?}");
    }

    #[test]
    fn capabilities_add_drop() {
        let sc = LinuxContainerSecurityContext {
            capabilities: Some(CriCapability {
                add_capabilities: vec!["NET_ADMIN".into()],
                drop_capabilities: vec!["CAP_KILL".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let sets = capability_sets(&sc).unwrap();
        let eff = sets.effective().clone().unwrap();
        assert!(eff.contains(&Capability::NetAdmin));
        assert!(!eff.contains(&Capability::Kill));
        assert!(eff.contains(&Capability::Chown));
        assert_eq!(eff.len(), DEFAULT_CAPABILITIES.len());
        let drop_all = LinuxContainerSecurityContext {
            capabilities: Some(CriCapability {
                drop_capabilities: vec!["ALL".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(
            capability_sets(&drop_all)
                .unwrap()
                .effective()
                .clone()
                .unwrap()
                .is_empty()
        );
        let bad = LinuxContainerSecurityContext {
            capabilities: Some(CriCapability {
                add_capabilities: vec!["NOPE".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            capability_sets(&bad),
            Err(Error::InvalidArgument(_))
        ));
    }
}
