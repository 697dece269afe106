//! Node registration and status (upstream `pkg/kubelet/kubelet_node_status.go` and
//! `pkg/kubelet/nodestatus`): the kubelet registers its Node ([`register`]), then every
//! `nodeStatusUpdateFrequency` computes the status with the [`setters`] and patches
//! `nodes/<name>/status` when it changed or `nodeStatusReportFrequency` passed since the
//! last report ([`NodeStatusSync`]). A Node deleted from the API is registered again.

mod machine;
mod patch;
mod register;
mod runtime_state;
mod setters;

#[cfg(test)]
pub(crate) mod fake_api;

use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_cri::v1::{ListImagesRequest, StatusRequest};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{GetParams, Patch, PatchParams};
use tracing::{debug, error, info, warn};

use crate::KubeletConfig;
use crate::cm::resources::ResourceAmounts;
use crate::cri::Cri;
use crate::events::{EventRecorder, node_ref};
use crate::eviction::NodeConditions;
use crate::pleg::PlegHealth;
use machine::MachineInfo;
use register::{LABEL_ARCH, LABEL_OS, Registration, initial_node, try_register_with_api_server};
use runtime_state::RuntimeState;
use setters::{NodeFacts, Observed, go_arch, set_node_status};

/// Attempts per status update (upstream `nodeStatusUpdateRetry`).
pub const NODE_STATUS_UPDATE_RETRY: usize = 5;
/// How long after start the kubelet polls quickly for the node to become Ready (upstream
/// `nodeReadyGracePeriod` of `fastStatusUpdateOnce`).
const NODE_READY_GRACE_PERIOD: Duration = Duration::from_secs(120);
/// The poll period of that fast phase (upstream: 100 ms).
const FAST_STATUS_POLL: Duration = Duration::from_millis(100);
/// First and largest registration backoff (upstream `registerWithAPIServer`).
const REGISTER_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(7));
/// Jitter factor of the status loop (upstream `wait.JitterUntil(..., 0.04, ...)`).
const JITTER: f64 = 0.04;

/// The eviction manager's pressure conditions (see
/// [`crate::eviction::EvictionManager::node_conditions`]).
pub type PressureFn = Arc<dyn Fn() -> NodeConditions + Send + Sync>;

/// What the node status loop needs from the kubelet.
pub struct NodeStatusInputs {
    /// The API client (`--kubeconfig`).
    pub client: kube::Client,
    /// The kubelet's settings: node name, labels, taints, provider ID, `registerNode`,
    /// `maxPods`, `port`, the update and report frequencies.
    pub config: KubeletConfig,
    /// The container runtime (Status for Ready, ListImages for images).
    pub cri: Arc<dyn Cri>,
    /// CRI Version's `runtime_name` (`containerd`, `skiff`).
    pub runtime_name: String,
    /// CRI Version's `runtime_version`.
    pub runtime_version: String,
    /// The machine capacity ([`crate::cm::ContainerManager::capacity`]).
    pub capacity: ResourceAmounts,
    /// The node allocatable ([`crate::cm::ContainerManager::node_allocatable`]).
    pub allocatable: ResourceAmounts,
    /// MemoryPressure / DiskPressure from the eviction manager.
    pub pressure: PressureFn,
    /// The PLEG's health, part of Ready.
    pub pleg: PlegHealth,
    /// The node IP (InternalIP).
    pub node_ip: IpAddr,
    /// Records the node's status events (`NodeReady`, `NodeHasSufficientMemory`, ...) on
    /// the Node.
    pub recorder: EventRecorder,
}

/// Why a status update failed.
#[derive(Debug)]
enum UpdateError {
    /// The Node is gone from the API server.
    NodeNotFound,
    /// Any other failure, with its message.
    Other(String),
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::NodeNotFound => f.write_str("node not found"),
            UpdateError::Other(message) => f.write_str(message),
        }
    }
}

impl From<kube::Error> for UpdateError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) if status.is_not_found() => UpdateError::NodeNotFound,
            e => UpdateError::Other(e.to_string()),
        }
    }
}

/// The node status loop (upstream `Kubelet.syncNodeStatus`, `registerWithAPIServer`,
/// `updateNodeStatus`, `fastStatusUpdateOnce`).
pub struct NodeStatusSync {
    nodes: Api<Node>,
    cri: Arc<dyn Cri>,
    facts: NodeFacts,
    registration: Registration,
    register_node: bool,
    pressure: PressureFn,
    pleg: PlegHealth,
    update_frequency: Duration,
    report_frequency: Duration,
    runtime: RuntimeState,
    registered: bool,
    last_status_report: Option<Instant>,
    ready_reported: bool,
    recorder: EventRecorder,
}

