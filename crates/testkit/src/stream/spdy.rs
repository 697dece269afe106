//! SPDY/3.1 clients: the HTTP upgrade, exec / attach sessions (streams by `streamType`),
//! port-forward sessions (a data and an error stream per connection).

use std::time::Duration;

use anyhow::{Context as _, bail};
use skiff_runtime::streaming::protocol::{
    PORT_HEADER, PROTOCOL_HEADER, REQUEST_ID_HEADER, STREAM_TYPE_HEADER, stream_type,
};
use skiff_runtime::streaming::spdy::{self, Headers, Role, Stream};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::{Outcome, Session, split_url};

/// The answer to an upgrade request that was not accepted.
#[derive(Debug)]
pub struct Refused {
    /// HTTP status code.
    pub status: u16,
    /// Response body.
    pub body: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "upgrade refused with HTTP {}: {}",
            self.status,
            self.body.trim()
        )
    }
}

impl std::error::Error for Refused {}

/// Sends `POST <path>` with `Upgrade: SPDY/3.1` offering `protocols`, and returns the
/// connection and the negotiated protocol. A non-101 answer is a [`Refused`] error.
pub async fn upgrade(url: &str, protocols: &[&str]) -> anyhow::Result<(TcpStream, String)> {
    let (host, path) = split_url(url)?;
    let mut conn = TcpStream::connect(&host)
        .await
        .with_context(|| format!("connecting to {host}"))?;
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: {}\r\nContent-Length: 0\r\n",
        spdy::UPGRADE
    );
    for protocol in protocols {
        request.push_str(&format!("{PROTOCOL_HEADER}: {protocol}\r\n"));
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).await?;
    // Read the response head byte by byte, so no SPDY byte is consumed with it.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = conn
            .read_u8()
            .await
            .context("reading the upgrade response")?;
        head.push(byte);
        if head.len() > 64 * 1024 {
            bail!("upgrade response head too long");
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("bad response: {head}"))?;
    if status != 101 {
        let mut body = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut body))
            .await
            .unwrap_or(Ok(0))
            .unwrap_or(0);
        body.truncate(n);
        return Err(Refused {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
        .into());
    }
    let protocol = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case(PROTOCOL_HEADER)
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    Ok((conn, protocol))
}

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// Runs an exec / attach session at `url` with `protocol` (e.g. `v4.channel.k8s.io`),
/// the way client-go's SPDY executor does: error stream first, then the stdio streams
/// and resize; stdin is sent and closed; everything is read to the end.
pub async fn remote_command(
    url: &str,
    protocol: &str,
    session: &Session,
) -> anyhow::Result<Outcome> {
    let (conn, negotiated) = upgrade(url, &[protocol]).await?;
    if negotiated != protocol {
        bail!("server chose protocol {negotiated:?}, asked for {protocol:?}");
    }
    let (spdy, _) = spdy::Session::new(conn, Role::Client);
    let open = |kind: &'static str| spdy.open(headers(&[(STREAM_TYPE_HEADER, kind)]));
    let error = open(stream_type::ERROR).await?;
    let stdin = match session.stdin {
        Some(_) => Some(open(stream_type::STDIN).await?),
        None => None,
    };
    let stdout = match session.stdout {
        true => Some(open(stream_type::STDOUT).await?),
        false => None,
    };
    let stderr = match session.stderr {
        true => Some(open(stream_type::STDERR).await?),
        false => None,
    };
    let resize =
        match session.tty && protocol != "v2.channel.k8s.io" && protocol != "channel.k8s.io" {
            true => Some(open(stream_type::RESIZE).await?),
            false => None,
        };
    if let (Some(mut resize), Some(size)) = (resize, session.resize) {
        resize.writer.write_all(&serde_json::to_vec(&size)?).await?;
    }
    let send = async {
        if let (Some(mut stdin), Some(data)) = (stdin, session.stdin.as_ref()) {
            tokio::time::sleep(session.stdin_delay).await;
            stdin.writer.write_all(data).await?;
            stdin.writer.shutdown().await?;
        }
        anyhow::Ok(())
    };
    let (sent, stdout, stderr, error) = tokio::join!(
        send,
        read_all(stdout),
        read_all(stderr),
        read_all(Some(error))
    );
    sent?;
    Ok(Outcome {
        stdout: stdout?,
        stderr: stderr?,
        error: error?,
    })
}

async fn read_all(stream: Option<Stream>) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(mut stream) = stream {
        stream.reader.read_to_end(&mut out).await?;
    }
    Ok(out)
}

/// A SPDY port-forward session (`portforward.k8s.io`).
pub struct PortForward {
    session: spdy::Session,
    next_request: u32,
}

/// One forwarded connection: the data stream and the error stream.
pub struct Forwarded {
    /// Bytes to and from the pod port.
    pub data: Stream,
    /// Errors (text) from the server; EOF when the connection is done.
    pub error: Stream,
}

impl PortForward {
    /// Upgrades `url` to a port-forward session.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let (conn, _) =
            upgrade(url, &[skiff_runtime::streaming::protocol::portforward::V1]).await?;
        let (session, _) = spdy::Session::new(conn, Role::Client);
        Ok(Self {
            session,
            next_request: 0,
        })
    }

    /// Opens a connection to pod port `port` (error stream first, as kubectl does).
    pub async fn open(&mut self, port: u16) -> anyhow::Result<Forwarded> {
        let request = self.next_request.to_string();
        self.next_request += 1;
        let port = port.to_string();
        let stream = |kind: &'static str| {
            headers(&[
                (STREAM_TYPE_HEADER, kind),
                (PORT_HEADER, &port),
                (REQUEST_ID_HEADER, &request),
            ])
        };
        let error = self.session.open(stream(stream_type::ERROR)).await?;
        let data = self.session.open(stream(stream_type::DATA)).await?;
        Ok(Forwarded { data, error })
    }
}

impl Forwarded {
    /// Sends `request`, half-closes, and returns everything the pod sent back and the
    /// error stream's text.
    pub async fn exchange(mut self, request: &[u8]) -> anyhow::Result<(Vec<u8>, String)> {
        self.data.writer.write_all(request).await?;
        self.data.writer.shutdown().await?;
        let (mut reply, mut error) = (Vec::new(), Vec::new());
        let (a, b) = tokio::join!(
            self.data.reader.read_to_end(&mut reply),
            self.error.reader.read_to_end(&mut error)
        );
        a?;
        b?;
        Ok((reply, String::from_utf8_lossy(&error).into_owned()))
    }
}
