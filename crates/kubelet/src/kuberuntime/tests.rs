//! SyncPod against the in-memory fake runtime.

use std::sync::Arc;

use k8s_cri::v1::ContainerState;
use k8s_openapi::api::core::v1::{
    Container, ExecAction, Lifecycle, LifecycleHandler, Pod, PodSpec, SleepAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::labels::CONTAINER_RESTART_COUNT_ANNOTATION;
use super::sync_result::{
    CRASH_LOOP_BACK_OFF, ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF, INVALID_IMAGE_NAME,
    POST_START_HOOK_ERROR,
};
use super::{KubeGenericRuntimeManager, RuntimeManagerConfig};
use crate::cri::fake::FakeCri;
use crate::prober::managers::ResultsManagers;

fn manager(cri: &Arc<FakeCri>, logs: &std::path::Path) -> KubeGenericRuntimeManager {
    KubeGenericRuntimeManager::new(
        cri.clone(),
        RuntimeManagerConfig {
            pod_logs_dir: logs.to_owned(),
            cgroup_root: "/skiff-unit-test-nonexistent".into(),
            node_ip: "192.168.0.2".into(),
            // No host resolv.conf: loopback DNS (a missing file would fail the sandbox).
            resolv_conf: "".into(),
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
            memory_capacity: 8 << 30,
            pod_dirs: crate::pod_dirs::PodDirs::new(logs.join("root")),
            allocatable: Default::default(),
        },
    )
}

/// A fake runtime, a temporary directory (pod logs, and `root/` for pod directories) and a
/// runtime manager using both.
/// One SyncPod of `pod` (UID `uid1`) against the runtime's current status, without probes.
async fn sync(m: &KubeGenericRuntimeManager, pod: &Pod) -> super::sync_result::PodSyncResult {
    let status = m.get_pod_status("uid1").await.unwrap();
    m.sync_pod(pod, &status, &ResultsManagers::default()).await
}

fn setup() -> (Arc<FakeCri>, tempfile::TempDir, KubeGenericRuntimeManager) {
    let cri = Arc::new(FakeCri::default());
    let logs = tempfile::tempdir().unwrap();
    let m = manager(&cri, logs.path());
    (cri, logs, m)
}

fn pod(image: &str, policy: &str) -> Pod {
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some("web-node".into()),
            namespace: Some("default".into()),
            uid: Some("uid1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.into()),
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    skiff_api::core::pod::default_pod(&mut pod);
    pod
}

#[tokio::test]
async fn sync_creates_sandbox_and_container_once() {
    let (cri, logs, m) = setup();
    let p = pod("busybox", "Always");
    let status = m.get_pod_status("uid1").await.unwrap();
    let result = m.sync_pod(&p, &status, &ResultsManagers::default()).await;
    assert!(!result.failed(), "{}", result.error_message());
    assert_eq!(
        cri.calls(),
        vec![
            "RunPodSandbox:0",
            "PullImage:busybox:latest",
            "CreateContainer:c",
            "StartContainer"
        ]
    );
    assert!(logs.path().join("default_web-node_uid1/c").is_dir());
    let id = cri.container_ids()[0].clone();
    let c = cri.container(&id).unwrap();
    assert_eq!(c.log_path, "c/0.log");
    assert_eq!(c.annotations[CONTAINER_RESTART_COUNT_ANNOTATION], "0");

    // A second sync (or a restarted kubelet with a new manager) adopts the running container.
    let m2 = manager(&cri, logs.path());
    let status = m2.get_pod_status("uid1").await.unwrap();
    assert!(
        !m2.sync_pod(&p, &status, &ResultsManagers::default())
            .await
            .failed()
    );
    assert_eq!(cri.calls().len(), 4, "nothing restarted: {:?}", cri.calls());
    assert_eq!(cri.container_ids(), vec![id]);
}

/// A kubelet killed between CreateContainer and StartContainer leaves a created,
/// never-started container: the restarted kubelet removes it and starts a replacement with
/// the same restart count (nothing restarted), and no second instance stays listed.
#[tokio::test]
async fn created_but_never_started_container_is_replaced_without_a_restart() {
    let (cri, logs, m) = setup();
    let p = pod("busybox:1.36", "Always");
    sync(&m, &p).await;
    let created = cri.container_ids()[0].clone();
    cri.set_container_state(&created, ContainerState::ContainerCreated, 0);

    let restarted = manager(&cri, logs.path());
    let result = sync(&restarted, &p).await;
    assert!(!result.failed(), "{}", result.error_message());
    let ids = cri.container_ids();
    assert_eq!(ids.len(), 1, "the created container stayed: {ids:?}");
    assert_ne!(ids[0], created);
    let c = cri.container(&ids[0]).unwrap();
    assert_eq!(c.annotations[CONTAINER_RESTART_COUNT_ANNOTATION], "0");
    assert_eq!(c.log_path, "c/0.log");
    assert!(
        cri.calls().contains(&"RemoveContainer".to_owned()),
        "{:?}",
        cri.calls()
    );
}

#[tokio::test]
async fn crashed_container_restarts_with_backoff_and_counts_restarts() {
    let (cri, _logs, m) = setup();
    let p = pod("busybox:1.36", "Always");
    let no_probes = ResultsManagers::default();
    m.sync_pod(&p, &m.get_pod_status("uid1").await.unwrap(), &no_probes)
        .await;
    let first = cri.container_ids()[0].clone();
    cri.set_container_state(&first, ContainerState::ContainerExited, 1);

    // The first crash restarts at once, with restartCount 1.
    let result = m
        .sync_pod(&p, &m.get_pod_status("uid1").await.unwrap(), &no_probes)
        .await;
    assert!(!result.failed(), "{}", result.error_message());
    let second = cri.container_ids()[1].clone();
    let c = cri.container(&second).unwrap();
    assert_eq!(c.annotations[CONTAINER_RESTART_COUNT_ANNOTATION], "1");
    assert_eq!(c.log_path, "c/1.log");
    assert_eq!(c.metadata.unwrap().attempt, 1);

    // The second waits 10 s.
    cri.set_container_state(&second, ContainerState::ContainerExited, 1);
    let result = m
        .sync_pod(&p, &m.get_pod_status("uid1").await.unwrap(), &no_probes)
        .await;
    let error = result.start_results[0].1.clone().unwrap();
    assert_eq!(error.reason, CRASH_LOOP_BACK_OFF);
    assert_eq!(
        error.message,
        "back-off 10s restarting failed container=c pod=web-node_default(uid1)"
    );
    assert!(result.retry_after.is_some_and(|r| r.as_secs() <= 10));
    assert_eq!(cri.container_ids().len(), 2);
}

#[test]
fn crash_backoff_doubles_with_an_injected_clock() {
    use super::backoff::Backoff;
    use super::container::check_crash_backoff;
    use super::pod_status::{ContainerStatus, PodStatus};
    use std::time::{Duration, SystemTime};
    let p = pod("busybox:1.36", "Always");
    let container = &p.spec.as_ref().unwrap().containers[0];
    let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs);
    let exited_at = |secs: u64| PodStatus {
        containers: vec![ContainerStatus {
            id: "x".into(),
            name: "c".into(),
            state: ContainerState::ContainerExited,
            created_at: 0,
            started_at: 0,
            finished_at: at(secs)
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as i64,
            exit_code: 1,
            image: String::new(),
            image_ref: String::new(),
            hash: String::new(),
            restart_count: 0,
            reason: "Error".into(),
            message: String::new(),
        }],
        ..Default::default()
    };
    let mut backoff = Backoff::default();
    let mut check = |exit: u64, now: u64| {
        check_crash_backoff(&mut backoff, &p, container, &exited_at(exit), at(now)).map_err(
            |(e, left)| {
                (
                    e.message.split(' ').nth(1).unwrap().to_owned(),
                    left.as_secs(),
                )
            },
        )
    };
    // First exit: restart at once.
    assert_eq!(check(0, 0), Ok(()));
    // Second exit at 1 s: wait until 11 s.
    assert_eq!(check(1, 2), Err(("10s".to_owned(), 9)));
    assert_eq!(check(1, 11), Ok(()));
    // Third exit at 12 s: 20 s; then 40 s.
    assert_eq!(check(12, 12), Err(("20s".to_owned(), 20)));
    assert_eq!(check(12, 32), Ok(()));
    assert_eq!(check(33, 40), Err(("40s".to_owned(), 33)));
    assert_eq!(check(33, 73), Ok(()));
    // A run of more than 10 minutes after the last restart starts over.
    assert_eq!(check(73 + 601, 73 + 601), Ok(()));
    assert_eq!(check(73 + 602, 73 + 602), Err(("10s".to_owned(), 10)));
}

/// A container killed while running (a failed liveness probe) restarts under the backoff
/// of the instance that exited before it (upstream's `doBackOff` takes the newest exited
/// instance, not the newest instance).
#[test]
fn liveness_kills_restart_under_crash_backoff() {
    use super::backoff::Backoff;
    use super::container::check_crash_backoff;
    use super::pod_status::{ContainerStatus, PodStatus};
    use std::time::{Duration, SystemTime};
    let p = pod("busybox:1.36", "Always");
    let container = &p.spec.as_ref().unwrap().containers[0];
    let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs);
    let nanos = |secs: u64| {
        at(secs)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64
    };
    let instance = |id: &str, state: ContainerState, finished: u64| ContainerStatus {
        id: id.into(),
        name: "c".into(),
        state,
        created_at: 0,
        started_at: 0,
        finished_at: if state == ContainerState::ContainerExited {
            nanos(finished)
        } else {
            0
        },
        exit_code: 137,
        image: String::new(),
        image_ref: String::new(),
        hash: String::new(),
        restart_count: 0,
        reason: String::new(),
        message: String::new(),
    };
    // Before each kill the newest instance runs; older ones exited (newest first).
    let running_after = |exits: &[u64]| PodStatus {
        containers: std::iter::once(instance("run", ContainerState::ContainerRunning, 0))
            .chain(
                exits
                    .iter()
                    .rev()
                    .map(|&t| instance("old", ContainerState::ContainerExited, t)),
            )
            .collect(),
        ..Default::default()
    };
    let mut backoff = Backoff::default();
    // The first kill (nothing exited yet) and the second (the first instance's exit
    // starts the backoff at 10 s) restart at once.
    assert!(check_crash_backoff(&mut backoff, &p, container, &running_after(&[]), at(0)).is_ok());
    assert!(check_crash_backoff(&mut backoff, &p, container, &running_after(&[0]), at(6)).is_ok());
    // The third kill, 6 s after the second: the newest exited instance ended at 6 s.
    let third = check_crash_backoff(&mut backoff, &p, container, &running_after(&[0, 6]), at(12));
    let (error, left) = third.expect_err("a liveness restart 6 s after the last one");
    assert_eq!(error.reason, CRASH_LOOP_BACK_OFF);
    assert_eq!(left.as_secs(), 4);
}

