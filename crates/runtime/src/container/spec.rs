//! OCI runtime spec generation from the image config and the CRI ContainerConfig,
//! following containerd's CRI plugin (`pkg/cri/server/container_create_linux.go` and
//! `oci/spec.go` defaults).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use k8s_cri::v1::{ContainerConfig, NamespaceMode};
use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxDeviceCgroupBuilder, LinuxNamespace, LinuxNamespaceBuilder,
    LinuxNamespaceType, LinuxResources, Process, Root, Spec,
};

use super::mounts::{MountInputs, mounts};
use super::{resources, seccomp, security, user};
use crate::error::{Error, Result};
use crate::sandbox::{Paths, Sandbox, files, ns};

/// PATH used when the image sets none (containerd's `defaultUnixEnv`).
const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// TERM of processes with a terminal (containerd sets it for tty containers and execs).
pub const TERM: &str = "TERM=xterm";

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

/// The PID namespace of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PidNamespace {
    /// A new one (CRI `CONTAINER`, or `POD` in a sandbox without a shared one).
    New,
    /// The node's (`NODE`).
    Node,
    /// Join the namespace at this path: the pod's (`POD`, `/proc/<holder>/ns/pid`) or the
    /// target container's (`TARGET`, `/proc/<init>/ns/pid`).
    Join(PathBuf),
}

/// Everything the spec is made from.
pub struct Inputs<'a> {
    /// The CRI container config.
    pub config: &'a ContainerConfig,
    /// The pod sandbox (namespaces, sysctls, hostname).
    pub sandbox: &'a Sandbox,
    /// The sandbox's volatile paths (namespace pins, hosts/hostname/resolv.conf, shm).
    pub sandbox_paths: &'a Paths,
    /// The image configuration.
    pub image: &'a oci_spec::image::ImageConfiguration,
    /// The mounted rootfs (read for `/etc/passwd` and `/etc/group`).
    pub rootfs: &'a Path,
    /// Where the image's volumes are created.
    pub volumes_dir: &'a Path,
    /// linux.cgroupsPath.
    pub cgroups_path: &'a Path,
    /// The container's PID namespace.
    pub pid_namespace: PidNamespace,
    /// Capabilities the runtime itself holds (what `ALL` and privileged grant), see
    /// [`security::current_capabilities`].
    pub available_capabilities: &'a HashSet<Capability>,
    /// Lowest oom_score_adj allowed (the runtime's own score without `CAP_SYS_RESOURCE`).
    pub oom_floor: Option<i32>,
}

/// Builds the OCI runtime spec (`config.json`) of a container. Errors: `InvalidArgument`
/// for requests that cannot be honoured (no command, unknown user or capability,
/// non-namespaced sysctl); `Unknown` where containerd fails with a plain error (privileged
/// container in an unprivileged sandbox, missing seccomp profile file, device or mount
/// propagation problems).
pub fn build(inputs: &Inputs<'_>) -> Result<Spec> {
    let config = inputs.config;
    let linux_config = config.linux.clone().unwrap_or_default();
    let sc = linux_config.security_context.clone().unwrap_or_default();
    let sandbox_sc = inputs
        .sandbox
        .config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.clone())
        .unwrap_or_default();
    security::check_privileged(&sc, sandbox_sc.privileged)?;
    let image = inputs.image.config().clone().unwrap_or_default();
    let hostname = std::fs::read_to_string(inputs.sandbox_paths.files.join(files::HOSTNAME))
        .unwrap_or_default();

    let user = user::resolve(
        inputs.rootfs,
        image.user().as_deref().unwrap_or(""),
        Some(&sc),
    )?;
    let caps = security::capabilities(&sc, inputs.available_capabilities)?;
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
        .set_capabilities(Some(security::capability_sets(&caps)?))
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

    // Privileged containers see everything: no masked or read-only paths (the kubelet
    // sends none for them either), all host devices.
    let (masked, readonly) = match sc.privileged {
        true => (Vec::new(), Vec::new()),
        false => (
            or_default(&sc.masked_paths, DEFAULT_MASKED_PATHS),
            or_default(&sc.readonly_paths, DEFAULT_READONLY_PATHS),
        ),
    };
    let (network_mode, _, ipc_mode) = inputs.sandbox.namespace_modes();
    let (mounts, rootfs_propagation) = mounts(
        config,
        &MountInputs {
            sandbox_paths: inputs.sandbox_paths,
            host_ipc: ipc_mode == NamespaceMode::Node,
            privileged: sc.privileged,
            host_network: network_mode == NamespaceMode::Node,
            readonly_rootfs: sc.readonly_rootfs,
            rootfs: inputs.rootfs,
            volumes_dir: inputs.volumes_dir,
            image_volumes: &image
                .volumes()
                .clone()
                .map(|v| v.into_iter().collect::<Vec<_>>())
                .unwrap_or_default(),
        },
    )?;
    let sysctls = inputs
        .sandbox
        .config
        .linux
        .as_ref()
        .map(|l| l.sysctls.clone())
        .unwrap_or_default();
    check_sysctls(
        sysctls.keys(),
        network_mode == NamespaceMode::Node,
        ipc_mode == NamespaceMode::Node,
    )?;
    let (devices, device_rules) = security::devices(&config.devices)?;
    let mut device_cgroup = vec![
        LinuxDeviceCgroupBuilder::default()
            .allow(sc.privileged)
            .access("rwm")
            .build()
            .map_err(spec_error)?,
    ];
    let mut devices = devices;
    if sc.privileged {
        devices.extend(security::host_devices()?);
    } else {
        device_cgroup.extend(device_rules);
    }
    let mut linux_resources = LinuxResources::default();
    linux_resources.set_devices(Some(device_cgroup));
    if let Some(res) = linux_config.resources.as_ref() {
        resources::apply(
            res,
            &mut linux_resources,
            crate::cgroup::hugetlb_available(),
        )?;
    }
    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces(
            inputs.sandbox,
            inputs.sandbox_paths,
            &inputs.pid_namespace,
        )?)
        .cgroups_path(inputs.cgroups_path.to_path_buf())
        .resources(linux_resources)
        .masked_paths(masked)
        .readonly_paths(readonly)
        .build()
        .map_err(spec_error)?;
    linux
        .set_sysctl((!sysctls.is_empty()).then_some(sysctls))
        .set_rootfs_propagation(rootfs_propagation)
        .set_seccomp(seccomp::profile(&sc, &caps)?)
        .set_devices((!devices.is_empty()).then_some(devices));

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

