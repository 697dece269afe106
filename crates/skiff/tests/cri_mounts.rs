//! CRI mounts, devices and the pod's files, seen from inside the containers, against
//! Skiff's runtime and containerd 1.6: read-only and writable binds, mount propagation
//! (and its refusal on a private host mount), devices with cgroup permissions, volumes
//! declared by the image, the pod's `/dev/shm`, and `/etc/hosts`, `/etc/hostname`,
//! `/etc/resolv.conf` from the sandbox's config.

mod common;
mod oneshot;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use oneshot::*;
use tonic::Code;

common::cri_cases! {
    bind_mounts_readonly_and_writable,
    mount_propagation,
    devices_with_permissions,
    image_volumes,
    dev_shm_per_pod,
    pod_files_from_sandbox_config,
}

fn bind(host: &Path, container: &str, readonly: bool) -> Mount {
    Mount {
        host_path: host.to_string_lossy().into_owned(),
        container_path: container.into(),
        readonly,
        ..Default::default()
    }
}

/// Read-only binds refuse writes, writable ones write through to the host; a missing
/// host directory is created.
async fn bind_mounts_readonly_and_writable(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let ro = rt.dir().join("ro-src");
    let rw = rt.dir().join("rw-src");
    let missing = rt.dir().join("created/on/demand");
    std::fs::create_dir_all(&ro)?;
    std::fs::create_dir_all(&rw)?;
    std::fs::write(ro.join("file"), "host-data\n")?;
    let sandbox = rt.sandbox_config("binds");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(
        rt,
        "binds",
        "cat /ro/file; echo x > /ro/new 2>/dev/null && echo ro-writable; \
         echo from-container > /rw/new; ls -d /made && echo made-present",
    );
    config.mounts = vec![
        bind(&ro, "/ro", true),
        bind(&rw, "/rw", false),
        bind(&missing, "/made", false),
    ];
    let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
    ensure!(
        out.contains("host-data") && !out.contains("ro-writable"),
        "{out}"
    );
    ensure!(out.contains("made-present") && missing.is_dir(), "{out}");
    ensure!(
        std::fs::read_to_string(rw.join("new"))? == "from-container\n",
        "rw write not on the host"
    );
    remove_pod(rt, &sandbox_id).await
}

/// A tmpfs mounted on the host at `path` with `propagation` (`--make-shared`,
/// `--make-private`); unmounted (with everything below it) on drop.
struct HostMount(PathBuf);

impl HostMount {
    fn new(path: PathBuf, propagation: &str) -> anyhow::Result<HostMount> {
        std::fs::create_dir_all(&path)?;
        run("mount", &["-t", "tmpfs", "tmpfs", &path.to_string_lossy()])?;
        let mount = HostMount(path);
        run("mount", &[propagation, &mount.0.to_string_lossy()])?;
        Ok(mount)
    }
}

impl Drop for HostMount {
    fn drop(&mut self) {
        let _ = run("umount", &["-R", "-l", &self.0.to_string_lossy()]);
    }
}

fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(program).args(args).status()?;
    if !status.success() {
        bail!("{program} {args:?}: {status}");
    }
    Ok(())
}

fn propagating(host: &Path, container: &str, propagation: MountPropagation) -> Mount {
    Mount {
        propagation: propagation as i32,
        ..bind(host, container, false)
    }
}

