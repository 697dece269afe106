//! CRI runtime-level RPCs and the behaviour every verb shares, against Skiff's runtime and
//! containerd 1.6 (see `common::cri`): Version, Status (conditions, verbose info),
//! RuntimeConfig, UpdateRuntimeConfig, the filters of ListPodSandbox and ListContainers,
//! truncated IDs, verbose ContainerStatus / PodSandboxStatus, and stopping what is gone.

mod common;

use std::collections::HashMap;

use anyhow::{Context, ensure};
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use serde_json::Value;
use tonic::Code;

common::cri_cases! {
    version_and_status,
    runtime_config_cgroup_driver
        => skiff_only("containerd 1.6 predates the RuntimeConfig RPC: it answers Unimplemented"),
    update_runtime_config_keeps_a_user_conflist,
    update_runtime_config_writes_the_default_conflist
        => skiff_only("containerd 1.6 writes a conflist on UpdateRuntimeConfig only from a configured conf_template"),
    list_filters,
    truncated_ids,
    verbose_object_status,
    stop_missing_objects
        => skiff_only("containerd 1.6 answers NotFound to StopContainer and StopPodSandbox of a missing object, though the CRI calls both idempotent"),
}

fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A sandbox of pod `name` with `labels`; returns its ID.
async fn labelled_sandbox(
    rt: &CriRuntime,
    name: &str,
    labels: HashMap<String, String>,
) -> anyhow::Result<String> {
    let mut config = rt.sandbox_config(name);
    config.labels = labels;
    Ok(rt
        .runtime_client()
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(config),
            runtime_handler: String::new(),
        })
        .await
        .with_context(|| format!("RunPodSandbox {name}"))?
        .into_inner()
        .pod_sandbox_id)
}

/// CreateContainer of a `sleep` container `name` with `labels` in pod `pod`; returns its
/// ID (created, not started).
async fn create_sleeper(
    rt: &CriRuntime,
    sandbox_id: &str,
    pod: &str,
    name: &str,
    labels: HashMap<String, String>,
) -> anyhow::Result<String> {
    let mut config = rt.container_config(name, &rt.busybox(), ["sleep", "3600"]);
    config.labels = labels;
    Ok(rt
        .runtime_client()
        .create_container(CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(rt.sandbox_config(pod)),
        })
        .await
        .with_context(|| format!("CreateContainer {name}"))?
        .into_inner()
        .container_id)
}

