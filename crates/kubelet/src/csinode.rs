//! CSINode registration (upstream `pkg/volume/csi` `initializeCSINode` and
//! `nodeinfomanager.InitializeCSINodeWithAnnotation`): once the Node exists, the kubelet
//! makes sure the `storage.k8s.io/v1` CSINode named after it exists, owned by the Node
//! (so that it goes with the Node), with no drivers yet and the annotation
//! `storage.alpha.kubernetes.io/migrated-plugins` listing the in-tree volume plugins
//! whose CSI migration is on. The scheduler and the attach/detach controller read that
//! annotation to decide that volumes of those plugins go through their CSI drivers.
//!
//! Differences from upstream: the kubelet's Ready condition does not wait for the
//! CSINode, and the attempts never give up (upstream exits the kubelet after about
//! 140 s of failures so that it is restarted).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::PostParams;
use tracing::{error, info};

/// The CSINode annotation that lists the migrated in-tree plugins (upstream
/// `v1.MigratedPluginsAnnotationKey`).
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// The in-tree volume plugins whose CSI migration is on in Kubernetes 1.33, sorted: GCE
/// PD, AWS EBS, Cinder, Azure Disk, Azure File and vSphere are always migrated, and
/// Portworx through the `CSIMigrationPortworx` gate (GA and on in 1.33).
pub const MIGRATED_PLUGINS: [&str; 7] = [
    "kubernetes.io/aws-ebs",
    "kubernetes.io/azure-disk",
    "kubernetes.io/azure-file",
    "kubernetes.io/cinder",
    "kubernetes.io/gce-pd",
    "kubernetes.io/portworx-volume",
    "kubernetes.io/vsphere-volume",
];

/// First and largest wait between failed attempts (the kubelet's other API loops use the
/// same; upstream starts at 15 ms and multiplies by 6).
const BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(7));

/// Creates or brings up to date the CSINode of one node; [`CsiNodeInitializer::run`]
/// retries until that succeeds.
pub struct CsiNodeInitializer {
    csinodes: Api<CSINode>,
    nodes: Api<Node>,
    node_name: String,
}

impl CsiNodeInitializer {
    /// An initializer of the CSINode of `node_name`.
    pub fn new(client: kube::Client, node_name: &str) -> Self {
        Self {
            csinodes: Api::all(client.clone()),
            nodes: Api::all(client),
            node_name: node_name.to_owned(),
        }
    }

