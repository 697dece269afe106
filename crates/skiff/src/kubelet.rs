//! `skiff kubelet`: the node agent, with the embedded runtime or a remote CRI endpoint.

use std::sync::Arc;

use anyhow::Context;
use futures::FutureExt;
use skiff_kubelet::KubeletConfig;
use skiff_kubelet::cri::{Cri, Embedded, Remote};

use crate::cli::KubeletArgs;
use crate::{runtime, signals};

pub async fn run(args: KubeletArgs) -> anyhow::Result<()> {
    let shutdown = signals::shutdown().shared();
    let config = KubeletConfig {
        node_name: node_name(args.hostname_override.as_deref())?,
        node_ip: args.node_ip,
        pod_manifest_path: args.pod_manifest_path,
        root_dir: args.root_dir,
        pod_logs_dir: "/var/log/pods".into(),
        read_only_port: args.read_only_port,
        port: args.port,
        address: args.address,
        tls_cert_file: args.tls_cert_file,
        tls_private_key_file: args.tls_private_key_file,
        file_check_frequency: args.file_check_frequency,
        sync_frequency: args.sync_frequency,
        cgroup_root: args.cgroup_root,
        ..KubeletConfig::default()
    };

    let cri: Arc<dyn Cri> = match &args.container_runtime_endpoint {
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
            tokio::spawn(async move {
                if let Err(err) = serve.await {
                    tracing::error!("CRI server: {err:#}");
                }
            });
            Arc::new(Embedded::new(embedded.runtime, embedded.images))
        }
    };
    skiff_kubelet::run(config, cri, shutdown).await
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
