//! A SPDY/3.1 session over one connection, for both ends: the peer's streams are handed
//! out as they open (and accepted with an empty SYN_REPLY), streams of our own are opened
//! with [`Session::open`]. Each [`Stream`] has an `AsyncRead` half (the peer's DATA frames
//! until FIN) and an `AsyncWrite` half (shutdown sends FIN).
//!
//! Flow control: incoming DATA is acknowledged with WINDOW_UPDATE frames right away, and
//! the peer's windows are not enforced on what we send, as the Kubernetes SPDY peers
//! (moby/spdystream) do not enforce them either.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::streaming::io::{
    Framing, MessageReader, MessageSender, MessageWriter, broken_pipe, message_channel,
};

use super::frame::{
    FLAG_FIN, Frame, FrameDecoder, FrameEncoder, Headers, RST_CANCEL, RST_PROTOCOL_ERROR,
    RST_REFUSED_STREAM,
};

/// How long [`Session::open`] waits for the peer's SYN_REPLY.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Session::close`] waits for the peer to close after our GOAWAY.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which end of the connection we are: clients open odd streams, servers even ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The end that sent the HTTP upgrade request.
    Client,
    /// The end that accepted it.
    Server,
}

/// What the writer task is asked to do.
pub enum Out {
    /// Send a frame.
    Frame(Frame),
    /// Flush, then close our sending direction of the connection.
    Close,
}

type DataSender = MessageSender;

/// State shared by the session handle and its reader task.
#[derive(Default)]
struct Shared {
    /// Where the peer's DATA for each open stream goes.
    streams: Mutex<HashMap<u32, DataSender>>,
    /// Streams we opened, waiting for the peer's SYN_REPLY.
    pending: Mutex<HashMap<u32, oneshot::Sender<()>>>,
}

impl Shared {
    fn streams(&self) -> std::sync::MutexGuard<'_, HashMap<u32, DataSender>> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u32, oneshot::Sender<()>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One SPDY session; dropping it leaves the connection to the peer's will, [`close`]
/// ends it.
///
/// [`close`]: Session::close
pub struct Session {
    out: mpsc::Sender<Out>,
    shared: Arc<Shared>,
    next_id: AtomicU32,
    reader: tokio::task::JoinHandle<()>,
}

/// A stream of the session.
pub struct Stream {
    /// Stream ID.
    pub id: u32,
    /// The headers it was opened with.
    pub headers: Headers,
    /// The peer's data, until its FIN or RST_STREAM (both read as EOF, as spdystream
    /// does: Kubernetes servers reset the streams they leave open when they close).
    pub reader: StreamReader,
    /// Our data; `shutdown` sends FIN.
    pub writer: StreamWriter,
}

/// The reading half of a [`Stream`].
pub type StreamReader = MessageReader;
/// The writing half of a [`Stream`]: each write becomes DATA frames, `shutdown` sends FIN.
pub type StreamWriter = MessageWriter<DataFraming>;

impl Stream {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        super::frame::header(&self.headers, name)
    }
}

