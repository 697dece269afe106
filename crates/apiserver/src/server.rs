//! The API server process: PKI and the admin kubeconfig on first start, the store, the
//! bootstrap objects, then HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with optional client
//! certificates verified against the cluster CA, until shutdown.
//!
//! Request path: TLS (client certificate → [`CertificateUser`]) → [`authn::middleware`]
//! → API Priority and Fairness ([`crate::apf::middleware`]) → health checks, OpenID
//! discovery, API discovery, OpenAPI, or the REST layer.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::authn::{self, Authenticator, CertificateUser, TokenIssuer};
use crate::config::{ServerConfig, first_service_ip};
use crate::health::{self, Health};
use crate::proxy::KubeletClient;
use crate::registry::Registry;
use crate::storage::{self, Storage};
use crate::{bootstrap, discovery, openapi, rest};
use skiff_bootstrap::kubeconfig;
use skiff_bootstrap::pki::{Pki, ServingNames, host_addresses};

/// The admin kubeconfig's file name in the data directory.
pub const ADMIN_KUBECONFIG: &str = "admin.kubeconfig";
/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish after shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the API server until `shutdown` resolves. Errors: the PKI cannot be written, the
/// store cannot be opened, the bootstrap objects cannot be written, the port is taken.
pub async fn run(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with_ready(config, shutdown, None).await
}

/// What [`run_with_ready`] hands the process embedding it.
#[derive(Clone)]
pub struct Ready {
    /// The cluster's PKI (its CA signs the embedding process's component certificates).
    pub pki: Pki,
    /// The server's request handler, for in-process clients.
    pub local: LocalApi,
}

/// The API server's request handler for clients in the same process (`skiff server`'s
/// components): the same router a TLS connection's requests reach, past TLS.
#[derive(Clone)]
pub struct LocalApi {
    app: Router,
}

impl skiff_client::in_process::LocalApi for LocalApi {
    /// The caller is the certificate's user (CN, groups O), as the TLS layer makes it,
    /// from 127.0.0.1. Errors: the certificate does not parse.
    fn service(&self, certificate: &[u8]) -> Result<skiff_client::in_process::ApiService, String> {
        let user = authn::user_from_certificate(&CertificateDer::from(certificate.to_vec()))
            .ok_or_else(|| "the client certificate names no user".to_owned())?;
        let user = CertificateUser(Some(user));
        let app = self.app.clone();
        let peer = axum::extract::ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 0)));
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(user.clone());
            request.extensions_mut().insert(peer);
            app.clone().oneshot(request)
        });
        Ok(tower::util::BoxCloneSyncService::new(service))
    }
}

