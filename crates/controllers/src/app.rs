//! `skiff controller-manager` (upstream `cmd/kube-controller-manager/app`): one client,
//! one shared informer factory and one event broadcaster for every controller enabled by
//! `--controllers`, under leader election on the Lease
//! `kube-system/kube-controller-manager` unless `--leader-elect=false`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use skiff_client::cache::SharedInformerFactory;
use skiff_client::events::{ApiEventSink, controller_broadcaster};
use skiff_client::leaderelection::{
    LeaderElectionConfig, LeaderElector, LeaderMetrics, Outcome, default_identity,
};
use skiff_client::metrics::{LeaderElectionMetrics, WorkQueueMetrics, text_format};
use skiff_client::serving::{self, Exposition, HealthState};
use skiff_client::workqueue::QueueMetrics;
use tokio_util::sync::CancellationToken;

use crate::certificates::{approver, cleaner, signer};
use crate::{
    Error, cronjob, daemon, deployment, disruption, endpoint, endpointslice, garbagecollector, job,
    namespace, nodeipam, nodelifecycle, podgc, replicaset, resourcequota, rootcacertpublisher,
    serviceaccount, statefulset, ttlafterfinished,
};

/// The controllers Skiff has, with upstream's `--controllers` names.
pub const KNOWN_CONTROLLERS: &[&str] = &[
    approver::NAME,
    cleaner::NAME,
    signer::NAME,
    cronjob::NAME,
    daemon::NAME,
    deployment::NAME,
    disruption::NAME,
    endpoint::NAME,
    endpointslice::NAME,
    garbagecollector::NAME,
    job::NAME,
    namespace::NAME,
    nodeipam::NAME,
    nodelifecycle::NAME,
    podgc::NAME,
    replicaset::NAME,
    resourcequota::NAME,
    rootcacertpublisher::NAME,
    serviceaccount::NAME,
    statefulset::NAME,
    nodelifecycle::TAINT_EVICTION_NAME,
    ttlafterfinished::NAME,
];

/// The older names upstream's `--controllers` still accepts for the controllers here,
/// with the name each stands for.
pub const CONTROLLER_ALIASES: &[(&str, &str)] = &[
    (approver::ALIAS, approver::NAME),
    (cleaner::ALIAS, cleaner::NAME),
    (signer::ALIAS, signer::NAME),
    (nodeipam::ALIAS, nodeipam::NAME),
];

/// `name`, or the controller it is an alias of.
fn canonical(name: &str) -> &str {
    CONTROLLER_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical)
}

