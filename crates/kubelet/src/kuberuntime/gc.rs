//! Garbage collection of dead containers and sandboxes (upstream
//! `pkg/kubelet/kuberuntime/kuberuntime_gc.go`): keep at most `maxPerPodContainer` dead
//! containers per (pod, container name) and `maxContainers` on the node, only touch those
//! older than the minimum age, remove everything of deleted pods, and remove the sandboxes
//! no container uses any more (all but the newest of a live pod).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_cri::v1::{
    ContainerState, ContainerStatusRequest, ListContainersRequest, ListPodSandboxRequest,
    PodSandboxState, RemoveContainerRequest, RemovePodSandboxRequest,
};
use tracing::{info, warn};

use super::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::config::SourcesReady;
use crate::cri::Cri;
use crate::error::{Error, Result};

/// Container GC period (upstream `ContainerGCPeriod`, 1 min).
pub const CONTAINER_GC_PERIOD: Duration = Duration::from_secs(60);

/// Limits of the container GC (upstream `GCPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// Dead containers younger than this are kept (`MinAge`).
    pub min_age: Duration,
    /// Dead containers kept per (pod, container name); negative: no limit.
    pub max_per_pod_container: i32,
    /// Dead containers kept on the node; negative: no limit.
    pub max_containers: i32,
}

/// A dead container the GC may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadContainer {
    /// Runtime ID.
    pub id: String,
    /// Pod UID and container name: the eviction unit.
    pub pod_uid: String,
    /// See `pod_uid`.
    pub name: String,
    /// Creation time, Unix nanoseconds.
    pub created_at: i64,
}

/// A sandbox as the GC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcSandbox {
    /// Runtime ID.
    pub id: String,
    /// Pod UID.
    pub pod_uid: String,
    /// Creation time, Unix nanoseconds.
    pub created_at: i64,
    /// Ready, or still used by a container.
    pub active: bool,
}

/// Which pods' leftovers may go.
pub trait PodStateProvider: Send + Sync {
    /// The pod was deleted: all its containers, sandboxes and logs may go.
    fn should_pod_content_be_removed(&self, uid: &str) -> bool;
    /// The pod is terminated (e.g. evicted) though still known.
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool;
}

/// The IDs of `dead` containers to remove under `policy` (upstream `evictContainers`):
/// every container of a removable pod, then the oldest beyond `max_per_pod_container` per
/// unit, then the oldest beyond `max_containers` on the node (each unit first cut to
/// `max_containers / units`, at least 1). `removable(uid)` tells the removable pods.
pub fn select_containers(
    dead: &[DeadContainer],
    policy: GcPolicy,
    removable: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut units: HashMap<(&str, &str), Vec<&DeadContainer>> = HashMap::new();
    for c in dead {
        units.entry((&c.pod_uid, &c.name)).or_default().push(c);
    }
    let mut remove = Vec::new();
    units.retain(|(uid, _), containers| {
        if removable(uid) {
            remove.extend(containers.iter().map(|c| c.id.clone()));
            false
        } else {
            true
        }
    });
    for containers in units.values_mut() {
        containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    }
    let mut cut = |units: &mut HashMap<_, Vec<&DeadContainer>>, keep: usize| {
        for containers in units.values_mut() {
            if containers.len() > keep {
                remove.extend(containers.drain(keep..).map(|c| c.id.clone()));
            }
        }
    };
    if let Ok(keep) = usize::try_from(policy.max_per_pod_container) {
        cut(&mut units, keep);
    }
    if let Ok(max) = usize::try_from(policy.max_containers) {
        let total: usize = units.values().map(Vec::len).sum();
        if total > max && !units.is_empty() {
            let keep = (max / units.len()).max(1);
            cut(&mut units, keep);
            let mut rest: Vec<&DeadContainer> = units.values().flatten().copied().collect();
            if rest.len() > max {
                rest.sort_by_key(|c| std::cmp::Reverse(c.created_at));
                remove.extend(rest.drain(max..).map(|c| c.id.clone()));
            }
        }
    }
    remove
}

