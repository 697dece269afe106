//! The node status loop against a fake API server and a scripted runtime.

use std::sync::Mutex;

use async_trait::async_trait;
use k8s_cri::v1::{Image, ListImagesRequest, ListImagesResponse, StatusRequest, StatusResponse};
use serde_json::{Value, json};
use tonic::Status;

use super::fake_api::FakeApi;
use super::runtime_state::tests::status;
use super::*;
use crate::cm::allocatable::PIDS;

const NODE: &str = "/api/v1/nodes/node1";

/// A runtime whose Status and ListImages answers the test sets.
struct ScriptedCri {
    status: Mutex<StatusResponse>,
    images: Vec<Image>,
}

#[async_trait]
impl Cri for ScriptedCri {
    async fn status(&self, _: StatusRequest) -> Result<StatusResponse, Status> {
        Ok(self.status.lock().unwrap().clone())
    }
    async fn list_images(&self, _: ListImagesRequest) -> Result<ListImagesResponse, Status> {
        Ok(ListImagesResponse {
            images: self.images.clone(),
        })
    }
}

struct Harness {
    api: FakeApi,
    cri: Arc<ScriptedCri>,
    pressure: Arc<Mutex<NodeConditions>>,
    sync: NodeStatusSync,
}

fn harness() -> Harness {
    let api = FakeApi::default();
    let cri = Arc::new(ScriptedCri {
        status: Mutex::new(status(true, true)),
        images: vec![Image {
            id: "sha256:aa".into(),
            repo_tags: vec!["busybox:1.36".into()],
            repo_digests: vec!["busybox@sha256:aa".into()],
            size: 4_000_000,
            ..Default::default()
        }],
    });
    let pressure = Arc::new(Mutex::new(NodeConditions::default()));
    let pleg = PlegHealth::default();
    pleg.mark_active();
    let read_pressure = pressure.clone();
    let sync = NodeStatusSync::new(NodeStatusInputs {
        client: api.client(),
        config: KubeletConfig {
            node_name: "node1".into(),
            node_labels: [("tier".to_owned(), "edge".to_owned())].into(),
            ..KubeletConfig::default()
        },
        cri: cri.clone(),
        runtime_name: "skiff".into(),
        runtime_version: "0.1.0".into(),
        capacity: [
            ("cpu".to_owned(), 2000),
            ("memory".to_owned(), 4 << 30),
            ("ephemeral-storage".to_owned(), 10 << 30),
            (PIDS.to_owned(), 32768),
        ]
        .into(),
        allocatable: [
            ("cpu".to_owned(), 2000),
            ("memory".to_owned(), (4 << 30) - (100 << 20)),
            ("ephemeral-storage".to_owned(), 9 << 30),
        ]
        .into(),
        pressure: Arc::new(move || *read_pressure.lock().unwrap()),
        pleg,
        node_ip: "10.1.2.3".parse().unwrap(),
        recorder: crate::events::EventRecorder::log_only("node1"),
    });
    Harness {
        api,
        cri,
        pressure,
        sync,
    }
}

fn condition(node: &Value, kind: &str) -> Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} condition in {node}"))
}

#[tokio::test]
async fn registers_then_patches_only_changes() {
    let mut h = harness();
    h.sync.sync_node_status().await;
    let node = h.api.object(NODE).expect("the node is registered");
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "node1"
    );
    assert_eq!(node["metadata"]["labels"]["tier"], "edge");
    assert_eq!(node["status"]["capacity"]["cpu"], "2");
    assert_eq!(node["status"]["capacity"]["memory"], "4Gi");
    assert_eq!(node["status"]["capacity"]["pods"], "110");
    assert_eq!(node["status"]["allocatable"]["memory"], "3996Mi");
    assert!(node["status"]["capacity"].get("pid").is_none());
    assert_eq!(
        node["status"]["addresses"],
        json!([{"type": "InternalIP", "address": "10.1.2.3"}, {"type": "Hostname", "address": "node1"}])
    );
    assert_eq!(
        node["status"]["nodeInfo"]["containerRuntimeVersion"],
        "skiff://0.1.0"
    );
    assert_eq!(
        node["status"]["nodeInfo"]["kubeletVersion"],
        skiff_api::version::GIT_VERSION
    );
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );
    assert_eq!(
        node["status"]["images"],
        json!([{"names": ["busybox@sha256:aa", "busybox:1.36"], "sizeBytes": 4_000_000}])
    );
    assert_eq!(condition(&node, "Ready")["status"], "True");
    // Registered, then the first update reports at once (no report yet).
    assert_eq!(
        h.api.requests(),
        [
            "POST /api/v1/nodes",
            "GET /api/v1/nodes/node1",
            "PATCH /api/v1/nodes/node1/status"
        ]
    );

    // Nothing changed and the report period has not passed: no patch.
    h.api.clear_requests();
    h.sync.sync_node_status().await;
    assert_eq!(h.api.requests(), ["GET /api/v1/nodes/node1"]);

    // Memory pressure and a network that is not ready are patched.
    h.pressure.lock().unwrap().memory_pressure = true;
    *h.cri.status.lock().unwrap() = status(true, false);
    h.sync.sync_node_status().await;
    let node = h.api.object(NODE).unwrap();
    assert_eq!(condition(&node, "MemoryPressure")["status"], "True");
    assert_eq!(
        condition(&node, "MemoryPressure")["reason"],
        "KubeletHasInsufficientMemory"
    );
    let ready = condition(&node, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "KubeletNotReady");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .starts_with("container runtime network not ready: NetworkReady=false"),
        "{ready}"
    );
    let patches = h.api.bodies("PATCH /api/v1/nodes/node1/status");
    let patch = patches.last().unwrap();
    assert!(patch.get("spec").is_none());
    assert!(
        patch["status"].get("capacity").is_none(),
        "only changes: {patch}"
    );
}

