//! The Endpoints controller (upstream `pkg/controller/endpoint/endpoints_controller.go`,
//! with `pkg/api/v1/endpoints` and the shared helpers of `k8s.io/endpointslice/util`,
//! here partly `endpointslice_util`):
//! every Service with a selector gets an Endpoints object of the same name listing the
//! pods the selector matches.
//!
//! A pod is listed when it has an IP, has not ended (`Succeeded`, `Failed`) and is not
//! terminating (unless `spec.publishNotReadyAddresses`): under `addresses` when Ready (or
//! when the Service publishes not-ready addresses), else under `notReadyAddresses`, with
//! its node, a `targetRef` to it and its `spec.hostname` when its `spec.subdomain` names
//! the Service. Each Service port is resolved against the pod ([`find_port`]): a number
//! as is, a name through the pod's container ports (a pod without it is left out of that
//! port). The subsets are repacked into upstream's canonical layout ([`repack_subsets`])
//! so that the object only changes when the set does, and written only then. Beyond 1000
//! addresses the subsets are truncated and annotated
//! `endpoints.kubernetes.io/over-capacity: truncated`.
//!
//! The object carries the Service's labels, `endpoints.kubernetes.io/managed-by:
//! endpoint-controller`, `service.kubernetes.io/headless` for a headless Service, and
//! `endpoints.kubernetes.io/last-change-trigger-time` (the earliest Service creation or pod
//! readiness change behind the write, [`TriggerTimeTracker`]). A Service without a
//! selector (and an ExternalName one) is left alone: its Endpoints are the user's. When a
//! Service goes, its Endpoints go. Events: `FailedToCreateEndpoint`,
//! `FailedToUpdateEndpoint`, from `endpoint-controller`.
//!
//! Deliberate difference: at start-up upstream queues every Endpoints object so that those
//! left by a deleted Service are removed; here only those labelled as managed by this
//! controller are, so that an Endpoints written by hand without a Service survives.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
    ServicePort,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use skiff_api::core::pod::conditions::{is_pod_ready, pod_phase, ready_condition};
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{run_workers, wait_for_cache_sync};
use crate::endpointslice_util::{
    pod_ips, queue_service_and_pod_changes, selected_pods, service_selector,
};

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "endpoints-controller";
/// The label marking Endpoints this controller manages (upstream `LabelManagedBy`).
pub const LABEL_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`] (upstream `ControllerName`).
pub const MANAGED_BY_VALUE: &str = "endpoint-controller";
/// The label of the Endpoints and EndpointSlices of a headless Service (value `""`).
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// When the change behind the last write happened (RFC 3339, UTC).
pub const ANNOTATION_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// Set to `truncated` when the addresses exceeded [`MAX_CAPACITY`].
pub const ANNOTATION_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// The most addresses (ready and not) an Endpoints object holds (upstream `maxCapacity`).
pub const MAX_CAPACITY: usize = 1000;
/// How soon a Service is looked at again while the cache still shows an object older than
/// the controller's own last write.
pub(crate) const STALE_RETRY: Duration = Duration::from_millis(50);

/// The Endpoints controller; see the module doc.
pub struct EndpointsController {
    client: kube::Client,
    services: Arc<SharedInformer<Service>>,
    pods: Arc<SharedInformer<Pod>>,
    endpoints: Arc<SharedInformer<Endpoints>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
    triggers: TriggerTimeTracker,
    /// Per Service key, the resourceVersion this controller replaced last: a cached object
    /// still at it is stale (upstream `staleEndpointsTracker`).
    stale: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for EndpointsController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointsController")
            .finish_non_exhaustive()
    }
}

impl EndpointsController {
    /// The controller over the factory's Service, Pod and Endpoints informers, its
    /// handlers registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new("endpoint").with_metrics(queue_metrics));
        let services = factory.informer::<Service>();
        let pods = factory.informer::<Pod>();
        let endpoints = factory.informer::<Endpoints>();
        queue_service_and_pod_changes(&services, &pods, &queue);
        let q = Arc::clone(&queue);
        endpoints.add_event_handler(Box::new(move |d| {
            if let Delta::Deleted(ep) = d {
                q.add(object_key(ep.as_ref()));
            }
        }));
        Arc::new(Self {
            client,
            services,
            pods,
            endpoints,
            queue,
            recorder,
            triggers: TriggerTimeTracker::default(),
            stale: Mutex::new(HashMap::new()),
        })
    }

    /// Waits for the informers, queues the managed Endpoints left by Services deleted while
    /// no controller ran, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-endpoint-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        if !wait_for_cache_sync(&cancel, &[&*self.services, &*self.pods, &*self.endpoints]).await {
            return;
        }
        for ep in self.endpoints.store().list() {
            if is_managed(&ep.metadata) {
                self.queue.add(object_key(ep.as_ref()));
            }
        }
        let this = Arc::clone(&self);
        run_workers(NAME, Arc::clone(&self.queue), workers, cancel, move |key| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        })
        .await;
    }

    fn event(&self, ep: &Endpoints, reason: &str, note: &str) {
        self.recorder.event(ep, "Warning", reason, note);
    }

    /// One sync of the Service `key` (upstream `syncService`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), ns);
        let Some(service) = self.services.store().get(key) else {
            self.triggers.delete(key);
            self.lock_stale().remove(key);
            return match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.into()),
            };
        };
        let spec = service.spec.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") {
            return Ok(());
        }
        let Some(selector) = service_selector(&service) else {
            return Ok(());
        };
        let pods = selected_pods(self.pods.store(), ns, &selector);
        let current = self.endpoints.store().get(key);
        // Before the trigger time is computed (which moves the tracker on), so that a
        // sync put off for a stale cache keeps its trigger time for the retry.
        if let Some(cur) = &current {
            let stale = self.lock_stale().get(key).cloned();
            if stale.is_some() && stale == cur.metadata.resource_version {
                tracing::debug!(service = key, "the Endpoints cache is behind; retrying");
                self.queue.add_after(key.to_owned(), STALE_RETRY);
                return Ok(());
            }
        }
        let trigger = self.triggers.compute(key, &service, &pods);
        let subsets = desired_subsets(&service, &pods);
        let labels = endpoints_labels(&service);
        if let Some(cur) = &current
            && normalize_subsets(cur.subsets.as_deref().unwrap_or_default()) == subsets
            && cur.metadata.labels.clone().unwrap_or_default() == labels
            && capacity_annotation_set_correctly(&cur.metadata, &subsets)
        {
            return Ok(());
        }
        let mut new = current.as_deref().cloned().unwrap_or_else(|| Endpoints {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(ns.to_owned()),
                ..Default::default()
            },
            subsets: None,
        });
        let mut annotations = new.metadata.annotations.take().unwrap_or_default();
        match trigger {
            Some(t) => annotations.insert(ANNOTATION_TRIGGER_TIME.to_owned(), format_time(t)),
            None => annotations.remove(ANNOTATION_TRIGGER_TIME),
        };
        let (subsets, truncated) = truncate_subsets(subsets);
        if truncated {
            annotations.insert(ANNOTATION_OVER_CAPACITY.to_owned(), "truncated".to_owned());
        } else {
            annotations.remove(ANNOTATION_OVER_CAPACITY);
        }
        new.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
        new.metadata.labels = Some(labels);
        new.subsets = Some(subsets);
        let pp = PostParams::default();
        match &current {
            None => match api.create(&pp, &new).await {
                Ok(_) => Ok(()),
                // The namespace is terminating: creates keep failing, drop the key.
                Err(e) if namespace_terminating(&e) => Ok(()),
                // Created meanwhile, not yet in the cache: the retry sees it.
                Err(kube::Error::Api(s)) if s.code == 409 => Err(kube::Error::Api(s).into()),
                Err(e) => {
                    let note = format!("Failed to create endpoint for service {key}: {e}");
                    self.event(&new, "FailedToCreateEndpoint", &note);
                    Err(e.into())
                }
            },
            Some(cur) => match api.replace(name, &pp, &new).await {
                Ok(written) => {
                    if written.metadata.resource_version != cur.metadata.resource_version
                        && let Some(rv) = cur.metadata.resource_version.clone()
                    {
                        self.lock_stale().insert(key.to_owned(), rv);
                    }
                    Ok(())
                }
                Err(e) => {
                    let err = Error::from(e);
                    if !err.is_conflict() {
                        let note = format!("Failed to update endpoint {key}: {}", err.message());
                        self.event(&new, "FailedToUpdateEndpoint", &note);
                    }
                    Err(err)
                }
            },
        }
    }

    fn lock_stale(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.stale.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// True for a refusal because the namespace is terminating (a `NamespaceTerminating`
/// cause).
pub(crate) fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| {
        d.causes.iter().any(|c| c.reason == "NamespaceTerminating")
    }))
}

/// RFC 3339 in UTC, as upstream writes the trigger time.
pub(crate) fn format_time(t: Timestamp) -> String {
    t.to_string()
}

fn is_managed(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
}

/// The labels the Endpoints of `service` carry: the Service's, the managed-by label and,
/// for a headless Service, [`LABEL_HEADLESS`].
pub(crate) fn endpoints_labels(service: &Service) -> BTreeMap<String, String> {
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned());
    if is_service_ip_set(service) {
        labels.remove(LABEL_HEADLESS);
    } else {
        labels.insert(LABEL_HEADLESS.to_owned(), String::new());
    }
    labels
}

/// True when the Service has a cluster IP (not headless; upstream `IsServiceIPSet`).
pub(crate) fn is_service_ip_set(service: &Service) -> bool {
    let ip = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or("");
    !ip.is_empty() && ip != "None"
}

/// True when the Service is headless (`clusterIP: None`).
fn is_headless(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// Whether the pod belongs in Endpoints and EndpointSlices (upstream
/// `ShouldPodBeInEndpoints`): not terminal, with an IP, and not terminating unless
/// `include_terminating`.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(pod_phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    let status = pod.status.as_ref();
    let has_ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty())
        || status
            .and_then(|s| s.pod_ips.as_ref())
            .is_some_and(|ips| !ips.is_empty());
    if !has_ip {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// Whether the pod's address carries its `spec.hostname` (upstream `ShouldSetHostname`):
/// it has one and its `spec.subdomain` is the Service's name, in the same namespace.
pub fn should_set_hostname(pod: &Pod, service: &Service) -> bool {
    let spec = pod.spec.as_ref();
    let hostname = spec.and_then(|s| s.hostname.as_deref()).unwrap_or("");
    let subdomain = spec.and_then(|s| s.subdomain.as_deref()).unwrap_or("");
    !hostname.is_empty()
        && Some(subdomain) == service.metadata.name.as_deref()
        && pod.metadata.namespace == service.metadata.namespace
}

/// The container port `port` reaches on `pod` (upstream `FindPort`): a numeric
/// `targetPort` as is (the Service port itself when unset), a named one through the
/// pod's container ports (and its sidecars', init containers with `restartPolicy:
/// Always`) of that name and the Service port's protocol. None when the pod has no such
/// port.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let name = match &port.target_port {
        None => return Some(port.port),
        Some(IntOrString::Int(n)) => return Some(*n),
        Some(IntOrString::String(name)) => name,
    };
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    let spec = pod.spec.as_ref()?;
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| {
            p.name.as_deref() == Some(name.as_str())
                && p.protocol.as_deref().unwrap_or("TCP") == protocol
        })
        .map(|p| p.container_port)
}

