//! End-to-end: the pod lifecycle of `skiff kubelet` (issue 4) on one node with the embedded
//! runtime, real runc and a real registry: init containers, native sidecars, crash-loop
//! and image-pull backoff, OOM kills and activeDeadlineSeconds, asserting the status
//! fields and reasons upstream shows. All pods run at once in one cluster. Run as root.

mod common;

use std::time::Duration;

use common::{
    Cluster, container_status, find_pod, init_container_status, pod_condition, pod_phase,
    single_container_pod, timestamp,
};
use serde_json::Value;

/// Init containers that must run one after the other, each a second long.
fn init_order_pod(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: init-order}}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {{name: first, image: {image}, command: ["sh", "-c", "sleep 1"]}}
  - {{name: second, image: {image}, command: ["sh", "-c", "sleep 1"]}}
  containers:
  - {{name: main, image: {image}, command: ["sleep", "3600"]}}
"#
    )
}

/// A pod whose second init container always fails.
fn init_fail_pod(name: &str, policy: &str, image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 1
  initContainers:
  - {{name: ok, image: {image}, command: ["true"]}}
  - {{name: fails, image: {image}, command: ["sh", "-c", "exit 3"]}}
  containers:
  - {{name: main, image: {image}, command: ["sleep", "3600"]}}
"#
    )
}

/// A native sidecar next to a main container that takes 2 s to stop on SIGTERM; the pod
/// is killed by its 10 s active deadline.
fn sidecar_pod(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: sidecar}}
spec:
  activeDeadlineSeconds: 10
  terminationGracePeriodSeconds: 6
  initContainers:
  - name: side
    image: {image}
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  containers:
  - name: main
    image: {image}
    command: ["sh", "-c", "trap 'sleep 2; exit 0' TERM; while true; do sleep 1; done"]
"#
    )
}

fn state<'a>(status: &'a Value, which: &str) -> &'a Value {
    &status["state"][which]
}

/// What the observation loop saw of the crash-looping and the unpullable pods.
#[derive(Default)]
struct Seen {
    crash_backoffs: Vec<String>,
    crash_restarts: i64,
    /// Waiting reasons and messages of the unpullable image's container, as they changed.
    pull_reasons: Vec<(String, String)>,
    sidecar_running_with_main: Option<Value>,
}

