//! The tcpSocket probe handler (upstream `pkg/probe/tcp`): success when a TCP connection
//! opens within the timeout.

use std::time::Duration;

use tokio::net::TcpStream;

use super::probe::{Outcome, join_host_port};
use crate::error::{Error, Result};

/// Connects to `host:port` within `timeout` and closes the connection at once. Failures
/// read like Go's dial errors: `dial tcp 10.88.0.5:8080: connect: connection refused`,
/// `dial tcp 10.88.0.5:8080: i/o timeout`.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> (Outcome, String) {
    let addr = join_host_port(host, port);
    match dial(&addr, timeout).await {
        Ok(_) => (Outcome::Success, String::new()),
        Err(message) => (Outcome::Failure, message.to_string()),
    }
}

/// Opens a TCP connection to `addr` (`host:port`) within `timeout`; the error is a Go-style
/// dial error message.
pub async fn dial(addr: &str, timeout: Duration) -> Result<TcpStream> {
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(Error::Probe(format!(
            "dial tcp {addr}: connect: {}",
            os_error_text(&e)
        ))),
        Err(_) => Err(Error::Probe(format!("dial tcp {addr}: i/o timeout"))),
    }
}

/// An I/O error as Go prints a syscall error: lower case, without the `(os error N)`.
pub fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text
        .rsplit_once(" (os error")
        .map_or(text.as_str(), |(message, _)| message);
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_port_succeeds_closed_port_fails() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            probe("127.0.0.1", port, Duration::from_secs(1)).await,
            (Outcome::Success, String::new())
        );
        drop(listener);
        assert_eq!(
            probe("127.0.0.1", port, Duration::from_secs(1)).await,
            (
                Outcome::Failure,
                format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
            )
        );
    }

    #[tokio::test]
    async fn unanswered_connects_time_out() {
        // TEST-NET-1 is never routed: the SYN goes unanswered (or the route is missing).
        let (outcome, message) = probe("192.0.2.1", 9, Duration::from_millis(200)).await;
        assert_eq!(outcome, Outcome::Failure);
        assert!(message.starts_with("dial tcp 192.0.2.1:9: "), "{message}");
    }
}
