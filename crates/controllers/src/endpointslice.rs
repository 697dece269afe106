//! The EndpointSlice controller (upstream `pkg/controller/endpointslice` with the
//! `k8s.io/endpointslice` reconciler): every Service with a selector gets EndpointSlices
//! listing the pods the selector matches, per address type of the Service (`IPv4`,
//! `IPv6`) and per distinct set of resolved ports.
//!
//! Slices are named `<service>-<random>`, labelled `kubernetes.io/service-name` and
//! `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io` (plus the
//! Service's labels and `service.kubernetes.io/headless` for a headless Service), and
//! controlled by the Service (so the garbage collector removes them with it). An endpoint
//! is a pod with an IP that has not ended, terminating ones included: its addresses of
//! the slice's type, `conditions` (`serving`: Ready; `terminating`: being deleted;
//! `ready`: serving and not terminating, or always with `publishNotReadyAddresses`),
//! `nodeName`, `zone` (its node's `topology.kubernetes.io/zone`), `targetRef` and
//! `hostname`. Ports resolve as for Endpoints ([`crate::endpoint::find_port`]).
//!
//! The reconciler ([`reconcile`]) is upstream's: endpoints stay in the slice that holds
//! them (updated in place when they change), slices that lose endpoints are refilled
//! first, then the remainder goes into an unchanged slice it fits in or into new slices
//! of at most `--max-endpoints-per-slice` (default 100); a slice left empty is deleted or,
//! when a slice would be created meanwhile, reused. A Service without endpoints keeps one
//! empty placeholder slice. Nothing is written when nothing changed. A tracker of the
//! generations written keeps the controller from acting on a cache that has not yet seen
//! its own writes (upstream `EndpointSliceTracker`). Event: `FailedToUpdateEndpointSlices`
//! on the Service, from `endpoint-slice-controller`.
//!
//! Not done: topology hints (`service.kubernetes.io/topology-mode`,
//! `trafficDistribution`), upstream's metrics, and the batching of pod updates
//! (`--endpoint-updates-batch-period`); node changes do not queue Services (upstream only
//! watches nodes for hints), so a pod whose node is not yet known is retried with backoff.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use skiff_api::core::pod::conditions::is_pod_ready;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::events::{EventDetails, EventRecorder, reference};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{controller_ref, run_controller};
use crate::endpoint::{
    LABEL_HEADLESS, STALE_RETRY, TriggerTimeTracker, find_port, format_time, is_service_ip_set,
    namespace_terminating, pod_reference, should_pod_be_in_endpoints, should_set_hostname,
};
use crate::endpointslice_util::{
    pod_ips, queue_service_and_pod_changes, selected_pods, service_selector,
};

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "endpointslice-controller";
/// The events' source (upstream's recorder component).
pub const EVENT_SOURCE: &str = "endpoint-slice-controller";
/// The label naming a slice's Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming a slice's manager.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`] on the slices this controller manages.
pub const MANAGED_BY_VALUE: &str = "endpointslice-controller.k8s.io";
/// `--max-endpoints-per-slice`'s default.
pub const DEFAULT_MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// The node label giving an endpoint's zone.
const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// The tracked generation of a slice this controller deleted.
const DELETION_EXPECTED: i64 = -1;

/// The EndpointSlice controller; see the module doc.
pub struct EndpointSliceController {
    client: kube::Client,
    services: Arc<SharedInformer<Service>>,
    pods: Arc<SharedInformer<Pod>>,
    nodes: Arc<SharedInformer<Node>>,
    slices: Arc<SharedInformer<EndpointSlice>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
    triggers: TriggerTimeTracker,
    tracker: Arc<SliceTracker>,
    max_endpoints: usize,
}

impl std::fmt::Debug for EndpointSliceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSliceController")
            .field("max_endpoints", &self.max_endpoints)
            .finish_non_exhaustive()
    }
}