/// How to run the controller manager (the flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// `--kubeconfig`.
    pub kubeconfig: PathBuf,
    /// How the kubeconfig's API server is reached: over the network (the default), or in
    /// process inside `skiff server`.
    pub api_connector: skiff_client::in_process::Connector,
    /// `--controllers`: `*` for every controller on by default, `name` to enable one,
    /// `-name` to disable one (default `*`).
    pub controllers: Vec<String>,
    /// `--concurrent-replicaset-syncs` (default 5).
    pub concurrent_replicaset_syncs: usize,
    /// `--concurrent-deployment-syncs` (default 5).
    pub concurrent_deployment_syncs: usize,
    /// `--concurrent-daemonset-syncs` (default 2).
    pub concurrent_daemonset_syncs: usize,
    /// `--concurrent-statefulset-syncs` (default 5).
    pub concurrent_statefulset_syncs: usize,
    /// `--concurrent-gc-syncs` (default 20).
    pub concurrent_gc_syncs: usize,
    /// `--concurrent-job-syncs` (default 5).
    pub concurrent_job_syncs: usize,
    /// `--concurrent-namespace-syncs` (default 10).
    pub concurrent_namespace_syncs: usize,
    /// `--node-monitor-period` and `--node-monitor-grace-period` (5 s, 50 s).
    pub node_monitor: nodelifecycle::Timing,
    /// `--terminated-pod-gc-threshold`: terminated pods kept before the oldest are
    /// deleted (default 12,500; 0 keeps all).
    pub terminated_pod_gc_threshold: usize,
    /// `--root-ca-file`: the CA bundle published as `kube-root-ca.crt` in every
    /// namespace; without it, the kubeconfig's CA.
    pub root_ca_file: Option<PathBuf>,
    /// `--concurrent-cron-job-syncs` (default 5).
    pub concurrent_cron_job_syncs: usize,
    /// `--concurrent-ttl-after-finished-syncs` (default 5).
    pub concurrent_ttl_after_finished_syncs: usize,
    /// `--concurrent-endpoint-syncs`: Services the Endpoints controller syncs at once
    /// (default 5).
    pub concurrent_endpoint_syncs: usize,
    /// `--concurrent-service-endpoint-syncs`: Services the EndpointSlice controller syncs
    /// at once (default 5).
    pub concurrent_service_endpoint_syncs: usize,
    /// `--max-endpoints-per-slice`: endpoints in one EndpointSlice, 1 to 1000 (default
    /// 100).
    pub max_endpoints_per_slice: usize,
    /// `--concurrent-resource-quota-syncs`: ResourceQuotas synced at once (default 5).
    pub concurrent_resource_quota_syncs: usize,
    /// `--resource-quota-sync-period`: how often every ResourceQuota's usage is
    /// recalculated in full (default 5 min).
    pub resource_quota_sync_period: Duration,
    /// `--leader-elect` (default true).
    pub leader_elect: bool,
    /// `--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
    /// `--leader-elect-retry-period` (15 s, 10 s, 2 s).
    pub lease_duration: Duration,
    /// See `lease_duration`.
    pub renew_deadline: Duration,
    /// See `lease_duration`.
    pub retry_period: Duration,
    /// `--bind-address` and `--secure-port` of `/healthz` and `/metrics` over HTTPS
    /// (0.0.0.0 and 10257; port 0 turns it off).
    pub bind_address: IpAddr,
    /// See `bind_address`.
    pub secure_port: u16,
    /// `--cluster-signing-cert-file` and `--cluster-signing-key-file`: the CA (PEM) the
    /// CSR signer signs with; without both, the signer does not start.
    pub cluster_signing_cert_file: Option<PathBuf>,
    /// See `cluster_signing_cert_file`.
    pub cluster_signing_key_file: Option<PathBuf>,
    /// `--cluster-signing-duration`: the longest lifetime of a signed certificate
    /// (default 8760 h).
    pub cluster_signing_duration: Duration,
    /// `--allocate-node-cidrs`, `--cluster-cidr`, `--node-cidr-mask-size[-ipv4|-ipv6]`,
    /// `--service-cluster-ip-range` of the node IPAM controller.
    pub node_ipam: nodeipam::Config,
    /// `--kube-api-qps` and `--kube-api-burst` (upstream's defaults: 20 and 30).
    pub kube_api_qps: f32,
    /// See `kube_api_qps`.
    pub kube_api_burst: i32,
}

impl Options {
    /// Upstream's defaults for everything but the kubeconfig.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            kubeconfig,
            api_connector: skiff_client::in_process::Connector::default(),
            controllers: vec!["*".to_owned()],
            concurrent_replicaset_syncs: 5,
            concurrent_deployment_syncs: 5,
            concurrent_daemonset_syncs: 2,
            concurrent_statefulset_syncs: 5,
            concurrent_gc_syncs: 20,
            concurrent_job_syncs: 5,
            concurrent_namespace_syncs: namespace::DEFAULT_CONCURRENT_SYNCS,
            node_monitor: nodelifecycle::Timing::default(),
            terminated_pod_gc_threshold: 12_500,
            root_ca_file: None,
            concurrent_cron_job_syncs: 5,
            concurrent_ttl_after_finished_syncs: 5,
            concurrent_endpoint_syncs: 5,
            concurrent_service_endpoint_syncs: 5,
            max_endpoints_per_slice: endpointslice::DEFAULT_MAX_ENDPOINTS_PER_SLICE,
            concurrent_resource_quota_syncs: 5,
            resource_quota_sync_period: resourcequota::DEFAULT_SYNC_PERIOD,
            leader_elect: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            bind_address: IpAddr::from([0, 0, 0, 0]),
            secure_port: 10257,
            cluster_signing_cert_file: None,
            cluster_signing_key_file: None,
            cluster_signing_duration: signer::DEFAULT_DURATION,
            node_ipam: nodeipam::Config::default(),
            kube_api_qps: 20.0,
            kube_api_burst: 30,
        }
    }
}