#[test]
fn pod_lifecycle_on_one_node() {
    let cluster = Cluster::start();
    let image = cluster.image.as_str();
    let missing = format!("{}/skiff/missing:v1", cluster.registry.host());
    let manifests = [
        ("init-order.yaml", init_order_pod(image)),
        (
            "init-crash.yaml",
            init_fail_pod("init-crash", "Always", image),
        ),
        (
            "init-never.yaml",
            init_fail_pod("init-never", "Never", image),
        ),
        ("sidecar.yaml", sidecar_pod(image)),
        (
            "crash.yaml",
            single_container_pod(
                "crash",
                image,
                "",
                "    command: [\"sh\", \"-c\", \"exit 1\"]\n",
            ),
        ),
        (
            "badimage.yaml",
            single_container_pod("badimage", &missing, "", ""),
        ),
        (
            "oom.yaml",
            single_container_pod(
                "oom",
                image,
                "  restartPolicy: Never\n",
                "    command: [\"sh\", \"-c\", \"head -c 300m /dev/zero | tail\"]\n    resources: {limits: {memory: 20Mi}}\n",
            ),
        ),
        (
            "deadline.yaml",
            single_container_pod(
                "deadline",
                image,
                "  activeDeadlineSeconds: 2\n",
                "    command: [\"sleep\", \"3600\"]\n",
            ),
        ),
    ];
    for (file, manifest) in &manifests {
        cluster.write_manifest(file, manifest);
    }
    let name = |n: &str| cluster.static_name(n);

    // Watch the transient states: the crash loop's growing back-off, the pull failure
    // turning into a pull back-off, the sidecar running next to the main container.
    let mut seen = Seen::default();
    cluster.wait_for(
        "back-off 20s, ImagePullBackOff and a running sidecar",
        Duration::from_secs(45),
        |pods| {
            observe(&mut seen, pods, &name);
            seen.crash_backoffs
                .iter()
                .any(|m| m.starts_with("back-off 20s"))
                && pulled_then_backed_off(&seen.pull_reasons)
                && seen.sidecar_running_with_main.is_some()
        },
    );
    let crash_uid = cluster
        .node
        .pod("crash")
        .map(|p| p["metadata"]["uid"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert_eq!(
        seen.crash_backoffs.first().map(String::as_str),
        Some(
            format!(
                "back-off 10s restarting failed container=main pod={}_default({crash_uid})",
                name("crash")
            )
            .as_str()
        ),
        "{:?}",
        seen.crash_backoffs
    );
    assert!(
        seen.crash_restarts >= 2,
        "restartCount {}",
        seen.crash_restarts
    );
    let pull_failure = seen
        .pull_reasons
        .iter()
        .find(|(reason, _)| reason == "ErrImagePull")
        .map(|(_, message)| message.as_str())
        .unwrap_or_default();
    assert!(
        pull_failure.starts_with(&format!("Failed to pull image {missing:?}: ")),
        "{pull_failure}"
    );

    check_sidecar_started_first(seen.sidecar_running_with_main.as_ref());
    check_crash_loop(&cluster.node.pod("crash").unwrap_or_default());
    check_image_pull_backoff(
        &cluster.node.pod("badimage").unwrap_or_default(),
        &missing,
        &seen.pull_reasons,
    );
    check_init_order(&wait_pod(&cluster, "init-order", "main running", |p| {
        state(container_status(p, "main"), "running").is_object()
    }));
    check_init_crash(&wait_pod(
        &cluster,
        "init-crash",
        "Init:CrashLoopBackOff",
        |p| state(init_container_status(p, "fails"), "waiting")["reason"] == "CrashLoopBackOff",
    ));
    let never = wait_pod(&cluster, "init-never", "Failed", |p| {
        pod_phase(p) == "Failed"
    });
    let fails = init_container_status(&never, "fails");
    assert_eq!(state(fails, "terminated")["exitCode"], 3, "{never}");
    assert_eq!(fails["restartCount"], 0, "{never}");
    assert_eq!(
        state(container_status(&never, "main"), "waiting")["reason"],
        "PodInitializing"
    );
    check_oom(&wait_pod(&cluster, "oom", "Failed", |p| {
        pod_phase(p) == "Failed"
    }));
    check_deadline(&wait_pod(&cluster, "deadline", "Failed", |p| {
        pod_phase(p) == "Failed"
    }));
    check_sidecar_stopped_last(&wait_pod(&cluster, "sidecar", "Failed", |p| {
        pod_phase(p) == "Failed"
            && state(init_container_status(p, "side"), "terminated").is_object()
    }));

    for (file, _) in &manifests {
        cluster.remove_manifest(file);
    }
    for (file, _) in &manifests {
        cluster.wait_gone(&name(file.trim_end_matches(".yaml")));
    }
    cluster.assert_no_leftovers();
}

fn observe(seen: &mut Seen, pods: &Value, name: &impl Fn(&str) -> String) {
    if let Some(crash) = find_pod(pods, &name("crash")) {
        let main = container_status(crash, "main");
        let waiting = state(main, "waiting");
        if waiting["reason"] == "CrashLoopBackOff"
            && let Some(message) = waiting["message"].as_str()
            && seen.crash_backoffs.last().map(String::as_str) != Some(message)
        {
            seen.crash_backoffs.push(message.to_owned());
        }
        seen.crash_restarts = seen
            .crash_restarts
            .max(main["restartCount"].as_i64().unwrap_or(0));
    }
    if let Some(bad) = find_pod(pods, &name("badimage"))
        && let waiting = state(container_status(bad, "main"), "waiting")
        && let Some(reason) = waiting["reason"].as_str()
        && seen.pull_reasons.last().map(|(r, _)| r.as_str()) != Some(reason)
    {
        let message = waiting["message"].as_str().unwrap_or_default();
        seen.pull_reasons
            .push((reason.to_owned(), message.to_owned()));
    }
    if let Some(pod) = find_pod(pods, &name("sidecar"))
        && seen.sidecar_running_with_main.is_none()
        && state(container_status(pod, "main"), "running").is_object()
        && pod_condition(pod, "Ready")["status"] == "True"
    {
        seen.sidecar_running_with_main = Some(pod.clone());
    }
}

/// True once an ErrImagePull (a failed pull) was followed by ImagePullBackOff (the next
/// sync within the pull back-off). The first failure may be replaced by the back-off before
/// a poll sees it, so the pair may come from a later pull attempt.
fn pulled_then_backed_off(reasons: &[(String, String)]) -> bool {
    reasons
        .windows(2)
        .any(|w| w[0].0 == "ErrImagePull" && w[1].0 == "ImagePullBackOff")
}

/// Waits until pod `short` (a static pod's manifest name) satisfies `ready`.
fn wait_pod(cluster: &Cluster, short: &str, desc: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let full = cluster.static_name(short);
    let pods = cluster.wait_for(&format!("{full} {desc}"), Duration::from_secs(60), |pods| {
        find_pod(pods, &full).is_some_and(&ready)
    });
    find_pod(&pods, &full).cloned().unwrap_or_default()
}

fn check_sidecar_started_first(pod: Option<&Value>) {
    let pod = pod.expect("sidecar pod observed running");
    let side = init_container_status(pod, "side");
    let main = container_status(pod, "main");
    assert!(state(side, "running").is_object(), "{pod}");
    assert_eq!(
        (side["started"].as_bool(), side["ready"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(
        timestamp(&state(side, "running")["startedAt"])
            <= timestamp(&state(main, "running")["startedAt"]),
        "the sidecar starts before the main container: {pod}"
    );
    assert_eq!(pod_phase(pod), "Running");
    for condition in [
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(
            pod_condition(pod, condition)["status"],
            "True",
            "{condition}: {pod}"
        );
    }
}

fn check_sidecar_stopped_last(pod: &Value) {
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded", "{pod}");
    let side = state(init_container_status(pod, "side"), "terminated");
    let main = state(container_status(pod, "main"), "terminated");
    assert_eq!(
        main["exitCode"], 0,
        "main stopped on SIGTERM after its 2 s: {pod}"
    );
    assert!(
        timestamp(&side["finishedAt"]) >= timestamp(&main["finishedAt"]),
        "the sidecar stops after the main container: {pod}"
    );
}

fn check_crash_loop(pod: &Value) {
    assert_eq!(pod_phase(pod), "Running", "{pod}");
    let main = container_status(pod, "main");
    let last = &main["lastState"]["terminated"];
    assert_eq!(
        (last["exitCode"].as_i64(), last["reason"].as_str()),
        (Some(1), Some("Error")),
        "{pod}"
    );
    assert!(
        last["containerID"].as_str().unwrap_or("").contains("://"),
        "{pod}"
    );
    assert_eq!(main["ready"], false);
    let ready = pod_condition(pod, "ContainersReady");
    assert_eq!(
        (ready["reason"].as_str(), ready["message"].as_str()),
        (
            Some("ContainersNotReady"),
            Some("containers with unready status: [main]")
        ),
        "{pod}"
    );
}

/// The pod alternates between ErrImagePull (each pull attempt) and ImagePullBackOff (syncs
/// within the back-off): check the back-off message seen and the stable fields.
fn check_image_pull_backoff(pod: &Value, image: &str, reasons: &[(String, String)]) {
    assert_eq!(pod_phase(pod), "Pending", "{pod}");
    let backoff = reasons
        .iter()
        .find(|(reason, _)| reason == "ImagePullBackOff")
        .map(|(_, message)| message.as_str());
    assert_eq!(
        backoff,
        Some(format!("Back-off pulling image {image:?}").as_str())
    );
    let main = container_status(pod, "main");
    assert_eq!(main["restartCount"], 0);
    assert!(main["containerID"].is_null(), "{pod}");
}

fn check_init_order(pod: &Value) {
    let first = state(init_container_status(pod, "first"), "terminated");
    let second = state(init_container_status(pod, "second"), "terminated");
    let main = state(container_status(pod, "main"), "running");
    for t in [first, second] {
        assert_eq!(
            (t["exitCode"].as_i64(), t["reason"].as_str()),
            (Some(0), Some("Completed")),
            "{pod}"
        );
    }
    assert!(
        timestamp(&pod["status"]["startTime"]) <= timestamp(&first["startedAt"]),
        "startTime is set before the first container starts: {pod}"
    );
    // Each one second long: strictly one after the other.
    assert!(
        timestamp(&first["finishedAt"]) <= timestamp(&second["startedAt"]),
        "{pod}"
    );
    assert!(
        timestamp(&second["finishedAt"]) <= timestamp(&main["startedAt"]),
        "{pod}"
    );
    assert!(
        timestamp(&second["startedAt"]) > timestamp(&first["startedAt"]),
        "{pod}"
    );
    assert_eq!(init_container_status(pod, "first")["ready"], true);
    assert_eq!(pod_condition(pod, "Initialized")["status"], "True", "{pod}");
    assert_eq!(pod_phase(pod), "Running");
}

fn check_init_crash(pod: &Value) {
    assert_eq!(pod_phase(pod), "Pending", "{pod}");
    let ok = init_container_status(pod, "ok");
    assert_eq!(state(ok, "terminated")["reason"], "Completed", "{pod}");
    assert_eq!(
        ok["restartCount"], 0,
        "a succeeded init container is not run again: {pod}"
    );
    let fails = init_container_status(pod, "fails");
    assert!(fails["restartCount"].as_i64() >= Some(1), "{pod}");
    assert_eq!(fails["lastState"]["terminated"]["exitCode"], 3, "{pod}");
    assert!(
        state(fails, "waiting")["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("back-off ")
                && m.contains(" restarting failed container=fails pod=init-crash-")),
        "{pod}"
    );
    let main = container_status(pod, "main");
    assert_eq!(
        state(main, "waiting")["reason"],
        "PodInitializing",
        "the main container is blocked: {pod}"
    );
    assert!(main["containerID"].is_null(), "{pod}");
    let init = pod_condition(pod, "Initialized");
    assert_eq!(
        (
            init["status"].as_str(),
            init["reason"].as_str(),
            init["message"].as_str()
        ),
        (
            Some("False"),
            Some("ContainersNotInitialized"),
            Some("containers with incomplete status: [fails]")
        ),
        "{pod}"
    );
}

fn check_oom(pod: &Value) {
    let t = state(container_status(pod, "main"), "terminated");
    assert_eq!(t["reason"], "OOMKilled", "{pod}");
    assert_ne!(t["exitCode"], 0, "{pod}");
    assert_eq!(pod["status"]["qosClass"], "Burstable", "{pod}");
}

fn check_deadline(pod: &Value) {
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded", "{pod}");
    assert_eq!(
        pod["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    assert_eq!(pod_condition(pod, "Ready")["reason"], "PodFailed", "{pod}");
    let t = state(container_status(pod, "main"), "terminated");
    assert!(t.is_object(), "the container was killed: {pod}");
    let active = timestamp(&t["finishedAt"]) - timestamp(&pod["status"]["startTime"]);
    assert!(active >= chrono::TimeDelta::seconds(2), "{pod}");
}
