//! Shared informers (client-go `SharedIndexInformer` and `SharedInformerFactory`): one
//! LIST+WATCH per kind for every controller of a process, a [`Store`] that all of them
//! read, and any number of event handlers.
//!
//! A handler registered after the first LIST is first handed every stored object as
//! [`Delta::Added`], as client-go replays its store to a late handler; changes are
//! delivered to the handlers in the order the informer saw them, after the store has
//! taken them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Delta, Store, object_key, reflector};

/// What a handler is given: each change, after the store took it.
pub type Handler<K> = Box<dyn Fn(&Delta<K>) + Send + Sync>;

/// The bounds of a kind an informer can watch.
pub trait Watchable:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Watchable for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// One kind's informer, shared by every handler of the process.
pub struct SharedInformer<K> {
    api: Api<K>,
    config: watcher::Config,
    store: Arc<Store<K>>,
    handlers: RwLock<Vec<Handler<K>>>,
    synced: AtomicBool,
    synced_notify: tokio::sync::Notify,
    started: AtomicBool,
}

impl<K> Debug for SharedInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformer")
            .field("synced", &self.synced.load(Ordering::Acquire))
            .finish_non_exhaustive()
    }
}

impl<K: Watchable> SharedInformer<K> {
    /// An informer over `api` (LIST and WATCH with `config`), not yet running.
    pub fn new(api: Api<K>, config: watcher::Config) -> Arc<Self> {
        Arc::new(Self {
            api,
            config,
            store: Arc::new(Store::default()),
            handlers: RwLock::new(Vec::new()),
            synced: AtomicBool::new(false),
            synced_notify: tokio::sync::Notify::new(),
            started: AtomicBool::new(false),
        })
    }

    /// The objects, by [`object_key`] (the lister).
    pub fn store(&self) -> &Arc<Store<K>> {
        &self.store
    }

    /// Adds a handler; after the first LIST it is first handed every stored object as
    /// an add (client-go `AddEventHandler`).
    pub fn add_event_handler(&self, handler: Handler<K>) {
        let mut handlers = self
            .handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for obj in self.store.list() {
            handler(&Delta::Added(obj));
        }
        handlers.push(handler);
    }

    /// True once the first LIST reached the store and the handlers (client-go
    /// `HasSynced`).
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Resolves once [`has_synced`](Self::has_synced).
    pub async fn wait_for_sync(&self) {
        loop {
            let notified = self.synced_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_synced() {
                return;
            }
            notified.await;
        }
    }

    /// LISTs and WATCHes until `cancel`, feeding the store and the handlers. Runs once:
    /// a second call returns at once.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(&self);
        let synced = Arc::clone(&self);
        reflector::run(
            self.api.clone(),
            self.config.clone(),
            cancel,
            move |delta| this.deliver(&delta),
            move || {
                synced.synced.store(true, Ordering::Release);
                synced.synced_notify.notify_waiters();
            },
        )
        .await;
    }

    /// The store takes the change, then every handler sees it; the read lock keeps a
    /// handler being added from missing or repeating it.
    fn deliver(&self, delta: &Delta<K>) {
        let handlers = self.handlers.read().unwrap_or_else(PoisonError::into_inner);
        match delta {
            Delta::Added(obj) | Delta::Updated(_, obj) => {
                self.store.insert(object_key(obj.as_ref()), Arc::clone(obj));
            }
            Delta::Deleted(obj) => {
                self.store.remove(&object_key(obj.as_ref()));
            }
        }
        for h in handlers.iter() {
            h(delta);
        }
    }
}

type Starter =
    Box<dyn FnOnce(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

struct Entry {
    informer: Arc<dyn Any + Send + Sync>,
    /// Starts it; None once started.
    start: Option<Starter>,
    /// Resolves once it has synced.
    synced: Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>,
}

/// Makes one [`SharedInformer`] per kind, cluster-wide, for every component of a
/// process (client-go `SharedInformerFactory`).
pub struct SharedInformerFactory {
    client: kube::Client,
    informers: Mutex<HashMap<TypeId, Entry>>,
}

impl Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .finish_non_exhaustive()
    }
}

