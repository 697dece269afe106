//! CRI security settings, asserted from inside the containers, against Skiff's runtime and
//! containerd 1.6: runtime handlers, capabilities, users and groups, privileged mode,
//! read-only rootfs and no_new_privs, seccomp profiles, sysctls, PID / network / IPC
//! namespace modes, and the error codes of refused requests.

mod common;
mod oneshot;

use anyhow::{Context, ensure};
use common::cri::{CriRuntime, Flavor};
use k8s_cri::v1::*;
use oneshot::*;
use tonic::Code;

common::cri_cases! {
    unknown_runtime_handler,
    crun_handler => skiff_only("the harness configures containerd with the runc handler only"),
    capabilities_add_and_drop,
    users_and_groups,
    image_user_group_memberships => skiff_only(
        "containerd 1.6 looks up supplementary groups for run_as_user (default uid 0), not for the image's user"
    ),
    privileged,
    privileged_container_needs_privileged_sandbox,
    readonly_rootfs_and_no_new_privs,
    seccomp_profiles,
    seccomp_localhost_profile,
    namespaced_sysctls,
    pid_namespace_modes,
    shared_pid_namespace_survives_runtime_restart,
    host_network_and_ipc,
}

/// The CapEff mask of the default capability set (containerd's and Docker's defaults).
const DEFAULT_CAP_EFF: u64 = 0xa804_25fb;
const CAP_CHOWN: u64 = 1 << 0;
const CAP_NET_BIND_SERVICE: u64 = 1 << 10;
const CAP_NET_ADMIN: u64 = 1 << 12;

fn hex_mask(value: Option<&str>) -> anyhow::Result<u64> {
    let value = value.context("field missing")?;
    Ok(u64::from_str_radix(value, 16)?)
}

/// RunPodSandbox with a handler nobody configured fails with `Unknown` (containerd's
/// "no runtime for ... is configured") and leaves nothing.
async fn unknown_runtime_handler(rt: &CriRuntime) -> anyhow::Result<()> {
    let err = rt
        .runtime_client()
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(rt.sandbox_config("nohandler")),
            runtime_handler: "no-such-handler".into(),
        })
        .await
        .expect_err("RunPodSandbox with an unknown handler succeeded");
    ensure!(err.code() == Code::Unknown, "{err:?}");
    ensure!(err.message().contains("no-such-handler"), "{err:?}");
    rt.wait_clean(std::time::Duration::from_secs(10)).await
}

/// The `crun` handler runs the pod's containers with crun: on a host crun supports the
/// container runs and its state is in crun's state directory; on a hybrid host whose
/// cgroup v2 hierarchy has controllers, crun 1.8 refuses to start it, and crun's own error
/// comes back from StartContainer.
async fn crun_handler(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("crun");
    let sandbox_id = rt
        .runtime_client()
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(sandbox.clone()),
            runtime_handler: "crun".into(),
        })
        .await?
        .into_inner()
        .pod_sandbox_id;
    let listed = rt
        .runtime_client()
        .list_pod_sandbox(ListPodSandboxRequest::default())
        .await?
        .into_inner()
        .items;
    ensure!(
        listed
            .iter()
            .any(|s| s.id == sandbox_id && s.runtime_handler == "crun"),
        "{listed:?}"
    );
    let id = create(rt, &sandbox_id, &sandbox, shell(rt, "c", "echo from-crun"))
        .await
        .context("CreateContainer")?;
    let started = start(rt, &id).await;
    if !cgroup_hybrid_with_v2_controllers() {
        started.context("StartContainer")?;
        ensure!(
            rt.dir().join("st/oci-runtimes/crun").join(&id).exists(),
            "no crun state for {id}"
        );
        wait_exit(rt, &id).await?;
        let log = log_text(&rt.log_path("crun", "c"));
        ensure!(log.contains("from-crun"), "{log}");
    } else {
        let err = started.expect_err("crun started a container on a hybrid cgroup host");
        ensure!(
            err.message()
                .contains("cgroups in hybrid mode not supported"),
            "not crun's error: {err:?}"
        );
        let status = status(rt, &id).await?;
        ensure!(status.reason == "StartError", "{status:?}");
    }
    remove_pod(rt, &sandbox_id).await
}