/// HOST_TO_CONTAINER (rslave) shows mounts made on the host later; BIDIRECTIONAL
/// (rshared) also shows the container's mounts on the host. Both need the host path on a
/// shared mount: on a private one CreateContainer fails (`Unknown`, as containerd's
/// "not a shared mount" check).
async fn mount_propagation(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("prop");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let result = async {
        let private = HostMount::new(rt.dir().join("private"), "--make-private")?;
        for mode in [
            MountPropagation::PropagationHostToContainer,
            MountPropagation::PropagationBidirectional,
        ] {
            let mut config = shell(rt, "refused", "true");
            config.mounts = vec![propagating(&private.0, "/p", mode)];
            let err = create(rt, &sandbox_id, &sandbox, config)
                .await
                .expect_err("propagation from a private mount accepted");
            ensure!(err.code() == Code::Unknown, "{mode:?}: {err:?}");
        }
        drop(private);

        let shared = HostMount::new(rt.dir().join("shared"), "--make-shared")?;
        std::fs::create_dir_all(shared.0.join("later"))?;
        std::fs::create_dir_all(shared.0.join("inner"))?;
        let mut config = shell(rt, "watcher", "exec sleep 3600");
        config.mounts = vec![
            propagating(
                &shared.0,
                "/slave",
                MountPropagation::PropagationHostToContainer,
            ),
            propagating(
                &shared.0,
                "/both",
                MountPropagation::PropagationBidirectional,
            ),
        ];
        security(&mut config).capabilities = Some(Capability {
            add_capabilities: vec!["SYS_ADMIN".into()],
            ..Default::default()
        });
        let id = create_start(rt, &sandbox_id, &sandbox, config).await?;
        let later = HostMount::new(shared.0.join("later"), "--make-shared")?;
        std::fs::write(later.0.join("file"), "after-start\n")?;
        let out = exec(rt, &id, "cat /slave/later/file").await?;
        ensure!(out == "after-start\n", "host mount not propagated: {out:?}");
        exec(
            rt,
            &id,
            "mount -t tmpfs tmpfs /both/inner && echo from-container > /both/inner/file",
        )
        .await?;
        let seen = std::fs::read_to_string(shared.0.join("inner/file"));
        ensure!(
            seen.as_deref().ok() == Some("from-container\n"),
            "container mount not propagated to the host: {seen:?}"
        );
        rt.runtime_client()
            .stop_container(StopContainerRequest {
                container_id: id,
                timeout: 0,
            })
            .await?;
        drop(later);
        drop(shared);
        anyhow::Ok(())
    }
    .await;
    let removed = remove_pod(rt, &sandbox_id).await;
    result.and(removed)
}

/// CRI devices appear at their container path with the host's numbers; the cgroup allows
/// only the requested access (`/dev/loop-control` is not among the devices runc always
/// allows).
async fn devices_with_permissions(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("devices");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(
        rt,
        "devices",
        "ls -l /dev/xnull /dev/xloop; echo hi > /dev/xnull && echo null-writable; \
         (exec 3</dev/xloop) 2>/dev/null && echo loop-readable; \
         (exec 4>/dev/xloop) 2>/dev/null && echo loop-writable; true",
    );
    config.devices = vec![
        Device {
            host_path: "/dev/null".into(),
            container_path: "/dev/xnull".into(),
            permissions: "rwm".into(),
        },
        Device {
            host_path: "/dev/loop-control".into(),
            container_path: "/dev/xloop".into(),
            permissions: "r".into(),
        },
    ];
    let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
    let numbers = |name: &str| {
        out.lines()
            .find(|l| l.ends_with(name))
            .map(|l| l.split_whitespace().skip(4).take(2).collect::<String>())
    };
    ensure!(
        numbers("/dev/xnull").as_deref() == Some("1,3")
            && numbers("/dev/xloop").as_deref() == Some("10,237"),
        "device numbers:\n{out}"
    );
    ensure!(out.contains("null-writable"), "{out}");
    ensure!(
        out.contains("loop-readable") && !out.contains("loop-writable"),
        "{out}"
    );
    remove_pod(rt, &sandbox_id).await
}

