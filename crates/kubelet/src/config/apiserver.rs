//! The API server pod source (upstream `pkg/kubelet/config/apiserver.go`,
//! `NewSourceApiserver`): a LIST + WATCH of the pods bound to this node
//! (`spec.nodeName=<node>`), with bookmarks, a relist after `410 Gone` and a backoff
//! while the API server cannot be reached (`kube::runtime::watcher`).
//!
//! Every change sends the whole set of the node's pods as one [`Snapshot`] of source
//! [`API_SOURCE`], as upstream's `SET` updates. While the API server is unreachable no
//! snapshot is sent, so nothing is stopped because the API cannot be read.
//!
//! Mirror pods (annotation `kubernetes.io/config.mirror`) are the API's view of static
//! pods: they are not run. They go to [`MirrorPods`], where the mirror client
//! (`crate::mirror_pods`) finds them.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Notify, mpsc};

use super::Snapshot;
use super::static_pod::{CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

/// The pod source name of the API server (upstream `kubetypes.ApiserverSource`).
pub const API_SOURCE: &str = "api";
/// The annotation that marks a mirror pod; its value is the static pod's
/// `kubernetes.io/config.hash` (upstream `kubetypes.ConfigMirrorAnnotationKey`).
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// True for a mirror pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CONFIG_MIRROR_ANNOTATION))
}

/// `<namespace>/<name>` of a pod: how static pods and their mirror pods are matched.
pub fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The mirror pods the API server has for this node, by full name, as last listed or
/// watched; `changed` is notified on every change.
#[derive(Default)]
pub struct MirrorPods {
    pods: RwLock<BTreeMap<String, Arc<Pod>>>,
    /// Whether the API source has listed the pods at least once.
    listed: RwLock<bool>,
    /// Notified when the set changed.
    pub changed: Notify,
}

impl MirrorPods {
    /// The mirror pod of the static pod named `full_name` (`<namespace>/<name>`).
    pub fn get(&self, full_name: &str) -> Option<Arc<Pod>> {
        self.pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(full_name)
            .cloned()
    }

