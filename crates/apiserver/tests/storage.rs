//! The storage conformance suite: every case runs against SQLite and a real etcd
//! (Debian's etcd-server, one private instance per test), each directly and behind the
//! watch cache: `<case>::sqlite`, `<case>::etcd`, `<case>::sqlite_cached`,
//! `<case>::etcd_cached`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use skiff_apiserver::storage::etcd::{Etcd, EtcdOptions};
use skiff_apiserver::storage::sqlite::{Sqlite, SqliteOptions};
use skiff_apiserver::storage::watch_cache::{WatchCache, WatchCacheOptions};
use skiff_apiserver::storage::{
    CompactionRound, DEFAULT_MAX_OBJECT_BYTES, Event, EventType, KeyValue, Result, Storage,
    StorageError, WatchItem,
};
use tempfile::TempDir;

/// How long a test waits for a watch item.
const WAIT: Duration = Duration::from_secs(10);

/// A store under test and what keeps it alive (its directory or etcd process).
struct Store {
    storage: Arc<dyn Storage>,
    _sqlite_dir: Option<TempDir>,
    _etcd: Option<skiff_testkit::Etcd>,
}

impl Store {
    fn sqlite() -> Store {
        let dir = tempfile::tempdir().expect("temp dir");
        let sqlite = Sqlite::open(&dir.path().join("state.db"), SqliteOptions::default())
            .expect("open SQLite");
        Store {
            storage: Arc::new(sqlite),
            _sqlite_dir: Some(dir),
            _etcd: None,
        }
    }

    async fn etcd() -> Store {
        let etcd = tokio::task::spawn_blocking(skiff_testkit::Etcd::start)
            .await
            .expect("etcd start task")
            .expect("start etcd");
        let client = Etcd::connect(&[etcd.endpoint().to_string()], EtcdOptions::default())
            .await
            .expect("connect to etcd");
        Store {
            storage: Arc::new(client),
            _sqlite_dir: None,
            _etcd: Some(etcd),
        }
    }

    fn cached(mut self) -> Store {
        let options = WatchCacheOptions {
            progress_interval: Duration::from_millis(500),
            ..WatchCacheOptions::default()
        };
        self.storage = Arc::new(WatchCache::new(self.storage, options));
        self
    }
}

/// Generates, for each case `fn case(storage: &dyn Storage)`, a module with one test per
/// backend.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let store = super::Store::sqlite();
                super::$case(&*store.storage).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                let store = super::Store::etcd().await;
                super::$case(&*store.storage).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_cached() {
                let store = super::Store::sqlite().cached();
                super::$case(&*store.storage).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd_cached() {
                let store = super::Store::etcd().await.cached();
                super::$case(&*store.storage).await;
            }
        }
    )*};
}

conformance!(
    create_and_get,
    list_in_key_order,
    list_pages_at_a_revision,
    update_checks_the_revision,
    delete_checks_the_revision,
    watch_replays_from_a_revision,
    watch_follows_live_writes,
    watch_sends_progress_when_idle,
    compaction_refuses_older_revisions,
    size_limit,
);

const PODS: &str = "/registry/pods/";

fn pod(namespace: &str, name: &str) -> String {
    format!("{PODS}{namespace}/{name}")
}

async fn create_and_get(s: &dyn Storage) {
    let before = s.current_revision().await.unwrap();
    let key = pod("default", "a");
    let created = s.create(&key, b"{\"v\":1}".to_vec()).await.unwrap();
    assert_eq!(created.key, key);
    assert_eq!(created.value, b"{\"v\":1}");
    assert!(created.mod_revision > before);
    assert_eq!(created.create_revision, created.mod_revision);
    assert_eq!(s.current_revision().await.unwrap(), created.mod_revision);

    assert_eq!(s.get(&key).await.unwrap(), Some(created.clone()));
    assert_eq!(s.get(&pod("default", "b")).await.unwrap(), None);
    // A key that only shares a prefix is another key.
    assert_eq!(s.get(&pod("default", "")).await.unwrap(), None);

    let again = s.create(&key, b"{\"v\":2}".to_vec()).await;
    assert_eq!(again, Err(StorageError::AlreadyExists(key.clone())));
    assert_eq!(s.get(&key).await.unwrap(), Some(created.clone()));
    assert_eq!(s.current_revision().await.unwrap(), created.mod_revision);
}

