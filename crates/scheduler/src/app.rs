//! `skiff scheduler` (upstream `cmd/kube-scheduler/app`): the configuration from
//! `--config` and flags, the API client, the health and metrics endpoint, the event
//! recorder, the informers, and the scheduling loop, under leader election unless
//! `--leader-elect=false`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::backend::queue::{DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION, QueueOptions};
use crate::config::{self, KubeSchedulerConfiguration};
use crate::error::Error;
use crate::framework::plugins::in_tree_registry;
use crate::framework::runtime::Recorder;
use crate::metrics::{AttemptResult, Metrics};
use crate::scheduler::{Observer, Scheduler, SchedulerOptions};
use skiff_client::events::{ApiEventSink, broadcaster};
use skiff_client::leaderelection::{
    LeaderElectionConfig, LeaderElector, LeaderMetrics, Outcome, default_identity,
};
use skiff_client::serving::{self, HealthState};

/// The flags of `skiff scheduler` (kube-scheduler's names). A flag that is set wins over
/// the `--config` file's field, as kube-scheduler's leader election and client flags do.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--config`: a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1).
    pub config: Option<PathBuf>,
    /// `--kubeconfig` (else the file's `clientConnection.kubeconfig`).
    pub kubeconfig: Option<PathBuf>,
    /// How the kubeconfig's API server is reached: over the network (the default), or in
    /// process inside `skiff server`.
    pub api_connector: skiff_client::in_process::Connector,
    /// `--bind-address` of the HTTPS endpoint.
    pub bind_address: IpAddr,
    /// `--secure-port` (0: no endpoint).
    pub secure_port: u16,
    /// `--leader-elect`.
    pub leader_elect: Option<bool>,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Option<Duration>,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Option<Duration>,
    /// `--leader-elect-retry-period`.
    pub retry_period: Option<Duration>,
    /// `--leader-elect-resource-name`.
    pub lease_name: Option<String>,
    /// `--leader-elect-resource-namespace`.
    pub lease_namespace: Option<String>,
    /// `--kube-api-qps`.
    pub kube_api_qps: Option<f32>,
    /// `--kube-api-burst`.
    pub kube_api_burst: Option<i32>,
    /// `--pod-max-in-unschedulable-pods-duration`.
    pub pod_max_in_unschedulable_pods_duration: Option<Duration>,
}

impl Options {
    /// kube-scheduler's defaults with `kubeconfig`: no configuration file, the endpoint
    /// on 0.0.0.0:10259, leader election and client settings from the (default)
    /// KubeSchedulerConfiguration.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            config: None,
            kubeconfig: Some(kubeconfig),
            api_connector: skiff_client::in_process::Connector::default(),
            bind_address: IpAddr::from([0, 0, 0, 0]),
            secure_port: 10259,
            leader_elect: None,
            lease_duration: None,
            renew_deadline: None,
            retry_period: None,
            lease_name: None,
            lease_namespace: None,
            kube_api_qps: None,
            kube_api_burst: None,
            pod_max_in_unschedulable_pods_duration: None,
        }
    }
}

/// Feeds the scheduler's observations into the Prometheus metrics.
struct MetricsObserver(Arc<Metrics>);

impl Observer for MetricsObserver {
    fn attempt(&self, result: &str, profile: &str, duration: Duration) {
        let result = match result {
            "scheduled" => AttemptResult::Scheduled,
            "unschedulable" => AttemptResult::Unschedulable,
            _ => AttemptResult::Error,
        };
        self.0.observe_attempt(result, profile, duration);
    }
    fn pending(&self, active: usize, backoff: usize, unschedulable: usize, gated: usize) {
        self.0.set_pending(active, backoff, unschedulable, gated);
    }
    fn preemption_attempt(&self) {
        self.0.inc_preemption_attempts();
    }
    fn preemption_victims(&self, victims: usize) {
        self.0.observe_preemption_victims(victims);
    }
}

fn duration_or(flag: Option<Duration>, file: &config::GoDuration) -> Duration {
    flag.or_else(|| file.to_std()).unwrap_or_default()
}

