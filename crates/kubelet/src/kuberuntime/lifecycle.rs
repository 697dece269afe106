//! Container lifecycle hooks (upstream `pkg/kubelet/lifecycle/handlers.go`
//! `handlerRunner.Run`): postStart and preStop handlers of type exec (CRI ExecSync),
//! httpGet and sleep (KEP-3960).

use std::time::Duration;

use k8s_cri::v1::ExecSyncRequest;
use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, LifecycleHandler};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::info;

use super::insecure_tls::{self, TlsError};
use crate::cri::Cri;
use crate::error::{Error, Result};

/// User-Agent of lifecycle HTTP requests (upstream `kube-lifecycle/<major>.<minor>`).
const USER_AGENT: &str = "kube-lifecycle/1.31";
/// Largest response head read from a lifecycle HTTP server.
const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// The container a hook runs against.
pub struct HookTarget<'a> {
    /// Runtime container ID (for exec).
    pub container_id: &'a str,
    /// Container name (for messages).
    pub container_name: &'a str,
    /// The pod as upstream's `format.Pod` prints it: `name_namespace(uid)`.
    pub pod: &'a str,
    /// The pod's primary IP: the httpGet host when the handler names none.
    pub pod_ip: Option<&'a str>,
    /// The container's ports, to resolve a named httpGet port.
    pub ports: &'a [ContainerPort],
}

/// `name_namespace(uid)`, as upstream's `format.Pod`.
pub fn format_pod(name: &str, namespace: &str, uid: &str) -> String {
    format!("{name}_{namespace}({uid})")
}

/// [`format_pod`] of a pod object.
pub fn format_pod_object(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    let meta = &pod.metadata;
    format_pod(
        meta.name.as_deref().unwrap_or(""),
        meta.namespace.as_deref().unwrap_or(""),
        meta.uid.as_deref().unwrap_or(""),
    )
}

/// Runs `handler` against `target`. Errors with upstream's message (the text of the
/// `FailedPostStartHook` / `FailedPreStopHook` events), e.g.
/// `Exec lifecycle hook ([sh -c exit 1]) for Container "c" in Pod "p_ns(uid)" failed -
/// error: command 'sh -c exit 1' exited with 1: , message: ""`.
pub async fn run_handler(
    cri: &dyn Cri,
    handler: &LifecycleHandler,
    target: &HookTarget<'_>,
) -> Result<()> {
    let container = target.container_name;
    let pod = target.pod;
    if let Some(exec) = handler.exec.as_ref() {
        let command = exec.command.clone().unwrap_or_default();
        let req = ExecSyncRequest {
            container_id: target.container_id.to_owned(),
            cmd: command.clone(),
            timeout: 0,
        };
        let (error, output) = match cri.exec_sync(req).await {
            Ok(resp) if resp.exit_code == 0 => return Ok(()),
            Ok(resp) => {
                let error = format!(
                    "command '{}' exited with {}: {}",
                    command.join(" "),
                    resp.exit_code,
                    String::from_utf8_lossy(&resp.stderr)
                );
                let mut output = resp.stdout;
                output.extend_from_slice(&resp.stderr);
                (error, output)
            }
            Err(e) => (e.message().to_owned(), Vec::new()),
        };
        return Err(Error::Runtime(format!(
            "Exec lifecycle hook ([{}]) for Container {container:?} in Pod {pod:?} failed - error: {error}, message: {:?}",
            command.join(" "),
            String::from_utf8_lossy(&output)
        )));
    }
    if let Some(get) = handler.http_get.as_ref() {
        return http_get(get, target).await.map_err(|error| {
            Error::Runtime(format!(
                "HTTP lifecycle hook ({}) for Container {container:?} in Pod {pod:?} failed - error: {error}",
                get.path.as_deref().unwrap_or("")
            ))
        });
    }
    if let Some(sleep) = handler.sleep.as_ref() {
        tokio::time::sleep(Duration::from_secs(sleep.seconds.max(0) as u64)).await;
        return Ok(());
    }
    Err(Error::Runtime(format!(
        "Cannot run handler: no exec, httpGet or sleep action for Container {container:?} in Pod {pod:?}"
    )))
}

/// Resolves an httpGet / probe port: a number, or the name of one of `ports`
/// (upstream `resolvePort`).
pub fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Result<u16> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => match ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
        {
            Some(p) => p.container_port,
            None => name
                .parse()
                .map_err(|_| Error::Runtime(format!("couldn't find port: {name} in {ports:?}")))?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Error::Runtime(format!("invalid port number: {number}")))
}