/// add NET_ADMIN + drop CHOWN on the defaults; drop ALL + add NET_BIND_SERVICE.
async fn capabilities_add_and_drop(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("caps");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let cases = [
        (vec![], vec![], DEFAULT_CAP_EFF),
        (
            vec!["NET_ADMIN"],
            vec!["CHOWN"],
            (DEFAULT_CAP_EFF | CAP_NET_ADMIN) & !CAP_CHOWN,
        ),
        (vec!["NET_BIND_SERVICE"], vec!["ALL"], CAP_NET_BIND_SERVICE),
    ];
    for (n, (add, drop, expected)) in cases.into_iter().enumerate() {
        let mut config = shell(rt, &format!("caps{n}"), "cat /proc/self/status");
        security(&mut config).capabilities = Some(Capability {
            add_capabilities: add.iter().map(|s| s.to_string()).collect(),
            drop_capabilities: drop.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        });
        let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
        for field in ["CapEff", "CapPrm", "CapBnd"] {
            let got = hex_mask(status_field(&out, field))?;
            ensure!(
                got == expected,
                "add {add:?} drop {drop:?}: {field} {got:x}, expected {expected:x}"
            );
        }
    }
    remove_pod(rt, &sandbox_id).await
}

/// The image user `app` resolves through the image's /etc/passwd (primary group);
/// run_as_user / run_as_group / supplemental_groups override it; run_as_group alone is
/// refused (`Unknown`); run_as_username resolves a name.
async fn users_and_groups(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = users_image(rt).await?;
    rt.pull(&image).await?;
    let sandbox = rt.sandbox_config("users");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let config = |name: &str| {
        let mut config = rt.container_config(name, &image, ["sh", "-c", "cat /proc/self/status"]);
        config.command = Vec::new();
        config
    };
    let ids = |out: &str| {
        let first = |f: &str| {
            status_field(out, f)
                .and_then(|v| v.split_whitespace().next())
                .unwrap_or_default()
                .to_string()
        };
        let groups: Vec<String> = status_field(out, "Groups")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        (first("Uid"), first("Gid"), groups)
    };

    let out = output_of(rt, &sandbox_id, &sandbox, config("image-user")).await?;
    let (uid, gid, groups) = ids(&out);
    ensure!(
        (uid.as_str(), gid.as_str()) == ("1001", "1002"),
        "image user app: uid {uid} gid {gid}"
    );
    // The primary group is among the process's groups too (containerd's
    // `ensureAdditionalGids`), as `id` shows it.
    ensure!(
        groups.contains(&"1002".to_string()),
        "image user app: groups {groups:?} lack the primary group"
    );

    let mut numeric = config("numeric");
    let sc = security(&mut numeric);
    sc.run_as_user = Some(Int64Value { value: 4321 });
    sc.run_as_group = Some(Int64Value { value: 8765 });
    sc.supplemental_groups = vec![4242];
    let out = output_of(rt, &sandbox_id, &sandbox, numeric).await?;
    let (uid, gid, groups) = ids(&out);
    ensure!(
        (uid.as_str(), gid.as_str()) == ("4321", "8765") && groups.contains(&"4242".to_string()),
        "run_as_user 4321 / group 8765 / supplemental 4242: uid {uid} gid {gid} groups {groups:?}"
    );

    let mut group_only = config("group-only");
    security(&mut group_only).run_as_group = Some(Int64Value { value: 8765 });
    let err = create(rt, &sandbox_id, &sandbox, group_only)
        .await
        .expect_err("run_as_group without a user accepted");
    ensure!(err.code() == Code::Unknown, "{err:?}");

    let mut named = config("named");
    security(&mut named).run_as_username = "root".into();
    let out = output_of(rt, &sandbox_id, &sandbox, named).await?;
    let (uid, gid, _) = ids(&out);
    ensure!(
        (uid.as_str(), gid.as_str()) == ("0", "0"),
        "run_as_username root: uid {uid} gid {gid}"
    );
    remove_pod(rt, &sandbox_id).await
}

