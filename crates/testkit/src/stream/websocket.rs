//! WebSocket clients of the channel protocols: exec / attach (`v5.channel.k8s.io`,
//! `v4.channel.k8s.io`, base64 variants) and port-forward (`?port=` query).

use anyhow::{Context as _, bail};
use futures::{SinkExt as _, StreamExt as _};
use skiff_runtime::streaming::channel::{self, Encoding};
use skiff_runtime::streaming::protocol::channel as ch;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{Outcome, Session};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a WebSocket to `url` (an `http://` streaming URL) offering `protocol`; returns
/// the socket and the negotiated protocol. A refused upgrade is an error naming the
/// HTTP status.
pub async fn connect(url: &str, protocol: &str) -> anyhow::Result<(Socket, String)> {
    let ws_url = url.replacen("http://", "ws://", 1);
    let mut request = ws_url.as_str().into_client_request()?;
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", HeaderValue::from_str(protocol)?);
    let (socket, response) = tokio_tungstenite::connect_async(request)
        .await
        .with_context(|| format!("WebSocket upgrade of {url}"))?;
    let negotiated = response
        .headers()
        .get("Sec-WebSocket-Protocol")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Ok((socket, negotiated))
}

fn encoding(protocol: &str) -> Encoding {
    if protocol.contains("base64") {
        Encoding::Base64
    } else {
        Encoding::Binary
    }
}

fn message(id: u8, data: &[u8], encoding: Encoding) -> Message {
    let payload = channel::encode(id, data, encoding);
    match encoding {
        Encoding::Binary => Message::Binary(payload.into()),
        Encoding::Base64 => Message::Text(String::from_utf8_lossy(&payload).into_owned().into()),
    }
}

fn decode(message: Message, encoding: Encoding) -> Option<(u8, Vec<u8>)> {
    match message {
        Message::Binary(data) => channel::decode(&data, encoding),
        Message::Text(text) => channel::decode(text.as_bytes(), encoding),
        _ => None,
    }
}

/// Runs an exec / attach session at `url` over WebSocket `protocol`: sends the resize and
/// stdin (closing stdin with the v5 close message; v4 cannot close it), and collects the
/// channels until the server closes the socket.
pub async fn remote_command(
    url: &str,
    protocol: &str,
    session: &Session,
) -> anyhow::Result<Outcome> {
    let (socket, negotiated) = connect(url, protocol).await?;
    if negotiated != protocol {
        bail!("server chose protocol {negotiated:?}, asked for {protocol:?}");
    }
    let encoding = encoding(protocol);
    let (mut sink, mut stream) = socket.split();
    let send = async {
        if let (true, Some(size)) = (session.tty, session.resize) {
            sink.send(message(ch::RESIZE, &serde_json::to_vec(&size)?, encoding))
                .await?;
        }
        if let Some(data) = &session.stdin {
            tokio::time::sleep(session.stdin_delay).await;
            sink.send(message(ch::STDIN, data, encoding)).await?;
            if protocol.starts_with("v5.") {
                sink.send(message(ch::CLOSE, &[ch::STDIN], encoding))
                    .await?;
            }
        }
        anyhow::Ok(sink)
    };
    let receive = async {
        let mut outcome = Outcome::default();
        while let Some(message) = stream.next().await {
            let message = message?;
            if message.is_close() {
                break;
            }
            match decode(message, encoding) {
                Some((ch::STDOUT, data)) => outcome.stdout.extend(data),
                Some((ch::STDERR, data)) => outcome.stderr.extend(data),
                Some((ch::ERROR, data)) => outcome.error.extend(data),
                _ => {}
            }
        }
        anyhow::Ok(outcome)
    };
    let (sent, outcome) = tokio::join!(send, receive);
    let mut sink = sent?;
    let _ = sink.close().await;
    outcome
}

/// Forwards one connection to each of `ports` over WebSocket `protocol` (the ports of
/// the CRI request; `url` also gets them as the `?port=` query): sends `request` on every data channel, then collects what each port
/// answered and each error channel's text, until the server closes the socket. Checks the
/// 2-byte port prefix of every channel.
pub async fn port_forward(
    url: &str,
    protocol: &str,
    ports: &[u16],
    request: &[u8],
) -> anyhow::Result<Vec<(Vec<u8>, String)>> {
    let query: Vec<String> = ports.iter().map(|port| format!("port={port}")).collect();
    let url = format!("{url}?{}", query.join("&"));
    let (socket, _) = connect(&url, protocol).await?;
    let encoding = encoding(protocol);
    let (mut sink, mut stream) = socket.split();
    for i in 0..ports.len() {
        sink.send(message((2 * i) as u8, request, encoding)).await?;
    }
    let mut results = vec![(Vec::new(), Vec::new()); ports.len()];
    let mut prefixed = vec![[false; 2]; ports.len()];
    while let Some(message) = stream.next().await {
        let message = message?;
        if message.is_close() {
            break;
        }
        let Some((id, mut data)) = decode(message, encoding) else {
            continue;
        };
        let (port, kind) = (usize::from(id) / 2, usize::from(id) % 2);
        let Some(seen) = prefixed.get_mut(port) else {
            bail!("message on unexpected channel {id}");
        };
        if !seen[kind] {
            if data.len() < 2 || u16::from_le_bytes([data[0], data[1]]) != ports[port] {
                bail!(
                    "channel {id} does not start with port {}: {data:?}",
                    ports[port]
                );
            }
            data.drain(..2);
            seen[kind] = true;
        }
        let target = if kind == 0 {
            &mut results[port].0
        } else {
            &mut results[port].1
        };
        target.extend(data);
    }
    let _ = sink.close().await;
    Ok(results
        .into_iter()
        .map(|(data, error)| (data, String::from_utf8_lossy(&error).into_owned()))
        .collect())
}
