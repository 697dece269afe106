//! Periodic compaction, as the upstream API server's compactor
//! (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go`): every interval (5
//! minutes upstream and by default here), a round of [`Storage::compact_round`] compacts
//! to the revision seen a round earlier, so at least one interval of history stays
//! available to watches and paginated lists, and older history does not grow without
//! bound. Several API servers on one etcd share the rounds: one compacts per interval.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{CompactionRound, Storage};

/// Upstream's `--etcd-compaction-interval` default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// Starts compacting `storage` every `interval`; the task ends when `storage` is dropped.
pub fn spawn(storage: &Arc<dyn Storage>, interval: Duration) -> tokio::task::JoinHandle<()> {
    let storage: Weak<dyn Storage> = Arc::downgrade(storage);
    tokio::spawn(async move {
        let mut round = CompactionRound::default();
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let Some(storage) = storage.upgrade() else {
                return;
            };
            match storage.compact_round(round).await {
                Ok(next) => round = next,
                Err(e) => {
                    tracing::warn!(revision = round.revision, error = %e, "compaction failed")
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StorageError;
    use crate::storage::sqlite::{Sqlite, SqliteOptions};

    #[tokio::test]
    async fn compacts_to_the_revision_seen_a_tick_earlier_and_stops_with_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Sqlite::open(&dir.path().join("state.db"), SqliteOptions::default());
        let storage: Arc<dyn Storage> = Arc::new(sqlite.unwrap());
        let first = storage.create("/registry/pods/ns/a", vec![]).await.unwrap();
        let second = storage.update(&first.key, vec![1], first.mod_revision);
        let second = second.await.unwrap();
        let task = spawn(&storage, Duration::from_millis(100));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let old = storage.list("/registry/pods/", None, 0, Some(first.mod_revision));
            match old.await {
                Err(StorageError::Compacted { compacted, .. }) => {
                    assert_eq!(compacted, second.mod_revision);
                    break;
                }
                Ok(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => panic!("not compacted: {other:?}"),
            }
        }
        drop(storage);
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(ended.is_ok_and(|joined| joined.is_ok()));
    }
}