#[tokio::test]
async fn report_frequency_forces_a_patch() {
    let mut h = harness();
    h.sync.report_frequency = Duration::ZERO;
    h.sync.sync_node_status().await;
    h.api.clear_requests();
    h.sync.sync_node_status().await;
    assert_eq!(
        h.api.requests(),
        [
            "GET /api/v1/nodes/node1",
            "PATCH /api/v1/nodes/node1/status"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn registration_retries_while_the_api_server_is_down() {
    let mut h = harness();
    h.api.fail_next(4);
    h.sync.sync_node_status().await;
    assert!(h.api.object(NODE).is_some());
    let requests = h.api.requests();
    assert_eq!(requests[..5], ["POST /api/v1/nodes"; 5]);
    assert!(h.sync.registered);
}

#[tokio::test(start_paused = true)]
async fn status_update_retries_five_times() {
    let mut h = harness();
    h.sync.sync_node_status().await;
    h.api.clear_requests();
    h.api.fail_next(100);
    assert!(matches!(
        h.sync.update_node_status().await,
        Err(UpdateError::Other(_))
    ));
    assert_eq!(
        h.api.requests(),
        ["GET /api/v1/nodes/node1"; NODE_STATUS_UPDATE_RETRY]
    );
}

#[tokio::test]
async fn existing_node_is_reconciled_and_a_deleted_one_registered_again() {
    let mut h = harness();
    h.api.insert(
        NODE,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "node1", "uid": "old",
            "labels": {"kubernetes.io/hostname": "stale", "kubernetes.io/os": "linux"}}}),
    );
    h.sync.sync_node_status().await;
    let requests = h.api.requests();
    assert_eq!(
        requests[..3],
        [
            "POST /api/v1/nodes",
            "GET /api/v1/nodes/node1",
            "PATCH /api/v1/nodes/node1/status"
        ]
    );
    // The reconciling patch carries the annotation, the owned labels and the capacity.
    let reconcile = &h.api.bodies("PATCH /api/v1/nodes/node1/status")[0];
    assert_eq!(
        reconcile["metadata"]["annotations"],
        json!({"volumes.kubernetes.io/controller-managed-attach-detach": "true"})
    );
    assert_eq!(
        reconcile["metadata"]["labels"]["kubernetes.io/hostname"],
        "node1"
    );
    assert!(
        reconcile["metadata"]["labels"]
            .get("kubernetes.io/os")
            .is_none()
    );
    assert_eq!(reconcile["status"]["capacity"]["cpu"], "2");
    let node = h.api.object(NODE).unwrap();
    assert_eq!(node["metadata"]["uid"], "old");
    assert_eq!(node["status"]["capacity"]["cpu"], "2");
    assert_eq!(condition(&node, "Ready")["status"], "True");

    h.api.remove(NODE);
    h.api.clear_requests();
    h.sync.sync_node_status().await;
    assert_eq!(
        h.api.requests(),
        ["GET /api/v1/nodes/node1", "POST /api/v1/nodes"]
    );
    let node = h.api.object(NODE).expect("registered again");
    assert_ne!(node["metadata"]["uid"], "old");
    assert_eq!(condition(&node, "Ready")["status"], "True");
}
