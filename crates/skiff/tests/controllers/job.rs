//! The Job controller end to end. No kubelet: a simulator plays the pods' outcomes by
//! their `outcome` label (`succeed`, `fail`, `exit42`, or `run` to stay Running); a pod
//! of an Indexed Job follows its label `outcome-<index>` when it has one.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::jiff::Timestamp;

use super::*;

/// Plays the kubelet for Job pods: each new pod ends as its `outcome` label says.
fn simulate_job_pods(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let stream = watcher::watcher(pods.clone(), watcher::Config::default());
        futures::pin_mut!(stream);
        while let Ok(Some(ev)) = stream.try_next().await {
            let (WatchEvent::Apply(p) | WatchEvent::InitApply(p)) = ev else {
                continue;
            };
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            if p.metadata.deletion_timestamp.is_some()
                || matches!(phase.as_deref(), Some("Succeeded" | "Failed" | "Running"))
            {
                continue;
            }
            let index = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(INDEX).cloned());
            let labels = p.metadata.labels.clone().unwrap_or_default();
            let outcome = index
                .and_then(|ix| labels.get(&format!("outcome-{ix}")))
                .or_else(|| labels.get("outcome"))
                .cloned()
                .unwrap_or_default();
            let (phase, code) = match outcome.as_str() {
                "succeed" => ("Succeeded", 0),
                "fail" => ("Failed", 1),
                "exit42" => ("Failed", 42),
                "run" => ("Running", -1),
                _ => continue,
            };
            let state = if code < 0 {
                json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
            } else {
                json!({"terminated": {"exitCode": code, "finishedAt": Timestamp::now().to_string()}})
            };
            let patch = json!({"status": {"phase": phase, "containerStatuses": [{
                "name": "c", "image": "registry.example/job:1", "imageID": "",
                "ready": false, "restartCount": 0, "state": state,
            }]}});
            let name = p.metadata.name.clone().unwrap_or_default();
            let _ = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await;
        }
    })
}

fn job_manifest(name: &str, outcome: &str, spec: serde_json::Value) -> Job {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name, "outcome": outcome}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.example/job:1"}],
                },
            },
        },
    });
    if let (Some(dst), Some(src)) = (job["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in src {
            dst.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(job).expect("a Job")
}

/// Waits, by watching, until the Job satisfies `done`; the Job then.
async fn wait_job(api: &Api<Job>, name: &str, what: &str, done: impl Fn(&Job) -> bool) -> Job {
    let cond = move |j: Option<&Job>| j.is_some_and(&done);
    let res = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    match res {
        Ok(Ok(Some(job))) => job,
        other => {
            let now = api.get(name).await.ok().and_then(|j| j.status);
            panic!("timed out waiting for {what}: {other:?}; status now {now:?}");
        }
    }
}

/// The condition `type_` with status True, if the Job has it.
fn condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

fn reason<'a>(job: &'a Job, type_: &str) -> Option<&'a str> {
    condition(job, type_)?.reason.as_deref()
}

fn active_pods(m: &BTreeMap<String, Pod>) -> usize {
    m.values()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
        })
        .count()
}

const TRACKING: &str = "batch.kubernetes.io/job-tracking";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";
const FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";