/// The controller manager's metrics: client-go's work queue and leader election ones.
#[derive(Debug)]
pub struct Metrics {
    registry: prometheus_client::registry::Registry,
    /// Every controller's queue reports here.
    pub queues: Arc<WorkQueueMetrics>,
    /// The elector reports here.
    pub leader: Arc<LeaderElectionMetrics>,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        let mut registry = prometheus_client::registry::Registry::default();
        let queues = Arc::new(WorkQueueMetrics::register(&mut registry));
        let leader = Arc::new(LeaderElectionMetrics::register(&mut registry));
        Self {
            registry,
            queues,
            leader,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Exposition for Metrics {
    fn encode(&self) -> String {
        text_format(&self.registry)
    }
}

/// Whether `name` runs under `--controllers` (upstream `IsControllerEnabled`): named
/// explicitly (or by its alias, [`CONTROLLER_ALIASES`]), or `*` given and not disabled
/// with `-name`. Errors: an unknown name.
pub fn enabled(controllers: &[String], name: &str) -> Result<bool, Error> {
    for c in controllers {
        let bare = canonical(c.strip_prefix('-').unwrap_or(c));
        if bare != "*" && !KNOWN_CONTROLLERS.contains(&bare) {
            return Err(Error::Config(format!(
                "{c:?} is not in the list of known controllers"
            )));
        }
    }
    if controllers.iter().any(|c| canonical(c) == name) {
        return Ok(true);
    }
    if controllers
        .iter()
        .any(|c| c.strip_prefix('-').map(canonical) == Some(name))
    {
        return Ok(false);
    }
    Ok(controllers.iter().any(|c| c == "*"))
}

/// Runs the controller manager until `cancel` (Ok) or until leadership is lost (an
/// error, as upstream exits with "leaderelection lost").
///
/// Errors: the kubeconfig cannot be loaded, `--controllers` names an unknown
/// controller, `--max-endpoints-per-slice` is not within 1 to 1000, the leader election
/// settings are invalid, or leadership is lost.
pub async fn run(opts: Options, cancel: CancellationToken) -> Result<(), Error> {
    for name in KNOWN_CONTROLLERS {
        enabled(&opts.controllers, name)?;
    }
    if !(1..=1000).contains(&opts.max_endpoints_per_slice) {
        return Err(Error::Config(format!(
            "--max-endpoints-per-slice must be between 1 and 1000, got {}",
            opts.max_endpoints_per_slice
        )));
    }
    let client = skiff_client::connect(
        &opts.kubeconfig,
        opts.kube_api_qps,
        opts.kube_api_burst,
        &opts.api_connector,
    )
    .await?;
    let metrics = Arc::new(Metrics::new());
    let health = HealthState::new(None);
    if opts.secure_port != 0 {
        let addr = SocketAddr::new(opts.bind_address, opts.secure_port);
        let exposition: Arc<dyn Exposition> = Arc::clone(&metrics) as Arc<dyn Exposition>;
        serving::start(addr, true, Arc::clone(&health), exposition, cancel.clone()).await?;
    }
    if !opts.leader_elect {
        run_controllers(&opts, client, &metrics, cancel).await;
        health.set_shutting_down();
        return Ok(());
    }
    let election = LeaderElectionConfig {
        lease_duration: opts.lease_duration,
        renew_deadline: opts.renew_deadline,
        retry_period: opts.retry_period,
        ..LeaderElectionConfig::with_defaults("kube-controller-manager", default_identity()?)
    };
    let elector = LeaderElector::new(client.clone(), election)?
        .with_metrics(Arc::clone(&metrics.leader) as Arc<dyn LeaderMetrics>)
        .with_events(client.clone(), "kube-controller-manager");
    health.set_leader_election(elector.health());
    tracing::info!(
        identity = elector.identity(),
        "attempting to acquire the leader lease"
    );
    let outcome = elector
        .run(cancel, |leading| async move {
            tracing::info!("acquired the leader lease; starting controllers");
            run_controllers(&opts, client, &metrics, leading).await;
        })
        .await;
    health.set_shutting_down();
    match outcome {
        Outcome::Cancelled => Ok(()),
        Outcome::LeadershipLost => Err(Error::Config("leaderelection lost".into())),
    }
}

/// A client of its own for one controller, from the kubeconfig, so that each has its own
/// `--kube-api-qps`/`--kube-api-burst` budget, as upstream's `ClientBuilder` gives every
/// controller (and the shared informers) a client: a burst of watches from the garbage
/// collector's discovery must not delay a Job's pods. Falls back to `shared` (logged)
/// if the kubeconfig cannot be loaded again.
async fn own_client(opts: &Options, shared: &kube::Client) -> kube::Client {
    match skiff_client::connect(
        &opts.kubeconfig,
        opts.kube_api_qps,
        opts.kube_api_burst,
        &opts.api_connector,
    )
    .await
    {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(error = %e, "a controller shares the manager's client");
            shared.clone()
        }
    }
}

/// Starts the enabled controllers and their informers; returns at `cancel`.
pub async fn run_controllers(
    opts: &Options,
    client: kube::Client,
    metrics: &Metrics,
    cancel: CancellationToken,
) {
    let queues = Arc::clone(&metrics.queues) as Arc<dyn QueueMetrics>;
    let factory = SharedInformerFactory::new(own_client(opts, &client).await);
    let (recorders, events) = controller_broadcaster(ApiEventSink::new(client.clone()));
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(events.run(cancel.clone()));
    if enabled(&opts.controllers, replicaset::NAME).unwrap_or(false) {
        let rs = replicaset::ReplicaSetController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(replicaset::NAME),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&rs).run(opts.concurrent_replicaset_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, deployment::NAME).unwrap_or(false) {
        let d = deployment::DeploymentController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(deployment::NAME),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&d).run(opts.concurrent_deployment_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, job::NAME).unwrap_or(false) {
        let j = job::JobController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(job::NAME),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&j).run(opts.concurrent_job_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, namespace::NAME).unwrap_or(false) {
        let ns = namespace::NamespaceController::new(
            own_client(opts, &client).await,
            &factory,
            Arc::clone(&queues),
        );
        tasks.spawn(ns.run(opts.concurrent_namespace_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, nodelifecycle::NAME).unwrap_or(false) {
        let evict = enabled(&opts.controllers, nodelifecycle::TAINT_EVICTION_NAME).unwrap_or(false);
        let n = nodelifecycle::NodeLifecycleController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(nodelifecycle::TAINT_EVICTION_NAME),
            opts.node_monitor,
            evict,
        );
        tasks.spawn(n.run(cancel.clone()));
    }
    if enabled(&opts.controllers, podgc::NAME).unwrap_or(false) {
        let gc = podgc::PodGc::new(
            own_client(opts, &client).await,
            &factory,
            opts.terminated_pod_gc_threshold,
        );
        tasks.spawn(gc.run(cancel.clone()));
    }
    if enabled(&opts.controllers, serviceaccount::NAME).unwrap_or(false) {
        let sa = serviceaccount::ServiceAccountsController::new(
            own_client(opts, &client).await,
            &factory,
            Arc::clone(&queues),
        );
        tasks.spawn(sa.run(cancel.clone()));
    }
    if enabled(&opts.controllers, rootcacertpublisher::NAME).unwrap_or(false) {
        match root_ca(opts) {
            Ok(ca) => {
                let p = rootcacertpublisher::Publisher::new(
                    own_client(opts, &client).await,
                    &factory,
                    ca,
                    Arc::clone(&queues),
                );
                tasks.spawn(p.run(cancel.clone()));
            }
            Err(e) => tracing::error!(error = %e, "the root CA publisher could not start"),
        }
    }
    if enabled(&opts.controllers, daemon::NAME).unwrap_or(false) {
        let ds = daemon::DaemonSetController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(daemon::NAME),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&ds).run(opts.concurrent_daemonset_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, statefulset::NAME).unwrap_or(false) {
        let sts = statefulset::StatefulSetController::new(
            client.clone(),
            &factory,
            recorders.recorder(statefulset::NAME),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&sts).run(opts.concurrent_statefulset_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, cronjob::NAME).unwrap_or(false) {
        let cj = cronjob::CronJobController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(cronjob::NAME),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&cj).run(opts.concurrent_cron_job_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, ttlafterfinished::NAME).unwrap_or(false) {
        let ttl = ttlafterfinished::TtlAfterFinishedController::new(
            own_client(opts, &client).await,
            &factory,
            Arc::clone(&queues),
        );
        tasks.spawn(ttl.run(opts.concurrent_ttl_after_finished_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, endpoint::NAME).unwrap_or(false) {
        let ep = endpoint::EndpointsController::new(
            client.clone(),
            &factory,
            recorders.recorder(endpoint::MANAGED_BY_VALUE),
            Arc::clone(&queues),
        );
        tasks.spawn(Arc::clone(&ep).run(opts.concurrent_endpoint_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, endpointslice::NAME).unwrap_or(false) {
        let eps = endpointslice::EndpointSliceController::new(
            client.clone(),
            &factory,
            recorders.recorder(endpointslice::EVENT_SOURCE),
            Arc::clone(&queues),
            opts.max_endpoints_per_slice,
        );
        tasks.spawn(Arc::clone(&eps).run(opts.concurrent_service_endpoint_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, disruption::NAME).unwrap_or(false) {
        let dc = disruption::DisruptionController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder(disruption::NAME),
            Arc::clone(&queues),
        );
        // Upstream runs one worker and has no flag for it.
        tasks.spawn(Arc::clone(&dc).run(1, cancel.clone()));
    }
    if enabled(&opts.controllers, resourcequota::NAME).unwrap_or(false) {
        let rq = resourcequota::ResourceQuotaController::new(
            own_client(opts, &client).await,
            &factory,
            Arc::clone(&queues),
            opts.resource_quota_sync_period,
        );
        tasks.spawn(Arc::clone(&rq).run(opts.concurrent_resource_quota_syncs, cancel.clone()));
    }
    if enabled(&opts.controllers, garbagecollector::NAME).unwrap_or(false) {
        match garbagecollector::GarbageCollector::new(
            own_client(opts, &client).await,
            Arc::clone(&queues),
        )
        .await
        {
            Ok(gc) => {
                tasks.spawn(gc.run(opts.concurrent_gc_syncs, cancel.clone()));
            }
            Err(e) => tracing::error!(error = %e, "the garbage collector could not start"),
        }
    }
    start_certificate_controllers(opts, &client, &factory, &queues, &mut tasks, &cancel).await;
    if enabled(&opts.controllers, nodeipam::NAME).unwrap_or(false) {
        match nodeipam::NodeIpamController::new(
            own_client(opts, &client).await,
            &factory,
            recorders.recorder("cidrAllocator"),
            &opts.node_ipam,
            Arc::clone(&queues),
        ) {
            Ok(Some(ipam)) => {
                tasks.spawn(ipam.run(cancel.clone()));
            }
            Ok(None) => tracing::info!("node IPAM: --allocate-node-cidrs is false; not allocating"),
            Err(e) => tracing::error!(error = %e, "the node IPAM controller could not start"),
        }
    }
    factory.start(&cancel);
    while tasks.join_next().await.is_some() {}
}

/// Starts the enabled CSR controllers: approving, signing (when both
/// `--cluster-signing-*-file` are given) and cleaning.
async fn start_certificate_controllers(
    opts: &Options,
    client: &kube::Client,
    factory: &SharedInformerFactory,
    queues: &Arc<dyn QueueMetrics>,
    tasks: &mut tokio::task::JoinSet<()>,
    cancel: &CancellationToken,
) {
    if enabled(&opts.controllers, approver::NAME).unwrap_or(false) {
        let a = approver::new(own_client(opts, client).await, factory, Arc::clone(queues));
        tasks.spawn(a.run(5, cancel.clone()));
    }
    if enabled(&opts.controllers, signer::NAME).unwrap_or(false) {
        match (
            &opts.cluster_signing_cert_file,
            &opts.cluster_signing_key_file,
        ) {
            (Some(cert), Some(key)) => match signer::SigningCa::read(cert, key) {
                Ok(ca) => match signer::new(
                    own_client(opts, client).await,
                    factory,
                    &ca,
                    opts.cluster_signing_duration,
                    Arc::clone(queues),
                ) {
                    Ok(s) => {
                        tasks.spawn(s.run(5, cancel.clone()));
                    }
                    Err(e) => tracing::error!(error = %e, "the CSR signer could not start"),
                },
                Err(e) => tracing::error!(error = %e, "the CSR signer could not start"),
            },
            (None, None) => tracing::info!(
                "skipping the CSR signer: no --cluster-signing-cert-file and --cluster-signing-key-file"
            ),
            _ => tracing::error!(
                "the CSR signer needs both --cluster-signing-cert-file and --cluster-signing-key-file; not starting it"
            ),
        }
    }
    if enabled(&opts.controllers, cleaner::NAME).unwrap_or(false) {
        let c = cleaner::CsrCleaner::new(own_client(opts, client).await, factory);
        tasks.spawn(c.run(cancel.clone()));
    }
}

/// The CA bundle (PEM) to publish: `--root-ca-file`, else the kubeconfig's
/// `certificate-authority-data` or `certificate-authority` file (upstream falls back to
/// the client's CA data likewise).
///
/// Errors: the file cannot be read, or the kubeconfig has no CA.
fn root_ca(opts: &Options) -> Result<String, Error> {
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("reading {}: {e}", path.display())))
    };
    if let Some(path) = &opts.root_ca_file {
        return read(path);
    }
    let kubeconfig = kube::config::Kubeconfig::read_from(&opts.kubeconfig)
        .map_err(|e| Error::Config(format!("reading {}: {e}", opts.kubeconfig.display())))?;
    let current = kubeconfig.current_context.clone().unwrap_or_default();
    let cluster_name = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| Some(&c.name) == cluster_name.as_ref())
        .or_else(|| kubeconfig.clusters.first())
        .and_then(|c| c.cluster.as_ref());
    if let Some(data) = cluster.and_then(|c| c.certificate_authority_data.as_deref()) {
        use base64::Engine as _;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| Error::Config(format!("the kubeconfig's CA data: {e}")))?;
        return String::from_utf8(pem)
            .map_err(|e| Error::Config(format!("the kubeconfig's CA data: {e}")));
    }
    if let Some(path) = cluster.and_then(|c| c.certificate_authority.as_deref()) {
        return read(std::path::Path::new(path));
    }
    Err(Error::Config(
        "no --root-ca-file and no CA in the kubeconfig".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_flag_as_upstream() {
        let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert!(enabled(&v(&["*"]), replicaset::NAME).unwrap());
        assert!(!enabled(&v(&["*", "-replicaset-controller"]), replicaset::NAME).unwrap());
        assert!(enabled(&v(&["replicaset-controller"]), replicaset::NAME).unwrap());
        assert!(!enabled(&v(&[]), replicaset::NAME).unwrap());
        assert!(enabled(&v(&["*"]), daemon::NAME).unwrap());
        assert!(enabled(&v(&["*"]), statefulset::NAME).unwrap());
        // The CSR and IPAM controllers, also by upstream's older names.
        for name in [approver::NAME, signer::NAME, cleaner::NAME, nodeipam::NAME] {
            assert!(enabled(&v(&["*"]), name).unwrap());
        }
        assert!(enabled(&v(&["csrapproving"]), approver::NAME).unwrap());
        assert!(!enabled(&v(&["*", "-csrsigning"]), signer::NAME).unwrap());
        assert!(!enabled(&v(&["*", "-nodeipam"]), nodeipam::NAME).unwrap());
        assert!(enabled(&v(&["*", "-nodeipam"]), cleaner::NAME).unwrap());
        assert!(enabled(&v(&["*"]), disruption::NAME).unwrap());
        assert!(enabled(&v(&["*"]), resourcequota::NAME).unwrap());
        assert!(!enabled(&v(&["*", "-disruption-controller"]), disruption::NAME).unwrap());
        let err = enabled(&v(&["*", "bogus"]), replicaset::NAME).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration: \"bogus\" is not in the list of known controllers"
        );
    }
}
