//! The node outlives its failures: pods refused by node admission end Failed with
//! upstream's reasons while the others run on; the API server stopped for a minute
//! restarts no container and the statuses catch up; a SIGKILLed kubelet restarts no
//! container and its Node stays Ready.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::timestamp;
use crate::joined::Joined;

/// How long a pod may take to start, end or go.
const WAIT: Duration = Duration::from_secs(90);
/// How long the API server stays down: the issue's acceptance figure.
const OUTAGE: Duration = Duration::from_secs(60);

/// A pod bound to the node, running `command` in the test image.
fn pod(joined: &Joined, name: &str, command: &str, extra_spec: Value) -> Value {
    let mut spec = json!({
        "nodeName": joined.node_name(),
        "terminationGracePeriodSeconds": 1,
        "restartPolicy": "Never",
        "containers": [{
            "name": "main",
            "image": joined.cluster.image,
            "command": ["sh", "-c", command],
        }],
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra_spec) {
        spec.extend(extra);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

fn create(joined: &Joined, pod: &Value) {
    joined.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
}

fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or_default()
}

fn wait_phase(joined: &Joined, name: &str, want: &str) -> Value {
    joined.eventually(&format!("{name} {want} in the API"), WAIT, || {
        joined.get(&["pod", name]).filter(|p| phase(p) == want)
    })
}

/// The container's `(containerID, restartCount)` as the API shows them.
fn container_identity(pod: &Value) -> (Value, Value) {
    let status = &pod["status"]["containerStatuses"][0];
    (
        status["containerID"].clone(),
        status["restartCount"].clone(),
    )
}

fn delete_now(joined: &Joined, names: &[&str]) {
    let mut args = vec!["delete", "pod", "--grace-period=1", "--timeout=60s"];
    args.extend_from_slice(names);
    joined.kubectl(&args);
    for name in names {
        joined.cluster.wait_gone(name);
    }
}

/// Pods the node cannot admit (upstream's `canAdmitPod`): one asking for more CPU than
/// the node has ends Failed with `OutOfcpu`, one with an unsafe sysctl with
/// `SysctlForbidden`; each with an event, and a running pod is undisturbed.
pub fn pods_the_node_refuses_fail_with_upstream_reasons(joined: &Joined) {
    create(
        joined,
        &pod(joined, "bystander", "exec sleep 3600", json!({})),
    );
    let bystander = wait_phase(joined, "bystander", "Running");

    let greedy = pod(
        joined,
        "greedy",
        "exec sleep 3600",
        json!({"containers": [{
            "name": "main",
            "image": joined.cluster.image,
            "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "1000"}},
        }]}),
    );
    create(joined, &greedy);
    let failed = wait_phase(joined, "greedy", "Failed");
    assert_eq!(failed["status"]["reason"], "OutOfcpu", "{failed:#}");
    let message = failed["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000000, used: "
        ),
        "{message}"
    );
    // kubectl shows the reason as the pod's status.
    let listed = joined.kubectl(&["get", "pod", "greedy", "--no-headers"]);
    assert!(listed.contains("OutOfcpu"), "{listed}");

    let sysctl = pod(
        joined,
        "sysctl",
        "exec sleep 3600",
        json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}}),
    );
    create(joined, &sysctl);
    let failed = wait_phase(joined, "sysctl", "Failed");
    assert_eq!(failed["status"]["reason"], "SysctlForbidden", "{failed:#}");
    assert!(
        failed["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("kernel.msgmax")),
        "{failed:#}"
    );

    // Each refusal is an event on its pod, with the same reason.
    for (name, reason) in [("greedy", "OutOfcpu"), ("sysctl", "SysctlForbidden")] {
        joined.eventually(&format!("the {reason} event of {name}"), WAIT, || {
            let events = joined.get(&[
                "events",
                "--field-selector",
                &format!("involvedObject.name={name}"),
            ])?;
            events["items"]
                .as_array()?
                .iter()
                .any(|e| e["reason"] == reason && e["type"] == "Warning")
                .then_some(())
        });
    }

    let now = wait_phase(joined, "bystander", "Running");
    assert_eq!(container_identity(&now), container_identity(&bystander));
    delete_now(joined, &["bystander", "greedy", "sysctl"]);
}