impl EndpointSliceController {
    /// The controller over the factory's Service, Pod, Node and EndpointSlice informers,
    /// its handlers registered; `max_endpoints` is `--max-endpoints-per-slice` (at least
    /// 1).
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
        max_endpoints: usize,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new("endpoint_slice").with_metrics(queue_metrics));
        let services = factory.informer::<Service>();
        let pods = factory.informer::<Pod>();
        let nodes = factory.informer::<Node>();
        let slices = factory.informer::<EndpointSlice>();
        let tracker = Arc::new(SliceTracker::default());
        queue_service_and_pod_changes(&services, &pods, &queue);
        let q = Arc::clone(&queue);
        let t = Arc::clone(&tracker);
        slices.add_event_handler(Box::new(move |d| {
            let queue_for = |s: &EndpointSlice| {
                if let Some(key) = service_key(s) {
                    q.add(key);
                }
            };
            match d {
                Delta::Added(s) => {
                    if managed(s) && t.should_sync(s) {
                        queue_for(s);
                    }
                }
                Delta::Updated(old, new) => {
                    if managed(old) != managed(new) {
                        queue_for(old);
                        queue_for(new);
                    } else if managed(new) && t.should_sync(new) {
                        queue_for(new);
                    }
                }
                // A slice deleted by someone else is put back.
                Delta::Deleted(s) => {
                    if managed(s) && t.has(s) && !t.handle_deletion(s) {
                        queue_for(s);
                    }
                }
            }
        }));
        Arc::new(Self {
            client,
            services,
            pods,
            nodes,
            slices,
            queue,
            recorder,
            triggers: TriggerTimeTracker::default(),
            tracker,
            max_endpoints: max_endpoints.max(1),
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-service-endpoint-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.services, &*self.pods, &*self.nodes, &*self.slices],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    /// One sync of the Service `key` (upstream `syncService` and `Reconcile`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let Some(service) = self.services.store().get(key) else {
            // Its slices go with it through their owner reference.
            self.triggers.delete(key);
            self.tracker.delete_service(key);
            return Ok(());
        };
        let spec = service.spec.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") {
            return Ok(());
        }
        let Some(selector) = service_selector(&service) else {
            return Ok(());
        };
        let pods = selected_pods(self.pods.store(), ns, &selector);
        let slices: Vec<Arc<EndpointSlice>> = self
            .slices
            .store()
            .list()
            .into_iter()
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(ns)
                    && managed(s)
                    && label(s, LABEL_SERVICE_NAME) == Some(name)
            })
            .collect();
        if self.tracker.stale(key, &slices) {
            tracing::debug!(service = key, "the EndpointSlice cache is behind; retrying");
            self.queue.add_after(key.to_owned(), STALE_RETRY);
            return Ok(());
        }
        let trigger = self.triggers.compute(key, &service, &pods);
        let nodes = self.nodes.store();
        let zone_of = |node: &str| {
            let n = nodes.get(node)?;
            Some(
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_ZONE))
                    .filter(|z| !z.is_empty())
                    .cloned(),
            )
        };
        let (plan, missing) = reconcile(&service, &pods, &slices, &zone_of, self.max_endpoints);
        if let Err(e) = self.finalize(&service, plan, trigger).await {
            if !e.is_conflict() {
                let note = format!(
                    "Error updating Endpoint Slices for Service {key}: {}",
                    e.message()
                );
                self.recorder.eventf(
                    reference(service.as_ref()),
                    None,
                    EventDetails {
                        type_: "Warning",
                        reason: "FailedToUpdateEndpointSlices",
                        action: "Sync",
                        note: &note,
                    },
                );
            }
            return Err(e);
        }
        if !missing.is_empty() {
            return Err(Error::Invalid(missing.join("; ")));
        }
        Ok(())
    }

    /// Writes the plan: creates (none while the Service is being deleted, so as not to
    /// race the garbage collector), updates, deletes (upstream `finalize`).
    async fn finalize(
        &self,
        service: &Service,
        plan: Plan,
        trigger: Option<k8s_openapi::jiff::Timestamp>,
    ) -> Result<(), Error> {
        let ns = service.metadata.namespace.as_deref().unwrap_or("");
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        let pp = PostParams::default();
        let stamp = |s: &mut EndpointSlice| {
            let mut annotations = s.metadata.annotations.take().unwrap_or_default();
            match trigger {
                Some(t) => annotations.insert(
                    crate::endpoint::ANNOTATION_TRIGGER_TIME.to_owned(),
                    format_time(t),
                ),
                None => annotations.remove(crate::endpoint::ANNOTATION_TRIGGER_TIME),
            };
            s.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
        };
        if service.metadata.deletion_timestamp.is_none() {
            for mut slice in plan.create {
                stamp(&mut slice);
                match api.create(&pp, &slice).await {
                    Ok(created) => self.tracker.update(&created),
                    Err(e) if namespace_terminating(&e) => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for mut slice in plan.update {
            stamp(&mut slice);
            let name = slice.metadata.name.clone().unwrap_or_default();
            let updated = api.replace(&name, &pp, &slice).await?;
            self.tracker.update(&updated);
        }
        for slice in plan.delete {
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => self.tracker.expect_deletion(&slice),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

fn label<'a>(s: &'a EndpointSlice, key: &str) -> Option<&'a str> {
    s.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// True for a slice this controller manages.
fn managed(s: &EndpointSlice) -> bool {
    label(s, LABEL_MANAGED_BY) == Some(MANAGED_BY_VALUE)
}

/// The key of the slice's Service, from its service-name label.
fn service_key(s: &EndpointSlice) -> Option<String> {
    let name = label(s, LABEL_SERVICE_NAME).filter(|n| !n.is_empty())?;
    Some(format!(
        "{}/{name}",
        s.metadata.namespace.as_deref().unwrap_or("")
    ))
}

/// The slices to create, update and delete.
#[derive(Debug, Default)]
pub struct Plan {
    /// New slices (no name: `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices as they are to be (with their resourceVersion).
    pub update: Vec<EndpointSlice>,
    /// Slices to delete.
    pub delete: Vec<EndpointSlice>,
}

/// The address types of the Service's slices (upstream `getAddressTypesForService`): its
/// IP families; without them, that of its cluster IP, or both for a headless Service.
pub fn address_types(service: &Service) -> BTreeSet<&'static str> {
    let spec = service.spec.as_ref();
    let mut types: BTreeSet<&'static str> = spec
        .and_then(|s| s.ip_families.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some("IPv4"),
            "IPv6" => Some("IPv6"),
            _ => None,
        })
        .collect();
    if !types.is_empty() {
        return types;
    }
    if is_service_ip_set(service) {
        let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
        types.insert(if crate::endpoint::is_ipv6(ip) {
            "IPv6"
        } else {
            "IPv4"
        });
    } else {
        types.extend(["IPv4", "IPv6"]);
    }
    types
}

/// The slice ports the Service's ports give on `pod` (upstream `getEndpointPorts`):
/// those that resolve, named (`""` when unnamed) and with their protocol, in a stable
/// order.
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let mut ports: Vec<EndpointPort> = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            let n = find_port(pod, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(n),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".to_owned())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect();
    ports.sort_by_key(port_key);
    ports
}

/// A slice port's identity: name, port, protocol, appProtocol (defaults applied).
type PortKey = (String, Option<i32>, String, String);

fn port_key(p: &EndpointPort) -> PortKey {
    (
        p.name.clone().unwrap_or_default(),
        p.port,
        p.protocol.clone().unwrap_or_else(|| "TCP".to_owned()),
        p.app_protocol.clone().unwrap_or_default(),
    )
}

/// The identity of a set of ports (upstream `PortMapKey`), whatever their order.
fn ports_key(ports: &[EndpointPort]) -> Vec<PortKey> {
    let mut keys: Vec<PortKey> = ports.iter().map(port_key).collect();
    keys.sort();
    keys
}

/// An endpoint's identity (upstream `hashEndpoint`): its addresses, hostname and target.
type EndpointKey = (Vec<String>, String, String, String);

fn endpoint_key(ep: &Endpoint) -> EndpointKey {
    let mut addresses = ep.addresses.clone();
    addresses.sort();
    let r = ep.target_ref.as_ref();
    (
        addresses,
        ep.hostname.clone().unwrap_or_default(),
        r.and_then(|r| r.namespace.clone()).unwrap_or_default(),
        r.and_then(|r| r.name.clone()).unwrap_or_default(),
    )
}

/// The endpoint as compared: addresses sorted, no resourceVersion in the target, no
/// empty strings.
fn normalized(ep: &Endpoint) -> Endpoint {
    let mut ep = ep.clone();
    ep.addresses.sort();
    if let Some(r) = ep.target_ref.as_mut() {
        r.resource_version = None;
    }
    ep.node_name = ep.node_name.filter(|n| !n.is_empty());
    ep.zone = ep.zone.filter(|n| !n.is_empty());
    ep.hostname = ep.hostname.filter(|n| !n.is_empty());
    ep
}

/// The endpoint the pod gives in a slice of `address_type` (upstream `podToEndpoint`);
/// `zone` is its node's.
pub fn pod_to_endpoint(
    pod: &Pod,
    zone: Option<String>,
    service: &Service,
    address_type: &str,
) -> Endpoint {
    let serving = is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let publish = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let addresses = pod_ips(pod)
        .iter()
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .filter(|ip| ip.is_ipv6() == (address_type == "IPv6"))
        .map(|ip| ip.to_string())
        .collect();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    Endpoint {
        addresses,
        conditions: Some(EndpointConditions {
            ready: Some(publish || (serving && !terminating)),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        target_ref: Some(pod_reference(pod)),
        node_name: node.filter(|n| !n.is_empty()),
        zone,
        hostname: should_set_hostname(pod, service)
            .then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone()))
            .flatten(),
        deprecated_topology: None,
        hints: None,
    }
}

/// The labels a slice of `service` carries, and whether the non-reserved ones differ from
/// `slice`'s (upstream `setEndpointSliceLabels`): the Service's labels but the reserved
/// ones, [`LABEL_HEADLESS`] for a headless Service, the service-name and managed-by
/// labels.
fn slice_labels(slice: &EndpointSlice, service: &Service) -> (BTreeMap<String, String>, bool) {
    let reserved =
        |k: &str| k == LABEL_SERVICE_NAME || k == LABEL_MANAGED_BY || k == LABEL_HEADLESS;
    let own: BTreeMap<String, String> = slice
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut labels: BTreeMap<String, String> = service
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let changed = own != labels;
    if !is_service_ip_set(service) {
        labels.insert(LABEL_HEADLESS.to_owned(), String::new());
    }
    labels.insert(
        LABEL_SERVICE_NAME.to_owned(),
        service.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned());
    (labels, changed)
}

/// A new, empty slice of the Service (upstream `newEndpointSlice`).
fn new_slice(service: &Service, ports: &[EndpointPort], address_type: &str) -> EndpointSlice {
    let mut slice = EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                service.metadata.name.as_deref().unwrap_or("")
            )),
            namespace: service.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref(&service.metadata, "v1", "Service")]),
            ..Default::default()
        },
        address_type: address_type.to_owned(),
        endpoints: Some(Vec::new()),
        ports: Some(ports.to_vec()),
    };
    slice.metadata.labels = Some(slice_labels(&slice, service).0);
    slice
}

