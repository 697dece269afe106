//! A component's health and metrics endpoint (component-base's `healthz` handlers and
//! the secure serving of kube-scheduler's and kube-controller-manager's
//! `--secure-port`).
//!
//! Upstream serves it over HTTPS (a self-signed certificate when none is given) with
//! delegated authentication; Skiff serves the same port over HTTPS with an in-memory
//! self-signed certificate ([`self_signed_tls`]) and no authentication (upstream always
//! allows `/healthz`, `/readyz` and `/livez`; its `/metrics` needs an authorized client,
//! Skiff's does not). [`serve`] also serves plain HTTP when given no TLS configuration.
//!
//! - `/healthz`: the `leaderElection` check with leader election, else `ping`
//!   (component-base installs `ping` only when a path has no other check);
//! - `/livez`: `ping`;
//! - `/readyz`: `leaderElection` (with leader election), `shutdown`, and the
//!   component's informer-sync check when it has one (the scheduler's
//!   `sched-handler-sync`);
//! - `/<path>/<check>` for each check; `?verbose` lists the checks, `?exclude=<check>`
//!   skips one;
//! - `/metrics`: the component's [`Exposition`], Prometheus text format 0.0.4.
//!
//! A passing root answers `ok`; a failing one answers 500 with one `[+]`/`[-]` line per
//! check (reasons withheld) and `<path> check failed`, as upstream.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::Error;
use crate::leaderelection::{HEALTHZ_TIMEOUT, LeaderHealth};

/// The content type of the Prometheus text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `/metrics` serves: the component's metrics in the text format 0.0.4.
pub trait Exposition: Send + Sync {
    /// Every metric with a sample, in the text exposition format.
    fn encode(&self) -> String;
}

/// What the health checks read; the component updates it. Share as `Arc<HealthState>`.
#[derive(Debug, Default)]
pub struct HealthState {
    /// The name of the informer-sync check of `/readyz`, if the component has one.
    sync_check: Option<&'static str>,
    handlers_synced: AtomicBool,
    shutting_down: AtomicBool,
    leader: OnceLock<LeaderHealth>,
}

impl HealthState {
    /// Nothing synced, not shutting down, no leader election; `/readyz` checks that the
    /// informers synced under the name `sync_check` (the scheduler's
    /// `sched-handler-sync`), or not at all with None.
    pub fn new(sync_check: Option<&'static str>) -> Arc<Self> {
        Arc::new(Self {
            sync_check,
            ..Self::default()
        })
    }

    /// The informers synced and their event handlers ran (the sync check passes).
    pub fn set_handlers_synced(&self) {
        self.handlers_synced.store(true, Ordering::SeqCst);
    }

    /// The process is stopping (`shutdown` fails).
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Leader election is on: `/healthz` and `/readyz` check it. Only the first call
    /// counts.
    pub fn set_leader_election(&self, health: LeaderHealth) {
        let _ = self.leader.set(health);
    }

    /// Whether this process leads (true without leader election).
    pub fn is_leader(&self) -> bool {
        self.leader.get().is_none_or(LeaderHealth::is_leader)
    }
}

/// One named check of a health path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Ping,
    LeaderElection,
    Shutdown,
    HandlerSync,
}

impl Check {
    fn name(self, state: &HealthState) -> &'static str {
        match self {
            Check::Ping => "ping",
            Check::LeaderElection => "leaderElection",
            Check::Shutdown => "shutdown",
            Check::HandlerSync => state.sync_check.unwrap_or("informer-sync"),
        }
    }

    fn run(self, state: &HealthState) -> Result<(), String> {
        match self {
            Check::Ping => Ok(()),
            Check::LeaderElection => state.leader.get().map_or(Ok(()), |l| {
                l.check(HEALTHZ_TIMEOUT).map_err(|e| e.to_string())
            }),
            Check::Shutdown => {
                if state.shutting_down.load(Ordering::SeqCst) {
                    Err("process is shutting down".to_owned())
                } else {
                    Ok(())
                }
            }
            Check::HandlerSync => {
                if state.handlers_synced.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err("handlers are not fully synchronized".to_owned())
                }
            }
        }
    }
}

