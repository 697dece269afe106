//! Container lifecycle events (CRI GetContainerEvents), as containerd 1.7's CRI plugin
//! emits them for the kubelet's evented PLEG.
//!
//! Events are published by the gRPC layer after a verb succeeded (see
//! [`crate::server`]) and by the [`watcher`] when a container exits by itself. Each event
//! carries the pod sandbox's status and the statuses of all the pod's containers at the
//! time it is sent. Sandboxes produce events too, with the sandbox ID as `container_id`.
//!
//! Delivery goes through a bounded broadcast channel: every subscriber sees every event
//! published while it is subscribed; a subscriber that falls more than [`CAPACITY`]
//! events behind skips the ones it missed (with a warning) rather than slowing the
//! runtime down. A container exit that happened while the runtime was down is reported
//! once, to the first subscriber after the start ([`Events::take_backlog`]).

pub mod watcher;

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Mutex;

use futures::{Stream, StreamExt as _};
use k8s_cri::v1::{
    ContainerEventResponse, ContainerEventType, ContainerStatus, ContainerStatusRequest,
    PodSandboxStatus, PodSandboxStatusRequest,
};
use tokio::sync::broadcast;

use crate::container::State;
use crate::runtime::Runtime;

/// Events buffered per subscriber before it starts skipping.
pub const CAPACITY: usize = 1024;

/// A stream of events for one GetContainerEvents call.
pub type EventStream =
    Pin<Box<dyn Stream<Item = Result<ContainerEventResponse, tonic::Status>> + Send + 'static>>;

/// The event hub of a runtime.
#[derive(Debug)]
pub struct Events {
    /// Taken by [`Events::close`], which ends every subscription.
    sender: Mutex<Option<broadcast::Sender<ContainerEventResponse>>>,
    /// IDs of containers and sandboxes whose STOPPED event was published (each is
    /// published once, whoever notices the stop first); removed on DELETED.
    stopped: Mutex<HashSet<String>>,
    /// Containers found exited at start that had been running: `(container, sandbox)`.
    backlog: Mutex<Vec<(String, String)>>,
    /// Containers inside StartContainer: their exit is published by StartContainer, after
    /// STARTED.
    starting: Mutex<HashSet<String>>,
}

/// Marks a container as starting until dropped (see [`Events::starting`]).
pub struct Starting<'a> {
    events: &'a Events,
    id: String,
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        lock(&self.events.starting).remove(&self.id);
    }
}