/// True when the slice is controlled by this very Service (its UID).
fn owned_by(slice: &EndpointSlice, service: &Service) -> bool {
    slice.metadata.owner_references.iter().flatten().any(|r| {
        Some(&r.uid) == service.metadata.uid.as_ref()
            && r.kind == "Service"
            && r.api_version == "v1"
    })
}

/// True when `existing` is the placeholder `placeholder` would be: same namespace,
/// labels, owners and address type, no ports, no endpoints.
fn same_placeholder(existing: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    existing.metadata.namespace == placeholder.metadata.namespace
        && existing.metadata.labels == placeholder.metadata.labels
        && existing.metadata.owner_references == placeholder.metadata.owner_references
        && existing.address_type == placeholder.address_type
        && existing.ports.as_ref().is_none_or(Vec::is_empty)
        && existing.endpoints.as_ref().is_none_or(Vec::is_empty)
}

/// Node lookup: None when the node is unknown, else its zone (if labelled).
pub type ZoneOf<'a> = dyn Fn(&str) -> Option<Option<String>> + 'a;

/// Computes the slices the Service should have from its pods and its existing (managed)
/// slices (upstream `Reconciler.Reconcile`). Also returns the pods left out because
/// their node is unknown (the sync is retried for them, as upstream).
pub fn reconcile(
    service: &Service,
    pods: &[Arc<Pod>],
    existing: &[Arc<EndpointSlice>],
    zone_of: &ZoneOf<'_>,
    max_endpoints: usize,
) -> (Plan, Vec<String>) {
    let types = address_types(service);
    let mut sorted: Vec<&EndpointSlice> = existing.iter().map(AsRef::as_ref).collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut plan = Plan::default();
    let mut unsupported = Vec::new();
    let mut missing = Vec::new();
    for t in &types {
        let of_type: Vec<&EndpointSlice> = sorted
            .iter()
            .copied()
            .filter(|s| s.address_type == *t)
            .collect();
        let p = reconcile_address_type(
            service,
            pods,
            &of_type,
            t,
            zone_of,
            max_endpoints.max(1),
            &mut missing,
        );
        plan.create.extend(p.create);
        plan.update.extend(p.update);
        plan.delete.extend(p.delete);
    }
    for s in sorted {
        if !types.contains(s.address_type.as_str()) {
            unsupported.push(s.clone());
        }
    }
    plan.delete.extend(unsupported);
    missing.sort();
    missing.dedup();
    (plan, missing)
}