impl NodeStatusSync {
    /// A loop for the node `inputs.config.node_name`; reads the machine facts now.
    pub fn new(inputs: NodeStatusInputs) -> Self {
        let config = inputs.config;
        Self {
            nodes: Api::all(inputs.client),
            cri: inputs.cri,
            facts: NodeFacts {
                node_name: config.node_name.clone(),
                node_ip: inputs.node_ip,
                max_pods: config.max_pods,
                port: config.port,
                capacity: inputs.capacity,
                allocatable: inputs.allocatable,
                machine: MachineInfo::read(),
                container_runtime_version: format!(
                    "{}://{}",
                    inputs.runtime_name, inputs.runtime_version
                ),
                kubelet_version: skiff_api::version::GIT_VERSION.to_owned(),
            },
            registration: Registration {
                node_name: config.node_name,
                node_labels: config.node_labels,
                taints: config.register_with_taints,
                provider_id: config.provider_id,
                controller_attach_detach: true,
            },
            register_node: config.register_node,
            pressure: inputs.pressure,
            pleg: inputs.pleg,
            update_frequency: config.node_status_update_frequency,
            report_frequency: config.node_status_report_frequency,
            runtime: RuntimeState::default(),
            registered: false,
            last_status_report: None,
            ready_reported: false,
            recorder: inputs.recorder,
        }
    }

    /// Syncs the node status now and then every `nodeStatusUpdateFrequency` (with 4 %
    /// jitter), forever. Until the node is first reported Ready (at most 2 minutes), the
    /// runtime is polled every 100 ms and the status synced as soon as it is ready.
    pub async fn run(mut self) {
        let started = Instant::now();
        loop {
            self.sync_node_status().await;
            if !self.ready_reported && started.elapsed() < NODE_READY_GRACE_PERIOD {
                let deadline = Instant::now() + self.update_frequency;
                while Instant::now() < deadline {
                    tokio::time::sleep(FAST_STATUS_POLL).await;
                    if self.locally_ready().await {
                        break;
                    }
                }
            } else {
                tokio::time::sleep(jittered(self.update_frequency)).await;
            }
        }
    }

    /// Upstream `syncNodeStatus`: registers the node if needed, then updates its status;
    /// a Node deleted from the API is registered again.
    pub(crate) async fn sync_node_status(&mut self) {
        if self.register_node {
            self.register_with_api_server().await;
        }
        match self.update_node_status().await {
            Ok(()) => {}
            Err(UpdateError::NodeNotFound) if self.register_node => {
                info!(node = %self.facts.node_name, "Node not found in the API server, registering it again");
                self.registered = false;
                self.register_with_api_server().await;
            }
            Err(e) => {
                error!(node = %self.facts.node_name, error = %e, "Unable to update node status")
            }
        }
    }

    /// Upstream `registerWithAPIServer`: tries until the Node is registered, backing off
    /// from 100 ms to 7 s. The first attempt is immediate.
    async fn register_with_api_server(&mut self) {
        let (mut step, max) = REGISTER_BACKOFF;
        while !self.registered {
            let node = self.initial_node().await;
            info!(node = %self.facts.node_name, "Attempting to register node");
            if try_register_with_api_server(&self.nodes, &node).await {
                info!(node = %self.facts.node_name, "Successfully registered node");
                self.registered = true;
                return;
            }
            tokio::time::sleep(step).await;
            step = (step * 2).min(max);
        }
    }

    /// The Node to register, with its status set (upstream `initialNode`).
    async fn initial_node(&mut self) -> Node {
        let mut node = initial_node(&self.registration);
        let observed = self.observe().await;
        self.set_status(&mut node, &observed);
        node
    }

    /// Upstream `updateNodeStatus`: up to [`NODE_STATUS_UPDATE_RETRY`] attempts. Stops at
    /// once when the Node is gone.
    async fn update_node_status(&mut self) -> Result<(), UpdateError> {
        for attempt in 0..NODE_STATUS_UPDATE_RETRY {
            match self.try_update_node_status(attempt).await {
                Ok(()) => return Ok(()),
                Err(UpdateError::NodeNotFound) => return Err(UpdateError::NodeNotFound),
                Err(e) => warn!(error = %e, "Error updating node status, will retry"),
            }
        }
        Err(UpdateError::Other(
            "update node status exceeds retry count".into(),
        ))
    }

