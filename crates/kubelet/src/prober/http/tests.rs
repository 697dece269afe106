//! httpGet probes against a local HTTP(S) server.

use std::process::Command;

use k8s_openapi::api::core::v1::{ContainerPort, HTTPHeader};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// Answers one request on `stream` by path: `/ok` 200 "fine", `/fail` 500, `/moved` a
/// redirect to `/ok`, `/loop` a redirect to itself, `/away` a redirect to another host
/// name, `/slow` 200 after 3 s, `/echo` 200 with the request head as the body.
async fn answer(mut stream: impl AsyncRead + AsyncWrite + Unpin, port: u16) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
    let redirect = |to: String| ("302 Found", format!("Location: {to}\r\n"), String::new());
    let (status, extra, body) = match path.as_str() {
        "/ok" => ("200 OK", String::new(), "fine".to_owned()),
        "/fail" => (
            "500 Internal Server Error",
            String::new(),
            "broken".to_owned(),
        ),
        "/moved" => redirect("/ok".into()),
        "/loop" => redirect("/loop".into()),
        "/away" => redirect(format!("http://localhost:{port}/ok")),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            ("200 OK", String::new(), String::new())
        }
        "/echo" => ("200 OK", String::new(), head.clone()),
        _ => ("404 Not Found", String::new(), String::new()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A plain HTTP server on 127.0.0.1; returns its port.
async fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, port));
        }
    });
    port
}

/// An HTTPS server with a self-signed certificate (made by the openssl CLI).
async fn https_server() -> u16 {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=probe-test", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from_pem_file(&cert).unwrap()],
        PrivateKeyDer::from_pem_file(&key).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    answer(tls, port).await;
                }
            });
        }
    });
    port
}

fn action(path: &str, port: u16) -> HTTPGetAction {
    HTTPGetAction {
        path: Some(path.into()),
        port: IntOrString::Int(i32::from(port)),
        ..Default::default()
    }
}

