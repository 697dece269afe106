//! Generic PLEG (upstream `pkg/kubelet/pleg/generic.go`): relists sandboxes and
//! containers and turns state changes into pod lifecycle events; CRI container events
//! update the same state ([`GenericPleg::apply_event`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use k8s_cri::v1::{ContainerEventResponse, ContainerEventType, ContainerState, PodSandboxState};

use super::{PodLifecycleEvent, PodLifecycleEventType};
use crate::cri::Cri;
use crate::kuberuntime::labels::{POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL};

/// PLEG's view of a container or sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlegState {
    Running,
    Exited,
    Unknown,
    NonExistent,
}

/// A pod that has objects on the runtime, as named by its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimePod {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
}

/// Pods present on the runtime at the last relist, by UID; shared with housekeeping.
pub type RuntimePods = Arc<RwLock<HashMap<String, RuntimePod>>>;

/// The generic PLEG: the state of every container and sandbox at the last look.
pub struct GenericPleg {
    cri: Arc<dyn Cri>,
    /// State of each container / sandbox ID per pod UID at the last relist.
    previous: HashMap<String, HashMap<String, PlegState>>,
    runtime_pods: RuntimePods,
}

impl GenericPleg {
    /// A PLEG over `cri`; nothing is listed until [`GenericPleg::relist`].
    pub fn new(cri: Arc<dyn Cri>) -> Self {
        Self {
            cri,
            previous: HashMap::new(),
            runtime_pods: RuntimePods::default(),
        }
    }

    /// The pods seen on the runtime by the last relist.
    pub fn runtime_pods(&self) -> RuntimePods {
        self.runtime_pods.clone()
    }

    /// Lists sandboxes and containers, compares with the previous relist and returns the events.
    pub async fn relist(&mut self) -> Result<Vec<PodLifecycleEvent>, tonic::Status> {
        let (sandboxes, containers) = crate::cri::list_all(&*self.cri).await?;
        let mut current: HashMap<String, HashMap<String, PlegState>> = HashMap::new();
        let mut pods = HashMap::new();
        for s in sandboxes {
            let Some(uid) = s.labels.get(POD_UID_LABEL).cloned() else {
                continue;
            };
            let state = if s.state == PodSandboxState::SandboxReady as i32 {
                PlegState::Running
            } else {
                PlegState::Exited
            };
            pods.entry(uid.clone())
                .or_insert_with(|| runtime_pod(&s.labels));
            current.entry(uid).or_default().insert(s.id, state);
        }
        for c in containers {
            let Some(uid) = c.labels.get(POD_UID_LABEL).cloned() else {
                continue;
            };
            let state = match ContainerState::try_from(c.state) {
                Ok(ContainerState::ContainerRunning) => PlegState::Running,
                Ok(ContainerState::ContainerExited) => PlegState::Exited,
                _ => PlegState::Unknown,
            };
            pods.entry(uid.clone())
                .or_insert_with(|| runtime_pod(&c.labels));
            current.entry(uid).or_default().insert(c.id, state);
        }
        let events = diff(&self.previous, &current);
        self.previous = current;
        *self
            .runtime_pods
            .write()
            .unwrap_or_else(PoisonError::into_inner) = pods;
        Ok(events)
    }

    /// Records what a CRI container event says about one container or sandbox, so that
    /// the next relist does not report it again; returns the events upstream's evented
    /// PLEG emits for it (`processCRIEvents`): STARTED gives ContainerStarted, STOPPED
    /// ContainerDied, DELETED ContainerDied and ContainerRemoved, CREATED none. Events
    /// without a pod sandbox status name no pod and are ignored.
    pub fn apply_event(&mut self, event: &ContainerEventResponse) -> Vec<PodLifecycleEvent> {
        use PodLifecycleEventType::*;
        let Some(sandbox) = &event.pod_sandbox_status else {
            return Vec::new();
        };
        let Some(uid) = sandbox
            .metadata
            .as_ref()
            .map(|m| m.uid.clone())
            .filter(|uid| !uid.is_empty())
            .or_else(|| sandbox.labels.get(POD_UID_LABEL).cloned())
        else {
            return Vec::new();
        };
        let (state, kinds) = match ContainerEventType::try_from(event.container_event_type) {
            Ok(ContainerEventType::ContainerCreatedEvent) => (PlegState::Unknown, vec![]),
            Ok(ContainerEventType::ContainerStartedEvent) => {
                (PlegState::Running, vec![ContainerStarted])
            }
            Ok(ContainerEventType::ContainerStoppedEvent) => {
                (PlegState::Exited, vec![ContainerDied])
            }
            Ok(ContainerEventType::ContainerDeletedEvent) => (
                PlegState::NonExistent,
                vec![ContainerDied, ContainerRemoved],
            ),
            Err(_) => return Vec::new(),
        };
        let mut pods = self
            .runtime_pods
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let objects = self.previous.entry(uid.clone()).or_default();
        if state == PlegState::NonExistent {
            objects.remove(&event.container_id);
        } else {
            objects.insert(event.container_id.clone(), state);
        }
        if objects.is_empty() {
            self.previous.remove(&uid);
            pods.remove(&uid);
        } else {
            pods.entry(uid.clone()).or_insert_with(|| RuntimePod {
                name: sandbox
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default(),
                namespace: sandbox
                    .metadata
                    .as_ref()
                    .map(|m| m.namespace.clone())
                    .unwrap_or_default(),
            });
        }
        kinds
            .into_iter()
            .map(|kind| PodLifecycleEvent {
                id: uid.clone(),
                kind,
                data: event.container_id.clone(),
            })
            .collect()
    }
}