#[tokio::test]
async fn pull_failure_then_backoff_and_invalid_names() {
    let (cri, _logs, m) = setup();
    cri.fail_pulls_of("127.0.0.1:1/none:latest");
    let p = pod("127.0.0.1:1/none", "Always");
    let reason =
        |r: &super::sync_result::PodSyncResult| r.start_results[0].1.clone().map(|e| e.reason);
    let r = sync(&m, &p).await;
    assert_eq!(reason(&r), Some(ERR_IMAGE_PULL));
    let r = sync(&m, &p).await;
    assert_eq!(reason(&r), Some(IMAGE_PULL_BACK_OFF));
    assert_eq!(
        cri.calls()
            .iter()
            .filter(|c| c.starts_with("PullImage"))
            .count(),
        1
    );

    let p = pod("Bad Image", "Always");
    let r = sync(&m, &p).await;
    assert_eq!(reason(&r), Some(INVALID_IMAGE_NAME));
}

#[tokio::test]
async fn if_not_present_skips_pull_when_present() {
    let (cri, _logs, m) = setup();
    let p = pod("busybox:1.36", "Always");
    sync(&m, &p).await;
    let mut p2 = p.clone();
    p2.metadata.uid = Some("uid2".into());
    m.sync_pod(
        &p2,
        &m.get_pod_status("uid2").await.unwrap(),
        &ResultsManagers::default(),
    )
    .await;
    assert_eq!(
        cri.calls()
            .iter()
            .filter(|c| c.starts_with("PullImage"))
            .count(),
        1
    );
}

