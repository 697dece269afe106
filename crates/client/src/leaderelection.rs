//! Leader election with a coordination.k8s.io/v1 Lease (client-go
//! `tools/leaderelection` with the `leases` resource lock, as kube-scheduler and
//! kube-controller-manager use it).
//!
//! Candidates share one Lease (`kube-system/kube-scheduler` for the scheduler). Its record
//! (`holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`,
//! `leaseTransitions`) is only ever compared with what this process saw before, never
//! with its own clock: a lease held by someone else may be taken once
//! `leaseDurationSeconds` of the record have passed, on the local monotonic clock, since
//! this process last saw the record change. Every write is a PUT with the
//! `resourceVersion` last read, so that two candidates cannot both win (the loser gets a
//! 409 and tries again later).
//!
//! [`LeaderElector::run`] tries to acquire the lease every `retryPeriod` (jittered by a
//! factor of 1.2), then calls the caller's `on_started_leading` with a token that is
//! cancelled when leadership ends, and renews the lease every `retryPeriod`; a renewal
//! that does not succeed within `renewDeadline` ends the leadership
//! ([`Outcome::LeadershipLost`]: kube-scheduler then exits with "leaderelection lost").
//! On cancellation the lease is released (`holderIdentity` "", `leaseDurationSeconds` 1)
//! when `release_on_cancel` is set, so that another candidate takes over at once.
//! [`LeaderHealth`] serves `/healthz/leaderElection` (client-go's `HealthzAdaptor`).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use crate::Error;

/// Where the elector reports its metrics (client-go's `leaderMetricsAdapter`): the
/// component exposes them as `leader_election_master_status{name}` and
/// `leader_election_slowpath_total{name}`.
pub trait LeaderMetrics: Send + Sync {
    /// This candidate started (true) or stopped (false) leading the lease `name`.
    fn set_leader(&self, name: &str, leading: bool);
    /// The leader had to re-read the lease `name` to renew it.
    fn inc_leader_slowpath(&self, name: &str);
}

/// The jitter factor of the acquire loop (client-go `JitterFactor`): each wait is
/// `retryPeriod * (1 + 1.2 * rand)`.
pub const JITTER_FACTOR: f64 = 1.2;

/// How long past its lease a leader that failed to renew is still reported healthy by
/// [`LeaderHealth::check`] (kube-scheduler's `NewLeaderHealthzAdaptor(20s)`).
pub const HEALTHZ_TIMEOUT: Duration = Duration::from_secs(20);

/// What the elector needs (client-go `LeaderElectionConfig` with a `LeaseLock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// The Lease's namespace (`resourceNamespace`, default `kube-system`).
    pub namespace: String,
    /// The Lease's name (`resourceName`, default `kube-scheduler`); also the `name` label
    /// of `leader_election_master_status`.
    pub name: String,
    /// This candidate's identity, written as `holderIdentity` ([`default_identity`]).
    pub identity: String,
    /// How long non-leaders wait, after the last change they saw, before taking the
    /// lease (default 15 s). Written as whole seconds.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before giving up (default 10 s).
    pub renew_deadline: Duration,
    /// The wait between attempts (default 2 s).
    pub retry_period: Duration,
    /// Release the lease when [`LeaderElector::run`] is cancelled (kube-scheduler: true).
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// The defaults kube-scheduler and kube-controller-manager share (component-base
    /// `LeaderElectionConfiguration`): the Lease `kube-system/<name>`, 15 s lease, 10 s
    /// renew deadline, 2 s retry period, released on shutdown.
    pub fn with_defaults(name: &str, identity: String) -> Self {
        Self {
            namespace: "kube-system".to_owned(),
            name: name.to_owned(),
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }

    /// client-go `NewLeaderElector`'s checks, with its messages.
    ///
    /// Errors: [`Error::LeaderElection`] when the lease duration is not above the renew deadline,
    /// the renew deadline not above `retryPeriod * 1.2`, a duration is zero, or the
    /// identity is empty.
    pub fn validate(&self) -> Result<(), Error> {
        let fail = |m: &str| Err(Error::LeaderElection(m.to_owned()));
        if self.lease_duration <= self.renew_deadline {
            return fail("leaseDuration must be greater than renewDeadline");
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return fail("renewDeadline must be greater than retryPeriod*JitterFactor");
        }
        if self.lease_duration.is_zero() {
            return fail("leaseDuration must be greater than zero");
        }
        if self.renew_deadline.is_zero() {
            return fail("renewDeadline must be greater than zero");
        }
        if self.retry_period.is_zero() {
            return fail("retryPeriod must be greater than zero");
        }
        if self.identity.is_empty() {
            return fail("Lock identity is empty");
        }
        if self.namespace.is_empty() || self.name.is_empty() {
            return fail("lease namespace and name are required");
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// kube-scheduler's identity: `<hostname>_<random UUID>`, so that two processes on one
/// host never share it.
///
/// Errors: [`Error::LeaderElection`] when the hostname cannot be read.
pub fn default_identity() -> Result<String, Error> {
    let host = nix::unistd::gethostname()
        .map_err(|e| Error::LeaderElection(format!("unable to get hostname: {e}")))?;
    Ok(format!("{}_{}", host.to_string_lossy(), uuid_v4()))
}

/// A random (version 4) UUID in its hyphenated form.
fn uuid_v4() -> String {
    skiff_api::uuid::format_v4(rand::random())
}

/// The election state kept in the Lease's spec (client-go `LeaderElectionRecord`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaderElectionRecord {
    /// The leader's identity; empty when released.
    pub holder_identity: String,
    /// How long (seconds) others wait after seeing the record change.
    pub lease_duration_seconds: i32,
    /// When the holder acquired the lease.
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// How many times the holder changed.
    pub leader_transitions: i32,
}

impl LeaderElectionRecord {
    /// The record of a Lease spec (client-go `LeaseSpecToLeaderElectionRecord`).
    pub fn from_spec(spec: &LeaseSpec) -> Self {
        Self {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            leader_transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// The Lease spec of the record (client-go `LeaderElectionRecordToLeaseSpec`): every
    /// field set, times as MicroTime (RFC 3339 with microseconds).
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.leader_transitions),
            ..Default::default()
        }
    }
}

/// The last record this candidate saw or wrote, and when (local monotonic clock).
#[derive(Debug, Clone)]
pub struct Observed {
    /// The record.
    pub record: LeaderElectionRecord,
    /// When it was seen to change (or written).
    pub time: Instant,
}

/// Whether the lease of `observed` is still running at `now`: less than its
/// `leaseDurationSeconds` passed since the record was seen to change (client-go
/// `isLeaseValid`).
pub fn is_lease_valid(observed: &Observed, now: Instant) -> bool {
    let duration =
        Duration::from_secs(u64::try_from(observed.record.lease_duration_seconds).unwrap_or(0));
    observed.time + duration > now
}

/// Whether `identity` may write the lease whose last observed state is `observed`:
/// when it holds it, when it was released (empty holder), or when the holder's lease
/// expired on the local clock. The pure decision of client-go's `tryAcquireOrRenew`
/// step 3.
pub fn can_acquire(identity: &str, observed: &Observed, now: Instant) -> bool {
    let held_by_other =
        !observed.record.holder_identity.is_empty() && observed.record.holder_identity != identity;
    !(held_by_other && is_lease_valid(observed, now))
}

/// The record `identity` writes over `old` at wall time `now` with `lease_duration`
/// (client-go `tryAcquireOrRenew` step 4): a renewal keeps the acquire time and the
/// transitions; a takeover starts a new term and counts one more transition.
pub fn next_record(
    identity: &str,
    lease_duration: Duration,
    old: &LeaderElectionRecord,
    now: Timestamp,
) -> LeaderElectionRecord {
    let renewing = old.holder_identity == identity;
    LeaderElectionRecord {
        holder_identity: identity.to_owned(),
        lease_duration_seconds: i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX),
        acquire_time: if renewing {
            old.acquire_time
        } else {
            Some(now)
        },
        renew_time: Some(now),
        leader_transitions: if renewing {
            old.leader_transitions
        } else {
            old.leader_transitions.saturating_add(1)
        },
    }
}

