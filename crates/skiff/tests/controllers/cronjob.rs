//! The CronJob and TTL-after-finished controllers end to end. No Job controller runs
//! (`--controllers` names the ones under test and the garbage collector): the test
//! finishes Jobs itself by writing their status.

use super::*;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;

/// The controllers these tests run.
const CONTROLLERS: &str =
    "--controllers=cronjob-controller,ttl-after-finished-controller,garbage-collector-controller";

/// A minute boundary and the controller's slack, then some: how long the wait for the
/// next scheduled time may take.
const MINUTE_WAIT: Duration = Duration::from_secs(90);

fn start() -> (ApiServer, ControllerManager) {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false", CONTROLLERS]);
    (api, cm)
}

/// Marks the Job Complete, as the Job controller would: condition, times, counts.
async fn complete(jobs: &Api<Job>, name: &str) -> Timestamp {
    let now = Timestamp::from_second(Timestamp::now().as_second()).expect("a time");
    let patch = json!({"status": {
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now},
        ],
        "startTime": now,
        "completionTime": now,
        "succeeded": 1,
    }});
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("mark the Job Complete");
    now
}

/// Waits, by watching, until the CronJob satisfies `done`; the CronJob then.
async fn wait_cron_job(
    api: &Api<CronJob>,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&CronJob) -> bool,
) -> CronJob {
    let cond = move |cj: Option<&CronJob>| cj.is_some_and(&done);
    let res = tokio::time::timeout(
        timeout,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    match res {
        Ok(Ok(Some(cj))) => cj,
        other => {
            let now = api.get(name).await.ok().and_then(|c| c.status);
            panic!("timed out waiting for {what}: {other:?}; status now {now:?}");
        }
    }
}

/// Waits, by watching, for an event with `reason` about the object named `regarding`.
async fn wait_event(events: &Api<Event>, regarding: &str, reason: &str, timeout: Duration) {
    let stream = watcher::watcher(events.clone(), watcher::Config::default());
    futures::pin_mut!(stream);
    let wait = async {
        while let Some(ev) = stream.try_next().await.expect("watch events") {
            let (WatchEvent::Apply(e) | WatchEvent::InitApply(e)) = ev else {
                continue;
            };
            let about = e.regarding.as_ref().and_then(|r| r.name.as_deref());
            if about == Some(regarding) && e.reason.as_deref() == Some(reason) {
                return;
            }
        }
        panic!("the watch ended");
    };
    tokio::time::timeout(timeout, wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for a {reason} event about {regarding}"));
}

fn active_names(cj: &CronJob) -> Vec<String> {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

fn last_schedule(cj: &CronJob) -> Option<Timestamp> {
    cj.status.as_ref()?.last_schedule_time.as_ref().map(|t| t.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_starts_jobs_on_schedule_and_forbids_overlap() {
    let (api, cm) = start();
    let client = api.client().await.expect("client");
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let name = "every-minute";

    // Created suspended, its last scheduled time set 90 s back, then resumed: the most
    // recent minute boundary was missed and is started at once (within the 300 s
    // starting deadline), without waiting for the next minute.
    let cj: CronJob = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "*/1 * * * *",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 300,
            "suspend": true,
            "jobTemplate": {
                "metadata": {"labels": {"app": name}, "annotations": {"team": "batch"}},
                "spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.example/task:1"}],
                }}},
            },
        },
    }))
    .expect("a CronJob");
    let cj = cron_jobs
        .create(&PostParams::default(), &cj)
        .await
        .expect("create the CronJob");
    let uid = cj.metadata.uid.clone().expect("uid");
    let back = Timestamp::from_second(Timestamp::now().as_second() - 90).expect("a time");
    cron_jobs
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"lastScheduleTime": back}})),
        )
        .await
        .expect("set lastScheduleTime");
    cron_jobs
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect("resume the CronJob");

    let got = wait_objects(&jobs, name, "the first Job", |m| m.len() == 1).await;
    let (first, job) = got.into_iter().next().expect("one Job");
    let cj = wait_cron_job(&cron_jobs, name, "the first Job active", WAIT, |cj| {
        active_names(cj) == [first.clone()]
    })
    .await;
    let scheduled = last_schedule(&cj).expect("lastScheduleTime");
    assert_eq!(
        scheduled.as_second() % 60,
        0,
        "a minute boundary: {scheduled}"
    );
    assert!(
        scheduled > back && scheduled <= Timestamp::now(),
        "{scheduled}"
    );
    assert_eq!(first, format!("{name}-{}", scheduled.as_second() / 60));
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("batch.kubernetes.io/cronjob-scheduled-timestamp")
            .map(String::as_str),
        Some(
            scheduled
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
                .as_str()
        )
    );
    assert_eq!(annotations.get("team").map(String::as_str), Some("batch"));
    let owner = job
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .expect("an owner");
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("CronJob", name, uid.as_str())
    );
    assert_eq!(owner.controller, Some(true));

    // The next minute comes while the first Job runs: Forbid starts nothing.
    wait_event(&events, name, "JobAlreadyActive", MINUTE_WAIT).await;
    let now: Vec<String> = jobs
        .list(&kube::api::ListParams::default().labels(&format!("app={name}")))
        .await
        .expect("list Jobs")
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect();
    assert_eq!(
        now,
        std::slice::from_ref(&first),
        "no second Job while the first runs"
    );

    // The first Job finishes: it leaves the active list, and the missed time (still
    // within the deadline) starts late.
    let completed = complete(&jobs, &first).await;
    let cj = wait_cron_job(&cron_jobs, name, "the second Job active", WAIT, |cj| {
        let active = active_names(cj);
        active.len() == 1 && active[0] != first
    })
    .await;
    let second = active_names(&cj).remove(0);
    let scheduled_2 = last_schedule(&cj).expect("lastScheduleTime");
    assert!(scheduled_2 > scheduled, "{scheduled_2} after {scheduled}");
    assert_eq!(second, format!("{name}-{}", scheduled_2.as_second() / 60));
    assert_eq!(
        cj.status
            .as_ref()
            .and_then(|s| s.last_successful_time.as_ref())
            .map(|t| t.0),
        Some(completed)
    );
    jobs.get(&second).await.expect("the second Job exists");
    wait_event(&events, name, "SawCompletedJob", WAIT).await;
    drop(cm);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_ttl_controller_deletes_finished_jobs() {
    let (api, cm) = start();
    let client = api.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let name = "short-lived";
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "ttlSecondsAfterFinished": 2,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.example/task:1"}],
            }},
        },
    }))
    .expect("a Job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create the Job");
    // The TTL counts from the finish, which the test writes.
    complete(&jobs, name).await;
    let foreground = std::sync::atomic::AtomicBool::new(false);
    wait_objects(&jobs, name, "the Job deleted", |m| {
        let finalizing = m.values().any(|j| {
            j.metadata.deletion_timestamp.is_some()
                && j.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion"))
        });
        if finalizing {
            foreground.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        m.is_empty()
    })
    .await;
    assert!(
        foreground.load(std::sync::atomic::Ordering::SeqCst),
        "deleted in the foreground; controller-manager log:\n{}",
        cm.log()
    );
}
