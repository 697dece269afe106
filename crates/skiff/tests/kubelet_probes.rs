//! End-to-end: liveness, readiness and startup probes (exec, httpGet, tcpSocket) of static
//! pods through `skiff kubelet` with real containers. gRPC probes are covered by the
//! kubelet's unit tests (the test image has no gRPC server). Run as root.

mod common;

use std::time::Duration;

use common::{Cluster, container_status, find_pod, pod_phase, single_container_pod};
use serde_json::Value;

/// The status (`True`/`False`) of the pod condition `type_`.
fn condition<'a>(pod: &'a Value, type_: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

fn running(pod: &Value, container: &str) -> bool {
    pod_phase(pod) == "Running" && container_status(pod, container)["state"]["running"].is_object()
}

fn restarts(pod: &Value, container: &str) -> i64 {
    container_status(pod, container)["restartCount"]
        .as_i64()
        .unwrap_or(-1)
}

/// A one-container static pod `name` running `command`, with `probes` (YAML lines at the
/// container's indentation).
fn probed_pod(name: &str, image: &str, command: &str, probes: &str) -> String {
    let container = format!(
        "    command: [\"sh\", \"-c\", \"{command}\"]\n    ports: [{{name: http, containerPort: 8080}}]\n{probes}"
    );
    single_container_pod(name, image, "", &container)
}

const HTTPD: &str = "mkdir -p /srv && echo ok > /srv/index.html && exec httpd -f -p 8080 -h /srv";