impl Session {
    /// Starts a session on `io` (an upgraded HTTP connection). Returns the session and the
    /// streams the peer opens, in order.
    pub fn new<IO>(io: IO, role: Role) -> (Session, mpsc::UnboundedReceiver<Stream>)
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (read, write) = tokio::io::split(io);
        let (out, out_rx) = mpsc::channel(64);
        let (incoming_tx, incoming) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        tokio::spawn(write_frames(
            FramedWrite::new(write, FrameEncoder::default()),
            out_rx,
        ));
        let reader = tokio::spawn(read_frames(
            FramedRead::new(read, FrameDecoder::default()),
            role,
            out.clone(),
            shared.clone(),
            incoming_tx,
        ));
        let session = Session {
            out,
            shared,
            next_id: AtomicU32::new(if role == Role::Client { 1 } else { 2 }),
            reader,
        };
        (session, incoming)
    }

    /// Opens a stream with `headers` and waits for the peer to accept it.
    pub async fn open(&self, headers: Headers) -> std::io::Result<Stream> {
        let id = self.next_id.fetch_add(2, Ordering::Relaxed);
        let (reply_tx, reply) = oneshot::channel();
        self.shared.pending().insert(id, reply_tx);
        let reader = data_channel(&self.shared, id);
        self.send(Frame::SynStream {
            stream_id: id,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: headers.clone(),
        })
        .await?;
        match tokio::time::timeout(REPLY_TIMEOUT, reply).await {
            Ok(Ok(())) => Ok(Stream {
                id,
                headers,
                reader,
                writer: stream_writer(id, &self.out),
            }),
            Ok(Err(_)) => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                format!("SPDY stream {id} refused by the peer"),
            )),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no SYN_REPLY for SPDY stream {id}"),
            )),
        }
    }

    /// Aborts stream `id` (RST_STREAM CANCEL).
    pub async fn reset(&self, id: u32) -> std::io::Result<()> {
        self.shared.streams().remove(&id);
        self.send(Frame::RstStream {
            stream_id: id,
            status: RST_CANCEL,
        })
        .await
    }

    /// Ends the session: everything written so far is flushed, GOAWAY is sent, our sending
    /// direction closes, and the peer gets a moment to close its own before the
    /// connection is dropped.
    pub async fn close(self) {
        let _ = self
            .send(Frame::GoAway {
                last_good_stream_id: 0,
                status: 0,
            })
            .await;
        let _ = self.out.send(Out::Close).await;
        let mut reader = self.reader;
        if tokio::time::timeout(CLOSE_TIMEOUT, &mut reader)
            .await
            .is_err()
        {
            reader.abort();
        }
    }

    async fn send(&self, frame: Frame) -> std::io::Result<()> {
        self.out
            .send(Out::Frame(frame))
            .await
            .map_err(|_| broken_pipe())
    }
}

/// Registers stream `id`'s incoming data channel and returns its reading end.
fn data_channel(shared: &Shared, id: u32) -> StreamReader {
    let (tx, reader) = message_channel();
    shared.streams().insert(id, tx);
    reader
}

fn stream_writer(id: u32, out: &mpsc::Sender<Out>) -> StreamWriter {
    MessageWriter::new(DataFraming { id }, out.clone())
}

async fn write_frames<W: AsyncWrite + Unpin>(
    mut sink: FramedWrite<W, FrameEncoder>,
    mut out: mpsc::Receiver<Out>,
) {
    while let Some(item) = out.recv().await {
        let result = match item {
            Out::Frame(frame) => match out.is_empty() {
                // Flush only when nothing else is queued.
                true => sink.send(frame).await,
                false => sink.feed(frame).await,
            },
            Out::Close => break,
        };
        if let Err(err) = result {
            tracing::debug!("SPDY write: {err}");
            return;
        }
    }
    let _ = sink.flush().await;
    let _ = tokio::io::AsyncWriteExt::shutdown(sink.get_mut()).await;
}

async fn read_frames<R: AsyncRead + Unpin>(
    mut frames: FramedRead<R, FrameDecoder>,
    role: Role,
    out: mpsc::Sender<Out>,
    shared: Arc<Shared>,
    incoming: mpsc::UnboundedSender<Stream>,
) {
    let peer_parity = if role == Role::Server { 1 } else { 0 };
    while let Some(frame) = frames.next().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(err) => {
                tracing::debug!("SPDY read: {err}");
                break;
            }
        };
        let reply = match frame {
            Frame::SynStream {
                stream_id,
                flags,
                headers,
                ..
            } => accept(
                stream_id,
                flags,
                headers,
                peer_parity,
                &out,
                &shared,
                &incoming,
            ),
            Frame::SynReply { stream_id, .. } => {
                if let Some(waiter) = shared.pending().remove(&stream_id) {
                    let _ = waiter.send(());
                }
                vec![]
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                let len = data.len() as u32;
                let mut streams = shared.streams();
                if let Some(tx) = streams.get(&stream_id)
                    && !data.is_empty()
                {
                    let _ = tx.send(Ok(data));
                }
                if flags & FLAG_FIN != 0 {
                    streams.remove(&stream_id);
                }
                match len {
                    0 => vec![],
                    delta => vec![
                        Frame::WindowUpdate { stream_id, delta },
                        Frame::WindowUpdate {
                            stream_id: 0,
                            delta,
                        },
                    ],
                }
            }
            Frame::RstStream { stream_id, .. } => {
                shared.pending().remove(&stream_id);
                shared.streams().remove(&stream_id);
                vec![]
            }
            Frame::Ping { id } if id % 2 == peer_parity => vec![Frame::Ping { id }],
            Frame::Ping { .. }
            | Frame::Settings { .. }
            | Frame::GoAway { .. }
            | Frame::Headers { .. }
            | Frame::WindowUpdate { .. } => vec![],
        };
        for frame in reply {
            if out.send(Out::Frame(frame)).await.is_err() {
                break;
            }
        }
    }
    // The peer is gone: every stream reaches EOF, every open() fails.
    shared.streams().clear();
    shared.pending().clear();
}

