//! The namespace controller (upstream `pkg/controller/namespace`,
//! `namespace_controller.go`): every namespace with a `deletionTimestamp` is emptied by the
//! [`deletion`] module and then released from its `kubernetes` finalizer, after which the
//! API server removes it. A namespace whose content is still going (pods in their grace
//! period, objects held by finalizers) is looked at again after the deleter's estimate.

pub mod deletion;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{Requeue, run_controller};

/// The controller's name (`--controllers`).
pub const NAME: &str = "namespace-controller";
/// `--concurrent-namespace-syncs`' default: namespaces deleted at once.
pub const DEFAULT_CONCURRENT_SYNCS: usize = 10;

/// The namespace controller; see the module doc.
pub struct NamespaceController {
    namespaces: Arc<SharedInformer<Namespace>>,
    deleter: deletion::NamespacedResourcesDeleter,
    queue: Arc<WorkQueue<String>>,
}

impl std::fmt::Debug for NamespaceController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceController")
            .finish_non_exhaustive()
    }
}

impl NamespaceController {
    /// The controller over the factory's Namespace informer; `client` deletes the
    /// content and finalizes.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new("namespace").with_metrics(queue_metrics));
        let namespaces = factory.informer::<Namespace>();
        let q = Arc::clone(&queue);
        // Upstream enqueues only namespaces being deleted.
        namespaces.add_event_handler(Box::new(move |d| match d {
            Delta::Added(ns) | Delta::Updated(_, ns) => {
                if ns.metadata.deletion_timestamp.is_some() {
                    q.add(ns.metadata.name.clone().unwrap_or_default());
                }
            }
            Delta::Deleted(_) => {}
        }));
        Arc::new(Self {
            namespaces,
            deleter: deletion::NamespacedResourcesDeleter::new(client),
            queue,
        })
    }

    /// Waits for the informer, then deletes with `workers` workers until `cancel`
    /// (`--concurrent-namespace-syncs`, default 10).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.namespaces],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, name| async move { this.sync(&name).await },
        )
        .await;
    }

    /// One deletion step of the namespace `name` (upstream `syncNamespaceFromKey` and
    /// `workerFunc`): content left brings the namespace back after the deleter's
    /// estimate, without counting as a failure; an error after the queue's backoff.
    async fn sync(&self, name: &str) -> Result<Requeue, Error> {
        if self.namespaces.store().get(name).is_none() {
            return Ok(Requeue::Done);
        }
        Ok(match self.deleter.delete(name).await? {
            None => Requeue::Done,
            Some(estimate) => {
                tracing::debug!(namespace = %name, ?estimate, "content remaining; looking again later");
                Requeue::After(estimate)
            }
        })
    }
}
