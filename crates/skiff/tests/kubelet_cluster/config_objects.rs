//! Volumes and environment from the API: a pod mounts a ConfigMap, a Secret and a
//! projected volume (ServiceAccount token, ConfigMap item, downwardAPI), and takes
//! variables from both objects and from the Services; an update of the ConfigMap reaches
//! the mounted file; the token authenticates (TokenReview). A pod whose ConfigMap key is
//! missing gets a FailedMount event and never starts; one whose variable names a missing
//! key waits in CreateContainerConfigError. A Secret too large for its tmpfs is refused
//! with a FailedMount event; a claim bound to a hostPath PersistentVolume is mounted.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{read_container_log, wait_log_line};
use crate::joined::Joined;

/// How long a pod may take to start.
const WAIT: Duration = Duration::from_secs(90);
/// An update reaches volumes within the sync period (1 minute) plus the watch delay.
const UPDATE_WAIT: Duration = Duration::from_secs(120);

fn apply(joined: &Joined, object: &Value) {
    joined.kubectl_stdin(&["apply", "-f", "-"], &object.to_string());
}

fn config_map(greeting: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-config", "namespace": "default"},
        "data": {"greeting": greeting, "mode": "fast"},
    })
}

/// The events of `pod` with `reason`, as `kubectl get events` lists them.
fn events(joined: &Joined, pod: &str, reason: &str) -> Vec<String> {
    let selector = format!("involvedObject.name={pod},reason={reason}");
    joined
        .get(&["events", "--field-selector", &selector])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .collect()
}

fn delete_pods(joined: &Joined, names: &[&str]) {
    let mut args = vec!["delete", "pod", "--timeout=60s", "--ignore-not-found"];
    args.extend_from_slice(names);
    joined.kubectl(&args);
}

/// The pod reading its ConfigMap, Secret, token and variables, and the update of its
/// ConfigMap.
pub fn volumes_and_env_come_from_the_api(joined: &Joined) {
    let node = joined.node_name();
    apply(joined, &config_map("hello"));
    apply(
        joined,
        &json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "app-secret", "namespace": "default"},
            "stringData": {"password": "hunter2"},
        }),
    );
    apply(
        joined,
        &json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "reader", "namespace": "default"},
        }),
    );
    apply(
        joined,
        &json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "app-db", "namespace": "default"},
            "spec": {"ports": [{"name": "sql", "port": 5432}]},
        }),
    );
    let db_ip = joined
        .get(&["service", "app-db"])
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let master_ip = joined
        .get(&["service", "kubernetes"])
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_owned));
    let script = "echo GREETING=$GREETING; echo PASSWORD=$PASSWORD; echo CFG_MODE=$CFG_mode; \
        echo DB=$APP_DB_SERVICE_HOST:$APP_DB_SERVICE_PORT_SQL; \
        echo MASTER=$KUBERNETES_SERVICE_HOST; \
        echo SECRET_FILE=$(cat /secret/password); \
        echo NAMESPACE_FILE=$(cat /projected/namespace); \
        echo MODE_FILE=$(cat /projected/mode); \
        echo TOKEN=$(cat /projected/token); \
        ls -l /secret/..data/password | cut -c1-10 | sed 's/^/SECRET_MODE=/'; \
        grep ' /secret ' /proc/mounts | cut -d' ' -f3 | sed 's/^/SECRET_FS=/'; \
        while true; do echo FILE=$(cat /cfg/greeting.txt); sleep 1; done";
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cfg-reader", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "serviceAccountName": "reader",
            // Its own projected token only: `default` has no kube-root-ca.crt for the
            // admission's token volume.
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": joined.cluster.image,
                "command": ["sh", "-c", script],
                "env": [
                    {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "greeting"}}},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "password"}}},
                    {"name": "ABSENT", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "absent", "optional": true}}},
                ],
                "envFrom": [{"configMapRef": {"name": "app-config"}, "prefix": "CFG_"}],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/cfg"},
                    {"name": "secret", "mountPath": "/secret"},
                    {"name": "projected", "mountPath": "/projected"},
                ],
            }],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "app-config", "items": [{"key": "greeting", "path": "greeting.txt"}]}},
                {"name": "secret", "secret": {"secretName": "app-secret", "defaultMode": 0o400}},
                {"name": "projected", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                    {"configMap": {"name": "app-config", "items": [{"key": "mode", "path": "mode"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                ]}},
            ],
        },
    });
    joined.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    let running = joined.eventually("cfg-reader Running", WAIT, || {
        joined
            .get(&["pod", "cfg-reader"])
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let log = wait_log_line(&running, "app", 0, "FILE=hello");
    let line = |key: &str| {
        log.lines()
            .find_map(|l| l.split_once(&format!(" {key}=")).map(|(_, v)| v.to_owned()))
            .unwrap_or_else(|| panic!("no {key}= in the log:\n{log}"))
    };
    assert_eq!(line("GREETING"), "hello");
    assert_eq!(line("PASSWORD"), "hunter2");
    assert_eq!(line("CFG_MODE"), "fast");
    assert_eq!(line("DB"), format!("{db_ip}:5432"));
    if let Some(master_ip) = master_ip {
        assert_eq!(line("MASTER"), master_ip);
    }
    assert_eq!(line("SECRET_FILE"), "hunter2");
    assert_eq!(line("SECRET_MODE"), "-r--------");
    assert_eq!(line("SECRET_FS"), "tmpfs");
    assert_eq!(line("NAMESPACE_FILE"), "default");
    assert_eq!(line("MODE_FILE"), "fast");
    let token = line("TOKEN");
    assert!(token.len() > 20, "token {token:?}");

    // The token authenticates as the pod's service account.
    let review = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    });
    let reviewed: Value = serde_json::from_str(
        &joined.kubectl_stdin(&["create", "-f", "-", "-o", "json"], &review.to_string()),
    )
    .expect("TokenReview answer");
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:default:reader"
    );

    // An update of the ConfigMap lands in the volume.
    apply(joined, &config_map("bonjour"));
    joined.eventually("the new greeting in the volume", UPDATE_WAIT, || {
        read_container_log(&running, "app", 0)
            .contains("FILE=bonjour")
            .then_some(())
    });
    delete_pods(joined, &["cfg-reader"]);
}

