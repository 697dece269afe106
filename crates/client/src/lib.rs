//! What Skiff's components share as clients of an API server (client-go's role): a
//! `kube::Client` built from a kubeconfig ([`from_kubeconfig`]) with client-go's
//! client-side rate limit ([`flowcontrol`]), informers with their caches ([`cache`]),
//! the events.k8s.io recorder ([`events`]), leader election on a Lease
//! ([`leaderelection`]), controllers' rate-limited work queues ([`workqueue`]), and a
//! component's `/healthz` and `/metrics` endpoint ([`serving`]) with the shared
//! [`metrics`].

pub mod cache;
pub mod events;
pub mod flowcontrol;
pub mod in_process;
pub mod leaderelection;
pub mod metrics;
pub mod serving;
pub mod workqueue;

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig file cannot be read or parsed.
    #[error("reading the kubeconfig {path}: {source}")]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig names no usable cluster, user or context.
    #[error("loading the kubeconfig {path}: {source}")]
    LoadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The leader election configuration is invalid, or the identity cannot be made
    /// (client-go `NewLeaderElector`'s messages).
    #[error("{0}")]
    LeaderElection(String),
    /// The health and metrics endpoint could not start (the address is taken, or the
    /// self-signed certificate could not be made).
    #[error("serving {addr}: {source}")]
    Serve {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// An in-process client could not be made: the kubeconfig has no usable client
    /// certificate, or the API server refuses it.
    #[error("an in-process client from {path}: {why}")]
    InProcess {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The client could not be built from the configuration (TLS settings).
    #[error("building a client from {path}: {source}")]
    Build {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::Error,
    },
}

/// A client for the API server `kubeconfig` names (its current context), sending at most
/// `qps` requests per second with bursts of `burst` (0: client-go's defaults 5 / 10;
/// a negative QPS: unlimited). Errors: the file cannot be read or parsed, or names no
/// usable cluster or credentials.
pub async fn from_kubeconfig(
    kubeconfig: &Path,
    qps: f32,
    burst: i32,
) -> Result<kube::Client, Error> {
    connect(kubeconfig, qps, burst, &in_process::Connector::default()).await
}

/// [`from_kubeconfig`] through `connector`: in process, the kubeconfig's client
/// certificate is the caller's identity and its server address is not used; the rate
/// limit applies alike. Errors: as [`from_kubeconfig`]; in process, also a kubeconfig
/// without a client certificate, or one the API server does not accept.
pub async fn connect(
    kubeconfig: &Path,
    qps: f32,
    burst: i32,
    connector: &in_process::Connector,
) -> Result<kube::Client, Error> {
    let path = kubeconfig.to_path_buf();
    let file = Kubeconfig::read_from(kubeconfig).map_err(|source| Error::ReadKubeconfig {
        path: path.clone(),
        source,
    })?;
    let mut config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|source| Error::LoadKubeconfig {
            path: path.clone(),
            source,
        })?;
    // kube retries 429, 503 and 504 answers by default, up to 15 times over minutes,
    // even without a Retry-After: an eviction refused by a disruption budget would come
    // back after five minutes. As client-go's callers do, the components retry through
    // their own work queues and loops instead.
    config.default_retry = false;
    let bucket = flowcontrol::TokenBucket::from_config(qps, burst);
    if let Some(local) = connector.local() {
        let certificate = in_process::client_certificate(&config, &path)?;
        let service = local
            .service(&certificate)
            .map_err(|why| Error::InProcess { path, why })?;
        let builder = kube::client::ClientBuilder::new(service, config.default_namespace);
        return Ok(rate_limited(builder, bucket).build());
    }
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|source| Error::Build { path, source })?;
    Ok(rate_limited(builder, bucket).build())
}

/// The client's requests each wait for a token of `bucket`, if there is one (client-go's
/// `rest.Config` QPS and Burst, its `flowcontrol.RateLimiter`); without one they go
/// through as they are.
fn rate_limited<S>(
    builder: kube::client::ClientBuilder<S>,
    bucket: Option<std::sync::Arc<flowcontrol::TokenBucket>>,
) -> kube::client::ClientBuilder<tower::util::Either<flowcontrol::RateLimit<S>, S>> {
    builder.with_layer(&tower::util::option_layer(
        bucket.map(flowcontrol::RateLimitLayer::new),
    ))
}
