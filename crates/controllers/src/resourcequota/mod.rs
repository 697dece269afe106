//! The resource quota controller (upstream `pkg/controller/resourcequota`): keeps each
//! ResourceQuota's `status.hard` equal to `spec.hard` and `status.used` equal to what
//! the namespace's objects use of every resource named in `hard` ([`evaluator`]:
//! object counts, pod compute resources under the quota's scopes, Service load
//! balancers and node ports, claim storage per StorageClass).
//!
//! Every quota is recalculated every `--resource-quota-sync-period` (5 min), and at once
//! when an object it may count is created or deleted, or changes what it charges (a
//! pod that finishes, a Service that changes type: upstream's replenishment). The kinds
//! counted from informers are pods, Services, PersistentVolumeClaims, ConfigMaps,
//! Secrets, ReplicationControllers, ResourceQuotas, Deployments, ReplicaSets,
//! StatefulSets, DaemonSets, Jobs and CronJobs; a `count/<resource>.<group>` of any other
//! kind is counted by a LIST found through discovery at each sync (no replenishment:
//! it follows at the next resync), and one naming no served resource is left out.
//!
//! Enforcing quota on create is the API server's admission, not this controller.

pub(crate) mod evaluator;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Pod, ReplicationController, ResourceQuota,
    ResourceQuotaStatus, Secret, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::Scope;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, Watchable, object_key};
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use self::evaluator::{
    Family, Objects, Usage, amount_of, calculate_usage, claim_usage, family, format_amount,
    pod_usage, scope_requirements, service_usage,
};
use crate::Error;
use crate::controller_utils::{InformerSynced, run_workers, wait_for_cache_sync};

/// The controller's name (`--controllers`).
pub const NAME: &str = "resourcequota-controller";

/// `--resource-quota-sync-period`'s default: every quota is recalculated this often.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(5 * 60);

/// Objects of one kind counted per namespace from an informer.
trait Counted: InformerSynced {
    /// The objects in namespace `ns`.
    fn count(&self, ns: &str) -> usize;
}

impl<K: Watchable> Counted for SharedInformer<K> {
    fn count(&self, ns: &str) -> usize {
        self.store()
            .list()
            .iter()
            .filter(|o| o.meta().namespace.as_deref() == Some(ns))
            .count()
    }
}

/// The resource quota controller; see the module doc.
pub struct ResourceQuotaController {
    client: kube::Client,
    quotas: Arc<SharedInformer<ResourceQuota>>,
    pods: Arc<SharedInformer<Pod>>,
    services: Arc<SharedInformer<Service>>,
    claims: Arc<SharedInformer<PersistentVolumeClaim>>,
    /// Informer-backed counts by `<resource>` / `<resource>.<group>`.
    counted: BTreeMap<&'static str, Arc<dyn Counted>>,
    queue: Arc<WorkQueue<String>>,
    sync_period: Duration,
}

impl std::fmt::Debug for ResourceQuotaController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceQuotaController")
            .field("sync_period", &self.sync_period)
            .finish_non_exhaustive()
    }
}

/// What the event handlers need.
#[derive(Clone)]
struct Handlers {
    quotas: Arc<SharedInformer<ResourceQuota>>,
    queue: Arc<WorkQueue<String>>,
}

impl Handlers {
    /// Queues every quota of namespace `ns` (upstream `replenishQuota`).
    fn replenish(&self, ns: Option<&str>) {
        let Some(ns) = ns else {
            return;
        };
        for q in self.quotas.store().list() {
            if q.metadata.namespace.as_deref() == Some(ns) {
                self.queue.add(object_key(q.as_ref()));
            }
        }
    }

    fn on_quota(&self, delta: &Delta<ResourceQuota>) {
        match delta {
            Delta::Added(q) => self.queue.add(object_key(q.as_ref())),
            // The controller's own status writes change no spec.
            Delta::Updated(old, new) if old.spec != new.spec => {
                self.queue.add(object_key(new.as_ref()));
            }
            _ => {}
        }
    }