async fn list_in_key_order(s: &dyn Storage) {
    for name in ["c", "a", "b"] {
        s.create(&pod("ns1", name), name.into()).await.unwrap();
    }
    s.create(&pod("ns2", "a"), b"x".to_vec()).await.unwrap();
    // Neighbours that must not show: a longer resource name, and a key equal to the
    // prefix without its slash.
    s.create("/registry/podsx/ns1/a", b"x".to_vec())
        .await
        .unwrap();
    s.create("/registry/pods", b"x".to_vec()).await.unwrap();

    let all = s.list(PODS, None, 0, None).await.unwrap();
    assert_eq!(
        keys(&all.items),
        [
            pod("ns1", "a"),
            pod("ns1", "b"),
            pod("ns1", "c"),
            pod("ns2", "a")
        ]
    );
    assert_eq!(all.remaining, 0);
    assert_eq!(all.revision, s.current_revision().await.unwrap());
    assert_eq!(all.items[0].value, b"a");

    let ns1 = s.list(&format!("{PODS}ns1/"), None, 0, None).await.unwrap();
    assert_eq!(keys(&ns1.items).len(), 3);
    let none = s.list(&format!("{PODS}ns3/"), None, 0, None).await.unwrap();
    assert!(none.items.is_empty());
}

async fn list_pages_at_a_revision(s: &dyn Storage) {
    for i in 0..5 {
        s.create(&pod("ns", &format!("p{i}")), vec![b'0' + i])
            .await
            .unwrap();
    }
    let first = s.list(PODS, None, 2, None).await.unwrap();
    assert_eq!(keys(&first.items), [pod("ns", "p0"), pod("ns", "p1")]);
    assert_eq!(first.remaining, 3);
    let at = first.revision;

    // Changes after the first page must not show in the following pages at its revision.
    let p2 = s.get(&pod("ns", "p2")).await.unwrap().unwrap();
    s.update(&p2.key, b"changed".to_vec(), p2.mod_revision)
        .await
        .unwrap();
    s.delete(&pod("ns", "p3"), None).await.unwrap();
    s.create(&pod("ns", "p25"), b"new".to_vec()).await.unwrap();

    let second = s
        .list(PODS, Some(&first.items[1].key), 2, Some(at))
        .await
        .unwrap();
    assert_eq!(keys(&second.items), [pod("ns", "p2"), pod("ns", "p3")]);
    assert_eq!(second.items[0], p2);
    assert_eq!(second.revision, at);
    assert_eq!(second.remaining, 1);
    let third = s
        .list(PODS, Some(&second.items[1].key), 2, Some(at))
        .await
        .unwrap();
    assert_eq!(keys(&third.items), [pod("ns", "p4")]);
    assert_eq!(third.remaining, 0);

    // Now: p25 added, p2 changed, p3 gone.
    let now = s.list(PODS, Some(&pod("ns", "p1")), 0, None).await.unwrap();
    assert_eq!(
        keys(&now.items),
        [pod("ns", "p2"), pod("ns", "p25"), pod("ns", "p4")]
    );
    assert_eq!(now.items[0].value, b"changed");
    let future = s.list(PODS, None, 0, Some(now.revision + 100)).await;
    assert!(future.is_err(), "a future revision: {future:?}");
}

async fn update_checks_the_revision(s: &dyn Storage) {
    let key = pod("ns", "u");
    let created = s.create(&key, b"1".to_vec()).await.unwrap();
    let updated = s
        .update(&key, b"2".to_vec(), created.mod_revision)
        .await
        .unwrap();
    assert_eq!(updated.value, b"2");
    assert_eq!(updated.create_revision, created.mod_revision);
    assert!(updated.mod_revision > created.mod_revision);
    assert_eq!(s.get(&key).await.unwrap(), Some(updated.clone()));

    let stale = s.update(&key, b"3".to_vec(), created.mod_revision).await;
    assert_eq!(
        stale,
        Err(StorageError::Conflict {
            key: key.clone(),
            expected: created.mod_revision,
            current: updated.mod_revision,
        })
    );
    assert_eq!(s.get(&key).await.unwrap(), Some(updated));

    let missing = pod("ns", "missing");
    assert_eq!(
        s.update(&missing, b"1".to_vec(), 0).await,
        Err(StorageError::NotFound(missing.clone()))
    );
    assert_eq!(s.get(&missing).await.unwrap(), None);
}