#[tokio::test]
async fn kill_and_remove_pod_cleans_everything() {
    let (cri, logs, m) = setup();
    let p = pod("busybox", "Always");
    sync(&m, &p).await;
    let status = m.get_pod_status("uid1").await.unwrap();
    assert!(m.kill_pod(&p, &status, 30).await.is_empty());
    assert!(cri.calls().contains(&"StopContainer:30".to_owned()));
    let stopped = m.get_pod_status("uid1").await.unwrap();
    assert!(
        stopped
            .containers
            .iter()
            .all(|c| c.state == ContainerState::ContainerExited)
    );
    assert!(
        m.remove_pod(&stopped, "default", "web-node")
            .await
            .is_empty()
    );
    assert_eq!(cri.sandbox_count(), 0);
    assert!(cri.container_ids().is_empty());
    assert!(!logs.path().join("default_web-node_uid1").exists());
}

#[tokio::test]
async fn never_pod_that_completed_is_not_restarted() {
    let (cri, _logs, m) = setup();
    let p = pod("busybox", "Never");
    sync(&m, &p).await;
    let id = cri.container_ids()[0].clone();
    cri.set_container_state(&id, ContainerState::ContainerExited, 0);
    let r = sync(&m, &p).await;
    assert!(!r.failed());
    // The pod is done: its sandbox is stopped and nothing new is created.
    let r = sync(&m, &p).await;
    assert!(!r.failed());
    assert_eq!(cri.container_ids(), vec![id]);
    assert_eq!(
        cri.calls()
            .iter()
            .filter(|c| c.starts_with("RunPodSandbox"))
            .count(),
        1
    );
}