fn tracked(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TRACKING))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_runs_to_completion_and_failure_as_upstream() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let simulator = simulate_job_pods(pods.clone());

    // completions 5, parallelism 2: never more than 2 active pods, each tracked by the
    // finalizer until counted, then Complete as upstream writes it.
    let (stop, rx) = tokio::sync::watch::channel(false);
    let watch_pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let most_active = tokio::spawn(async move {
        let stream = watcher::watcher(watch_pods, watcher::Config::default().labels("app=five"));
        let mut rx = rx;
        futures::pin_mut!(stream);
        let mut seen: BTreeMap<String, Pod> = BTreeMap::new();
        let mut worst = 0;
        loop {
            let ev = tokio::select! {
                _ = rx.changed() => return worst,
                ev = stream.try_next() => ev,
            };
            let Ok(Some(ev)) = ev else { return worst };
            match ev {
                WatchEvent::Apply(p) | WatchEvent::InitApply(p) => {
                    seen.insert(p.metadata.name.clone().unwrap_or_default(), p);
                }
                WatchEvent::Delete(p) => {
                    seen.remove(&p.metadata.name.clone().unwrap_or_default());
                }
                WatchEvent::Init | WatchEvent::InitDone => {}
            }
            worst = worst.max(active_pods(&seen));
        }
    });
    jobs.create(
        &PostParams::default(),
        &job_manifest(
            "five",
            "succeed",
            json!({"completions": 5, "parallelism": 2}),
        ),
    )
    .await
    .expect("create job five");
    let done = wait_job(&jobs, "five", "five to complete", |j| {
        condition(j, "Complete").is_some()
    })
    .await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(st.succeeded, Some(5), "{st:?}");
    assert_eq!(st.failed, None, "{st:?}");
    assert_eq!(st.active, None, "{st:?}");
    assert!(
        st.completion_time.is_some() && st.start_time.is_some(),
        "{st:?}"
    );
    assert_eq!(reason(&done, "Complete"), Some("CompletionsReached"));
    assert_eq!(
        reason(&done, "SuccessCriteriaMet"),
        Some("CompletionsReached")
    );
    let uncounted = st.uncounted_terminated_pods.unwrap_or_default();
    assert!(uncounted.succeeded.unwrap_or_default().is_empty());
    let five = wait_pods(&pods, "five", "five's pods released", |m| {
        m.len() == 5 && m.values().all(|p| !tracked(p))
    })
    .await;
    for p in five.values() {
        let owner = owner_uid(p);
        assert_eq!(owner, done.metadata.uid, "{:?}", p.metadata);
    }
    stop.send(true).expect("stop the watch");
    let worst = most_active.await.expect("watch task");
    assert!(
        worst <= 2,
        "{worst} pods were active at once (parallelism 2)"
    );

    // backoffLimit 1: the second failure fails the Job (after the 10 s pod backoff).
    jobs.create(
        &PostParams::default(),
        &job_manifest("flaky", "fail", json!({"backoffLimit": 1})),
    )
    .await
    .expect("create job flaky");
    let failed = wait_job(&jobs, "flaky", "flaky to fail", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    let st = failed.status.clone().unwrap_or_default();
    assert_eq!(st.failed, Some(2), "{st:?}");
    assert_eq!(reason(&failed, "Failed"), Some("BackoffLimitExceeded"));
    assert_eq!(
        reason(&failed, "FailureTarget"),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(
        condition(&failed, "Failed").and_then(|c| c.message.as_deref()),
        Some("Job has reached the specified backoff limit")
    );
    assert!(condition(&failed, "Complete").is_none() && st.completion_time.is_none());

    // A FailJob rule fails the Job at the first matching exit code, with upstream's
    // message; the rest of its pods are deleted.
    let policy = json!({"parallelism": 1, "backoffLimit": 6, "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In",
            "values": [42]}}]}});
    jobs.create(
        &PostParams::default(),
        &job_manifest("policy", "exit42", policy),
    )
    .await
    .expect("create job policy");
    let failed = wait_job(&jobs, "policy", "policy to fail", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(reason(&failed, "Failed"), Some("PodFailurePolicy"));
    let message = condition(&failed, "Failed")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.starts_with("Container c for pod default/policy-")
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );

    // Indexed: one pod per index, each with its annotation, label, hostname and env.
    jobs.create(
        &PostParams::default(),
        &job_manifest(
            "indexed",
            "succeed",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        ),
    )
    .await
    .expect("create job indexed");
    let done = wait_job(&jobs, "indexed", "indexed to complete", |j| {
        condition(j, "Complete").is_some()
    })
    .await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(
        (st.completed_indexes.as_deref(), st.succeeded),
        (Some("0-2"), Some(3)),
        "{st:?}"
    );
    let indexed = wait_pods(&pods, "indexed", "indexed pods", |m| m.len() == 3).await;
    let mut seen_indexes: Vec<String> = Vec::new();
    for p in indexed.values() {
        let ix = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("batch.kubernetes.io/job-completion-index"))
            .cloned()
            .unwrap_or_default();
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.hostname, Some(format!("indexed-{ix}")));
        assert!(
            p.metadata
                .name
                .as_deref()
                .unwrap_or("")
                .starts_with(&format!("indexed-{ix}-"))
        );
        assert_eq!(
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("batch.kubernetes.io/job-completion-index")),
            Some(&ix)
        );
        let env = spec.containers[0].env.clone().unwrap_or_default();
        assert!(
            env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX"),
            "{env:?}"
        );
        seen_indexes.push(ix);
    }
    seen_indexes.sort();
    assert_eq!(seen_indexes, ["0", "1", "2"]);

    // Suspended: no pods and the Suspended condition; resumed: pods run.
    jobs.create(
        &PostParams::default(),
        &job_manifest(
            "later",
            "run",
            json!({"suspend": true, "parallelism": 2, "completions": 2}),
        ),
    )
    .await
    .expect("create job later");
    let suspended = wait_job(&jobs, "later", "later suspended", |j| {
        condition(j, "Suspended").is_some()
    })
    .await;
    assert_eq!(reason(&suspended, "Suspended"), Some("JobSuspended"));
    assert!(
        suspended
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_none()
    );
    assert!(
        pods.list(&kube::api::ListParams::default().labels("app=later"))
            .await
            .expect("list")
            .items
            .is_empty()
    );
    jobs.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .expect("resume");
    wait_pods(&pods, "later", "later's 2 pods", |m| active_pods(m) == 2).await;
    let resumed = wait_job(&jobs, "later", "later resumed", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(2)
    })
    .await;
    let cond = resumed
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Suspended"))
        .cloned()
        .expect("Suspended condition");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_deref()),
        ("False", Some("JobResumed"))
    );

    // activeDeadlineSeconds: the running pods are deleted and the Job fails.
    jobs.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 1}})),
    )
    .await
    .expect("set a deadline");
    let late = wait_job(&jobs, "later", "later past its deadline", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(reason(&late, "Failed"), Some("DeadlineExceeded"));
    assert_eq!(late.status.as_ref().and_then(|s| s.failed), Some(2));
    wait_pods(&pods, "later", "later's pods gone", BTreeMap::is_empty).await;

    // A Job deleted in the background: the collector deletes its pods, which lose the
    // tracking finalizer and go.
    jobs.create(
        &PostParams::default(),
        &job_manifest("gone", "run", json!({"parallelism": 2, "completions": 4})),
    )
    .await
    .expect("create job gone");
    wait_pods(&pods, "gone", "gone's pods", |m| active_pods(m) == 2).await;
    kubectl(&api, &["delete", "job", "gone"]);
    wait_pods(&pods, "gone", "gone's pods deleted", BTreeMap::is_empty).await;

    // Events from the controller, written in the background: watched for.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let stream = watcher::watcher(events, watcher::Config::default());
    futures::pin_mut!(stream);
    let mut reasons = std::collections::BTreeSet::new();
    let want = [
        "Completed",
        "BackoffLimitExceeded",
        "PodFailurePolicy",
        "DeadlineExceeded",
        "Suspended",
        "Resumed",
        "SuccessfulCreate",
    ];
    let seen_all = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.try_next().await.expect("watch events") {
            if let WatchEvent::Apply(e) | WatchEvent::InitApply(e) = ev
                && e.involved_object.kind.as_deref() == Some("Job")
                && let Some(r) = e.reason
            {
                reasons.insert(r);
            }
            if want.iter().all(|w| reasons.contains(*w)) {
                return;
            }
        }
    })
    .await;
    assert!(seen_all.is_ok(), "events {reasons:?}; log:\n{}", cm.log());
    simulator.abort();
}

