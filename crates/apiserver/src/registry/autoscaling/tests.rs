//! horizontalpodautoscalers through the REST layer in both versions: creates in one
//! version read in the other, the v2 -> v1 -> v2 round trip, lists and watches of v1,
//! defaults, validation messages, the status rules, table rows and discovery.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::testing::{Server, causes};

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

fn v2_hpa(name: &str) -> Value {
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "annotations": {"team": "web"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 2,
            "maxReplicas": 10,
            "metrics": [
                {"type": "Pods", "pods": {"metric": {"name": "qps"},
                  "target": {"type": "AverageValue", "averageValue": "10"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                  "target": {"type": "Utilization", "averageUtilization": 60}}},
            ],
            "behavior": {"scaleUp": {"stabilizationWindowSeconds": 30}},
        },
    })
}

/// `object` without the fields the server sets on every write.
fn without_server_fields(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    object
}

#[tokio::test]
async fn v2_objects_read_as_v1_and_round_trip_losslessly() {
    let server = Server::start().await;
    let created = server.send("POST", V2, &v2_hpa("web")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    // v2 defaults: the behavior's unset fields are filled in.
    assert_eq!(
        created.body["spec"]["behavior"]["scaleDown"]["policies"],
        json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
    );
    assert_eq!(created.body["status"], json!({"desiredReplicas": 0}));

    // The controller's status, through v2 /status.
    let mut with_status = created.body.clone();
    with_status["status"] = json!({
        "currentReplicas": 3,
        "desiredReplicas": 4,
        "currentMetrics": [
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12"}}},
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 70, "averageValue": "350m"}}},
        ],
        "conditions": [{"type": "AbleToScale", "status": "True",
                        "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "ReadyForNewScale"}],
    });
    let updated = server
        .send("PUT", &format!("{V2}/web/status"), &with_status)
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.body);
    let original = without_server_fields(updated.body.clone());

    // Read as v1: upstream's fields, the rest in its annotations.
    let v1 = server.send("GET", &format!("{V1}/web"), &Value::Null).await;
    assert_eq!(v1.status, StatusCode::OK, "{}", v1.body);
    let body = &v1.body;
    assert_eq!(body["apiVersion"], "autoscaling/v1");
    assert_eq!(
        body["spec"],
        json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 10,
            "targetCPUUtilizationPercentage": 60,
        })
    );
    assert_eq!(
        body["status"],
        json!({"currentReplicas": 3, "desiredReplicas": 4, "currentCPUUtilizationPercentage": 70})
    );
    let annotations = &body["metadata"]["annotations"];
    assert_eq!(annotations["team"], "web");
    assert_eq!(
        annotations["autoscaling.alpha.kubernetes.io/metrics"],
        r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
    );
    assert_eq!(
        annotations["autoscaling.alpha.kubernetes.io/current-metrics"],
        r#"[{"type":"Pods","pods":{"metricName":"qps","currentAverageValue":"12"}},{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":70,"currentAverageValue":"350m"}}]"#
    );
    assert_eq!(
        annotations["autoscaling.alpha.kubernetes.io/conditions"],
        r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"ReadyForNewScale"}]"#
    );
    assert_eq!(
        annotations["autoscaling.alpha.kubernetes.io/behavior"],
        r#"{"ScaleUp":{"StabilizationWindowSeconds":30,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
    );

    // Written back as v1 unchanged, it reads as the same v2 object.
    let put = server.send("PUT", &format!("{V1}/web"), &v1.body).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
    assert_eq!(put.body["apiVersion"], "autoscaling/v1");
    let v2 = server.send("GET", &format!("{V2}/web"), &Value::Null).await;
    assert_eq!(without_server_fields(v2.body), original);

    // A v1 write without the status annotations keeps the status (PrepareForUpdate); one
    // that changes the spec changes it.
    let mut edited = put.body.clone();
    if let Some(map) = edited["metadata"]["annotations"].as_object_mut() {
        map.remove("autoscaling.alpha.kubernetes.io/conditions");
        map.remove("autoscaling.alpha.kubernetes.io/current-metrics");
    }
    edited["spec"]["maxReplicas"] = json!(12);
    let put = server.send("PUT", &format!("{V1}/web"), &edited).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
    let v2 = server.send("GET", &format!("{V2}/web"), &Value::Null).await;
    assert_eq!(v2.body["spec"]["maxReplicas"], 12);
    assert_eq!(v2.body["status"], original["status"]);
    assert_eq!(v2.body["spec"]["metrics"], original["spec"]["metrics"]);
    assert_eq!(v2.body["metadata"]["annotations"], json!({"team": "web"}));
}