/// A missing ConfigMap key: in a volume, FailedMount and no container; in a variable,
/// CreateContainerConfigError. Other pods are not disturbed.
pub fn missing_config_map_keys_keep_pods_waiting(joined: &Joined) {
    let node = joined.node_name();
    let pod = |name: &str, container: Value, volumes: Value| {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [container],
                "volumes": volumes,
            },
        })
    };
    let sleeper = |extra: Value| {
        let mut c = json!({
            "name": "app",
            "image": joined.cluster.image,
            "command": ["sleep", "3600"],
        });
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        c
    };
    let volume_pod = pod(
        "cfg-missing-key",
        sleeper(json!({"volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]})),
        json!([{"name": "cfg", "configMap": {"name": "app-config", "items": [{"key": "nope", "path": "nope"}]}}]),
    );
    let env_pod = pod(
        "env-missing-key",
        sleeper(
            json!({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "nope"}}}]}),
        ),
        json!([]),
    );
    joined.kubectl_stdin(&["create", "-f", "-"], &volume_pod.to_string());
    joined.kubectl_stdin(&["create", "-f", "-"], &env_pod.to_string());

    let mount_failures = joined.eventually("the FailedMount event", WAIT, || {
        Some(events(joined, "cfg-missing-key", "FailedMount")).filter(|e| !e.is_empty())
    });
    assert!(
        mount_failures.iter().any(|m| m
            == "MountVolume.SetUp failed for volume \"cfg\" : configmap references non-existent config key: nope"),
        "{mount_failures:?}"
    );
    let waiting = joined
        .get(&["pod", "cfg-missing-key"])
        .expect("cfg-missing-key in the API");
    assert_eq!(waiting["status"]["phase"], "Pending", "{waiting}");
    let state = &waiting["status"]["containerStatuses"][0]["state"];
    assert_eq!(state["waiting"]["reason"], "ContainerCreating", "{waiting}");

    let config_error = joined.eventually("CreateContainerConfigError", WAIT, || {
        joined.get(&["pod", "env-missing-key"]).filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "CreateContainerConfigError"
        })
    });
    assert_eq!(
        config_error["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        "couldn't find key nope in ConfigMap default/app-config"
    );

    // Once the key exists, the volume pod starts.
    apply(
        joined,
        &json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "app-config", "namespace": "default"},
            "data": {"greeting": "bonjour", "mode": "fast", "nope": "now-here"},
        }),
    );
    joined.eventually("cfg-missing-key Running", UPDATE_WAIT, || {
        joined
            .get(&["pod", "cfg-missing-key"])
            .filter(|p| p["status"]["phase"] == "Running")
    });
    delete_pods(joined, &["cfg-missing-key", "env-missing-key"]);
    joined.kubectl(&[
        "delete",
        "configmap/app-config",
        "secret/app-secret",
        "serviceaccount/reader",
        "service/app-db",
    ]);
}

