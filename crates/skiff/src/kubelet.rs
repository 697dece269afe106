//! `skiff kubelet`: the node agent, with the embedded runtime or a remote CRI endpoint.

use std::sync::Arc;

use anyhow::Context;
use futures::FutureExt;
use skiff_kubelet::KubeletConfig;
use skiff_kubelet::config::kubelet_configuration::{self, KubeletConfigFile};
use skiff_kubelet::cri::{Cri, Embedded, Remote};

use crate::cli::KubeletArgs;
use crate::{runtime, signals};

pub async fn run(args: KubeletArgs) -> anyhow::Result<()> {
    let shutdown = signals::shutdown().shared();
    let (config, endpoint) = kubelet_config(&args)?;

    let mut cri_server = None;
    let cri: Arc<dyn Cri> = match &endpoint {
        Some(endpoint) => Arc::new(
            Remote::connect(endpoint)
                .await
                .with_context(|| format!("connecting to CRI endpoint {endpoint}"))?,
        ),
        None => {
            let config = runtime::config(
                args.runtime_config.as_deref(),
                runtime::Overrides {
                    root: args.runtime_root.as_deref(),
                    state: args.runtime_state.as_deref(),
                    network: &args.network,
                },
            )?;
            // Standard CRI tools (crictl) can inspect the embedded runtime on its socket.
            let socket = runtime::socket_path(&config.state);
            let embedded = runtime::open(config)?;
            let serve = skiff_runtime::server::serve(
                &socket,
                embedded.runtime.clone(),
                embedded.images.clone(),
                shutdown.clone(),
            );
            cri_server = Some(tokio::spawn(async move {
                if let Err(err) = serve.await {
                    tracing::error!("CRI server: {err:#}");
                }
            }));
            Arc::new(Embedded::new(embedded.runtime, embedded.images))
        }
    };
    let result = skiff_kubelet::run(config, cri, shutdown).await;
    // After a shutdown signal, the embedded runtime's server finishes its own shutdown (it
    // removes the socket and the pod network's idle masquerade rules) before the process
    // exits; after an error it is not waited for.
    if let Some(server) = cri_server {
        if result.is_err() {
            server.abort();
        } else if tokio::time::timeout(CRI_SERVER_STOP, server).await.is_err() {
            tracing::warn!("the CRI server did not stop within {CRI_SERVER_STOP:?}");
        }
    }
    result
}

/// How long the embedded runtime's CRI server is given to finish after the kubelet stopped.
const CRI_SERVER_STOP: std::time::Duration = std::time::Duration::from_secs(10);

/// The kubelet settings and the CRI endpoint (`None`: embedded): the `--config` file over
/// the defaults, then the flags that were given, validated together. Errors name the file
/// and the field.
fn kubelet_config(args: &KubeletArgs) -> anyhow::Result<(KubeletConfig, Option<String>)> {
    let file = match &args.config {
        Some(path) => kubelet_configuration::load(path)?,
        None => KubeletConfigFile {
            config: KubeletConfig::default(),
            container_runtime_endpoint: None,
            ignored_fields: Vec::new(),
        },
    };
    let mut config = file.config;
    apply_flags(args, &mut config)?;
    config.node_name = node_name(args.hostname_override.as_deref())?;
    kubelet_configuration::validate(&config).map_err(|e| match &args.config {
        Some(path) => anyhow::anyhow!(
            "invalid kubelet configuration (file {} and flags): {e}",
            path.display()
        ),
        None => anyhow::anyhow!("invalid kubelet flags: {e}"),
    })?;
    let endpoint = args
        .container_runtime_endpoint
        .clone()
        .or(file.container_runtime_endpoint);
    Ok((config, endpoint))
}

/// Overrides `config` with every flag that was given.
fn apply_flags(args: &KubeletArgs, config: &mut KubeletConfig) -> anyhow::Result<()> {
    fn set<T: Clone>(target: &mut T, flag: &Option<T>) {
        if let Some(value) = flag {
            *target = value.clone();
        }
    }
    config.root_dir = args.root_dir.clone();
    config.node_ip = args.node_ip;
    if let Some(path) = &args.pod_manifest_path {
        config.pod_manifest_path = Some(path.clone());
    }
    if let Some(url) = &args.manifest_url {
        config.manifest_url = Some(url.clone());
    }
    if !args.manifest_url_header.is_empty() {
        config.manifest_url_header =
            kubelet_configuration::parse_url_headers(&args.manifest_url_header)
                .map_err(|e| anyhow::anyhow!("--manifest-url-header: {e}"))?;
    }
    set(&mut config.address, &args.address);
    set(&mut config.port, &args.port);
    set(&mut config.read_only_port, &args.read_only_port);
    if let Some(file) = &args.tls_cert_file {
        config.tls_cert_file = Some(file.clone());
    }
    if let Some(file) = &args.tls_private_key_file {
        config.tls_private_key_file = Some(file.clone());
    }
    set(&mut config.file_check_frequency, &args.file_check_frequency);
    set(&mut config.http_check_frequency, &args.http_check_frequency);
    set(&mut config.sync_frequency, &args.sync_frequency);
    set(&mut config.cgroup_root, &args.cgroup_root);
    set(&mut config.cgroup_driver, &args.cgroup_driver);
    set(&mut config.cgroups_per_qos, &args.cgroups_per_qos);
    set(&mut config.system_reserved, &args.system_reserved);
    set(&mut config.kube_reserved, &args.kube_reserved);
    set(&mut config.eviction_hard, &args.eviction_hard);
    set(
        &mut config.image_gc_high_threshold_percent,
        &args.image_gc_high_threshold,
    );
    set(
        &mut config.image_gc_low_threshold_percent,
        &args.image_gc_low_threshold,
    );
    set(
        &mut config.minimum_container_ttl,
        &args.minimum_container_ttl_duration,
    );
    set(
        &mut config.max_per_pod_container,
        &args.maximum_dead_containers_per_container,
    );
    set(&mut config.max_containers, &args.maximum_dead_containers);
    set(
        &mut config.container_log.max_size,
        &args.container_log_max_size,
    );
    set(
        &mut config.container_log.max_files,
        &args.container_log_max_files,
    );
    Ok(())
}

