//! The kubelet's client of the API server (upstream's `KubeClient` built from
//! `--kubeconfig`): a `kube::Client` for the node's own objects, its pods, Lease, events
//! and the ConfigMaps, Secrets and tokens its pods use. Its requests are rate-limited as
//! client-go's with `kubeAPIQPS` / `kubeAPIBurst` ([`flowcontrol`]).

pub mod flowcontrol;

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client for the API server `kubeconfig` names (its current context), sending at most
/// `qps` requests per second with bursts of `burst` (0: client-go's defaults 5 / 10;
/// a negative QPS: unlimited). Errors: the file cannot be read or parsed, or names no
/// usable cluster or credentials.
pub async fn from_kubeconfig(
    kubeconfig: &Path,
    qps: i32,
    burst: i32,
) -> anyhow::Result<kube::Client> {
    let file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading the kubeconfig {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading the kubeconfig {}", kubeconfig.display()))?;
    let builder = kube::client::ClientBuilder::try_from(config)
        .with_context(|| format!("building a client from {}", kubeconfig.display()))?;
    // i32 to f32: QPS values are small; precision loss above 2^24 is irrelevant.
    Ok(
        match flowcontrol::TokenBucket::from_config(qps as f32, burst) {
            Some(bucket) => builder
                .with_layer(&flowcontrol::RateLimitLayer::new(bucket))
                .build(),
            None => builder.build(),
        },
    )
}
