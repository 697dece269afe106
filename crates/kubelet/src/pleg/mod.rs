//! The pod lifecycle event generator (upstream `pkg/kubelet/pleg`): tells the SyncLoop
//! when a pod's containers or sandboxes change on the runtime.
//!
//! Like upstream's Evented PLEG (`evented.go`), it follows the CRI GetContainerEvents
//! stream when the runtime offers one: events are applied to the PLEG's state and sent
//! at once, and the relist ([`generic`]) runs only every [`EVENTED_RELIST_PERIOD`] as a
//! safety net. When the runtime answers Unimplemented (containerd 1.6) or the stream
//! breaks, it relists every [`RELIST_PERIOD`] and tries the stream again every
//! [`STREAM_RETRY_PERIOD`]. Health ([`PlegHealth`]) and relist timings
//! ([`RelistStats`]) are shared with `/healthz`, `/metrics` and the node status.

pub mod generic;
pub mod health;
pub mod stats;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_cri::v1::GetEventsRequest;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

pub use generic::{GenericPleg, RuntimePod, RuntimePods};
pub use health::{PlegHealth, PlegMode};
pub use stats::{RelistSnapshot, RelistStats};

use crate::cri::{ContainerEventStream, Cri};

/// Relist period without runtime events (upstream `genericPlegRelistPeriod`, 1 s).
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// Relist period while runtime events drive the PLEG (upstream
/// `eventedPlegRelistPeriod`, 300 s).
pub const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(300);
/// How long the PLEG relists before it asks the runtime for an event stream again.
pub const STREAM_RETRY_PERIOD: Duration = Duration::from_secs(60);

/// Kind of a pod lifecycle event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodLifecycleEventType {
    /// A container or sandbox is now running.
    ContainerStarted,
    /// A container or sandbox stopped.
    ContainerDied,
    /// A container or sandbox disappeared.
    ContainerRemoved,
    /// A container or sandbox went to an unknown / created state.
    ContainerChanged,
}

/// One change of one container or sandbox of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLifecycleEvent {
    /// Pod UID.
    pub id: String,
    /// What happened.
    pub kind: PodLifecycleEventType,
    /// The container or sandbox ID.
    pub data: String,
}

/// The PLEG: the event stream when there is one, the relist otherwise.
pub struct Pleg {
    cri: Arc<dyn Cri>,
    generic: GenericPleg,
    health: PlegHealth,
    stats: RelistStats,
    /// The mode last logged, to log each change once.
    logged_mode: Option<PlegMode>,
}

impl Pleg {
    /// A PLEG over `cri`; nothing is listed until [`Pleg::relist`] or [`Pleg::run`].
    pub fn new(cri: Arc<dyn Cri>) -> Self {
        Self {
            generic: GenericPleg::new(cri.clone()),
            cri,
            health: PlegHealth::default(),
            stats: RelistStats::default(),
            logged_mode: None,
        }
    }

    /// The health handle (for `/healthz` and the node status).
    pub fn health(&self) -> PlegHealth {
        self.health.clone()
    }

    /// The relist timings (for `/metrics`).
    pub fn relist_stats(&self) -> RelistStats {
        self.stats.clone()
    }

    /// The pods seen on the runtime, kept current by relists and events.
    pub fn runtime_pods(&self) -> RuntimePods {
        self.generic.runtime_pods()
    }

    /// Relists the runtime (see [`GenericPleg::relist`]), recording its duration and the
    /// PLEG's activity when it succeeds.
    pub async fn relist(&mut self) -> Result<Vec<PodLifecycleEvent>, tonic::Status> {
        let start = Instant::now();
        let events = self.generic.relist().await?;
        self.stats.record(start.into_std());
        self.health.mark_active();
        Ok(events)
    }

    /// Generates events into `events` until its receiver is gone.
    pub async fn run(mut self, events: mpsc::Sender<PodLifecycleEvent>) {
        loop {
            match self.cri.get_container_events(GetEventsRequest {}).await {
                Ok(stream) => {
                    self.enter(PlegMode::Evented, None);
                    if !self.follow_events(stream, &events).await {
                        return;
                    }
                }
                Err(status) => self.enter(PlegMode::Relist, Some(status)),
            }
            if !self.relist_for(STREAM_RETRY_PERIOD, &events).await {
                return;
            }
        }
    }