fn condition(status: &RuntimeStatus, kind: &str) -> Option<RuntimeCondition> {
    status.conditions.iter().find(|c| c.r#type == kind).cloned()
}

/// Version names the CRI API `v1`; Status reports RuntimeReady and NetworkReady, with an
/// `info` map only when verbose (a JSON `config` entry, as containerd).
async fn version_and_status(rt: &CriRuntime) -> anyhow::Result<()> {
    let mut client = rt.runtime_client();
    let version = client
        .version(VersionRequest::default())
        .await?
        .into_inner();
    ensure!(version.runtime_api_version == "v1", "{version:?}");
    ensure!(
        !version.runtime_name.is_empty() && !version.runtime_version.is_empty(),
        "{version:?}"
    );

    let quiet = client
        .status(StatusRequest { verbose: false })
        .await?
        .into_inner();
    let status = quiet.status.context("Status without status")?;
    for kind in ["RuntimeReady", "NetworkReady"] {
        let found = condition(&status, kind).with_context(|| format!("no {kind}"))?;
        ensure!(found.status, "{kind} not true: {found:?}");
    }
    ensure!(
        quiet.info.is_empty(),
        "info without verbose: {:?}",
        quiet.info
    );

    let verbose = client
        .status(StatusRequest { verbose: true })
        .await?
        .into_inner();
    let config = verbose
        .info
        .get("config")
        .with_context(|| format!("verbose info without config: {:?}", verbose.info))?;
    let config: Value = serde_json::from_str(config).context("info.config is not JSON")?;
    ensure!(config.is_object(), "{config}");

    // Runtime handlers (containerd 1.7+; 1.6 lists none): when listed, the default
    // handler `""` is among them, as the kubelet looks a pod's handler up there.
    let handlers: Vec<&str> = quiet
        .runtime_handlers
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    ensure!(
        handlers.is_empty() || handlers.contains(&""),
        "the default handler \"\" is not listed: {handlers:?}"
    );
    if rt.flavor() == common::cri::Flavor::Skiff {
        ensure!(
            handlers.contains(&"runc") && handlers.contains(&""),
            "{handlers:?}"
        );
    }
    Ok(())
}

/// RuntimeConfig reports the cgroupfs driver (Skiff manages cgroups by path).
async fn runtime_config_cgroup_driver(rt: &CriRuntime) -> anyhow::Result<()> {
    let config = rt
        .runtime_client()
        .runtime_config(RuntimeConfigRequest {})
        .await?
        .into_inner();
    let driver = config.linux.context("no linux config")?.cgroup_driver;
    ensure!(driver == CgroupDriver::Cgroupfs as i32, "driver {driver}");
    Ok(())
}

/// UpdateRuntimeConfig with a pod CIDR succeeds and leaves a conflist the runtime did not
/// write untouched: the network stays ready and pods keep getting addresses of its subnet.
async fn update_runtime_config_keeps_a_user_conflist(rt: &CriRuntime) -> anyhow::Result<()> {
    let conf_dir = rt.dir().join("cni");
    let before = conflists(&conf_dir)?;
    ensure!(!before.is_empty(), "the harness wrote no conflist");
    let mut client = rt.runtime_client();
    client
        .update_runtime_config(UpdateRuntimeConfigRequest {
            runtime_config: Some(RuntimeConfig {
                network_config: Some(NetworkConfig {
                    pod_cidr: "10.123.0.0/16".into(),
                }),
            }),
        })
        .await?;
    ensure!(
        conflists(&conf_dir)? == before,
        "the user's conflist changed"
    );
    let status = client
        .status(StatusRequest { verbose: false })
        .await?
        .into_inner()
        .status
        .context("Status without status")?;
    let network = condition(&status, "NetworkReady").context("no NetworkReady")?;
    ensure!(network.status, "{network:?}");

    // An empty CIDR (the kubelet before the node has one) is accepted too.
    client
        .update_runtime_config(UpdateRuntimeConfigRequest {
            runtime_config: Some(RuntimeConfig {
                network_config: Some(NetworkConfig::default()),
            }),
        })
        .await?;
    rt.pull(&rt.busybox()).await?;
    let sandbox_id = rt.run_sandbox("cidr").await?;
    let ip = client
        .pod_sandbox_status(PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id,
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .and_then(|s| s.network)
        .map(|n| n.ip)
        .unwrap_or_default();
    let subnet: ipnet::IpNet = rt.pod_cidr().parse()?;
    ensure!(
        subnet.contains(&ip.parse::<std::net::IpAddr>()?),
        "pod IP {ip} outside the conflist's {subnet}"
    );
    Ok(())
}

/// Without any conflist the network is not ready; UpdateRuntimeConfig with a pod CIDR
/// writes Skiff's default conflist for that subnet (the network becomes ready), and a new
/// CIDR rewrites it.
async fn update_runtime_config_writes_the_default_conflist(rt: &CriRuntime) -> anyhow::Result<()> {
    let conf_dir = rt.dir().join("cni");
    for (path, _) in conflists(&conf_dir)? {
        std::fs::remove_file(path)?;
    }
    let mut client = rt.runtime_client();
    let network_ready = async |client: &mut k8s_cri::v1::runtime_service_client::RuntimeServiceClient<_>| -> anyhow::Result<bool> {
        let status = client
            .status(StatusRequest { verbose: false })
            .await?
            .into_inner()
            .status
            .context("Status without status")?;
        Ok(condition(&status, "NetworkReady").is_some_and(|c| c.status))
    };
    ensure!(
        !network_ready(&mut client).await?,
        "ready without a conflist"
    );
    for cidr in ["10.124.0.0/16", "10.125.0.0/24"] {
        client
            .update_runtime_config(UpdateRuntimeConfigRequest {
                runtime_config: Some(RuntimeConfig {
                    network_config: Some(NetworkConfig {
                        pod_cidr: cidr.into(),
                    }),
                }),
            })
            .await?;
        let written = conflists(&conf_dir)?;
        ensure!(written.len() == 1, "{written:?}");
        let conflist: Value = serde_json::from_str(&written[0].1)?;
        ensure!(
            conflist.pointer("/plugins/0/ipam/ranges/0/0/subnet") == Some(&Value::from(cidr)),
            "{conflist}"
        );
        ensure!(network_ready(&mut client).await?, "not ready with {cidr}");
    }
    let err = client
        .update_runtime_config(UpdateRuntimeConfigRequest {
            runtime_config: Some(RuntimeConfig {
                network_config: Some(NetworkConfig {
                    pod_cidr: "10.1.2.3/99".into(),
                }),
            }),
        })
        .await
        .expect_err("a bad CIDR");
    ensure!(err.code() == Code::InvalidArgument, "{err:?}");
    Ok(())
}

/// The `*.conflist` files of `dir` with their contents.
fn conflists(dir: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "conflist") {
            out.push((path.display().to_string(), std::fs::read_to_string(&path)?));
        }
    }
    out.sort();
    Ok(out)
}