/// [`run`], sending the PKI and the in-process handler on `ready` once the server
/// listens and its bootstrap objects exist, so that a process embedding it
/// (`skiff server`) starts its other components on that event.
pub async fn run_with_ready(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: Option<tokio::sync::oneshot::Sender<Ready>>,
) -> anyhow::Result<()> {
    let range = &config.cluster.service_cluster_ip_range;
    let service_ip = first_service_ip(range).with_context(|| {
        format!("--service-cluster-ip-range {range} has no room for the kubernetes service")
    })?;
    let advertise_address = config
        .advertise_address
        .unwrap_or_else(default_advertise_address);
    let pki = Pki::ensure(
        &config.data_dir.join("pki"),
        &ServingNames::for_host(service_ip, &[advertise_address]),
    )?;
    let local = local_address(config.bind_address);
    let server_url = format!("https://{}", SocketAddr::new(local, config.secure_port));
    kubeconfig::write(
        &config.data_dir.join(ADMIN_KUBECONFIG),
        &server_url,
        &pki.ca.cert_pem,
        &pki.admin,
    )?;
    let tokens = Arc::new(TokenIssuer::new(
        authn::token::DEFAULT_ISSUER,
        &pki.service_account_key_pem,
    )?);
    let mut cluster = config.cluster.clone();
    cluster.service_account_tokens = Some(tokens.clone());
    cluster.kubelet_client = Some(Arc::new(KubeletClient::new(&pki.kubelet_client)?));

    let mut storage_config = storage::StorageConfig::new(&config.data_dir);
    storage_config.etcd_servers = config.etcd_servers.clone();
    let storage: Arc<dyn Storage> = storage::open(&storage_config)
        .await
        .context("opening the store")?;
    let state = Arc::new(rest::State::new(
        Registry::builtin(),
        storage.clone(),
        cluster,
    ));
    let user = bootstrap::system_user();
    let objects = rest::objects::ServerObjects::new(&state, &user, false);
    bootstrap::run(
        &state.registry.current(),
        &objects,
        bootstrap::Endpoint {
            service_ip,
            advertise_address,
            port: config.secure_port,
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("creating the bootstrap objects: {}", e.message))?;
    // API aggregation: the trust ConfigMap for extension API servers, the proxy and the
    // APIService availability controller.
    let trust = crate::aggregator::authentication::AuthenticationInfo::of(&pki);
    crate::aggregator::authentication::ensure_config_map(&objects, &trust)
        .await
        .map_err(|e| anyhow::anyhow!("writing the authentication ConfigMap: {}", e.message))?;
    let aggregator = crate::aggregator::Aggregator::new(state.clone(), &pki.front_proxy_client)?;
    let availability = tokio::spawn(crate::aggregator::available::run(aggregator.clone()));
    let crd_registration = tokio::spawn(crate::aggregator::crdregistration::run(state.clone()));

    let health = Health::new(storage.clone());
    let authenticator = Arc::new(Authenticator::new(tokens.clone(), storage));
    let addresses = discovery::ServerAddresses::new(
        advertise_address,
        config.secure_port,
        config.cluster.service_cluster_ip_range,
        service_ip,
    );
    // API Priority and Fairness: the stored configuration, followed at run time.
    let apf = crate::apf::Apf::new(state.clone(), config.server_concurrency_limit());
    let apf_consumer = tokio::spawn(crate::apf::controller::run(apf.clone()));
    let app = app(
        &state,
        &tokens,
        authenticator,
        apf,
        health.clone(),
        addresses,
    )
    .layer(axum::Extension(aggregator));
    let listener = TcpListener::bind((config.bind_address, config.secure_port))
        .await
        .with_context(|| format!("binding {}:{}", config.bind_address, config.secure_port))?;
    tracing::info!(address = %listener.local_addr()?, kubeconfig = %config.data_dir.join(ADMIN_KUBECONFIG).display(), "API server serving");
    let tls = tls_config(&pki)?;
    if let Some(ready) = ready {
        // The embedding process may have stopped waiting; nothing to do then.
        let _ = ready.send(Ready {
            pki: pki.clone(),
            local: LocalApi { app: app.clone() },
        });
    }
    // The apiextensions-apiserver's controllers: names, establishing, finalizing.
    let definitions = tokio::spawn(crate::registry::apiextensions::controller::run(
        state.clone(),
    ));
    let watches = state.shutting_down.clone();
    serve(listener, tls, app, async move {
        shutdown.await;
        health.shutting_down.store(true, Ordering::Relaxed);
        watches.cancel();
    })
    .await;
    definitions.abort();
    availability.abort();
    crd_registration.abort();
    apf_consumer.abort();
    Ok(())
}

/// Every route behind authentication, then API Priority and Fairness.
pub(crate) fn app(
    state: &Arc<rest::State>,
    tokens: &TokenIssuer,
    authenticator: Arc<Authenticator>,
    apf: Arc<crate::apf::Apf>,
    health: Arc<Health>,
    addresses: discovery::ServerAddresses,
) -> Router {
    let jwks = tokens.jwks();
    let openid = tokens.openid_configuration();
    Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || std::future::ready(axum::Json(openid.clone()))),
        )
        .route(
            "/openid/v1/jwks",
            get(move || std::future::ready(axum::Json(jwks.clone()))),
        )
        .merge(health::router(health))
        .merge(discovery::router(state.registry.clone(), addresses))
        .merge(openapi::router(state.registry.clone()))
        .merge(rest::router(state.clone()))
        .layer(axum::middleware::from_fn(crate::aggregator::middleware))
        .layer(axum::middleware::from_fn_with_state(
            apf,
            crate::apf::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            authenticator,
            authn::middleware,
        ))
}

/// The host's first non-loopback address (IPv4 first), else 127.0.0.1.
fn default_advertise_address() -> IpAddr {
    let addrs = host_addresses();
    addrs
        .iter()
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        .or_else(|| addrs.iter().find(|ip| !ip.is_loopback()))
        .copied()
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// The address local clients reach the server at: loopback for a wildcard bind.
pub fn local_address(bind: IpAddr) -> IpAddr {
    match bind {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        ip => ip,
    }
}

/// The serving TLS configuration: the serving certificate, client certificates optional
/// and verified against the CA, ALPN `h2` and `http/1.1`.
pub fn tls_config(pki: &Pki) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(pki.ca.cert_pem.as_bytes()) {
        roots.add(ca.context("reading ca.crt")?)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .context("the client certificate verifier")?;
    let (chain, key) = pki.serving.rustls_pair("apiserver serving")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("the serving certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TLS connections on `listener` and serves `app` on each (with connection
/// upgrades) until `shutdown` resolves; then stops accepting and gives open connections
/// [`DRAIN_TIMEOUT`] to finish.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let user = CertificateUser(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|cert| authn::user_from_certificate(cert)),
            );
            let service = hyper::service::service_fn(
                move |mut request: hyper::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(user.clone());
                    request
                        .extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    app.clone().oneshot(request.map(Body::new))
                },
            );
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .into_owned();
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("closing connections still open after {DRAIN_TIMEOUT:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_address_for_wildcards() {
        assert_eq!(
            local_address("0.0.0.0".parse().unwrap()),
            IpAddr::from([127, 0, 0, 1])
        );
        assert_eq!(
            local_address("::".parse().unwrap()),
            IpAddr::from([127, 0, 0, 1])
        );
        assert_eq!(
            local_address("10.1.2.3".parse().unwrap()),
            IpAddr::from([10, 1, 2, 3])
        );
    }

    #[test]
    fn advertises_a_non_loopback_address_when_there_is_one() {
        let ip = default_advertise_address();
        let others = host_addresses().iter().any(|ip| !ip.is_loopback());
        assert_eq!(ip.is_loopback(), !others);
    }
}
