//! Building the configured store: SQLite in the data directory, or etcd.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::etcd::{Etcd, EtcdOptions};
use super::sqlite::{Sqlite, SqliteOptions};
use super::watch_cache::{WatchCache, WatchCacheOptions};
use super::{DEFAULT_MAX_OBJECT_BYTES, Result, Storage, StorageError, compactor};

/// The file of the SQLite store in the data directory.
pub const SQLITE_FILE: &str = "state.db";

/// Where and how the API server stores its objects.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// `--data-dir`: the SQLite store is `<data_dir>/state.db` (the directory is created).
    pub data_dir: PathBuf,
    /// `--etcd-servers` (`http://127.0.0.1:2379`, ...): when not empty, etcd is the store
    /// instead of SQLite.
    pub etcd_servers: Vec<String>,
    /// The largest object a write takes, in bytes ([`DEFAULT_MAX_OBJECT_BYTES`]).
    pub max_object_bytes: usize,
    /// The watch cache's settings (1000 events per resource).
    pub watch_cache: WatchCacheOptions,
    /// How often history is compacted; each compaction keeps at least this much history
    /// ([`compactor::DEFAULT_INTERVAL`], 5 minutes). Zero: never.
    pub compaction_interval: Duration,
}

impl StorageConfig {
    /// The defaults, with the SQLite store in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> StorageConfig {
        StorageConfig {
            data_dir: data_dir.into(),
            etcd_servers: Vec::new(),
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            watch_cache: WatchCacheOptions::default(),
            compaction_interval: compactor::DEFAULT_INTERVAL,
        }
    }
}

/// Opens the configured backend behind a [`WatchCache`] and starts its periodic
/// compaction (which ends when the store is dropped). Must run inside a tokio runtime.
///
/// Errors: [`StorageError::Unavailable`] when the SQLite file cannot be opened, or etcd
/// cannot be reached (one request is made to check).
pub async fn open(config: &StorageConfig) -> Result<Arc<WatchCache>> {
    let backend: Arc<dyn Storage> = if config.etcd_servers.is_empty() {
        let dir = config.data_dir.clone();
        let options = SqliteOptions {
            max_object_bytes: config.max_object_bytes,
            ..SqliteOptions::default()
        };
        let sqlite = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|e| {
                StorageError::Unavailable(format!("creating {}: {e}", dir.display()))
            })?;
            Sqlite::open(&dir.join(SQLITE_FILE), options)
        })
        .await
        .map_err(|e| StorageError::Unavailable(format!("opening SQLite: {e}")))??;
        Arc::new(sqlite)
    } else {
        let options = EtcdOptions {
            max_object_bytes: config.max_object_bytes,
            ..EtcdOptions::default()
        };
        let etcd = Etcd::connect(&config.etcd_servers, options).await?;
        etcd.current_revision().await?;
        Arc::new(etcd)
    };
    if !config.compaction_interval.is_zero() {
        compactor::spawn(&backend, config.compaction_interval);
    }
    Ok(Arc::new(WatchCache::new(
        backend,
        config.watch_cache.clone(),
    )))
}