fn sandbox_ids(items: &[PodSandbox]) -> Vec<String> {
    let mut ids: Vec<String> = items.iter().map(|s| s.id.clone()).collect();
    ids.sort();
    ids
}

fn container_ids(items: &[Container]) -> Vec<String> {
    let mut ids: Vec<String> = items.iter().map(|c| c.id.clone()).collect();
    ids.sort();
    ids
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// ListPodSandbox filters by ID, state and labels; ListContainers by ID, state, sandbox
/// and labels; all given conditions must hold.
async fn list_filters(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let mut client = rt.runtime_client();
    let ns = rt.namespace();
    let front = labelled_sandbox(rt, "front", labels(&[("tier", "front"), ("ns", &ns)])).await?;
    let back = labelled_sandbox(rt, "back", labels(&[("tier", "back"), ("ns", &ns)])).await?;
    let web = create_sleeper(rt, &front, "front", "web", labels(&[("role", "web")])).await?;
    let db = create_sleeper(rt, &back, "back", "db", labels(&[("role", "db")])).await?;
    let cache = create_sleeper(rt, &back, "back", "cache", labels(&[("role", "cache")])).await?;
    client
        .start_container(StartContainerRequest {
            container_id: web.clone(),
        })
        .await?;
    client
        .start_container(StartContainerRequest {
            container_id: db.clone(),
        })
        .await?;
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: back.clone(),
        })
        .await?;

    let mut list_sandboxes = async |filter: PodSandboxFilter| -> anyhow::Result<Vec<String>> {
        let items = client
            .list_pod_sandbox(ListPodSandboxRequest {
                filter: Some(filter),
            })
            .await?
            .into_inner()
            .items;
        Ok(sandbox_ids(&items))
    };
    let mine = |selector: &[(&str, &str)]| {
        let mut all = labels(selector);
        all.insert("ns".into(), ns.clone());
        all
    };
    ensure!(
        list_sandboxes(PodSandboxFilter {
            label_selector: mine(&[]),
            ..Default::default()
        })
        .await?
            == sorted(vec![front.clone(), back.clone()])
    );
    ensure!(
        list_sandboxes(PodSandboxFilter {
            id: back.clone(),
            ..Default::default()
        })
        .await?
            == vec![back.clone()]
    );
    ensure!(
        list_sandboxes(PodSandboxFilter {
            state: Some(PodSandboxStateValue {
                state: PodSandboxState::SandboxReady as i32
            }),
            label_selector: mine(&[]),
            ..Default::default()
        })
        .await?
            == vec![front.clone()]
    );
    ensure!(
        list_sandboxes(PodSandboxFilter {
            state: Some(PodSandboxStateValue {
                state: PodSandboxState::SandboxNotready as i32
            }),
            label_selector: mine(&[]),
            ..Default::default()
        })
        .await?
            == vec![back.clone()]
    );
    ensure!(
        list_sandboxes(PodSandboxFilter {
            label_selector: mine(&[("tier", "back")]),
            ..Default::default()
        })
        .await?
            == vec![back.clone()]
    );
    ensure!(
        list_sandboxes(PodSandboxFilter {
            label_selector: mine(&[("tier", "none")]),
            ..Default::default()
        })
        .await?
        .is_empty()
    );
    ensure!(
        list_sandboxes(PodSandboxFilter {
            id: front.clone(),
            label_selector: mine(&[("tier", "back")]),
            ..Default::default()
        })
        .await?
        .is_empty(),
        "conditions are ANDed"
    );

    let mut client = rt.runtime_client();
    let mut list_containers = async |filter: ContainerFilter| -> anyhow::Result<Vec<String>> {
        let containers = client
            .list_containers(ListContainersRequest {
                filter: Some(filter),
            })
            .await?
            .into_inner()
            .containers;
        Ok(container_ids(&containers))
    };
    let state = |s: ContainerState| Some(ContainerStateValue { state: s as i32 });
    ensure!(
        list_containers(ContainerFilter {
            pod_sandbox_id: back.clone(),
            ..Default::default()
        })
        .await?
            == sorted(vec![db.clone(), cache.clone()])
    );
    ensure!(
        list_containers(ContainerFilter {
            id: web.clone(),
            ..Default::default()
        })
        .await?
            == vec![web.clone()]
    );
    ensure!(
        list_containers(ContainerFilter {
            pod_sandbox_id: back.clone(),
            state: state(ContainerState::ContainerExited),
            ..Default::default()
        })
        .await?
            == vec![db.clone()],
        "db was stopped with its sandbox"
    );
    ensure!(
        list_containers(ContainerFilter {
            pod_sandbox_id: back.clone(),
            state: state(ContainerState::ContainerCreated),
            ..Default::default()
        })
        .await?
            == vec![cache.clone()]
    );
    ensure!(
        list_containers(ContainerFilter {
            pod_sandbox_id: front.clone(),
            state: state(ContainerState::ContainerRunning),
            ..Default::default()
        })
        .await?
            == vec![web.clone()]
    );
    ensure!(
        list_containers(ContainerFilter {
            label_selector: labels(&[("role", "cache")]),
            pod_sandbox_id: back.clone(),
            ..Default::default()
        })
        .await?
            == vec![cache.clone()]
    );
    ensure!(
        list_containers(ContainerFilter {
            id: web.clone(),
            pod_sandbox_id: back.clone(),
            ..Default::default()
        })
        .await?
        .is_empty(),
        "conditions are ANDed"
    );
    Ok(())
}