/// Why a lease read or write failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The API server answered with an error status (409 on a stale resourceVersion).
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// No answer within the request timeout.
    #[error("request timed out")]
    Timeout,
    /// An update before any read or create.
    #[error("lease not initialized, call get or create first")]
    NotInitialized,
}

/// Where the Lease is read and written (client-go's `resourcelock.Interface` for a
/// Lease); [`ApiLeaseStore`] talks to the API server.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// The Lease, or None when it does not exist.
    async fn get(&self) -> Result<Option<Lease>, LockError>;
    /// Creates the Lease.
    async fn create(&self, lease: &Lease) -> Result<Lease, LockError>;
    /// Replaces the Lease (PUT, with `lease`'s resourceVersion: 409 when it is stale).
    async fn replace(&self, lease: &Lease) -> Result<Lease, LockError>;
}

/// The Lease through the API server.
pub struct ApiLeaseStore {
    api: Api<Lease>,
    name: String,
    timeout: Duration,
}

impl ApiLeaseStore {
    /// The Lease `namespace/name`, each request bounded by `timeout` (client-go uses
    /// `renewDeadline / 2`).
    pub fn new(client: kube::Client, namespace: &str, name: &str, timeout: Duration) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            timeout,
        }
    }

    async fn bounded<T>(
        &self,
        f: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r.map_err(LockError::Api),
            Err(_) => Err(LockError::Timeout),
        }
    }
}

#[async_trait]
impl LeaseStore for ApiLeaseStore {
    async fn get(&self) -> Result<Option<Lease>, LockError> {
        self.bounded(self.api.get_opt(&self.name)).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.bounded(self.api.create(&PostParams::default(), lease))
            .await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, LockError> {
        self.bounded(self.api.replace(&self.name, &PostParams::default(), lease))
            .await
    }
}

/// The clocks the elector reads: the monotonic one for every decision, the wall one
/// only for the times written into the record.
pub trait Clock: Send + Sync {
    /// Monotonic now.
    fn now(&self) -> Instant;
    /// Wall-clock now.
    fn wall(&self) -> Timestamp;
}

/// The real clocks.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// State shared between the elector and its health checks.
struct Shared {
    identity: String,
    lease_duration: Duration,
    lease_name: String,
    clock: Arc<dyn Clock>,
    observed: Mutex<Option<Observed>>,
}

impl Shared {
    fn observed(&self) -> Option<Observed> {
        self.observed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn is_leader(&self) -> bool {
        self.observed()
            .is_some_and(|o| o.record.holder_identity == self.identity)
    }

    fn set_observed(&self, record: LeaderElectionRecord) {
        let time = self.clock.now();
        *self.observed.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Observed { record, time });
    }
}

/// A leader that should have renewed its lease long ago ([`LeaderHealth::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed election to renew leadership on lease {lease}")]
pub struct RenewalOverdue {
    /// The Lease's name.
    pub lease: String,
}

/// The leader election's health (client-go `HealthzAdaptor`): cheap to clone, for
/// `/healthz/leaderElection` and `/readyz/leaderElection`.
#[derive(Clone)]
pub struct LeaderHealth {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LeaderHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderHealth")
            .field("identity", &self.shared.identity)
            .field("is_leader", &self.is_leader())
            .finish()
    }
}

