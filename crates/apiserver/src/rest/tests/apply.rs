//! Server-side apply and managedFields through the REST layer.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::*;

const APPLY: (&str, &str) = ("content-type", "application/apply-patch+yaml");

fn deployment_yaml(replicas: i32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    team: a
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: c
        image: {image}
"
    )
}

async fn apply(app: &Router, manager: &str, extra: &str, body: &str) -> Reply {
    let url = format!("{DEPLOYMENTS}/web?fieldManager={manager}{extra}");
    send_with(app, "PATCH", &url, &[APPLY], body.to_owned()).await
}

/// The (manager, operation) of the entries, sorted by manager.
fn managers(object: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
                    (text("manager"), text("operation"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The configuration without its label.
fn unlabelled(yaml: String) -> String {
    yaml.replace("  labels:\n    team: a\n", "")
}

fn entry<'v>(object: &'v Value, manager: &str) -> &'v Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no {manager} in {object}"))
}

#[tokio::test]
async fn apply_creates_conflicts_forces_and_prunes() {
    let (app, _) = server().await;
    let created = apply(&app, "alice", "", &deployment_yaml(1, "nginx")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["replicas"], 1);
    let alice = entry(&created.body, "alice");
    assert_eq!(alice["operation"], "Apply");
    assert_eq!(alice["apiVersion"], "apps/v1");
    assert_eq!(alice["fieldsType"], "FieldsV1");
    assert_eq!(
        alice["fieldsV1"]["f:metadata"],
        json!({"f:labels": {"f:team": {}}})
    );
    assert!(alice["time"].as_str().is_some_and(|t| t.ends_with('Z')));

    // Another manager with a different value: 409 naming the owner and the field.
    let conflict = apply(&app, "bob", "", &unlabelled(deployment_yaml(3, "nginx"))).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{}", conflict.body);
    assert_eq!(conflict.body["reason"], "Conflict");
    assert_eq!(
        conflict.body["message"],
        r#"Apply failed with 1 conflict: conflict with "alice": .spec.replicas"#
    );
    assert_eq!(
        conflict.body["details"]["causes"],
        json!([{
            "reason": "FieldManagerConflict",
            "message": r#"conflict with "alice""#,
            "field": ".spec.replicas",
        }])
    );

    // force=true takes the field; both managers are listed.
    let forced = apply(
        &app,
        "bob",
        "&force=true",
        &unlabelled(deployment_yaml(3, "nginx")),
    )
    .await;
    assert_eq!(forced.status, StatusCode::OK, "{}", forced.body);
    assert_eq!(forced.body["spec"]["replicas"], 3);
    assert_eq!(
        managers(&forced.body),
        [
            ("alice".to_owned(), "Apply".to_owned()),
            ("bob".to_owned(), "Apply".to_owned())
        ]
    );
    assert!(
        entry(&forced.body, "alice")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );

    // A PUT by a plain client adds an Update manager for what it changed.
    let mut object = forced.body.clone();
    object["spec"]["template"]["spec"]["containers"][0]["image"] = "httpd".into();
    let url = format!("{DEPLOYMENTS}/web");
    let put = send_with(
        &app,
        "PUT",
        &url,
        &[
            ("content-type", "application/json"),
            ("user-agent", "kubectl-edit/v1.33.0 (linux/amd64)"),
        ],
        object.to_string(),
    )
    .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
    let edit = entry(&put.body, "kubectl-edit");
    assert_eq!(edit["operation"], "Update");
    assert_eq!(edit["apiVersion"], "apps/v1");
    assert_eq!(
        edit["fieldsV1"],
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"c\"}": {"f:image": {}}
        }}}}})
    );

    // alice no longer applies the label she alone owned: it goes.
    let pruned = apply(
        &app,
        "alice",
        "&force=true",
        &unlabelled(deployment_yaml(3, "httpd")),
    )
    .await;
    assert_eq!(pruned.status, StatusCode::OK, "{}", pruned.body);
    assert!(
        pruned.body["metadata"].get("labels").is_none(),
        "{}",
        pruned.body
    );
    let got = send(&app, "GET", &url, "").await;
    assert!(got.body["metadata"].get("labels").is_none());
    assert!(got.body["metadata"]["managedFields"].is_array());
}

#[tokio::test]
async fn bad_applies_get_upstream_errors() {
    let (app, _) = server().await;
    let url = format!("{DEPLOYMENTS}/web");
    let no_manager = send_with(&app, "PATCH", &url, &[APPLY], deployment_yaml(1, "x")).await;
    assert_eq!(no_manager.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        no_manager.body["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    let not_yaml = apply(&app, "alice", "", "{ this: is: not yaml").await;
    assert_eq!(
        not_yaml.status,
        StatusCode::BAD_REQUEST,
        "{}",
        not_yaml.body
    );
    assert!(
        not_yaml.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("error decoding patch: ")),
        "{}",
        not_yaml.body
    );
    let list = apply(&app, "alice", "", "- a\n- b\n").await;
    assert_eq!(list.status, StatusCode::BAD_REQUEST);
    let force_merge = send_with(
        &app,
        "PATCH",
        &format!("{url}?force=true"),
        &[("content-type", "application/merge-patch+json")],
        "{}",
    )
    .await;
    assert_eq!(force_merge.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        force_merge.body["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
    );
    let wrong_kind = apply(&app, "alice", "", "apiVersion: v1\nkind: ConfigMap\n").await;
    assert_eq!(wrong_kind.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        wrong_kind.body["message"],
        "invalid object type: /v1, Kind=ConfigMap"
    );
}

#[tokio::test]
async fn writes_keep_managed_fields_out_of_clients_reach() {
    let (app, _) = server().await;
    let created = send_with(
        &app,
        "POST",
        CMS,
        &[
            ("content-type", "application/json"),
            ("user-agent", "kubectl-create/v1.33.0"),
        ],
        config_map("one"),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(
        managers(&created.body),
        [("kubectl-create".to_owned(), "Update".to_owned())]
    );
    assert_eq!(
        entry(&created.body, "kubectl-create")["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    let url = format!("{CMS}/one");
    // A client's invalid managedFields are ignored: the stored ones stay.
    let mut bad = created.body.clone();
    bad["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    bad["data"]["k"] = "w".into();
    let updated = send(
        &app,
        "PUT",
        &format!("{url}?fieldManager=editor"),
        &bad.to_string(),
    )
    .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.body);
    assert_eq!(
        managers(&updated.body),
        [
            ("editor".to_owned(), "Update".to_owned()),
            ("kubectl-create".to_owned(), "Update".to_owned())
        ]
    );
    // [{}] clears them, and updates of an untracked object do not track it again.
    let cleared = send(
        &app,
        "PATCH",
        &url,
        r#"{"metadata":{"managedFields":[{}]}}"#,
    )
    .await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.body);
    assert!(cleared.body["metadata"].get("managedFields").is_none());
    let patched = send(&app, "PATCH", &url, r#"{"data":{"k":"z"}}"#).await;
    assert!(patched.body["metadata"].get("managedFields").is_none());
    // Status writes record the subresource.
    let created = send(&app, "POST", DEPLOYMENTS, &deployment("web", 1)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let status = send(
        &app,
        "PATCH",
        &format!("{DEPLOYMENTS}/web/status?fieldManager=ctrl"),
        r#"{"status":{"replicas":1}}"#,
    )
    .await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    let ctrl = entry(&status.body, "ctrl");
    assert_eq!(ctrl["subresource"], "status");
    assert_eq!(ctrl["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
}
