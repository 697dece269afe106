//! APIServices through the REST layer: create and get with defaults, a Local one
//! Available at once, upstream's validation causes, the table, and `/status`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::testing::{Server, causes};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

fn api_service(name: &str, group: &str, version: &str, service: Option<Value>) -> Value {
    let mut spec = json!({
        "group": group,
        "version": version,
        "groupPriorityMinimum": 1000,
        "versionPriority": 15,
    });
    if let Some(service) = service {
        spec["service"] = service;
        spec["insecureSkipTLSVerify"] = json!(true);
    }
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name},
        "spec": spec,
    })
}

#[tokio::test]
async fn apiservices_through_the_rest_layer() {
    let server = Server::start().await;
    // A remote one: the port defaults to 443, a client's status is dropped.
    let mut remote = api_service(
        "v1alpha1.wardle.example.com",
        "wardle.example.com",
        "v1alpha1",
        Some(json!({"namespace": "wardle", "name": "api"})),
    );
    remote["status"] = json!({"conditions": [{"type": "Available", "status": "True"}]});
    let created = server.send("POST", APISERVICES, &remote).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["service"]["port"], 443);
    assert!(
        created
            .body
            .get("status")
            .is_none_or(|s| s.get("conditions").is_none())
    );

    // A local one is Available at once.
    let local = api_service("v1.local.example.com", "local.example.com", "v1", None);
    let created = server.send("POST", APISERVICES, &local).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let got = server
        .send(
            "GET",
            &format!("{APISERVICES}/v1.local.example.com"),
            &Value::Null,
        )
        .await;
    let condition = &got.body["status"]["conditions"][0];
    assert_eq!(condition["type"], "Available");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "Local");
    assert_eq!(
        condition["message"],
        "Local APIServices are always available"
    );

    // Upstream's validation.
    let mut bad = api_service("v1.wrong", "wardle.example.com", "v1", None);
    bad["spec"]["versionPriority"] = json!(1001);
    let reply = server.send("POST", APISERVICES, &bad).await;
    assert_eq!(
        causes(&reply),
        [
            "metadata.name: Invalid value: \"v1.wrong\": must be `spec.version+\".\"+spec.group`: \"v1.wardle.example.com\"",
            "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
        ]
    );

    // /status: the availability controller's write; the spec stays.
    let path = format!("{APISERVICES}/v1alpha1.wardle.example.com/status");
    let mut status = server.send("GET", &path, &Value::Null).await.body;
    status["spec"]["versionPriority"] = json!(99);
    status["status"] = json!({"conditions": [{
        "type": "Available", "status": "False", "reason": "ServiceNotFound",
        "message": "service/api in \"wardle\" is not present",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }]});
    let updated = server.send("PUT", &path, &status).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.body);
    assert_eq!(updated.body["spec"]["versionPriority"], 15);
    let mut maybe = updated.body.clone();
    maybe["status"]["conditions"][0]["status"] = json!("Maybe");
    assert_eq!(
        causes(&server.send("PUT", &path, &maybe).await),
        [
            "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
        ]
    );

    // The table: NAME SERVICE AVAILABLE AGE with upstream's cells.
    let table = server.table(APISERVICES).await;
    let names: Vec<&Value> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, ["Name", "Service", "Available", "Age"]);
    assert_eq!(
        table["columnDefinitions"][1]["description"],
        "The reference to the service that hosts this API endpoint."
    );
    let rows: Vec<Vec<Value>> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].as_array().unwrap()[..3].to_vec())
        .collect();
    assert_eq!(
        rows,
        [
            vec![json!("v1.local.example.com"), json!("Local"), json!("True")],
            vec![
                json!("v1alpha1.wardle.example.com"),
                json!("wardle/api"),
                json!("False (ServiceNotFound)")
            ],
        ]
    );
}
