//! The no-progress timeout of pulls (containerd's `image_pull_progress_timeout`): a
//! download that receives no byte for the timeout fails instead of hanging forever.

use std::io;
use std::time::Duration;

use futures::{Stream, StreamExt};

/// The failure of a download that stayed silent for the progress timeout.
#[derive(Debug, thiserror::Error)]
#[error("no data received for {0:?}")]
struct Stalled(Duration);

/// `stream`, failing with an [`io::ErrorKind::TimedOut`] error (recognised by
/// [`is_stalled`]) when no item arrives for `timeout`. The stream ends after that error.
pub fn with_timeout<S, B>(
    stream: S,
    timeout: Duration,
) -> impl Stream<Item = io::Result<B>> + Unpin + Send
where
    S: Stream<Item = io::Result<B>> + Unpin + Send + 'static,
    B: Send + 'static,
{
    futures::stream::unfold(Some(stream), move |stream| async move {
        let mut stream = stream?;
        match tokio::time::timeout(timeout, stream.next()).await {
            Ok(Some(item)) => Some((item, Some(stream))),
            Ok(None) => None,
            Err(_) => Some((
                Err(io::Error::new(io::ErrorKind::TimedOut, Stalled(timeout))),
                None,
            )),
        }
    })
    .boxed()
}

/// Whether `err` is the failure of [`with_timeout`].
pub fn is_stalled(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|inner| inner.is::<Stalled>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_silent_stream_fails_and_ends() {
        let chunks = futures::stream::iter([Ok::<_, io::Error>(vec![1u8])])
            .chain(futures::stream::pending());
        let mut stream = with_timeout(Box::pin(chunks), Duration::from_millis(100));
        assert_eq!(
            stream.next().await.map(|item| item.ok()),
            Some(Some(vec![1]))
        );
        let err = stream
            .next()
            .await
            .and_then(Result::err)
            .map(|err| is_stalled(&err));
        assert_eq!(err, Some(true));
        assert!(stream.next().await.is_none());
        assert!(!is_stalled(&io::Error::other("connection reset")));
    }
}