impl Default for Events {
    fn default() -> Self {
        Self {
            sender: Mutex::new(Some(broadcast::channel(CAPACITY).0)),
            stopped: Mutex::new(HashSet::new()),
            backlog: Mutex::new(Vec::new()),
            starting: Mutex::new(HashSet::new()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Events {
    /// Records that `id` is stopped without publishing anything (objects found stopped
    /// when the runtime starts).
    pub fn mark_stopped(&self, id: &str) {
        lock(&self.stopped).insert(id.to_string());
    }

    /// Queues the STOPPED event of a container that exited while the runtime was down.
    pub fn push_backlog(&self, container_id: &str, sandbox_id: &str) {
        self.mark_stopped(container_id);
        lock(&self.backlog).push((container_id.to_string(), sandbox_id.to_string()));
    }

    /// Marks container `id` as starting until the guard is dropped: meanwhile the exit
    /// watcher leaves its exit to the caller.
    pub fn starting(&self, id: &str) -> Starting<'_> {
        lock(&self.starting).insert(id.to_string());
        Starting {
            events: self,
            id: id.to_string(),
        }
    }

    /// Whether container `id` is inside StartContainer.
    pub fn is_starting(&self, id: &str) -> bool {
        lock(&self.starting).contains(id)
    }

    /// Takes the start-up backlog (empty after the first call).
    fn take_backlog(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *lock(&self.backlog))
    }

    /// Whether a STOPPED event for `id` is still due (and marks it as sent).
    fn first_stop(&self, id: &str) -> bool {
        lock(&self.stopped).insert(id.to_string())
    }

    fn forget(&self, id: &str) {
        lock(&self.stopped).remove(id);
    }

    fn publish(&self, event: ContainerEventResponse) {
        // Without subscribers the event is dropped, as containerd drops it.
        if let Some(sender) = &*lock(&self.sender) {
            let _ = sender.send(event);
        }
    }

    /// Ends every subscription (their streams finish) and refuses new ones: the gRPC
    /// server calls this on shutdown, whose graceful end waits for open streams.
    pub fn close(&self) {
        lock(&self.sender).take();
    }
}

impl Runtime {
    /// Publishes a CREATED, STARTED or DELETED event for `id` (a container of
    /// `sandbox_id`, or the sandbox itself when both are equal). DELETED also re-arms the
    /// STOPPED event of a reused ID.
    pub(crate) async fn emit(&self, id: &str, sandbox_id: &str, kind: ContainerEventType) {
        if kind == ContainerEventType::ContainerDeletedEvent {
            self.events.forget(id);
        }
        if let Some(event) = self.event(id, sandbox_id, kind).await {
            self.events.publish(event);
        }
    }

    /// Publishes the STOPPED event of `id` unless it was already published.
    pub(crate) async fn emit_stopped(&self, id: &str, sandbox_id: &str) {
        if self.events.first_stop(id)
            && let Some(event) = self
                .event(id, sandbox_id, ContainerEventType::ContainerStoppedEvent)
                .await
        {
            self.events.publish(event);
        }
    }

    /// Publishes DELETED for the removed `containers` of a removed sandbox, then for the
    /// sandbox, all with the sandbox's `last_status` (the kubelet needs one in every
    /// event) and no container statuses left.
    pub(crate) async fn emit_removal(
        &self,
        containers: &[String],
        sandbox_id: &str,
        last_status: PodSandboxStatus,
    ) {
        for id in containers.iter().map(String::as_str).chain([sandbox_id]) {
            self.events.forget(id);
            self.events.publish(ContainerEventResponse {
                container_id: id.to_string(),
                container_event_type: ContainerEventType::ContainerDeletedEvent as i32,
                created_at: crate::id::now_nanos(),
                pod_sandbox_status: Some(last_status.clone()),
                containers_statuses: Vec::new(),
            });
        }
    }

    /// Publishes STOPPED for every container of `sandbox_id` that is no longer running
    /// and has not had it yet (after StopPodSandbox killed them, after StartContainer
    /// failed).
    pub(crate) async fn emit_exits(&self, sandbox_id: &str) {
        for (id, state) in self.container_states(sandbox_id).await {
            if state == State::Exited {
                self.emit_stopped(&id, sandbox_id).await;
            }
        }
    }

    /// The pod's current state as an event about `id`; `None` when the sandbox is gone
    /// (the kubelet reads the pod UID from every event's sandbox status; containerd skips
    /// such events too).
    async fn event(
        &self,
        id: &str,
        sandbox_id: &str,
        kind: ContainerEventType,
    ) -> Option<ContainerEventResponse> {
        let Some(pod_sandbox_status) = self.sandbox_status_of(sandbox_id).await else {
            tracing::debug!(id, sandbox_id, "no event: the pod sandbox is gone");
            return None;
        };
        Some(ContainerEventResponse {
            container_id: id.to_string(),
            container_event_type: kind as i32,
            created_at: crate::id::now_nanos(),
            pod_sandbox_status: Some(pod_sandbox_status),
            containers_statuses: self.container_statuses_of(sandbox_id).await,
        })
    }

    /// The status of a sandbox; `None` when it is gone.
    pub(crate) async fn sandbox_status_of(&self, sandbox_id: &str) -> Option<PodSandboxStatus> {
        let req = PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            verbose: false,
        };
        Runtime::pod_sandbox_status(self, req)
            .await
            .ok()
            .and_then(|response| response.status)
    }

    /// The statuses of a sandbox's containers, oldest first.
    async fn container_statuses_of(&self, sandbox_id: &str) -> Vec<ContainerStatus> {
        let mut statuses = Vec::new();
        for (id, _) in self.container_states(sandbox_id).await {
            let req = ContainerStatusRequest {
                container_id: id,
                verbose: false,
            };
            if let Ok(Some(status)) = Runtime::container_status(self, req)
                .await
                .map(|response| response.status)
            {
                statuses.push(status);
            }
        }
        statuses.sort_by_key(|s| s.created_at);
        statuses
    }

    /// IDs and current states of the containers of `sandbox_id`.
    async fn container_states(&self, sandbox_id: &str) -> Vec<(String, State)> {
        let mut out = Vec::new();
        for entry in self.containers.all() {
            let mut container = entry.lock().await;
            if container.sandbox_id != sandbox_id {
                continue;
            }
            if let Err(err) = self.refresh(&mut container) {
                tracing::warn!(id = %container.id, "refreshing container: {err:#}");
            }
            out.push((container.id.clone(), container.state));
        }
        out
    }

    /// A new subscription: the start-up backlog (first subscriber only), then every event
    /// published from now on.
    /// `Unavailable` once the runtime shuts down.
    pub(crate) async fn subscribe(&self) -> Result<EventStream, tonic::Status> {
        let receiver = lock(&self.events.sender)
            .as_ref()
            .map(broadcast::Sender::subscribe)
            .ok_or_else(|| tonic::Status::unavailable("the runtime is shutting down"))?;
        let mut backlog = Vec::new();
        for (id, sandbox_id) in self.events.take_backlog() {
            backlog.extend(
                self.event(&id, &sandbox_id, ContainerEventType::ContainerStoppedEvent)
                    .await,
            );
        }
        Ok(Box::pin(
            futures::stream::iter(backlog.into_iter().map(Ok)).chain(live(receiver)),
        ))
    }
}

/// The events `receiver` gets, as a stream that ends when the channel closes. When the
/// subscriber fell so far behind that events were overwritten, those are skipped (with a
/// warning) and the stream goes on with the oldest one still held.
fn live(
    receiver: broadcast::Receiver<ContainerEventResponse>,
) -> impl Stream<Item = Result<ContainerEventResponse, tonic::Status>> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(event) => return Some((Ok(event), receiver)),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "a GetContainerEvents subscriber is too slow; skipping events"
                    );
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str) -> ContainerEventResponse {
        ContainerEventResponse {
            container_id: id.into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_lagging_subscriber_skips_and_goes_on() {
        let (sender, receiver) = broadcast::channel(2);
        let mut stream = Box::pin(live(receiver));
        for id in ["a", "b", "c", "d"] {
            sender.send(event(id)).unwrap();
        }
        drop(sender);
        let ids: Vec<String> = stream
            .by_ref()
            .map(|e| e.unwrap().container_id)
            .collect()
            .await;
        assert_eq!(ids, ["c", "d"], "a and b were overwritten");
    }

    #[tokio::test]
    async fn publishing_never_waits_and_close_ends_subscriptions() {
        let events = Events::default();
        let receiver = lock(&events.sender).as_ref().unwrap().subscribe();
        let mut stream = Box::pin(live(receiver));
        for n in 0..CAPACITY * 2 {
            events.publish(event(&n.to_string()));
        }
        events.close();
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!(
            first.container_id,
            CAPACITY.to_string(),
            "the oldest one kept"
        );
        assert_eq!(stream.count().await, CAPACITY - 1);
    }
}