impl LeaderHealth {
    /// Whether the last record seen names this candidate as holder.
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    /// The holder of the last record seen ("" before any).
    pub fn leader(&self) -> String {
        self.shared
            .observed()
            .map(|o| o.record.holder_identity)
            .unwrap_or_default()
    }

    /// client-go `LeaderElector.Check`: fails when this candidate still thinks it leads
    /// but has not renewed for more than the lease duration plus `max_tolerable_expired`
    /// (it should have stepped down; a stuck process). Non-leaders are healthy.
    ///
    /// Errors: [`RenewalOverdue`] (upstream's message, "failed election to renew
    /// leadership on lease `<name>`").
    pub fn check(&self, max_tolerable_expired: Duration) -> Result<(), RenewalOverdue> {
        let Some(observed) = self.shared.observed() else {
            return Ok(());
        };
        if observed.record.holder_identity != self.shared.identity {
            return Ok(());
        }
        let since = self
            .shared
            .clock
            .now()
            .saturating_duration_since(observed.time);
        if since > self.shared.lease_duration + max_tolerable_expired {
            return Err(RenewalOverdue {
                lease: self.shared.lease_name.clone(),
            });
        }
        Ok(())
    }
}

impl LeaderHealth {
    /// The health of `identity` that last saw `holder` hold the lease `lease` of
    /// `lease_duration`, `observed_ago` ago, with no elector behind it: for the tests of
    /// a component's `/healthz`.
    pub fn fixed(
        lease: &str,
        identity: &str,
        holder: &str,
        lease_duration: Duration,
        observed_ago: Duration,
    ) -> Self {
        let now = Instant::now();
        let time = now.checked_sub(observed_ago).unwrap_or(now);
        Self {
            shared: Arc::new(Shared {
                identity: identity.to_owned(),
                lease_duration,
                lease_name: lease.to_owned(),
                clock: Arc::new(RealClock),
                observed: Mutex::new(Some(Observed {
                    record: LeaderElectionRecord {
                        holder_identity: holder.to_owned(),
                        lease_duration_seconds: 15,
                        ..Default::default()
                    },
                    time,
                })),
            }),
        }
    }
}

/// How [`LeaderElector::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The run token was cancelled (shutdown): exit 0 as upstream.
    Cancelled,
    /// The lease could not be renewed within the renew deadline: upstream logs
    /// "Leaderelection lost" and exits 1.
    LeadershipLost,
}

/// A leader election candidate (client-go `LeaderElector`).
pub struct LeaderElector {
    config: LeaderElectionConfig,
    store: Box<dyn LeaseStore>,
    shared: Arc<Shared>,
    /// The Lease last read or written (its resourceVersion guards the next write).
    lease: Option<Lease>,
    /// The spec last read, to notice changes (client-go `observedRawRecord`).
    observed_spec: Option<LeaseSpec>,
    metrics: Option<Arc<dyn LeaderMetrics>>,
    /// Where "became leader" / "stopped leading" events go, and their source component.
    events: Option<(kube::Client, String)>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// A candidate for the Lease of `config` through the API server.
    ///
    /// Errors: [`Error::LeaderElection`] from [`LeaderElectionConfig::validate`].
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Result<Self, Error> {
        let store = ApiLeaseStore::new(
            client,
            &config.namespace,
            &config.name,
            config.renew_deadline / 2,
        );
        Self::with_store(config, Box::new(store), Arc::new(RealClock))
    }

