//! A server-side WebSocket carrying channels ([`super::channel`]): one reader task routes
//! the client's messages to per-channel [`MessageReader`]s (the v5 close signal ends a
//! channel), one writer task sends what the [`ChannelWriter`]s write, in order.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::channel::{self, Encoding};
use super::io::{Framing, MessageReader, MessageSender, MessageWriter, message_channel};
use super::protocol::channel::CLOSE;

/// How long [`Connection::close`] waits for the close handshake.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the writer task is asked to do.
pub enum Out {
    /// Send a payload on a channel.
    Data(u8, Bytes),
    /// Send a close frame and stop.
    Close,
}

/// The framing of one channel's messages.
#[derive(Clone)]
pub struct ChannelFraming(u8);

impl Framing for ChannelFraming {
    type Message = Out;

    fn data(&self, chunk: Bytes) -> Out {
        Out::Data(self.0, chunk)
    }

    fn fin(&self) -> Option<Out> {
        None
    }
}

/// Writes to one channel (`shutdown` is a no-op: channels are closed with the socket).
pub type ChannelWriter = MessageWriter<ChannelFraming>;

/// An upgraded WebSocket split into channels.
pub struct Connection {
    out: mpsc::Sender<Out>,
    readers: HashMap<u8, MessageReader>,
    writer: tokio::task::JoinHandle<()>,
    gone: CancellationToken,
}

impl Connection {
    /// Starts the reader and writer tasks; `inbound` are the channels the client may write.
    pub fn new(socket: WebSocket, encoding: Encoding, inbound: &[u8]) -> Self {
        let (sink, stream) = socket.split();
        let (out, out_rx) = mpsc::channel(64);
        let mut senders = HashMap::new();
        let mut readers = HashMap::new();
        for &id in inbound {
            let (tx, reader) = message_channel();
            senders.insert(id, tx);
            readers.insert(id, reader);
        }
        let gone = CancellationToken::new();
        tokio::spawn(read_messages(stream, encoding, senders, gone.clone()));
        let writer = tokio::spawn(write_messages(sink, encoding, out_rx));
        Self {
            out,
            readers,
            writer,
            gone,
        }
    }

    /// The reading end of inbound channel `id` (once).
    pub fn reader(&mut self, id: u8) -> Option<MessageReader> {
        self.readers.remove(&id)
    }

    /// A writer for channel `id`.
    pub fn writer(&self, id: u8) -> ChannelWriter {
        MessageWriter::new(ChannelFraming(id), self.out.clone())
    }

    /// Sends an empty message on channel `id` (how the server tells the client the session
    /// is established).
    pub async fn announce(&self, id: u8) {
        let _ = self.out.send(Out::Data(id, Bytes::new())).await;
    }

    /// Cancelled when the client has closed the socket or the connection broke.
    pub fn gone(&self) -> CancellationToken {
        self.gone.clone()
    }

    /// Sends what was written so far, then a close frame.
    pub async fn close(self) {
        let _ = self.out.send(Out::Close).await;
        drop(self.out);
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.writer).await;
    }
}

async fn read_messages(
    mut stream: futures::stream::SplitStream<WebSocket>,
    encoding: Encoding,
    mut senders: HashMap<u8, MessageSender>,
    gone: CancellationToken,
) {
    while let Some(Ok(message)) = stream.next().await {
        let payload = match message {
            Message::Binary(data) => data,
            Message::Text(text) => Bytes::from(text.as_str().as_bytes().to_vec()),
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        let Some((id, data)) = channel::decode(&payload, encoding) else {
            continue;
        };
        if id == CLOSE {
            if let Some(closed) = data.first() {
                senders.remove(closed);
            }
        } else if let Some(tx) = senders.get(&id)
            && !data.is_empty()
        {
            let _ = tx.send(Ok(Bytes::from(data)));
        }
    }
    gone.cancel();
}

async fn write_messages(
    mut sink: futures::stream::SplitSink<WebSocket, Message>,
    encoding: Encoding,
    mut out: mpsc::Receiver<Out>,
) {
    while let Some(item) = out.recv().await {
        let message = match item {
            Out::Close => break,
            Out::Data(id, data) => {
                let payload = channel::encode(id, &data, encoding);
                match encoding {
                    Encoding::Binary => Message::Binary(payload.into()),
                    Encoding::Base64 => {
                        Message::Text(String::from_utf8_lossy(&payload).into_owned().into())
                    }
                }
            }
        };
        if sink.send(message).await.is_err() {
            return;
        }
    }
    // A normal closure (1000), as upstream's wsstream: client-go's WebSocket executor
    // reports any other close code, an empty one (1005) included, as an error.
    let normal = axum::extract::ws::CloseFrame {
        code: axum::extract::ws::close_code::NORMAL,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(normal))).await;
    let _ = sink.close().await;
}