impl SharedInformerFactory {
    /// A factory whose informers watch through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            informers: Mutex::new(HashMap::new()),
        }
    }

    /// The informer of `K` across all namespaces, made on first use.
    pub fn informer<K: Watchable>(&self) -> Arc<SharedInformer<K>> {
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = informers
            .get(&TypeId::of::<K>())
            .and_then(|e| Arc::clone(&e.informer).downcast::<SharedInformer<K>>().ok())
        {
            return found;
        }
        let informer = SharedInformer::new(
            Api::<K>::all(self.client.clone()),
            watcher::Config::default().any_semantic(),
        );
        let run = Arc::clone(&informer);
        let wait = Arc::clone(&informer);
        informers.insert(
            TypeId::of::<K>(),
            Entry {
                informer: Arc::clone(&informer) as Arc<dyn Any + Send + Sync>,
                start: Some(Box::new(move |cancel| Box::pin(run.run(cancel)))),
                synced: Arc::new(move || {
                    let w = Arc::clone(&wait);
                    Box::pin(async move { w.wait_for_sync().await })
                }),
            },
        );
        informer
    }

    /// Starts the informers made so far that are not running yet (client-go `Start`);
    /// they stop at `cancel`.
    pub fn start(&self, cancel: &CancellationToken) {
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for entry in informers.values_mut() {
            if let Some(start) = entry.start.take() {
                tokio::spawn(start(cancel.clone()));
            }
        }
    }

    /// Resolves once every informer made so far has synced (client-go
    /// `WaitForCacheSync`).
    pub async fn wait_for_cache_sync(&self) {
        let waits: Vec<_> = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|e| (e.synced)())
            .collect();
        futures::future::join_all(waits).await;
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::extract::{RawQuery, State};
    use axum::routing::get;
    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;

    /// The watch events the test sends, taken by the first WATCH.
    type Events = Arc<Mutex<Option<mpsc::UnboundedReceiver<serde_json::Value>>>>;

    fn cm(name: &str, rv: &str, value: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
                            "managedFields": [{"manager": "kubectl"}]},
               "data": {"v": value}})
    }

    async fn configmaps(State(events): State<Events>, RawQuery(q): RawQuery) -> Body {
        if !q.unwrap_or_default().contains("watch=true") {
            let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
                              "metadata": {"resourceVersion": "1"}, "items": [cm("a", "1", "1")]});
            return Body::from(list.to_string());
        }
        let rx = events.lock().unwrap().take();
        match rx {
            Some(rx) => Body::from_stream(
                tokio_stream_from(rx).map(|e| Ok::<_, std::io::Error>(format!("{e}\n"))),
            ),
            None => Body::from_stream(futures::stream::pending::<Result<String, std::io::Error>>()),
        }
    }

    fn tokio_stream_from(
        mut rx: mpsc::UnboundedReceiver<serde_json::Value>,
    ) -> impl futures::Stream<Item = serde_json::Value> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    fn describe(d: &Delta<ConfigMap>) -> String {
        let v = |c: &ConfigMap| {
            c.data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default()
        };
        match d {
            Delta::Added(c) => format!("add {}={}", c.metadata.name.as_deref().unwrap_or(""), v(c)),
            Delta::Updated(o, n) => format!(
                "update {}={}->{}",
                n.metadata.name.as_deref().unwrap_or(""),
                v(o),
                v(n)
            ),
            Delta::Deleted(c) => format!("delete {}", c.metadata.name.as_deref().unwrap_or("")),
        }
    }

    #[tokio::test]
    async fn one_watch_feeds_the_store_and_every_handler() {
        let (tx, rx) = mpsc::unbounded_channel();
        let events: Events = Arc::new(Mutex::new(Some(rx)));
        let router = Router::new()
            .route("/api/v1/configmaps", get(configmaps))
            .with_state(events);
        let factory = SharedInformerFactory::new(kube::Client::new(router, "default"));
        let informer = factory.informer::<ConfigMap>();
        assert!(Arc::ptr_eq(&informer, &factory.informer::<ConfigMap>()));
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        informer.add_event_handler(Box::new(move |d| {
            let _ = seen_tx.send(describe(d));
        }));
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        factory.wait_for_cache_sync().await;
        assert!(informer.has_synced());
        assert_eq!(seen.recv().await.as_deref(), Some("add a=1"));
        let a = informer.store().get("ns/a").expect("listed");
        assert!(
            a.metadata.managed_fields.is_none(),
            "managedFields are dropped"
        );

        // A handler added after the LIST is handed the store first.
        let (late_tx, mut late) = mpsc::unbounded_channel();
        informer.add_event_handler(Box::new(move |d| {
            let _ = late_tx.send(describe(d));
        }));
        assert_eq!(late.recv().await.as_deref(), Some("add a=1"));

        for (ty, obj) in [
            ("ADDED", cm("b", "2", "1")),
            ("MODIFIED", cm("a", "3", "2")),
            ("DELETED", cm("b", "4", "1")),
        ] {
            tx.send(json!({"type": ty, "object": obj})).unwrap();
        }
        for expected in ["add b=1", "update a=1->2", "delete b"] {
            assert_eq!(seen.recv().await.as_deref(), Some(expected));
            assert_eq!(late.recv().await.as_deref(), Some(expected));
        }
        assert_eq!(informer.store().len(), 1);
        let a = informer.store().get("ns/a").expect("kept");
        assert_eq!(
            a.data.as_ref().and_then(|d| d.get("v")).map(String::as_str),
            Some("2")
        );
        cancel.cancel();
    }
}