/// `requested`, or `defaults` when the kubelet sent none.
fn or_default(requested: &[String], defaults: &[&str]) -> Vec<String> {
    match requested.is_empty() {
        true => strings(defaults),
        false => requested.to_vec(),
    }
}

/// Accepts only sysctls of namespaces the pod owns (the kernel's namespaced sysctls, as
/// the kubelet's and runc's checks): IPC ones (`kernel.shm*`, `kernel.msg*`, `kernel.sem`,
/// `fs.mqueue.*`) unless the pod uses the node's IPC namespace, `net.*` unless it uses the
/// node's network. `InvalidArgument` otherwise.
fn check_sysctls<'a>(
    names: impl Iterator<Item = &'a String>,
    host_network: bool,
    host_ipc: bool,
) -> Result<()> {
    for name in names {
        let ipc = name.starts_with("kernel.shm")
            || name.starts_with("kernel.msg")
            || name == "kernel.sem"
            || name.starts_with("fs.mqueue.");
        let net = name.starts_with("net.");
        let allowed = (ipc && !host_ipc) || (net && !host_network);
        if !allowed {
            return Err(Error::InvalidArgument(format!(
                "sysctl {name:?} is not allowed: it is not namespaced, or the pod shares that \
                 namespace with the node"
            )));
        }
    }
    Ok(())
}

pub(crate) fn spec_error(err: oci_spec::OciSpecError) -> Error {
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

/// `HOSTNAME` (and `TERM` with a tty), then the image's environment, then the CRI envs;
/// a later entry replaces an earlier one with the same name. PATH defaults to the usual
/// system directories.
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

/// Mount namespace new; network, IPC and UTS joined from the sandbox pins (the node's
/// when not pinned); PID as [`PidNamespace`] says.
fn namespaces(sandbox: &Sandbox, paths: &Paths, pid: &PidNamespace) -> Result<Vec<LinuxNamespace>> {
    let namespace = |typ, path: Option<PathBuf>| {
        let builder = LinuxNamespaceBuilder::default().typ(typ);
        match path {
            Some(path) => builder.path(path),
            None => builder,
        }
        .build()
        .map_err(spec_error)
    };
    let mut out = vec![namespace(LinuxNamespaceType::Mount, None)?];
    match pid {
        PidNamespace::New => out.push(namespace(LinuxNamespaceType::Pid, None)?),
        PidNamespace::Node => {}
        PidNamespace::Join(path) => {
            out.push(namespace(LinuxNamespaceType::Pid, Some(path.clone()))?)
        }
    }
    for (kind, typ) in [
        (ns::Kind::Net, LinuxNamespaceType::Network),
        (ns::Kind::Ipc, LinuxNamespaceType::Ipc),
        (ns::Kind::Uts, LinuxNamespaceType::Uts),
    ] {
        if sandbox.pinned.contains(&kind) {
            out.push(namespace(typ, Some(ns::pin_path(&paths.ns, kind)))?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::KeyValue;

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
    fn only_namespaced_sysctls() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ok = names(&[
            "kernel.shm_rmid_forced",
            "net.ipv4.ip_forward",
            "fs.mqueue.msg_max",
        ]);
        assert!(check_sysctls(ok.iter(), false, false).is_ok());
        assert!(check_sysctls(names(&["vm.swappiness"]).iter(), false, false).is_err());
        assert!(check_sysctls(names(&["net.ipv4.ip_forward"]).iter(), true, false).is_err());
        assert!(check_sysctls(names(&["kernel.msgmax"]).iter(), false, true).is_err());
    }
}
