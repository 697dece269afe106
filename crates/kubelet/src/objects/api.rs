//! [`ObjectSource`] on a `kube::Client` (upstream `NewWatchingConfigMapManager`,
//! `NewWatchingSecretManager` and the kubelet's Service informer).
//!
//! ConfigMaps and Secrets: the first lookup of an object starts a watch of that one object
//! (`metadata.name=<name>` in its namespace) and waits up to one second for its first
//! list, as upstream's `watchBasedManager`; later lookups read the cache, which the watch
//! keeps current. A watch stops after [`MAX_IDLE_TIME`] without lookups (pods re-read
//! their objects on every sync) and once it has seen an immutable object. Services: one
//! watch of every Service, started with the kubelet. Claims, volumes and tokens are plain
//! API calls.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use kube::api::PostParams;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::runtime::{Handle, RuntimeFlavor};
use tracing::{debug, warn};

use super::{ObjectError, ObjectSource};

/// How long a lookup waits for a new watch's first list (upstream: one second).
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);
/// A watch without lookups for this long stops (5 × the default sync frequency).
pub const MAX_IDLE_TIME: Duration = Duration::from_secs(5 * 60);
/// Longest wait for one API call (TokenRequest, PVC, PV).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The cached state of one watched object.
struct ItemState<K> {
    /// The watch completed its first list.
    synced: bool,
    /// The object, `None` when it does not exist.
    object: Option<Arc<K>>,
    /// Last lookup.
    last_access: Instant,
    /// The last error of the watch, reported while not synced.
    error: Option<String>,
}

struct CacheItem<K> {
    state: Mutex<ItemState<K>>,
    changed: Condvar,
}

/// Objects that may be immutable (ConfigMaps and Secrets).
trait MaybeImmutable {
    fn immutable(&self) -> bool;
}

impl MaybeImmutable for ConfigMap {
    fn immutable(&self) -> bool {
        self.immutable == Some(true)
    }
}

impl MaybeImmutable for Secret {
    fn immutable(&self) -> bool {
        self.immutable == Some(true)
    }
}

type Key = (String, String);

/// A watch-based cache of single objects of kind `K` (upstream `objectCache`).
struct WatchCache<K> {
    client: kube::Client,
    /// Singular resource name for messages (`configmap`, `secret`).
    resource: &'static str,
    items: Mutex<HashMap<Key, Arc<CacheItem<K>>>>,
}

impl<K> WatchCache<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + MaybeImmutable
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn new(client: kube::Client, resource: &'static str) -> Arc<Self> {
        Arc::new(Self {
            client,
            resource,
            items: Mutex::new(HashMap::new()),
        })
    }

    /// The object, starting its watch on first use and waiting for its first list.
    fn get(
        self: &Arc<Self>,
        handle: &Handle,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<K>, ObjectError> {
        let key = (namespace.to_owned(), name.to_owned());
        let item = {
            let mut items = lock(&self.items);
            match items.get(&key) {
                Some(item) => item.clone(),
                None => {
                    let item = Arc::new(CacheItem {
                        state: Mutex::new(ItemState {
                            synced: false,
                            object: None,
                            last_access: Instant::now(),
                            error: None,
                        }),
                        changed: Condvar::new(),
                    });
                    items.insert(key.clone(), item.clone());
                    handle.spawn(self.clone().watch(key.clone(), item.clone()));
                    item
                }
            }
        };
        let wait = || {
            let state = lock(&item.state);
            let (mut state, _) = item
                .changed
                .wait_timeout_while(state, SYNC_TIMEOUT, |s| !s.synced)
                .unwrap_or_else(PoisonError::into_inner);
            state.last_access = Instant::now();
            if !state.synced {
                let detail = state
                    .error
                    .clone()
                    .unwrap_or_else(|| "timed out waiting for the condition".to_owned());
                return Err(ObjectError::Other(format!(
                    "failed to sync {} cache: {detail}",
                    self.resource
                )));
            }
            state.object.clone().ok_or_else(|| ObjectError::NotFound {
                resource: self.resource,
                name: name.to_owned(),
            })
        };
        if lock(&item.state).synced {
            return wait();
        }
        blocking(wait)
    }

    /// Watches one object until it is idle for [`MAX_IDLE_TIME`] or seen immutable.
    async fn watch(self: Arc<Self>, key: Key, item: Arc<CacheItem<K>>) {
        let api: Api<K> = Api::namespaced(self.client.clone(), &key.0);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", key.1));
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        let mut listing: Option<Option<K>> = None;
        let mut idle_check = tokio::time::interval(Duration::from_secs(30));
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                _ = idle_check.tick() => {
                    if lock(&item.state).last_access.elapsed() > MAX_IDLE_TIME {
                        break;
                    }
                    continue;
                }
            };
            let Some(event) = event else { break };
            let update = match event {
                Ok(Event::Init) => {
                    listing = Some(None);
                    None
                }
                Ok(Event::InitApply(object)) => {
                    listing = Some(Some(object));
                    None
                }
                Ok(Event::InitDone) => Some(listing.take().flatten()),
                Ok(Event::Apply(object)) => Some(Some(object)),
                Ok(Event::Delete(_)) => Some(None),
                Err(e) => {
                    debug!(resource = self.resource, namespace = %key.0, name = %key.1, error = %e, "watch failed");
                    lock(&item.state).error = Some(e.to_string());
                    None
                }
            };
            if let Some(object) = update {
                let immutable = object.as_ref().is_some_and(MaybeImmutable::immutable);
                {
                    let mut state = lock(&item.state);
                    state.synced = true;
                    state.error = None;
                    state.object = object.map(Arc::new);
                }
                item.changed.notify_all();
                if immutable {
                    // Upstream stops watching immutable objects: the cache keeps them.
                    return;
                }
            }
        }
        lock(&self.items).remove(&key);
    }
}