#[tokio::test]
async fn v1_objects_default_convert_list_and_watch() {
    let server = Server::start().await;
    let v1 = json!({
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api"},
        "spec": {"scaleTargetRef": {"kind": "ReplicationController", "name": "api"}, "maxReplicas": 5},
        "status": {"currentReplicas": 9, "desiredReplicas": 9},
    });
    let created = server.send("POST", V1, &v1).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    // minReplicas defaults to 1, the implicit 80% CPU target shows, the status is dropped.
    assert_eq!(created.body["spec"]["minReplicas"], 1);
    assert_eq!(created.body["spec"]["targetCPUUtilizationPercentage"], 80);
    assert_eq!(
        created.body["status"],
        json!({"currentReplicas": 0, "desiredReplicas": 0})
    );
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    let v2 = server.send("GET", &format!("{V2}/api"), &Value::Null).await;
    assert_eq!(v2.status, StatusCode::OK, "{}", v2.body);
    assert_eq!(v2.body["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2.body["spec"],
        json!({
            "scaleTargetRef": {"kind": "ReplicationController", "name": "api"},
            "minReplicas": 1,
            "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 80}}}],
        })
    );
    assert_eq!(v2.body["metadata"].get("annotations"), None);

    // A change made through v2 shows up in v1 lists and watches as v1 objects.
    let mut changed = v2.body.clone();
    changed["spec"]["metrics"] = json!([
        {"type": "Resource", "resource": {"name": "memory",
          "target": {"type": "AverageValue", "averageValue": "100Mi"}}}
    ]);
    let put = server.send("PUT", &format!("{V2}/api"), &changed).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);

    let list = server.send("GET", V1, &Value::Null).await;
    assert_eq!(list.body["apiVersion"], "autoscaling/v1");
    let item = &list.body["items"][0];
    assert_eq!(item["spec"].get("targetCPUUtilizationPercentage"), None);
    assert_eq!(
        item["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#
    );

    let watch = server
        .send(
            "GET",
            &format!("{V1}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
            &Value::Null,
        )
        .await;
    assert_eq!(watch.status, StatusCode::OK);
    let text = match &watch.body {
        Value::String(text) => text.clone(),
        one => one.to_string(),
    };
    let events: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect();
    assert_eq!(events.len(), 1, "{text}");
    assert_eq!(events[0]["type"], "MODIFIED");
    let object = &events[0]["object"];
    assert_eq!(object["apiVersion"], "autoscaling/v1");
    assert_eq!(object["spec"]["minReplicas"], 1);
    assert_eq!(
        object["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"],
        item["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]
    );
}

#[tokio::test]
async fn validation_status_rules_tables_and_discovery() {
    let server = Server::start().await;
    // Upstream validates the internal form: v1 requests get v2's messages and paths.
    let bad = json!({
        "metadata": {"name": "bad"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                 "minReplicas": 0, "maxReplicas": 0, "targetCPUUtilizationPercentage": 0},
    });
    let reply = server.send("POST", V1, &bad).await;
    assert_eq!(
        causes(&reply),
        [
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
        ]
    );
    let bad = json!({
        "metadata": {"name": "bad"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": ""}, "minReplicas": 4, "maxReplicas": 3},
    });
    let reply = server.send("POST", V2, &bad).await;
    assert_eq!(
        causes(&reply),
        [
            "spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`",
            "spec.scaleTargetRef.name: Required value",
        ]
    );

    let good = json!({
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5},
    });
    let created = server.send("POST", V2, &good).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    // /status changes only the status, and checks its counts.
    let mut status = created.body.clone();
    status["spec"]["maxReplicas"] = json!(50);
    status["status"] = json!({"currentReplicas": 2, "desiredReplicas": -1});
    let reply = server
        .send("PUT", &format!("{V2}/web/status"), &status)
        .await;
    assert_eq!(
        causes(&reply),
        ["status.desiredReplicas: Invalid value: -1: must be greater than or equal to 0"]
    );
    status["status"]["desiredReplicas"] = json!(3);
    let reply = server
        .send("PUT", &format!("{V2}/web/status"), &status)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["spec"]["maxReplicas"], 5);
    assert_eq!(reply.body["status"]["currentReplicas"], 2);

    // Both versions print upstream's columns and row.
    for uri in [V2, V1] {
        let table = server.table(uri).await;
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Reference",
                "Targets",
                "MinPods",
                "MaxPods",
                "Replicas",
                "Age"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"]
                .as_array()
                .map(|c| c[..6].to_vec()),
            Some(vec![
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: <unknown>/80%"),
                json!("1"),
                json!(5),
                json!(2),
            ]),
            "{uri}"
        );
    }

    // Discovery: v2 is preferred; both versions list hpa with /status.
    let group = discovery("/apis/autoscaling").await;
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
    for version in ["v1", "v2"] {
        let list = discovery(&format!("/apis/autoscaling/{version}")).await;
        let names: Vec<&str> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status"
            ]
        );
        assert_eq!(list["resources"][0]["shortNames"], json!(["hpa"]));
        assert_eq!(list["resources"][0]["categories"], json!(["all"]));
    }
}

/// A discovery document of the built-in registry, as JSON.
async fn discovery(uri: &str) -> Value {
    use tower::ServiceExt;
    let registry = crate::registry::Registry::builtin();
    let app: axum::Router = crate::discovery::router(
        crate::registry::LiveRegistry::shared(registry),
        crate::discovery::testing::addresses(),
    );
    let request = axum::http::Request::builder()
        .uri(uri)
        .header("accept", "application/json")
        .body(axum::body::Body::empty())
        .expect("request");
    let response = app.oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK, "{uri}");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    serde_json::from_slice(&bytes).expect("JSON")
}
