//! The grpc probe handler (upstream `pkg/probe/grpc`): `grpc.health.v1.Health/Check`
//! over plaintext HTTP/2; success when the service answers `SERVING`.

use std::time::Duration;

use tokio::time::Instant;
use tonic::Code;
use tonic::transport::Endpoint;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::USER_AGENT;
use super::probe::{Outcome, join_host_port};

/// Checks `service` (empty: the whole server) on `host:port` within `timeout`. Messages
/// are upstream's: `service healthy`, `service unhealthy (responded with "NOT_SERVING")`,
/// `timeout: failed to connect service "<addr>" within 1s: ...`,
/// `error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ...`.
pub async fn probe(host: &str, port: i32, service: &str, timeout: Duration) -> (Outcome, String) {
    let failure = |message: String| (Outcome::Failure, message);
    let deadline = Instant::now() + timeout;
    let addr = match u16::try_from(port) {
        Ok(port) => join_host_port(host, port),
        Err(_) => return failure(format!("error: invalid port number: {port}")),
    };
    let connect_error = |e: &dyn std::fmt::Display| {
        failure(format!("error: failed to connect service at {addr:?}: {e}"))
    };
    let endpoint = match Endpoint::from_shared(format!("http://{addr}"))
        .and_then(|e| e.user_agent(USER_AGENT))
    {
        Ok(endpoint) => endpoint.connect_timeout(timeout),
        Err(e) => return connect_error(&e),
    };
    let channel = match tokio::time::timeout_at(deadline, endpoint.connect()).await {
        Err(_) => {
            return failure(format!(
                "timeout: failed to connect service {addr:?} within {}s: context deadline exceeded",
                timeout.as_secs()
            ));
        }
        Ok(Err(e)) => return connect_error(&source_chain(&e)),
        Ok(Ok(channel)) => channel,
    };
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    let rpc_timeout = || {
        failure(format!(
            "timeout: health rpc did not complete within {}s",
            timeout.as_secs()
        ))
    };
    let response = match tokio::time::timeout_at(
        deadline,
        HealthClient::new(channel).check(request),
    )
    .await
    {
        Err(_) => return rpc_timeout(),
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            return match status.code() {
                Code::Unimplemented => failure(format!(
                    "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                    status.message()
                )),
                Code::DeadlineExceeded => rpc_timeout(),
                code => failure(format!(
                    "error: health rpc probe failed: rpc error: code = {code:?} desc = {}",
                    status.message()
                )),
            };
        }
    };
    match response.status() {
        ServingStatus::Serving => (Outcome::Success, "service healthy".to_owned()),
        other => failure(format!(
            "service unhealthy (responded with {:?})",
            other.as_str_name()
        )),
    }
}

/// An error with its causes, `outer: inner: ...`.
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::transport::Server;
    use tonic::transport::server::TcpIncoming;

    /// A gRPC server with the health service: "" and "web" serving, "db" not serving.
    async fn health_server() -> u16 {
        use tonic_health::ServingStatus;
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("", ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("web", ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("db", ServingStatus::NotServing)
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            // Keeps the reporter (and the statuses) alive as long as the server.
            let _reporter = reporter;
            Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpIncoming::from(listener))
                .await
        });
        port
    }

    #[tokio::test]
    async fn serving_services_succeed_others_fail() {
        let port = i32::from(health_server().await);
        let second = Duration::from_secs(1);
        assert_eq!(
            probe("127.0.0.1", port, "", second).await,
            (Outcome::Success, "service healthy".into())
        );
        assert_eq!(
            probe("127.0.0.1", port, "web", second).await,
            (Outcome::Success, "service healthy".into())
        );
        assert_eq!(
            probe("127.0.0.1", port, "db", second).await,
            (
                Outcome::Failure,
                r#"service unhealthy (responded with "NOT_SERVING")"#.into()
            )
        );
        let (outcome, message) = probe("127.0.0.1", port, "cache", second).await;
        assert_eq!(outcome, Outcome::Failure);
        assert!(
            message.starts_with("error: health rpc probe failed: rpc error: code = NotFound"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn servers_without_health_or_listener_fail() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            // A gRPC server with no services answers Unimplemented.
            Server::builder()
                .add_routes(tonic::service::Routes::default())
                .serve_with_incoming(TcpIncoming::from(listener))
                .await
        });
        let (outcome, message) =
            probe("127.0.0.1", i32::from(port), "", Duration::from_secs(1)).await;
        assert_eq!(outcome, Outcome::Failure);
        assert!(
            message.starts_with("error: this server does not implement the grpc health protocol"),
            "{message}"
        );

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let (outcome, message) =
            probe("127.0.0.1", i32::from(port), "", Duration::from_secs(1)).await;
        assert_eq!(outcome, Outcome::Failure);
        assert!(
            message.starts_with(&format!(
                "error: failed to connect service at \"127.0.0.1:{port}\""
            )),
            "{message}"
        );
    }
}
