//! The kubelet's client of the API server (upstream's `KubeClient` built from
//! `--kubeconfig`): a `kube::Client` for the node's own objects, its pods, Lease, events
//! and the ConfigMaps, Secrets and tokens its pods use.

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client for the API server `kubeconfig` names (its current context). Errors: the file
/// cannot be read or parsed, or names no usable cluster or credentials.
pub async fn from_kubeconfig(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading the kubeconfig {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading the kubeconfig {}", kubeconfig.display()))?;
    kube::Client::try_from(config)
        .with_context(|| format!("building a client from {}", kubeconfig.display()))
}