    /// Switches to `mode`, logging the change; `refusal` is why the runtime gave no stream.
    fn enter(&mut self, mode: PlegMode, refusal: Option<tonic::Status>) {
        self.health.set_mode(mode);
        if self.logged_mode == Some(mode) {
            return;
        }
        self.logged_mode = Some(mode);
        match (mode, refusal) {
            (PlegMode::Evented, _) => info!(
                mode = "evented",
                relist_period = ?EVENTED_RELIST_PERIOD,
                "PLEG is event-driven (CRI GetContainerEvents), relisting rarely as a fallback"
            ),
            (PlegMode::Relist, Some(status)) if status.code() == tonic::Code::Unimplemented => {
                info!(
                    mode = "relist",
                    relist_period = ?RELIST_PERIOD,
                    "PLEG relists: the runtime does not implement CRI GetContainerEvents"
                );
            }
            (PlegMode::Relist, status) => warn!(
                mode = "relist",
                relist_period = ?RELIST_PERIOD,
                retry = ?STREAM_RETRY_PERIOD,
                error = status.as_ref().map_or("stream ended", |s| s.message()),
                "PLEG relists: no CRI container event stream; it will be retried"
            ),
        }
    }

    /// Applies the events of `stream` as they come, relisting every
    /// [`EVENTED_RELIST_PERIOD`]; returns false when the receiver is gone and true when
    /// the stream broke (the PLEG is then in relist mode).
    async fn follow_events(
        &mut self,
        mut stream: ContainerEventStream,
        events: &mpsc::Sender<PodLifecycleEvent>,
    ) -> bool {
        // Changes between the last relist and the subscription have no event.
        if !self.relist_and_send(events).await {
            return false;
        }
        let mut relist = tokio::time::interval_at(
            Instant::now() + EVENTED_RELIST_PERIOD,
            EVENTED_RELIST_PERIOD,
        );
        relist.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                item = stream.next() => match item {
                    Some(Ok(event)) => {
                        self.health.mark_active();
                        if !send(events, self.generic.apply_event(&event)) {
                            return false;
                        }
                    }
                    Some(Err(status)) => {
                        self.enter(PlegMode::Relist, Some(status));
                        return true;
                    }
                    None => {
                        self.enter(PlegMode::Relist, None);
                        return true;
                    }
                },
                _ = relist.tick() => {
                    if !self.relist_and_send(events).await {
                        return false;
                    }
                }
                () = events.closed() => return false,
            }
        }
    }

    /// Relists every [`RELIST_PERIOD`] for `period`; false when the receiver is gone.
    async fn relist_for(
        &mut self,
        period: Duration,
        events: &mpsc::Sender<PodLifecycleEvent>,
    ) -> bool {
        let deadline = Instant::now() + period;
        let mut ticker = tokio::time::interval(RELIST_PERIOD);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while Instant::now() < deadline {
            ticker.tick().await;
            if !self.relist_and_send(events).await {
                return false;
            }
        }
        true
    }

    /// One relist whose events go to `events`; false when the receiver is gone.
    async fn relist_and_send(&mut self, events: &mpsc::Sender<PodLifecycleEvent>) -> bool {
        match self.relist().await {
            Ok(batch) => send(events, batch),
            Err(e) => {
                warn!(error = %e.message(), "PLEG relist failed");
                !events.is_closed()
            }
        }
    }
}

