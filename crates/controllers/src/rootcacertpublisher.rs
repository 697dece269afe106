//! The root CA certificate publisher (upstream `pkg/controller/certificates/rootcacertpublisher`,
//! KEP-1205): every active namespace holds the ConfigMap `kube-root-ca.crt` whose
//! `ca.crt` is the cluster's CA bundle, so that pods can verify the API server through
//! their projected service account volume. An edited or deleted ConfigMap is restored.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::run_controller;

/// The controller's name (`--controllers`).
pub const NAME: &str = "root-ca-certificate-publisher-controller";
/// The ConfigMap's name in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// The ConfigMap's key holding the bundle.
pub const ROOT_CA_KEY: &str = "ca.crt";
/// The annotation upstream writes on the ConfigMap.
const DESCRIPTION_KEY: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
     when using internal endpoints such as the internal service IP or kubernetes.default.svc. \
     No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The publisher; see the module doc.
pub struct Publisher {
    client: kube::Client,
    root_ca: String,
    namespaces: Arc<SharedInformer<Namespace>>,
    config_maps: Arc<SharedInformer<ConfigMap>>,
    queue: Arc<WorkQueue<String>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").finish_non_exhaustive()
    }
}

impl Publisher {
    /// The publisher of `root_ca` (PEM) over the factory's Namespace and ConfigMap
    /// informers.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        root_ca: String,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let queue = Arc::new(WorkQueue::new("root_ca_cert_publisher").with_metrics(queue_metrics));
        let namespaces = factory.informer::<Namespace>();
        let config_maps = factory.informer::<ConfigMap>();
        let q = Arc::clone(&queue);
        namespaces.add_event_handler(Box::new(move |d| match d {
            Delta::Added(ns) | Delta::Updated(_, ns) => {
                q.add(ns.metadata.name.clone().unwrap_or_default());
            }
            Delta::Deleted(_) => {}
        }));
        let q = Arc::clone(&queue);
        config_maps.add_event_handler(Box::new(move |d| {
            let cm = match d {
                Delta::Added(_) => return,
                Delta::Updated(_, cm) | Delta::Deleted(cm) => cm,
            };
            if cm.metadata.name.as_deref() == Some(ROOT_CA_CONFIG_MAP) {
                q.add(cm.metadata.namespace.clone().unwrap_or_default());
            }
        }));
        Arc::new(Self {
            client,
            root_ca,
            namespaces,
            config_maps,
            queue,
        })
    }

    /// Waits for the informers, then syncs with one worker until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.namespaces, &*self.config_maps],
            &self.queue,
            1,
            cancel,
            &self,
            |this, ns| async move { this.sync(&ns).await },
        )
        .await;
    }

    /// Creates or restores the namespace's ConfigMap (upstream `syncNamespace`).
    async fn sync(&self, ns: &str) -> Result<(), Error> {
        let Some(namespace) = self.namespaces.store().get(ns) else {
            return Ok(());
        };
        if namespace.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let data = BTreeMap::from([(ROOT_CA_KEY.to_owned(), self.root_ca.clone())]);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let key = format!("{ns}/{ROOT_CA_CONFIG_MAP}");
        let Some(cm) = self.config_maps.store().get(&key) else {
            let cm = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(ROOT_CA_CONFIG_MAP.to_owned()),
                    annotations: Some(BTreeMap::from([(
                        DESCRIPTION_KEY.to_owned(),
                        DESCRIPTION.to_owned(),
                    )])),
                    ..Default::default()
                },
                data: Some(data),
                ..Default::default()
            };
            return match api.create(&PostParams::default(), &cm).await {
                Ok(_) => Ok(()),
                // The cache was behind, or the namespace is going away.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => Ok(()),
                Err(e) => Err(e.into()),
            };
        };
        let annotated = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DESCRIPTION_KEY))
            .is_some_and(|d| d == DESCRIPTION);
        if cm.data.as_ref() == Some(&data) && annotated {
            return Ok(());
        }
        let mut fixed = (*cm).clone();
        fixed.data = Some(data);
        fixed.binary_data = None;
        fixed
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(DESCRIPTION_KEY.to_owned(), DESCRIPTION.to_owned());
        match api
            .replace(ROOT_CA_CONFIG_MAP, &PostParams::default(), &fixed)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
