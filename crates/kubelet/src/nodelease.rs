//! The node lease controller (upstream `k8s.io/component-helpers/apimachinery/lease`
//! `controller`, as the kubelet configures it): the Lease `<node>` in `kube-node-lease`,
//! held by the node, renewed every quarter of `nodeLeaseDurationSeconds` (10 s for 40), and
//! owned by the Node once its UID is known, so that the Lease goes with the Node.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tracing::{error, info};

/// The namespace of node Leases (upstream `v1.NamespaceNodeLease`).
pub const NAMESPACE_NODE_LEASE: &str = "kube-node-lease";
/// The renew interval as a fraction of the lease duration (upstream
/// `nodeLeaseRenewIntervalFraction`).
const RENEW_INTERVAL_FRACTION: f64 = 0.25;
/// Immediate update attempts before waiting for the next interval (upstream
/// `maxUpdateRetries`).
const MAX_UPDATE_RETRIES: usize = 5;
/// First and largest wait between attempts to ensure the Lease (upstream `maxBackoff`).
const ENSURE_BACKOFF: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(7));

/// The node lease controller. [`NodeLeaseController::run`] renews the Lease forever.
pub struct NodeLeaseController {
    leases: Api<Lease>,
    nodes: Api<Node>,
    node_name: String,
    lease_duration_seconds: i32,
    renew_interval: Duration,
    /// The Lease as last written, updated without a GET while nobody else changes it.
    latest: Option<Lease>,
}

impl NodeLeaseController {
    /// A controller of the Lease of `node_name`, lasting `lease_duration_seconds`
    /// (`nodeLeaseDurationSeconds`).
    pub fn new(client: kube::Client, node_name: &str, lease_duration_seconds: i32) -> Self {
        let duration = Duration::from_secs(u64::try_from(lease_duration_seconds).unwrap_or(0));
        Self {
            leases: Api::namespaced(client.clone(), NAMESPACE_NODE_LEASE),
            nodes: Api::all(client),
            node_name: node_name.to_owned(),
            lease_duration_seconds,
            renew_interval: duration.mul_f64(RENEW_INTERVAL_FRACTION),
            latest: None,
        }
    }

    /// The period between renewals (a quarter of the lease duration).
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    /// Syncs now and then every renew interval (with upstream's 4 % jitter), forever.
    pub async fn run(mut self) {
        loop {
            self.sync().await;
            let jitter = std::hash::BuildHasher::hash_one(
                &std::hash::RandomState::new(),
                std::time::Instant::now(),
            ) as f64
                / u64::MAX as f64;
            tokio::time::sleep(self.renew_interval.mul_f64(1.0 + 0.04 * jitter)).await;
        }
    }

    /// One renewal (upstream `controller.sync`): updates the last written Lease directly;
    /// when that fails (or there is none), gets or creates the Lease, retrying with
    /// backoff, and renews it unless it was just created.
    pub(crate) async fn sync(&mut self) {
        if let Some(latest) = self.latest.clone() {
            match self.retry_update_lease(latest).await {
                Ok(()) => return,
                Err(e) => {
                    info!(error = %e, "failed to update lease using latest lease, fallback to ensure lease");
                }
            }
        }
        let (lease, created) = self.backoff_ensure_lease().await;
        self.latest.clone_from(&lease);
        if let (Some(lease), false) = (lease, created)
            && let Err(e) = self.retry_update_lease(lease).await
        {
            error!(error = %e, interval = ?self.renew_interval, "Will retry updating lease");
        }
    }

    /// Gets or creates the Lease until that succeeds, waiting 200 ms, 400 ms, ... up to
    /// 7 s between attempts (upstream `backoffEnsureLease`). Returns the Lease (`None` when
    /// it could not be built yet: the Node is not registered) and whether it was created.
    async fn backoff_ensure_lease(&mut self) -> (Option<Lease>, bool) {
        let (mut sleep, max) = ENSURE_BACKOFF;
        loop {
            match self.ensure_lease().await {
                Ok(found) => return found,
                Err(e) => {
                    error!(error = %e, interval = ?sleep, "Failed to ensure lease exists, will retry");
                    tokio::time::sleep(sleep).await;
                    sleep = (sleep * 2).min(max);
                }
            }
        }
    }

