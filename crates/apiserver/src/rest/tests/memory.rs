//! A small in-memory [`Storage`] for the REST layer's tests: every write kept as an event,
//! lists at old revisions replayed from them, watches from history then live.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::broadcast;

use crate::storage::{
    Event, EventType, KeyValue, ListResult, Result, Revision, Storage, StorageError, WatchItem,
};

#[derive(Default)]
struct Inner {
    revision: Revision,
    compacted: Revision,
    keys: BTreeMap<String, KeyValue>,
    history: Vec<Event>,
}

pub struct Memory {
    inner: Mutex<Inner>,
    live: broadcast::Sender<Event>,
}

impl Memory {
    pub fn new() -> Self {
        Memory {
            inner: Mutex::new(Inner::default()),
            live: broadcast::channel(1024).0,
        }
    }

    fn write(
        &self,
        inner: &mut Inner,
        kind: EventType,
        key: &str,
        value: Option<Vec<u8>>,
    ) -> KeyValue {
        inner.revision += 1;
        let prev = inner.keys.get(key).cloned();
        let kv = KeyValue {
            key: key.to_owned(),
            value: value
                .clone()
                .unwrap_or_else(|| prev.as_ref().map(|p| p.value.clone()).unwrap_or_default()),
            create_revision: prev.as_ref().map_or(inner.revision, |p| p.create_revision),
            mod_revision: inner.revision,
        };
        if kind == EventType::Deleted {
            inner.keys.remove(key);
        } else {
            inner.keys.insert(key.to_owned(), kv.clone());
        }
        let event = Event::new(kind, kv.clone(), prev);
        inner.history.push(event.clone());
        let _ = self.live.send(event);
        kv
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl Storage for Memory {
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<KeyValue> {
        let mut inner = self.lock();
        if inner.keys.contains_key(key) {
            return Err(StorageError::AlreadyExists(key.to_owned()));
        }
        Ok(self.write(&mut inner, EventType::Added, key, Some(value)))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(self.lock().keys.get(key).cloned())
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        revision: Option<Revision>,
    ) -> Result<ListResult> {
        let inner = self.lock();
        let at = revision.unwrap_or(inner.revision);
        if at < inner.compacted {
            return Err(StorageError::Compacted {
                requested: at,
                compacted: inner.compacted,
            });
        }
        let mut keys: BTreeMap<String, KeyValue> = BTreeMap::new();
        for event in inner.history.iter().take_while(|e| e.kv.mod_revision <= at) {
            if event.kind == EventType::Deleted {
                keys.remove(&event.kv.key);
            } else {
                keys.insert(event.kv.key.clone(), event.kv.clone());
            }
        }
        let matching: Vec<KeyValue> = keys
            .into_values()
            .filter(|kv| {
                kv.key.starts_with(prefix) && start_after.is_none_or(|s| kv.key.as_str() > s)
            })
            .collect();
        let take = if limit == 0 {
            matching.len()
        } else {
            limit.min(matching.len())
        };
        Ok(ListResult {
            remaining: (matching.len() - take) as i64,
            items: matching.into_iter().take(take).collect(),
            revision: at,
        })
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<KeyValue> {
        let mut inner = self.lock();
        let current = inner
            .keys
            .get(key)
            .ok_or_else(|| StorageError::NotFound(key.to_owned()))?
            .mod_revision;
        if current != expected {
            return Err(StorageError::Conflict {
                key: key.to_owned(),
                expected,
                current,
            });
        }
        Ok(self.write(&mut inner, EventType::Modified, key, Some(value)))
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        let mut inner = self.lock();
        let current = inner
            .keys
            .get(key)
            .ok_or_else(|| StorageError::NotFound(key.to_owned()))?
            .mod_revision;
        if let Some(expected) = expected.filter(|e| *e != current) {
            return Err(StorageError::Conflict {
                key: key.to_owned(),
                expected,
                current,
            });
        }
        Ok(self.write(&mut inner, EventType::Deleted, key, None))
    }

    async fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<BoxStream<'static, Result<WatchItem>>> {
        let inner = self.lock();
        if after < inner.compacted {
            return Err(StorageError::Compacted {
                requested: after,
                compacted: inner.compacted,
            });
        }
        let past: Vec<Result<WatchItem>> = inner
            .history
            .iter()
            .filter(|e| e.kv.mod_revision > after && e.kv.key.starts_with(prefix))
            .map(|e| Ok(WatchItem::Event(Arc::new(e.clone()))))
            .collect();
        let receiver = self.live.subscribe();
        let prefix = prefix.to_owned();
        let live = futures::stream::unfold(receiver, |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok(event) => return Some((event, receiver)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .filter(move |e| std::future::ready(e.kv.key.starts_with(&prefix)))
        .map(|e| Ok(WatchItem::Event(Arc::new(e))));
        let current = inner.revision;
        let progress = futures::stream::iter([Ok(WatchItem::Progress(current))]);
        Ok(futures::stream::iter(past)
            .chain(progress)
            .chain(live)
            .boxed())
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.lock().revision)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.lock().compacted = revision;
        Ok(())
    }
}
