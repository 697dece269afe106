//! The etcd v3 backend (`--etcd-servers`), through `etcd-client`.
//!
//! Keys are stored as given (`/registry/...`) and revisions are etcd's, as the upstream
//! API server keeps them (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`):
//! create is a transaction on `create_revision == 0`, update and delete are transactions
//! on the expected `mod_revision`, list is a range read with a limit at a revision, watch
//! is an etcd watch from `after + 1` with the previous values, and idle watches ask etcd
//! for progress notes every interval (etcd's own progress notify defaults to 10 minutes).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, CompactionOptions, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions,
    KvClient, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchOptions, WatchResponse,
};
use futures::stream::BoxStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{
    CompactionRound, DEFAULT_MAX_OBJECT_BYTES, Event, EventType, KeyValue, ListResult, Result,
    Revision, Storage, StorageError, WatchItem, check_size, prefix_end,
};

/// The key whose version counts the compactions of all API servers on the cluster and
/// whose value is the last one's revision (upstream's `compact_rev_key`, outside
/// `/registry`).
const COMPACT_KEY: &str = "compact_rev_key";

/// etcd's message when a read or watch asks for a compacted revision.
const COMPACTED_MESSAGE: &str = "required revision has been compacted";
/// etcd's message when a request is over its `--max-request-bytes`.
const TOO_LARGE_MESSAGE: &str = "request is too large";

/// Items buffered between a watch's task and its consumer.
const WATCH_BUFFER: usize = 256;

/// Settings of the etcd backend.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// The largest value a write takes, in bytes ([`DEFAULT_MAX_OBJECT_BYTES`], etcd's own
    /// default request limit).
    pub max_object_bytes: usize,
    /// How long a watch stays silent before it asks etcd for a progress note (1 s).
    pub progress_interval: Duration,
    /// Time to connect to a server (5 s) and for a unary request (30 s).
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            progress_interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A [`Storage`] on an etcd v3 cluster.
pub struct Etcd {
    client: Client,
    kv: KvClient,
    options: EtcdOptions,
}

impl Etcd {
    /// A client of the etcd servers at `endpoints` (`http://127.0.0.1:2379`). Connections
    /// are made on first use, so this fails only on malformed endpoints.
    pub async fn connect(endpoints: &[String], options: EtcdOptions) -> Result<Etcd> {
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_timeout(options.request_timeout)
            .with_keep_alive(Duration::from_secs(30), Duration::from_secs(10));
        let client = Client::connect(endpoints, Some(connect))
            .await
            .map_err(unavailable)?;
        // Lists of many large objects exceed tonic's default 4 MiB.
        let kv = client.kv_client().max_decoding_message_size(usize::MAX);
        Ok(Etcd {
            client,
            kv,
            options,
        })
    }

    async fn txn(&self, txn: Txn, size: usize) -> Result<TxnResponse> {
        self.kv.clone().txn(txn).await.map_err(|e| {
            if e.to_string().contains(TOO_LARGE_MESSAGE) {
                StorageError::TooLarge {
                    size,
                    limit: self.options.max_object_bytes,
                }
            } else {
                unavailable(e)
            }
        })
    }
}

