//! CRI statistics and metrics against Skiff's runtime and containerd 1.6 (see
//! `common::cri`): ContainerStats (CPU, memory with a limit, writable layer),
//! ListContainerStats filters, PodSandboxStats (pod cgroup, network of the pod's netns,
//! process count, containers), ListPodSandboxStats, and the cAdvisor-style metrics.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tonic::Code;

common::cri_cases! {
    container_stats,
    list_container_stats_filters,
    pod_sandbox_stats,
    pod_sandbox_stats_hold_container_stats,
    list_pod_sandbox_stats_filters,
    stats_of_missing_objects,
    // Verified: containerd 1.6 answers both with "unknown method ... for service
    // runtime.v1.RuntimeService" (Unimplemented); containerd added them in 2.0.
    pod_sandbox_metrics
        => skiff_only("containerd 1.6 does not implement ListMetricDescriptors / ListPodSandboxMetrics"),
}

/// 64 MiB, the memory limit of the measured container.
const MEMORY_LIMIT: i64 = 64 << 20;
/// Size of the file the measured container writes into its writable layer.
const WRITTEN: u64 = 8 << 20;

/// Burns some CPU, writes [`WRITTEN`] bytes into the writable layer, says `ready`, sleeps.
fn busy_then_sleep() -> Vec<String> {
    let script = format!(
        "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; \
         dd if=/dev/zero of=/written bs=1048576 count={} 2>/dev/null; sync; echo ready; \
         exec sleep 3600",
        WRITTEN >> 20
    );
    vec!["sh".into(), "-c".into(), script]
}

/// A pod `pod` with one measured container (limited to [`MEMORY_LIMIT`]) that is past its
/// CPU burst and write; returns (sandbox ID, container ID).
async fn measured_pod(rt: &CriRuntime, pod: &str) -> anyhow::Result<(String, String)> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let mut sandbox_config = rt.sandbox_config(pod);
    sandbox_config.labels = [("pod".to_string(), pod.to_string())].into();
    let sandbox_id = rt
        .runtime_client()
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(sandbox_config),
            runtime_handler: String::new(),
        })
        .await?
        .into_inner()
        .pod_sandbox_id;
    let mut config = rt.container_config("work", &image, busy_then_sleep());
    config.labels = [("pod".to_string(), pod.to_string())].into();
    config.linux = Some(LinuxContainerConfig {
        resources: Some(LinuxContainerResources {
            memory_limit_in_bytes: MEMORY_LIMIT,
            ..Default::default()
        }),
        ..Default::default()
    });
    let container_id = rt.run_container(&sandbox_id, pod, config).await?;
    wait_log(rt, pod, "work", "ready").await?;
    Ok((sandbox_id, container_id))
}

/// Waits until the CRI log of `container` in `pod` holds `needle`.
async fn wait_log(rt: &CriRuntime, pod: &str, container: &str, needle: &str) -> anyhow::Result<()> {
    let path = rt.log_path(pod, container);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if std::fs::read_to_string(&path).is_ok_and(|log| log.contains(needle)) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{} never said {needle:?}", path.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn value(v: &Option<UInt64Value>) -> Option<u64> {
    v.as_ref().map(|v| v.value)
}

async fn stats_of(rt: &CriRuntime, id: &str) -> anyhow::Result<ContainerStats> {
    rt.runtime_client()
        .container_stats(ContainerStatsRequest {
            container_id: id.to_string(),
        })
        .await?
        .into_inner()
        .stats
        .context("ContainerStats without stats")
}