/// True when `ip` parses as an IPv6 address.
pub(crate) fn is_ipv6(ip: &str) -> bool {
    ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6())
}

/// A reference to the pod (kind, namespace, name, UID), as endpoints carry it.
pub(crate) fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".to_owned()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// The pod's address for the Service (upstream `podToEndpointAddressForService`): its IP
/// of the Service's first IP family (without families, that of the cluster IP, or of the
/// pod's IP for a headless Service). None when the pod has no IP of that family.
pub fn pod_to_endpoint_address(service: &Service, pod: &Pod) -> Option<EndpointAddress> {
    let spec = service.spec.as_ref();
    let ipv6 = match spec
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
    {
        Some(family) => family == "IPv6",
        None if is_service_ip_set(service) => {
            is_ipv6(spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or(""))
        }
        None => is_ipv6(
            pod.status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .unwrap_or(""),
        ),
    };
    let ip = pod_ips(pod).into_iter().find(|ip| is_ipv6(ip) == ipv6)?;
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    Some(EndpointAddress {
        ip,
        node_name: node.filter(|n| !n.is_empty()),
        target_ref: Some(pod_reference(pod)),
        hostname: None,
    })
}

/// The Endpoints port a Service port gives with container port `port` (upstream
/// `endpointPortFromServicePort`).
fn endpoint_port(sp: &ServicePort, port: i32) -> EndpointPort {
    EndpointPort {
        name: sp.name.clone().filter(|n| !n.is_empty()),
        port,
        protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".to_owned())),
        app_protocol: sp.app_protocol.clone(),
    }
}