/// [`reconcile`] for one address type (upstream `reconcileByAddressType`, with the
/// create-to-update conversion of `finalize`).
fn reconcile_address_type(
    service: &Service,
    pods: &[Arc<Pod>],
    existing: &[&EndpointSlice],
    address_type: &str,
    zone_of: &ZoneOf<'_>,
    max: usize,
    missing: &mut Vec<String>,
) -> Plan {
    let publish = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let mut delete: Vec<EndpointSlice> = Vec::new();
    let mut existing_by_ports: BTreeMap<Vec<PortKey>, Vec<&EndpointSlice>> = BTreeMap::new();
    for s in existing {
        if owned_by(s, service) {
            let key = ports_key(s.ports.as_deref().unwrap_or_default());
            existing_by_ports.entry(key).or_default().push(s);
        } else {
            delete.push((*s).clone());
        }
    }
    type Desired = (Vec<EndpointPort>, BTreeMap<EndpointKey, Endpoint>);
    let mut desired: BTreeMap<Vec<PortKey>, Desired> = BTreeMap::new();
    for pod in pods {
        if !should_pod_be_in_endpoints(pod, true) {
            continue;
        }
        let ports = endpoint_ports(service, pod);
        let entry = desired
            .entry(ports_key(&ports))
            .or_insert_with(|| (ports, BTreeMap::new()));
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        let zone = match zone_of(node) {
            Some(zone) => zone,
            None if publish => None,
            None => {
                missing.push(format!(
                    "skipping pod {} for service {}: node {node:?} not found",
                    pod.metadata.name.as_deref().unwrap_or(""),
                    service.metadata.name.as_deref().unwrap_or(""),
                ));
                continue;
            }
        };
        let ep = pod_to_endpoint(pod, zone, service, address_type);
        if !ep.addresses.is_empty() {
            entry.1.insert(endpoint_key(&ep), ep);
        }
    }
    let mut create = Vec::new();
    let mut update = Vec::new();
    for (key, (ports, mut eps)) in desired {
        let slices = existing_by_ports.remove(&key).unwrap_or_default();
        let p = reconcile_ports(service, &slices, &mut eps, &ports, address_type, max);
        create.extend(p.create);
        update.extend(p.update);
        delete.extend(p.delete);
    }
    // Port sets no pod gives any more.
    for slices in existing_by_ports.into_values() {
        delete.extend(slices.into_iter().cloned());
    }
    // A Service without endpoints keeps one empty placeholder slice.
    if existing.len() == delete.len() && create.is_empty() {
        let placeholder = new_slice(service, &[], address_type);
        if delete.len() == 1 && same_placeholder(&delete[0], &placeholder) {
            delete.clear();
        } else {
            create.push(placeholder);
        }
    }
    // Rather than create one slice and delete another, reuse the one to be deleted.
    let mut i = 0;
    while i < delete.len() && !create.is_empty() {
        if delete[i].address_type == address_type && owned_by(&delete[i], service) {
            let old = delete.remove(i);
            if let Some(mut slice) = create.pop() {
                let mut meta = old.metadata;
                meta.labels = slice.metadata.labels.take();
                meta.owner_references = slice.metadata.owner_references.take();
                meta.annotations = None;
                slice.metadata = meta;
                update.push(slice);
            }
        } else {
            i += 1;
        }
    }
    Plan {
        create,
        update,
        delete,
    }
}