    /// A candidate reading and writing the lease through `store`, on `clock`.
    ///
    /// Errors: [`Error::LeaderElection`] from [`LeaderElectionConfig::validate`].
    pub fn with_store(
        config: LeaderElectionConfig,
        store: Box<dyn LeaseStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, Error> {
        config.validate()?;
        let shared = Arc::new(Shared {
            identity: config.identity.clone(),
            lease_duration: config.lease_duration,
            lease_name: config.name.clone(),
            clock,
            observed: Mutex::new(None),
        });
        Ok(Self {
            config,
            store,
            shared,
            lease: None,
            observed_spec: None,
            metrics: None,
            events: None,
        })
    }

    /// Reports `leader_election_master_status{name}` and `leader_election_slowpath_total`
    /// into `metrics` (0 until the lease is acquired).
    pub fn with_metrics(mut self, metrics: Arc<dyn LeaderMetrics>) -> Self {
        metrics.set_leader(&self.config.name, false);
        self.metrics = Some(metrics);
        self
    }

    /// Records "`<identity>` became leader" and "`<identity>` stopped leading" as core/v1
    /// Events about the Lease, reason `LeaderElection`, source `component` (client-go
    /// `LeaseLock.RecordEvent`; kube-scheduler's component is its first profile's
    /// scheduler name). Written in the background; a failure is only logged.
    pub fn with_events(mut self, client: kube::Client, component: &str) -> Self {
        self.events = Some((client, component.to_owned()));
        self
    }

    /// The health adaptor, valid for the elector's whole life (also after `run`
    /// consumed it).
    pub fn health(&self) -> LeaderHealth {
        LeaderHealth {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Whether the last record seen names this candidate as holder.
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Campaigns until `cancel` fires or leadership is lost (client-go `Run`).
    ///
    /// Once the lease is acquired, `on_started_leading` is called with a token that is
    /// cancelled when leadership ends (lost, or `cancel`), and its future runs alongside
    /// the renewals. When leadership ends, the elector waits for that future to finish
    /// (at most `renew_deadline`), then releases the lease when `release_on_cancel` is
    /// set, and returns why it ended.
    pub async fn run<F, Fut>(mut self, cancel: CancellationToken, on_started_leading: F) -> Outcome
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        if !self.acquire(&cancel).await {
            return Outcome::Cancelled;
        }
        let leading = cancel.child_token();
        let work = on_started_leading(leading.clone());
        tokio::pin!(work);
        let mut work_done = false;
        let outcome = {
            let renew = self.renew(&cancel);
            tokio::pin!(renew);
            loop {
                tokio::select! {
                    outcome = &mut renew => break outcome,
                    () = &mut work, if !work_done => work_done = true,
                }
            }
        };
        leading.cancel();
        self.record_event("stopped leading");
        if let Some(m) = &self.metrics {
            m.set_leader(&self.config.name, false);
        }
        if !work_done
            && tokio::time::timeout(self.config.renew_deadline, &mut work)
                .await
                .is_err()
        {
            info!("the leader's work did not stop within the renew deadline");
        }
        if self.config.release_on_cancel {
            self.release().await;
        }
        outcome
    }

    /// Tries until the lease is acquired (true) or `cancel` fires (false).
    async fn acquire(&mut self, cancel: &CancellationToken) -> bool {
        let desc = self.config.describe();
        info!("attempting to acquire leader lease {desc}...");
        loop {
            let acquired = tokio::select! {
                ok = self.try_acquire_or_renew() => ok,
                () = cancel.cancelled() => return false,
            };
            if acquired {
                if let Some(m) = &self.metrics {
                    m.set_leader(&self.config.name, true);
                }
                self.record_event("became leader");
                info!("successfully acquired lease {desc}");
                return true;
            }
            debug!("failed to acquire lease {desc}");
            let wait = jittered(self.config.retry_period, JITTER_FACTOR, rand::random());
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return false,
            }
        }
    }

    /// Renews every retry period; ends when a renewal does not succeed within the renew
    /// deadline or `cancel` fires.
    async fn renew(&mut self, cancel: &CancellationToken) -> Outcome {
        let desc = self.config.describe();
        loop {
            let deadline = tokio::time::Instant::now() + self.config.renew_deadline;
            let renewed = loop {
                let attempt = tokio::select! {
                    r = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => r,
                    () = cancel.cancelled() => return Outcome::Cancelled,
                };
                match attempt {
                    Ok(true) => break true,
                    Ok(false) => {}
                    Err(_) => break false,
                }
                let next = tokio::time::Instant::now() + self.config.retry_period;
                if next >= deadline {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline) => break false,
                        () = cancel.cancelled() => return Outcome::Cancelled,
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep_until(next) => {}
                    () = cancel.cancelled() => return Outcome::Cancelled,
                }
            };
            if !renewed {
                info!("failed to renew lease {desc}: timed out waiting for the condition");
                return Outcome::LeadershipLost;
            }
            debug!("successfully renewed lease {desc}");
            tokio::select! {
                () = tokio::time::sleep(self.config.retry_period) => {}
                () = cancel.cancelled() => return Outcome::Cancelled,
            }
        }
    }

