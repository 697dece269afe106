//! The namespace controller (upstream `pkg/controller/namespace`,
//! `namespace_controller.go`): every namespace with a `deletionTimestamp` is emptied by the
//! [`deletion`] module and then released from its `kubernetes` finalizer, after which the
//! API server removes it. A namespace whose content is still going (pods in their grace
//! period, objects held by finalizers) is looked at again after the deleter's estimate.

pub mod deletion;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;

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
        tokio::select! {
            () = cancel.cancelled() => return,
            () = self.namespaces.wait_for_sync() => {}
        }
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..workers.max(1) {
            let this = Arc::clone(&self);
            tasks.spawn(async move { this.worker().await });
        }
        cancel.cancelled().await;
        self.queue.shut_down();
        while tasks.join_next().await.is_some() {}
    }

    /// Upstream `workerFunc`: content left brings the namespace back after the
    /// deleter's estimate (without counting as a failure); an error after the queue's
    /// backoff.
    async fn worker(&self) {
        while let Some(name) = self.queue.get().await {
            match self.sync(&name).await {
                Ok(None) => self.queue.forget(&name),
                Ok(Some(estimate)) => {
                    self.queue.forget(&name);
                    tracing::debug!(namespace = %name, ?estimate, "content remaining; looking again later");
                    self.queue.add_after(name.clone(), estimate);
                }
                Err(e) => {
                    tracing::warn!(controller = NAME, namespace = %name, error = %e, "deletion failed; retrying");
                    self.queue.add_rate_limited(name.clone());
                }
            }
            self.queue.done(&name);
        }
    }

    /// One deletion step of the namespace `name` (upstream `syncNamespaceFromKey`).
    /// Returns when to look again, if content is left.
    async fn sync(&self, name: &str) -> Result<Option<Duration>, Error> {
        if self.namespaces.store().get(name).is_none() {
            return Ok(None);
        }
        self.deleter.delete(name).await
    }
}