fn runtime_pod(labels: &HashMap<String, String>) -> RuntimePod {
    RuntimePod {
        name: labels.get(POD_NAME_LABEL).cloned().unwrap_or_default(),
        namespace: labels.get(POD_NAMESPACE_LABEL).cloned().unwrap_or_default(),
    }
}

/// Events for every container / sandbox whose state differs between two relists.
fn diff(
    old: &HashMap<String, HashMap<String, PlegState>>,
    new: &HashMap<String, HashMap<String, PlegState>>,
) -> Vec<PodLifecycleEvent> {
    let empty = HashMap::new();
    let uids: HashSet<&String> = old.keys().chain(new.keys()).collect();
    let mut events = Vec::new();
    for uid in uids {
        let before = old.get(uid).unwrap_or(&empty);
        let after = new.get(uid).unwrap_or(&empty);
        let ids: HashSet<&String> = before.keys().chain(after.keys()).collect();
        for id in ids {
            let from = before.get(id).copied().unwrap_or(PlegState::NonExistent);
            let to = after.get(id).copied().unwrap_or(PlegState::NonExistent);
            for kind in generate_events(from, to) {
                events.push(PodLifecycleEvent {
                    id: uid.clone(),
                    kind,
                    data: id.clone(),
                });
            }
        }
    }
    events
}

/// Upstream `generateEvents`.
fn generate_events(from: PlegState, to: PlegState) -> Vec<PodLifecycleEventType> {
    use PodLifecycleEventType::*;
    if from == to {
        return Vec::new();
    }
    match to {
        PlegState::Running => vec![ContainerStarted],
        PlegState::Exited => vec![ContainerDied],
        PlegState::Unknown => vec![ContainerChanged],
        PlegState::NonExistent if from == PlegState::Exited => vec![ContainerRemoved],
        PlegState::NonExistent => vec![ContainerDied, ContainerRemoved],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;
    use PodLifecycleEventType::*;

    #[tokio::test]
    async fn relist_emits_start_die_remove() {
        let cri = Arc::new(FakeCri::default());
        let mut pleg = GenericPleg::new(cri.clone());
        assert!(pleg.relist().await.unwrap().is_empty());
        let sandbox = cri.add_sandbox("u1", "web", true);
        let container = cri.add_container(&sandbox, "u1", "c", ContainerState::ContainerRunning);
        let mut events = pleg.relist().await.unwrap();
        events.sort_by(|a, b| a.data.cmp(&b.data));
        assert_eq!(events.len(), 2);
        assert!(
            events
                .iter()
                .all(|e| e.kind == ContainerStarted && e.id == "u1")
        );
        assert_eq!(pleg.runtime_pods().read().unwrap()["u1"].name, "web");

        cri.set_container_state(&container, ContainerState::ContainerExited, 1);
        let events = pleg.relist().await.unwrap();
        assert_eq!(
            events,
            vec![PodLifecycleEvent {
                id: "u1".into(),
                kind: ContainerDied,
                data: container.clone()
            }]
        );

        cri.remove(&container);
        let events = pleg.relist().await.unwrap();
        assert_eq!(
            events,
            vec![PodLifecycleEvent {
                id: "u1".into(),
                kind: ContainerRemoved,
                data: container
            }]
        );
    }

    #[test]
    fn events_follow_upstream_table() {
        assert_eq!(
            generate_events(PlegState::Running, PlegState::NonExistent),
            vec![ContainerDied, ContainerRemoved]
        );
        assert_eq!(
            generate_events(PlegState::NonExistent, PlegState::Unknown),
            vec![ContainerChanged]
        );
        assert!(generate_events(PlegState::Exited, PlegState::Exited).is_empty());
    }
}