/// Runs `f`, which may block, without stalling the async runtime: on a multi-thread
/// runtime through `block_in_place`; on a current-thread runtime it cannot wait for the
/// watches and runs as is (they make no progress meanwhile).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Every Service of the cluster, from one watch.
#[derive(Default)]
struct ServiceStore {
    synced: bool,
    services: HashMap<Key, Arc<Service>>,
}

fn object_key<K: Resource>(object: &K) -> Key {
    (
        object.meta().namespace.clone().unwrap_or_default(),
        object.meta().name.clone().unwrap_or_default(),
    )
}

/// [`ObjectSource`] backed by the API server.
pub struct ApiObjects {
    client: kube::Client,
    handle: Handle,
    config_maps: Arc<WatchCache<ConfigMap>>,
    secrets: Arc<WatchCache<Secret>>,
    services: Arc<Mutex<ServiceStore>>,
}

impl ApiObjects {
    /// A source reading through `client`, and the Service watch to run for as long as
    /// the kubelet runs. Must be called within a tokio runtime (the watches of ConfigMaps
    /// and Secrets are spawned on it).
    pub fn new(client: kube::Client) -> (Arc<Self>, impl Future<Output = ()> + Send + 'static) {
        let services = Arc::new(Mutex::new(ServiceStore::default()));
        let objects = Arc::new(Self {
            config_maps: WatchCache::new(client.clone(), "configmap"),
            secrets: WatchCache::new(client.clone(), "secret"),
            handle: Handle::current(),
            services: services.clone(),
            client: client.clone(),
        });
        (objects, watch_services(client, services))
    }

    /// Runs `call` on the runtime with [`CALL_TIMEOUT`], from synchronous code.
    fn call<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, kube::Error>> + Send,
    ) -> Result<T, kube::Error>
    where
        T: Send,
    {
        let run = || {
            self.handle.block_on(async {
                tokio::time::timeout(CALL_TIMEOUT, call)
                    .await
                    .unwrap_or_else(|_| {
                        Err(kube::Error::Service(
                            format!("{what}: timed out after {CALL_TIMEOUT:?}").into(),
                        ))
                    })
            })
        };
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::CurrentThread => {
                Err(kube::Error::Service(
                    format!("{what}: cannot call the API server from a current-thread runtime")
                        .into(),
                ))
            }
            Ok(_) => tokio::task::block_in_place(run),
            Err(_) => run(),
        }
    }
}

/// The NotFound of `resource`/`name` for a 404, else the API error's message.
fn api_error(e: kube::Error, resource: &'static str, name: &str) -> ObjectError {
    match e {
        kube::Error::Api(status) if status.code == 404 => ObjectError::NotFound {
            resource,
            name: name.to_owned(),
        },
        kube::Error::Api(status) => ObjectError::Other(status.message),
        other => ObjectError::Other(other.to_string()),
    }
}

