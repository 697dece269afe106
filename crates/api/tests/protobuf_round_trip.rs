//! Round trips of real objects through Skiff's protobuf transcoder, checked against an
//! independent implementation: JSON → Skiff's protobuf → prost (k8s-pb's generated
//! structs) → protobuf → Skiff's JSON must give back the same JSON. A field with a wrong
//! tag or shape in the table lands elsewhere (or nowhere) in prost's struct and breaks
//! the equality.

use prost::Message;
use serde_json::{Value, json};
use skiff_api::protobuf;

/// `object` → Skiff → prost `T` → prost's bytes → Skiff; returns the final JSON.
fn through_prost<T: Message + Default>(object: &Value) -> Value {
    let encoded = protobuf::encode(object).expect("Skiff encodes");
    assert_eq!(&encoded[..4], b"k8s\0");
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&encoded[4..])
        .expect("prost decodes the envelope");
    let type_meta = unknown.type_meta.clone().unwrap_or_default();
    assert_eq!(
        type_meta.api_version.as_deref(),
        object["apiVersion"].as_str()
    );
    assert_eq!(type_meta.kind.as_deref(), object["kind"].as_str());
    let typed = T::decode(unknown.raw()).expect("prost decodes the object");
    let again = k8s_pb::apimachinery::pkg::runtime::Unknown {
        raw: Some(typed.encode_to_vec()),
        ..unknown
    };
    let mut bytes = b"k8s\0".to_vec();
    bytes.extend(again.encode_to_vec());
    protobuf::decode(&bytes).expect("Skiff decodes prost's bytes")
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": "default",
        "uid": "6f1c1b9a-2d4e-4a8e-9a51-0c3c7b1f2e10",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-05-01T10:20:30Z",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "", "deployment.kubernetes.io/revision": "2"},
        "ownerReferences": [{
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-7d4b9c",
            "uid": "0b9f6c1e-1111-2222-3333-444455556666",
            "controller": true,
            "blockOwnerDeletion": true
        }],
        "finalizers": ["example.com/cleanup"],
        "managedFields": [{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2024-05-01T10:20:30Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
        }]
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata("web-7d4b9c-x2k4p"),
        "spec": {
            "volumes": [
                {"name": "data", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                {"name": "config", "configMap": {"name": "web", "defaultMode": 420, "items": [{"key": "a", "path": "a.txt"}]}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}
            ],
            "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}],
            "containers": [{
                "name": "main",
                "image": "registry.example/web:1.0",
                "args": ["--port", "8080", ""],
                "workingDir": "/srv",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "MODE", "value": "prod"},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
                    {"name": "LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}
                ],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}],
                "livenessProbe": {
                    "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                    "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
                    "successThreshold": 1, "failureThreshold": 3
                },
                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
                "securityContext": {
                    "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": "node-1",
            "hostNetwork": true,
            "securityContext": {"fsGroup": 2000, "supplementalGroups": [1, 2, 3], "sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
            }}},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T10:21:00Z"}],
            "hostIP": "10.0.0.5",
            "podIP": "10.244.0.7",
            "podIPs": [{"ip": "10.244.0.7"}],
            "startTime": "2024-05-01T10:20:31Z",
            "containerStatuses": [{
                "name": "main",
                "state": {"running": {"startedAt": "2024-05-01T10:20:40Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2024-05-01T10:20:32Z", "finishedAt": "2024-05-01T10:20:39Z"}},
                "ready": true,
                "restartCount": 1,
                "image": "registry.example/web:1.0",
                "imageID": "registry.example/web@sha256:0123",
                "containerID": "containerd://abc",
                "started": true
            }],
            "qosClass": "Burstable"
        }
    })
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata("web"),
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "nginx", "resources": {}}]}
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "paused": true
        },
        "status": {
            "observedGeneration": 3,
            "replicas": 2,
            "conditions": [{
                "type": "Available", "status": "True",
                "lastUpdateTime": "2024-05-01T10:21:00Z", "lastTransitionTime": "2024-05-01T10:21:00Z",
                "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."
            }]
        }
    })
}

fn service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata("web"),
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080},
                {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics"}
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"],
            "type": "NodePort",
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "externalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"
        },
        "status": {"loadBalancer": {}}
    })
}