/// The request line and headers of a lifecycle GET (upstream
/// `NewRequestForHTTPGetAction`): path (a leading `/` added), `Host`, `User-Agent`
/// `kube-lifecycle/..`, `Accept: */*`; the handler's headers replace these.
pub fn http_request(get: &HTTPGetAction, host: &str, port: u16) -> String {
    let path = get.path.as_deref().unwrap_or("");
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut headers: Vec<(String, String)> = vec![
        ("Host".into(), authority),
        ("User-Agent".into(), USER_AGENT.into()),
        ("Accept".into(), "*/*".into()),
    ];
    for h in get.http_headers.iter().flatten() {
        match headers
            .iter_mut()
            .find(|(name, _)| name.eq_ignore_ascii_case(&h.name))
        {
            Some(existing) => existing.1 = h.value.clone(),
            None => headers.push((h.name.clone(), h.value.clone())),
        }
    }
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    request
}

/// Sends the GET and reads the response head. Any HTTP response counts as success, as
/// upstream's lifecycle handler does not check the status code. HTTPS skips certificate
/// verification; an HTTPS request answered in plain HTTP is retried over HTTP without
/// its Authorization header (upstream's `LifecycleHTTPFallback`).
async fn http_get(get: &HTTPGetAction, target: &HookTarget<'_>) -> Result<()> {
    let host = match get.host.as_deref().filter(|h| !h.is_empty()) {
        Some(host) => host.to_owned(),
        None => target
            .pod_ip
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| {
                Error::Runtime("failed to find networking container: the pod has no IP".to_owned())
            })?
            .to_owned(),
    };
    let port = resolve_port(&get.port, target.ports)?;
    let request = http_request(get, &host, port);
    let authority = request
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("Host: "))
        .unwrap_or(&host)
        .to_owned();
    let path = request.split(' ').nth(1).unwrap_or("/").to_owned();
    let url = |scheme: &str| format!("{scheme}://{authority}{path}");
    let scheme = get.scheme.as_deref().unwrap_or("HTTP");
    let request = if scheme.eq_ignore_ascii_case("HTTPS") {
        let (tls_host, tls_request) = (host.clone(), request.clone());
        let exchanged = tokio::task::spawn_blocking(move || {
            insecure_tls::exchange(&tls_host, port, tls_request.as_bytes(), MAX_RESPONSE_HEAD)
        })
        .await
        .map_err(|e| Error::Runtime(format!("Get {:?}: {e}", url("https"))))?;
        match exchanged {
            Ok(head) => return check_head(&head, &url("https")),
            Err(TlsError::Other(e)) => {
                return Err(Error::Runtime(format!("Get {:?}: {e}", url("https"))));
            }
            Err(TlsError::HttpResponse) => {
                info!(url = %url("https"), "HTTPS request to lifecycle hook got HTTP response, retrying with HTTP");
                request
                    .split_inclusive("\r\n")
                    .filter(|l| !l.to_ascii_lowercase().starts_with("authorization:"))
                    .collect()
            }
        }
    } else if scheme.eq_ignore_ascii_case("HTTP") {
        request
    } else {
        return Err(Error::Runtime(format!("unsupported scheme {scheme:?}")));
    };
    let url = url("http");
    let fail = |e: std::io::Error| Error::Runtime(format!("Get {url:?}: {e}"));
    let mut stream = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(fail)?;
    stream.write_all(request.as_bytes()).await.map_err(fail)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_RESPONSE_HEAD {
        let n = stream.read(&mut buf).await.map_err(fail)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    check_head(&head, &url)
}