async fn watch_services(client: kube::Client, store: Arc<Mutex<ServiceStore>>) {
    let api: Api<Service> = Api::all(client);
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listing: Option<HashMap<Key, Arc<Service>>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing = Some(HashMap::new()),
            Ok(Event::InitApply(service)) => {
                if let Some(list) = listing.as_mut() {
                    list.insert(object_key(&service), Arc::new(service));
                }
            }
            Ok(Event::InitDone) => {
                let mut store = lock(&store);
                store.services = listing.take().unwrap_or_default();
                store.synced = true;
            }
            Ok(Event::Apply(service)) => {
                lock(&store)
                    .services
                    .insert(object_key(&service), Arc::new(service));
            }
            Ok(Event::Delete(service)) => {
                lock(&store).services.remove(&object_key(&service));
            }
            Err(e) => warn!(error = %e, "watching services failed"),
        }
    }
}

impl ObjectSource for ApiObjects {
    fn get_config_map(&self, namespace: &str, name: &str) -> Result<Arc<ConfigMap>, ObjectError> {
        self.config_maps.get(&self.handle, namespace, name)
    }

    fn get_secret(&self, namespace: &str, name: &str) -> Result<Arc<Secret>, ObjectError> {
        self.secrets.get(&self.handle, namespace, name)
    }