/// The slices of one port set (upstream `reconcileByPortMapping`): 1. keep the desired
/// endpoints where they are (updating those that changed, dropping the others, fixing
/// the labels); 2. top up the slices being updated, fullest first; 3. put the rest in
/// the unchanged slice it fits best, or in new slices.
fn reconcile_ports(
    service: &Service,
    existing: &[&EndpointSlice],
    desired: &mut BTreeMap<EndpointKey, Endpoint>,
    ports: &[EndpointPort],
    address_type: &str,
    max: usize,
) -> Plan {
    let mut by_name: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut unchanged: BTreeSet<String> = BTreeSet::new();
    let mut to_update: BTreeSet<String> = BTreeSet::new();
    let mut to_delete: BTreeSet<String> = BTreeSet::new();
    for s in existing {
        let name = s.metadata.name.clone().unwrap_or_default();
        let current = s.endpoints.as_deref().unwrap_or_default();
        let mut kept = Vec::new();
        let mut changed = false;
        for ep in current {
            if let Some(want) = desired.remove(&endpoint_key(ep)) {
                changed |= normalized(&want) != normalized(ep);
                kept.push(want);
            }
        }
        let (labels, labels_changed) = slice_labels(s, service);
        let mut slice = (*s).clone();
        if changed || kept.len() != current.len() {
            if kept.is_empty() {
                to_delete.insert(name.clone());
            } else {
                slice.endpoints = Some(kept);
                slice.metadata.labels = Some(labels);
                to_update.insert(name.clone());
            }
        } else if labels_changed {
            slice.metadata.labels = Some(labels);
            to_update.insert(name.clone());
        } else {
            unchanged.insert(name.clone());
        }
        by_name.insert(name, slice);
    }
    let len = |s: &EndpointSlice| s.endpoints.as_ref().map_or(0, Vec::len);
    let fill = |slice: &mut EndpointSlice, desired: &mut BTreeMap<EndpointKey, Endpoint>| {
        let eps = slice.endpoints.get_or_insert_with(Vec::new);
        while eps.len() < max {
            let Some((_, ep)) = desired.pop_first() else {
                break;
            };
            eps.push(ep);
        }
    };
    if !desired.is_empty() && !to_update.is_empty() {
        let mut names: Vec<&String> = to_update.iter().collect();
        names.sort_by_key(|n| std::cmp::Reverse(by_name.get(*n).map_or(0, len)));
        for n in names {
            if let Some(slice) = by_name.get_mut(n) {
                fill(slice, desired);
            }
        }
    }
    let mut create = Vec::new();
    while !desired.is_empty() {
        let mut target: Option<String> = None;
        if desired.len() < max {
            // The unchanged slice closest to full once the rest is added.
            let mut closest = max;
            for n in &unchanged {
                let room = by_name.get(n).map_or(0, len) + desired.len();
                if room <= max && max - room < closest {
                    closest = max - room;
                    target = Some(n.clone());
                }
            }
        }
        match target.and_then(|n| by_name.get_mut(&n).map(|s| (n, s))) {
            Some((n, slice)) => {
                fill(slice, desired);
                unchanged.remove(&n);
                to_update.insert(n);
            }
            None => {
                let mut slice = new_slice(service, ports, address_type);
                fill(&mut slice, desired);
                create.push(slice);
            }
        }
    }
    let pick = |names: &BTreeSet<String>| -> Vec<EndpointSlice> {
        names
            .iter()
            .filter_map(|n| by_name.get(n).cloned())
            .collect()
    };
    Plan {
        update: pick(&to_update),
        delete: pick(&to_delete),
        create,
    }
}

