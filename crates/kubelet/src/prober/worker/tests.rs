//! Worker timing and thresholds on tokio's paused clock, with a scripted prober.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, ExecAction,
    PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::error::Result;
use crate::prober::ProbeManager;
use crate::prober::results::ProbeResults;

/// Answers probes from a script (then Success), and records when it was asked.
#[derive(Default)]
struct ScriptedProber {
    answers: Mutex<VecDeque<ProbeResult>>,
    calls: Mutex<Vec<(ProbeType, Instant, String)>>,
}

impl ScriptedProber {
    fn answer(&self, results: &[ProbeResult]) {
        self.answers.lock().unwrap().extend(results);
    }

    fn calls(&self) -> Vec<(ProbeType, Instant, String)> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl ProbeRunner for ScriptedProber {
    async fn probe(
        &self,
        probe_type: ProbeType,
        _pod: &Pod,
        pod_ip: &str,
        _container: &Container,
        container_id: &str,
    ) -> Result<ProbeResult> {
        assert_eq!(pod_ip, "10.88.0.9");
        self.calls
            .lock()
            .unwrap()
            .push((probe_type, Instant::now(), container_id.to_owned()));
        Ok(self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(ProbeResult::Success))
    }
}

fn probe(period: i32, delay: i32, success: i32, failure: i32) -> Option<Probe> {
    Some(Probe {
        exec: Some(ExecAction {
            command: Some(vec!["true".into()]),
        }),
        period_seconds: Some(period),
        initial_delay_seconds: Some(delay),
        success_threshold: Some(success),
        failure_threshold: Some(failure),
        ..Default::default()
    })
}

fn pod(container: Container, restart_policy: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            uid: Some("u1".into()),
            name: Some("p".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![container],
            restart_policy: Some(restart_policy.into()),
            ..Default::default()
        }),
        status: None,
    })
}