    /// Replenishes on every create and delete of `K`, and on updates `changed` says
    /// change what the object charges.
    fn watch<K: Watchable>(
        &self,
        informer: &SharedInformer<K>,
        changed: impl Fn(&K, &K) -> bool + Send + Sync + 'static,
    ) {
        let h = self.clone();
        informer.add_event_handler(Box::new(move |d: &Delta<K>| match d {
            Delta::Added(o) | Delta::Deleted(o) => h.replenish(o.meta().namespace.as_deref()),
            Delta::Updated(old, new) => {
                if changed(old, new) {
                    h.replenish(new.meta().namespace.as_deref());
                }
            }
        }));
    }
}

/// True when a pod update changes what it charges or the scopes it is in.
fn pod_changed(old: &Pod, new: &Pod) -> bool {
    let now = Timestamp::now();
    pod_usage(old, now) != pod_usage(new, now)
        || old.spec.as_ref().and_then(|s| s.active_deadline_seconds)
            != new.spec.as_ref().and_then(|s| s.active_deadline_seconds)
}

impl ResourceQuotaController {
    /// The controller over the factory's informers of ResourceQuotas and of the counted
    /// kinds (see the module doc), its handlers registered; `sync_period` is
    /// `--resource-quota-sync-period`.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        queue_metrics: Arc<dyn QueueMetrics>,
        sync_period: Duration,
    ) -> Arc<Self> {
        let handlers = Handlers {
            quotas: factory.informer::<ResourceQuota>(),
            queue: Arc::new(WorkQueue::new("resourcequota_primary").with_metrics(queue_metrics)),
        };
        let h = handlers.clone();
        handlers
            .quotas
            .add_event_handler(Box::new(move |d| h.on_quota(d)));
        let pods = factory.informer::<Pod>();
        handlers.watch(&pods, pod_changed);
        let services = factory.informer::<Service>();
        handlers.watch(&services, |a: &Service, b: &Service| {
            service_usage(a) != service_usage(b)
        });
        let claims = factory.informer::<PersistentVolumeClaim>();
        handlers.watch(
            &claims,
            |a: &PersistentVolumeClaim, b: &PersistentVolumeClaim| claim_usage(a) != claim_usage(b),
        );
        let mut counted: BTreeMap<&'static str, Arc<dyn Counted>> = BTreeMap::new();
        counted.insert("pods", Arc::clone(&pods) as Arc<dyn Counted>);
        counted.insert("services", Arc::clone(&services) as Arc<dyn Counted>);
        counted.insert(
            "persistentvolumeclaims",
            Arc::clone(&claims) as Arc<dyn Counted>,
        );
        fn add<K: Watchable>(
            counted: &mut BTreeMap<&'static str, Arc<dyn Counted>>,
            handlers: &Handlers,
            factory: &SharedInformerFactory,
            name: &'static str,
        ) {
            let informer = factory.informer::<K>();
            handlers.watch(&informer, |_: &K, _: &K| false);
            counted.insert(name, informer as Arc<dyn Counted>);
        }
        add::<ConfigMap>(&mut counted, &handlers, factory, "configmaps");
        add::<Secret>(&mut counted, &handlers, factory, "secrets");
        add::<ReplicationController>(&mut counted, &handlers, factory, "replicationcontrollers");
        add::<ResourceQuota>(&mut counted, &handlers, factory, "resourcequotas");
        add::<Deployment>(&mut counted, &handlers, factory, "deployments.apps");
        add::<ReplicaSet>(&mut counted, &handlers, factory, "replicasets.apps");
        add::<StatefulSet>(&mut counted, &handlers, factory, "statefulsets.apps");
        add::<DaemonSet>(&mut counted, &handlers, factory, "daemonsets.apps");
        add::<Job>(&mut counted, &handlers, factory, "jobs.batch");
        add::<CronJob>(&mut counted, &handlers, factory, "cronjobs.batch");
        Arc::new(Self {
            client,
            quotas: handlers.quotas,
            pods,
            services,
            claims,
            counted,
            queue: handlers.queue,
            sync_period,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers
    /// (`--concurrent-resource-quota-syncs`, default 5) and queues every quota each sync
    /// period, until `cancel`.
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        let informers: Vec<&dyn InformerSynced> =
            std::iter::once(&*self.quotas as &dyn InformerSynced)
                .chain(self.counted.values().map(|c| &**c as &dyn InformerSynced))
                .collect();
        if !wait_for_cache_sync(&cancel, &informers).await {
            return;
        }
        let resync = {
            let this = Arc::clone(&self);
            let cancel = cancel.clone();
            async move {
                let mut tick = tokio::time::interval(this.sync_period.max(Duration::from_secs(1)));
                tick.tick().await;
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    for q in this.quotas.store().list() {
                        this.queue.add(object_key(q.as_ref()));
                    }
                }
            }
        };
        let this = Arc::clone(&self);
        let workers = run_workers(NAME, Arc::clone(&self.queue), workers, cancel, move |key| {
            let this = Arc::clone(&this);
            async move { this.sync(&key).await }
        });
        tokio::join!(resync, workers);
    }

    /// One sync of the quota `key` (upstream `syncResourceQuota`): the usage written
    /// when it or `hard` changed. Errors: the status write failed, or a count through
    /// discovery failed (the other resources are written first).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(quota) = self.quotas.store().get(key) else {
            return Ok(());
        };
        let ns = quota.metadata.namespace.clone().unwrap_or_default();
        let spec = quota.spec.clone().unwrap_or_default();
        let hard = spec.hard.clone().unwrap_or_default();
        let mut counts = BTreeMap::new();
        let mut failure = None;
        for name in hard.keys() {
            let Some(Family::Count(resource)) = family(name) else {
                continue;
            };
            if counts.contains_key(&resource) {
                continue;
            }
            if let Some(c) = self.counted.get(resource.as_str()) {
                counts.insert(resource, i64::try_from(c.count(&ns)).unwrap_or(i64::MAX));
                continue;
            }
            match self.count_discovered(&resource, &ns).await {
                Ok(Some(n)) => {
                    counts.insert(resource, n);
                }
                Ok(None) => {}
                Err(e) => failure = Some(e),
            }
        }
        let in_ns = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.namespace.as_deref() == Some(ns.as_str())
        };
        let pods: Vec<Arc<Pod>> = self.pods.store().list();
        let services: Vec<Arc<Service>> = self.services.store().list();
        let claims: Vec<Arc<PersistentVolumeClaim>> = self.claims.store().list();
        let objects = Objects {
            pods: pods
                .iter()
                .map(AsRef::as_ref)
                .filter(|p| in_ns(&p.metadata))
                .collect(),
            services: services
                .iter()
                .map(AsRef::as_ref)
                .filter(|s| in_ns(&s.metadata))
                .collect(),
            claims: claims
                .iter()
                .map(AsRef::as_ref)
                .filter(|c| in_ns(&c.metadata))
                .collect(),
            counts,
        };
        let scopes = scope_requirements(
            spec.scopes.as_deref(),
            spec.scope_selector
                .as_ref()
                .and_then(|s| s.match_expressions.as_deref()),
        );
        let usage = calculate_usage(hard.keys(), &scopes, &objects, Timestamp::now());
        if let Some(status) = new_status(&quota, usage) {
            let api: Api<ResourceQuota> = Api::namespaced(self.client.clone(), &ns);
            let mut updated = (*quota).clone();
            updated.status = Some(status);
            api.replace_status(
                quota.metadata.name.as_deref().unwrap_or(""),
                &PostParams::default(),
                &updated,
            )
            .await?;
        }
        failure.map_or(Ok(()), Err)
    }

    /// The objects of `<resource>[.<group>]` in `ns`, listed through discovery; `None`
    /// when no such namespaced resource is served (upstream has no evaluator then).
    ///
    /// Errors: discovery or the LIST fails.
    async fn count_discovered(&self, resource: &str, ns: &str) -> Result<Option<i64>, Error> {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        let api_group = match kube::discovery::group(&self.client, group).await {
            Ok(g) => g,
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some((ar, _)) = api_group
            .recommended_resources()
            .into_iter()
            .find(|(ar, caps)| ar.plural == plural && caps.scope == Scope::Namespaced)
        else {
            return Ok(None);
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let list = api.list_metadata(&ListParams::default()).await?;
        Ok(Some(i64::try_from(list.items.len()).unwrap_or(i64::MAX)))
    }
}

/// The status to write for `usage`, or `None` when the quota already has it (upstream:
/// written when `status.hard` differs from `spec.hard`, on the first sync, or when
/// `used` changed). `used` keeps earlier values of resources no evaluator computed and
/// drops resources no longer in `hard`.
pub(crate) fn new_status(quota: &ResourceQuota, usage: Usage) -> Option<ResourceQuotaStatus> {
    let hard = quota
        .spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default();
    let old = quota.status.clone().unwrap_or_default();
    let mut used: BTreeMap<String, Quantity> = old
        .used
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| hard.contains_key(k))
        .collect();
    for (name, amount) in usage {
        let q = format_amount(&name, amount);
        used.insert(name, q);
    }
    let same = |a: &BTreeMap<String, Quantity>, b: Option<&BTreeMap<String, Quantity>>| {
        b.is_some_and(|b| {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| amount_of(v) == amount_of(w)))
        })
    };
    if same(&hard, old.hard.as_ref()) && same(&used, old.used.as_ref()) {
        return None;
    }
    Some(ResourceQuotaStatus {
        hard: Some(hard),
        used: Some(used),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ResourceQuotaSpec;

    use super::*;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    #[test]
    fn status_follows_spec_and_usage() {
        let mut quota = ResourceQuota {
            spec: Some(ResourceQuotaSpec {
                hard: Some(list(&[
                    ("pods", "10"),
                    ("requests.cpu", "2"),
                    ("example.com/x", "1"),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let usage: Usage = [("pods".to_owned(), 3000), ("requests.cpu".to_owned(), 1500)]
            .into_iter()
            .collect();
        // First sync: written.
        let first = new_status(&quota, usage.clone()).expect("a first status");
        assert_eq!(
            first.hard.as_ref(),
            quota.spec.as_ref().unwrap().hard.as_ref()
        );
        assert_eq!(
            first.used,
            Some(list(&[("pods", "3"), ("requests.cpu", "1500m")]))
        );
        quota.status = Some(first);
        // Nothing changed: not written.
        assert_eq!(new_status(&quota, usage.clone()), None);
        // A resource no evaluator computes keeps its value; one dropped from hard goes.
        quota.status.as_mut().unwrap().used = Some(list(&[
            ("pods", "3"),
            ("requests.cpu", "1500m"),
            ("example.com/x", "1"),
            ("secrets", "4"),
        ]));
        let pruned = new_status(&quota, usage.clone()).expect("pruned");
        assert_eq!(
            pruned.used,
            Some(list(&[
                ("pods", "3"),
                ("requests.cpu", "1500m"),
                ("example.com/x", "1")
            ]))
        );
        quota.status = Some(pruned);
        // A new hard limit is written even with the same usage.
        quota.spec.as_mut().unwrap().hard = Some(list(&[
            ("pods", "20"),
            ("requests.cpu", "2"),
            ("example.com/x", "1"),
        ]));
        let raised = new_status(&quota, usage).expect("new hard");
        assert_eq!(raised.hard.unwrap()["pods"], Quantity("20".into()));
    }
}