/// A unique prefix of an ID names the object in status calls and List filters, as
/// containerd's truncated-ID index does.
async fn truncated_ids(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let mut client = rt.runtime_client();
    let sandbox_id = rt.run_sandbox("short").await?;
    let container_id = rt
        .run_container(
            &sandbox_id,
            "short",
            rt.container_config("sleep", &rt.busybox(), ["sleep", "3600"]),
        )
        .await?;
    let short_sandbox = &sandbox_id[..12];
    let short_container = &container_id[..12];

    let status = client
        .pod_sandbox_status(PodSandboxStatusRequest {
            pod_sandbox_id: short_sandbox.into(),
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .context("no status")?;
    ensure!(status.id == sandbox_id, "{} != {sandbox_id}", status.id);
    let status = client
        .container_status(ContainerStatusRequest {
            container_id: short_container.into(),
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .context("no status")?;
    ensure!(status.id == container_id, "{} != {container_id}", status.id);

    let listed = client
        .list_containers(ListContainersRequest {
            filter: Some(ContainerFilter {
                id: short_container.into(),
                pod_sandbox_id: short_sandbox.into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .containers;
    ensure!(
        container_ids(&listed) == vec![container_id.clone()],
        "{listed:?}"
    );
    let listed = client
        .list_pod_sandbox(ListPodSandboxRequest {
            filter: Some(PodSandboxFilter {
                id: short_sandbox.into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .items;
    ensure!(
        sandbox_ids(&listed) == vec![sandbox_id.clone()],
        "{listed:?}"
    );

    client
        .stop_container(StopContainerRequest {
            container_id: short_container.into(),
            timeout: 0,
        })
        .await?;
    client
        .remove_container(RemoveContainerRequest {
            container_id: short_container.into(),
        })
        .await?;
    let err = client
        .container_status(ContainerStatusRequest {
            container_id: container_id.clone(),
            verbose: false,
        })
        .await
        .expect_err("removed through its short ID");
    ensure!(err.code() == Code::NotFound, "{err:?}");
    Ok(())
}

/// The `info` JSON document of a verbose status reply.
fn info_document(info: &HashMap<String, String>) -> anyhow::Result<Value> {
    let text = info
        .get("info")
        .with_context(|| format!("no \"info\" entry in {info:?}"))?;
    serde_json::from_str(text).context("\"info\" is not JSON")
}

/// Verbose ContainerStatus and PodSandboxStatus add an `info` JSON document holding the
/// object's CRI config; without `verbose` there is none.
async fn verbose_object_status(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let mut client = rt.runtime_client();
    let sandbox_id = rt.run_sandbox("verbose").await?;
    let container_id = rt
        .run_container(
            &sandbox_id,
            "verbose",
            rt.container_config("sleep", &rt.busybox(), ["sleep", "3600"]),
        )
        .await?;
    let request = |verbose| ContainerStatusRequest {
        container_id: container_id.clone(),
        verbose,
    };
    let quiet = client.container_status(request(false)).await?.into_inner();
    ensure!(quiet.info.is_empty(), "{:?}", quiet.info);
    let verbose = client.container_status(request(true)).await?.into_inner();
    let info = info_document(&verbose.info)?;
    ensure!(
        info.pointer("/config/metadata/name") == Some(&Value::from("sleep")),
        "{info}"
    );
    ensure!(
        info.get("sandboxID") == Some(&Value::from(sandbox_id.clone())),
        "{info}"
    );
    ensure!(
        info.get("pid").and_then(Value::as_i64).unwrap_or(0) > 0,
        "{info}"
    );

    let request = |verbose| PodSandboxStatusRequest {
        pod_sandbox_id: sandbox_id.clone(),
        verbose,
    };
    let quiet = client
        .pod_sandbox_status(request(false))
        .await?
        .into_inner();
    ensure!(quiet.info.is_empty(), "{:?}", quiet.info);
    let verbose = client.pod_sandbox_status(request(true)).await?.into_inner();
    let info = info_document(&verbose.info)?;
    ensure!(
        info.pointer("/config/metadata/name") == Some(&Value::from("verbose")),
        "{info}"
    );
    Ok(())
}

/// StopContainer and StopPodSandbox of objects that never existed succeed: there is
/// nothing left to stop (CRI: both calls are idempotent). Status calls still say NotFound.
async fn stop_missing_objects(rt: &CriRuntime) -> anyhow::Result<()> {
    const MISSING: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    let mut client = rt.runtime_client();
    client
        .stop_container(StopContainerRequest {
            container_id: MISSING.into(),
            timeout: 0,
        })
        .await
        .context("StopContainer of a missing container")?;
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: MISSING.into(),
        })
        .await
        .context("StopPodSandbox of a missing sandbox")?;
    let err = client
        .container_stats(ContainerStatsRequest {
            container_id: MISSING.into(),
        })
        .await
        .expect_err("stats of a missing container");
    ensure!(err.code() == Code::NotFound, "{err:?}");
    Ok(())
}