/// A Secret larger than the tmpfs of its volume (sized by the pod's memory limit): a
/// FailedMount event that says so, and no container.
pub fn secret_too_large_for_its_volume_is_refused(joined: &Joined) {
    let node = joined.node_name();
    // `create`, not `apply`: the last-applied annotation could not hold it.
    joined.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "big-secret", "namespace": "default"},
            "stringData": {"blob": "x".repeat(300 * 1024)},
        })
        .to_string(),
    );
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big-secret-reader", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": joined.cluster.image,
                "command": ["sleep", "3600"],
                "resources": {"limits": {"memory": "128Ki"}},
                "volumeMounts": [{"name": "s", "mountPath": "/s"}],
            }],
            "volumes": [{"name": "s", "secret": {"secretName": "big-secret"}}],
        },
    });
    joined.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    let failures = joined.eventually("the FailedMount event of the big secret", WAIT, || {
        Some(events(joined, "big-secret-reader", "FailedMount")).filter(|e| !e.is_empty())
    });
    assert!(
        failures.iter().any(|m| m.starts_with(
            "MountVolume.SetUp failed for volume \"s\" : secret default/big-secret is too large for its memory-backed volume: 307200 bytes of data"
        )),
        "{failures:?}"
    );
    let waiting = joined.get(&["pod", "big-secret-reader"]).expect("the pod");
    assert_eq!(waiting["status"]["phase"], "Pending", "{waiting}");
    delete_pods(joined, &["big-secret-reader"]);
    joined.kubectl(&["delete", "secret/big-secret"]);
}

/// A claim bound to a hostPath PersistentVolume mounts the volume's path.
pub fn claim_of_a_host_path_volume_is_mounted(joined: &Joined) {
    let node = joined.node_name();
    let dir = tempfile::tempdir().expect("a host directory");
    std::fs::write(dir.path().join("hello.txt"), "from-the-pv").expect("write to the volume");
    apply(
        joined,
        &json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Mi"}},
                "volumeName": "data-pv",
                "storageClassName": "",
            },
        }),
    );
    let claim_uid = joined
        .get(&["pvc", "data"])
        .and_then(|c| c["metadata"]["uid"].as_str().map(str::to_owned))
        .expect("the claim's uid");
    apply(
        joined,
        &json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "data-pv"},
            "spec": {
                "capacity": {"storage": "1Mi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": dir.path().display().to_string(), "type": "Directory"},
                "claimRef": {"namespace": "default", "name": "data", "uid": claim_uid},
            },
        }),
    );
    // No PV controller binds it: the claim is marked Bound as the controller would.
    joined.kubectl(&[
        "patch",
        "pvc",
        "data",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Bound"}}"#,
    ]);
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "claim-reader", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": joined.cluster.image,
                "command": ["sh", "-c", "echo CLAIM=$(cat /data/hello.txt); echo written > /data/out.txt; sleep 3600"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    });
    joined.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    let running = joined.eventually("claim-reader Running", WAIT, || {
        joined
            .get(&["pod", "claim-reader"])
            .filter(|p| p["status"]["phase"] == "Running")
    });
    wait_log_line(&running, "app", 0, "CLAIM=from-the-pv");
    joined.eventually("the pod's write on the host", WAIT, || {
        std::fs::read_to_string(dir.path().join("out.txt"))
            .ok()
            .filter(|s| s.trim() == "written")
    });
    delete_pods(joined, &["claim-reader"]);
    assert!(
        dir.path().join("hello.txt").exists(),
        "the volume's data outlives the pod"
    );
    joined.kubectl(&["delete", "pvc/data", "pv/data-pv", "--wait=false"]);
}
