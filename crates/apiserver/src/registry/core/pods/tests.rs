use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::registry::printers::now;
use serde_json::json;

use super::*;

fn pod(value: Value) -> Pod {
    serde_json::from_value(value).unwrap_or_default()
}

fn ago(seconds: i64) -> String {
    let at = now()
        .checked_sub(SignedDuration::from_secs(seconds))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn status_cells(p: &Pod) -> (Value, Value, Value) {
    let row = Pods.row(p);
    (row[1].clone(), row[2].clone(), row[3].clone())
}

#[test]
fn columns_match_the_row_and_upstream_names() {
    let columns = Pods.columns();
    let names: Vec<&str> = columns.iter().map(|c| &*c.name).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    let row = Pods.row(&pod(
        json!({"metadata": {"name": "p", "creationTimestamp": ago(300)}}),
    ));
    assert_eq!(row.len(), names.len());
    assert_eq!(row[0], "p");
    assert_eq!(row[4], "5m");
    assert_eq!(
        row[5..],
        [
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn status_follows_the_containers() {
    let creating = pod(json!({
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Pending", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 0, "image": "", "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}}
        ]}
    }));
    assert_eq!(
        status_cells(&creating),
        (json!("1/2"), json!("ContainerCreating"), json!("0"))
    );

    let crashing = pod(json!({
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 2, "image": "", "imageID": "",
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(300)}}}
        ]}
    }));
    assert_eq!(
        status_cells(&crashing),
        (json!("0/1"), json!("CrashLoopBackOff"), json!("2 (5m ago)"))
    );

    let completed = pod(json!({
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "image": "", "imageID": "",
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]}
    }));
    assert_eq!(status_cells(&completed).1, "Completed");

    let signalled = pod(json!({
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Failed", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "image": "", "imageID": "",
             "state": {"terminated": {"exitCode": 137, "signal": 9}}}
        ]}
    }));
    assert_eq!(status_cells(&signalled).1, "Signal:9");
}

#[test]
fn init_containers_and_deletion_show_in_the_status() {
    let init = pod(json!({
        "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "ready": false, "restartCount": 0, "image": "", "imageID": "", "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "ready": false, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {}}}
        ]}
    }));
    assert_eq!(status_cells(&init).1, "Init:1/2");
    let failed_init = pod(json!({
        "spec": {"initContainers": [{"name": "i1"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "ready": false, "restartCount": 3, "image": "", "imageID": "", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        ]}
    }));
    assert_eq!(status_cells(&failed_init).1, "Init:CrashLoopBackOff");
    let terminating = pod(json!({
        "metadata": {"deletionTimestamp": ago(1)},
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Running"}
    }));
    assert_eq!(status_cells(&terminating).1, "Terminating");
}

#[test]
fn new_pods_start_pending_with_their_qos_class() {
    let mut p = pod(json!({
        "spec": {"containers": [{"name": "a", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                 "terminationGracePeriodSeconds": -5},
        "status": {"phase": "Running", "podIP": "1.2.3.4"}
    }));
    Pods.prepare_for_create(&mut p);
    let status = p.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Guaranteed"));
    assert_eq!(status.pod_ip, None);
    assert_eq!(
        p.spec.and_then(|s| s.termination_grace_period_seconds),
        Some(1)
    );
}

#[test]
fn graceful_delete_as_upstream() {
    let scheduled = pod(
        json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30, "containers": []},
                              "status": {"phase": "Running"}}),
    );
    assert_eq!(Pods.graceful_delete(&scheduled, None), Some(30));
    assert_eq!(Pods.graceful_delete(&scheduled, Some(5)), Some(5));
    assert_eq!(Pods.graceful_delete(&scheduled, Some(0)), None);
    assert_eq!(Pods.graceful_delete(&scheduled, Some(-3)), Some(1));
    let unscheduled = pod(json!({"spec": {"terminationGracePeriodSeconds": 30, "containers": []}}));
    assert_eq!(Pods.graceful_delete(&unscheduled, None), None);
    let done =
        pod(json!({"spec": {"nodeName": "n", "containers": []}, "status": {"phase": "Succeeded"}}));
    assert_eq!(Pods.graceful_delete(&done, Some(10)), None);
}

#[test]
fn selectable_fields_include_node_and_phase() {
    let p = pod(json!({"spec": {"nodeName": "n1", "containers": []},
                       "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}}));
    let fields = Pods.selectable_fields(&p);
    let get = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("spec.nodeName"), Some("n1"));
    assert_eq!(get("status.phase"), Some("Running"));
    assert_eq!(get("status.podIP"), Some("10.0.0.1"));
    // Accepted as a label but not set, as upstream.
    assert_eq!(get("status.podIPs"), None);
    assert_eq!(get("spec.hostNetwork"), Some("false"));
}

#[test]
fn core_kinds_are_registered_with_upstream_names() {
    let registry = crate::registry::Registry::builtin();
    let pods = registry.lookup("", "v1", "pods").map(|k| k.info().clone());
    assert_eq!(
        pods.map(|i| (i.short_names, i.categories, i.namespaced)),
        Some((vec!["po".to_owned()], vec!["all".to_owned()], true))
    );
    let nodes = registry
        .lookup("", "v1", "nodes")
        .map(|k| k.info().namespaced);
    assert_eq!(nodes, Some(false));
    for plural in [
        "namespaces",
        "services",
        "endpoints",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "events",
        "limitranges",
        "resourcequotas",
        "persistentvolumes",
        "persistentvolumeclaims",
    ] {
        assert!(registry.lookup("", "v1", plural).is_some(), "{plural}");
    }
}