    /// Upstream `tryUpdateNodeStatus`: gets the Node (from the API server's cache on the
    /// first attempt), sets its status and patches it when it changed or the report
    /// period passed.
    async fn try_update_node_status(&mut self, attempt: usize) -> Result<(), UpdateError> {
        let params = if attempt == 0 {
            GetParams::any()
        } else {
            GetParams::default()
        };
        let original = self.nodes.get_with(&self.facts.node_name, &params).await?;
        let (node, changed) = self.update_node(&original).await;
        let report_due = self
            .last_status_report
            .is_none_or(|at| at.elapsed() >= self.report_frequency);
        if !changed && !report_due {
            return Ok(());
        }
        let patch = patch::node_status_patch(&original, &node)
            .map_err(|e| UpdateError::Other(e.to_string()))?;
        let updated = self
            .nodes
            .patch_status(
                &self.facts.node_name,
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await?;
        self.last_status_report = Some(Instant::now());
        self.ready_reported |= is_ready(&updated);
        Ok(())
    }

    /// Upstream `updateNode`: `original` with the OS and architecture labels restored and
    /// its status set; true when the status or those labels changed.
    async fn update_node(&mut self, original: &Node) -> (Node, bool) {
        let mut node = original.clone();
        let labels = node.metadata.labels.get_or_insert_with(Default::default);
        let mut labels_changed = false;
        for (label, value) in [
            (LABEL_OS, setters::OPERATING_SYSTEM),
            (LABEL_ARCH, go_arch()),
        ] {
            if labels.get(label).map(String::as_str) != Some(value) {
                labels.insert(label.to_owned(), value.to_owned());
                labels_changed = true;
            }
        }
        let observed = self.observe().await;
        self.set_status(&mut node, &observed);
        let changed = labels_changed
            || patch::node_status_has_changed(original.status.as_ref(), node.status.as_ref());
        (node, changed)
    }

    /// Runs the setters on `node` now and records the events they give on the Node
    /// (upstream `recordNodeStatusEvent`).
    fn set_status(&self, node: &mut Node, observed: &Observed) {
        let reference = node_ref(&self.facts.node_name);
        for event in set_node_status(&self.facts, observed, node, Timestamp::now()) {
            self.recorder
                .event(&reference, event.event_type, event.reason, &event.message);
        }
    }

    /// Asks the runtime its status (upstream `updateRuntimeUp`) and images, and the
    /// eviction manager and PLEG their state.
    async fn observe(&mut self) -> Observed {
        self.update_runtime_up().await;
        let images = self
            .cri
            .list_images(ListImagesRequest { filter: None })
            .await
            .map(|r| r.images)
            .inspect_err(|e| {
                warn!(error = %e.message(), "Failed to set some node status fields: error getting image list");
            });
        let now = Instant::now();
        Observed {
            runtime_errors: self.runtime.runtime_errors(self.pleg.healthy(), now),
            network_errors: self.runtime.network_errors(),
            handlers: self.runtime.handlers().to_vec(),
            features: self.runtime.features(),
            images,
            pressure: (self.pressure)(),
        }
    }

    /// Upstream `updateRuntimeUp`: one CRI Status into the runtime state.
    async fn update_runtime_up(&mut self) {
        match self.cri.status(StatusRequest { verbose: false }).await {
            Ok(status) => self.runtime.update(&status, Instant::now()),
            Err(e) => warn!(error = %e.message(), "Container runtime sanity check failed"),
        }
    }

    /// Whether the runtime, network and PLEG would let the node be Ready now (the check of
    /// upstream `fastStatusUpdateOnce`).
    async fn locally_ready(&mut self) -> bool {
        self.update_runtime_up().await;
        let ready = self
            .runtime
            .runtime_errors(self.pleg.healthy(), Instant::now())
            .is_empty()
            && self.runtime.network_errors().is_empty();
        debug!(ready, "fast node status check");
        ready
    }
}

/// Whether `node` has the Ready condition True.
fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `period` plus up to 4 % (upstream `wait.Jitter`).
fn jittered(period: Duration) -> Duration {
    let random = RandomState::new().hash_one(Instant::now()) as f64 / u64::MAX as f64;
    period.mul_f64(1.0 + JITTER * random)
}

#[cfg(test)]
mod tests;