/// ContainerStats of a running container: cumulative CPU time that grows, memory in use
/// within its limit (available = limit − working set), the written file in the writable
/// layer, and the container's attributes.
async fn container_stats(rt: &CriRuntime) -> anyhow::Result<()> {
    let (_, container_id) = measured_pod(rt, "stats").await?;
    let first = stats_of(rt, &container_id).await?;
    let attributes = first.attributes.clone().context("no attributes")?;
    ensure!(attributes.id == container_id, "{attributes:?}");
    ensure!(
        attributes.metadata.map(|m| m.name).as_deref() == Some("work"),
        "{:?}",
        first.attributes
    );

    let cpu = first.cpu.context("no CPU stats")?;
    let cpu_time = value(&cpu.usage_core_nano_seconds).context("no CPU time")?;
    ensure!(cpu_time > 0, "CPU time {cpu_time}");
    ensure!(cpu.timestamp > 0, "{cpu:?}");

    let memory = first.memory.context("no memory stats")?;
    let usage = value(&memory.usage_bytes).context("no usage")?;
    let working_set = value(&memory.working_set_bytes).context("no working set")?;
    ensure!(usage > 0 && working_set > 0, "{memory:?}");
    ensure!(working_set <= usage, "{memory:?}");
    ensure!(usage <= MEMORY_LIMIT as u64, "{memory:?}");
    if let Some(available) = value(&memory.available_bytes) {
        ensure!(
            available == MEMORY_LIMIT as u64 - working_set,
            "available {available} with working set {working_set}"
        );
    }

    // containerd measures snapshots periodically (every 10 s by default), so the
    // writable layer may lag behind what was written; the CRI sets no freshness.
    let deadline = Instant::now() + Duration::from_secs(30);
    let layer = loop {
        let layer = stats_of(rt, &container_id)
            .await?
            .writable_layer
            .context("no writable layer")?;
        let used = value(&layer.used_bytes).context("no used bytes")?;
        if used >= WRITTEN {
            break layer;
        }
        if Instant::now() >= deadline {
            bail!("writable layer {used} < {WRITTEN}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    ensure!(
        value(&layer.inodes_used).is_some_and(|n| n >= 1),
        "{layer:?}"
    );
    ensure!(
        layer.fs_id.is_some_and(|f| !f.mountpoint.is_empty()),
        "no filesystem mountpoint"
    );

    // CPU time is cumulative: a later reading is not smaller.
    let out = rt
        .runtime_client()
        .exec_sync(ExecSyncRequest {
            container_id: container_id.clone(),
            cmd: vec![
                "sh".into(),
                "-c".into(),
                "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done".into(),
            ],
            timeout: 30,
        })
        .await?
        .into_inner();
    ensure!(out.exit_code == 0, "{out:?}");
    let second = stats_of(rt, &container_id).await?;
    let later = second
        .cpu
        .as_ref()
        .and_then(|c| value(&c.usage_core_nano_seconds))
        .context("no CPU time")?;
    ensure!(later > cpu_time, "CPU time {cpu_time} then {later}");
    Ok(())
}

async fn list_container_stats(
    rt: &CriRuntime,
    filter: ContainerStatsFilter,
) -> anyhow::Result<Vec<String>> {
    let stats = rt
        .runtime_client()
        .list_container_stats(ListContainerStatsRequest {
            filter: Some(filter),
        })
        .await?
        .into_inner()
        .stats;
    let mut ids: Vec<String> = stats
        .into_iter()
        .filter_map(|s| s.attributes.map(|a| a.id))
        .collect();
    ids.sort();
    Ok(ids)
}

/// ListContainerStats honours the ID, sandbox and label filters (all must hold).
async fn list_container_stats_filters(rt: &CriRuntime) -> anyhow::Result<()> {
    let (sandbox_a, container_a) = measured_pod(rt, "lista").await?;
    let (sandbox_b, container_b) = measured_pod(rt, "listb").await?;
    let by_sandbox = |id: &str| ContainerStatsFilter {
        pod_sandbox_id: id.to_string(),
        ..Default::default()
    };
    ensure!(list_container_stats(rt, by_sandbox(&sandbox_a)).await? == vec![container_a.clone()]);
    ensure!(list_container_stats(rt, by_sandbox(&sandbox_b)).await? == vec![container_b.clone()]);
    let by_id = ContainerStatsFilter {
        id: container_b.clone(),
        ..Default::default()
    };
    ensure!(list_container_stats(rt, by_id).await? == vec![container_b.clone()]);
    let by_label = |pod: &str| ContainerStatsFilter {
        label_selector: HashMap::from([("pod".to_string(), pod.to_string())]),
        ..Default::default()
    };
    ensure!(list_container_stats(rt, by_label("lista")).await? == vec![container_a.clone()]);
    let both = ContainerStatsFilter {
        id: container_a.clone(),
        ..by_label("listb")
    };
    ensure!(
        list_container_stats(rt, both).await?.is_empty(),
        "conditions are ANDed"
    );
    Ok(())
}

/// `GET /` on `ip:port`, retried while the server starts.
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

/// A pod serving HTTP, fetched once from the host; returns (sandbox ID, container ID).
async fn served_pod(rt: &CriRuntime, pod: &str) -> anyhow::Result<(String, String)> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let mut sandbox_config = rt.sandbox_config(pod);
    sandbox_config.labels = [("pod".to_string(), pod.to_string())].into();
    let mut client = rt.runtime_client();
    let sandbox_id = client
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(sandbox_config),
            runtime_handler: String::new(),
        })
        .await?
        .into_inner()
        .pod_sandbox_id;
    let script = "mkdir -p /www && echo served > /www/index.html && exec httpd -f -p 8080 -h /www";
    let config = rt.container_config("httpd", &image, ["sh", "-c", script]);
    let container_id = rt.run_container(&sandbox_id, pod, config).await?;
    let ip = client
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
    let body = http_get(&ip, 8080).await?;
    ensure!(body.contains("served"), "{body}");
    Ok((sandbox_id, container_id))
}