/// Sends `batch` without waiting; false when the receiver is gone.
fn send(events: &mpsc::Sender<PodLifecycleEvent>, batch: Vec<PodLifecycleEvent>) -> bool {
    for event in batch {
        match events.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                warn!(
                    "PLEG event channel is full; dropping an event (the periodic sync catches up)"
                );
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
        }
    }
    !events.is_closed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;
    use async_trait::async_trait;
    use futures::channel::mpsc as stream_mpsc;
    use k8s_cri::v1::*;
    use std::sync::Mutex;
    use tonic::Status;

    /// A FakeCri whose container events come from a channel (one subscription).
    struct EventedCri {
        inner: Arc<FakeCri>,
        stream:
            Mutex<Option<stream_mpsc::UnboundedReceiver<Result<ContainerEventResponse, Status>>>>,
    }

    #[async_trait]
    impl Cri for EventedCri {
        async fn list_pod_sandbox(
            &self,
            req: ListPodSandboxRequest,
        ) -> Result<ListPodSandboxResponse, Status> {
            self.inner.list_pod_sandbox(req).await
        }
        async fn list_containers(
            &self,
            req: ListContainersRequest,
        ) -> Result<ListContainersResponse, Status> {
            self.inner.list_containers(req).await
        }
        async fn get_container_events(
            &self,
            _: GetEventsRequest,
        ) -> Result<ContainerEventStream, Status> {
            match self.stream.lock().unwrap().take() {
                Some(rx) => Ok(rx.boxed()),
                None => Err(Status::unavailable("already subscribed")),
            }
        }
    }

    fn event(kind: ContainerEventType, id: &str, uid: &str) -> ContainerEventResponse {
        ContainerEventResponse {
            container_id: id.into(),
            container_event_type: kind as i32,
            pod_sandbox_status: Some(PodSandboxStatus {
                metadata: Some(PodSandboxMetadata {
                    uid: uid.into(),
                    name: "web".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn next(rx: &mut mpsc::Receiver<PodLifecycleEvent>) -> PodLifecycleEvent {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a PLEG event in time")
            .expect("PLEG running")
    }

    #[tokio::test]
    async fn events_drive_the_pleg_and_a_broken_stream_falls_back_to_relist() {
        let fake = Arc::new(FakeCri::default());
        let sandbox = fake.add_sandbox("u1", "web", true);
        let container = fake.add_container(&sandbox, "u1", "c", ContainerState::ContainerRunning);
        let (tx, rx) = stream_mpsc::unbounded();
        let cri = Arc::new(EventedCri {
            inner: fake.clone(),
            stream: Mutex::new(Some(rx)),
        });
        let pleg = Pleg::new(cri);
        let (health, stats, pods) = (pleg.health(), pleg.relist_stats(), pleg.runtime_pods());
        let (events_tx, mut events) = mpsc::channel(16);
        let task = tokio::spawn(pleg.run(events_tx));

        // The relist at subscription reports what runs.
        let mut started = [next(&mut events).await, next(&mut events).await];
        started.sort_by(|a, b| a.data.cmp(&b.data));
        assert!(
            started
                .iter()
                .all(|e| e.kind == PodLifecycleEventType::ContainerStarted)
        );
        assert_eq!(health.mode(), PlegMode::Evented);
        assert!(health.healthy().is_ok());
        assert_eq!(stats.snapshot().duration.count, 1);

        // An event is sent at once, long before the 300 s relist.
        fake.set_container_state(&container, ContainerState::ContainerExited, 1);
        tx.unbounded_send(Ok(event(
            ContainerEventType::ContainerStoppedEvent,
            &container,
            "u1",
        )))
        .unwrap();
        assert_eq!(
            next(&mut events).await,
            PodLifecycleEvent {
                id: "u1".into(),
                kind: PodLifecycleEventType::ContainerDied,
                data: container.clone()
            }
        );
        let created = fake.add_container(&sandbox, "u1", "d", ContainerState::ContainerCreated);
        tx.unbounded_send(Ok(event(
            ContainerEventType::ContainerCreatedEvent,
            &created,
            "u1",
        )))
        .unwrap();
        fake.remove(&container);
        tx.unbounded_send(Ok(event(
            ContainerEventType::ContainerDeletedEvent,
            &container,
            "u1",
        )))
        .unwrap();
        let kinds = [next(&mut events).await.kind, next(&mut events).await.kind];
        assert_eq!(
            kinds,
            [
                PodLifecycleEventType::ContainerDied,
                PodLifecycleEventType::ContainerRemoved
            ]
        );
        assert_eq!(pods.read().unwrap()["u1"].name, "web");

        // The stream breaks: relisting takes over and reports only what events did not.
        tx.unbounded_send(Err(Status::unavailable("runtime restarting")))
            .unwrap();
        fake.set_container_state(&created, ContainerState::ContainerRunning, 0);
        let started = next(&mut events).await;
        assert_eq!(
            (started.kind, started.data),
            (PodLifecycleEventType::ContainerStarted, created)
        );
        assert_eq!(health.mode(), PlegMode::Relist);
        assert!(events.try_recv().is_err());
        drop(events);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn relists_every_second_when_the_runtime_has_no_events() {
        let fake = Arc::new(FakeCri::default());
        let pleg = Pleg::new(fake.clone());
        let (health, stats) = (pleg.health(), pleg.relist_stats());
        let (events_tx, mut events) = mpsc::channel(16);
        let task = tokio::spawn(pleg.run(events_tx));
        let sandbox = fake.add_sandbox("u2", "db", true);
        assert_eq!(next(&mut events).await.data, sandbox);
        assert_eq!(health.mode(), PlegMode::Relist);
        assert!(health.healthy().is_ok());
        let snapshot = stats.snapshot();
        assert!(snapshot.duration.count >= 1);
        if let Some(interval) = snapshot.last_interval {
            assert!(interval >= Duration::from_millis(900), "{interval:?}");
        }
        drop(events);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
}
