//! An informer (client-go's `SharedIndexInformer` with event handlers) on top of
//! `kube::runtime::watcher`: LIST then WATCH with bookmarks, a relist after `410 Gone`
//! and a backoff while the API server cannot be reached. Each change reaches the handler
//! as a [`Delta`] with the previous object, and a relist turns into the adds, updates and
//! deletes that bring the handler's view up to date. Objects are kept without their
//! `metadata.managedFields`.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// A change seen by an informer.
#[derive(Debug)]
pub enum Delta<K> {
    /// A new object.
    Added(Arc<K>),
    /// A changed object: old, new.
    Updated(Arc<K>, Arc<K>),
    /// A deleted object (its last state).
    Deleted(Arc<K>),
}

/// `namespace/name` of a namespaced object, `name` of a cluster-scoped one.
pub fn object_key<K: Resource>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", obj.name_any()),
        _ => obj.name_any(),
    }
}

fn resource_version<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().resource_version.as_deref()
}

/// Watches `api` with `config` until `cancel`, calling `handle` for each change. `synced`
/// is called once, after the first complete LIST has been handed over. Watch errors are
/// logged and retried with backoff; they never end the informer.
pub async fn run<K, H, S>(
    api: Api<K>,
    config: watcher::Config,
    cancel: CancellationToken,
    mut handle: H,
    synced: S,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: FnMut(Delta<K>),
    S: FnOnce(),
{
    let kind = K::kind(&()).into_owned();
    let mut known: HashMap<String, Arc<K>> = HashMap::new();
    let mut relisting: Option<HashSet<String>> = None;
    let mut synced = Some(synced);
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return,
            next = stream.next() => next,
        };
        let event = match next {
            None => return,
            Some(Err(e)) => {
                tracing::warn!(kind, error = %e, "watch failed; retrying");
                continue;
            }
            Some(Ok(event)) => event,
        };
        match event {
            Event::Init => relisting = Some(HashSet::new()),
            Event::InitApply(obj) => {
                let key = object_key(&obj);
                if let Some(seen) = relisting.as_mut() {
                    seen.insert(key.clone());
                }
                apply(&mut known, key, obj, &mut handle);
            }
            Event::InitDone => {
                if let Some(seen) = relisting.take() {
                    let gone: Vec<String> = known
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for key in gone {
                        if let Some(old) = known.remove(&key) {
                            handle(Delta::Deleted(old));
                        }
                    }
                }
                if let Some(s) = synced.take() {
                    s();
                }
            }
            Event::Apply(obj) => {
                let key = object_key(&obj);
                apply(&mut known, key, obj, &mut handle);
            }
            Event::Delete(mut obj) => {
                strip(&mut obj);
                let key = object_key(&obj);
                known.remove(&key);
                handle(Delta::Deleted(Arc::new(obj)));
            }
        }
    }
}

fn apply<K: Resource, H: FnMut(Delta<K>)>(
    known: &mut HashMap<String, Arc<K>>,
    key: String,
    mut obj: K,
    handle: &mut H,
) {
    strip(&mut obj);
    let new = Arc::new(obj);
    match known.insert(key, Arc::clone(&new)) {
        None => handle(Delta::Added(new)),
        Some(old) => {
            if resource_version(old.as_ref()) != resource_version(new.as_ref())
                || resource_version(new.as_ref()).is_none()
            {
                handle(Delta::Updated(old, new));
            }
        }
    }
}

/// Drops `metadata.managedFields`, which no handler reads (upstream's scheduler and
/// controllers set the same informer transform, `TransformStripManagedFields`): a pod's
/// managed fields can weigh as much as the rest of it.
fn strip<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}