/// The generations of the slices this controller wrote, per Service (upstream
/// `EndpointSliceTracker`): a cache that has not seen them yet is stale, and the watch
/// events of the controller's own writes do not queue the Service again.
#[derive(Debug, Default)]
pub struct SliceTracker {
    generations: Mutex<HashMap<String, HashMap<String, i64>>>,
}

fn uid(s: &EndpointSlice) -> String {
    s.metadata.uid.clone().unwrap_or_default()
}

impl SliceTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, i64>>> {
        self.generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a slice as written.
    pub fn update(&self, s: &EndpointSlice) {
        if let Some(key) = service_key(s) {
            let generation = s.metadata.generation.unwrap_or(0);
            self.lock()
                .entry(key)
                .or_default()
                .insert(uid(s), generation);
        }
    }

    /// Records a slice as deleted.
    pub fn expect_deletion(&self, s: &EndpointSlice) {
        if let Some(key) = service_key(s) {
            self.lock()
                .entry(key)
                .or_default()
                .insert(uid(s), DELETION_EXPECTED);
        }
    }

    /// True when the slice is tracked.
    pub fn has(&self, s: &EndpointSlice) -> bool {
        service_key(s).is_some_and(|key| {
            self.lock()
                .get(&key)
                .is_some_and(|g| g.contains_key(&uid(s)))
        })
    }

    /// True when the slice changed beyond what this controller wrote (untracked, or a
    /// newer generation).
    pub fn should_sync(&self, s: &EndpointSlice) -> bool {
        let Some(key) = service_key(s) else {
            return false;
        };
        let generations = self.lock();
        let tracked = generations.get(&key).and_then(|g| g.get(&uid(s)));
        tracked.is_none_or(|g| s.metadata.generation.unwrap_or(0) > *g)
    }

    /// Forgets a deleted slice; false when its deletion was not this controller's.
    pub fn handle_deletion(&self, s: &EndpointSlice) -> bool {
        let Some(key) = service_key(s) else {
            return true;
        };
        let mut generations = self.lock();
        let Some(g) = generations.get_mut(&key) else {
            return true;
        };
        g.remove(&uid(s)).is_none_or(|g| g == DELETION_EXPECTED)
    }