/// The image's user gets its memberships from the image's /etc/group as supplementary
/// groups (what Kubernetes documents for the container's primary user).
async fn image_user_group_memberships(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = users_image(rt).await?;
    rt.pull(&image).await?;
    let sandbox = rt.sandbox_config("members");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = rt.container_config("members", &image, ["sh", "-c", "cat /proc/self/status"]);
    config.command = Vec::new();
    let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
    let groups = status_field(&out, "Groups").unwrap_or_default();
    ensure!(
        groups.split_whitespace().any(|g| g == "3000"),
        "app is a member of extra (3000), Groups: {groups:?}"
    );
    remove_pod(rt, &sandbox_id).await
}

/// The sandbox config of a privileged pod.
fn privileged_sandbox(rt: &CriRuntime, name: &str) -> PodSandboxConfig {
    let mut sandbox = rt.sandbox_config(name);
    sandbox
        .linux
        .get_or_insert_default()
        .security_context
        .get_or_insert_default()
        .privileged = true;
    sandbox
}

/// What a container sees of its privileges: CapEff, the /sys mount's mode, how much of
/// `/proc/timer_list` it reads (nothing when masked), whether `/proc/sys` is writable,
/// whether a host device exists.
const PRIVILEGE_REPORT: &str = "grep CapEff /proc/self/status; \
     grep ' /sys ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1 | sed 's/^/sys=/'; \
     echo timer_list_bytes=$(cat /proc/timer_list 2>/dev/null | wc -c); \
     echo 0 > /proc/sys/kernel/shm_rmid_forced 2>/dev/null && echo procsys-writable; \
     test -c DEVICE && echo device-present; true";