    fn request_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, ObjectError> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        self.call(
            "TokenRequest",
            api.create_token_request(service_account, &PostParams::default(), request),
        )
        .map_err(|e| api_error(e, "serviceaccount", service_account))
    }

    fn services(&self) -> Result<Vec<Arc<Service>>, ObjectError> {
        let store = lock(&self.services);
        if !store.synced {
            return Err(ObjectError::Other(
                "services have not yet been read at least once".to_owned(),
            ));
        }
        Ok(store.services.values().cloned().collect())
    }

    fn get_persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, ObjectError> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        self.call("get PersistentVolumeClaim", api.get(name))
            .map(Arc::new)
            .map_err(|e| api_error(e, "persistentvolumeclaims", name))
    }

    fn get_persistent_volume(&self, name: &str) -> Result<Arc<PersistentVolume>, ObjectError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        self.call("get PersistentVolume", api.get(name))
            .map(Arc::new)
            .map_err(|e| api_error(e, "persistentvolumes", name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    use axum::http::{Request, Response, StatusCode};
    use bytes::Bytes;
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt as _, Full, StreamBody};
    use hyper::body::Frame;
    use k8s_openapi::api::authentication::v1::TokenRequestSpec;
    use serde_json::{Value, json};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    /// A fake API server: lists answer from `objects` by collection path, the watch of
    /// ConfigMap `x` streams the lines sent on `watch_tx`, POSTs of tokens answer a fixed
    /// token.
    #[derive(Clone)]
    struct Fake {
        objects: Arc<Mutex<HashMap<String, Vec<Value>>>>,
        watch_rx: Arc<Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>>,
    }

    fn body(value: &Value, code: StatusCode) -> Response<BoxBody<Bytes, Infallible>> {
        let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
        *response.status_mut() = code;
        response
    }

    impl Fake {
        fn new() -> (Self, mpsc::UnboundedSender<Bytes>) {
            let (tx, rx) = mpsc::unbounded_channel();
            let fake = Fake {
                objects: Arc::default(),
                watch_rx: Arc::new(Mutex::new(Some(rx))),
            };
            (fake, tx)
        }

        fn client(&self) -> kube::Client {
            let fake = self.clone();
            let service = tower::service_fn(move |request: Request<kube::client::Body>| {
                let fake = fake.clone();
                async move { Ok::<_, Infallible>(fake.handle(request).await) }
            });
            kube::Client::new(service, "default")
        }

        async fn handle(
            &self,
            request: Request<kube::client::Body>,
        ) -> Response<BoxBody<Bytes, Infallible>> {
            let path = request.uri().path().to_owned();
            let query = request.uri().query().unwrap_or("").to_owned();
            let method = request.method().clone();
            let sent = request
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            if method == "POST" && path.ends_with("/token") {
                if path.contains("/serviceaccounts/missing/") {
                    return body(
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "serviceaccounts \"missing\" not found", "reason": "NotFound", "code": 404}),
                        StatusCode::NOT_FOUND,
                    );
                }
                let mut answer: Value = serde_json::from_slice(&sent).unwrap_or(Value::Null);
                answer["status"] =
                    json!({"token": "jwt", "expirationTimestamp": "2030-01-01T00:00:00Z"});
                return body(&answer, StatusCode::CREATED);
            }
            if query.contains("watch=true") {
                // The events are about ConfigMap `x`: only its watch gets them (the cache
                // watches each object on its own, and a watch of another name must not
                // take the stream first).
                let about_x = query
                    .split('&')
                    .filter_map(|p| p.strip_prefix("fieldSelector=metadata.name%3D"))
                    .all(|name| name == "x");
                let receiver = if path.ends_with("/configmaps") && about_x {
                    lock(&self.watch_rx).take()
                } else {
                    None
                };
                let stream: BoxBody<Bytes, Infallible> =
                    match receiver {
                        Some(rx) => http_body_util::BodyExt::boxed(StreamBody::new(
                            futures::StreamExt::map(UnboundedReceiverStream::new(rx), |b| {
                                Ok::<_, Infallible>(Frame::data(b))
                            }),
                        )),
                        // Other watches stay open without events.
                        None => http_body_util::BodyExt::boxed(StreamBody::new(
                            futures::stream::pending::<Result<Frame<Bytes>, Infallible>>(),
                        )),
                    };
                return Response::new(stream);
            }
            let mut items = lock(&self.objects).get(&path).cloned().unwrap_or_default();
            if let Some(name) = query
                .split('&')
                .find_map(|p| p.strip_prefix("fieldSelector=metadata.name%3D"))
            {
                items.retain(|i| i["metadata"]["name"] == name);
            }
            body(
                &json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
                StatusCode::OK,
            )
        }
    }

    fn config_map(name: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
            "data": {"k": value}})
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn config_maps_are_watched_and_updates_are_seen() {
        let (fake, watch_tx) = Fake::new();
        lock(&fake.objects).insert(
            "/api/v1/namespaces/ns/configmaps".into(),
            vec![config_map("x", "1")],
        );
        let (objects, _services) = ApiObjects::new(fake.client());
        let first = objects.get_config_map("ns", "x").unwrap();
        assert_eq!(first.data.as_ref().unwrap()["k"], "1");
        assert_eq!(
            objects
                .get_config_map("ns", "missing")
                .unwrap_err()
                .to_string(),
            "configmap \"missing\" not found"
        );
        let event = json!({"type": "MODIFIED", "object": config_map("x", "2")});
        watch_tx.send(Bytes::from(format!("{event}\n"))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let current = objects.get_config_map("ns", "x").unwrap();
            if current.data.as_ref().unwrap()["k"] == "2" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the update never reached the cache"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let deleted = json!({"type": "DELETED", "object": config_map("x", "2")});
        watch_tx.send(Bytes::from(format!("{deleted}\n"))).unwrap();
        loop {
            if objects
                .get_config_map("ns", "x")
                .is_err_and(|e| e.is_not_found())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the deletion never reached the cache"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn services_wait_for_their_first_list() {
        let (fake, _watch_tx) = Fake::new();
        lock(&fake.objects).insert(
            "/api/v1/services".into(),
            vec![json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kubernetes", "namespace": "default"},
                "spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 443}]}})],
        );
        let (objects, services) = ApiObjects::new(fake.client());
        assert_eq!(
            objects.services().unwrap_err().to_string(),
            "services have not yet been read at least once"
        );
        let watch = tokio::spawn(services);
        let deadline = Instant::now() + Duration::from_secs(10);
        let listed = loop {
            if let Ok(list) = objects.services() {
                break list;
            }
            assert!(Instant::now() < deadline, "services never listed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        watch.abort();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].metadata.name.as_deref(), Some("kubernetes"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn token_requests_go_to_the_service_account() {
        let (fake, _watch_tx) = Fake::new();
        let (objects, _services) = ApiObjects::new(fake.client());
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answer = objects.request_token("ns", "sa", &request).unwrap();
        let status = answer.status.unwrap();
        assert_eq!(status.token.as_deref(), Some("jwt"));
        assert_eq!(answer.spec.unwrap().expiration_seconds, Some(600));
        assert_eq!(
            objects
                .request_token("ns", "missing", &request)
                .unwrap_err(),
            ObjectError::NotFound {
                resource: "serviceaccount",
                name: "missing".into()
            }
        );
    }
}
