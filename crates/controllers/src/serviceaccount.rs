//! The ServiceAccount controller (upstream
//! `pkg/controller/serviceaccount/serviceaccounts_controller.go`): every active
//! namespace has the ServiceAccount `default`, recreated if deleted. A terminating
//! namespace gets none.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::run_controller;

/// The controller's name (`--controllers`).
pub const NAME: &str = "serviceaccount-controller";
/// The account every namespace gets.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The ServiceAccount controller; see the module doc.
pub struct ServiceAccountsController {
    client: kube::Client,
    namespaces: Arc<SharedInformer<Namespace>>,
    accounts: Arc<SharedInformer<ServiceAccount>>,
    queue: Arc<WorkQueue<String>>,
}

impl std::fmt::Debug for ServiceAccountsController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountsController")
            .finish_non_exhaustive()
    }
}

impl ServiceAccountsController {
    /// The controller over the factory's Namespace and ServiceAccount informers.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new("serviceaccount").with_metrics(queue_metrics));
        let namespaces = factory.informer::<Namespace>();
        let accounts = factory.informer::<ServiceAccount>();
        let q = Arc::clone(&queue);
        namespaces.add_event_handler(Box::new(move |d| match d {
            Delta::Added(ns) | Delta::Updated(_, ns) => {
                q.add(ns.metadata.name.clone().unwrap_or_default());
            }
            Delta::Deleted(_) => {}
        }));
        let q = Arc::clone(&queue);
        accounts.add_event_handler(Box::new(move |d| {
            if let Delta::Deleted(sa) = d
                && sa.metadata.name.as_deref() == Some(DEFAULT_SERVICE_ACCOUNT)
            {
                q.add(sa.metadata.namespace.clone().unwrap_or_default());
            }
        }));
        Arc::new(Self {
            client,
            namespaces,
            accounts,
            queue,
        })
    }

    /// Waits for the informers, then syncs with one worker until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.namespaces, &*self.accounts],
            &self.queue,
            1,
            cancel,
            &self,
            |this, ns| async move { this.sync(&ns).await },
        )
        .await;
    }

    /// Creates `default` in the namespace if it is active and lacks it (upstream
    /// `syncNamespace`).
    async fn sync(&self, ns: &str) -> Result<(), Error> {
        let Some(namespace) = self.namespaces.store().get(ns) else {
            return Ok(());
        };
        let terminating = namespace.metadata.deletion_timestamp.is_some()
            || namespace.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
        if terminating {
            return Ok(());
        }
        let key = format!("{ns}/{DEFAULT_SERVICE_ACCOUNT}");
        if self.accounts.store().get(&key).is_some() {
            return Ok(());
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let sa = ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some(DEFAULT_SERVICE_ACCOUNT.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => Ok(()),
            // Created meanwhile, or the namespace began terminating (upstream ignores
            // both: 409 AlreadyExists, 403 NamespaceTerminating).
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
