//! Port-forward sessions (upstream `kubelet/pkg/kubelet/cri/streaming/portforward`): over
//! SPDY the client opens a data and an error stream per connection, paired by their
//! `requestID` header and naming the pod port in `port`; over WebSocket the ports come
//! from the `?port=` query, each with a data channel (`2i`) and an error channel
//! (`2i+1`), both starting with the port in 2 little-endian bytes. Connections go to
//! `127.0.0.1:<port>` in the pod's network namespace through
//! [`StreamBackend::port_forward`]; failures are reported as text on the error stream.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::WebSocket;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use super::backend::StreamBackend;
use super::channel::Encoding;
use super::protocol::{self, PORT_HEADER, REQUEST_ID_HEADER, STREAM_TYPE_HEADER, stream_type};
use super::spdy::{Role, Session, Stream};
use super::websocket::Connection;

/// Sub-protocols accepted over SPDY.
pub const SPDY_PROTOCOLS: &[&str] = &[protocol::portforward::V1];

/// Sub-protocols accepted over WebSocket (`""`: a client that names none).
pub const WEBSOCKET_PROTOCOLS: &[&str] = &[
    protocol::remotecommand::V4,
    protocol::remotecommand::V4_BASE64,
    protocol::portforward::V1,
    "",
];

/// Most ports one WebSocket session can forward (two channel numbers each).
pub const MAX_WEBSOCKET_PORTS: usize = 127;

/// Serves a port-forward session over an upgraded SPDY connection until the client hangs
/// up.
pub async fn serve_spdy<IO>(io: IO, sandbox_id: String, backend: Arc<dyn StreamBackend>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (session, mut incoming) = Session::new(io, Role::Server);
    let gone = CancellationToken::new();
    // requestID -> (data, error) streams received so far.
    let mut pairs: HashMap<String, (Option<Stream>, Option<Stream>)> = HashMap::new();
    while let Some(stream) = incoming.recv().await {
        let kind = stream
            .header(STREAM_TYPE_HEADER)
            .unwrap_or_default()
            .to_string();
        let Some(request_id) = request_id(&stream, &kind) else {
            let _ = session.reset(stream.id).await;
            continue;
        };
        let pair = pairs.entry(request_id.clone()).or_default();
        let slot = match kind.as_str() {
            stream_type::DATA => &mut pair.0,
            stream_type::ERROR => &mut pair.1,
            _ => {
                let _ = session.reset(stream.id).await;
                continue;
            }
        };
        if slot.is_some() {
            let _ = session.reset(stream.id).await;
            continue;
        }
        *slot = Some(stream);
        let complete = pair.0.is_some() && pair.1.is_some();
        if complete && let Some((Some(data), Some(error))) = pairs.remove(&request_id) {
            tokio::spawn(forward_spdy(
                backend.clone(),
                sandbox_id.clone(),
                data,
                error,
                gone.child_token(),
            ));
        }
    }
    gone.cancel();
    session.close().await;
}

/// The stream's `requestID`, or for clients that send none, the ID upstream derives from
/// the stream IDs (error stream first, data stream two later).
fn request_id(stream: &Stream, kind: &str) -> Option<String> {
    if let Some(id) = stream.header(REQUEST_ID_HEADER) {
        return Some(id.to_string());
    }
    match kind {
        stream_type::ERROR => Some(stream.id.to_string()),
        stream_type::DATA => Some(stream.id.checked_sub(2)?.to_string()),
        _ => None,
    }
}

async fn forward_spdy(
    backend: Arc<dyn StreamBackend>,
    sandbox_id: String,
    data: Stream,
    mut error: Stream,
    gone: CancellationToken,
) {
    let port = data.header(PORT_HEADER).unwrap_or_default().to_string();
    let result = match port.parse::<u16>() {
        Ok(port) if port > 0 => {
            forward(&*backend, &sandbox_id, port, data.reader, data.writer, gone).await
        }
        _ => {
            let mut data_out = data.writer;
            let _ = data_out.shutdown().await;
            Err(format!("invalid port {port:?}"))
        }
    };
    if let Err(err) = result {
        let message = format!("error forwarding port {port} to pod {sandbox_id}: {err}");
        let _ = error.writer.write_all(message.as_bytes()).await;
    }
    let _ = error.writer.shutdown().await;
}

/// Serves a port-forward session over an upgraded WebSocket, forwarding one connection
/// per port in `ports`; the socket closes when all of them have ended.
pub async fn serve_websocket(
    socket: WebSocket,
    protocol: &str,
    sandbox_id: String,
    ports: Vec<u16>,
    backend: Arc<dyn StreamBackend>,
) {
    let encoding = match protocol {
        protocol::remotecommand::V4_BASE64 => Encoding::Base64,
        _ => Encoding::Binary,
    };
    let data_channel = |i: usize| (2 * i) as u8;
    let inbound: Vec<u8> = (0..ports.len()).map(data_channel).collect();
    let mut conn = Connection::new(socket, encoding, &inbound);
    let mut forwards = Vec::new();
    for (i, port) in ports.into_iter().enumerate() {
        let mut data_out = conn.writer(data_channel(i));
        let mut error_out = conn.writer(data_channel(i) + 1);
        let prefix = port.to_le_bytes();
        let _ = data_out.write_all(&prefix).await;
        let _ = error_out.write_all(&prefix).await;
        let Some(data_in) = conn.reader(data_channel(i)) else {
            continue;
        };
        let (backend, sandbox_id, gone) = (backend.clone(), sandbox_id.clone(), conn.gone());
        forwards.push(async move {
            if let Err(err) = forward(&*backend, &sandbox_id, port, data_in, data_out, gone).await {
                let message = format!("error forwarding port {port} to pod {sandbox_id}: {err}");
                let _ = error_out.write_all(message.as_bytes()).await;
            }
        });
    }
    futures::future::join_all(forwards).await;
    conn.close().await;
}

/// Connects to `port` in the sandbox and copies both ways: the client's end of data
/// half-closes the pod connection, the pod's end of data ends the forward. Ends early
/// when `gone` is cancelled. The client's data stream is ended (SPDY FIN) in every case.
/// Only a failed connect is an error (its message is for the client).
async fn forward<R, W>(
    backend: &dyn StreamBackend,
    sandbox_id: &str,
    port: u16,
    mut from_client: R,
    mut to_client: W,
    gone: CancellationToken,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let tcp = match backend.port_forward(sandbox_id, port).await {
        Ok(tcp) => tcp,
        Err(err) => {
            let _ = to_client.shutdown().await;
            return Err(err.to_string());
        }
    };
    let (mut pod_read, mut pod_write) = tcp.into_split();
    let upstream = async {
        let _ = tokio::io::copy(&mut from_client, &mut pod_write).await;
        let _ = pod_write.shutdown().await;
        std::future::pending::<()>().await
    };
    let downstream = async {
        if let Err(err) = tokio::io::copy(&mut pod_read, &mut to_client).await {
            tracing::debug!(sandbox_id, port, "port-forward copy: {err}");
        }
        let _ = to_client.shutdown().await;
    };
    tokio::select! {
        () = downstream => {}
        () = upstream => {}
        () = gone.cancelled() => {}
    }
    Ok(())
}
