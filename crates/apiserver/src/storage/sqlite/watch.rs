//! Watches on SQLite: a catch-up read of the log, then the writer's in-process events.
//!
//! A watcher subscribes to the writer's broadcast *before* reading the log, so no commit
//! falls between the two; events the log read already delivered are skipped by revision.
//! A watcher whose broadcast receiver lags behind re-reads the missed part from the log
//! (or ends with [`StorageError::Compacted`] if compaction removed it meanwhile).

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::read::{self, Readers};
use crate::storage::{Event, Result, Revision, WatchItem};

/// Log rows read per catch-up query.
const CATCH_UP_BATCH: usize = 500;

/// Items buffered between the watch task and its consumer.
pub(super) const BUFFER: usize = 256;

/// What a watch needs from the store.
pub(super) struct Source {
    pub(super) readers: Arc<Readers>,
    pub(super) events: broadcast::Sender<Arc<Event>>,
    pub(super) progress_interval: Duration,
}

/// Starts a watch of `prefix` after revision `after`. The first catch-up read happens
/// before this returns, so a compacted `after` is an error here, not in the stream.
pub(super) async fn start(
    source: Source,
    prefix: String,
    after: Revision,
) -> Result<BoxStream<'static, Result<WatchItem>>> {
    let live = source.events.subscribe();
    let first = catch_up_batch(&source.readers, &prefix, after).await?;
    let (tx, rx) = mpsc::channel(BUFFER);
    let watch = Watch {
        source,
        prefix,
        last: after,
        tx,
    };
    tokio::spawn(watch.run(live, first));
    Ok(Box::pin(ReceiverStream::new(rx)))
}

struct Watch {
    source: Source,
    prefix: String,
    /// Every change under the prefix up to this revision has been sent.
    last: Revision,
    tx: mpsc::Sender<Result<WatchItem>>,
}

impl Watch {
    /// Sends the catch-up, then live events and idle progress notes, until the consumer
    /// goes away or the store closes.
    async fn run(
        mut self,
        mut live: broadcast::Receiver<Arc<Event>>,
        first: (Vec<Event>, Revision),
    ) {
        let mut batch = first;
        loop {
            let (events, complete_to) = batch;
            let full = events.len() == CATCH_UP_BATCH;
            for event in events {
                if !self.send(WatchItem::Event(Arc::new(event))).await {
                    return;
                }
            }
            self.last = self.last.max(complete_to);
            // Caught up when a read ended at the store's current revision.
            if !full {
                match self.follow(&mut live).await {
                    Follow::Lagged => live = self.source.events.subscribe(),
                    Follow::Done => return,
                }
            }
            batch = match catch_up_batch(&self.source.readers, &self.prefix, self.last).await {
                Ok(batch) => batch,
                Err(e) => {
                    let _ = self.tx.send(Err(e)).await;
                    return;
                }
            };
        }
    }

    /// Forwards live events under the prefix, and a progress note for every interval in
    /// which nothing was sent.
    async fn follow(&mut self, live: &mut broadcast::Receiver<Arc<Event>>) -> Follow {
        let mut ticks = tokio::time::interval(self.source.progress_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.reset();
        let mut sent = false;
        loop {
            tokio::select! {
                biased;
                received = live.recv() => match received {
                    Ok(event) => {
                        let revision = event.kv.mod_revision;
                        if revision <= self.last {
                            continue;
                        }
                        self.last = revision;
                        if event.kv.key.starts_with(&self.prefix) {
                            if !self.send(WatchItem::Event(event)).await {
                                return Follow::Done;
                            }
                            sent = true;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => return Follow::Lagged,
                    Err(broadcast::error::RecvError::Closed) => return Follow::Done,
                },
                _ = ticks.tick() => {
                    if !std::mem::take(&mut sent)
                        && !self.send(WatchItem::Progress(self.last)).await
                    {
                        return Follow::Done;
                    }
                }
                _ = self.tx.closed() => return Follow::Done,
            }
        }
    }

    /// Sends one item; false when the consumer is gone.
    async fn send(&self, item: WatchItem) -> bool {
        self.tx.send(Ok(item)).await.is_ok()
    }
}

/// How following live events ended.
enum Follow {
    /// The broadcast dropped events for this watcher: re-read them from the log.
    Lagged,
    /// The consumer or the store is gone.
    Done,
}

async fn catch_up_batch(
    readers: &Arc<Readers>,
    prefix: &str,
    after: Revision,
) -> Result<(Vec<Event>, Revision)> {
    let prefix = prefix.to_string();
    readers
        .run(move |conn| read::changes(conn, &prefix, after, CATCH_UP_BATCH))
        .await
}
