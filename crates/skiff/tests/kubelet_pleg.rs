//! End-to-end: the PLEG brings a container's exit into the pod status without waiting for
//! the periodic sync (1 min) — through CRI container events on the embedded runtime, and
//! through the 1 s relist on containerd 1.6, which lacks GetContainerEvents. The kubelet
//! log says which mode the PLEG is in, and `/healthz` includes its health. Run as root.

mod common;

use std::time::{Duration, SystemTime};

use common::{Cluster, Runtime, container_status, pod_phase};

common::node_cases! {
    container_exit_reaches_the_pod_status,
}

/// Longest accepted time from the container's last log line to its exit in `/pods`:
/// far below the 1 min periodic sync, so only the PLEG can have reported it. Typical:
/// ~0.1-0.3 s with events, ~0.5-1.5 s with the relist (debug build, loaded machine).
const EXIT_REPORTED_WITHIN: Duration = Duration::from_secs(4);

fn container_exit_reaches_the_pod_status(cluster: Cluster) {
    let runtime = cluster.runtime;
    cluster.wait_log(match runtime {
        Runtime::Embedded => "PLEG is event-driven (CRI GetContainerEvents)",
        Runtime::Containerd => {
            "PLEG relists: the runtime does not implement CRI GetContainerEvents"
        }
    });

    let healthz = ureq::get(&format!(
        "http://127.0.0.1:{}/healthz?verbose",
        cluster.node.port()
    ))
    .call()
    .and_then(|mut r| r.body_mut().read_to_string())
    .expect("GET /healthz?verbose");
    assert!(healthz.contains("[+]pleg ok"), "{healthz}");

    cluster.write_manifest(
        "exiter.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: exiter}}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {}\n    command: [sh, -c, 'sleep 2; echo exiting; exit 7']\n",
            cluster.image
        ),
    );
    let name = cluster.static_name("exiter");
    let running = cluster.wait_running(&name);
    let mut seen_at = SystemTime::now();
    let pods = cluster.wait_for(
        "the exit in the pod status",
        Duration::from_secs(60),
        |pods| {
            seen_at = SystemTime::now();
            common::find_pod(pods, &name)
                .is_some_and(|p| container_status(p, "main")["state"]["terminated"].is_object())
        },
    );
    let pod = common::find_pod(&pods, &name).cloned().unwrap_or_default();
    let terminated = &container_status(&pod, "main")["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 7, "{pod}");
    assert_eq!(terminated["reason"], "Error", "{pod}");
    assert_eq!(pod_phase(&pod), "Failed", "{pod}");

    let line = common::wait_log_line(&running, "main", 0, "exiting");
    let logged_at = line
        .lines()
        .find(|l| l.ends_with("exiting"))
        .and_then(|l| l.split(' ').next())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(SystemTime::from)
        .expect("a timestamped log line");
    let delay = seen_at.duration_since(logged_at).unwrap_or_default();
    eprintln!("{runtime:?}: the exit reached /pods {delay:?} after the last log line");
    assert!(
        delay < EXIT_REPORTED_WITHIN,
        "the exit took {delay:?} to reach the pod status; kubelet log:\n{}",
        cluster.node.log()
    );

    cluster.remove_manifest("exiter.yaml");
    cluster.wait_gone(&name);
    cluster.assert_no_leftovers();
}