/// A pod whose container has a postStart and a preStop hook.
fn pod_with_hooks(post_start: LifecycleHandler, pre_stop: LifecycleHandler) -> Pod {
    let mut p = pod("busybox", "Always");
    if let Some(spec) = p.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(5);
        spec.containers[0].lifecycle = Some(Lifecycle {
            post_start: Some(post_start),
            pre_stop: Some(pre_stop),
            ..Default::default()
        });
    }
    p
}

fn sleep_handler(seconds: i64) -> LifecycleHandler {
    LifecycleHandler {
        sleep: Some(SleepAction { seconds }),
        ..Default::default()
    }
}

#[tokio::test]
async fn pre_stop_time_counts_against_the_grace_period() {
    let (cri, logs, m) = setup();
    let p = pod_with_hooks(sleep_handler(0), sleep_handler(1));
    let result = sync(&m, &p).await;
    assert!(!result.failed(), "{}", result.error_message());

    // The termination message file is mounted at the default path.
    let id = cri.container_ids()[0].clone();
    let mounts = cri.container(&id).unwrap().mounts;
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0].container_path, "/dev/termination-log");
    let container_dir = logs.path().join("root/pods/uid1/containers/c");
    assert!(std::path::Path::new(&mounts[0].host_path).starts_with(&container_dir));
    assert!(std::path::Path::new(&mounts[0].host_path).is_file());

    // The 1 s preStop sleep leaves 4 of the 5 s for StopContainer.
    let status = m.get_pod_status("uid1").await.unwrap();
    assert!(m.kill_pod(&p, &status, 5).await.is_empty());
    assert!(
        cri.calls().contains(&"StopContainer:4".to_owned()),
        "{:?}",
        cri.calls()
    );
    let status = m.get_pod_status("uid1").await.unwrap();
    assert!(
        m.remove_pod(&status, "default", "web-node")
            .await
            .is_empty()
    );
    assert!(!logs.path().join("root/pods/uid1").exists());
}

#[tokio::test]
async fn failed_post_start_hook_kills_the_container() {
    let (cri, _logs, m) = setup();
    // The fake runtime has no ExecSync: the exec hook fails.
    let exec = LifecycleHandler {
        exec: Some(ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), "exit 1".into()]),
        }),
        ..Default::default()
    };
    let p = pod_with_hooks(exec, sleep_handler(0));
    let result = sync(&m, &p).await;
    let error = result.start_results[0].1.clone().unwrap();
    assert_eq!(error.reason, POST_START_HOOK_ERROR);
    assert!(
        error.message.starts_with(
            r#"Exec lifecycle hook ([sh -c exit 1]) for Container "c" in Pod "web-node_default(uid1)" failed - error: "#
        ),
        "{}",
        error.message
    );
    assert_eq!(
        cri.calls().last().map(String::as_str),
        Some("StopContainer:5")
    );
    let id = cri.container_ids()[0].clone();
    assert_eq!(
        cri.container(&id).unwrap().state,
        ContainerState::ContainerExited as i32
    );
}