/// A Running pod whose container `c` has runtime ID `id`, running (started now) or
/// exited, with `started` as given.
fn pod_status(id: &str, running: bool, started: bool) -> PodStatus {
    let state = if running {
        ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(now())),
            }),
            ..Default::default()
        }
    } else {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 1,
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some("10.88.0.9".into()),
        container_statuses: Some(vec![ContainerStatus {
            name: "c".into(),
            container_id: Some(format!("skiff://{id}")),
            started: Some(started),
            state: Some(state),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

struct Harness {
    prober: Arc<ScriptedProber>,
    status: Arc<StatusManager>,
    results: Arc<ResultsManager>,
    start: Instant,
    stop: Option<oneshot::Sender<()>>,
    trigger: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Harness {
    /// Runs a `probe_type` worker for `container` of a pod with `restart_policy`, whose
    /// status is `status`.
    fn start(
        probe_type: ProbeType,
        container: Container,
        restart_policy: &str,
        status: PodStatus,
    ) -> Self {
        let prober = Arc::new(ScriptedProber::default());
        let status_manager = Arc::new(StatusManager::default());
        status_manager.set_pod_status("u1", status);
        let (results, _updates) = ResultsManager::new();
        let results = Arc::new(results);
        let worker = Worker::new(
            probe_type,
            pod(container.clone(), restart_policy),
            container,
            results.clone(),
            status_manager.clone(),
            prober.clone(),
        );
        let (stop, stop_rx) = oneshot::channel();
        let trigger = Arc::new(Notify::new());
        let task = tokio::spawn(worker.run(Duration::ZERO, stop_rx, trigger.clone()));
        Self {
            prober,
            status: status_manager,
            results,
            start: Instant::now(),
            stop: Some(stop),
            trigger,
            task,
        }
    }

    /// Seconds after the start at which the prober was called.
    fn call_times(&self) -> Vec<u64> {
        self.prober
            .calls()
            .iter()
            .map(|(_, at, _)| (*at - self.start).as_secs())
            .collect()
    }

    /// Lets the paused clock run until `secs` (plus a little) after the start.
    async fn run_until(&self, secs: f64) {
        tokio::time::sleep_until(
            self.start + Duration::from_secs_f64(secs) + Duration::from_millis(100),
        )
        .await;
    }
}

fn container(
    liveness: Option<Probe>,
    readiness: Option<Probe>,
    startup: Option<Probe>,
) -> Container {
    Container {
        name: "c".into(),
        liveness_probe: liveness,
        readiness_probe: readiness,
        startup_probe: startup,
        ..Default::default()
    }
}

#[test]
fn timing_defaults_follow_upstream() {
    assert_eq!(
        ProbeTiming::of(&Probe::default()),
        ProbeTiming {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(10),
            timeout: Duration::from_secs(1),
            success_threshold: 1,
            failure_threshold: 3,
        }
    );
    let zeros = Probe {
        period_seconds: Some(0),
        timeout_seconds: Some(0),
        failure_threshold: Some(-1),
        ..Default::default()
    };
    assert_eq!(ProbeTiming::of(&zeros), ProbeTiming::of(&Probe::default()));
}

#[tokio::test(start_paused = true)]
async fn readiness_needs_success_threshold_and_failure_threshold_in_a_row() {
    let c = container(None, probe(10, 0, 2, 3), None);
    let h = Harness::start(
        ProbeType::Readiness,
        c.clone(),
        "Always",
        pod_status("id1", true, true),
    );
    h.prober.answer(&[
        ProbeResult::Success,
        ProbeResult::Success,
        ProbeResult::Failure,
        ProbeResult::Failure,
        ProbeResult::Success,
        ProbeResult::Failure,
        ProbeResult::Failure,
        ProbeResult::Failure,
    ]);
    h.run_until(0.0).await;
    assert_eq!(
        h.results.get("id1"),
        Some(ProbeResult::Failure),
        "not ready before the threshold"
    );
    h.run_until(10.0).await;
    assert_eq!(
        h.results.get("id1"),
        Some(ProbeResult::Success),
        "2 successes make ready"
    );
    h.run_until(50.0).await;
    assert_eq!(
        h.results.get("id1"),
        Some(ProbeResult::Success),
        "failures were not in a row"
    );
    h.run_until(70.0).await;
    assert_eq!(
        h.results.get("id1"),
        Some(ProbeResult::Failure),
        "3 failures in a row"
    );
    assert_eq!(h.call_times(), [0, 10, 20, 30, 40, 50, 60, 70]);
    // Readiness keeps probing after a failure.
    h.run_until(80.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Failure));
    h.run_until(90.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Success));
}

#[tokio::test(start_paused = true)]
async fn liveness_failure_holds_until_a_new_container() {
    let c = container(probe(5, 0, 1, 2), None, None);
    let h = Harness::start(
        ProbeType::Liveness,
        c,
        "Always",
        pod_status("id1", true, true),
    );
    h.prober
        .answer(&[ProbeResult::Failure, ProbeResult::Failure]);
    h.run_until(0.0).await;
    assert_eq!(
        h.results.get("id1"),
        Some(ProbeResult::Success),
        "alive until proven dead"
    );
    h.run_until(5.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Failure));
    h.run_until(30.0).await;
    assert_eq!(
        h.call_times(),
        [0, 5],
        "no probing while the container is restarted"
    );
    // The restarted container gets a fresh result and probing resumes.
    h.status.set_pod_status("u1", pod_status("id2", true, true));
    h.run_until(35.0).await;
    assert_eq!(
        h.results.get("id1"),
        None,
        "the old container's result is dropped"
    );
    assert_eq!(h.results.get("id2"), Some(ProbeResult::Success));
    assert_eq!(h.call_times(), [0, 5, 35]);
    assert!(
        h.prober
            .calls()
            .iter()
            .skip(2)
            .all(|(_, _, id)| id == "id2")
    );
}

#[tokio::test(start_paused = true)]
async fn initial_delay_counts_from_the_container_start() {
    let c = container(probe(2, 5, 1, 3), None, None);
    let h = Harness::start(
        ProbeType::Liveness,
        c,
        "Always",
        pod_status("id1", true, true),
    );
    h.run_until(9.0).await;
    assert_eq!(h.call_times(), [6, 8]);
}

#[tokio::test(start_paused = true)]
async fn startup_probe_gates_liveness_and_stops_once_started() {
    let c = container(probe(1, 0, 1, 1), None, probe(1, 0, 1, 3));
    let startup = Harness::start(
        ProbeType::Startup,
        c.clone(),
        "Always",
        pod_status("id1", true, false),
    );
    let liveness = Harness::start(
        ProbeType::Liveness,
        c,
        "Always",
        pod_status("id1", true, false),
    );
    startup
        .prober
        .answer(&[ProbeResult::Failure, ProbeResult::Success]);
    startup.run_until(0.0).await;
    assert_eq!(startup.results.get("id1"), Some(ProbeResult::Unknown));
    startup.run_until(1.0).await;
    assert_eq!(startup.results.get("id1"), Some(ProbeResult::Success));
    startup.run_until(4.0).await;
    assert!(
        liveness.call_times().is_empty(),
        "liveness waits for the start"
    );
    // The status now says started (as the status generation would).
    for h in [&startup, &liveness] {
        h.status.set_pod_status("u1", pod_status("id1", true, true));
    }
    startup.run_until(7.0).await;
    assert_eq!(
        startup.call_times(),
        [0, 1, 2, 3, 4],
        "startup probing ends once the status says started"
    );
    assert_eq!(liveness.call_times(), [5, 6, 7]);
}

#[tokio::test(start_paused = true)]
async fn startup_failure_after_threshold() {
    let c = container(None, None, probe(1, 0, 1, 3));
    let h = Harness::start(
        ProbeType::Startup,
        c,
        "Always",
        pod_status("id1", true, false),
    );
    h.prober.answer(&[ProbeResult::Failure; 5]);
    h.run_until(1.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Unknown));
    h.run_until(2.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Failure));
    h.run_until(6.0).await;
    assert_eq!(h.call_times(), [0, 1, 2], "on hold after the failure");
}