/// The node name: the override, else the host name in lower case (as upstream).
fn node_name(hostname_override: Option<&str>) -> anyhow::Result<String> {
    let name = match hostname_override {
        Some(name) => name.to_string(),
        None => {
            std::fs::read_to_string("/proc/sys/kernel/hostname").context("reading the host name")?
        }
    };
    let name = name.trim().to_lowercase();
    anyhow::ensure!(!name.is_empty(), "the node name is empty");
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    fn args(extra: &[&str]) -> KubeletArgs {
        let argv = ["skiff", "kubelet", "--hostname-override", "n1"]
            .into_iter()
            .chain(extra.iter().copied());
        match crate::cli::Cli::try_parse_from(argv) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Kubelet(args),
            }) => *args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_a_file_flags_override_the_defaults() {
        let (config, endpoint) = kubelet_config(&args(&["--read-only-port", "0"])).unwrap();
        assert_eq!(config.read_only_port, 0);
        assert_eq!(config.port, 10250);
        assert_eq!(config.node_name, "n1");
        assert!(endpoint.is_none());
        let (config, _) = kubelet_config(&args(&[
            "--eviction-hard",
            "memory.available<1Gi",
            "--system-reserved",
            "cpu=100m",
            "--cgroups-per-qos",
            "--maximum-dead-containers",
            "-1",
            "--manifest-url-header",
            "a:1,b:2",
            "--manifest-url-header",
            "b:3",
        ]))
        .unwrap();
        assert_eq!(config.eviction_hard.len(), 1);
        assert_eq!(config.system_reserved["cpu"], "100m");
        assert_eq!(config.read_only_port, 10255);
        assert_eq!(config.max_containers, -1);
        assert_eq!(config.manifest_url_header["b"], vec!["2", "3"]);
    }

    #[test]
    fn flags_override_the_file_only_when_given() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kubelet.yaml");
        std::fs::write(
            &file,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             staticPodPath: /file/manifests\nreadOnlyPort: 10266\nsyncFrequency: 30s\n\
             imageGCLowThresholdPercent: 90\ncontainerRuntimeEndpoint: unix:///file.sock\n",
        )
        .unwrap();
        let path = file.to_str().unwrap();
        let (config, endpoint) = kubelet_config(&args(&[
            "--config",
            path,
            "--sync-frequency",
            "5s",
            "--image-gc-high-threshold",
            "95",
        ]))
        .unwrap();
        assert_eq!(
            config.pod_manifest_path.as_deref(),
            Some(std::path::Path::new("/file/manifests"))
        );
        assert_eq!(config.read_only_port, 10266, "from the file");
        assert_eq!(config.sync_frequency, Duration::from_secs(5), "flag wins");
        assert_eq!(config.image_gc_low_threshold_percent, 90);
        assert_eq!(endpoint.as_deref(), Some("unix:///file.sock"));
        let (_, endpoint) = kubelet_config(&args(&[
            "--config",
            path,
            "--image-gc-high-threshold",
            "95",
            "--container-runtime-endpoint",
            "unix:///flag.sock",
        ]))
        .unwrap();
        assert_eq!(endpoint.as_deref(), Some("unix:///flag.sock"));
        // Low 90 is only valid with the flag's high threshold.
        let err = format!(
            "{:#}",
            kubelet_config(&args(&["--config", path])).unwrap_err()
        );
        assert!(
            err.contains("kubelet.yaml") && err.contains("imageGCLowThresholdPercent"),
            "{err}"
        );
    }

    #[test]
    fn bad_flag_values_are_refused() {
        for bad in [
            ["--sync-frequency", "10"],
            ["--eviction-hard", "memory.available=1Gi"],
            ["--system-reserved", "cpu"],
        ] {
            let argv = ["skiff", "kubelet"].into_iter().chain(bad);
            assert!(crate::cli::Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
        let err = kubelet_config(&args(&["--cgroup-driver", "systemd"])).unwrap_err();
        assert!(format!("{err:#}").contains("cgroupDriver"), "{err:#}");
    }
}