/// Handles the peer's SYN_STREAM: registers the stream, hands it out, and returns the
/// frames to send (SYN_REPLY, or RST_STREAM when it cannot be taken).
fn accept(
    id: u32,
    flags: u8,
    headers: Headers,
    peer_parity: u32,
    out: &mpsc::Sender<Out>,
    shared: &Shared,
    incoming: &mpsc::UnboundedSender<Stream>,
) -> Vec<Frame> {
    if id % 2 != peer_parity || shared.streams().contains_key(&id) {
        return vec![Frame::RstStream {
            stream_id: id,
            status: RST_PROTOCOL_ERROR,
        }];
    }
    let reader = data_channel(shared, id);
    if flags & FLAG_FIN != 0 {
        shared.streams().remove(&id);
    }
    let stream = Stream {
        id,
        headers,
        reader,
        writer: stream_writer(id, out),
    };
    if incoming.send(stream).is_err() {
        shared.streams().remove(&id);
        return vec![Frame::RstStream {
            stream_id: id,
            status: RST_REFUSED_STREAM,
        }];
    }
    vec![Frame::SynReply {
        stream_id: id,
        flags: 0,
        headers: Headers::new(),
    }]
}

/// The framing of one stream's DATA frames.
#[derive(Clone)]
pub struct DataFraming {
    id: u32,
}

impl Framing for DataFraming {
    type Message = Out;

    fn data(&self, chunk: Bytes) -> Out {
        Out::Frame(Frame::Data {
            stream_id: self.id,
            flags: 0,
            data: chunk,
        })
    }

    fn fin(&self) -> Option<Out> {
        Some(Out::Frame(Frame::Data {
            stream_id: self.id,
            flags: FLAG_FIN,
            data: Bytes::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[tokio::test]
    async fn streams_carry_data_both_ways_until_fin() {
        let (client_io, server_io) = tokio::io::duplex(4096);
        let (client, _) = Session::new(client_io, Role::Client);
        let (server, mut incoming) = Session::new(server_io, Role::Server);

        let server_task = tokio::spawn(async move {
            let mut stream = incoming.recv().await.unwrap();
            assert_eq!(stream.header("streamType"), Some("stdin"));
            let mut got = Vec::new();
            stream.reader.read_to_end(&mut got).await.unwrap();
            stream.writer.write_all(&got).await.unwrap();
            stream.writer.shutdown().await.unwrap();
            server.close().await;
            got.len()
        });

        let stream = client
            .open(headers(&[("streamType", "stdin")]))
            .await
            .unwrap();
        assert_eq!(stream.id, 1);
        let payload: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let (mut reader, mut writer) = (stream.reader, stream.writer);
        let send = {
            let payload = payload.clone();
            tokio::spawn(async move {
                writer.write_all(&payload).await.unwrap();
                writer.shutdown().await.unwrap();
            })
        };
        let mut echoed = Vec::new();
        reader.read_to_end(&mut echoed).await.unwrap();
        send.await.unwrap();
        assert_eq!(echoed, payload);
        drop(client);
        assert_eq!(server_task.await.unwrap(), payload.len());
    }

    #[tokio::test]
    async fn reset_streams_read_to_eof() {
        let (client_io, server_io) = tokio::io::duplex(4096);
        let (client, _) = Session::new(client_io, Role::Client);
        let (server, mut incoming) = Session::new(server_io, Role::Server);
        let mut stream = client.open(headers(&[("a", "b")])).await.unwrap();
        let accepted = incoming.recv().await.unwrap();
        server.reset(accepted.id).await.unwrap();
        let mut buf = Vec::new();
        stream.reader.read_to_end(&mut buf).await.unwrap();
        assert!(buf.is_empty());
    }
}