    /// Every mirror pod, by full name.
    pub fn all(&self) -> BTreeMap<String, Arc<Pod>> {
        self.pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// True once the API source listed the node's pods (before, a missing mirror pod may
    /// just not be known yet).
    pub fn listed(&self) -> bool {
        *self.listed.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn replace(&self, pods: BTreeMap<String, Arc<Pod>>) {
        let mut current = self.pods.write().unwrap_or_else(PoisonError::into_inner);
        let listed = std::mem::replace(
            &mut *self.listed.write().unwrap_or_else(PoisonError::into_inner),
            true,
        );
        let same = listed
            && current.len() == pods.len()
            && current.iter().zip(pods.iter()).all(|((ka, a), (kb, b))| {
                ka == kb && a.metadata.resource_version == b.metadata.resource_version
            });
        *current = pods;
        drop(current);
        if !same {
            self.changed.notify_waiters();
            self.changed.notify_one();
        }
    }
}

/// The API server pod source of one node.
pub struct ApiSource {
    client: kube::Client,
    node_name: String,
    mirror_pods: Arc<MirrorPods>,
}

impl ApiSource {
    /// A source of the pods bound to `node_name`, putting mirror pods into `mirror_pods`.
    pub fn new(client: kube::Client, node_name: String, mirror_pods: Arc<MirrorPods>) -> Self {
        Self {
            client,
            node_name,
            mirror_pods,
        }
    }

    /// Lists and watches until `snapshots` closes. Watch errors (API server down, `410
    /// Gone`, garbage) are logged and retried with a backoff; the last snapshot stands
    /// meanwhile.
    pub async fn run(self, snapshots: mpsc::Sender<Snapshot>) {
        let api: kube::Api<Pod> = kube::Api::all(self.client.clone());
        let config =
            watcher::Config::default().fields(&format!("spec.nodeName={}", self.node_name));
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        // The node's pods by UID, and the set being relisted.
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let mut relisting: Option<BTreeMap<String, Pod>> = None;
        // When each pod was first seen (`kubernetes.io/config.seen`).
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        while let Some(event) = events.next().await {
            let changed = match event {
                Ok(Event::Init) => {
                    relisting = Some(BTreeMap::new());
                    false
                }
                Ok(Event::InitApply(pod)) => {
                    if let (Some(set), Some(uid)) = (relisting.as_mut(), pod.metadata.uid.clone()) {
                        set.insert(uid, pod);
                    }
                    false
                }
                Ok(Event::InitDone) => {
                    if let Some(set) = relisting.take() {
                        pods = set;
                    }
                    true
                }
                Ok(Event::Apply(pod)) => match pod.metadata.uid.clone() {
                    Some(uid) => {
                        pods.insert(uid, pod);
                        true
                    }
                    None => false,
                },
                Ok(Event::Delete(pod)) => pod
                    .metadata
                    .uid
                    .as_deref()
                    .is_some_and(|uid| pods.remove(uid).is_some()),
                Err(e) => {
                    tracing::warn!(error = %e, "API server pod source: list or watch failed; retrying");
                    false
                }
            };
            if !changed {
                continue;
            }
            seen.retain(|uid, _| pods.contains_key(uid));
            let (mirrors, regular): (Vec<&Pod>, Vec<&Pod>) =
                pods.values().partition(|p| is_mirror_pod(p));
            self.mirror_pods.replace(
                mirrors
                    .into_iter()
                    .map(|p| (full_name(p), Arc::new(p.clone())))
                    .collect(),
            );
            let snapshot = Snapshot {
                source: API_SOURCE,
                pods: regular
                    .into_iter()
                    .map(|pod| annotated(pod, &mut seen))
                    .collect(),
            };
            if snapshots.send(snapshot).await.is_err() {
                return;
            }
        }
    }
}

/// `pod` with the source annotations the kubelet sets on every pod it gets (upstream
/// `podStorage.merge`): `kubernetes.io/config.source: api` and the time it was first seen.
fn annotated(pod: &Pod, seen: &mut BTreeMap<String, String>) -> Pod {
    let mut pod = pod.clone();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let first_seen = seen
        .entry(uid)
        .or_insert_with(|| crate::status::now().to_string())
        .clone();
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.to_owned(), API_SOURCE.to_owned());
    annotations.insert(CONFIG_SEEN_ANNOTATION.to_owned(), first_seen);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, mirror: bool) -> Pod {
        let mut annotations = BTreeMap::new();
        if mirror {
            annotations.insert(CONFIG_MIRROR_ANNOTATION.to_owned(), "hash".to_owned());
        }
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("1".into()),
                annotations: Some(annotations),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn mirror_pods_are_kept_apart_and_changes_notified() {
        let mirrors = MirrorPods::default();
        assert!(!mirrors.listed());
        let web = pod("web-node1", true);
        assert!(is_mirror_pod(&web));
        assert!(!is_mirror_pod(&pod("api", false)));
        mirrors.replace(BTreeMap::from([(full_name(&web), Arc::new(web.clone()))]));
        assert!(mirrors.listed());
        assert!(mirrors.get("default/web-node1").is_some());
        assert!(mirrors.get("default/other").is_none());
    }

    #[test]
    fn api_pods_get_the_source_annotations_and_keep_their_first_seen_time() {
        let mut seen = BTreeMap::new();
        let first = annotated(&pod("api", false), &mut seen);
        let annotations = first.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[CONFIG_SOURCE_ANNOTATION], "api");
        let at = annotations[CONFIG_SEEN_ANNOTATION].clone();
        let again = annotated(&pod("api", false), &mut seen);
        assert_eq!(
            again.metadata.annotations.unwrap_or_default()[CONFIG_SEEN_ANNOTATION],
            at
        );
    }
}