/// The subsets the pods give the Service, repacked (the heart of upstream
/// `syncService`).
pub fn desired_subsets(service: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let spec = service.spec.clone().unwrap_or_default();
    let tolerate = spec.publish_not_ready_addresses.unwrap_or(false);
    let ports = spec.ports.unwrap_or_default();
    let mut subsets = Vec::new();
    for pod in pods {
        if !should_pod_be_in_endpoints(pod, tolerate) {
            continue;
        }
        let Some(mut address) = pod_to_endpoint_address(service, pod) else {
            continue;
        };
        if should_set_hostname(pod, service) {
            address.hostname = pod.spec.as_ref().and_then(|s| s.hostname.clone());
        }
        let ready = tolerate || is_pod_ready(pod);
        let subset = |port: Option<EndpointPort>| EndpointSubset {
            addresses: ready.then(|| vec![address.clone()]),
            not_ready_addresses: (!ready).then(|| vec![address.clone()]),
            ports: port.map(|p| vec![p]),
        };
        if ports.is_empty() {
            // A headless Service may have no ports; its addresses are listed alone.
            if is_headless(service) {
                subsets.push(subset(None));
            }
            continue;
        }
        for sp in &ports {
            if let Some(n) = find_port(pod, sp) {
                subsets.push(subset(Some(endpoint_port(sp, n))));
            }
        }
    }
    repack_subsets(&subsets)
}