    /// Sends `<identity> <what>` about the Lease, when events are on.
    fn record_event(&self, what: &str) {
        let Some((client, component)) = &self.events else {
            return;
        };
        let event = lease_event(
            &self.config,
            self.lease.as_ref(),
            component,
            what,
            self.shared.clock.wall(),
        );
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client.clone(), &self.config.namespace);
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                debug!("unable to record the leader election event: {e}");
            }
        });
    }

    /// Writes `record` over the last Lease seen (its resourceVersion guards the write).
    async fn update(&mut self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let Some(mut lease) = self.lease.clone() else {
            return Err(LockError::NotInitialized);
        };
        lease.spec = Some(record.to_spec());
        let written = self.store.replace(&lease).await?;
        self.lease = Some(written);
        Ok(())
    }

    /// One attempt to acquire or renew the lease (client-go `tryAcquireOrRenew`).
    pub async fn try_acquire_or_renew(&mut self) -> bool {
        let identity = self.config.identity.clone();
        let now_wall = self.shared.clock.wall();
        let now = self.shared.clock.now();

        // 1. The leader's fast path: write over the lease it last wrote.
        if let Some(observed) = self.shared.observed()
            && observed.record.holder_identity == identity
            && is_lease_valid(&observed, now)
            && self.lease.is_some()
        {
            let record = next_record(
                &identity,
                self.config.lease_duration,
                &observed.record,
                now_wall,
            );
            match self.update(&record).await {
                Ok(()) => {
                    self.shared.set_observed(record);
                    return true;
                }
                Err(e) => {
                    error!("Failed to update lock optimistically: {e}, falling back to slow path")
                }
            }
        }

        // 2. Read the lease, or create it.
        let lease = match self.store.get().await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                // A new lease starts with no transition.
                let record = LeaderElectionRecord {
                    leader_transitions: 0,
                    ..next_record(
                        &identity,
                        self.config.lease_duration,
                        &LeaderElectionRecord::default(),
                        now_wall,
                    )
                };
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(record.to_spec()),
                };
                return match self.store.create(&lease).await {
                    Ok(created) => {
                        self.lease = Some(created);
                        self.shared.set_observed(record);
                        true
                    }
                    Err(e) => {
                        error!("error initially creating leader election record: {e}");
                        false
                    }
                };
            }
            Err(e) => {
                error!(
                    "error retrieving resource lock {}: {e}",
                    self.config.describe()
                );
                return false;
            }
        };

        // 3. Note a change of the record, then decide.
        let spec = lease.spec.clone().unwrap_or_default();
        let old = LeaderElectionRecord::from_spec(&spec);
        self.lease = Some(lease);
        if self.observed_spec.as_ref() != Some(&spec) || self.shared.observed().is_none() {
            self.shared.set_observed(old.clone());
            self.observed_spec = Some(spec);
        }
        let Some(observed) = self.shared.observed() else {
            return false;
        };
        if !can_acquire(&identity, &observed, self.shared.clock.now()) {
            debug!(
                "lock is held by {} and has not yet expired",
                old.holder_identity
            );
            return false;
        }

        // 4. Renew (slow path) or take over.
        if old.holder_identity == identity
            && let Some(m) = &self.metrics
        {
            m.inc_leader_slowpath(&self.config.name);
        }
        let record = next_record(&identity, self.config.lease_duration, &old, now_wall);
        match self.update(&record).await {
            Ok(()) => {
                self.shared.set_observed(record);
                true
            }
            Err(e) => {
                error!("Failed to update lock: {e}");
                false
            }
        }
    }

    /// Gives the lease up if this candidate holds it (client-go `release`): holder "",
    /// lease duration 1 s, so that others take it at once.
    async fn release(&mut self) -> bool {
        if !self.is_leader() {
            return true;
        }
        let Some(observed) = self.shared.observed() else {
            return true;
        };
        let now = self.shared.clock.wall();
        let record = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: observed.record.leader_transitions,
        };
        let result = tokio::time::timeout(self.config.renew_deadline, self.update(&record)).await;
        match result {
            Ok(Ok(())) => {
                info!("released leader lease {}", self.config.describe());
                self.shared.set_observed(record);
                true
            }
            Ok(Err(e)) => {
                error!("Failed to release lock: {e}");
                false
            }
            Err(_) => {
                error!("Failed to release lock: request timed out");
                false
            }
        }
    }
}

/// The core/v1 Event `<identity> <what>` about the Lease of `config` (client-go
/// `LeaseLock.RecordEvent` through the legacy recorder): reason `LeaderElection`, type
/// Normal, source `component`, named `<lease>.<hex nanoseconds>` in the Lease's namespace.
pub fn lease_event(
    config: &LeaderElectionConfig,
    lease: Option<&Lease>,
    component: &str,
    what: &str,
    now: Timestamp,
) -> k8s_openapi::api::core::v1::Event {
    use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let meta = lease.map(|l| &l.metadata);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", config.name, now.as_nanosecond())),
            namespace: Some(config.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("coordination.k8s.io/v1".to_owned()),
            kind: Some("Lease".to_owned()),
            name: Some(config.name.clone()),
            namespace: Some(config.namespace.clone()),
            uid: meta.and_then(|m| m.uid.clone()),
            resource_version: meta.and_then(|m| m.resource_version.clone()),
            field_path: None,
        },
        reason: Some("LeaderElection".to_owned()),
        message: Some(format!("{} {what}", config.identity)),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some("Normal".to_owned()),
        source: Some(EventSource {
            component: Some(component.to_owned()),
            host: None,
        }),
        reporting_component: Some(component.to_owned()),
        reporting_instance: Some(String::new()),
        ..Default::default()
    }
}