#[async_trait::async_trait]
impl Storage for Etcd {
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<KeyValue> {
        check_size(&value, self.options.max_object_bytes)?;
        let size = value.len();
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.clone(), None)]);
        let response = self.txn(txn, size).await?;
        if !response.succeeded() {
            return Err(StorageError::AlreadyExists(key.to_string()));
        }
        let revision = header_revision(response.header());
        Ok(KeyValue {
            key: key.to_string(),
            value,
            create_revision: revision,
            mod_revision: revision,
        })
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let response = self.kv.clone().get(key, None).await.map_err(unavailable)?;
        response.kvs().first().map(key_value).transpose()
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        revision: Option<Revision>,
    ) -> Result<ListResult> {
        let start = match start_after {
            Some(after) => format!("{after}\0"),
            None => prefix.to_string(),
        };
        let mut options = GetOptions::new().with_range(range_end(prefix));
        if limit > 0 {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        if let Some(revision) = revision {
            options = options.with_revision(revision);
        }
        let response = self
            .kv
            .clone()
            .get(start, Some(options))
            .await
            .map_err(|e| read_error(e, revision.unwrap_or_default()))?;
        let items = response
            .kvs()
            .iter()
            .map(key_value)
            .collect::<Result<Vec<_>>>()?;
        let remaining = response.count() - items.len() as i64;
        Ok(ListResult {
            items,
            revision: revision.unwrap_or_else(|| header_revision(response.header())),
            remaining: remaining.max(0),
        })
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<KeyValue> {
        check_size(&value, self.options.max_object_bytes)?;
        let size = value.len();
        let txn = Txn::new()
            .when([
                Compare::version(key, CompareOp::Greater, 0),
                Compare::mod_revision(key, CompareOp::Equal, expected),
            ])
            .and_then([TxnOp::put(
                key,
                value.clone(),
                Some(PutOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn(txn, size).await?;
        let prev = response.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Put(put) => put.prev_key().cloned(),
            TxnOpResponse::Get(get) => get.kvs().first().cloned(),
            _ => None,
        });
        if !response.succeeded() {
            return Err(refusal(key, Some(expected), prev.as_ref()));
        }
        let revision = header_revision(response.header());
        Ok(KeyValue {
            key: key.to_string(),
            value,
            create_revision: prev.map_or(revision, |prev| prev.create_revision()),
            mod_revision: revision,
        })
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        let mut compares = vec![Compare::version(key, CompareOp::Greater, 0)];
        if let Some(expected) = expected {
            compares.push(Compare::mod_revision(key, CompareOp::Equal, expected));
        }
        let txn = Txn::new()
            .when(compares)
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn(txn, 0).await?;
        let prev = response.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Delete(delete) => delete.prev_kvs().first().cloned(),
            TxnOpResponse::Get(get) => get.kvs().first().cloned(),
            _ => None,
        });
        if !response.succeeded() {
            return Err(refusal(key, expected, prev.as_ref()));
        }
        let prev = prev.ok_or_else(|| StorageError::NotFound(key.to_string()))?;
        Ok(KeyValue {
            mod_revision: header_revision(response.header()),
            ..key_value(&prev)?
        })
    }

    async fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> Result<BoxStream<'static, Result<WatchItem>>> {
        check_not_compacted(&self.kv, after).await?;
        let options = WatchOptions::new()
            .with_range(range_end(prefix))
            .with_start_revision(after + 1)
            .with_prev_key()
            .with_progress_notify();
        let (requests, responses) = self
            .client
            .watch_client()
            .max_decoding_message_size(usize::MAX)
            .watch(prefix, Some(options))
            .await
            .map_err(unavailable)?
            .split();
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let watch = Watch {
            requests,
            responses,
            after,
            tx,
        };
        tokio::spawn(watch.run(self.options.progress_interval));
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    async fn current_revision(&self) -> Result<Revision> {
        let options = GetOptions::new().with_count_only();
        let response = self
            .kv
            .clone()
            .get("/", Some(options))
            .await
            .map_err(unavailable)?;
        Ok(header_revision(response.header()))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let options = CompactionOptions::new().with_physical();
        match self.kv.clone().compact(revision, Some(options)).await {
            Ok(_) => Ok(()),
            // Already compacted to it or past it: nothing to do, as on SQLite.
            Err(e) if e.to_string().contains(COMPACTED_MESSAGE) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// A transaction on the version of [`COMPACT_KEY`] (upstream's `compact_rev_key`):
    /// when it is still `round.turns`, the key is written (its version becomes the next
    /// turn) and this server compacts; else the key's version tells whose turn it was.
    async fn compact_round(&self, round: CompactionRound) -> Result<CompactionRound> {
        let txn = Txn::new()
            .when([Compare::version(COMPACT_KEY, CompareOp::Equal, round.turns)])
            .and_then([TxnOp::put(COMPACT_KEY, round.revision.to_string(), None)])
            .or_else([TxnOp::get(COMPACT_KEY, None)]);
        let response = self.txn(txn, 0).await?;
        let revision = header_revision(response.header());
        if !response.succeeded() {
            let turns = response.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.version()),
                _ => None,
            });
            return Ok(CompactionRound {
                turns: turns.unwrap_or(0),
                revision,
            });
        }
        if round.revision > 0 {
            self.compact(round.revision).await?;
        }
        Ok(CompactionRound {
            turns: round.turns + 1,
            revision,
        })
    }
}

/// One etcd watch, forwarded to its consumer.
struct Watch {
    requests: etcd_client::WatchRequestSender,
    responses: etcd_client::WatchResponseStream,
    after: Revision,
    tx: mpsc::Sender<Result<WatchItem>>,
}

