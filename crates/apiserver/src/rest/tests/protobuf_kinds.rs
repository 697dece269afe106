//! Protobuf through the REST layer for the kinds of storage.k8s.io, networking.k8s.io,
//! rbac.authorization.k8s.io, admissionregistration.k8s.io, flowcontrol.apiserver.k8s.io
//! and autoscaling (v2, read back through v1): a create sent and answered in protobuf, and
//! a protobuf GET that reads the same object back.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use skiff_api::protobuf;
use tower::ServiceExt;

use crate::registry::testing::Server;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Sends `body` (protobuf-encoded when given) accepting protobuf; the status and the
/// decoded answer.
async fn exchange(
    server: &Server,
    method: &str,
    uri: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", PROTOBUF);
    let body = match body {
        Some(object) => {
            request = request.header("content-type", PROTOBUF);
            Body::from(protobuf::encode(object).expect("encodable"))
        }
        None => Body::empty(),
    };
    let response = server
        .app
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    assert_eq!(response.headers()["content-type"], PROTOBUF, "{uri}");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, protobuf::decode(&bytes).expect("a protobuf answer"))
}

#[tokio::test]
async fn recent_groups_speak_protobuf() {
    let server = Server::start().await;
    let cases = [
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "fast"},
                "provisioner": "example.com/fast",
                "parameters": {"type": "ssd"},
                "reclaimPolicy": "Retain",
                "allowVolumeExpansion": true,
            }),
            "/parameters/type",
            json!("ssd"),
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
            json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "web"},
                "spec": {
                    "podSelector": {"matchLabels": {"app": "web"}},
                    "ingress": [{"ports": [{"protocol": "TCP", "port": 8080}]}],
                    "policyTypes": ["Ingress"],
                },
            }),
            "/spec/ingress/0/ports/0/port",
            json!(8080),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
            }),
            "/rules/0/verbs",
            json!(["get", "list"]),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "widgets"},
                "webhooks": [{
                    "name": "check.widgets.example.com",
                    "clientConfig": {"url": "https://hooks.example.com/check"},
                    "rules": [{
                        "apiGroups": ["example.com"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["widgets"],
                    }],
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }],
            }),
            "/webhooks/0/clientConfig/url",
            json!("https://hooks.example.com/check"),
        ),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            json!({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "PriorityLevelConfiguration",
                "metadata": {"name": "batch"},
                "spec": {
                    "type": "Limited",
                    "limited": {"nominalConcurrencyShares": 10, "limitResponse": {"type": "Reject"}},
                },
            }),
            "/spec/limited/nominalConcurrencyShares",
            json!(10),
        ),
        (
            "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            json!({
                "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1,
                    "maxReplicas": 5,
                    "metrics": [{"type": "Resource", "resource": {
                        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80},
                    }}],
                },
            }),
            "/spec/metrics/0/resource/target/averageUtilization",
            json!(80),
        ),
    ];
    for (collection, object, pointer, expected) in cases {
        let (status, created) = exchange(&server, "POST", collection, Some(&object)).await;
        assert_eq!(status, StatusCode::CREATED, "{collection}: {created}");
        assert_eq!(created["kind"], object["kind"], "{created}");
        assert_eq!(created["apiVersion"], object["apiVersion"], "{created}");
        assert_eq!(created.pointer(pointer), Some(&expected), "{created}");
        let uri = format!(
            "{collection}/{}",
            object["metadata"]["name"].as_str().unwrap()
        );
        let (status, got) = exchange(&server, "GET", &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {got}");
        assert_eq!(got, created, "{uri}");
    }

    // The same HorizontalPodAutoscaler through autoscaling/v1, in protobuf.
    let uri = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web";
    let (status, v1) = exchange(&server, "GET", uri, None).await;
    assert_eq!(status, StatusCode::OK, "{v1}");
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
    assert_eq!(v1["spec"]["maxReplicas"], 5);
}