async fn delete_checks_the_revision(s: &dyn Storage) {
    let key = pod("ns", "d");
    let created = s.create(&key, b"last".to_vec()).await.unwrap();
    assert!(matches!(
        s.delete(&key, Some(created.mod_revision - 1)).await,
        Err(StorageError::Conflict { current, .. }) if current == created.mod_revision
    ));
    let deleted = s.delete(&key, Some(created.mod_revision)).await.unwrap();
    assert_eq!(deleted.value, b"last");
    assert_eq!(deleted.create_revision, created.create_revision);
    assert!(deleted.mod_revision > created.mod_revision);
    assert_eq!(s.current_revision().await.unwrap(), deleted.mod_revision);
    assert_eq!(s.get(&key).await.unwrap(), None);
    assert_eq!(
        s.delete(&key, None).await,
        Err(StorageError::NotFound(key.clone()))
    );

    // Deleted keys can be created again, with a new create revision.
    let again = s.create(&key, b"again".to_vec()).await.unwrap();
    assert!(again.create_revision > deleted.mod_revision);
    let gone = s.delete(&key, None).await.unwrap();
    assert_eq!(gone.value, b"again");
}

async fn watch_replays_from_a_revision(s: &dyn Storage) {
    let key = pod("ns", "w");
    let created = s.create(&key, b"1".to_vec()).await.unwrap();
    let updated = s
        .update(&key, b"2".to_vec(), created.mod_revision)
        .await
        .unwrap();
    s.create(&pod("other", "x"), b"x".to_vec()).await.unwrap();
    s.create("/registry/services/ns/w", b"s".to_vec())
        .await
        .unwrap();
    let deleted = s.delete(&key, None).await.unwrap();

    let mut all = s.watch(PODS, created.mod_revision - 1).await.unwrap();
    let added = next_event(&mut all).await;
    assert_eq!(added.kind, EventType::Added);
    assert_eq!(added.kv, created);
    assert_eq!(added.prev, None);
    let modified = next_event(&mut all).await;
    assert_eq!(modified.kind, EventType::Modified);
    assert_eq!(modified.kv, updated);
    assert_eq!(modified.prev, Some(created.clone()));
    assert_eq!(next_event(&mut all).await.kv.key, pod("other", "x"));
    let removed = next_event(&mut all).await;
    assert_eq!(removed.kind, EventType::Deleted);
    assert_eq!(removed.kv, deleted);
    assert_eq!(removed.prev, Some(updated.clone()));

    // A narrower prefix, after the update: only the delete.
    let mut ns = s
        .watch(&format!("{PODS}ns/"), updated.mod_revision)
        .await
        .unwrap();
    assert_eq!(next_event(&mut ns).await, removed);
}

async fn watch_follows_live_writes(s: &dyn Storage) {
    let start = s.current_revision().await.unwrap();
    let mut stream = s.watch(PODS, start).await.unwrap();
    let mut written = Vec::new();
    for i in 0..20 {
        written.push(
            s.create(&pod("ns", &format!("l{i:02}")), vec![i])
                .await
                .unwrap(),
        );
        s.create(&format!("/registry/secrets/ns/l{i}"), vec![i])
            .await
            .unwrap();
    }
    // A second watcher of the same resource, started half-way through the writes.
    let mut late = s.watch(PODS, written[9].mod_revision).await.unwrap();
    for kv in &written {
        let event = next_event(&mut stream).await;
        assert_eq!((event.kind, &event.kv), (EventType::Added, kv));
    }
    for kv in &written[10..] {
        assert_eq!(&next_event(&mut late).await.kv, kv);
    }
}

