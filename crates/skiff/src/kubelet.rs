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
    run_until(
        args,
        skiff_client::in_process::Connector::default(),
        signals::shutdown().boxed(),
    )
    .await
}

/// The kubelet (and its embedded runtime) until `shutdown` resolves.
pub async fn run_until(
    args: KubeletArgs,
    connector: skiff_client::in_process::Connector,
    shutdown: futures::future::BoxFuture<'static, ()>,
) -> anyhow::Result<()> {
    let shutdown = shutdown.shared();
    let (mut config, endpoint) = kubelet_config(&args)?;
    config.api_connector = connector;

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
    // Upstream's ValidateKubeletFlags, after the configuration's validation.
    kubelet_configuration::validate_node_labels(&config.node_labels)
        .context("failed to validate kubelet flags")?;
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
    set(&mut config.pod_pids_limit, &args.pod_max_pids);
    // In a cluster.
    if let Some(path) = &args.kubeconfig {
        config.kubeconfig = Some(path.clone());
    }
    set(&mut config.register_node, &args.register_node);
    set(&mut config.register_with_taints, &args.register_with_taints);
    config.node_labels = kubelet_configuration::parse_node_labels(&args.node_labels);
    set(
        &mut config.node_status_update_frequency,
        &args.node_status_update_frequency,
    );
    set(&mut config.kube_api_qps, &args.kube_api_qps);
    set(&mut config.kube_api_burst, &args.kube_api_burst);
    set(&mut config.max_pods, &args.max_pods);
    if let Some(servers) = &args.cluster_dns {
        config.cluster_dns = kubelet_configuration::parse_cluster_dns(servers);
    }
    set(&mut config.cluster_domain, &args.cluster_domain);
    if let Some(file) = &args.client_ca_file {
        config.client_ca_file = Some(file.clone()).filter(|f| !f.as_os_str().is_empty());
    }
    set(&mut config.anonymous_auth, &args.anonymous_auth);
    set(
        &mut config.authentication_token_webhook,
        &args.authentication_token_webhook,
    );
    set(&mut config.authorization_mode, &args.authorization_mode);
    if let Some(id) = &args.provider_id {
        config.provider_id = Some(id.clone()).filter(|id| !id.is_empty());
    }
    Ok(())
}