    /// True when `cached` (the Service's slices in the cache) lacks a write of this
    /// controller: a slice at an older generation, one it deleted, or one it wrote that
    /// is missing.
    pub fn stale(&self, key: &str, cached: &[Arc<EndpointSlice>]) -> bool {
        let generations = self.lock();
        let Some(g) = generations.get(key) else {
            return false;
        };
        let mut present = BTreeSet::new();
        for s in cached {
            let id = uid(s);
            if let Some(want) = g.get(&id)
                && (*want == DELETION_EXPECTED || *want > s.metadata.generation.unwrap_or(0))
            {
                return true;
            }
            present.insert(id);
        }
        g.iter()
            .any(|(id, want)| *want != DELETION_EXPECTED && !present.contains(id))
    }

    /// Forgets the Service `key`.
    pub fn delete_service(&self, key: &str) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::endpoint::tests::{pod, service};

    fn zones(node: &str) -> Option<Option<String>> {
        (node == "n1").then(|| Some("zone-a".to_owned()))
    }

    fn svc() -> Service {
        service(json!([{"name": "http", "port": 80, "targetPort": "http"}]))
    }

    fn pods(n: usize) -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| {
                Arc::new(pod(
                    &format!("p{i:03}"),
                    &format!("10.0.{}.{}", i / 250, i % 250 + 1),
                    i % 3 != 0,
                ))
            })
            .collect()
    }

    /// Plays the API server: gives created slices a name, a UID and generation 1.
    fn apply(existing: &mut Vec<Arc<EndpointSlice>>, plan: Plan, seq: &mut usize) {
        let deleted: BTreeSet<Option<String>> = plan
            .delete
            .iter()
            .map(|s| s.metadata.name.clone())
            .collect();
        existing.retain(|s| !deleted.contains(&s.metadata.name));
        for s in plan.update {
            existing.retain(|e| e.metadata.name != s.metadata.name);
            existing.push(Arc::new(s));
        }
        for mut s in plan.create {
            *seq += 1;
            s.metadata.name = Some(format!("web-{seq}"));
            s.metadata.uid = Some(format!("slice-uid-{seq}"));
            existing.push(Arc::new(s));
        }
    }

    fn total(existing: &[Arc<EndpointSlice>]) -> usize {
        existing
            .iter()
            .map(|s| s.endpoints.as_ref().map_or(0, Vec::len))
            .sum()
    }

    #[test]
    fn endpoints_carry_conditions_zone_and_reference() {
        let service = svc();
        let (plan, missing) = reconcile(&service, &pods(3), &[], &zones, 100);
        assert!(missing.is_empty());
        assert_eq!((plan.create.len(), plan.update.len()), (1, 0));
        let slice = &plan.create[0];
        assert_eq!(slice.address_type, "IPv4");
        assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
        let labels = slice.metadata.labels.clone().unwrap();
        assert_eq!(labels[LABEL_SERVICE_NAME], "web");
        assert_eq!(labels[LABEL_MANAGED_BY], MANAGED_BY_VALUE);
        assert_eq!(labels["team"], "a");
        let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Service", "svc-uid", Some(true))
        );
        let port = &slice.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("http"), Some(8080))
        );
        let eps = slice.endpoints.as_ref().unwrap();
        assert_eq!(eps.len(), 3);
        // p000 is not ready.
        let c = eps[0].conditions.clone().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(false), Some(false))
        );
        assert_eq!(eps[1].conditions.clone().unwrap().ready, Some(true));
        assert_eq!(eps[0].zone.as_deref(), Some("zone-a"));
        assert_eq!(eps[0].node_name.as_deref(), Some("n1"));
        assert_eq!(
            eps[0].target_ref.as_ref().and_then(|r| r.name.as_deref()),
            Some("p000")
        );
    }

    #[test]
    fn terminating_and_published_conditions() {
        let mut service = svc();
        let mut p = pod("t", "10.0.0.9", true);
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        let ep = pod_to_endpoint(&p, None, &service, "IPv4");
        let c = ep.conditions.unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(true), Some(true))
        );
        service.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        let ep = pod_to_endpoint(&pod("n", "10.0.0.8", false), None, &service, "IPv4");
        assert_eq!(ep.conditions.unwrap().ready, Some(true));
        // No address of the other family.
        assert!(
            pod_to_endpoint(&p, None, &service, "IPv6")
                .addresses
                .is_empty()
        );
    }

    #[test]
    fn slices_hold_at_most_the_maximum() {
        let service = svc();
        let (plan, _) = reconcile(&service, &pods(250), &[], &zones, 100);
        let sizes: Vec<usize> = plan
            .create
            .iter()
            .map(|s| s.endpoints.as_ref().map_or(0, Vec::len))
            .collect();
        assert_eq!(sizes, [100, 100, 50]);
        let (plan, _) = reconcile(&service, &pods(10), &[], &zones, 3);
        assert_eq!(plan.create.len(), 4);
    }

    #[test]
    fn nothing_changes_when_nothing_changed() {
        let service = svc();
        let all = pods(230);
        let mut existing = Vec::new();
        let mut seq = 0;
        let (plan, _) = reconcile(&service, &all, &existing, &zones, 100);
        apply(&mut existing, plan, &mut seq);
        assert_eq!(existing.len(), 3);
        // Read back as the API server returns them.
        let existing: Vec<Arc<EndpointSlice>> = existing
            .iter()
            .map(|s| Arc::new(serde_json::from_value(serde_json::to_value(&**s).unwrap()).unwrap()))
            .collect();
        let mut shuffled = all.clone();
        shuffled.reverse();
        let (plan, _) = reconcile(&service, &shuffled, &existing, &zones, 100);
        assert!(
            plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty(),
            "{plan:?}"
        );
    }

    #[test]
    fn changes_stay_in_their_slice() {
        let service = svc();
        let mut all = pods(150);
        let mut existing = Vec::new();
        let mut seq = 0;
        let (plan, _) = reconcile(&service, &all, &existing, &zones, 100);
        apply(&mut existing, plan, &mut seq);
        // p001 becomes not ready, p002 goes, a new pod comes: one slice updated in place.
        let mut p1 = (*all[1]).clone();
        p1.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".to_owned();
        all[1] = Arc::new(p1);
        all.remove(2);
        all.push(Arc::new(pod("new", "10.9.9.9", true)));
        let (plan, _) = reconcile(&service, &all, &existing, &zones, 100);
        assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
        assert_eq!(plan.update.len(), 1);
        let updated = &plan.update[0];
        assert_eq!(updated.endpoints.as_ref().map(Vec::len), Some(100));
        apply(&mut existing, plan, &mut seq);
        assert_eq!(total(&existing), 150);
        // Every pod gone: the slices go but one, kept as the placeholder.
        let (plan, _) = reconcile(&service, &[], &existing, &zones, 100);
        assert!(plan.create.is_empty(), "{plan:?}");
        assert_eq!((plan.update.len(), plan.delete.len()), (1, 1));
        apply(&mut existing, plan, &mut seq);
        assert_eq!(existing.len(), 1);
        assert_eq!(total(&existing), 0);
        let (plan, _) = reconcile(&service, &[], &existing, &zones, 100);
        assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty());
    }

    #[test]
    fn unknown_nodes_skip_pods_and_other_owners_slices_go() {
        let service = svc();
        let mut p = pod("elsewhere", "10.0.0.1", true);
        p.spec.as_mut().unwrap().node_name = Some("gone".to_owned());
        let mut foreign = new_slice(&service, &[], "IPv4");
        foreign.metadata.name = Some("web-old".to_owned());
        foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "old-uid".to_owned();
        let mut v6 = new_slice(&service, &[], "IPv6");
        v6.metadata.name = Some("web-v6".to_owned());
        let existing = vec![Arc::new(foreign), Arc::new(v6)];
        let (plan, missing) = reconcile(&service, &[Arc::new(p)], &existing, &zones, 100);
        assert_eq!(missing.len(), 1, "{missing:?}");
        // The foreign slice is not reused (another Service's), the IPv6 one is dropped.
        let deleted: Vec<_> = plan
            .delete
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        assert_eq!(deleted, ["web-old", "web-v6"]);
        assert_eq!(plan.create.len(), 1);
        assert!(plan.create[0].endpoints.as_ref().unwrap().is_empty());
    }

    #[test]
    fn tracker_detects_a_stale_cache() {
        let t = SliceTracker::default();
        let mut s = new_slice(&svc(), &[], "IPv4");
        s.metadata.namespace = Some("ns".to_owned());
        s.metadata.uid = Some("u1".to_owned());
        s.metadata.generation = Some(2);
        assert!(t.should_sync(&s));
        t.update(&s);
        assert!(!t.should_sync(&s));
        assert!(t.stale("ns/web", &[]));
        let mut old = s.clone();
        old.metadata.generation = Some(1);
        assert!(t.stale("ns/web", &[Arc::new(old)]));
        assert!(!t.stale("ns/web", &[Arc::new(s.clone())]));
        t.expect_deletion(&s);
        assert!(t.stale("ns/web", &[Arc::new(s.clone())]));
        assert!(!t.stale("ns/web", &[]));
        assert!(t.handle_deletion(&s));
        assert!(!t.has(&s));
    }
}