/// A port's identity, ordered: name, port, protocol, appProtocol.
type PortKey = (String, i32, String, String);

fn port_key(p: &EndpointPort) -> PortKey {
    (
        p.name.clone().unwrap_or_default(),
        p.port,
        p.protocol.clone().unwrap_or_else(|| "TCP".to_owned()),
        p.app_protocol.clone().unwrap_or_default(),
    )
}

fn port_from_key(k: &PortKey) -> EndpointPort {
    EndpointPort {
        name: (!k.0.is_empty()).then(|| k.0.clone()),
        port: k.1,
        protocol: Some(k.2.clone()),
        app_protocol: (!k.3.is_empty()).then(|| k.3.clone()),
    }
}

/// An address's identity: IP and target UID (upstream `addressKey`), also its order.
type AddressKey = (String, String);

fn address_key(a: &EndpointAddress) -> AddressKey {
    let uid = a.target_ref.as_ref().and_then(|r| r.uid.clone());
    (a.ip.clone(), uid.unwrap_or_default())
}

/// Upstream `RepackSubsets`: expands the subsets to (address, port, ready) and packs them
/// again so that the ports reaching the same addresses (with the same readiness) share a
/// subset. An address not ready on a port in any input subset is not ready on it.
/// Addresses are sorted by IP and target UID, ports by name, number and protocol, subsets
/// by their ports; subsets without ports (headless Services) keep their addresses.
///
/// Upstream orders ports and subsets by a hash of their printed form, which cannot be
/// reproduced; this order is as stable.
pub fn repack_subsets(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let mut all: BTreeMap<AddressKey, EndpointAddress> = BTreeMap::new();
    // Port (None for "no ports") -> address -> ready.
    let mut by_port: BTreeMap<Option<PortKey>, BTreeMap<AddressKey, bool>> = BTreeMap::new();
    for subset in subsets {
        let ports: Vec<Option<PortKey>> = match subset.ports.as_deref() {
            Some(ps) if !ps.is_empty() => ps.iter().map(|p| Some(port_key(p))).collect(),
            _ => vec![None],
        };
        let ready = subset.addresses.iter().flatten().map(|a| (a, true));
        let not_ready = subset
            .not_ready_addresses
            .iter()
            .flatten()
            .map(|a| (a, false));
        for (address, is_ready) in ready.chain(not_ready) {
            let key = address_key(address);
            all.entry(key.clone()).or_insert_with(|| address.clone());
            for port in &ports {
                let entry = by_port.entry(port.clone()).or_default();
                let was = entry.entry(key.clone()).or_insert(is_ready);
                *was = *was && is_ready;
            }
        }
    }
    let mut by_addresses: BTreeMap<Vec<(AddressKey, bool)>, Vec<Option<PortKey>>> = BTreeMap::new();
    for (port, addresses) in by_port {
        by_addresses
            .entry(addresses.into_iter().collect())
            .or_default()
            .push(port);
    }
    let mut out: Vec<(Vec<Option<PortKey>>, EndpointSubset)> = by_addresses
        .into_iter()
        .map(|(addresses, mut ports)| {
            ports.sort();
            let pick = |want: bool| {
                let v: Vec<EndpointAddress> = addresses
                    .iter()
                    .filter(|(_, ready)| *ready == want)
                    .filter_map(|(k, _)| all.get(k).cloned())
                    .collect();
                (!v.is_empty()).then_some(v)
            };
            let real: Vec<EndpointPort> = ports.iter().flatten().map(port_from_key).collect();
            let subset = EndpointSubset {
                addresses: pick(true),
                not_ready_addresses: pick(false),
                ports: (!real.is_empty()).then_some(real),
            };
            (ports, subset)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, s)| s).collect()
}