#[test]
fn probes_drive_readiness_and_restarts() {
    let cluster = Cluster::start();
    let image = &cluster.image;
    // Ready only once /tmp/ready exists, 8 s after the start.
    cluster.write_manifest(
        "late.yaml",
        &probed_pod(
            "late",
            image,
            "sleep 8; touch /tmp/ready; exec sleep 3600",
            "    readinessProbe:
      exec: {command: [test, -f, /tmp/ready]}
      periodSeconds: 1
      failureThreshold: 1
",
        ),
    );
    // Serves HTTP: httpGet readiness (by port name) and tcpSocket liveness pass.
    cluster.write_manifest(
        "web.yaml",
        &probed_pod(
            "web",
            image,
            HTTPD,
            "    readinessProbe:
      httpGet: {path: /index.html, port: http}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
      failureThreshold: 1
",
        ),
    );
    // Its liveness endpoint answers 404: restarted again and again.
    cluster.write_manifest(
        "sick.yaml",
        &probed_pod(
            "sick",
            image,
            HTTPD,
            "    livenessProbe:
      httpGet: {path: /healthz, port: 8080, httpHeaders: [{name: X-Probe, value: liveness}]}
      periodSeconds: 1
      failureThreshold: 2
",
        ),
    );
    // Starts slowly: without the startup probe's gate, the liveness probe would kill it.
    cluster.write_manifest(
        "slow.yaml",
        &probed_pod(
            "slow",
            image,
            "sleep 8; touch /tmp/started; exec sleep 3600",
            "    startupProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
      failureThreshold: 60
    livenessProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
      failureThreshold: 1
",
        ),
    );
    // Nothing listens on 9999: never ready, never restarted.
    cluster.write_manifest(
        "closed.yaml",
        &probed_pod(
            "closed",
            image,
            "exec sleep 3600",
            "    readinessProbe:
      tcpSocket: {port: 9999}
      periodSeconds: 1
",
        ),
    );
    let [late, web, sick, slow, closed] =
        ["late", "web", "sick", "slow", "closed"].map(|n| cluster.static_name(n));

    // Before their files exist, `late` runs unready and `slow` runs unstarted.
    let (mut late_unready, mut slow_unstarted) = (None, None);
    cluster.wait_for(
        "late running unready and slow running unstarted",
        Duration::from_secs(90),
        |pods| {
            if let Some(p) = find_pod(pods, &late).filter(|p| {
                running(p, "main")
                    && container_status(p, "main")["ready"] == false
                    && container_status(p, "main")["started"] == true
            }) {
                late_unready.get_or_insert_with(|| p.clone());
            }
            if let Some(p) = find_pod(pods, &slow)
                .filter(|p| running(p, "main") && container_status(p, "main")["started"] == false)
            {
                slow_unstarted.get_or_insert_with(|| p.clone());
            }
            late_unready.is_some() && slow_unstarted.is_some()
        },
    );
    let late_pod = late_unready.unwrap_or_default();
    for type_ in ["Ready", "ContainersReady"] {
        let c = condition(&late_pod, type_);
        assert_eq!(c["status"], "False", "{type_}: {late_pod}");
        assert_eq!(c["reason"], "ContainersNotReady", "{late_pod}");
        assert_eq!(
            c["message"], "containers with unready status: [main]",
            "{late_pod}"
        );
    }
    let slow_pod = slow_unstarted.unwrap_or_default();
    assert_eq!(
        container_status(&slow_pod, "main")["ready"],
        false,
        "{slow_pod}"
    );
    assert_eq!(
        condition(&slow_pod, "Ready")["status"],
        "False",
        "{slow_pod}"
    );

    // Once the files exist: ready / started, without any restart.
    let pods = cluster.wait_for(
        "late ready and slow started",
        Duration::from_secs(60),
        |pods| {
            let ready = |name: &str| {
                find_pod(pods, name).is_some_and(|p| {
                    condition(p, "Ready")["status"] == "True"
                        && condition(p, "ContainersReady")["status"] == "True"
                })
            };
            ready(&late) && ready(&slow)
        },
    );
    for name in [&late, &slow] {
        let p = find_pod(&pods, name).cloned().unwrap_or_default();
        let status = container_status(&p, "main");
        assert_eq!(status["ready"], true, "{p}");
        assert_eq!(status["started"], true, "{p}");
        assert_eq!(
            status["restartCount"], 0,
            "probe failures before the start restarted {name}: {p}"
        );
    }

    // The failing liveness probe restarts `sick`, which shows its previous run.
    let pods = cluster.wait_for("sick restarted twice", Duration::from_secs(90), |pods| {
        find_pod(pods, &sick).is_some_and(|p| restarts(p, "main") >= 2)
    });
    let sick_pod = find_pod(&pods, &sick).cloned().unwrap_or_default();
    let terminated = &container_status(&sick_pod, "main")["lastState"]["terminated"];
    assert!(terminated["exitCode"].is_i64(), "{sick_pod}");
    assert!(terminated["finishedAt"].is_string(), "{sick_pod}");
    let log = cluster.node.log();
    for line in [
        "Container main failed liveness probe, will be restarted",
        "Liveness probe failed: HTTP probe failed with statuscode: 404",
        "Readiness probe failed: dial tcp ",
    ] {
        assert!(log.contains(line), "the kubelet log lacks {line:?}:\n{log}");
    }

    // Passing probes neither restart nor unready a pod; a failing readiness probe does
    // not restart it.
    let web_pod = find_pod(&pods, &web).cloned().unwrap_or_default();
    assert_eq!(condition(&web_pod, "Ready")["status"], "True", "{web_pod}");
    assert_eq!(restarts(&web_pod, "main"), 0, "{web_pod}");
    let closed_pod = find_pod(&pods, &closed).cloned().unwrap_or_default();
    assert!(running(&closed_pod, "main"), "{closed_pod}");
    assert_eq!(
        condition(&closed_pod, "Ready")["status"],
        "False",
        "{closed_pod}"
    );
    assert_eq!(
        container_status(&closed_pod, "main")["ready"],
        false,
        "{closed_pod}"
    );
    assert_eq!(restarts(&closed_pod, "main"), 0, "{closed_pod}");
    for name in [&late, &slow] {
        let p = find_pod(&pods, name).cloned().unwrap_or_default();
        assert_eq!(restarts(&p, "main"), 0, "{p}");
    }

    for file in [
        "late.yaml",
        "web.yaml",
        "sick.yaml",
        "slow.yaml",
        "closed.yaml",
    ] {
        cluster.remove_manifest(file);
    }
    for name in [&late, &web, &sick, &slow, &closed] {
        cluster.wait_gone(name);
    }
    cluster.assert_no_leftovers();
}