/// Runs the scheduler until `cancel` (Ok) or until leadership is lost (an error, as
/// upstream exits with "leaderelection lost").
///
/// Errors: a bad configuration or kubeconfig, an endpoint that cannot be bound, plugins
/// that cannot be built, or leadership lost.
pub async fn run(opts: Options, cancel: CancellationToken) -> Result<(), Error> {
    let cfg = match &opts.config {
        Some(path) => config::load(path)?,
        None => KubeSchedulerConfiguration::default(),
    };
    let kubeconfig = opts
        .kubeconfig
        .clone()
        .or_else(|| {
            let k = &cfg.client_connection.kubeconfig;
            (!k.is_empty()).then(|| PathBuf::from(k))
        })
        .ok_or_else(|| {
            Error::Config(
                "--kubeconfig (or clientConnection.kubeconfig in --config) is required".into(),
            )
        })?;
    let qps = opts.kube_api_qps.unwrap_or(cfg.client_connection.qps);
    let burst = opts.kube_api_burst.unwrap_or(cfg.client_connection.burst);
    let client = skiff_client::connect(&kubeconfig, qps, burst, &opts.api_connector)
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let le = &cfg.leader_election;
    let leader_elect = opts.leader_elect.unwrap_or_else(|| le.leader_elect());
    let election = LeaderElectionConfig {
        namespace: opts
            .lease_namespace
            .clone()
            .unwrap_or_else(|| le.resource_namespace.clone()),
        name: opts
            .lease_name
            .clone()
            .unwrap_or_else(|| le.resource_name.clone()),
        identity: default_identity().map_err(config_error)?,
        lease_duration: duration_or(opts.lease_duration, &le.lease_duration),
        renew_deadline: duration_or(opts.renew_deadline, &le.renew_deadline),
        retry_period: duration_or(opts.retry_period, &le.retry_period),
        release_on_cancel: true,
    };
    if leader_elect {
        election.validate().map_err(config_error)?;
    }

    let metrics = Arc::new(Metrics::new());
    let health = HealthState::new(Some("sched-handler-sync"));
    if opts.secure_port != 0 {
        let addr = SocketAddr::new(opts.bind_address, opts.secure_port);
        serving::start(
            addr,
            true,
            Arc::clone(&health),
            Arc::clone(&metrics) as Arc<dyn serving::Exposition>,
            cancel.clone(),
        )
        .await
        .map_err(|e| match e {
            skiff_client::Error::Serve { addr, source } => Error::Serve { addr, source },
            other => Error::Config(other.to_string()),
        })?;
    }
    let (recorders, events) = broadcaster(ApiEventSink::new(client.clone()));
    tokio::spawn(events.run(cancel.clone()));

    let mut profiles = config::profile_specs(&cfg)?;
    for p in &mut profiles {
        if p.percentage_of_nodes_to_score.is_none() {
            p.percentage_of_nodes_to_score = Some(cfg.percentage_of_nodes_to_score());
        }
    }
    let first_profile = profiles
        .first()
        .map(|p| p.scheduler_name.clone())
        .unwrap_or_else(|| "default-scheduler".into());
    let sched = Scheduler::new(
        client.clone(),
        SchedulerOptions {
            profiles,
            registry: in_tree_registry(),
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score(),
            queue: QueueOptions {
                pod_initial_backoff: cfg.pod_initial_backoff(),
                pod_max_backoff: cfg.pod_max_backoff(),
                pod_max_in_unschedulable_pods_duration: opts
                    .pod_max_in_unschedulable_pods_duration
                    .unwrap_or(DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION),
                ..QueueOptions::default()
            },
            assumed_pod_ttl: Duration::ZERO,
            recorder: Arc::new(move |name: &str| -> Arc<dyn Recorder> {
                Arc::new(recorders.recorder(name))
            }),
            observer: Arc::new(MetricsObserver(Arc::clone(&metrics))),
        },
    )?;
    tracing::info!(
        profiles = ?sched.profiles.keys().collect::<Vec<_>>(),
        leader_elect,
        "starting the scheduler"
    );
    tokio::select! {
        () = cancel.cancelled() => return Ok(()),
        () = sched.start_informers(&cancel) => {}
    }
    health.set_handlers_synced();
    tracing::info!("informer caches synced");
    if !leader_elect {
        sched.run(cancel).await;
        return Ok(());
    }
    let elector = LeaderElector::new(client.clone(), election)
        .map_err(config_error)?
        .with_metrics(Arc::clone(&metrics) as Arc<dyn LeaderMetrics>)
        .with_events(client, &first_profile);
    health.set_leader_election(elector.health());
    let identity = elector.identity().to_owned();
    tracing::info!(%identity, "attempting to acquire the leader lease");
    let outcome = elector
        .run(cancel, move |leading| async move {
            tracing::info!("acquired the leader lease; scheduling");
            sched.run(leading).await;
        })
        .await;
    match outcome {
        Outcome::Cancelled => Ok(()),
        Outcome::LeadershipLost => Err(Error::Config("leaderelection lost".into())),
    }
}

/// A leader election configuration error as the scheduler reports it.
fn config_error(e: skiff_client::Error) -> Error {
    Error::Config(e.to_string())
}