/// The subsets in the form this controller writes them, to compare with what it wants:
/// empty lists absent, ports' protocol defaulted, no resourceVersion in target
/// references, no empty node names or hostnames.
pub(crate) fn normalize_subsets(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let addresses = |list: &Option<Vec<EndpointAddress>>| {
        let v: Vec<EndpointAddress> = list
            .iter()
            .flatten()
            .map(|a| {
                let mut a = a.clone();
                if let Some(r) = a.target_ref.as_mut() {
                    r.resource_version = None;
                }
                a.node_name = a.node_name.filter(|n| !n.is_empty());
                a.hostname = a.hostname.filter(|n| !n.is_empty());
                a
            })
            .collect();
        (!v.is_empty()).then_some(v)
    };
    subsets
        .iter()
        .map(|s| {
            let ports: Vec<EndpointPort> = s
                .ports
                .iter()
                .flatten()
                .map(|p| port_from_key(&port_key(p)))
                .collect();
            EndpointSubset {
                addresses: addresses(&s.addresses),
                not_ready_addresses: addresses(&s.not_ready_addresses),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

fn count_addresses(subsets: &[EndpointSubset]) -> (usize, usize) {
    subsets.iter().fold((0, 0), |(r, n), s| {
        (
            r + s.addresses.as_ref().map_or(0, Vec::len),
            n + s.not_ready_addresses.as_ref().map_or(0, Vec::len),
        )
    })
}

/// False when the subsets exceed [`MAX_CAPACITY`] (they must be truncated) or the
/// over-capacity annotation is set though they do not (upstream
/// `capacityAnnotationSetCorrectly`).
fn capacity_annotation_set_correctly(meta: &ObjectMeta, subsets: &[EndpointSubset]) -> bool {
    let (ready, not_ready) = count_addresses(subsets);
    if ready + not_ready > MAX_CAPACITY {
        return false;
    }
    !meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_OVER_CAPACITY))
}

/// Cuts the subsets to [`MAX_CAPACITY`] addresses (upstream `truncateEndpoints`):
/// not-ready addresses go first; each subset keeps its share, rounded up, of what
/// remains. True when something was cut.
pub fn truncate_subsets(mut subsets: Vec<EndpointSubset>) -> (Vec<EndpointSubset>, bool) {
    let (total_ready, total_not_ready) = count_addresses(&subsets);
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return (subsets, false);
    }
    let truncate_ready = total_ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready {
        (MAX_CAPACITY, total_ready)
    } else {
        (MAX_CAPACITY - total_ready, total_not_ready)
    };
    let mut can_add = max;
    for subset in &mut subsets {
        let list = if truncate_ready {
            subset.not_ready_addresses = None;
            &mut subset.addresses
        } else {
            &mut subset.not_ready_addresses
        };
        let n = list.as_ref().map_or(0, Vec::len);
        // ceil(n / total * max), in integers.
        let share = (n * max).div_ceil(total.max(1)).min(can_add);
        if let Some(v) = list.as_mut() {
            v.truncate(share);
            can_add -= v.len();
            if v.is_empty() {
                *list = None;
            }
        }
    }
    (subsets, true)
}

/// What the tracker remembers of a Service.
#[derive(Debug, Default)]
struct TriggerState {
    service: Option<Timestamp>,
    pods: HashMap<String, Timestamp>,
}

/// Computes the `endpoints.kubernetes.io/last-change-trigger-time` of a sync (upstream
/// `TriggerTimeTracker`): for a Service seen for the first time, its creation; later, the
/// earliest of the pod readiness transitions (the Ready condition's
/// `lastTransitionTime`) and Service creation that changed since the last sync.
#[derive(Debug, Default)]
pub struct TriggerTimeTracker {
    states: Mutex<HashMap<String, TriggerState>>,
}

impl TriggerTimeTracker {
    /// The trigger time of a sync of the Service `key` over `pods`; None when nothing
    /// known changed (the annotation is then removed). Updates the remembered state.
    pub fn compute(&self, key: &str, service: &Service, pods: &[Arc<Pod>]) -> Option<Timestamp> {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        let known = states.contains_key(key);
        let state = states.entry(key.to_owned()).or_default();
        let mut min: Option<Timestamp> = None;
        let mut seen = HashMap::new();
        for pod in pods {
            let Some(t) = ready_condition(pod).and_then(|c| c.last_transition_time.as_ref()) else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state.pods.get(&name).is_none_or(|last| t.0 > *last) {
                min = Some(min.map_or(t.0, |m| m.min(t.0)));
            }
            seen.insert(name, t.0);
        }
        let created = service.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(c) = created
            && state.service.is_none_or(|last| c > last)
        {
            min = Some(min.map_or(c, |m| m.min(c)));
        }
        state.pods = seen;
        state.service = created;
        if known { min } else { created }
    }

    /// Forgets the Service `key`.
    pub fn delete(&self, key: &str) {
        self.states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;

    /// A Running pod `name` on node `n1` with IP `ip`, Ready or not, labelled app=web,
    /// with the container port `http` 8080 and `metrics` 9090.
    pub(crate) fn pod(name: &str, ip: &str, ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                uid: Some(format!("uid-{name}")),
                labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                resource_version: Some("1".to_owned()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".to_owned()),
                containers: vec![Container {
                    name: "c".to_owned(),
                    ports: Some(vec![
                        ContainerPort {
                            name: Some("http".to_owned()),
                            container_port: 8080,
                            ..Default::default()
                        },
                        ContainerPort {
                            name: Some("metrics".to_owned()),
                            container_port: 9090,
                            protocol: Some("TCP".to_owned()),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".to_owned()),
                pod_ip: Some(ip.to_owned()),
                pod_ips: Some(vec![PodIP { ip: ip.to_owned() }]),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".to_owned(),
                    status: if ready { "True" } else { "False" }.to_owned(),
                    last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// The Service `web` in `ns` selecting app=web, with the given ports JSON.
    pub(crate) fn service(ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid",
                         "labels": {"team": "a"}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10",
                     "ipFamilies": ["IPv4"], "ports": ports},
        }))
        .unwrap()
    }

    fn arcs(pods: Vec<Pod>) -> Vec<Arc<Pod>> {
        pods.into_iter().map(Arc::new).collect()
    }

    fn ips(list: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
        list.iter().flatten().map(|a| a.ip.as_str()).collect()
    }

    #[test]
    fn ports_resolve_by_number_and_by_name() {
        let p = pod("a", "10.0.0.1", true);
        let sp = |v: serde_json::Value| -> ServicePort { serde_json::from_value(v).unwrap() };
        assert_eq!(
            find_port(&p, &sp(json!({"port": 80, "targetPort": 81}))),
            Some(81)
        );
        assert_eq!(find_port(&p, &sp(json!({"port": 80}))), Some(80));
        assert_eq!(
            find_port(&p, &sp(json!({"port": 80, "targetPort": "http"}))),
            Some(8080)
        );
        assert_eq!(
            find_port(&p, &sp(json!({"port": 80, "targetPort": "metrics"}))),
            Some(9090)
        );
        // No such name, or not with that protocol.
        assert_eq!(
            find_port(&p, &sp(json!({"port": 80, "targetPort": "grpc"}))),
            None
        );
        let udp = json!({"port": 80, "targetPort": "http", "protocol": "UDP"});
        assert_eq!(find_port(&p, &sp(udp)), None);
    }

    #[test]
    fn ready_and_not_ready_addresses_share_a_subset() {
        let svc = service(json!([{"name": "http", "port": 80, "targetPort": "http"}]));
        let pods = arcs(vec![
            pod("b", "10.0.0.2", false),
            pod("a", "10.0.0.1", true),
            pod("c", "10.0.0.3", true),
        ]);
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1", "10.0.0.3"]);
        assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.2"]);
        let port = &subsets[0].ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("http"), 8080));
        let a = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(a.node_name.as_deref(), Some("n1"));
        let r = a.target_ref.as_ref().unwrap();
        assert_eq!(
            (r.kind.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("Pod"), Some("a"), Some("uid-a"))
        );
    }

    #[test]
    fn publish_not_ready_addresses_lists_every_pod_as_ready() {
        let mut svc = service(json!([{"port": 80, "targetPort": 8080}]));
        svc.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        let mut terminating = pod("t", "10.0.0.4", true);
        terminating.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let pods = arcs(vec![pod("b", "10.0.0.2", false), terminating]);
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.2", "10.0.0.4"]);
        assert!(subsets[0].not_ready_addresses.is_none());
    }

    #[test]
    fn pods_without_ip_ended_or_terminating_are_left_out() {
        let svc = service(json!([{"port": 80}]));
        let mut no_ip = pod("a", "10.0.0.1", true);
        no_ip.status.as_mut().unwrap().pod_ip = None;
        no_ip.status.as_mut().unwrap().pod_ips = None;
        let mut done = pod("b", "10.0.0.2", true);
        done.status.as_mut().unwrap().phase = Some("Succeeded".to_owned());
        let mut terminating = pod("c", "10.0.0.3", true);
        terminating.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let pods = arcs(vec![no_ip, done, terminating, pod("d", "10.0.0.4", true)]);
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.4"]);
    }

    #[test]
    fn a_pod_without_the_named_port_gets_its_own_subset() {
        let svc = service(json!([
            {"name": "http", "port": 80, "targetPort": "http"},
            {"name": "grpc", "port": 81, "targetPort": "grpc"},
        ]));
        let mut with_grpc = pod("a", "10.0.0.1", true);
        with_grpc.spec.as_mut().unwrap().containers[0]
            .ports
            .as_mut()
            .unwrap()
            .push(ContainerPort {
                name: Some("grpc".to_owned()),
                container_port: 7000,
                ..Default::default()
            });
        let pods = arcs(vec![with_grpc, pod("b", "10.0.0.2", true)]);
        let subsets = desired_subsets(&svc, &pods);
        assert_eq!(subsets.len(), 2, "{subsets:?}");
        let names = |s: &EndpointSubset| -> Vec<String> {
            s.ports
                .iter()
                .flatten()
                .map(|p| p.name.clone().unwrap_or_default())
                .collect()
        };
        // Ordered by ports: grpc alone (pod a), then http (both pods).
        assert_eq!(names(&subsets[0]), ["grpc"]);
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1"]);
        assert_eq!(names(&subsets[1]), ["http"]);
        assert_eq!(ips(&subsets[1].addresses), ["10.0.0.1", "10.0.0.2"]);
    }

    #[test]
    fn repacking_merges_ports_and_sorts() {
        let addr = |ip: &str, uid: &str| EndpointAddress {
            ip: ip.to_owned(),
            target_ref: Some(ObjectReference {
                uid: Some(uid.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let port = |name: &str, n: i32| EndpointPort {
            name: Some(name.to_owned()),
            port: n,
            protocol: Some("TCP".to_owned()),
            app_protocol: None,
        };
        let input = vec![
            EndpointSubset {
                addresses: Some(vec![addr("10.0.0.9", "z"), addr("10.0.0.1", "a")]),
                ports: Some(vec![port("b", 2)]),
                ..Default::default()
            },
            EndpointSubset {
                addresses: Some(vec![addr("10.0.0.1", "a")]),
                not_ready_addresses: Some(vec![addr("10.0.0.9", "z")]),
                ports: Some(vec![port("a", 1)]),
            },
            // Not ready on b in one subset: not ready on b.
            EndpointSubset {
                not_ready_addresses: Some(vec![addr("10.0.0.9", "z")]),
                ports: Some(vec![port("b", 2)]),
                ..Default::default()
            },
        ];
        let out = repack_subsets(&input);
        assert_eq!(out.len(), 1, "{out:?}");
        let ports: Vec<i32> = out[0].ports.iter().flatten().map(|p| p.port).collect();
        assert_eq!(ports, [1, 2]);
        assert_eq!(ips(&out[0].addresses), ["10.0.0.1"]);
        assert_eq!(ips(&out[0].not_ready_addresses), ["10.0.0.9"]);
        // The order of the input does not matter.
        let mut reversed = input.clone();
        reversed.reverse();
        assert_eq!(repack_subsets(&reversed), out);
        // Same IP, two pods (two UIDs): two addresses.
        let twins = vec![EndpointSubset {
            addresses: Some(vec![addr("10.0.0.1", "b"), addr("10.0.0.1", "a")]),
            ports: Some(vec![port("a", 1)]),
            ..Default::default()
        }];
        let out = repack_subsets(&twins);
        let uids: Vec<&str> = out[0]
            .addresses
            .iter()
            .flatten()
            .filter_map(|a| a.target_ref.as_ref()?.uid.as_deref())
            .collect();
        assert_eq!(uids, ["a", "b"]);
    }

    #[test]
    fn headless_without_ports_keeps_addresses() {
        let mut svc = service(json!([]));
        svc.spec.as_mut().unwrap().cluster_ip = Some("None".to_owned());
        let mut p = pod("a", "10.0.0.1", true);
        p.spec.as_mut().unwrap().hostname = Some("host-a".to_owned());
        p.spec.as_mut().unwrap().subdomain = Some("web".to_owned());
        let subsets = desired_subsets(&svc, &arcs(vec![p]));
        assert_eq!(subsets.len(), 1);
        assert!(subsets[0].ports.is_none());
        let a = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(a.hostname.as_deref(), Some("host-a"));
        assert!(endpoints_labels(&svc).contains_key(LABEL_HEADLESS));
        assert!(!endpoints_labels(&service(json!([]))).contains_key(LABEL_HEADLESS));
    }

    #[test]
    fn subsets_read_back_compare_equal() {
        let svc = service(json!([{"name": "http", "port": 80, "targetPort": "http"}]));
        let pods = arcs(vec![
            pod("a", "10.0.0.1", true),
            pod("b", "10.0.0.2", false),
        ]);
        let want = desired_subsets(&svc, &pods);
        // As the API server returns it: the pod's resourceVersion in the references is
        // ignored, and so is the order of the pods.
        let mut back: Vec<EndpointSubset> =
            serde_json::from_value(serde_json::to_value(&want).unwrap()).unwrap();
        back[0].addresses.as_mut().unwrap()[0]
            .target_ref
            .as_mut()
            .unwrap()
            .resource_version = Some("7".to_owned());
        assert_eq!(normalize_subsets(&back), want);
        let mut reordered = pods.clone();
        reordered.reverse();
        assert_eq!(desired_subsets(&svc, &reordered), want);
    }

    #[test]
    fn truncation_keeps_ready_addresses_first() {
        let addrs = |n: usize, base: usize| {
            (0..n)
                .map(|i| EndpointAddress {
                    ip: format!("10.{}.{}.{}", base, i / 256, i % 256),
                    ..Default::default()
                })
                .collect::<Vec<_>>()
        };
        let subsets = vec![
            EndpointSubset {
                addresses: Some(addrs(600, 1)),
                not_ready_addresses: Some(addrs(300, 2)),
                ..Default::default()
            },
            EndpointSubset {
                addresses: Some(addrs(200, 3)),
                not_ready_addresses: Some(addrs(100, 4)),
                ..Default::default()
            },
        ];
        let (out, truncated) = truncate_subsets(subsets.clone());
        assert!(truncated);
        let (ready, not_ready) = count_addresses(&out);
        assert_eq!((ready, not_ready), (800, 200));
        assert_eq!(out[0].not_ready_addresses.as_ref().map(Vec::len), Some(150));
        let (small, truncated) = truncate_subsets(subsets[1..].to_vec());
        assert!(!truncated);
        assert_eq!(small, subsets[1..]);
    }

    #[test]
    fn trigger_time_is_creation_then_changed_readiness() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let mut svc = service(json!([{"port": 80}]));
        svc.metadata.creation_timestamp = Some(Time(t(100)));
        let tracker = TriggerTimeTracker::default();
        let mut a = pod("a", "10.0.0.1", true);
        let set = |p: &mut Pod, s: i64| {
            p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time =
                Some(Time(t(s)));
        };
        set(&mut a, 200);
        assert_eq!(
            tracker.compute("ns/web", &svc, &arcs(vec![a.clone()])),
            Some(t(100))
        );
        assert_eq!(
            tracker.compute("ns/web", &svc, &arcs(vec![a.clone()])),
            None
        );
        set(&mut a, 300);
        let mut b = pod("b", "10.0.0.2", true);
        set(&mut b, 250);
        assert_eq!(
            tracker.compute("ns/web", &svc, &arcs(vec![a, b])),
            Some(t(250))
        );
    }
}