    /// Attempts [`Self::try_initialize`] until it succeeds, waiting 200 ms, 400 ms, ...
    /// up to 7 s between attempts (a Node not registered yet is one such failure).
    pub async fn run(self) {
        let (mut wait, max) = BACKOFF;
        loop {
            match self.try_initialize().await {
                Ok(()) => {
                    info!(node = %self.node_name, "Initialized CSINode with migrated plugins annotation");
                    return;
                }
                // The Node is registered at the same time: not an error until it is.
                Err(kube::Error::Api(status)) if status.is_not_found() => {
                    info!(node = %self.node_name, interval = ?wait, "Waiting for the Node to initialize its CSINode");
                }
                Err(e) => {
                    error!(node = %self.node_name, error = %e, interval = ?wait, "Failed to initialize CSINode");
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(max);
        }
    }

    /// One attempt (upstream `tryInitializeCSINodeWithAnnotation`): creates the CSINode
    /// when missing (which needs the Node, for its UID); otherwise updates it when its
    /// annotation does not list [`MIGRATED_PLUGINS`]. Other fields of an existing
    /// CSINode are left alone.
    ///
    /// Errors: any API error but a missing CSINode, among them the Node not found and a
    /// conflict on update.
    pub async fn try_initialize(&self) -> Result<(), kube::Error> {
        match self.csinodes.get(&self.node_name).await {
            Ok(mut existing) => {
                if set_migration_annotation(&mut existing.metadata) {
                    self.csinodes
                        .replace(&self.node_name, &PostParams::default(), &existing)
                        .await?;
                }
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                let node = self.nodes.get(&self.node_name).await?;
                let uid = node.metadata.uid.unwrap_or_default();
                let csinode = new_csinode(&self.node_name, &uid);
                self.csinodes
                    .create(&PostParams::default(), &csinode)
                    .await?;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// The CSINode of node `node_name` (whose UID is `node_uid`), as upstream's
/// `CreateCSINode` builds it: owned by the Node, `spec.drivers` empty, annotated with
/// [`MIGRATED_PLUGINS`].
pub fn new_csinode(node_name: &str, node_uid: &str) -> CSINode {
    let mut metadata = ObjectMeta {
        name: Some(node_name.to_owned()),
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node_name.to_owned(),
            uid: node_uid.to_owned(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    set_migration_annotation(&mut metadata);
    CSINode {
        metadata,
        spec: CSINodeSpec {
            drivers: Vec::new(),
        },
        ..Default::default()
    }
}

/// Sets the migrated plugins annotation of `metadata` to [`MIGRATED_PLUGINS`] joined by
/// commas (upstream `setMigrationAnnotation`); true when it changed. The annotation is
/// compared as a set: a value listing the same plugins in another order is kept.
fn set_migration_annotation(metadata: &mut ObjectMeta) -> bool {
    let wanted: BTreeSet<&str> = MIGRATED_PLUGINS.into_iter().collect();
    let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
    let current: BTreeSet<&str> = annotations
        .get(MIGRATED_PLUGINS_ANNOTATION)
        .map(|v| v.split(',').filter(|p| !p.is_empty()).collect())
        .unwrap_or_default();
    if current == wanted {
        return false;
    }
    let value = wanted.into_iter().collect::<Vec<_>>().join(",");
    annotations.insert(MIGRATED_PLUGINS_ANNOTATION.to_owned(), value);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodestatus::fake_api::FakeApi;
    use serde_json::json;

    const CSINODE: &str = "/apis/storage.k8s.io/v1/csinodes/node1";
    const NODE: &str = "/api/v1/nodes/node1";
    const ANNOTATION: &str = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume";

    #[test]
    fn the_csinode_is_owned_by_the_node_without_drivers_and_annotated() {
        let csinode = serde_json::to_value(new_csinode("node1", "node-uid")).unwrap();
        assert_eq!(
            csinode,
            json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {
                    "name": "node1",
                    "annotations": {MIGRATED_PLUGINS_ANNOTATION: ANNOTATION},
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "node-uid"}
                    ]
                },
                "spec": {"drivers": []}
            })
        );
    }

    #[test]
    fn the_annotation_is_compared_as_a_set() {
        let reordered: Vec<&str> = MIGRATED_PLUGINS.iter().rev().copied().collect();
        let mut metadata = ObjectMeta {
            annotations: Some(BTreeMap::from([(
                MIGRATED_PLUGINS_ANNOTATION.to_owned(),
                reordered.join(","),
            )])),
            ..Default::default()
        };
        assert!(!set_migration_annotation(&mut metadata));
        metadata.annotations = Some(BTreeMap::from([(
            MIGRATED_PLUGINS_ANNOTATION.to_owned(),
            "kubernetes.io/gce-pd".to_owned(),
        )]));
        assert!(set_migration_annotation(&mut metadata));
        assert_eq!(
            metadata.annotations.unwrap()[MIGRATED_PLUGINS_ANNOTATION],
            ANNOTATION
        );
    }

    #[tokio::test]
    async fn waits_for_the_node_then_creates_the_csinode() {
        let api = FakeApi::default();
        let initializer = CsiNodeInitializer::new(api.client(), "node1");
        assert!(initializer.try_initialize().await.is_err(), "no Node yet");
        assert!(api.object(CSINODE).is_none());

        api.insert(
            NODE,
            json!({"metadata": {"name": "node1", "uid": "node-uid"}}),
        );
        initializer.try_initialize().await.unwrap();
        let csinode = api.object(CSINODE).expect("created");
        assert_eq!(
            csinode["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "node-uid"}])
        );
        assert_eq!(
            csinode["metadata"]["annotations"][MIGRATED_PLUGINS_ANNOTATION],
            ANNOTATION
        );
        assert_eq!(csinode["spec"]["drivers"], json!([]));

        // Up to date: read, not written.
        api.clear_requests();
        initializer.try_initialize().await.unwrap();
        assert_eq!(api.requests(), [format!("GET {CSINODE}")]);
    }

    #[tokio::test]
    async fn an_existing_csinode_gets_the_annotation_and_keeps_its_drivers() {
        let api = FakeApi::default();
        let drivers = json!([{"name": "csi.example.com", "nodeID": "n1"}]);
        api.insert(
            CSINODE,
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": "node1", "annotations": {MIGRATED_PLUGINS_ANNOTATION: "kubernetes.io/gce-pd", "other": "kept"}},
                "spec": {"drivers": drivers}
            }),
        );
        CsiNodeInitializer::new(api.client(), "node1")
            .try_initialize()
            .await
            .unwrap();
        assert_eq!(
            api.requests(),
            [format!("GET {CSINODE}"), format!("PUT {CSINODE}")]
        );
        let csinode = api.object(CSINODE).unwrap();
        assert_eq!(
            csinode["metadata"]["annotations"],
            json!({MIGRATED_PLUGINS_ANNOTATION: ANNOTATION, "other": "kept"})
        );
        assert_eq!(csinode["spec"]["drivers"], drivers);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_retried_with_backoff_until_created() {
        let api = FakeApi::default();
        api.insert(
            NODE,
            json!({"metadata": {"name": "node1", "uid": "node-uid"}}),
        );
        api.fail_next(2);
        let started = tokio::time::Instant::now();
        CsiNodeInitializer::new(api.client(), "node1").run().await;
        assert!(api.object(CSINODE).is_some());
        // 200 ms + 400 ms of backoff.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(600) && waited < Duration::from_secs(1),
            "{waited:?}"
        );
    }
}