/// The API server stops for [`OUTAGE`] and starts again: no container restarts, a pod
/// that ended during the outage shows Succeeded afterwards, and the Lease and the Node's
/// heartbeat move on.
pub fn api_server_outage_restarts_nothing(joined: &mut Joined) {
    create(joined, &pod(joined, "steady", "exec sleep 3600", json!({})));
    create(joined, &pod(joined, "brief", "sleep 15", json!({})));
    let steady = wait_phase(joined, "steady", "Running");
    wait_phase(joined, "brief", "Running");

    joined.api.stop().expect("stop the API server");
    let stopped = Instant::now();
    // The outage itself is what is tested: nothing to wait for but time.
    std::thread::sleep(OUTAGE);
    assert!(
        joined.cluster.node.pid().is_some(),
        "the kubelet exited during the outage:\n{}",
        crate::joined::tail(&joined.cluster.node.log())
    );
    joined.api.restart().expect("start the API server again");
    let back = chrono::Utc::now() - chrono::Duration::seconds(1);
    eprintln!("API server was down {:?}", stopped.elapsed());

    // The pod that ended while the API server was away: its status catches up.
    let brief = wait_phase(joined, "brief", "Succeeded");
    assert_eq!(
        brief["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        0
    );
    let now = wait_phase(joined, "steady", "Running");
    assert_eq!(container_identity(&now), container_identity(&steady));

    // The kubelet found the API server again: a renewed Lease and a fresh heartbeat.
    let node = joined.node_name();
    joined.eventually("the Lease renewed after the outage", WAIT, || {
        let lease = joined.get(&["lease", "-n", "kube-node-lease", &node])?;
        (timestamp(&lease["spec"]["renewTime"]) > back).then_some(())
    });
    delete_now(joined, &["steady", "brief"]);
}

/// Follows the Node's Ready condition with `kubectl get --watch`, a line per change.
struct ReadyWatch {
    child: Child,
    lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl ReadyWatch {
    /// Starts the watch and waits for its first line (the Node as listed).
    fn start(joined: &Joined) -> ReadyWatch {
        let jsonpath = r#"jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}{"\n"}"#;
        let mut child = joined
            .api
            .kubectl_command(33)
            .args([
                "get",
                "node",
                &joined.node_name(),
                "--watch",
                "-o",
                jsonpath,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kubectl get --watch");
        let stdout = child.stdout.take().expect("kubectl's stdout");
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let watch = ReadyWatch {
            child,
            lines,
            reader,
        };
        let first = watch
            .lines
            .recv_timeout(WAIT)
            .expect("the watch's first line");
        assert!(first.starts_with("True "), "the Node is not Ready: {first}");
        watch
    }

    /// Stops the watch; returns the `(status, lastHeartbeatTime)` it saw after the first
    /// line, in order.
    fn finish(mut self) -> Vec<(String, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.reader.join();
        self.lines
            .try_iter()
            .filter_map(|l| {
                let (status, beat) = l.split_once(' ')?;
                Some((status.to_owned(), beat.to_owned()))
            })
            .collect()
    }
}

/// The kubelet is SIGKILLed and started again: the containers are adopted, not
/// restarted, and the Node never stops being Ready.
pub fn kubelet_sigkill_restarts_nothing(joined: &mut Joined) {
    create(
        joined,
        &pod(joined, "survivor", "exec sleep 3600", json!({})),
    );
    let survivor = wait_phase(joined, "survivor", "Running");
    let watch = ReadyWatch::start(joined);

    joined.cluster.node.kill9().expect("SIGKILL the kubelet");
    let killed = chrono::Utc::now() - chrono::Duration::seconds(1);
    joined
        .cluster
        .node
        .restart()
        .expect("start the kubelet again");

    // The restarted kubelet has posted the Node's status.
    let node = joined.node_name();
    joined.eventually("a heartbeat from the restarted kubelet", WAIT, || {
        let node = joined.get(&["node", &node])?;
        let ready = node["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (timestamp(&ready["lastHeartbeatTime"]) > killed).then_some(())
    });
    let seen = watch.finish();
    assert!(!seen.is_empty(), "the watch saw no update of the Node");
    assert!(
        seen.iter().all(|(status, _)| status == "True"),
        "the Node was not Ready throughout: {seen:?}"
    );

    let pods = joined
        .cluster
        .wait_for("survivor on the restarted kubelet", WAIT, |pods| {
            crate::common::find_pod(pods, "survivor")
                .is_some_and(|p| crate::common::pod_phase(p) == "Running")
        });
    let on_kubelet = crate::common::find_pod(&pods, "survivor")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        container_identity(&on_kubelet),
        container_identity(&survivor)
    );
    let now = wait_phase(joined, "survivor", "Running");
    assert_eq!(container_identity(&now), container_identity(&survivor));
    delete_now(joined, &["survivor"]);
}