    /// Gets the Lease, or creates it when missing (upstream `ensureLease`). A Lease that
    /// cannot be built (no Node to own it yet) is not created: `(None, false)`.
    async fn ensure_lease(&self) -> Result<(Option<Lease>, bool), kube::Error> {
        match self.leases.get(&self.node_name).await {
            Ok(lease) => Ok((Some(lease), false)),
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                let Ok(lease) = self.new_lease(None).await else {
                    return Ok((None, false));
                };
                let created = self.leases.create(&PostParams::default(), &lease).await?;
                Ok((Some(created), true))
            }
            Err(e) => Err(e),
        }
    }

    /// Renews `base` up to [`MAX_UPDATE_RETRIES`] times (upstream `retryUpdateLease`); on
    /// a conflict the Lease is read again first.
    async fn retry_update_lease(&mut self, mut base: Lease) -> anyhow::Result<()> {
        for _ in 0..MAX_UPDATE_RETRIES {
            let lease = match self.new_lease(Some(&base)).await {
                Ok(lease) | Err(lease) => lease,
            };
            match self
                .leases
                .replace(&self.node_name, &PostParams::default(), &lease)
                .await
            {
                Ok(updated) => {
                    self.latest = Some(updated);
                    return Ok(());
                }
                Err(e) => {
                    error!(error = %e, "Failed to update lease");
                    if matches!(&e, kube::Error::Api(s) if s.is_conflict()) {
                        match self.backoff_ensure_lease().await {
                            (Some(fresh), _) => base = fresh,
                            (None, _) => break,
                        }
                    }
                }
            }
        }
        anyhow::bail!("failed {MAX_UPDATE_RETRIES} attempts to update lease")
    }

    /// The Lease to write (upstream `newLease` with the kubelet's `SetNodeOwnerFunc`): a
    /// copy of `base`, or a new Lease held by the node for the lease duration, renewed
    /// now; owned by the Node when it has no owner yet. `Err` carries the Lease without
    /// its owner when the Node could not be read (it blocks a create, not a renewal).
    async fn new_lease(&self, base: Option<&Lease>) -> Result<Lease, Lease> {
        let mut lease = base.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.node_name.clone()),
                namespace: Some(NAMESPACE_NODE_LEASE.to_owned()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.node_name.clone()),
                lease_duration_seconds: Some(self.lease_duration_seconds),
                ..Default::default()
            }),
        });
        lease.spec.get_or_insert_with(LeaseSpec::default).renew_time =
            Some(MicroTime(Timestamp::now()));
        if lease
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            match self.nodes.get(&self.node_name).await {
                Ok(node) => {
                    lease.metadata.owner_references = Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: self.node_name.clone(),
                        uid: node.metadata.uid.unwrap_or_default(),
                        ..Default::default()
                    }]);
                }
                Err(e) => {
                    error!(node = %self.node_name, error = %e, "Failed to get node when trying to set owner ref to the node lease");
                    return Err(lease);
                }
            }
        }
        Ok(lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodestatus::fake_api::FakeApi;
    use serde_json::json;

    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1";
    const NODE: &str = "/api/v1/nodes/node1";

    fn renew_time(api: &FakeApi) -> String {
        let lease = api.object(LEASE).expect("the lease exists");
        lease["spec"]["renewTime"].as_str().unwrap().to_owned()
    }

    #[tokio::test]
    async fn lease_waits_for_the_node_then_is_created_owned_and_renewed() {
        let api = FakeApi::default();
        let mut controller = NodeLeaseController::new(api.client(), "node1", 40);
        assert_eq!(controller.renew_interval(), Duration::from_secs(10));

        // No Node yet: the Lease cannot be owned, so it is not created.
        controller.sync().await;
        assert!(api.object(LEASE).is_none());

        api.insert(
            NODE,
            json!({"metadata": {"name": "node1", "uid": "node-uid"}}),
        );
        controller.sync().await;
        let lease = api.object(LEASE).expect("created");
        assert_eq!(lease["spec"]["holderIdentity"], "node1");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(
            lease["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "node-uid"}])
        );
        let first = renew_time(&api);
        assert!(first.contains('.'), "renewTime is a MicroTime: {first}");

        // Renewals PUT the last written Lease without reading it first.
        api.clear_requests();
        controller.sync().await;
        assert_eq!(api.requests(), [format!("PUT {LEASE}")]);
        assert_ne!(renew_time(&api), first);
    }

    #[tokio::test]
    async fn conflicts_and_deletions_are_recovered() {
        let api = FakeApi::default();
        api.insert(
            NODE,
            json!({"metadata": {"name": "node1", "uid": "node-uid"}}),
        );
        let mut controller = NodeLeaseController::new(api.client(), "node1", 40);
        controller.sync().await;

        // Someone else wrote the Lease: the PUT conflicts, the Lease is read again.
        let mut lease = api.object(LEASE).unwrap();
        lease["spec"]["holderIdentity"] = json!("node1");
        api.insert(LEASE, lease);
        api.clear_requests();
        controller.sync().await;
        assert_eq!(
            api.requests(),
            [
                format!("PUT {LEASE}"),
                format!("GET {LEASE}"),
                format!("PUT {LEASE}")
            ]
        );

        // The Lease was deleted (its Node went): it is created again.
        api.remove(LEASE);
        controller.sync().await;
        assert!(api.object(LEASE).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_api_server_is_retried_with_backoff() {
        let api = FakeApi::default();
        api.insert(
            NODE,
            json!({"metadata": {"name": "node1", "uid": "node-uid"}}),
        );
        api.fail_next(3);
        let mut controller = NodeLeaseController::new(api.client(), "node1", 40);
        let started = tokio::time::Instant::now();
        controller.sync().await;
        assert!(api.object(LEASE).is_some());
        // 200 ms + 400 ms + 800 ms of backoff.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(1400) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }
}