async fn watch_sends_progress_when_idle(s: &dyn Storage) {
    let created = s.create(&pod("ns", "p"), b"1".to_vec()).await.unwrap();
    // Writes elsewhere move the revision without events for this watch.
    let other = s
        .create("/registry/configmaps/ns/c", b"c".to_vec())
        .await
        .unwrap();
    let mut stream = s.watch(PODS, created.mod_revision).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match next_item(&mut stream, deadline).await {
            WatchItem::Progress(revision) if revision >= other.mod_revision => break,
            WatchItem::Progress(revision) => assert!(revision >= created.mod_revision),
            WatchItem::Event(event) => panic!("unexpected event {event:?}"),
        }
    }
}

async fn compaction_refuses_older_revisions(s: &dyn Storage) {
    let kept = s.create(&pod("ns", "kept"), b"k".to_vec()).await.unwrap();
    let changed = s
        .create(&pod("ns", "changed"), b"1".to_vec())
        .await
        .unwrap();
    let old = s.current_revision().await.unwrap();
    let changed = s
        .update(&changed.key, b"2".to_vec(), changed.mod_revision)
        .await
        .unwrap();
    let gone = s.create(&pod("ns", "gone"), b"g".to_vec()).await.unwrap();
    s.delete(&gone.key, None).await.unwrap();
    let at = s
        .create(&pod("ns", "z"), b"z".to_vec())
        .await
        .unwrap()
        .mod_revision;
    let after = s
        .update(&changed.key, b"3".to_vec(), changed.mod_revision)
        .await
        .unwrap();

    s.compact(at).await.unwrap();
    // Compacting again, or to an older revision, is no error.
    s.compact(at).await.unwrap();
    s.compact(old).await.unwrap();

    assert!(matches!(
        s.list(PODS, None, 0, Some(old)).await,
        Err(StorageError::Compacted { requested, .. }) if requested == old
    ));
    // Reads at the compacted revision still see every key live then.
    let then = s.list(PODS, None, 0, Some(at)).await.unwrap();
    assert_eq!(
        keys(&then.items),
        [pod("ns", "changed"), pod("ns", "kept"), pod("ns", "z")]
    );
    assert_eq!(then.items[0], changed);
    assert_eq!(then.items[1], kept);
    assert_eq!(s.get(&kept.key).await.unwrap(), Some(kept));

    match s.watch(PODS, old).await {
        Err(StorageError::Compacted { requested, .. }) => assert_eq!(requested, old),
        Err(e) => panic!("watch from a compacted revision: {e}"),
        Ok(mut stream) => match tokio::time::timeout(WAIT, stream.next()).await {
            Ok(Some(Err(StorageError::Compacted { .. }))) => {}
            other => panic!("watch from a compacted revision gave {other:?}"),
        },
    }
    let mut stream = s.watch(PODS, at).await.unwrap();
    assert_eq!(next_event(&mut stream).await.kv, after);
}

async fn size_limit(s: &dyn Storage) {
    let key = pod("ns", "big");
    let big = vec![b'x'; DEFAULT_MAX_OBJECT_BYTES + 1];
    assert_eq!(
        s.create(&key, big.clone()).await,
        Err(StorageError::TooLarge {
            size: DEFAULT_MAX_OBJECT_BYTES + 1,
            limit: DEFAULT_MAX_OBJECT_BYTES
        })
    );
    assert_eq!(s.get(&key).await.unwrap(), None);
    let fits = s.create(&key, vec![b'x'; 1024 * 1024]).await.unwrap();
    assert!(matches!(
        s.update(&key, big, fits.mod_revision).await,
        Err(StorageError::TooLarge { .. })
    ));
    assert_eq!(s.get(&key).await.unwrap(), Some(fits));
}

/// Every acknowledged write is in the file when it is opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_acknowledged_writes_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut acknowledged = Vec::new();
    {
        let s = Sqlite::open(&path, SqliteOptions::default()).unwrap();
        for i in 0..50 {
            acknowledged.push(
                s.create(&pod("ns", &format!("k{i:02}")), vec![i])
                    .await
                    .unwrap(),
            );
        }
        let last = acknowledged.pop().unwrap();
        s.delete(&last.key, None).await.unwrap();
    }
    let s = Sqlite::open(&path, SqliteOptions::default()).unwrap();
    let listed = s.list(PODS, None, 0, None).await.unwrap();
    assert_eq!(listed.items, acknowledged);
    // Revisions continue after the last one written (the delete).
    let next = s.create(&pod("ns", "next"), vec![]).await.unwrap();
    assert_eq!(next.mod_revision, listed.revision + 1);
    assert_eq!(listed.revision, 51);
}

