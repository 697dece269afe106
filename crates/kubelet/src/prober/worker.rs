//! One probe worker (upstream `worker.go`): probes one container of a pod with one probe
//! type every `periodSeconds`, applies `initialDelaySeconds` and the success/failure
//! thresholds, and records the result under the container's runtime ID.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{self as api, Container, Pod, Probe};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{Notify, oneshot};
use tokio::time::{Instant, MissedTickBehavior};

use super::probe::ProbeRunner;
use super::results::{ProbeResult, ResultsManager};
use super::{ProbeType, runtime_container_id};
use crate::status::{StatusManager, now};

/// A probe's timing and thresholds with upstream's defaults (`SetDefaults_Probe`) applied
/// to unset or zero fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTiming {
    /// `initialDelaySeconds` (0): no probing this long after the container started.
    pub initial_delay: Duration,
    /// `periodSeconds` (10).
    pub period: Duration,
    /// `timeoutSeconds` (1).
    pub timeout: Duration,
    /// `successThreshold` (1): consecutive successes that make a Success.
    pub success_threshold: u32,
    /// `failureThreshold` (3): consecutive failures that make a Failure.
    pub failure_threshold: u32,
}

impl ProbeTiming {
    /// The timing of `probe`.
    pub fn of(probe: &Probe) -> Self {
        let positive = |value: Option<i32>, default: u32| {
            value
                .and_then(|v| u32::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let seconds = |value: Option<i32>, default: u32| {
            Duration::from_secs(u64::from(positive(value, default)))
        };
        Self {
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10),
            timeout: seconds(probe.timeout_seconds, 1),
            success_threshold: positive(probe.success_threshold, 1),
            failure_threshold: positive(probe.failure_threshold, 3),
        }
    }
}

/// The container currently probed.
struct Current {
    /// Runtime container ID.
    id: String,
    /// When it started running (tokio time), once seen running.
    started: Option<Instant>,
}

/// A probe worker; [`Worker::run`] is its task.
pub struct Worker {
    probe_type: ProbeType,
    pod: Arc<Pod>,
    container: Container,
    timing: ProbeTiming,
    results: Arc<ResultsManager>,
    status_manager: Arc<StatusManager>,
    prober: Arc<dyn ProbeRunner>,
    current: Option<Current>,
    /// After a liveness or startup Failure: no probing until a new container appears.
    on_hold: bool,
    last_result: Option<ProbeResult>,
    /// How many times in a row `last_result` came.
    result_run: u32,
}

impl Worker {
    /// A worker for the `probe_type` probe of `container` (which must have one) of `pod`,
    /// reading the pod's status from `status_manager` and writing `results`.
    pub fn new(
        probe_type: ProbeType,
        pod: Arc<Pod>,
        container: Container,
        results: Arc<ResultsManager>,
        status_manager: Arc<StatusManager>,
        prober: Arc<dyn ProbeRunner>,
    ) -> Self {
        let timing = probe_type
            .spec(&container)
            .map(ProbeTiming::of)
            .unwrap_or_else(|| ProbeTiming::of(&Probe::default()));
        Self {
            probe_type,
            pod,
            container,
            timing,
            results,
            status_manager,
            prober,
            current: None,
            on_hold: false,
            last_result: None,
            result_run: 0,
        }
    }