/// The checks of `/healthz`, `/livez` or `/readyz` (None for another path).
fn checks(path: &str, state: &HealthState) -> Option<Vec<Check>> {
    let leader = state.leader.get().is_some();
    let mut checks = match path {
        "healthz" if leader => vec![Check::LeaderElection],
        "healthz" | "livez" => Vec::new(),
        "readyz" if leader => vec![Check::LeaderElection, Check::Shutdown, Check::HandlerSync],
        "readyz" => vec![Check::Shutdown, Check::HandlerSync],
        _ => return None,
    };
    if state.sync_check.is_none() {
        checks.retain(|c| *c != Check::HandlerSync);
    }
    if checks.is_empty() {
        checks.push(Check::Ping);
    }
    Some(checks)
}

#[derive(Clone)]
struct AppState {
    health: Arc<HealthState>,
    metrics: Arc<dyn Exposition>,
}

/// The router: `/healthz`, `/livez`, `/readyz` (and their checks) and `/metrics`.
pub fn router(health: Arc<HealthState>, metrics: Arc<dyn Exposition>) -> Router {
    let state = AppState { health, metrics };
    let mut router = Router::new();
    for path in ["healthz", "livez", "readyz"] {
        router = router
            .route(
                &format!("/{path}"),
                get(move |state: State<AppState>, query: RawQuery| root_health(path, state, query)),
            )
            .route(
                &format!("/{path}/{{check}}"),
                get(move |state: State<AppState>, check: Path<String>| {
                    one_check(path, state, check)
                }),
            );
    }
    router
        .route("/metrics", get(serve_metrics))
        .with_state(state)
}

fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// The query's values of `key` (`exclude=a&exclude=b`), and whether `key` is present.
fn query_values(query: Option<&str>, key: &str) -> (bool, Vec<String>) {
    let mut present = false;
    let mut values = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == key {
            present = true;
            if !v.is_empty() {
                values.push(v.to_owned());
            }
        }
    }
    (present, values)
}

/// component-base `handleRootHealth`.
async fn root_health(
    path: &'static str,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Response {
    let Some(checks) = checks(path, &state.health) else {
        return text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned());
    };
    let (_, mut excluded) = query_values(query.as_deref(), "exclude");
    let (verbose, _) = query_values(query.as_deref(), "verbose");
    let mut output = String::new();
    let mut failed = Vec::new();
    for check in checks {
        let name = check.name(&state.health);
        if let Some(i) = excluded.iter().position(|e| e == name) {
            excluded.remove(i);
            output.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match check.run(&state.health) {
            Ok(()) => output.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                output.push_str(&format!("[-]{name} failed: reason withheld\n"));
                info!(check = name, path, "{path} check failed: {reason}");
                failed.push(name);
            }
        }
    }
    if !excluded.is_empty() {
        let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        output.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    if !failed.is_empty() {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{output}{path} check failed\n"),
        );
    }
    if !verbose {
        return text(StatusCode::OK, "ok".to_owned());
    }
    text(StatusCode::OK, format!("{output}{path} check passed\n"))
}