fn request(action: &HTTPGetAction) -> ProbeRequest {
    ProbeRequest::for_action(action, &Container::default(), "127.0.0.1").unwrap()
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn requests_default_like_upstream() {
    let container = Container {
        ports: Some(vec![ContainerPort {
            name: Some("web".into()),
            container_port: 8080,
            ..Default::default()
        }]),
        ..Default::default()
    };
    let a = HTTPGetAction {
        path: Some("healthz?full=1".into()),
        port: IntOrString::String("web".into()),
        scheme: Some("HTTPS".into()),
        http_headers: Some(vec![HTTPHeader {
            name: "accept".into(),
            value: String::new(),
        }]),
        ..Default::default()
    };
    let r = ProbeRequest::for_action(&a, &container, "10.88.0.4").unwrap();
    assert_eq!(r.url(), "https://10.88.0.4:8080/healthz?full=1");
    assert_eq!(
        r.headers,
        [("User-Agent".to_owned(), USER_AGENT.to_owned())],
        "an empty Accept is dropped"
    );
    let a = HTTPGetAction {
        host: Some("fd00::5".into()),
        ..action("", 80)
    };
    let r = ProbeRequest::for_action(&a, &container, "10.88.0.4").unwrap();
    assert_eq!(r.url(), "http://[fd00::5]:80/");
    assert!(r.headers.contains(&("Accept".to_owned(), "*/*".to_owned())));
    let a = HTTPGetAction {
        port: IntOrString::String("metrics".into()),
        ..action("/", 80)
    };
    assert_eq!(
        ProbeRequest::for_action(&a, &container, "10.88.0.4"),
        Err(crate::error::Error::Probe("port metrics not found".into()))
    );
}

#[test]
fn redirect_locations_resolve_against_the_request() {
    let r = request(&action("/a/b?x=1", 8080));
    let url = |location: &str| r.redirect(location).map(|n| n.url());
    assert_eq!(url("/c").as_deref(), Some("http://127.0.0.1:8080/c"));
    assert_eq!(url("c?y").as_deref(), Some("http://127.0.0.1:8080/a/c?y"));
    assert_eq!(url("//other:81/z").as_deref(), Some("http://other:81/z"));
    assert_eq!(url("HTTPS://host").as_deref(), Some("https://host:443/"));
    assert_eq!(
        url("http://[fd00::1]:9/p").as_deref(),
        Some("http://[fd00::1]:9/p")
    );
    assert_eq!(url("ftp://host/"), None);
    assert_eq!(url("http://host:notaport/"), None);
}

#[tokio::test]
async fn status_codes_decide() {
    let port = http_server().await;
    assert_eq!(
        probe(&request(&action("/ok", port)), SECOND).await,
        (Outcome::Success, "fine".into())
    );
    assert_eq!(
        probe(&request(&action("/fail", port)), SECOND).await,
        (
            Outcome::Failure,
            "HTTP probe failed with statuscode: 500".into()
        )
    );
    assert_eq!(
        probe(&request(&action("/missing", port)), SECOND).await,
        (
            Outcome::Failure,
            "HTTP probe failed with statuscode: 404".into()
        )
    );
}

#[tokio::test]
async fn redirects_are_followed_only_on_the_same_host() {
    let port = http_server().await;
    assert_eq!(
        probe(&request(&action("/moved", port)), SECOND).await,
        (Outcome::Success, "fine".into())
    );
    assert_eq!(
        probe(&request(&action("/away", port)), SECOND).await,
        (
            Outcome::Warning,
            "Probe terminated redirects, Response body: ".into()
        )
    );
    assert_eq!(
        probe(&request(&action("/loop", port)), SECOND).await,
        (
            Outcome::Failure,
            format!("Get \"http://127.0.0.1:{port}/loop\": stopped after 10 redirects")
        )
    );
}

#[tokio::test]
async fn headers_are_sent() {
    let port = http_server().await;
    let a = HTTPGetAction {
        http_headers: Some(vec![
            HTTPHeader {
                name: "Host".into(),
                value: "example.test".into(),
            },
            HTTPHeader {
                name: "X-Probe".into(),
                value: "yes".into(),
            },
        ]),
        ..action("/echo", port)
    };
    let (outcome, head) = probe(&request(&a), SECOND).await;
    assert_eq!(outcome, Outcome::Success);
    let head = head.to_ascii_lowercase();
    for line in [
        "get /echo http/1.1",
        "host: example.test",
        "x-probe: yes",
        "user-agent: kube-probe/",
        "accept: */*",
        "connection: close",
    ] {
        assert!(head.contains(line), "{line:?} not in {head}");
    }
}

#[tokio::test]
async fn timeouts_and_refusals_fail() {
    let port = http_server().await;
    assert_eq!(
        probe(&request(&action("/slow", port)), SECOND).await,
        (
            Outcome::Failure,
            format!(
                "Get \"http://127.0.0.1:{port}/slow\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )
        )
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    assert_eq!(
        probe(&request(&action("/ok", closed_port)), SECOND).await,
        (
            Outcome::Failure,
            format!(
                "Get \"http://127.0.0.1:{closed_port}/ok\": dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
            )
        )
    );
}

#[tokio::test]
async fn https_skips_certificate_verification() {
    let port = https_server().await;
    let a = HTTPGetAction {
        scheme: Some("HTTPS".into()),
        ..action("/ok", port)
    };
    assert_eq!(
        probe(&request(&a), SECOND).await,
        (Outcome::Success, "fine".into())
    );
    let a = HTTPGetAction {
        scheme: Some("HTTPS".into()),
        ..action("/fail", port)
    };
    assert_eq!(
        probe(&request(&a), SECOND).await,
        (
            Outcome::Failure,
            "HTTP probe failed with statuscode: 500".into()
        )
    );
    // Plain HTTP to a TLS port fails.
    let (outcome, _) = probe(&request(&action("/ok", port)), SECOND).await;
    assert_eq!(outcome, Outcome::Failure);
}