    /// Probes after `jitter`, then every period and whenever `trigger` is notified while
    /// the result is not Success, until `stop` fires (or its sender is dropped) or the
    /// container is gone for good (pod finished, or exited under restartPolicy Never).
    /// The container's result is removed on exit.
    pub async fn run(
        mut self,
        jitter: Duration,
        mut stop: oneshot::Receiver<()>,
        trigger: Arc<Notify>,
    ) {
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(jitter) => {}
        }
        let mut ticker = tokio::time::interval(self.timing.period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = ticker.tick() => {}
                () = trigger.notified() => {
                    if self.current_result() == Some(ProbeResult::Success) {
                        continue;
                    }
                }
            }
            tokio::select! {
                _ = &mut stop => break,
                keep_going = self.do_probe() => if !keep_going { break },
            }
        }
        if let Some(current) = &self.current {
            self.results.remove(&current.id);
        }
    }

    fn current_result(&self) -> Option<ProbeResult> {
        self.current.as_ref().and_then(|c| self.results.get(&c.id))
    }

    /// One probe round (upstream `doProbe`); false when the worker should stop.
    async fn do_probe(&mut self) -> bool {
        let uid = self.pod.metadata.uid.as_deref().unwrap_or("");
        let Some(status) = self.status_manager.get_pod_status(uid) else {
            // Not synced yet, or already gone.
            return true;
        };
        if matches!(status.phase.as_deref(), Some("Failed" | "Succeeded")) {
            return false;
        }
        let Some(c) = container_status(&status, &self.container.name) else {
            return true;
        };
        let Some(id) = c
            .container_id
            .as_deref()
            .map(runtime_container_id)
            .filter(|id| !id.is_empty())
        else {
            return true;
        };
        if self.current.as_ref().is_none_or(|current| current.id != id) {
            if let Some(old) = self.current.take() {
                self.results.remove(&old.id);
            }
            self.results.set(id, self.probe_type.initial_result(), uid);
            self.current = Some(Current {
                id: id.to_owned(),
                started: None,
            });
            self.on_hold = false;
            self.last_result = None;
            self.result_run = 0;
        }
        if self.on_hold {
            return true;
        }
        let running = c.state.as_ref().and_then(|s| s.running.as_ref());
        let Some(running) = running else {
            self.results.set(id, ProbeResult::Failure, uid);
            // Keep the worker while the container may still be restarted.
            let terminated = c.state.as_ref().is_some_and(|s| s.terminated.is_some());
            let policy = self
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.as_deref());
            return !terminated || policy != Some("Never");
        };
        if self.pod.metadata.deletion_timestamp.is_some()
            && matches!(self.probe_type, ProbeType::Liveness | ProbeType::Startup)
        {
            // A pod being deleted is not restarted for failed probes.
            return false;
        }
        let started_at = running.started_at.as_ref().map(|t| t.0);
        let Some(current) = self.current.as_mut() else {
            return true;
        };
        let started = *current
            .started
            .get_or_insert_with(|| start_instant(started_at));
        if started.elapsed() < self.timing.initial_delay {
            return true;
        }
        let container_started = c.started == Some(true);
        match (self.probe_type, container_started) {
            // The startup probe is done once the container has started; the others wait
            // for that.
            (ProbeType::Startup, true) => return true,
            (ProbeType::Liveness | ProbeType::Readiness, false) => return true,
            _ => {}
        }
        let pod_ip = status.pod_ip.as_deref().unwrap_or("");
        let result = match self
            .prober
            .probe(self.probe_type, &self.pod, pod_ip, &self.container, id)
            .await
        {
            Ok(result) => result,
            // The probe could not run: the attempt does not count.
            Err(_) => return true,
        };
        if self.last_result == Some(result) {
            self.result_run += 1;
        } else {
            self.last_result = Some(result);
            self.result_run = 1;
        }
        let below_threshold = match result {
            ProbeResult::Failure => self.result_run < self.timing.failure_threshold,
            ProbeResult::Success => self.result_run < self.timing.success_threshold,
            ProbeResult::Unknown => false,
        };
        if below_threshold {
            return true;
        }
        self.results.set(id, result, uid);
        if result == ProbeResult::Failure
            && matches!(self.probe_type, ProbeType::Liveness | ProbeType::Startup)
        {
            // The container will be restarted: leave it alone until the new one appears.
            self.on_hold = true;
            self.result_run = 0;
        }
        true
    }
}

/// The status of container `name` among the pod's containers or, for sidecars, its init
/// containers.
fn container_status<'a>(
    status: &'a api::PodStatus,
    name: &str,
) -> Option<&'a api::ContainerStatus> {
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == name)
}

/// The tokio instant at which a container that started at wall-clock `started_at` did
/// (now when unknown or in the future).
fn start_instant(started_at: Option<Timestamp>) -> Instant {
    let age = started_at
        .map(|t| now().as_nanosecond() - t.as_nanosecond())
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(Duration::from_nanos)
        .unwrap_or_default();
    let now = Instant::now();
    now.checked_sub(age).unwrap_or(now)
}

#[cfg(test)]
mod tests;