async fn sandbox_stats(rt: &CriRuntime, sandbox_id: &str) -> anyhow::Result<PodSandboxStats> {
    rt.runtime_client()
        .pod_sandbox_stats(PodSandboxStatsRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        })
        .await?
        .into_inner()
        .stats
        .context("PodSandboxStats without stats")
}

/// PodSandboxStats of a pod that served a request: traffic on `eth0` of its network
/// namespace, pod-level CPU and memory from the pod cgroup, and its processes.
async fn pod_sandbox_stats(rt: &CriRuntime) -> anyhow::Result<()> {
    let (sandbox_id, _) = served_pod(rt, "podstats").await?;
    let stats = sandbox_stats(rt, &sandbox_id).await?;
    let attributes = stats.attributes.context("no attributes")?;
    ensure!(attributes.id == sandbox_id, "{attributes:?}");
    let linux = stats.linux.context("no linux stats")?;

    let network = linux.network.context("no network stats")?;
    let eth0 = network.default_interface.context("no default interface")?;
    ensure!(eth0.name == "eth0", "{eth0:?}");
    ensure!(
        value(&eth0.rx_bytes).is_some_and(|b| b > 0)
            && value(&eth0.tx_bytes).is_some_and(|b| b > 0),
        "no traffic counted: {eth0:?}"
    );
    ensure!(
        network.interfaces.iter().all(|i| i.name != "eth0"),
        "the default interface is not repeated: {:?}",
        network.interfaces
    );

    let cpu = linux.cpu.context("no pod CPU stats")?;
    ensure!(
        value(&cpu.usage_core_nano_seconds).is_some_and(|n| n > 0),
        "{cpu:?}"
    );
    let memory = linux.memory.context("no pod memory stats")?;
    ensure!(
        value(&memory.working_set_bytes).is_some_and(|n| n > 0),
        "{memory:?}"
    );
    if let Some(process) = linux.process {
        ensure!(
            value(&process.process_count).is_some_and(|n| n >= 1),
            "{process:?}"
        );
    }
    Ok(())
}

/// PodSandboxStats include the stats of the pod's running containers.
async fn pod_sandbox_stats_hold_container_stats(rt: &CriRuntime) -> anyhow::Result<()> {
    let (sandbox_id, container_id) = measured_pod(rt, "withcontainers").await?;
    let linux = sandbox_stats(rt, &sandbox_id)
        .await?
        .linux
        .context("no linux stats")?;
    let containers: Vec<String> = linux
        .containers
        .iter()
        .filter_map(|c| c.attributes.as_ref().map(|a| a.id.clone()))
        .collect();
    ensure!(containers == vec![container_id], "{containers:?}");
    Ok(())
}