fn secret() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata("creds"),
        "type": "kubernetes.io/tls",
        "immutable": false,
        "data": {"tls.crt": "AAEC/w==", "tls.key": "", "ca.crt": "aGVsbG8="},
    })
}

#[test]
fn a_full_pod_round_trips() {
    let pod = pod();
    assert_eq!(through_prost::<k8s_pb::api::core::v1::Pod>(&pod), pod);
}

#[test]
fn a_deployment_round_trips() {
    let deployment = deployment();
    assert_eq!(
        through_prost::<k8s_pb::api::apps::v1::Deployment>(&deployment),
        deployment
    );
}

#[test]
fn a_service_round_trips() {
    let service = service();
    assert_eq!(
        through_prost::<k8s_pb::api::core::v1::Service>(&service),
        service
    );
}

#[test]
fn a_secret_round_trips() {
    let secret = secret();
    assert_eq!(
        through_prost::<k8s_pb::api::core::v1::Secret>(&secret),
        secret
    );
}

#[test]
fn lists_status_and_delete_options_round_trip() {
    // Items carry no TypeMeta in protobuf (nor in upstream's JSON lists).
    let mut item = pod();
    item.as_object_mut().unwrap().remove("apiVersion");
    item.as_object_mut().unwrap().remove("kind");
    let list = json!({
        "apiVersion": "v1",
        "kind": "PodList",
        "metadata": {"resourceVersion": "99", "continue": "abc", "remainingItemCount": 4},
        "items": [item, {"metadata": {"name": "bare"}}]
    });
    assert_eq!(through_prost::<k8s_pb::api::core::v1::PodList>(&list), list);
    let status = json!({
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": "pods \"x\" not found",
        "reason": "NotFound",
        "details": {"name": "x", "kind": "pods", "causes": [{"reason": "FieldValueInvalid", "field": "spec"}]},
        "code": 404
    });
    assert_eq!(
        through_prost::<k8s_pb::apimachinery::pkg::apis::meta::v1::Status>(&status),
        status
    );
    let options = json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u-1", "resourceVersion": "7"},
        "dryRun": ["All"]
    });
    assert_eq!(
        through_prost::<k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions>(&options),
        options
    );
}

/// What a Go client sends (every non-pointer field, even empty) decodes to what upstream
/// stores: empty strings and zero times dropped, numbers, bools and empty structs kept.
#[test]
fn go_zero_values_decode_as_upstream_json() {
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    let config_map = core::ConfigMap {
        metadata: Some(meta::ObjectMeta {
            name: Some("settings".into()),
            generate_name: Some(String::new()),
            namespace: Some(String::new()),
            creation_timestamp: Some(meta::Time::default()),
            ..Default::default()
        }),
        immutable: None,
        data: [
            ("a".to_owned(), "1".to_owned()),
            ("empty".to_owned(), String::new()),
        ]
        .into(),
        binary_data: [("bin".to_owned(), vec![0u8, 255])].into(),
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }),
        raw: Some(config_map.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    assert_eq!(
        protobuf::decode(&body).unwrap(),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"a": "1", "empty": ""},
            "binaryData": {"bin": "AP8="}
        })
    );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let good = protobuf::encode(&pod()).unwrap();
    for cut in [5, 10, good.len() / 2, good.len() - 1] {
        assert!(protobuf::decode(&good[..cut]).is_err(), "cut at {cut}");
    }
    assert!(
        protobuf::decode(b"{\"kind\":\"Pod\"}")
            .unwrap_err()
            .to_string()
            .starts_with("provided data does not appear to be a protobuf message")
    );
    assert_eq!(
        protobuf::encode(&json!({"apiVersion": "v1", "kind": "Gadget"}))
            .unwrap_err()
            .to_string(),
        r#"no kind "Gadget" is registered for version "v1""#
    );
    let mut garbage = b"k8s\0".to_vec();
    garbage.extend([0x0a, 0x80]);
    assert_eq!(
        protobuf::decode(&garbage).unwrap_err().to_string(),
        "unexpected EOF"
    );
    // Flipping any byte gives an object or an error, never a panic.
    for i in 4..good.len().min(400) {
        let mut flipped = good.clone();
        flipped[i] ^= 0xa5;
        let _ = protobuf::decode(&flipped);
    }
}