/// The IDs of sandboxes to remove (upstream `evictSandboxes`): the inactive sandboxes of a
/// removable pod, and of other pods all inactive ones but the newest sandbox.
pub fn select_sandboxes(sandboxes: &[GcSandbox], removable: impl Fn(&str) -> bool) -> Vec<String> {
    let mut by_pod: HashMap<&str, Vec<&GcSandbox>> = HashMap::new();
    for s in sandboxes {
        by_pod.entry(&s.pod_uid).or_default().push(s);
    }
    let mut remove = Vec::new();
    for (uid, mut list) in by_pod {
        list.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        let keep_newest = !removable(uid);
        for (i, s) in list.iter().enumerate() {
            let keep = s.active || (keep_newest && i == 0);
            if !keep {
                remove.push(s.id.clone());
            }
        }
    }
    remove
}

/// The container garbage collector over a runtime.
pub struct ContainerGc {
    cri: Arc<dyn Cri>,
    policy: GcPolicy,
    pod_logs_dir: PathBuf,
    pods: Arc<dyn PodStateProvider>,
    sources_ready: SourcesReady,
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl ContainerGc {
    /// A collector with `policy`, asking `pods` which pods are gone once all pod sources
    /// are ready.
    pub fn new(
        cri: Arc<dyn Cri>,
        policy: GcPolicy,
        pod_logs_dir: PathBuf,
        pods: Arc<dyn PodStateProvider>,
        sources_ready: SourcesReady,
    ) -> Self {
        Self {
            cri,
            policy,
            pod_logs_dir,
            pods,
            sources_ready,
        }
    }

    /// One collection (upstream `GarbageCollect`). Pods are judged removable only when all
    /// sources are ready; `evict_terminated` also removes everything of terminated pods
    /// (the eviction manager's `DeleteAllUnusedContainers`). Returns the failures.
    pub async fn garbage_collect(&self, evict_terminated: bool) -> Vec<String> {
        let all_sources_ready = self.sources_ready.all_ready();
        let removable = |uid: &str| {
            all_sources_ready
                && (self.pods.should_pod_content_be_removed(uid)
                    || (evict_terminated && self.pods.should_pod_runtime_be_removed(uid)))
        };
        let mut errors = Vec::new();
        let containers = match self
            .cri
            .list_containers(ListContainersRequest { filter: None })
            .await
        {
            Ok(r) => r.containers,
            Err(e) => return vec![format!("listing containers: {}", e.message())],
        };
        let newest =
            now_nanos() - i64::try_from(self.policy.min_age.as_nanos()).unwrap_or(i64::MAX);
        let dead: Vec<DeadContainer> = containers
            .iter()
            .filter(|c| c.state != ContainerState::ContainerRunning as i32)
            // A created container is about to be started by its pod worker.
            .filter(|c| c.state != ContainerState::ContainerCreated as i32)
            .filter(|c| c.created_at <= newest)
            .map(|c| DeadContainer {
                id: c.id.clone(),
                pod_uid: c.labels.get(POD_UID_LABEL).cloned().unwrap_or_default(),
                name: c
                    .labels
                    .get(CONTAINER_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default(),
                created_at: c.created_at,
            })
            .collect();
        let removed: HashSet<String> = select_containers(&dead, self.policy, removable)
            .into_iter()
            .collect();
        for id in &removed {
            if let Err(e) = self.remove_container(id).await {
                errors.push(e.to_string());
            }
        }

        let sandboxes = match self
            .cri
            .list_pod_sandbox(ListPodSandboxRequest { filter: None })
            .await
        {
            Ok(r) => r.items,
            Err(e) => {
                errors.push(format!("listing sandboxes: {}", e.message()));
                return errors;
            }
        };
        let used: HashSet<&str> = containers
            .iter()
            .filter(|c| !removed.contains(&c.id))
            .map(|c| c.pod_sandbox_id.as_str())
            .collect();
        let gc_sandboxes: Vec<GcSandbox> = sandboxes
            .iter()
            .map(|s| GcSandbox {
                id: s.id.clone(),
                pod_uid: s
                    .metadata
                    .as_ref()
                    .map(|m| m.uid.clone())
                    .unwrap_or_default(),
                created_at: s.created_at,
                active: s.state == PodSandboxState::SandboxReady as i32
                    || used.contains(s.id.as_str()),
            })
            .collect();
        for id in select_sandboxes(&gc_sandboxes, removable) {
            info!(sandbox = %id, "garbage collecting sandbox");
            if let Err(e) = self
                .cri
                .remove_pod_sandbox(RemovePodSandboxRequest {
                    pod_sandbox_id: id.clone(),
                })
                .await
            {
                errors.push(format!("removing sandbox {id}: {}", e.message()));
            }
        }
        self.remove_pod_log_dirs(&sandboxes, removable);
        errors
    }

    /// Removes the log directories of removable pods this runtime ran (upstream
    /// `evictPodLogsDirectories`, restricted to pods the runtime knows, since other
    /// kubelets may share the log root on test machines).
    fn remove_pod_log_dirs(
        &self,
        sandboxes: &[k8s_cri::v1::PodSandbox],
        removable: impl Fn(&str) -> bool,
    ) {
        for s in sandboxes {
            let Some(m) = s.metadata.as_ref() else {
                continue;
            };
            if !removable(&m.uid) {
                continue;
            }
            let dir = super::sandbox::pod_log_directory(
                &self.pod_logs_dir,
                &m.namespace,
                &m.name,
                &m.uid,
            );
            if let Err(e) = std::fs::remove_dir_all(&dir)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                warn!(dir = %dir.display(), error = %e, "removing pod log directory");
            }
        }
    }

    /// Removes one container and its log file (upstream `removeContainer` +
    /// `removeContainerLog`).
    async fn remove_container(&self, id: &str) -> Result<()> {
        info!(container = %id, "garbage collecting dead container");
        if let Ok(status) = self
            .cri
            .container_status(ContainerStatusRequest {
                container_id: id.to_owned(),
                verbose: false,
            })
            .await
            && let Some(status) = status.status
            && !status.log_path.is_empty()
            && let Err(e) = std::fs::remove_file(&status.log_path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            warn!(path = %status.log_path, error = %e, "removing container log");
        }
        self.cri
            .remove_container(RemoveContainerRequest {
                container_id: id.to_owned(),
            })
            .await
            .map(|_| ())
            .map_err(|e| Error::Runtime(format!("removing container {id}: {}", e.message())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead(id: &str, uid: &str, name: &str, created_at: i64) -> DeadContainer {
        DeadContainer {
            id: id.into(),
            pod_uid: uid.into(),
            name: name.into(),
            created_at,
        }
    }

    fn sorted(mut ids: Vec<String>) -> Vec<String> {
        ids.sort();
        ids
    }

    #[test]
    fn keeps_the_newest_per_container_and_removes_deleted_pods() {
        let containers = [
            dead("a1", "p1", "a", 1),
            dead("a2", "p1", "a", 2),
            dead("a3", "p1", "a", 3),
            dead("b1", "p1", "b", 1),
            dead("gone1", "deleted", "x", 5),
            dead("gone2", "deleted", "x", 6),
        ];
        let policy = GcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: -1,
        };
        let ids = select_containers(&containers, policy, |uid| uid == "deleted");
        assert_eq!(sorted(ids), ["a1", "a2", "gone1", "gone2"]);
        let unlimited = GcPolicy {
            max_per_pod_container: -1,
            ..policy
        };
        assert!(select_containers(&containers, unlimited, |_| false).is_empty());
    }

    #[test]
    fn max_containers_cuts_units_then_the_oldest() {
        let containers = [
            dead("a1", "p1", "a", 1),
            dead("a2", "p1", "a", 4),
            dead("b1", "p2", "b", 2),
            dead("b2", "p2", "b", 3),
            dead("c1", "p3", "c", 5),
        ];
        let policy = GcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: -1,
            max_containers: 2,
        };
        // 2 / 3 units: each unit keeps 1 (a2, b2, c1); then the oldest of those goes (b2).
        let ids = select_containers(&containers, policy, |_| false);
        assert_eq!(sorted(ids), ["a1", "b1", "b2"]);
    }

    #[test]
    fn sandboxes_keep_the_newest_of_live_pods() {
        let s = |id: &str, uid: &str, created_at: i64, active: bool| GcSandbox {
            id: id.into(),
            pod_uid: uid.into(),
            created_at,
            active,
        };
        let sandboxes = [
            s("old", "live", 1, false),
            s("new", "live", 2, false),
            s("running", "live2", 3, true),
            s("dead", "live2", 1, false),
            s("gone", "deleted", 1, false),
            s("gone-active", "deleted", 2, true),
        ];
        let ids = select_sandboxes(&sandboxes, |uid| uid == "deleted");
        assert_eq!(sorted(ids), ["dead", "gone", "old"]);
    }
}