/// The node name: the override, else the host name in lower case (as upstream).
pub(crate) fn node_name(hostname_override: Option<&str>) -> anyhow::Result<String> {
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
    use skiff_kubelet::AuthorizationMode;
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

    /// Without `--config`, the flag defaults apply: anonymous requests allowed, no token
    /// webhook, AlwaysAllow (upstream's `applyLegacyDefaults`).
    #[test]
    fn cluster_flag_defaults_without_a_file() {
        let (config, _) = kubelet_config(&args(&[])).unwrap();
        assert_eq!(config.kubeconfig, None);
        assert!(config.register_node);
        assert!(config.register_with_taints.is_empty() && config.node_labels.is_empty());
        assert_eq!(config.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(
            config.node_status_report_frequency,
            Duration::from_secs(300)
        );
        assert_eq!(config.node_lease_duration_seconds, 40);
        assert_eq!((config.kube_api_qps, config.kube_api_burst), (50, 100));
        assert_eq!(config.max_pods, 110);
        assert!(config.cluster_dns.is_empty() && config.cluster_domain.is_empty());
        assert!(config.anonymous_auth);
        assert!(!config.authentication_token_webhook);
        assert_eq!(config.authorization_mode, AuthorizationMode::AlwaysAllow);
        assert_eq!(config.client_ca_file, None);
        assert_eq!(config.provider_id, None);
    }

    #[test]
    fn cluster_flags_set_the_config() {
        let (config, _) = kubelet_config(&args(&[
            "--kubeconfig",
            "/etc/kubernetes/kubelet.conf",
            "--register-node=false",
            "--register-with-taints",
            "dedicated=infra:NoSchedule,gpu:NoExecute",
            "--node-labels",
            "node.kubernetes.io/pool=a,example.com/tier=web",
            "--node-labels",
            "kubernetes.io/hostname=n1",
            "--node-status-update-frequency",
            "4s",
            "--kube-api-qps",
            "20",
            "--kube-api-burst",
            "40",
            "--max-pods",
            "8",
            "--cluster-dns",
            "10.96.0.10,fd00::10",
            "--cluster-dns",
            "10.96.0.11",
            "--cluster-domain",
            "cluster.local",
            "--client-ca-file",
            "/pki/ca.crt",
            "--anonymous-auth=false",
            "--authentication-token-webhook",
            "--authorization-mode",
            "Webhook",
            "--provider-id",
            "skiff://n1",
            "--pod-max-pids",
            "1024",
        ]))
        .unwrap();
        assert_eq!(
            config.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/kubernetes/kubelet.conf"))
        );
        assert!(!config.register_node);
        let taints: Vec<(&str, Option<&str>, &str)> = config
            .register_with_taints
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
            .collect();
        assert_eq!(
            taints,
            [
                ("dedicated", Some("infra"), "NoSchedule"),
                ("gpu", None, "NoExecute")
            ]
        );
        assert_eq!(config.node_labels.len(), 3);
        assert_eq!(config.node_labels["node.kubernetes.io/pool"], "a");
        assert_eq!(config.node_labels["kubernetes.io/hostname"], "n1");
        assert_eq!(config.node_status_update_frequency, Duration::from_secs(4));
        assert_eq!(
            config.node_status_report_frequency,
            Duration::from_secs(300),
            "the flag does not move the report frequency"
        );
        assert_eq!((config.kube_api_qps, config.kube_api_burst), (20, 40));
        assert_eq!(config.max_pods, 8);
        let dns: Vec<String> = config.cluster_dns.iter().map(ToString::to_string).collect();
        assert_eq!(dns, ["10.96.0.10", "fd00::10", "10.96.0.11"]);
        assert_eq!(config.cluster_domain, "cluster.local");
        assert_eq!(
            config.client_ca_file.as_deref(),
            Some(std::path::Path::new("/pki/ca.crt"))
        );
        assert!(!config.anonymous_auth);
        assert!(config.authentication_token_webhook);
        assert_eq!(config.authorization_mode, AuthorizationMode::Webhook);
        assert_eq!(config.provider_id.as_deref(), Some("skiff://n1"));
        assert_eq!(config.pod_pids_limit, 1024);
    }

    /// A file starts from the v1beta1 defaults (anonymous off, webhook on, Webhook mode);
    /// flags override what the file says.
    #[test]
    fn cluster_flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.yaml");
        std::fs::write(
            &empty,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
        )
        .unwrap();
        let (config, _) = kubelet_config(&args(&["--config", empty.to_str().unwrap()])).unwrap();
        assert!(!config.anonymous_auth);
        assert!(config.authentication_token_webhook);
        assert_eq!(config.authorization_mode, AuthorizationMode::Webhook);

        let file = dir.path().join("kubelet.yaml");
        std::fs::write(
            &file,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             maxPods: 50\nclusterDNS: [10.0.0.10]\nclusterDomain: file.local\n\
             registerWithTaints: [{key: file, effect: NoSchedule}]\n\
             authentication: {anonymous: {enabled: false}}\n",
        )
        .unwrap();
        let (config, _) = kubelet_config(&args(&[
            "--config",
            file.to_str().unwrap(),
            "--anonymous-auth",
            "--authorization-mode",
            "AlwaysAllow",
            "--authentication-token-webhook=false",
            "--cluster-dns",
            "10.0.0.53",
            "--register-with-taints",
            "",
        ]))
        .unwrap();
        assert!(config.anonymous_auth, "flag wins");
        assert!(!config.authentication_token_webhook);
        assert_eq!(config.authorization_mode, AuthorizationMode::AlwaysAllow);
        assert_eq!(config.max_pods, 50, "from the file");
        assert_eq!(config.cluster_domain, "file.local");
        assert_eq!(config.cluster_dns.len(), 1);
        assert_eq!(config.cluster_dns[0].to_string(), "10.0.0.53");
        assert!(
            config.register_with_taints.is_empty(),
            "an empty flag clears the file's taints"
        );
    }

    #[test]
    fn bad_cluster_flags_are_refused() {
        for bad in [
            ["--register-with-taints", "a=b:Sometimes"],
            ["--register-with-taints", "a"],
            ["--authorization-mode", "RBAC"],
            ["--authorization-mode", ""],
            ["--node-status-update-frequency", "10"],
            ["--max-pods", "many"],
        ] {
            let argv = ["skiff", "kubelet"].into_iter().chain(bad);
            assert!(crate::cli::Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
        let err = crate::cli::Cli::try_parse_from([
            "skiff",
            "kubelet",
            "--register-with-taints",
            "k=v:Bad",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("invalid taint effect: Bad, unsupported taint effect"),
            "{err}"
        );
        let err = format!(
            "{:#}",
            kubelet_config(&args(&["--node-labels", "node-role.kubernetes.io/worker="]))
                .unwrap_err()
        );
        assert!(
            err.starts_with(
                "failed to validate kubelet flags: unknown 'kubernetes.io' or 'k8s.io' labels \
                 specified with --node-labels: [node-role.kubernetes.io/worker]"
            ),
            "{err}"
        );
        let err = format!(
            "{:#}",
            kubelet_config(&args(&["--max-pods", "-1", "--kube-api-qps", "-5"])).unwrap_err()
        );
        assert!(
            err.contains("maxPods (--max-pods): -1 must not be a negative number")
                && err.contains("kubeAPIQPS (--kube-api-qps): -5 must not be a negative number"),
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