impl Watch {
    /// Forwards responses until the consumer goes away or the watch ends, asking for a
    /// progress note after each `progress_interval` in which nothing arrived.
    async fn run(mut self, progress_interval: Duration) {
        let mut ticks = tokio::time::interval(progress_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.reset();
        let mut received = false;
        loop {
            tokio::select! {
                biased;
                message = self.responses.message() => {
                    let items = match message {
                        Ok(Some(response)) => watch_items(response, self.after),
                        Ok(None) => vec![Err(StorageError::Unavailable(
                            "etcd closed the watch".into(),
                        ))],
                        Err(e) => vec![Err(unavailable(e))],
                    };
                    received = true;
                    for item in items {
                        let end = item.is_err();
                        if self.tx.send(item).await.is_err() || end {
                            return;
                        }
                    }
                }
                _ = ticks.tick() => {
                    if !std::mem::take(&mut received)
                        && self.requests.request_progress().await.is_err()
                    {
                        let error = StorageError::Unavailable("etcd watch stream closed".into());
                        let _ = self.tx.send(Err(error)).await;
                        return;
                    }
                }
                _ = self.tx.closed() => return,
            }
        }
    }
}

/// A watch response as items: its events, a progress note when it has none, or the
/// error that ends the watch.
fn watch_items(response: WatchResponse, after: Revision) -> Vec<Result<WatchItem>> {
    if response.canceled() {
        let error = match response.compact_revision() {
            0 => StorageError::Unavailable(format!(
                "etcd canceled the watch: {}",
                response.cancel_reason()
            )),
            compacted => StorageError::Compacted {
                requested: after,
                compacted,
            },
        };
        return vec![Err(error)];
    }
    if response.created() {
        return Vec::new();
    }
    if response.events().is_empty() {
        return vec![Ok(WatchItem::Progress(header_revision(response.header())))];
    }
    response
        .events()
        .iter()
        .map(|event| watch_event(event).map(|event| WatchItem::Event(Arc::new(event))))
        .collect()
}

/// An etcd event as a store event (a delete's kv carries the last value).
fn watch_event(event: &etcd_client::Event) -> Result<Event> {
    let kv = event
        .kv()
        .ok_or_else(|| StorageError::Unavailable("etcd sent an event without a key".into()))?;
    let prev = event.prev_kv().map(key_value).transpose()?;
    // A delete's kv has only the key and the delete's revision (version 0).
    if kv.version() == 0 {
        let key = key_value(kv)?;
        let kv = match &prev {
            Some(prev) => KeyValue {
                mod_revision: key.mod_revision,
                ..prev.clone()
            },
            None => key,
        };
        return Ok(Event::new(EventType::Deleted, kv, prev));
    }
    let kv = key_value(kv)?;
    let kind = if kv.create_revision == kv.mod_revision {
        EventType::Added
    } else {
        EventType::Modified
    };
    Ok(Event::new(kind, kv, prev))
}

/// Fails with [`StorageError::Compacted`] when reads at `after` are no longer possible
/// (etcd would cancel the watch right after creating it).
async fn check_not_compacted(kv: &KvClient, after: Revision) -> Result<()> {
    let options = GetOptions::new()
        .with_count_only()
        .with_revision(after.max(1));
    match kv.clone().get("/", Some(options)).await {
        Err(e) if e.to_string().contains(COMPACTED_MESSAGE) => Err(read_error(e, after)),
        // A future revision is fine for a watch, and other errors show on the watch.
        _ => Ok(()),
    }
}

/// Why a conditional write was refused, from the key's current value (`None`: absent).
fn refusal(
    key: &str,
    expected: Option<Revision>,
    current: Option<&etcd_client::KeyValue>,
) -> StorageError {
    match (current, expected) {
        (Some(current), Some(expected)) => StorageError::Conflict {
            key: key.to_string(),
            expected,
            current: current.mod_revision(),
        },
        _ => StorageError::NotFound(key.to_string()),
    }
}

/// The range end covering every key under `prefix` (`\0`: to the end of the key space).
fn range_end(prefix: &str) -> Vec<u8> {
    prefix_end(prefix).map_or_else(|| vec![0], String::into_bytes)
}

fn key_value(kv: &etcd_client::KeyValue) -> Result<KeyValue> {
    let key = kv
        .key_str()
        .map_err(|e| StorageError::Unavailable(format!("etcd key is not UTF-8: {e}")))?;
    Ok(KeyValue {
        key: key.to_string(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
    })
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Revision {
    header.map_or(0, |header| header.revision())
}

/// A read's error: [`StorageError::Compacted`] for a compacted `requested` revision (etcd
/// does not say which revision it kept; 0), else [`StorageError::Unavailable`].
fn read_error(e: etcd_client::Error, requested: Revision) -> StorageError {
    if e.to_string().contains(COMPACTED_MESSAGE) {
        StorageError::Compacted {
            requested,
            compacted: 0,
        }
    } else {
        unavailable(e)
    }
}

fn unavailable(e: etcd_client::Error) -> StorageError {
    StorageError::Unavailable(format!("etcd: {e}"))
}