/// ListPodSandboxStats honours the ID and label filters.
async fn list_pod_sandbox_stats_filters(rt: &CriRuntime) -> anyhow::Result<()> {
    let (sandbox_a, _) = measured_pod(rt, "psa").await?;
    let (sandbox_b, _) = measured_pod(rt, "psb").await?;
    let list = async |filter: PodSandboxStatsFilter| -> anyhow::Result<Vec<String>> {
        let stats = rt
            .runtime_client()
            .list_pod_sandbox_stats(ListPodSandboxStatsRequest {
                filter: Some(filter),
            })
            .await?
            .into_inner()
            .stats;
        let mut ids: Vec<String> = stats
            .into_iter()
            .filter_map(|s| s.attributes.map(|a| a.id))
            .collect();
        ids.sort();
        Ok(ids)
    };
    let by_label = |pod: &str| PodSandboxStatsFilter {
        label_selector: HashMap::from([("pod".to_string(), pod.to_string())]),
        ..Default::default()
    };
    ensure!(list(by_label("psa")).await? == vec![sandbox_a.clone()]);
    ensure!(
        list(PodSandboxStatsFilter {
            id: sandbox_b.clone(),
            ..Default::default()
        })
        .await?
            == vec![sandbox_b.clone()]
    );
    let both = PodSandboxStatsFilter {
        id: sandbox_a.clone(),
        ..by_label("psb")
    };
    ensure!(list(both).await?.is_empty(), "conditions are ANDed");
    Ok(())
}

/// Stats of objects that do not exist are NotFound.
async fn stats_of_missing_objects(rt: &CriRuntime) -> anyhow::Result<()> {
    const MISSING: &str = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789";
    let mut client = rt.runtime_client();
    let err = client
        .container_stats(ContainerStatsRequest {
            container_id: MISSING.into(),
        })
        .await
        .expect_err("ContainerStats of a missing container");
    ensure!(err.code() == Code::NotFound, "{err:?}");
    let err = client
        .pod_sandbox_stats(PodSandboxStatsRequest {
            pod_sandbox_id: MISSING.into(),
        })
        .await
        .expect_err("PodSandboxStats of a missing sandbox");
    ensure!(err.code() == Code::NotFound, "{err:?}");
    Ok(())
}

/// ListMetricDescriptors names the cAdvisor metrics with their label keys, and
/// ListPodSandboxMetrics reports them for the pod (network per interface) and its
/// container, with values matching the descriptors' labels.
async fn pod_sandbox_metrics(rt: &CriRuntime) -> anyhow::Result<()> {
    let (sandbox_id, container_id) = served_pod(rt, "metrics").await?;
    let mut client = rt.runtime_client();
    let descriptors = client
        .list_metric_descriptors(ListMetricDescriptorsRequest {})
        .await?
        .into_inner()
        .descriptors;
    let keys: HashMap<String, Vec<String>> = descriptors
        .into_iter()
        .map(|d| (d.name, d.label_keys))
        .collect();
    for name in [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "container_memory_usage_bytes",
        "container_memory_rss",
        "container_fs_usage_bytes",
        "container_network_receive_bytes_total",
        "container_network_transmit_bytes_total",
    ] {
        ensure!(keys.contains_key(name), "no descriptor {name}: {keys:?}");
    }

    let pods = client
        .list_pod_sandbox_metrics(ListPodSandboxMetricsRequest {})
        .await?
        .into_inner()
        .pod_metrics;
    let pod = pods
        .iter()
        .find(|p| p.pod_sandbox_id == sandbox_id)
        .context("no metrics for the pod")?;
    for metric in pod
        .metrics
        .iter()
        .chain(pod.container_metrics.iter().flat_map(|c| &c.metrics))
    {
        let expected = keys
            .get(&metric.name)
            .with_context(|| format!("{} has no descriptor", metric.name))?;
        ensure!(
            metric.label_values.len() == expected.len(),
            "{metric:?} vs {expected:?}"
        );
    }
    let received = pod
        .metrics
        .iter()
        .find(|m| {
            m.name == "container_network_receive_bytes_total"
                && m.label_values.last().map(String::as_str) == Some("eth0")
        })
        .context("no eth0 receive metric")?;
    ensure!(
        value(&received.value).is_some_and(|v| v > 0),
        "{received:?}"
    );
    let container = pod
        .container_metrics
        .iter()
        .find(|c| c.container_id == container_id)
        .context("no metrics for the container")?;
    let working_set = container
        .metrics
        .iter()
        .find(|m| m.name == "container_memory_working_set_bytes")
        .context("no working set metric")?;
    ensure!(
        value(&working_set.value).is_some_and(|v| v > 0),
        "{working_set:?}"
    );
    ensure!(
        working_set.label_values.first() == Some(&container_id),
        "{working_set:?}"
    );
    Ok(())
}