/// An Indexed Job of `completions` whose pods end as `outcome`, but the indexes named in
/// `per_index` as said there.
fn indexed_manifest(
    name: &str,
    outcome: &str,
    per_index: &[(usize, &str)],
    completions: i32,
    spec: serde_json::Value,
) -> Job {
    let mut spec = spec;
    spec["completionMode"] = json!("Indexed");
    spec["completions"] = json!(completions);
    spec["parallelism"] = json!(completions);
    let mut job = job_manifest(name, outcome, spec);
    let labels = job
        .spec
        .as_mut()
        .and_then(|s| s.template.metadata.as_mut())
        .and_then(|m| m.labels.as_mut())
        .expect("template labels");
    for (ix, outcome) in per_index {
        labels.insert(format!("outcome-{ix}"), (*outcome).to_owned());
    }
    job
}

fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn message<'a>(job: &'a Job, type_: &str) -> Option<&'a str> {
    condition(job, type_)?.message.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_job_fails_indexes_and_meets_success_policy_as_upstream() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let _cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let simulator = simulate_job_pods(pods.clone());
    let finished = |j: &Job| condition(j, "Failed").is_some() || condition(j, "Complete").is_some();

    // All four run at once; each is checked when it is done.
    // backoffLimitPerIndex 1: index 1 fails twice, 10 s apart, and is marked failed while
    // the others succeed; the Job then fails for its failed index.
    let per_index = json!({"backoffLimitPerIndex": 1, "maxFailedIndexes": 1});
    // maxFailedIndexes 0: the first failed index fails the Job and ends the running pods.
    let max_failed = json!({"backoffLimitPerIndex": 0, "maxFailedIndexes": 0});
    // A FailIndex rule fails index 0 at its first failure, without a retry.
    let fail_index = json!({"backoffLimitPerIndex": 3, "podFailurePolicy": {"rules": [
        {"action": "FailIndex", "onExitCodes": {"containerName": "c", "operator": "In",
            "values": [42]}}]}});
    // The second rule matches once index 0 succeeds: the Job completes, the rest is
    // deleted.
    let success = json!({"successPolicy": {"rules": [
        {"succeededCount": 2}, {"succeededIndexes": "0"}]}});
    for job in [
        indexed_manifest("per-index", "succeed", &[(1, "fail")], 3, per_index),
        indexed_manifest("max-failed", "run", &[(0, "fail")], 3, max_failed),
        indexed_manifest("fail-index", "succeed", &[(0, "exit42")], 2, fail_index),
        indexed_manifest("early", "run", &[(0, "succeed")], 3, success),
    ] {
        let name = job.metadata.name.clone().unwrap_or_default();
        jobs.create(&PostParams::default(), &job)
            .await
            .unwrap_or_else(|e| panic!("create job {name}: {e}"));
    }

    // A running Job writes no `conditions: []` (Go's omitempty leaves it out).
    wait_job(&jobs, "per-index", "per-index running", |j| {
        j.status.as_ref().is_some_and(|s| s.active.is_some())
    })
    .await;
    let raw: serde_json::Value =
        serde_json::from_str(&kubectl(&api, &["get", "job", "per-index", "-o", "json"]))
            .expect("kubectl get job -o json");
    assert!(
        raw["status"].get("conditions").is_none(),
        "{}",
        raw["status"]
    );

    let done = wait_job(&jobs, "per-index", "per-index to fail", finished).await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(reason(&done, "Failed"), Some("FailedIndexes"), "{st:?}");
    assert_eq!(reason(&done, "FailureTarget"), Some("FailedIndexes"));
    assert_eq!(message(&done, "Failed"), Some("Job has failed indexes"));
    assert_eq!(
        (
            st.failed_indexes.as_deref(),
            st.completed_indexes.as_deref()
        ),
        (Some("1"), Some("0,2")),
        "{st:?}"
    );
    assert_eq!(
        (st.succeeded, st.failed, st.active),
        (Some(2), Some(2), None)
    );
    assert!(condition(&done, "Complete").is_none() && st.completion_time.is_none());
    let all = wait_pods(&pods, "per-index", "per-index's pods released", |m| {
        m.len() == 4 && m.values().all(|p| !tracked(p))
    })
    .await;
    let mut index_one: Vec<&Pod> = all
        .values()
        .filter(|p| annotation(p, INDEX) == Some("1"))
        .collect();
    index_one.sort_by_key(|p| annotation(p, FAILURE_COUNT).map(str::to_owned));
    let counts: Vec<Option<&str>> = index_one
        .iter()
        .map(|p| annotation(p, FAILURE_COUNT))
        .collect();
    assert_eq!(counts, [Some("0"), Some("1")], "{all:?}");
    for p in all.values().filter(|p| annotation(p, INDEX) != Some("1")) {
        assert_eq!(annotation(p, FAILURE_COUNT), Some("0"), "{:?}", p.metadata);
    }
    // The replacement came after the index's 10 s backoff (creation times are seconds).
    let first_finished = index_one[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| {
            c[0].state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .clone()
        })
        .expect("the first pod's finish")
        .0;
    let replaced_at = index_one[1]
        .metadata
        .creation_timestamp
        .clone()
        .expect("creationTimestamp")
        .0;
    let waited = replaced_at.duration_since(first_finished);
    assert!(
        waited >= k8s_openapi::jiff::SignedDuration::from_secs(9),
        "replaced {waited:?} after the failure"
    );
    let described = kubectl(&api, &["describe", "job", "per-index"]);
    let line = |key: &str| {
        described
            .lines()
            .find(|l| l.starts_with(key))
            .map(|l| l[key.len()..].trim().to_owned())
    };
    assert_eq!(
        line("Pods Statuses:").as_deref(),
        Some("0 Active (0 Ready) / 2 Succeeded / 2 Failed"),
        "{described}"
    );
    assert_eq!(
        line("Completed Indexes:").as_deref(),
        Some("0,2"),
        "{described}"
    );

    let done = wait_job(&jobs, "max-failed", "max-failed to fail", finished).await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(
        reason(&done, "Failed"),
        Some("MaxFailedIndexesExceeded"),
        "{st:?}"
    );
    assert_eq!(
        message(&done, "Failed"),
        Some("Job has exceeded the specified maximal number of failed indexes")
    );
    assert_eq!(st.failed_indexes.as_deref(), Some("0"), "{st:?}");
    // The failed pod, and the two running ones the failure ended.
    assert_eq!((st.failed, st.active, st.succeeded), (Some(3), None, None));
    wait_pods(&pods, "max-failed", "max-failed's running pods gone", |m| {
        m.len() == 1 && m.values().all(|p| !tracked(p))
    })
    .await;

    let done = wait_job(&jobs, "fail-index", "fail-index to fail", finished).await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(reason(&done, "Failed"), Some("FailedIndexes"), "{st:?}");
    assert_eq!(
        (
            st.failed_indexes.as_deref(),
            st.completed_indexes.as_deref()
        ),
        (Some("0"), Some("1")),
        "{st:?}"
    );
    assert_eq!((st.failed, st.succeeded), (Some(1), Some(1)));
    let all = wait_pods(&pods, "fail-index", "fail-index's pods released", |m| {
        m.len() == 2 && m.values().all(|p| !tracked(p))
    })
    .await;
    let zero = all
        .values()
        .filter(|p| annotation(p, INDEX) == Some("0"))
        .count();
    assert_eq!(zero, 1, "index 0 ran again: {all:?}");

    let done = wait_job(&jobs, "early", "early to complete", finished).await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(reason(&done, "Complete"), Some("SuccessPolicy"), "{st:?}");
    assert_eq!(reason(&done, "SuccessCriteriaMet"), Some("SuccessPolicy"));
    assert_eq!(message(&done, "Complete"), Some("Matched rules at index 1"));
    assert_eq!(
        message(&done, "SuccessCriteriaMet"),
        Some("Matched rules at index 1")
    );
    assert_eq!(
        (st.completed_indexes.as_deref(), st.succeeded, st.active),
        (Some("0"), Some(1), None),
        "{st:?}"
    );
    assert!(
        st.completion_time.is_some() && st.failed_indexes.is_none(),
        "{st:?}"
    );
    let left = wait_pods(&pods, "early", "early's other pods gone", |m| m.len() == 1).await;
    assert!(
        left.values().all(|p| annotation(p, INDEX) == Some("0")),
        "{left:?}"
    );
    simulator.abort();
}