/// component-base `adaptCheckToHandler`: `ok`, or 500 with the reason.
async fn one_check(
    path: &'static str,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Response {
    let check = checks(path, &state.health)
        .into_iter()
        .flatten()
        .find(|c| c.name(&state.health) == name);
    match check.map(|c| c.run(&state.health)) {
        None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned()),
        Some(Ok(())) => text(StatusCode::OK, "ok".to_owned()),
        Some(Err(reason)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

async fn serve_metrics(State(state): State<AppState>) -> Response {
    let mut response = (StatusCode::OK, state.metrics.encode()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// Binds `addr` (upstream `--bind-address`:`--secure-port`).
///
/// Errors: [`Error::Serve`] when the address is taken or not local.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Serve { addr, source })
}

/// An in-memory self-signed serving certificate for `localhost`, `127.0.0.1`, the host
/// name and `addr`'s IP when it is a specific one (upstream
/// `MaybeDefaultWithSelfSignedCerts("localhost", nil, [127.0.0.1])` without a cert
/// directory), valid one year, in a rustls configuration offering HTTP/1.1.
///
/// Errors: [`Error::Serve`] (for `addr`) when the key or certificate cannot be made.
pub fn self_signed_tls(addr: SocketAddr) -> Result<Arc<rustls::ServerConfig>, Error> {
    let fail = |e: &dyn std::fmt::Display| Error::Serve {
        addr,
        source: std::io::Error::other(format!("self-signed certificate: {e}")),
    };
    let mut params = CertificateParams::default();
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, format!("localhost@{unix}"));
    params.distinguished_name = subject;
    // Valid from today (UTC) for a year, as upstream's self-signed certificates.
    let today = k8s_openapi::jiff::Timestamp::now()
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .date();
    let next_year = today
        .checked_add(k8s_openapi::jiff::Span::new().days(365))
        .unwrap_or(today);
    let ymd = |d: k8s_openapi::jiff::civil::Date| {
        rcgen::date_time_ymd(
            i32::from(d.year()),
            u8::try_from(d.month()).unwrap_or(1),
            u8::try_from(d.day()).unwrap_or(1),
        )
    };
    params.not_before = ymd(today);
    params.not_after = ymd(next_year);
    let mut sans = vec![SanType::IpAddress(IpAddr::from([127, 0, 0, 1]))];
    let mut names = vec!["localhost".to_owned()];
    if let Ok(host) = nix::unistd::gethostname() {
        names.push(host.to_string_lossy().into_owned());
    }
    for name in names {
        if let Ok(name) = name.try_into() {
            sans.push(SanType::DnsName(name));
        }
    }
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        sans.push(SanType::IpAddress(addr.ip()));
    }
    params.subject_alt_names = sans;
    let key = KeyPair::generate().map_err(|e| fail(&e))?;
    let cert = params.self_signed(&key).map_err(|e| fail(&e))?;
    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(&e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| fail(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `addr`, and serves [`router`] there in a spawned task until `cancel` fires:
/// over HTTPS with [`self_signed_tls`] when `secure` (the component's secure port),
/// plain HTTP otherwise. Returns the bound address (useful with port 0).
///
/// Errors: [`Error::Serve`] when the address cannot be bound or the certificate made.
pub async fn start(
    addr: SocketAddr,
    secure: bool,
    health: Arc<HealthState>,
    metrics: Arc<dyn Exposition>,
    cancel: CancellationToken,
) -> Result<SocketAddr, Error> {
    let listener = bind(addr).await?;
    let local = listener
        .local_addr()
        .map_err(|source| Error::Serve { addr, source })?;
    let tls = if secure {
        Some(self_signed_tls(local)?)
    } else {
        None
    };
    info!(
        address = %local,
        scheme = if secure { "https" } else { "http" },
        "serving /healthz, /livez, /readyz and /metrics"
    );
    tokio::spawn(serve(listener, tls, router(health, metrics), cancel));
    Ok(local)
}

/// Serves `app` on `listener` until `cancel` fires: over TLS with `tls`, plain HTTP/1.1
/// without. A failed handshake or connection only ends that connection; connections in
/// flight when `cancel` fires finish on their own.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    cancel: CancellationToken,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    warn!(error = %e, "accepting a connection on the health and metrics port");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = cancel.cancelled() => return,
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let builder = hyper::server::conn::http1::Builder::new();
            let result = match acceptor {
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(tls) => builder.serve_connection(TokioIo::new(tls), service).await,
                    Err(e) => {
                        debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                },
                None => builder.serve_connection(TokioIo::new(tcp), service).await,
            };
            if let Err(e) = result {
                debug!(%peer, error = %e, "health and metrics connection ended");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metrics as a component would encode them.
    struct Fixed(&'static str);

    impl Exposition for Fixed {
        fn encode(&self) -> String {
            self.0.to_owned()
        }
    }

    fn no_metrics() -> Arc<dyn Exposition> {
        Arc::new(Fixed(""))
    }

    fn scheduler_health() -> Arc<HealthState> {
        HealthState::new(Some("sched-handler-sync"))
    }
    use std::time::Duration;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    /// One HTTP/1.1 GET over `stream`: (status, headers, body).
    async fn get_over<S: AsyncRead + AsyncWrite + Unpin>(
        mut stream: S,
        path: &str,
    ) -> (u16, String, String) {
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        // A TLS peer may close without close_notify: keep what was read.
        let _ = stream.read_to_end(&mut raw).await;
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_owned(), body.to_owned())
    }

    async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        get_over(stream, path).await
    }

    async fn start_on_loopback(
        health: Arc<HealthState>,
        metrics: Arc<dyn Exposition>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> (SocketAddr, CancellationToken) {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cancel = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            tls,
            router(health, metrics),
            cancel.clone(),
        ));
        (addr, cancel)
    }

    #[tokio::test]
    async fn health_paths_without_leader_election() {
        let health = scheduler_health();
        let (addr, cancel) = start_on_loopback(Arc::clone(&health), no_metrics(), None).await;

        let (status, head, body) = get(addr, "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        assert!(
            head.contains("content-type: text/plain; charset=utf-8"),
            "{head}"
        );
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
        assert_eq!(get(addr, "/healthz/ping").await.2, "ok");
        assert_eq!(get(addr, "/livez").await.2, "ok");
        assert_eq!(get(addr, "/livez/ping").await.0, 200);
        assert_eq!(get(addr, "/healthz/leaderElection").await.0, 404);
        assert_eq!(get(addr, "/nothing").await.0, 404);

        // Not ready before the handlers synced.
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 500);
        assert_eq!(
            body,
            "[+]shutdown ok\n[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n"
        );
        let (status, _, body) = get(addr, "/readyz/sched-handler-sync").await;
        assert_eq!(
            (status, body.as_str()),
            (
                500,
                "internal server error: handlers are not fully synchronized\n"
            )
        );
        let (status, _, body) = get(addr, "/readyz?exclude=sched-handler-sync").await;
        assert_eq!((status, body.as_str()), (200, "ok"));

        health.set_handlers_synced();
        assert_eq!(get(addr, "/readyz").await.2, "ok");
        assert_eq!(
            get(addr, "/readyz?verbose").await.2,
            "[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
        );
        assert_eq!(
            get(addr, "/readyz?verbose&exclude=shutdown&exclude=nope")
                .await
                .2,
            "[+]shutdown excluded: ok\n[+]sched-handler-sync ok\n\
             warn: some health checks cannot be excluded: no matches for \"nope\"\n\
             readyz check passed\n"
        );

        health.set_shutting_down();
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(status, 500);
        assert_eq!(
            body,
            "[-]shutdown failed: reason withheld\n[+]sched-handler-sync ok\nreadyz check failed\n"
        );
        assert_eq!(
            get(addr, "/readyz/shutdown").await.2,
            "internal server error: process is shutting down\n"
        );
        // Liveness does not depend on readiness.
        assert_eq!(get(addr, "/livez").await.0, 200);
        cancel.cancel();
    }

    #[tokio::test]
    async fn leader_election_check_fails_past_the_lease_and_timeout() {
        let lease = Duration::from_secs(15);
        // A leader that renewed 10 s ago: healthy.
        let health = scheduler_health();
        health.set_leader_election(LeaderHealth::fixed(
            "kube-scheduler",
            "me",
            "me",
            lease,
            Duration::from_secs(10),
        ));
        health.set_handlers_synced();
        let (addr, cancel) = start_on_loopback(Arc::clone(&health), no_metrics(), None).await;
        assert_eq!(get(addr, "/healthz").await.2, "ok");
        assert_eq!(
            get(addr, "/healthz?verbose").await.2,
            "[+]leaderElection ok\nhealthz check passed\n"
        );
        assert_eq!(get(addr, "/healthz/leaderElection").await.2, "ok");
        // With leader election, /healthz has no ping check (component-base adds it only
        // to paths without checks); /livez keeps it.
        assert_eq!(get(addr, "/healthz/ping").await.0, 404);
        assert_eq!(get(addr, "/livez/ping").await.0, 200);
        assert!(health.is_leader());
        cancel.cancel();

        // A leader that has not renewed for 36 s (> 15 s + 20 s): unhealthy and unready.
        let health = scheduler_health();
        health.set_leader_election(LeaderHealth::fixed(
            "kube-scheduler",
            "me",
            "me",
            lease,
            Duration::from_secs(36),
        ));
        health.set_handlers_synced();
        let (addr, cancel) = start_on_loopback(Arc::clone(&health), no_metrics(), None).await;
        let (status, _, body) = get(addr, "/healthz").await;
        assert_eq!(status, 500);
        assert_eq!(
            body,
            "[-]leaderElection failed: reason withheld\nhealthz check failed\n"
        );
        assert_eq!(
            get(addr, "/healthz/leaderElection").await.2,
            "internal server error: failed election to renew leadership on lease kube-scheduler\n"
        );
        assert_eq!(
            get(addr, "/readyz").await.2,
            "[-]leaderElection failed: reason withheld\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check failed\n"
        );
        cancel.cancel();

        // A standby, whatever the age of what it saw, is healthy.
        let health = scheduler_health();
        health.set_leader_election(LeaderHealth::fixed(
            "kube-scheduler",
            "me",
            "other",
            lease,
            Duration::from_secs(300),
        ));
        let (addr, cancel) = start_on_loopback(Arc::clone(&health), no_metrics(), None).await;
        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert!(!health.is_leader());
        cancel.cancel();
    }

    #[tokio::test]
    async fn readyz_without_a_sync_check() {
        let health = HealthState::new(None);
        let (addr, cancel) = start_on_loopback(Arc::clone(&health), no_metrics(), None).await;
        let (status, _, body) = get(addr, "/readyz?verbose").await;
        assert_eq!(status, 200);
        assert_eq!(body, "[+]shutdown ok\nreadyz check passed\n");
        assert_eq!(get(addr, "/readyz/informer-sync").await.0, 404);
        health.set_shutting_down();
        assert_eq!(get(addr, "/readyz").await.0, 500);
        cancel.cancel();
    }

    #[tokio::test]
    async fn metrics_over_https_with_a_self_signed_certificate() {
        let metrics: Arc<dyn Exposition> = Arc::new(Fixed(
            "# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue=\"active\"} 1
",
        ));
        let tls = self_signed_tls("127.0.0.1:10259".parse().unwrap()).unwrap();
        let (addr, cancel) = start_on_loopback(scheduler_health(), metrics, Some(tls)).await;

        let connector = tokio_rustls::TlsConnector::from(Arc::new(insecure_client()));
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let stream = connector.connect(name, tcp).await.unwrap();
        let certs = stream.get_ref().1.peer_certificates().unwrap().to_vec();
        assert_eq!(certs.len(), 1);
        let (status, head, body) = get_over(stream, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            head.contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
            "{head}"
        );
        assert_eq!(
            body,
            "# TYPE scheduler_pending_pods gauge\nscheduler_pending_pods{queue=\"active\"} 1\n"
        );
        // Plain HTTP on the TLS port gets no answer.
        let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut buf)).await;
        assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
        cancel.cancel();
    }

    #[tokio::test]
    async fn start_binds_and_serves_https() {
        let cancel = CancellationToken::new();
        let addr = super::start(
            "127.0.0.1:0".parse().unwrap(),
            true,
            scheduler_health(),
            no_metrics(),
            cancel.clone(),
        )
        .await
        .unwrap();
        assert_ne!(addr.port(), 0);
        let connector = tokio_rustls::TlsConnector::from(Arc::new(insecure_client()));
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let stream = connector.connect(name, tcp).await.unwrap();
        let (status, _, body) = get_over(stream, "/livez").await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        // The port is taken now: a second bind fails with Error::Serve.
        let err = bind(addr).await.unwrap_err();
        assert!(
            matches!(err, Error::Serve { addr: a, .. } if a == addr),
            "{err}"
        );
        cancel.cancel();
    }

    fn insecure_client() -> rustls::ClientConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    }

    /// Accepts any server certificate (the test only checks the server speaks TLS).
    #[derive(Debug)]
    struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

    impl rustls::client::danger::ServerCertVerifier for AcceptAny {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}