/// Ok when `head` starts like an HTTP/1 response.
fn check_head(head: &[u8], url: &str) -> Result<()> {
    if head.starts_with(b"HTTP/1.") {
        Ok(())
    } else {
        Err(Error::Runtime(format!(
            "Get {url:?}: malformed HTTP response"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ExecAction, HTTPHeader, SleepAction};

    use crate::cri::fake::FakeCri;

    fn ports() -> Vec<ContainerPort> {
        vec![ContainerPort {
            name: Some("web".into()),
            container_port: 8080,
            ..Default::default()
        }]
    }

    #[test]
    fn ports_resolve_by_number_and_name() {
        let ports = ports();
        assert_eq!(resolve_port(&IntOrString::Int(80), &ports), Ok(80));
        assert_eq!(
            resolve_port(&IntOrString::String("web".into()), &ports),
            Ok(8080)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("81".into()), &ports),
            Ok(81)
        );
        assert!(resolve_port(&IntOrString::String("db".into()), &ports).is_err());
        assert!(resolve_port(&IntOrString::Int(0), &ports).is_err());
        assert!(resolve_port(&IntOrString::Int(70000), &ports).is_err());
    }

    #[test]
    fn request_has_path_and_headers() {
        let get = HTTPGetAction {
            path: Some("hook?x=1".into()),
            port: IntOrString::Int(80),
            http_headers: Some(vec![
                HTTPHeader {
                    name: "X-Token".into(),
                    value: "t".into(),
                },
                HTTPHeader {
                    name: "accept".into(),
                    value: "text/plain".into(),
                },
            ]),
            ..Default::default()
        };
        let req = http_request(&get, "fd00::1", 80);
        assert!(req.starts_with("GET /hook?x=1 HTTP/1.1\r\nHost: [fd00::1]:80\r\n"));
        assert!(req.contains("User-Agent: kube-lifecycle/"));
        assert!(req.contains("Accept: text/plain\r\n"));
        assert!(!req.contains("*/*"));
        assert!(req.contains("X-Token: t\r\n"));
        assert!(req.ends_with("\r\n\r\n"));
    }

    fn target<'a>(ports: &'a [ContainerPort], ip: Option<&'a str>) -> HookTarget<'a> {
        HookTarget {
            container_id: "c1",
            container_name: "app",
            pod: "p_ns(u)",
            pod_ip: ip,
            ports,
        }
    }

    #[tokio::test]
    async fn http_hook_reaches_the_pod_ip() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = conn.read(&mut buf).await.unwrap();
            conn.write_all(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n")
                .await
                .unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let ports = vec![ContainerPort {
            name: Some("hook".into()),
            container_port: i32::from(port),
            ..Default::default()
        }];
        let handler = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                path: Some("/stop".into()),
                port: IntOrString::String("hook".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cri = FakeCri::default();
        let result = run_handler(&cri, &handler, &target(&ports, Some("127.0.0.1"))).await;
        assert_eq!(result, Ok(()), "a 500 still counts as delivered");
        assert!(server.await.unwrap().starts_with("GET /stop HTTP/1.1"));
        let err = run_handler(&cri, &handler, &target(&ports, None))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(r#"HTTP lifecycle hook (/stop) for Container "app" in Pod "p_ns(u)" failed - error: "#),
            "{err}"
        );
    }

    /// A server answering each connection with `HTTP/1.1 200 OK`; returns its port and
    /// the first bytes of each connection.
    async fn plain_http_server(connections: usize) -> (u16, tokio::task::JoinHandle<Vec<Vec<u8>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..connections {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    .await;
                seen.push(buf[..n].to_vec());
            }
            seen
        });
        (port, server)
    }

    #[tokio::test]
    async fn https_hook_falls_back_to_http_without_authorization() {
        let (port, server) = plain_http_server(2).await;
        let handler = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                host: Some("127.0.0.1".into()),
                path: Some("/tls".into()),
                port: IntOrString::Int(i32::from(port)),
                scheme: Some("HTTPS".into()),
                http_headers: Some(vec![HTTPHeader {
                    name: "Authorization".into(),
                    value: "Bearer secret".into(),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let ports = ports();
        let result = run_handler(&FakeCri::default(), &handler, &target(&ports, None)).await;
        assert_eq!(result, Ok(()));
        let seen = server.await.unwrap();
        assert_eq!(
            seen[0].first(),
            Some(&0x16),
            "the first attempt is a TLS handshake"
        );
        let retry = String::from_utf8_lossy(&seen[1]);
        assert!(retry.starts_with("GET /tls HTTP/1.1\r\n"), "{retry}");
        assert!(!retry.contains("secret"), "{retry}");
    }

    #[tokio::test]
    async fn sleep_and_empty_handlers() {
        let cri = FakeCri::default();
        let ports = ports();
        let sleep = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 0 }),
            ..Default::default()
        };
        assert_eq!(
            run_handler(&cri, &sleep, &target(&ports, None)).await,
            Ok(())
        );
        let empty = LifecycleHandler::default();
        assert!(
            run_handler(&cri, &empty, &target(&ports, None))
                .await
                .unwrap_err()
                .to_string()
                .starts_with("Cannot run handler")
        );
        let exec = LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["true".into()]),
            }),
            ..Default::default()
        };
        let err = run_handler(&cri, &exec, &target(&ports, None))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(r#"Exec lifecycle hook ([true]) for Container "app" in Pod "p_ns(u)" failed - error: "#),
            "{err}"
        );
    }
}