#[tokio::test(start_paused = true)]
async fn exited_container_under_never_ends_the_worker() {
    let c = container(None, probe(1, 0, 1, 3), None);
    let h = Harness::start(
        ProbeType::Readiness,
        c,
        "Never",
        pod_status("id1", false, false),
    );
    h.run_until(0.0).await;
    assert!(h.task.is_finished(), "nothing left to probe");
    assert_eq!(h.results.get("id1"), None, "the result is removed on exit");
    assert!(h.call_times().is_empty());
    // Under Always the worker waits for the restart, reporting not ready.
    let c = container(None, probe(1, 0, 1, 3), None);
    let h = Harness::start(
        ProbeType::Readiness,
        c,
        "Always",
        pod_status("id1", false, false),
    );
    h.run_until(3.0).await;
    assert!(!h.task.is_finished());
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Failure));
    assert!(h.call_times().is_empty());
}

#[tokio::test(start_paused = true)]
async fn finished_pods_and_stop_end_the_worker() {
    let c = container(None, probe(10, 0, 1, 3), None);
    let mut h = Harness::start(
        ProbeType::Readiness,
        c,
        "Always",
        pod_status("id1", true, true),
    );
    h.run_until(0.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Success));
    drop(h.stop.take());
    h.run_until(1.0).await;
    assert!(h.task.is_finished());
    assert_eq!(h.results.get("id1"), None);

    let c = container(None, probe(10, 0, 1, 3), None);
    let h = Harness::start(
        ProbeType::Readiness,
        c,
        "Always",
        pod_status("id1", true, true),
    );
    let mut done = pod_status("id1", true, true);
    done.phase = Some("Succeeded".into());
    h.status.set_pod_status("u1", done);
    h.run_until(0.0).await;
    assert!(h.task.is_finished());
}

#[tokio::test(start_paused = true)]
async fn triggers_probe_only_while_not_ready() {
    let c = container(None, probe(100, 0, 1, 1), None);
    let h = Harness::start(
        ProbeType::Readiness,
        c,
        "Always",
        pod_status("id1", true, true),
    );
    h.prober.answer(&[ProbeResult::Failure]);
    h.run_until(1.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Failure));
    h.trigger.notify_one();
    h.run_until(2.0).await;
    assert_eq!(h.results.get("id1"), Some(ProbeResult::Success));
    h.trigger.notify_one();
    h.run_until(3.0).await;
    assert_eq!(
        h.call_times(),
        [0, 1],
        "a ready container is not probed on trigger"
    );
}

#[tokio::test(start_paused = true)]
async fn manager_runs_one_worker_per_probe_and_stops_them_with_the_pod() {
    let prober = Arc::new(ScriptedProber::default());
    let status = Arc::new(StatusManager::default());
    status.set_pod_status("u1", pod_status("id1", true, true));
    let (results, _updates) = ProbeResults::new();
    let manager = ProbeManager::new(prober.clone(), status, results.clone());
    let c = container(probe(1, 0, 1, 3), probe(1, 0, 1, 3), None);
    let pod = pod(c, "Always");
    manager.add_pod(&pod);
    manager.add_pod(&pod);
    assert_eq!(
        manager.worker_count(),
        2,
        "one worker per probe, however often synced"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(results.readiness.get("id1"), Some(ProbeResult::Success));
    assert_eq!(results.liveness.get("id1"), Some(ProbeResult::Success));
    assert_eq!(results.startup.get("id1"), None, "no startup probe");
    manager.remove_pod("u1");
    assert_eq!(manager.worker_count(), 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(results.readiness.get("id1"), None);
    assert_eq!(results.liveness.get("id1"), None);
    let probes = prober.calls().len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(prober.calls().len(), probes, "stopped workers do not probe");
}
