//! What the Endpoints and EndpointSlice controllers share to route events (upstream
//! `k8s.io/endpointslice/util`, `controller_utils.go`): a Service change queues the
//! Service; a pod change queues the Services that select the pod
//! ([`services_to_update`], upstream `GetServicesToUpdateOnPodChange` over
//! `GetPodServiceMemberships`), and a sync lists the pods its Service selects.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use skiff_api::core::pod::conditions::{is_pod_ready, pod_phase};
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, Store, object_key};
use skiff_client::workqueue::WorkQueue;

/// Registers the handlers both controllers have on their Service and Pod informers
/// (upstream `onServiceUpdate`/`onServiceDelete` and `addPod`/`updatePod`/`deletePod`):
/// every Service change queues the Service's key; every pod change queues the keys of
/// [`services_to_update`].
pub(crate) fn queue_service_and_pod_changes(
    services: &SharedInformer<Service>,
    pods: &SharedInformer<Pod>,
    queue: &Arc<WorkQueue<String>>,
) {
    let q = Arc::clone(queue);
    services.add_event_handler(Box::new(move |d| match d {
        Delta::Added(s) | Delta::Updated(_, s) | Delta::Deleted(s) => {
            q.add(object_key(s.as_ref()));
        }
    }));
    let q = Arc::clone(queue);
    let store = Arc::clone(services.store());
    pods.add_event_handler(Box::new(move |d| {
        for key in services_to_update(&store, d) {
            q.add(key);
        }
    }));
}

/// The Service's selector as a label selector; None when it has none (an empty selector
/// is none too: the API server stores `{}` as absent), which selects no pods.
pub(crate) fn service_selector(service: &Service) -> Option<LabelSelector> {
    let selector = service.spec.as_ref()?.selector.as_ref()?;
    (!selector.is_empty()).then(|| LabelSelector::from_labels(selector))
}

/// The pods of `pods` in namespace `ns` that `selector` matches (upstream
/// `podLister.Pods(ns).List(selector)` in `syncService`).
pub(crate) fn selected_pods(
    pods: &Store<Pod>,
    ns: &str,
    selector: &LabelSelector,
) -> Vec<Arc<Pod>> {
    pods.list()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns)
                && selector.matches(p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
        })
        .collect()
}

/// The pod's IPs: `status.podIPs`, else `status.podIP`.
pub(crate) fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let ips: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    if !ips.is_empty() {
        return ips;
    }
    status
        .pod_ip
        .iter()
        .filter(|ip| !ip.is_empty())
        .cloned()
        .collect()
}

/// The keys of the Services of the pod's namespace whose selector matches the pod's
/// labels (upstream `GetPodServiceMemberships`).
fn pod_service_memberships(services: &Store<Service>, pod: &Pod) -> BTreeSet<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    services
        .list()
        .into_iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
        .filter(|s| service_selector(s).is_some_and(|sel| sel.matches(&labels)))
        .map(|s| object_key(s.as_ref()))
        .collect()
}

/// Whether a pod change may change its endpoints, and whether it may change which
/// Services select it (upstream `podEndpointsChanged`; a change of phase counts too, so
/// that a pod that ends leaves at once).
fn pod_endpoints_changed(old: &Pod, new: &Pod) -> (bool, bool) {
    let host = |p: &Pod| {
        let s = p.spec.as_ref();
        (
            s.and_then(|s| s.hostname.clone()),
            s.and_then(|s| s.subdomain.clone()),
        )
    };
    let labels_changed = old.metadata.labels != new.metadata.labels || host(old) != host(new);
    let pod_changed = old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || is_pod_ready(old) != is_pod_ready(new)
        || pod_phase(old) != pod_phase(new)
        || pod_ips(old) != pod_ips(new);
    (pod_changed, labels_changed)
}

/// The keys of the Services a pod change concerns (upstream
/// `GetServicesToUpdateOnPodChange`): those selecting the pod on add and delete; on
/// update, none if nothing relevant changed, else those selecting it now and, if its
/// labels changed, those that selected it before (only those gained or lost when the
/// pod itself did not change).
pub(crate) fn services_to_update(services: &Store<Service>, delta: &Delta<Pod>) -> Vec<String> {
    match delta {
        Delta::Added(pod) | Delta::Deleted(pod) => {
            pod_service_memberships(services, pod).into_iter().collect()
        }
        Delta::Updated(old, new) => {
            if old.metadata.resource_version == new.metadata.resource_version {
                return Vec::new();
            }
            let (pod_changed, labels_changed) = pod_endpoints_changed(old, new);
            if !labels_changed {
                if !pod_changed {
                    return Vec::new();
                }
                return pod_service_memberships(services, new).into_iter().collect();
            }
            let now = pod_service_memberships(services, new);
            let before = pod_service_memberships(services, old);
            if pod_changed {
                now.union(&before).cloned().collect()
            } else {
                now.symmetric_difference(&before).cloned().collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::endpoint::tests::{pod, service};

    #[test]
    fn pod_updates_queue_the_services_concerned() {
        let store = Store::<Service>::default();
        let svc = service(json!([{"port": 80}]));
        store.insert(object_key(&svc), Arc::new(svc));
        let old = pod("a", "10.0.0.1", false);
        let mut same = old.clone();
        same.metadata.resource_version = Some("2".to_owned());
        same.metadata.annotations = Some(BTreeMap::from([("x".to_owned(), "y".to_owned())]));
        let upd = |o: &Pod, n: &Pod| Delta::Updated(Arc::new(o.clone()), Arc::new(n.clone()));
        assert!(services_to_update(&store, &upd(&old, &same)).is_empty());
        let mut ready = same.clone();
        ready.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "True".to_owned();
        assert_eq!(services_to_update(&store, &upd(&old, &ready)), ["ns/web"]);
        let mut relabelled = same.clone();
        relabelled.metadata.labels = Some(BTreeMap::new());
        assert_eq!(
            services_to_update(&store, &upd(&old, &relabelled)),
            ["ns/web"]
        );
        let added = Delta::Added(Arc::new(old.clone()));
        assert_eq!(services_to_update(&store, &added), ["ns/web"]);
        let mut other_ns = old;
        other_ns.metadata.namespace = Some("other".to_owned());
        assert!(services_to_update(&store, &Delta::Added(Arc::new(other_ns))).is_empty());
    }

    #[test]
    fn services_select_the_pods_of_their_namespace() {
        let pods = Store::<Pod>::default();
        let a = pod("a", "10.0.0.1", true);
        let mut b = pod("b", "10.0.0.2", true);
        b.metadata.labels = None;
        let mut c = pod("c", "10.0.0.3", true);
        c.metadata.namespace = Some("other".to_owned());
        for p in [a, b, c] {
            pods.insert(object_key(&p), Arc::new(p));
        }
        let selector = service_selector(&service(json!([]))).unwrap();
        let names: Vec<_> = selected_pods(&pods, "ns", &selector)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a"]);
    }
}