/// Sequential creates and gets per second on each backend (a quick figure; the bench
/// binary measures the rest): `cargo test -p skiff-apiserver --test storage -- --ignored
/// --nocapture throughput`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn throughput() {
    const N: usize = 2000;
    for (name, store) in [("sqlite", Store::sqlite()), ("etcd", Store::etcd().await)] {
        let s = &*store.storage;
        let value = vec![b'x'; 1024];
        let started = std::time::Instant::now();
        for i in 0..N {
            s.create(&pod("bench", &format!("p{i:05}")), value.clone())
                .await
                .unwrap();
        }
        let creates = N as f64 / started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        for i in 0..N {
            s.get(&pod("bench", &format!("p{i:05}")))
                .await
                .unwrap()
                .unwrap();
        }
        let gets = N as f64 / started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        let listed = s.list(PODS, None, 0, None).await.unwrap();
        assert_eq!(listed.items.len(), N);
        let list = started.elapsed();
        println!(
            "{name}: {creates:.0} creates/s, {gets:.0} gets/s, LIST of {N} (1 KiB each) in {list:?}"
        );
    }
}

fn keys(items: &[KeyValue]) -> Vec<String> {
    items.iter().map(|kv| kv.key.clone()).collect()
}

/// The next event, skipping progress notes; fails after [`WAIT`].
async fn next_event(stream: &mut BoxStream<'static, Result<WatchItem>>) -> Event {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let WatchItem::Event(event) = next_item(stream, deadline).await {
            return std::sync::Arc::unwrap_or_clone(event);
        }
    }
}

async fn next_item(
    stream: &mut BoxStream<'static, Result<WatchItem>>,
    deadline: tokio::time::Instant,
) -> WatchItem {
    match tokio::time::timeout_at(deadline, stream.next()).await {
        Ok(Some(Ok(item))) => item,
        Ok(Some(Err(e))) => panic!("watch failed: {e}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch item within {WAIT:?}"),
    }
}

/// Two API servers on one etcd share the compaction (upstream's `compact_rev_key`): in each
/// round one of them compacts, the other only learns that it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_servers_on_one_etcd_take_turns_compacting() {
    let store = Store::etcd().await;
    let a = &store.storage;
    let endpoint = store._etcd.as_ref().expect("etcd").endpoint().to_string();
    let b = Etcd::connect(&[endpoint], EtcdOptions::default())
        .await
        .expect("second client");
    // Round 1: A takes the turn (nothing to compact yet); B's round learns it.
    let a_round = a.compact_round(CompactionRound::default()).await.unwrap();
    assert_eq!(a_round.turns, 1);
    let b_round = b.compact_round(CompactionRound::default()).await.unwrap();
    assert_eq!(b_round.turns, 1);

    let first = a.create(&pod("ns", "x"), b"1".to_vec()).await.unwrap();
    let second = a
        .update(&first.key, b"2".to_vec(), first.mod_revision)
        .await
        .unwrap();
    // Round 2: B goes first and compacts to what it saw in round 1; A, a moment later
    // with the same turn and a later revision, must not compact too.
    let b_next = b.compact_round(b_round).await.unwrap();
    assert_eq!(b_next.turns, 2);
    let a_view = CompactionRound {
        revision: second.mod_revision,
        ..a_round
    };
    let a_next = a.compact_round(a_view).await.unwrap();
    assert_eq!(a_next.turns, 2);
    let at_first = a.list(PODS, None, 0, Some(first.mod_revision)).await;
    assert!(at_first.is_ok(), "A compacted in B's round: {at_first:?}");
    assert!(matches!(
        a.list(PODS, None, 0, Some(b_round.revision - 1)).await,
        Err(StorageError::Compacted { .. })
    ));

    // Round 3: A's turn, to the revision it saw in round 2.
    let a_last = a.compact_round(a_next).await.unwrap();
    assert_eq!(a_last.turns, 3);
    assert!(matches!(
        a.list(PODS, None, 0, Some(first.mod_revision)).await,
        Err(StorageError::Compacted { .. })
    ));
}