/// A volume the image declares is its own mount in each container, holding the image's
/// content at that path, and writes do not reach the image's layer.
async fn image_volumes(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = users_image(rt).await?;
    rt.pull(&image).await?;
    let sandbox = rt.sandbox_config("volumes");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let script = "cat /data/seed; grep -c ' /data ' /proc/mounts; ls /data";
    let mut first = rt.container_config("first", &image, ["sh", "-c", script]);
    first.command = Vec::new();
    security(&mut first).run_as_user = Some(Int64Value { value: 0 });
    let out = output_of(rt, &sandbox_id, &sandbox, first).await?;
    let lines: Vec<&str> = out.lines().collect();
    ensure!(
        lines.first() == Some(&"seed") && lines.get(1) == Some(&"1"),
        "{out}"
    );

    let mut writer = rt.container_config(
        "writer",
        &image,
        ["sh", "-c", "echo new > /data/added && ls /data"],
    );
    writer.command = Vec::new();
    security(&mut writer).run_as_user = Some(Int64Value { value: 0 });
    let out = output_of(rt, &sandbox_id, &sandbox, writer).await?;
    ensure!(out.contains("added"), "{out}");
    let mut reader = rt.container_config("reader", &image, ["sh", "-c", "ls /data"]);
    reader.command = Vec::new();
    let out = output_of(rt, &sandbox_id, &sandbox, reader).await?;
    ensure!(
        out.contains("seed") && !out.contains("added"),
        "a new container shares another's volume: {out}"
    );
    remove_pod(rt, &sandbox_id).await
}

/// All containers of a pod share one 64 MiB /dev/shm; another pod has its own.
async fn dev_shm_per_pod(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("shm");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let other = rt.sandbox_config("othershm");
    let other_id = run_pod(rt, &other).await?;
    let writer = shell(rt, "writer", "echo shared > /dev/shm/marker");
    output_of(rt, &sandbox_id, &sandbox, writer).await?;
    let reader = shell(
        rt,
        "reader",
        "cat /dev/shm/marker; df -k /dev/shm | tail -1",
    );
    let out = output_of(rt, &sandbox_id, &sandbox, reader).await?;
    let mut lines = out.lines();
    ensure!(lines.next() == Some("shared"), "{out}");
    let size = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .context("no df output")?;
    ensure!(size == "65536", "/dev/shm size {size} KiB:\n{out}");
    let outsider = shell(
        rt,
        "outsider",
        "ls /dev/shm/marker 2>/dev/null && echo leaked; true",
    );
    let out = output_of(rt, &other_id, &other, outsider).await?;
    ensure!(
        !out.contains("leaked"),
        "another pod sees the marker: {out}"
    );
    remove_pods(rt, &[&sandbox_id, &other_id]).await
}

/// /etc/resolv.conf from the DNSConfig, /etc/hostname from the hostname, /etc/hosts with
/// the pod's IP and hostname.
async fn pod_files_from_sandbox_config(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let mut sandbox = rt.sandbox_config("dns");
    sandbox.dns_config = Some(DnsConfig {
        servers: vec!["10.96.0.10".into(), "10.96.0.11".into()],
        searches: vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()],
        options: vec!["ndots:5".into()],
    });
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let out = output_of(
        rt,
        &sandbox_id,
        &sandbox,
        shell(
            rt,
            "files",
            "cat /etc/resolv.conf; echo ---; cat /etc/hostname; echo ---; cat /etc/hosts",
        ),
    )
    .await?;
    let parts: Vec<&str> = out.split("---\n").collect();
    let [resolv, hostname, hosts] = parts.as_slice() else {
        bail!("unexpected output:\n{out}");
    };
    let resolv_lines: Vec<&str> = resolv.lines().filter(|l| !l.is_empty()).collect();
    ensure!(
        resolv_lines
            == [
                "search ns.svc.cluster.local svc.cluster.local",
                "nameserver 10.96.0.10",
                "nameserver 10.96.0.11",
                "options ndots:5"
            ],
        "resolv.conf:\n{resolv}"
    );
    ensure!(hostname.trim() == "dns", "hostname: {hostname:?}");
    let ip = rt
        .runtime_client()
        .pod_sandbox_status(PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.clone(),
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .and_then(|s| s.network)
        .map(|n| n.ip)
        .unwrap_or_default();
    // The CRI leaves /etc/hosts to the runtime (the kubelet usually mounts its own):
    // containerd copies the node's file, Skiff adds the pod's own entry to the loopback
    // ones.
    ensure!(hosts.contains("localhost"), "hosts:\n{hosts}");
    if rt.flavor() == common::cri::Flavor::Skiff {
        ensure!(
            hosts
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [ip.as_str(), "dns"]),
            "hosts (pod IP {ip}):\n{hosts}"
        );
    }
    remove_pod(rt, &sandbox_id).await
}
