//! CRI pod and container lifecycle on real runc, CNI plugins and registry, run against
//! Skiff's runtime and containerd 1.6 (see `common::cri`): a pod serving HTTP on its IP,
//! ExecSync, CRI logs, a failed start, idempotent stop/remove, NotFound for missing
//! objects, and pods reaching each other.

mod common;

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tonic::Code;

common::cri_cases! {
    pod_lifecycle,
    exec_sync_timeout,
    start_failure,
    idempotent_stop_and_remove,
    missing_objects,
    pods_reach_each_other,
    bridge_network_in_process_and_through_plugins
        => skiff_only("Skiff's choice between its in-process bridge network and the CNI plugins"),
    sandboxes_at_once,
    slow_start_blocks_no_other_call
        => skiff_only("the gated runc handler is configured in Skiff's harness only"),
}

/// A busybox httpd serving `body` on port 8080; prints `started` first.
fn httpd_args(body: &str) -> Vec<String> {
    let script = format!(
        "mkdir -p /www && echo {body} > /www/index.html && echo started && exec httpd -f -p 8080 -h /www"
    );
    vec!["sh".into(), "-c".into(), script]
}

async fn sandbox_status(rt: &CriRuntime, id: &str) -> anyhow::Result<PodSandboxStatus> {
    rt.runtime_client()
        .pod_sandbox_status(PodSandboxStatusRequest {
            pod_sandbox_id: id.to_string(),
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .context("PodSandboxStatus without status")
}

async fn container_status(rt: &CriRuntime, id: &str) -> anyhow::Result<ContainerStatus> {
    rt.runtime_client()
        .container_status(ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .context("ContainerStatus without status")
}

/// The pod IP of a ready sandbox.
async fn pod_ip(rt: &CriRuntime, id: &str) -> anyhow::Result<String> {
    let ip = sandbox_status(rt, id)
        .await?
        .network
        .map(|n| n.ip)
        .unwrap_or_default();
    ensure!(!ip.is_empty(), "sandbox {id} has no IP");
    Ok(ip)
}

/// `GET /` on `ip:port` from the host, retried for up to 20 s while the server starts.
async fn http_get(ip: &str, port: u16) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let attempt = async {
            let mut stream = tokio::net::TcpStream::connect((ip, port)).await?;
            stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await?;
            let mut body = String::new();
            stream.read_to_string(&mut body).await?;
            anyhow::Ok(body)
        };
        match attempt.await {
            Ok(body) => return Ok(body),
            Err(e) if Instant::now() >= deadline => {
                return Err(e.context(format!("GET {ip}:{port}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn exec_sync(
    rt: &CriRuntime,
    container_id: &str,
    cmd: &[&str],
    timeout: i64,
) -> Result<ExecSyncResponse, tonic::Status> {
    rt.runtime_client()
        .exec_sync(ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            timeout,
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Polls `path` until it holds `needle`; returns the whole file.
async fn wait_log(path: &std::path::Path, needle: &str) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        if log.contains(needle) {
            return Ok(log);
        }
        if Instant::now() >= deadline {
            bail!("{} never held {needle:?}; it holds:\n{log}", path.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `<RFC 3339 timestamp> <stdout|stderr> <F|P> <text>`: the fields of a CRI log line.
fn cri_log_fields(line: &str) -> anyhow::Result<(&str, &str, &str)> {
    let mut fields = line.splitn(4, ' ');
    let (time, stream, tag, text) = (fields.next(), fields.next(), fields.next(), fields.next());
    let (Some(time), Some(stream), Some(tag), Some(text)) = (time, stream, tag, text) else {
        bail!("not a CRI log line: {line:?}");
    };
    ensure!(
        chrono::DateTime::parse_from_rfc3339(time).is_ok(),
        "bad timestamp in {line:?}"
    );
    Ok((stream, tag, text))
}

/// A pod with an httpd: ready sandbox with an IP of the CNI subnet, listed by label,
/// reachable from the host, ExecSync (output, exit code, timeout), CRI log format, stop
/// with a grace period, then everything removed and nothing left behind.
async fn pod_lifecycle(rt: &CriRuntime) -> anyhow::Result<()> {
    let mut client = rt.runtime_client();
    let image = rt.busybox();
    rt.pull(&image).await?;

    let mut config = rt.sandbox_config("web");
    config.labels = [("app".to_string(), "web".to_string())].into();
    let sandbox_id = client
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: String::new(),
        })
        .await?
        .into_inner()
        .pod_sandbox_id;
    let status = sandbox_status(rt, &sandbox_id).await?;
    ensure!(
        status.state == PodSandboxState::SandboxReady as i32,
        "{status:?}"
    );
    let ip: std::net::Ipv4Addr = pod_ip(rt, &sandbox_id).await?.parse()?;
    let subnet: ipnet::Ipv4Net = rt.pod_cidr().parse()?;
    ensure!(subnet.contains(&ip), "pod IP {ip} outside {subnet}");
    let listed = client
        .list_pod_sandbox(ListPodSandboxRequest {
            filter: Some(PodSandboxFilter {
                label_selector: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .items;
    ensure!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>() == [sandbox_id.as_str()],
        "ListPodSandbox app=web: {listed:?}"
    );

    let container_id = rt
        .run_container(
            &sandbox_id,
            "web",
            rt.container_config("httpd", &image, httpd_args("hello-cri")),
        )
        .await?;
    let body = http_get(&ip.to_string(), 8080).await?;
    ensure!(body.contains("hello-cri"), "HTTP answer: {body}");
    let status = container_status(rt, &container_id).await?;
    ensure!(
        status.state == ContainerState::ContainerRunning as i32
            && status.started_at >= status.created_at
            && status.created_at > 0,
        "{status:?}"
    );
    // image_ref is the image's repo digest (`repo@sha256:<manifest>`), which the kubelet
    // shows as the container's imageID.
    let pulled = rt
        .image_client()
        .image_status(ImageStatusRequest {
            image: Some(ImageSpec {
                image: image.clone(),
                ..Default::default()
            }),
            verbose: false,
        })
        .await?
        .into_inner()
        .image
        .context("ImageStatus of the pulled image")?;
    let digest = pulled.repo_digests.first().context("no repo digest")?;
    ensure!(
        digest.contains("/skiff/busybox@sha256:") && status.image_ref == *digest,
        "image_ref {:?}, repo digests {:?}",
        status.image_ref,
        pulled.repo_digests
    );

    let out = exec_sync(rt, &container_id, &["cat", "/etc/hostname"], 10).await?;
    ensure!(
        (out.exit_code, out.stdout.as_slice()) == (0, b"web\n".as_slice()),
        "{out:?}"
    );
    let out = exec_sync(
        rt,
        &container_id,
        &["sh", "-c", "echo oops >&2; exit 3"],
        10,
    )
    .await?;
    ensure!(
        (out.exit_code, out.stderr.as_slice()) == (3, b"oops\n".as_slice()),
        "{out:?}"
    );

    let log = wait_log(&rt.log_path("web", "httpd"), "started").await?;
    let first = log.lines().next().unwrap_or_default();
    ensure!(
        cri_log_fields(first)? == ("stdout", "F", "started"),
        "first log line {first:?}"
    );

    client
        .stop_container(StopContainerRequest {
            container_id: container_id.clone(),
            timeout: 1,
        })
        .await?;
    let status = container_status(rt, &container_id).await?;
    ensure!(
        status.state == ContainerState::ContainerExited as i32
            && status.finished_at >= status.started_at
            && !status.reason.is_empty(),
        "{status:?}"
    );
    client
        .remove_container(RemoveContainerRequest {
            container_id: container_id.clone(),
        })
        .await?;
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        })
        .await?;
    client
        .remove_pod_sandbox(RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        })
        .await?;
    let missing = sandbox_status(rt, &sandbox_id).await.unwrap_err();
    ensure!(status_code(&missing) == Some(Code::NotFound), "{missing:?}");
    rt.wait_clean(Duration::from_secs(20)).await
}

fn status_code(err: &anyhow::Error) -> Option<Code> {
    err.downcast_ref::<tonic::Status>().map(tonic::Status::code)
}

/// A sandbox with one `sleep` container; returns (sandbox ID, container ID).
async fn sleeper(rt: &CriRuntime, pod: &str) -> anyhow::Result<(String, String)> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let sandbox_id = rt.run_sandbox(pod).await?;
    let config = rt.container_config("sleep", &image, ["sleep", "3600"]);
    let container_id = rt.run_container(&sandbox_id, pod, config).await?;
    Ok((sandbox_id, container_id))
}

/// ExecSync past its timeout fails with DeadlineExceeded and the container keeps running.
async fn exec_sync_timeout(rt: &CriRuntime) -> anyhow::Result<()> {
    let (_, container_id) = sleeper(rt, "exec").await?;
    let started = Instant::now();
    let err = exec_sync(rt, &container_id, &["sleep", "30"], 1)
        .await
        .expect_err("a 30 s command with a 1 s timeout");
    ensure!(err.code() == Code::DeadlineExceeded, "{err:?}");
    ensure!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let status = container_status(rt, &container_id).await?;
    ensure!(
        status.state == ContainerState::ContainerRunning as i32,
        "{status:?}"
    );
    Ok(())
}

/// A container whose command does not exist: StartContainer fails naming the command,
/// and the container is EXITED with reason StartError, and removable. Its log file exists,
/// empty (the kubelet's FallbackToLogsOnError reads it).
async fn start_failure(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let sandbox_id = rt.run_sandbox("broken").await?;
    let log = rt.log_path("broken", "broken");
    // The kubelet makes the container's log directory before CreateContainer.
    std::fs::create_dir_all(log.parent().context("log dir")?)?;
    let mut client = rt.runtime_client();
    let container_id = client
        .create_container(CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(rt.container_config("broken", &image, ["/no/such/binary"])),
            sandbox_config: Some(rt.sandbox_config("broken")),
        })
        .await?
        .into_inner()
        .container_id;
    let err = client
        .start_container(StartContainerRequest {
            container_id: container_id.clone(),
        })
        .await
        .expect_err("starting a missing binary");
    ensure!(err.message().contains("/no/such/binary"), "{err:?}");
    let status = container_status(rt, &container_id).await?;
    ensure!(
        (status.state, status.reason.as_str())
            == (ContainerState::ContainerExited as i32, "StartError"),
        "{status:?}"
    );
    let content = std::fs::read(&log).with_context(|| format!("reading {}", log.display()))?;
    ensure!(content.is_empty(), "{}", String::from_utf8_lossy(&content));
    client
        .remove_container(RemoveContainerRequest { container_id })
        .await?;
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        })
        .await?;
    client
        .remove_pod_sandbox(RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id,
        })
        .await?;
    rt.wait_clean(Duration::from_secs(20)).await
}

/// Stopping or removing what is already stopped or removed succeeds (CRI api.proto:
/// "This call is idempotent"); StopPodSandbox stops the pod's containers and
/// RemovePodSandbox removes them.
async fn idempotent_stop_and_remove(rt: &CriRuntime) -> anyhow::Result<()> {
    let (sandbox_id, container_id) = sleeper(rt, "twice").await?;
    let mut client = rt.runtime_client();
    for _ in 0..2 {
        client
            .stop_container(StopContainerRequest {
                container_id: container_id.clone(),
                timeout: 0,
            })
            .await?;
    }
    let status = container_status(rt, &container_id).await?;
    ensure!(
        status.state == ContainerState::ContainerExited as i32,
        "{status:?}"
    );

    // A second container, left running: StopPodSandbox stops it, RemovePodSandbox removes it.
    let image = rt.busybox();
    let second = rt
        .run_container(
            &sandbox_id,
            "twice",
            rt.container_config("second", &image, ["sleep", "3600"]),
        )
        .await?;
    for _ in 0..2 {
        client
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.clone(),
            })
            .await?;
    }
    let status = sandbox_status(rt, &sandbox_id).await?;
    ensure!(
        status.state == PodSandboxState::SandboxNotready as i32,
        "{status:?}"
    );
    let status = container_status(rt, &second).await?;
    ensure!(
        status.state == ContainerState::ContainerExited as i32,
        "{status:?}"
    );
    for _ in 0..2 {
        client
            .remove_pod_sandbox(RemovePodSandboxRequest {
                pod_sandbox_id: sandbox_id.clone(),
            })
            .await?;
    }
    for id in [&container_id, &second] {
        let err = container_status(rt, id).await.unwrap_err();
        ensure!(status_code(&err) == Some(Code::NotFound), "{id}: {err:?}");
        client
            .remove_container(RemoveContainerRequest {
                container_id: id.to_string(),
            })
            .await?;
    }
    let left = client
        .list_containers(ListContainersRequest::default())
        .await?
        .into_inner()
        .containers;
    ensure!(left.is_empty(), "containers left: {left:?}");
    rt.wait_clean(Duration::from_secs(20)).await
}

/// Status calls and actions on IDs that never existed give NotFound; removing them
/// succeeds (nothing to reclaim).
async fn missing_objects(rt: &CriRuntime) -> anyhow::Result<()> {
    const MISSING: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let mut client = rt.runtime_client();
    let err = sandbox_status(rt, MISSING).await.unwrap_err();
    ensure!(
        status_code(&err) == Some(Code::NotFound),
        "PodSandboxStatus: {err:?}"
    );
    let err = container_status(rt, MISSING).await.unwrap_err();
    ensure!(
        status_code(&err) == Some(Code::NotFound),
        "ContainerStatus: {err:?}"
    );
    let err = client
        .start_container(StartContainerRequest {
            container_id: MISSING.into(),
        })
        .await
        .unwrap_err();
    ensure!(err.code() == Code::NotFound, "StartContainer: {err:?}");
    let err = exec_sync(rt, MISSING, &["true"], 5).await.unwrap_err();
    ensure!(err.code() == Code::NotFound, "ExecSync: {err:?}");
    let err = client
        .create_container(CreateContainerRequest {
            pod_sandbox_id: MISSING.into(),
            config: Some(rt.container_config("orphan", &rt.busybox(), ["true"])),
            sandbox_config: Some(rt.sandbox_config("orphan")),
        })
        .await
        .unwrap_err();
    ensure!(err.code() == Code::NotFound, "CreateContainer: {err:?}");
    client
        .remove_container(RemoveContainerRequest {
            container_id: MISSING.into(),
        })
        .await
        .context("RemoveContainer of a missing container")?;
    client
        .remove_pod_sandbox(RemovePodSandboxRequest {
            pod_sandbox_id: MISSING.into(),
        })
        .await
        .context("RemovePodSandbox of a missing sandbox")?;
    Ok(())
}

/// Two pods on the CNI bridge: one fetches the other's page by pod IP.
async fn pods_reach_each_other(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let server = rt.run_sandbox("server").await?;
    rt.run_container(
        &server,
        "server",
        rt.container_config("httpd", &image, httpd_args("from-server")),
    )
    .await?;
    let (_, client_container) = sleeper(rt, "client").await?;
    let server_ip = pod_ip(rt, &server).await?;
    let url = format!("http://{server_ip}:8080/");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = exec_sync(rt, &client_container, &["wget", "-q", "-O", "-", &url], 10).await?;
        if out.exit_code == 0 {
            let body = String::from_utf8_lossy(&out.stdout);
            ensure!(body.contains("from-server"), "{url}: {body}");
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("wget {url} from the client pod: {out:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The harness's conflist (bridge + host-local + portmap, here with `hairpinMode`) runs
/// in-process: the pod gets `eth0` with its address and default route, its bridge port
/// hairpin mode, the subnet one masquerade chain (no per-pod plugin chain), which stays
/// across a restart with the pod and after the last pod, and goes when the runtime (the
/// restarted one) stops without pods. A conflist with a key the runtime
/// does not run itself (`mtu`) goes through the plugins, which apply it.
async fn bridge_network_in_process_and_through_plugins(rt: &CriRuntime) -> anyhow::Result<()> {
    let network = rt.network_name();
    // As `iptables -S` prints the rule's comment.
    let masquerade = format!(r#"skiff: masquerade for CNI network \"{network}\""#);
    let nat_rules = || -> anyhow::Result<String> {
        let out = std::process::Command::new("iptables")
            .args(["-w", "-t", "nat", "-S"])
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let remove_pod = async |id: &str| -> anyhow::Result<()> {
        let mut client = rt.runtime_client();
        client
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: id.to_string(),
            })
            .await?;
        client
            .remove_pod_sandbox(RemovePodSandboxRequest {
                pod_sandbox_id: id.to_string(),
            })
            .await?;
        Ok(())
    };
    let sh = async |container: &str, script: &str| -> anyhow::Result<String> {
        let out = exec_sync(rt, container, &["sh", "-c", script], 10).await?;
        ensure!(out.exit_code == 0, "{script}: {out:?}");
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };

    let conf_path = rt.dir().join("cni/10-test.conflist");
    let original = std::fs::read_to_string(&conf_path)?;
    let mut hairpin: Value = serde_json::from_str(&original)?;
    hairpin["plugins"][0]["hairpinMode"] = Value::from(true);
    std::fs::write(&conf_path, hairpin.to_string())?;
    let (sandbox, container) = sleeper(rt, "in-process").await?;
    let veth = format!("veth{}", &sandbox[..11]);
    let mode = std::fs::read_to_string(format!("/sys/class/net/{veth}/brport/hairpin_mode"))?;
    ensure!(mode.trim() == "1", "hairpin mode of {veth}: {mode}");
    let ip = pod_ip(rt, &sandbox).await?;
    let subnet: ipnet::Ipv4Net = rt.pod_cidr().parse()?;
    let gateway = std::net::Ipv4Addr::from(u32::from(subnet.network()) + 1);
    ensure!(
        subnet.contains(&ip.parse::<std::net::Ipv4Addr>()?),
        "{ip} outside {subnet}"
    );
    let addr = sh(&container, "ip -4 -o addr show dev eth0").await?;
    ensure!(
        addr.contains(&format!("{ip}/{}", subnet.prefix_len())),
        "{addr}"
    );
    let routes = sh(&container, "ip route").await?;
    ensure!(
        routes.contains(&format!("default via {gateway} dev eth0")),
        "{routes}"
    );
    ensure!(sh(&container, "cat /sys/class/net/eth0/mtu").await? == "1500");
    ensure!(sh(&container, "cat /sys/class/net/lo/operstate").await? != "DOWN");
    let rules = nat_rules()?;
    ensure!(rules.contains(&masquerade), "no masquerade rule:\n{rules}");
    ensure!(
        !rules.contains(sandbox.as_str()),
        "a per-pod plugin chain:\n{rules}"
    );
    // A restart with the pod running keeps the rules; the runtime after it removes them
    // (it did not set them up itself).
    rt.restart().await?;
    ensure!(
        nat_rules()?.contains(&masquerade),
        "masquerade gone with a pod left"
    );
    remove_pod(&sandbox).await?;
    // Node set-up, kept while the runtime runs; removed when it stops with no pod left.
    let rules = nat_rules()?;
    ensure!(
        rules.contains(&masquerade),
        "masquerade gone with the pod:\n{rules}"
    );
    rt.restart().await?;
    let rules = nat_rules()?;
    ensure!(
        !rules.contains(&masquerade),
        "masquerade left after a clean stop:\n{rules}"
    );
    ensure!(
        std::fs::read_dir(rt.dir().join("ipam").join(&network))?
            .filter_map(Result::ok)
            .all(|e| e
                .file_name()
                .to_string_lossy()
                .parse::<std::net::Ipv4Addr>()
                .is_err()),
        "an address is still reserved"
    );

    let mut conflist: Value = serde_json::from_str(&original)?;
    conflist["plugins"][0]["mtu"] = Value::from(1400);
    std::fs::write(&conf_path, conflist.to_string())?;
    let outcome = async {
        let (sandbox, container) = sleeper(rt, "plugins").await?;
        ensure!(sh(&container, "cat /sys/class/net/eth0/mtu").await? == "1400");
        let rules = nat_rules()?;
        ensure!(
            rules.contains(sandbox.as_str()),
            "no per-pod plugin chain:\n{rules}"
        );
        remove_pod(&sandbox).await
    }
    .await;
    std::fs::write(&conf_path, original)?;
    outcome
}

/// Twelve RunPodSandbox calls at once all succeed, with twelve different pod IPs (the
/// network attachments share the runtime's netlink socket and the IPAM store).
async fn sandboxes_at_once(rt: &CriRuntime) -> anyhow::Result<()> {
    let names: Vec<String> = (0..12).map(|i| format!("at-once-{i}")).collect();
    let started = futures::future::join_all(names.iter().map(|name| rt.run_sandbox(name))).await;
    let mut ips = std::collections::BTreeSet::new();
    for (name, sandbox) in names.iter().zip(started) {
        let sandbox = sandbox.with_context(|| format!("RunPodSandbox {name}"))?;
        ips.insert(pod_ip(rt, &sandbox).await?);
    }
    ensure!(ips.len() == names.len(), "pod IPs: {ips:?}");
    Ok(())
}

/// A start held in `runc run` (the harness's `gated` handler) blocks no call about other
/// containers, nor the status and list calls: they all complete while the gate is closed,
/// then the held start completes.
async fn slow_start_blocks_no_other_call(rt: &CriRuntime) -> anyhow::Result<()> {
    const LIMIT: Duration = Duration::from_secs(20);
    let image = rt.busybox();
    rt.pull(&image).await?;
    let gate = rt.dir().join("gate-closed");
    let waiting = rt.dir().join("gate-waiting");
    std::fs::write(&gate, "")?;
    let _ = std::fs::remove_file(&waiting);
    let mut client = rt.runtime_client();
    let held_sandbox = rt.sandbox_config("held");
    let held_pod = client
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(held_sandbox.clone()),
            runtime_handler: skiff_testkit::cri::GATED_HANDLER.into(),
        })
        .await?
        .into_inner()
        .pod_sandbox_id;
    let held = client
        .create_container(CreateContainerRequest {
            pod_sandbox_id: held_pod.clone(),
            config: Some(rt.container_config("held", &image, ["sleep", "60"])),
            sandbox_config: Some(held_sandbox),
        })
        .await?
        .into_inner()
        .container_id;
    let mut starter = rt.runtime_client();
    let held_id = held.clone();
    let start = tokio::spawn(async move {
        starter
            .start_container(StartContainerRequest {
                container_id: held_id,
            })
            .await
    });
    let deadline = Instant::now() + LIMIT;
    while !waiting.exists() {
        ensure!(Instant::now() < deadline, "runc run never reached the gate");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Meanwhile: list, status of the held container, another pod's whole lifecycle.
    let result = tokio::time::timeout(LIMIT, async {
        let listed = client
            .list_containers(ListContainersRequest::default())
            .await?
            .into_inner()
            .containers;
        ensure!(listed.iter().any(|c| c.id == held), "{listed:?}");
        let status = container_status(rt, &held).await?;
        ensure!(
            status.state == ContainerState::ContainerCreated as i32,
            "{status:?}"
        );
        let other_pod = rt.run_sandbox("free").await?;
        let other = rt
            .run_container(
                &other_pod,
                "free",
                rt.container_config("free", &image, ["sleep", "60"]),
            )
            .await?;
        ensure!(
            !start.is_finished(),
            "the held start finished with the gate closed"
        );
        client
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: other_pod.clone(),
            })
            .await?;
        client
            .remove_pod_sandbox(RemovePodSandboxRequest {
                pod_sandbox_id: other_pod,
            })
            .await?;
        anyhow::Ok(other)
    })
    .await;
    std::fs::remove_file(&gate)?;
    result.context("a call waited for the held start")??;
    start.await??;
    let status = container_status(rt, &held).await?;
    ensure!(
        status.state == ContainerState::ContainerRunning as i32,
        "{status:?}"
    );
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: held_pod.clone(),
        })
        .await?;
    client
        .remove_pod_sandbox(RemovePodSandboxRequest {
            pod_sandbox_id: held_pod,
        })
        .await?;
    rt.wait_clean(Duration::from_secs(20)).await
}