/// A privileged container has every capability the runtime has, no masked or read-only
/// paths and the host's devices; /sys is writable when the pod uses the node's network
/// (its sysfs shows the pod's network devices otherwise, and containerd keeps it
/// read-only then). An unprivileged container of the same pod has none of that.
async fn privileged(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let host_status = std::fs::read_to_string("/proc/self/status")?;
    let host_bounding = hex_mask(status_field(&host_status, "CapBnd"))?;
    let device = ["/dev/kmsg", "/dev/loop-control", "/dev/mem"]
        .into_iter()
        .find(|d| std::path::Path::new(d).exists())
        .context("no host device to look for")?;
    let script = PRIVILEGE_REPORT.replace("DEVICE", device);
    let mut ids = Vec::new();
    for (name, host_network) in [("priv", false), ("privhost", true)] {
        let mut sandbox = privileged_sandbox(rt, name);
        if host_network {
            // The kubelet sends no hostname for pods on the node's network.
            sandbox.hostname = String::new();
            sandbox
                .linux
                .get_or_insert_default()
                .security_context
                .get_or_insert_default()
                .namespace_options = Some(NamespaceOption {
                network: NamespaceMode::Node as i32,
                ..Default::default()
            });
        }
        let sandbox_id = run_pod(rt, &sandbox).await?;
        ids.push(sandbox_id.clone());
        let mut config = shell(rt, "priv", &script);
        security(&mut config).privileged = true;
        let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
        let eff = hex_mask(status_field(&out, "CapEff"))?;
        ensure!(
            eff == host_bounding,
            "{name}: CapEff {eff:x}, the runtime's bounding set is {host_bounding:x}"
        );
        let sys = if host_network { "sys=rw" } else { "sys=ro" };
        for expected in [sys, "procsys-writable", "device-present"] {
            ensure!(out.contains(expected), "{name}: no {expected:?} in\n{out}");
        }
        ensure!(
            !out.contains("timer_list_bytes=0"),
            "{name}: masked:\n{out}"
        );

        // The kubelet sends the masked and read-only paths of unprivileged containers.
        let mut plain = shell(rt, "plain", &script);
        let sc = security(&mut plain);
        sc.masked_paths = vec!["/proc/timer_list".into(), "/proc/kcore".into()];
        sc.readonly_paths = vec!["/proc/sys".into()];
        let out = output_of(rt, &sandbox_id, &sandbox, plain).await?;
        ensure!(
            hex_mask(status_field(&out, "CapEff"))? == DEFAULT_CAP_EFF,
            "{name}: unprivileged container:\n{out}"
        );
        ensure!(
            out.contains("sys=ro") && out.contains("timer_list_bytes=0"),
            "{name}: unprivileged /sys or /proc/timer_list:\n{out}"
        );
        ensure!(
            !out.contains("device-present") && !out.contains("procsys-writable"),
            "{name}: unprivileged container sees host paths:\n{out}"
        );
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    remove_pods(rt, &ids).await
}

/// CreateContainer of a privileged container in a pod that is not privileged fails
/// (`Unknown`, containerd's "no privileged container allowed in sandbox").
async fn privileged_container_needs_privileged_sandbox(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("unpriv");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(rt, "priv", "true");
    security(&mut config).privileged = true;
    let err = create(rt, &sandbox_id, &sandbox, config)
        .await
        .expect_err("privileged container created in an unprivileged pod");
    ensure!(err.code() == Code::Unknown, "{err:?}");
    remove_pod(rt, &sandbox_id).await
}

/// readonly_rootfs: writes to / fail, the pod's files are read-only too; no_new_privs
/// shows in /proc/self/status.
async fn readonly_rootfs_and_no_new_privs(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("ro");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let script = "touch /newfile 2>/dev/null && echo rootfs-writable; \
                  echo x >> /etc/hosts 2>/dev/null && echo hosts-writable; \
                  touch /dev/shm/x && echo shm-writable; \
                  grep NoNewPrivs /proc/self/status";
    let mut config = shell(rt, "ro", script);
    let sc = security(&mut config);
    sc.readonly_rootfs = true;
    sc.no_new_privs = true;
    let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
    ensure!(
        !out.contains("rootfs-writable") && !out.contains("hosts-writable"),
        "{out}"
    );
    ensure!(out.contains("shm-writable"), "{out}");
    ensure!(status_field(&out, "NoNewPrivs") == Some("1"), "{out}");
    let out = output_of(rt, &sandbox_id, &sandbox, shell(rt, "rw", script)).await?;
    ensure!(out.contains("rootfs-writable"), "{out}");
    ensure!(status_field(&out, "NoNewPrivs") == Some("0"), "{out}");
    remove_pod(rt, &sandbox_id).await
}

/// RuntimeDefault (the `seccomp` field and the deprecated `runtime/default` path) filters
/// syscalls: `unshare` of a user namespace, which needs no capability, is denied.
/// Unconfined (explicit, or nothing set) allows it.
async fn seccomp_profiles(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("seccomp");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let script = "grep Seccomp: /proc/self/status; unshare -U true && echo unshare-allowed; true";
    let profile = |t: security_profile::ProfileType| SecurityProfile {
        profile_type: t as i32,
        localhost_ref: String::new(),
    };
    let cases: [(&str, Option<SecurityProfile>, &str, bool); 4] = [
        (
            "default",
            Some(profile(security_profile::ProfileType::RuntimeDefault)),
            "",
            true,
        ),
        ("default-path", None, "runtime/default", true),
        (
            "unconfined",
            Some(profile(security_profile::ProfileType::Unconfined)),
            "",
            false,
        ),
        ("unset", None, "", false),
    ];
    for (name, seccomp, path, filtered) in cases {
        let mut config = shell(rt, name, script);
        let sc = security(&mut config);
        sc.seccomp = seccomp;
        #[allow(deprecated)]
        {
            sc.seccomp_profile_path = path.into();
        }
        let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
        let mode = status_field(&out, "Seccomp").unwrap_or_default();
        ensure!(
            (mode == "2") == filtered && out.contains("unshare-allowed") != filtered,
            "{name}: seccomp mode {mode}, output:\n{out}"
        );
    }
    remove_pod(rt, &sandbox_id).await
}

/// A Localhost profile from a JSON file on the node applies (it denies mkdir here, by the
/// `seccomp` field and by the deprecated `localhost/<path>`); a missing file fails
/// CreateContainer with `Unknown`.
async fn seccomp_localhost_profile(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let profile = rt.dir().join("no-mkdir.json");
    std::fs::write(
        &profile,
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
            {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#,
    )?;
    let profile = profile.to_string_lossy().into_owned();
    let sandbox = rt.sandbox_config("localhost");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let script = "mkdir /tmp/d && echo mkdir-allowed; touch /tmp/f && echo touch-allowed";
    for (name, field, path) in [
        ("field", profile.clone(), String::new()),
        ("path", String::new(), format!("localhost/{profile}")),
    ] {
        let mut config = shell(rt, name, script);
        let sc = security(&mut config);
        if !field.is_empty() {
            sc.seccomp = Some(SecurityProfile {
                profile_type: security_profile::ProfileType::Localhost as i32,
                localhost_ref: field,
            });
        }
        #[allow(deprecated)]
        {
            sc.seccomp_profile_path = path;
        }
        let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
        ensure!(
            !out.contains("mkdir-allowed") && out.contains("touch-allowed"),
            "{name}: {out}"
        );
    }
    let mut config = shell(rt, "missing", script);
    security(&mut config).seccomp = Some(SecurityProfile {
        profile_type: security_profile::ProfileType::Localhost as i32,
        localhost_ref: rt.dir().join("missing.json").to_string_lossy().into_owned(),
    });
    let err = create(rt, &sandbox_id, &sandbox, config)
        .await
        .expect_err("created with a missing seccomp profile");
    ensure!(err.code() == Code::Unknown, "{err:?}");
    remove_pod(rt, &sandbox_id).await
}

/// The pod's namespaced sysctls are set in its containers.
async fn namespaced_sysctls(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let mut sandbox = rt.sandbox_config("sysctl");
    sandbox.linux.get_or_insert_default().sysctls = [
        ("kernel.shm_rmid_forced".to_string(), "1".to_string()),
        (
            "net.ipv4.ip_unprivileged_port_start".to_string(),
            "99".to_string(),
        ),
    ]
    .into();
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let out = output_of(
        rt,
        &sandbox_id,
        &sandbox,
        shell(
            rt,
            "sysctl",
            "cat /proc/sys/kernel/shm_rmid_forced /proc/sys/net/ipv4/ip_unprivileged_port_start",
        ),
    )
    .await?;
    ensure!(
        out.split_whitespace().collect::<Vec<_>>() == ["1", "99"],
        "{out}"
    );
    remove_pod(rt, &sandbox_id).await
}

fn with_namespaces(config: &mut ContainerConfig, options: NamespaceOption) {
    security(config).namespace_options = Some(options);
}

/// A sandbox config with namespace `options` (and no hostname when on the node's
/// network, as the kubelet sends it).
fn sandbox_with_namespaces(
    rt: &CriRuntime,
    name: &str,
    options: NamespaceOption,
) -> PodSandboxConfig {
    let mut sandbox = rt.sandbox_config(name);
    if options.network == NamespaceMode::Node as i32 {
        sandbox.hostname = String::new();
    }
    sandbox
        .linux
        .get_or_insert_default()
        .security_context
        .get_or_insert_default()
        .namespace_options = Some(options);
    sandbox
}

/// PID namespaces: POD shares one namespace among the pod's containers, CONTAINER gives
/// each its own, TARGET joins another container's, NODE is the host's.
async fn pid_namespace_modes(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let pid = |mode: NamespaceMode, target_id: &str| NamespaceOption {
        pid: mode as i32,
        target_id: target_id.to_string(),
        ..Default::default()
    };

    // POD: a second container sees the first one's process.
    let shared = sandbox_with_namespaces(rt, "shared", pid(NamespaceMode::Pod, ""));
    let shared_id = run_pod(rt, &shared).await?;
    let mut sleeper = shell(rt, "sleeper", "exec sleep 3601");
    with_namespaces(&mut sleeper, pid(NamespaceMode::Pod, ""));
    let sleeper_id = create_start(rt, &shared_id, &shared, sleeper).await?;
    let mut looker = shell(rt, "looker", "ps");
    with_namespaces(&mut looker, pid(NamespaceMode::Pod, ""));
    let out = output_of(rt, &shared_id, &shared, looker).await?;
    ensure!(out.contains("sleep 3601"), "POD: no sleeper in\n{out}");
    // CONTAINER: it does not, and its shell is PID 1.
    let mut alone = shell(rt, "alone", "ps; cat /proc/1/cmdline");
    with_namespaces(&mut alone, pid(NamespaceMode::Container, ""));
    let out = output_of(rt, &shared_id, &shared, alone).await?;
    ensure!(
        !out.contains("sleep 3601") && out.contains("sh"),
        "CONTAINER:\n{out}"
    );

    // TARGET: a container of a pod without a shared namespace joins the sleeper's.
    let private = sandbox_with_namespaces(rt, "private", pid(NamespaceMode::Container, ""));
    let private_id = run_pod(rt, &private).await?;
    let mut target = shell(rt, "target", "exec sleep 3602");
    with_namespaces(&mut target, pid(NamespaceMode::Container, ""));
    let target_id = create_start(rt, &private_id, &private, target).await?;
    let mut debug = shell(rt, "debug", "ps");
    with_namespaces(&mut debug, pid(NamespaceMode::Target, &target_id));
    let out = output_of(rt, &private_id, &private, debug).await?;
    ensure!(out.contains("sleep 3602"), "TARGET: no target in\n{out}");

    // NODE: the host's processes, this test among them.
    let node = sandbox_with_namespaces(rt, "hostpid", pid(NamespaceMode::Node, ""));
    let node_id = run_pod(rt, &node).await?;
    let me = std::process::id();
    let mut host = shell(rt, "host", &format!("test -d /proc/{me} && echo sees-host"));
    with_namespaces(&mut host, pid(NamespaceMode::Node, ""));
    let out = output_of(rt, &node_id, &node, host).await?;
    ensure!(out.contains("sees-host"), "NODE:\n{out}");

    let _ = sleeper_id;
    remove_pods(rt, &[&shared_id, &private_id, &node_id]).await
}

/// The pod's shared PID namespace outlives a SIGKILLed runtime: after the restart a new
/// container still joins it and sees the old one; removing the pod leaves no process.
async fn shared_pid_namespace_survives_runtime_restart(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let pod = NamespaceOption {
        pid: NamespaceMode::Pod as i32,
        ..Default::default()
    };
    let sandbox = sandbox_with_namespaces(rt, "durable", pod.clone());
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut sleeper = shell(rt, "sleeper", "exec sleep 3603");
    with_namespaces(&mut sleeper, pod.clone());
    create_start(rt, &sandbox_id, &sandbox, sleeper).await?;
    rt.kill9().await?;
    rt.restart().await?;
    let mut looker = shell(rt, "looker", "ps");
    with_namespaces(&mut looker, pod);
    let out = output_of(rt, &sandbox_id, &sandbox, looker).await?;
    ensure!(
        out.contains("sleep 3603"),
        "no sleeper after the restart:\n{out}"
    );
    remove_pod(rt, &sandbox_id).await
}

/// A pod on the node's network and IPC namespaces: the node's hostname and hosts file,
/// and the node's /dev/shm.
async fn host_network_and_ipc(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let marker = format!("skiff-test-{}", rt.namespace());
    let marker_path = std::path::Path::new("/dev/shm").join(&marker);
    std::fs::write(&marker_path, "x")?;
    let result = async {
        let options = NamespaceOption {
            network: NamespaceMode::Node as i32,
            ipc: NamespaceMode::Node as i32,
            pid: NamespaceMode::Container as i32,
            ..Default::default()
        };
        let sandbox = sandbox_with_namespaces(rt, "hostnet", options.clone());
        let sandbox_id = run_pod(rt, &sandbox).await?;
        let mut config = shell(
            rt,
            "hostnet",
            &format!("hostname; cat /etc/hostname; ls /dev/shm/{marker}; cat /etc/hosts"),
        );
        with_namespaces(&mut config, options);
        let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
        let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")?;
        let mut lines = out.lines();
        ensure!(
            lines.next() == Some(host_name.trim()) && lines.next() == Some(host_name.trim()),
            "hostname, /etc/hostname:\n{out}"
        );
        ensure!(out.contains(&marker), "node /dev/shm not shared:\n{out}");
        let host_hosts = std::fs::read_to_string("/etc/hosts")?;
        ensure!(
            out.contains(host_hosts.trim()),
            "/etc/hosts is not the node's:\n{out}"
        );
        if rt.flavor() == Flavor::Skiff {
            // Skiff pins nothing for such a pod: its namespace directory is empty.
            ensure!(
                !rt.dir()
                    .join("st/ns")
                    .join(&sandbox_id)
                    .join("net")
                    .exists(),
                "a network namespace was made for a host-network pod"
            );
        }
        remove_pod(rt, &sandbox_id).await
    }
    .await;
    let _ = std::fs::remove_file(&marker_path);
    result
}