/// `period * (1 + max_factor * fraction)` (apimachinery `wait.Jitter`), `fraction` in
/// `[0, 1)`.
pub fn jittered(period: Duration, max_factor: f64, fraction: f64) -> Duration {
    period.mul_f64(1.0 + max_factor * fraction.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const ME: &str = "host-a_1";
    const OTHER: &str = "host-b_2";

    fn observed(holder: &str, secs: i32, at: Instant) -> Observed {
        Observed {
            record: LeaderElectionRecord {
                holder_identity: holder.to_owned(),
                lease_duration_seconds: secs,
                ..Default::default()
            },
            time: at,
        }
    }

    #[test]
    fn can_acquire_from_the_observed_record_and_the_local_clock() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // (holder, leaseDurationSeconds, elapsed since observed change, can acquire)
        let cases = [
            ("", 15, s(0), true),      // released: take it at once
            (ME, 15, s(0), true),      // ours: renew
            (ME, 15, s(100), true),    // ours, even expired
            (OTHER, 15, s(0), false),  // someone else's, fresh
            (OTHER, 15, s(14), false), // not yet expired
            (OTHER, 15, s(15), true),  // exactly expired: observed + 15 s is not after now
            (OTHER, 15, s(16), true),  // expired
            (OTHER, 1, s(1), true),    // released by setting 1 s
            (OTHER, 60, s(59), false), // the record's duration counts, not ours
            (OTHER, 0, s(0), true),    // zero-length lease
        ];
        for (holder, secs, elapsed, want) in cases {
            let o = observed(holder, secs, t0);
            assert_eq!(
                can_acquire(ME, &o, t0 + elapsed),
                want,
                "holder {holder:?}, {secs}s lease, {elapsed:?} elapsed"
            );
        }
    }

    #[test]
    fn next_record_keeps_the_term_on_renewal_and_counts_takeovers() {
        let t1: Timestamp = "2026-01-02T03:04:05.123456Z".parse().unwrap();
        let t2: Timestamp = "2026-01-02T03:04:07.5Z".parse().unwrap();
        let old = LeaderElectionRecord {
            holder_identity: ME.to_owned(),
            lease_duration_seconds: 15,
            acquire_time: Some(t1),
            renew_time: Some(t1),
            leader_transitions: 4,
        };
        let renewed = next_record(ME, Duration::from_secs(15), &old, t2);
        assert_eq!(renewed.acquire_time, Some(t1));
        assert_eq!(renewed.renew_time, Some(t2));
        assert_eq!(renewed.leader_transitions, 4);
        let taken = next_record(OTHER, Duration::from_secs(20), &old, t2);
        assert_eq!(taken.holder_identity, OTHER);
        assert_eq!(taken.lease_duration_seconds, 20);
        assert_eq!(taken.acquire_time, Some(t2));
        assert_eq!(taken.leader_transitions, 5);
        // MicroTime: RFC 3339 with microseconds.
        let spec = serde_json::to_value(taken.to_spec()).unwrap();
        assert_eq!(spec["acquireTime"], "2026-01-02T03:04:07.500000Z");
        assert_eq!(spec["holderIdentity"], OTHER);
        assert_eq!(spec["leaseTransitions"], 5);
        assert_eq!(LeaderElectionRecord::from_spec(&taken.to_spec()), taken);
    }

    #[test]
    fn config_validation_messages() {
        let ok = LeaderElectionConfig::with_defaults("kube-scheduler", ME.to_owned());
        assert!(ok.validate().is_ok());
        assert_eq!(ok.namespace, "kube-system");
        assert_eq!(ok.name, "kube-scheduler");
        let msg = |c: LeaderElectionConfig| c.validate().unwrap_err().to_string();
        assert_eq!(
            msg(LeaderElectionConfig {
                lease_duration: Duration::from_secs(10),
                ..ok.clone()
            }),
            "leaseDuration must be greater than renewDeadline"
        );
        assert_eq!(
            msg(LeaderElectionConfig {
                retry_period: Duration::from_secs(9),
                ..ok.clone()
            }),
            "renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        assert_eq!(
            msg(LeaderElectionConfig {
                identity: String::new(),
                ..ok.clone()
            }),
            "Lock identity is empty"
        );
    }

    #[test]
    fn identity_is_hostname_underscore_uuid() {
        let id = default_identity().unwrap();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36);
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&uuid[14..15], "4");
        assert!(matches!(&uuid[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(uuid_v4(), uuid_v4());
    }

    #[test]
    fn leader_election_events_are_about_the_lease() {
        let config = LeaderElectionConfig::with_defaults("kube-scheduler", ME.to_owned());
        let lease = Lease {
            metadata: ObjectMeta {
                uid: Some("u1".to_owned()),
                resource_version: Some("9".to_owned()),
                ..Default::default()
            },
            spec: None,
        };
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let event = lease_event(
            &config,
            Some(&lease),
            "default-scheduler",
            "became leader",
            now,
        );
        let v = serde_json::to_value(&event).unwrap();
        assert_eq!(v["metadata"]["namespace"], "kube-system");
        assert!(
            v["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("kube-scheduler.")
        );
        assert_eq!(
            v["involvedObject"],
            serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "name": "kube-scheduler", "namespace": "kube-system", "uid": "u1",
                "resourceVersion": "9"})
        );
        assert_eq!(v["reason"], "LeaderElection");
        assert_eq!(v["message"], "host-a_1 became leader");
        assert_eq!(v["source"]["component"], "default-scheduler");
        assert_eq!(v["count"], 1);
        assert_eq!(v["type"], "Normal");
    }

    #[test]
    fn jitter_is_between_one_and_two_point_two_periods() {
        let p = Duration::from_secs(2);
        assert_eq!(jittered(p, JITTER_FACTOR, 0.0), p);
        assert_eq!(jittered(p, JITTER_FACTOR, 0.5), Duration::from_millis(3200));
        assert_eq!(jittered(p, JITTER_FACTOR, 1.0), Duration::from_millis(4400));
    }

    /// A Lease kept in memory with resourceVersions, answering 409 on a stale one.
    #[derive(Default)]
    struct FakeStore {
        lease: Mutex<Option<Lease>>,
        version: AtomicU64,
        failing: AtomicBool,
        writes: AtomicU64,
    }

    fn api_error(code: u16, reason: &str) -> LockError {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": reason, "reason": reason, "code": code,
        }))
        .unwrap();
        LockError::Api(kube::Error::Api(Box::new(status)))
    }

    impl FakeStore {
        fn next_version(&self) -> String {
            (self.version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
        }

        fn record(&self) -> LeaderElectionRecord {
            let lease = self.lease.lock().unwrap().clone().unwrap();
            LeaderElectionRecord::from_spec(&lease.spec.unwrap())
        }

        /// Another candidate writes `record` directly.
        fn write(&self, record: LeaderElectionRecord) {
            let mut guard = self.lease.lock().unwrap();
            let mut lease = guard.clone().unwrap_or_default();
            lease.metadata.resource_version = Some(self.next_version());
            lease.spec = Some(record.to_spec());
            *guard = Some(lease);
        }
    }

    #[async_trait]
    impl LeaseStore for Arc<FakeStore> {
        async fn get(&self) -> Result<Option<Lease>, LockError> {
            if self.failing.load(Ordering::SeqCst) {
                return Err(api_error(500, "InternalError"));
            }
            Ok(self.lease.lock().unwrap().clone())
        }

        async fn create(&self, lease: &Lease) -> Result<Lease, LockError> {
            let mut guard = self.lease.lock().unwrap();
            if guard.is_some() {
                return Err(api_error(409, "AlreadyExists"));
            }
            let mut lease = lease.clone();
            lease.metadata.resource_version = Some(self.next_version());
            *guard = Some(lease.clone());
            self.writes.fetch_add(1, Ordering::SeqCst);
            Ok(lease)
        }

        async fn replace(&self, lease: &Lease) -> Result<Lease, LockError> {
            if self.failing.load(Ordering::SeqCst) {
                return Err(api_error(500, "InternalError"));
            }
            let mut guard = self.lease.lock().unwrap();
            let current = guard
                .as_ref()
                .and_then(|l| l.metadata.resource_version.clone());
            if current != lease.metadata.resource_version {
                return Err(api_error(409, "Conflict"));
            }
            let mut lease = lease.clone();
            lease.metadata.resource_version = Some(self.next_version());
            *guard = Some(lease.clone());
            self.writes.fetch_add(1, Ordering::SeqCst);
            Ok(lease)
        }
    }

    /// A monotonic clock moved by hand.
    struct FakeClock {
        now: Mutex<Instant>,
    }

    impl FakeClock {
        fn advance(&self, d: Duration) {
            *self.now.lock().unwrap() += d;
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            *self.now.lock().unwrap()
        }

        fn wall(&self) -> Timestamp {
            let elapsed = self.now().duration_since(START.with(|s| *s));
            let base: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
            base + jiff_span(elapsed)
        }
    }

    fn jiff_span(d: Duration) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::try_from(d).unwrap()
    }

    thread_local! {
        static START: Instant = Instant::now();
    }

    fn candidate(identity: &str, store: &Arc<FakeStore>, clock: &Arc<FakeClock>) -> LeaderElector {
        let config = LeaderElectionConfig::with_defaults("kube-scheduler", identity.to_owned());
        LeaderElector::with_store(config, Box::new(Arc::clone(store)), clock.clone()).unwrap()
    }

    fn setup() -> (Arc<FakeStore>, Arc<FakeClock>) {
        let clock = Arc::new(FakeClock {
            now: Mutex::new(START.with(|s| *s)),
        });
        (Arc::new(FakeStore::default()), clock)
    }

    #[tokio::test]
    async fn creates_the_lease_then_renews_it_on_the_fast_path() {
        let (store, clock) = setup();
        let mut a = candidate(ME, &store, &clock);
        assert!(!a.is_leader());
        assert!(a.try_acquire_or_renew().await);
        assert!(a.is_leader());
        let created = store.record();
        assert_eq!(created.holder_identity, ME);
        assert_eq!(created.lease_duration_seconds, 15);
        assert_eq!(created.leader_transitions, 0);
        assert_eq!(created.acquire_time, created.renew_time);
        let lease = store.lease.lock().unwrap().clone().unwrap();
        assert_eq!(lease.metadata.name.as_deref(), Some("kube-scheduler"));
        assert_eq!(lease.metadata.namespace.as_deref(), Some("kube-system"));

        clock.advance(Duration::from_secs(2));
        assert!(a.try_acquire_or_renew().await);
        let renewed = store.record();
        assert_eq!(renewed.acquire_time, created.acquire_time);
        assert_ne!(renewed.renew_time, created.renew_time);
        assert_eq!(renewed.leader_transitions, 0);
        assert_eq!(store.writes.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn takes_a_held_lease_only_after_lease_duration_without_change() {
        let (store, clock) = setup();
        let mut a = candidate(ME, &store, &clock);
        let mut b = candidate(OTHER, &store, &clock);
        assert!(b.try_acquire_or_renew().await);
        // A sees B's fresh lease.
        assert!(!a.try_acquire_or_renew().await);
        clock.advance(Duration::from_secs(10));
        // B renews: A sees a change and restarts its wait.
        assert!(b.try_acquire_or_renew().await);
        clock.advance(Duration::from_secs(4));
        assert!(!a.try_acquire_or_renew().await);
        // 14 s after the change: still B's.
        clock.advance(Duration::from_secs(14));
        assert!(!a.try_acquire_or_renew().await);
        assert_eq!(store.record().holder_identity, OTHER);
        // 16 s after the change: A takes it over, one more transition.
        clock.advance(Duration::from_secs(2));
        assert!(a.try_acquire_or_renew().await);
        let record = store.record();
        assert_eq!(record.holder_identity, ME);
        assert_eq!(record.leader_transitions, 1);
        assert_eq!(record.acquire_time, record.renew_time);
        assert!(a.is_leader());
        // B's optimistic write now conflicts (409); the slow path sees A's fresh lease.
        assert!(!b.try_acquire_or_renew().await);
        assert!(!b.is_leader());
        assert_eq!(store.record().holder_identity, ME);
    }

    #[tokio::test]
    async fn a_released_lease_is_taken_at_once() {
        let (store, clock) = setup();
        store.write(LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            leader_transitions: 3,
            ..Default::default()
        });
        let mut a = candidate(ME, &store, &clock);
        assert!(a.try_acquire_or_renew().await);
        assert_eq!(store.record().leader_transitions, 4);
        assert_eq!(store.record().lease_duration_seconds, 15);
    }

    #[tokio::test]
    async fn health_fails_when_the_leader_is_past_its_lease_and_the_tolerance() {
        let (store, clock) = setup();
        let mut a = candidate(ME, &store, &clock);
        let health = a.health();
        assert_eq!(health.check(HEALTHZ_TIMEOUT), Ok(()));
        assert!(a.try_acquire_or_renew().await);
        clock.advance(Duration::from_secs(35));
        assert_eq!(health.check(HEALTHZ_TIMEOUT), Ok(()));
        clock.advance(Duration::from_secs(1));
        let err = health.check(HEALTHZ_TIMEOUT).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed election to renew leadership on lease kube-scheduler"
        );
        // A standby is always healthy.
        let b = candidate(OTHER, &store, &clock);
        assert_eq!(b.health().check(HEALTHZ_TIMEOUT), Ok(()));
    }

    /// The leader metric as a component exposes it.
    #[derive(Default)]
    struct Gauge(Mutex<Option<(String, bool)>>);

    impl LeaderMetrics for Gauge {
        fn set_leader(&self, name: &str, leading: bool) {
            *self.0.lock().unwrap() = Some((name.to_owned(), leading));
        }

        fn inc_leader_slowpath(&self, _: &str) {}
    }

    impl Gauge {
        fn get(&self) -> Option<(String, bool)> {
            self.0.lock().unwrap().clone()
        }
    }

    /// The monotonic clock of tokio (paused in these tests).
    struct TokioClock;

    impl Clock for TokioClock {
        fn now(&self) -> Instant {
            tokio::time::Instant::now().into_std()
        }

        fn wall(&self) -> Timestamp {
            Timestamp::now()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn run_leads_until_renewal_fails_within_the_deadline() {
        let store = Arc::new(FakeStore::default());
        let config = LeaderElectionConfig::with_defaults("kube-scheduler", ME.to_owned());
        let metrics = Arc::new(Gauge::default());
        let elector =
            LeaderElector::with_store(config, Box::new(Arc::clone(&store)), Arc::new(TokioClock))
                .unwrap()
                .with_metrics(Arc::clone(&metrics) as Arc<dyn LeaderMetrics>);
        let health = elector.health();
        let started = Arc::new(AtomicBool::new(false));
        let stopped_at = Arc::new(Mutex::new(None));
        let failing_store = Arc::clone(&store);
        // After 30 s of leading, the API server starts failing.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            failing_store.failing.store(true, Ordering::SeqCst);
        });
        let t0 = tokio::time::Instant::now();
        let (s, st, m) = (
            Arc::clone(&started),
            Arc::clone(&stopped_at),
            Arc::clone(&metrics),
        );
        let outcome = elector
            .run(CancellationToken::new(), move |leading| async move {
                s.store(true, Ordering::SeqCst);
                assert_eq!(m.get(), Some(("kube-scheduler".to_owned(), true)));
                leading.cancelled().await;
                *st.lock().unwrap() = Some(tokio::time::Instant::now());
            })
            .await;
        assert_eq!(outcome, Outcome::LeadershipLost);
        assert!(started.load(Ordering::SeqCst));
        let lost_after = stopped_at.lock().unwrap().unwrap() - t0;
        // Renewals every 2 s; the first failing one (at 30 or 32 s) starts the 10 s
        // deadline.
        assert!(
            lost_after >= Duration::from_secs(40) && lost_after <= Duration::from_secs(42),
            "{lost_after:?}"
        );
        assert_eq!(metrics.get(), Some(("kube-scheduler".to_owned(), false)));
        // Release could not be written (the store fails): still recorded as ours.
        assert_eq!(store.record().holder_identity, ME);
        assert!(health.is_leader());
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_releases_the_lease() {
        let store = Arc::new(FakeStore::default());
        let config = LeaderElectionConfig::with_defaults("kube-scheduler", ME.to_owned());
        let elector =
            LeaderElector::with_store(config, Box::new(Arc::clone(&store)), Arc::new(TokioClock))
                .unwrap();
        let health = elector.health();
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let outcome = elector
            .run(cancel, move |leading| async move {
                tokio::time::sleep(Duration::from_secs(7)).await;
                c.cancel();
                leading.cancelled().await;
            })
            .await;
        assert_eq!(outcome, Outcome::Cancelled);
        let record = store.record();
        assert_eq!(record.holder_identity, "");
        assert_eq!(record.lease_duration_seconds, 1);
        assert_eq!(record.leader_transitions, 0);
        assert!(!health.is_leader());
        // Create, renewals at 0 (the renew loop starts at once, as wait.Until), 2, 4 and
        // 6 s, release.
        assert_eq!(store.writes.load(Ordering::SeqCst), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_waits_and_returns_when_cancelled() {
        let store = Arc::new(FakeStore::default());
        store.write(LeaderElectionRecord {
            holder_identity: OTHER.to_owned(),
            lease_duration_seconds: 15,
            ..Default::default()
        });
        let config = LeaderElectionConfig::with_defaults("kube-scheduler", ME.to_owned());
        let elector =
            LeaderElector::with_store(config, Box::new(Arc::clone(&store)), Arc::new(TokioClock))
                .unwrap();
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        // The other holder keeps renewing every 2 s; cancel after a minute.
        let renewer = Arc::clone(&store);
        tokio::spawn(async move {
            let start: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
            for i in 1..=30 {
                tokio::time::sleep(Duration::from_secs(2)).await;
                renewer.write(LeaderElectionRecord {
                    holder_identity: OTHER.to_owned(),
                    lease_duration_seconds: 15,
                    renew_time: Some(start + jiff_span(Duration::from_secs(2 * i))),
                    ..Default::default()
                });
            }
            c.cancel();
        });
        let outcome = elector
            .run(cancel, |_| async { panic!("must not lead") })
            .await;
        assert_eq!(outcome, Outcome::Cancelled);
        assert_eq!(store.record().holder_identity, OTHER);
    }
}
