//! Byte-stream adapters over message channels, shared by the SPDY and WebSocket
//! transports: a [`MessageWriter`] turns writes into messages for a connection's single
//! writer task (so the messages of all streams stay in write order), a [`MessageReader`]
//! reads the payloads a connection's reader task routes to one stream.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::PollSender;

/// Largest payload put in one message.
pub const MAX_CHUNK: usize = 32 * 1024;

/// How a transport wraps one stream's bytes into its messages.
pub trait Framing: Clone + Send + Sync + Unpin + 'static {
    /// The message type of the connection's writer task.
    type Message: Send + 'static;
    /// A message carrying `chunk`.
    fn data(&self, chunk: Bytes) -> Self::Message;
    /// The message ending the stream (SPDY FIN), if the transport has one.
    fn fin(&self) -> Option<Self::Message>;
}

/// The writing end of one stream. Clones write to the same stream; `shutdown` sends the
/// [`Framing::fin`] message once. Errors with `BrokenPipe` once the connection is gone.
pub struct MessageWriter<F: Framing> {
    framing: F,
    tx: PollSender<F::Message>,
    finished: bool,
}

impl<F: Framing> MessageWriter<F> {
    /// A writer sending `framing`'s messages to the writer task behind `tx`.
    pub fn new(framing: F, tx: mpsc::Sender<F::Message>) -> Self {
        Self {
            framing,
            tx: PollSender::new(tx),
            finished: false,
        }
    }

    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        message: F::Message,
    ) -> Poll<std::io::Result<()>> {
        ready!(self.tx.poll_reserve(cx)).map_err(|_| broken_pipe())?;
        self.tx.send_item(message).map_err(|_| broken_pipe())?;
        Poll::Ready(Ok(()))
    }
}

/// The error of writes to a connection that is gone.
pub fn broken_pipe() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "streaming connection closed",
    )
}

impl<F: Framing> Clone for MessageWriter<F> {
    fn clone(&self) -> Self {
        Self {
            framing: self.framing.clone(),
            tx: self.tx.clone(),
            finished: self.finished,
        }
    }
}

impl<F: Framing> AsyncWrite for MessageWriter<F> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(Err(broken_pipe()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let len = buf.len().min(MAX_CHUNK);
        let message = this.framing.data(Bytes::copy_from_slice(&buf[..len]));
        ready!(this.poll_send(cx, message))?;
        Poll::Ready(Ok(len))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(Ok(()));
        }
        if let Some(fin) = this.framing.fin() {
            ready!(this.poll_send(cx, fin))?;
        }
        this.finished = true;
        Poll::Ready(Ok(()))
    }
}

/// The reading end of one stream: the routed payloads until the sender is dropped (EOF)
/// or sends an error.
pub type MessageReader =
    tokio_util::io::StreamReader<UnboundedReceiverStream<std::io::Result<Bytes>>, Bytes>;

/// Where a connection's reader task routes one stream's payloads.
pub type MessageSender = mpsc::UnboundedSender<std::io::Result<Bytes>>;

/// A new stream's sending and reading ends.
pub fn message_channel() -> (MessageSender, MessageReader) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        tx,
        tokio_util::io::StreamReader::new(UnboundedReceiverStream::new(rx)),
    )
}
