//! The status manager (upstream `pkg/kubelet/status`): the latest v1 PodStatus of each
//! pod, with stable `startTime` and condition `lastTransitionTime`s.

pub mod generate;
pub mod sync;

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The current time as an API timestamp.
pub fn now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Timestamp::from_nanosecond(i128::try_from(nanos).unwrap_or(0)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// True when the status's phase is Succeeded or Failed.
pub fn is_terminal(status: &PodStatus) -> bool {
    matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// Latest API status per pod UID (upstream `manager.podStatuses`), each with the version
/// that last changed it, so that [`sync::StatusSync`] posts only what changed.
#[derive(Default)]
pub struct StatusManager {
    statuses: RwLock<HashMap<String, Versioned>>,
    /// The last version given out.
    versions: AtomicU64,
    /// Notified whenever a status changes (upstream `podStatusChannel`).
    changed: Notify,
}

/// A status and the version that last changed it.
#[derive(Clone)]
struct Versioned {
    status: PodStatus,
    version: u64,
}

impl StatusManager {
    /// Stores `status` for pod `uid`. A pod whose phase was Succeeded or Failed keeps that
    /// phase, reason and message. `startTime` is kept from the first status (or set to
    /// now); a condition keeps its `lastTransitionTime` while its status is unchanged; the
    /// pod IPs are kept once known, as upstream does, since a finished pod's sandbox is torn
    /// down and reports none.
    pub fn set_pod_status(&self, uid: &str, mut status: PodStatus) {
        let now = Time(now());
        let mut statuses = self
            .statuses
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = statuses.get(uid).map(|v| &v.status);
        // A terminal phase is final (upstream `checkPodStatusUpdateIsValid`).
        if let Some(old) = old
            .filter(|o| is_terminal(o))
            .filter(|_| !is_terminal(&status))
        {
            status.phase.clone_from(&old.phase);
            status.reason.clone_from(&old.reason);
            status.message.clone_from(&old.message);
        }
        status.start_time = old
            .and_then(|o| o.start_time.clone())
            .or_else(|| Some(now.clone()));
        if status.pod_ips.is_none()
            && let Some(old) = old
        {
            status.pod_ip.clone_from(&old.pod_ip);
            status.pod_ips.clone_from(&old.pod_ips);
        }
        for condition in status.conditions.iter_mut().flatten() {
            let previous = old
                .and_then(|o| o.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == condition.type_));
            condition.last_transition_time = match previous {
                Some(p) if p.status == condition.status => p.last_transition_time.clone(),
                _ => Some(now.clone()),
            };
        }
        if old == Some(&status) {
            return;
        }
        let version = self.versions.fetch_add(1, Ordering::Relaxed) + 1;
        statuses.insert(uid.to_owned(), Versioned { status, version });
        drop(statuses);
        self.changed.notify_one();
    }

    /// The latest status of pod `uid`.
    pub fn get_pod_status(&self, uid: &str) -> Option<PodStatus> {
        self.statuses
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(uid)
            .map(|v| v.status.clone())
    }

    /// The statuses changed since the versions in `synced` (pod UID to the version last
    /// posted), with their versions.
    pub fn changed_since(&self, synced: &HashMap<String, u64>) -> Vec<(String, PodStatus, u64)> {
        self.statuses
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(uid, v)| synced.get(*uid).is_none_or(|s| *s < v.version))
            .map(|(uid, v)| (uid.clone(), v.status.clone(), v.version))
            .collect()
    }

    /// Waits until a status changes after the call (or changed since the last wait).
    pub async fn wait_for_change(&self) {
        self.changed.notified().await;
    }

    /// Forgets pod `uid`.
    pub fn remove_pod(&self, uid: &str) {
        self.statuses
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodIP};

    fn status(ready: &str) -> PodStatus {
        PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: ready.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    fn transition(m: &StatusManager) -> Option<Time> {
        m.get_pod_status("u")?
            .conditions?
            .first()?
            .last_transition_time
            .clone()
    }

    #[test]
    fn keeps_pod_ips_after_the_sandbox_is_gone() {
        let m = StatusManager::default();
        let ip = PodIP {
            ip: "10.88.0.7".into(),
        };
        m.set_pod_status(
            "u",
            PodStatus {
                pod_ip: Some(ip.ip.clone()),
                pod_ips: Some(vec![ip.clone()]),
                ..Default::default()
            },
        );
        m.set_pod_status("u", PodStatus::default());
        let kept = m.get_pod_status("u").unwrap_or_default();
        assert_eq!(kept.pod_ip.as_deref(), Some("10.88.0.7"));
        assert_eq!(kept.pod_ips, Some(vec![ip]));
    }

    #[test]
    fn terminal_phase_is_final() {
        let m = StatusManager::default();
        let phase = |p: &str| PodStatus {
            phase: Some(p.into()),
            ..Default::default()
        };
        m.set_pod_status("u", phase("Running"));
        m.set_pod_status(
            "u",
            PodStatus {
                reason: Some("DeadlineExceeded".into()),
                ..phase("Failed")
            },
        );
        m.set_pod_status("u", phase("Running"));
        let kept = m.get_pod_status("u").unwrap_or_default();
        assert_eq!(kept.phase.as_deref(), Some("Failed"));
        assert_eq!(kept.reason.as_deref(), Some("DeadlineExceeded"));
    }

    #[test]
    fn keeps_start_time_and_transition_times() {
        let m = StatusManager::default();
        m.set_pod_status("u", status("False"));
        let start = m.get_pod_status("u").and_then(|s| s.start_time);
        let t1 = transition(&m);
        assert!(start.is_some() && t1.is_some());
        std::thread::sleep(std::time::Duration::from_millis(2));
        m.set_pod_status("u", status("False"));
        assert_eq!(transition(&m), t1);
        m.set_pod_status("u", status("True"));
        assert_ne!(transition(&m), t1);
        assert_eq!(m.get_pod_status("u").and_then(|s| s.start_time), start);
        m.remove_pod("u");
        assert!(m.get_pod_status("u").is_none());
    }
}
