//! get, list, create, update, delete, status, scale, negotiation and bad input.

use axum::http::StatusCode;
use serde_json::json;

use super::*;

#[tokio::test]
async fn create_fills_metadata_and_get_returns_it() {
    let (app, _) = server().await;
    let created = send(&app, "POST", CMS, &config_map("a")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let meta = &created.body["metadata"];
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["uid"].as_str().map(str::len), Some(36));
    assert!(
        meta["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(
        meta["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<i64>().is_ok())
    );
    assert!(
        meta.get("generation").is_none(),
        "config maps have no generation"
    );
    let got = send(&app, "GET", &format!("{CMS}/a"), "").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body, created.body);

    let again = send(&app, "POST", CMS, &config_map("a")).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.body["reason"], "AlreadyExists");
    assert_eq!(again.body["message"], r#"configmaps "a" already exists"#);

    let missing = send(&app, "GET", &format!("{CMS}/nope"), "").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["message"], r#"configmaps "nope" not found"#);
    assert_eq!(
        missing.body["details"],
        json!({"name": "nope", "kind": "configmaps"})
    );
}

#[tokio::test]
async fn generate_name_and_name_rules() {
    let (app, _) = server().await;
    let created = send(&app, "POST", CMS, r#"{"metadata":{"generateName":"web-"}}"#).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let name = created.body["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");

    // A name given with generateName is kept: a taken one is a conflict, not a new name
    // (a StatefulSet's `web-1` must never become `web-x7k2p`).
    let named = r#"{"metadata":{"name":"web-1","generateName":"web-"}}"#;
    let first = send(&app, "POST", CMS, named).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(first.body["metadata"]["name"], "web-1");
    let again = send(&app, "POST", CMS, named).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);

    let invalid = send(&app, "POST", CMS, &config_map("Bad_Name")).await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(invalid.body["reason"], "Invalid");
    assert_eq!(
        invalid.body["details"]["causes"][0]["field"],
        "metadata.name"
    );

    let nameless = send(&app, "POST", CMS, "{}").await;
    assert_eq!(nameless.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        nameless.body["message"],
        r#"ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required"#
    );
}

#[tokio::test]
async fn namespaces_come_from_the_path_and_must_exist() {
    let (app, _) = server().await;
    let other = r#"{"metadata":{"name":"a","namespace":"other"}}"#;
    let mismatch = send(&app, "POST", CMS, other).await;
    assert_eq!(mismatch.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        mismatch.body["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let missing = send(
        &app,
        "POST",
        "/api/v1/namespaces/nope/configmaps",
        &config_map("a"),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["message"], r#"namespaces "nope" not found"#);
    let all = send(&app, "POST", "/api/v1/configmaps", &config_map("a")).await;
    assert_eq!(all.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn updates_are_optimistic_and_unchanged_objects_are_not_written() {
    let (app, _) = server().await;
    let created = send(&app, "POST", CMS, &config_map("a")).await.body;
    let mut changed = created.clone();
    changed["data"]["k"] = "w".into();
    let updated = send(&app, "PUT", &format!("{CMS}/a"), &changed.to_string()).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.body);
    assert_ne!(
        updated.body["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(updated.body["metadata"]["uid"], created["metadata"]["uid"]);

    let stale = send(&app, "PUT", &format!("{CMS}/a"), &changed.to_string()).await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(
        stale.body["message"],
        r#"Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again"#
    );

    let unconditional = send(&app, "PUT", &format!("{CMS}/a"), &config_map("a")).await;
    assert_eq!(
        unconditional.status,
        StatusCode::OK,
        "{}",
        unconditional.body
    );
    assert_eq!(
        unconditional.body["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );
    let same = send(&app, "PUT", &format!("{CMS}/a"), &config_map("a")).await;
    assert_eq!(
        same.body["metadata"]["resourceVersion"],
        unconditional.body["metadata"]["resourceVersion"]
    );

    let renamed = send(&app, "PUT", &format!("{CMS}/a"), &config_map("b")).await;
    assert_eq!(renamed.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        renamed.body["message"],
        "the name of the object (b) does not match the name on the URL (a)"
    );
    let missing = send(&app, "PUT", &format!("{CMS}/zz"), &config_map("zz")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let lease = r#"{"metadata":{"name":"l"},"spec":{"holderIdentity":"me"}}"#;
    let created_lease = send(
        &app,
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
        lease,
    )
    .await;
    assert_eq!(
        created_lease.status,
        StatusCode::CREATED,
        "{}",
        created_lease.body
    );
}

#[tokio::test]
async fn status_and_spec_are_written_apart_and_generation_follows_spec() {
    let (app, _) = server().await;
    let mut body: Value = serde_json::from_str(&deployment("web", 2)).unwrap();
    body["status"] = json!({"replicas": 9});
    let created = send(&app, "POST", DEPLOYMENTS, &body.to_string())
        .await
        .body;
    assert_eq!(created["metadata"]["generation"], 1);
    let url = format!("{DEPLOYMENTS}/web");

    let mut status = created.clone();
    status["status"] = json!({"replicas": 2});
    status["spec"]["replicas"] = 5.into();
    let after_status = send(&app, "PUT", &format!("{url}/status"), &status.to_string()).await;
    assert_eq!(after_status.status, StatusCode::OK, "{}", after_status.body);
    assert_eq!(after_status.body["status"]["replicas"], 2);
    assert_eq!(
        after_status.body["spec"]["replicas"], 2,
        "/status keeps the spec"
    );
    assert_eq!(after_status.body["metadata"]["generation"], 1);

    let mut main = after_status.body.clone();
    main["spec"]["replicas"] = 3.into();
    main["status"] = json!({"replicas": 7});
    let after_main = send(&app, "PUT", &url, &main.to_string()).await;
    assert_eq!(after_main.body["spec"]["replicas"], 3);
    assert_eq!(
        after_main.body["status"]["replicas"], 2,
        "the main resource keeps the status"
    );
    assert_eq!(after_main.body["metadata"]["generation"], 2);

    let labels_only = {
        let mut b = after_main.body.clone();
        b["metadata"]["labels"] = json!({"x": "y"});
        b
    };
    let relabeled = send(&app, "PUT", &url, &labels_only.to_string()).await;
    assert_eq!(
        relabeled.body["metadata"]["generation"], 2,
        "metadata changes keep the generation"
    );

    let mut negative = relabeled.body.clone();
    negative["spec"]["replicas"] = (-1).into();
    let invalid = send(&app, "PUT", &url, &negative.to_string()).await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        invalid.body["message"],
        r#"Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
    );
}

#[tokio::test]
async fn scale_reads_and_writes_replicas() {
    let (app, _) = server().await;
    send(&app, "POST", DEPLOYMENTS, &deployment("web", 2)).await;
    let url = format!("{DEPLOYMENTS}/web/scale");
    let scale = send(&app, "GET", &url, "").await;
    assert_eq!(scale.status, StatusCode::OK);
    assert_eq!(scale.body["kind"], "Scale");
    assert_eq!(scale.body["apiVersion"], "autoscaling/v1");
    assert_eq!(scale.body["spec"]["replicas"], 2);
    assert_eq!(scale.body["status"]["selector"], "app=web");

    let mut put = scale.body.clone();
    put["spec"]["replicas"] = 4.into();
    let scaled = send(&app, "PUT", &url, &put.to_string()).await;
    assert_eq!(scaled.status, StatusCode::OK, "{}", scaled.body);
    assert_eq!(scaled.body["spec"]["replicas"], 4);
    let stale = send(&app, "PUT", &url, &put.to_string()).await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    let deployment = send(&app, "GET", &format!("{DEPLOYMENTS}/web"), "")
        .await
        .body;
    assert_eq!(deployment["spec"]["replicas"], 4);
    assert_eq!(deployment["metadata"]["generation"], 2);
}

#[tokio::test]
async fn delete_answers_status_or_the_object_and_honours_finalizers() {
    let (app, _) = server().await;
    send(&app, "POST", CMS, &config_map("a")).await;
    let deleted = send(&app, "DELETE", &format!("{CMS}/a"), "").await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body["kind"], "Status");
    assert_eq!(deleted.body["status"], "Success");
    assert_eq!(deleted.body["details"]["name"], "a");
    assert_eq!(deleted.body["details"]["kind"], "configmaps");
    assert_eq!(
        send(&app, "GET", &format!("{CMS}/a"), "").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(&app, "DELETE", &format!("{CMS}/a"), "").await.status,
        StatusCode::NOT_FOUND
    );

    let with_finalizer = r#"{"metadata":{"name":"f","finalizers":["example.com/x"]}}"#;
    send(&app, "POST", CMS, with_finalizer).await;
    let pending = send(&app, "DELETE", &format!("{CMS}/f"), "").await;
    assert_eq!(pending.status, StatusCode::OK);
    assert_eq!(pending.body["kind"], "ConfigMap");
    assert!(pending.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(pending.body["metadata"]["deletionGracePeriodSeconds"], 0);
    let mut cleared = pending.body.clone();
    cleared["metadata"]["finalizers"] = json!([]);
    let last = send(&app, "PUT", &format!("{CMS}/f"), &cleared.to_string()).await;
    assert_eq!(last.status, StatusCode::OK, "{}", last.body);
    assert_eq!(
        send(&app, "GET", &format!("{CMS}/f"), "").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn propagation_policy_and_preconditions() {
    let (app, _) = server().await;
    let created = send(&app, "POST", DEPLOYMENTS, &deployment("web", 1))
        .await
        .body;
    let url = format!("{DEPLOYMENTS}/web");
    let wrong_uid = r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"nope"}}"#;
    let refused = send(&app, "DELETE", &url, wrong_uid).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    let uid = created["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        refused.body["message"],
        format!(
            r#"Operation cannot be fulfilled on Deployment.apps "web": the UID in the precondition (nope) does not match the UID in record ({uid}). The object might have been deleted and then recreated"#
        )
    );
    let stale_rv = r#"{"preconditions":{"resourceVersion":"1"}}"#;
    let refused = send(&app, "DELETE", &url, stale_rv).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        refused.body["message"],
        format!(
            r#"Operation cannot be fulfilled on Deployment.apps "web": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"#
        )
    );
    assert_eq!(refused.body["details"]["kind"], "Deployment");
    let foreground = send(
        &app,
        "DELETE",
        &format!("{url}?propagationPolicy=Foreground"),
        "",
    )
    .await;
    assert_eq!(foreground.status, StatusCode::OK);
    assert_eq!(
        foreground.body["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert_eq!(foreground.body["metadata"]["generation"], 2);
    let background = r#"{"propagationPolicy":"Background"}"#;
    let gone = send(&app, "DELETE", &url, background).await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    assert_eq!(gone.body["kind"], "Status");
    assert_eq!(gone.body["details"]["group"], "apps");
}

#[tokio::test]
async fn pods_delete_gracefully() {
    let (app, _) = server().await;
    let pod = r#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    send(&app, "POST", PODS, pod).await;
    let graceful = send(&app, "DELETE", &format!("{PODS}/p"), "").await;
    assert_eq!(graceful.status, StatusCode::OK);
    assert_eq!(graceful.body["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(graceful.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        send(&app, "GET", &format!("{PODS}/p"), "").await.status,
        StatusCode::OK
    );
    let now = send(
        &app,
        "DELETE",
        &format!("{PODS}/p?gracePeriodSeconds=0"),
        "",
    )
    .await;
    assert_eq!(now.status, StatusCode::OK);
    assert_eq!(now.body["kind"], "Pod", "pods return the deleted object");
    assert_eq!(
        send(&app, "GET", &format!("{PODS}/p"), "").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let (app, _) = server().await;
    let created = send(&app, "POST", &format!("{CMS}?dryRun=All"), &config_map("a")).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(created.body["metadata"]["uid"].is_string());
    assert_eq!(
        send(&app, "GET", &format!("{CMS}/a"), "").await.status,
        StatusCode::NOT_FOUND
    );
    send(&app, "POST", CMS, &config_map("b")).await;
    let taken = send(&app, "POST", &format!("{CMS}?dryRun=All"), &config_map("b")).await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.body);
    assert_eq!(taken.body["reason"], "AlreadyExists");
    let deleted = send(&app, "DELETE", &format!("{CMS}/b?dryRun=All"), "").await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(
        send(&app, "GET", &format!("{CMS}/b"), "").await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn lists_page_with_continue_tokens() {
    let (app, state) = server().await;
    for name in ["a", "b", "c", "d", "e"] {
        send(&app, "POST", CMS, &config_map(name)).await;
    }
    let first = send(&app, "GET", &format!("{CMS}?limit=2"), "").await.body;
    assert_eq!(first["kind"], "ConfigMapList");
    assert_eq!(first["apiVersion"], "v1");
    assert_eq!(first["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    send(&app, "POST", CMS, &config_map("f")).await;
    let second = send(&app, "GET", &format!("{CMS}?limit=10&continue={token}"), "")
        .await
        .body;
    let names: Vec<&str> = second["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["c", "d", "e"],
        "pages read at the first page's revision"
    );
    assert_eq!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert!(second["metadata"].get("continue").is_none());

    let all = send(&app, "GET", "/api/v1/configmaps", "").await.body;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(6));

    let rv: i64 = second["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    state.storage.compact(rv + 1).await.unwrap();
    let expired = send(&app, "GET", &format!("{CMS}?limit=2&continue={token}"), "").await;
    assert_eq!(expired.status, StatusCode::GONE);
    assert_eq!(expired.body["reason"], "Expired");
    // The 410 carries a token that resumes after the same key, at the latest revision.
    let resume = expired.body["metadata"]["continue"]
        .as_str()
        .expect("a fresh continue token in the 410")
        .to_owned();
    let rest = send(&app, "GET", &format!("{CMS}?continue={resume}"), "").await;
    assert_eq!(rest.status, StatusCode::OK, "{}", rest.body);
    let names: Vec<&str> = rest.body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["c", "d", "e", "f"], "the remainder, now with f");
    let bad = send(&app, "GET", &format!("{CMS}?continue=garbage"), "").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn unsupported_field_selectors_are_rejected() {
    let (app, _) = server().await;
    let bad = send(
        &app,
        "GET",
        &format!("{CMS}?fieldSelector=spec.foo%3Dx"),
        "",
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    // Kinds without their own field labels answer as upstream's default conversion.
    assert_eq!(
        bad.body["message"],
        r#""spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace""#
    );
}

#[tokio::test]
async fn tables_carry_columns_and_partial_metadata() {
    let (app, _) = server().await;
    send(&app, "POST", DEPLOYMENTS, &deployment("web", 3)).await;
    send(&app, "POST", CMS, &config_map("a")).await;
    let accept = [(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )];
    let table = send_with(&app, "GET", DEPLOYMENTS, &accept, "").await.body;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(table["columnDefinitions"][2]["priority"], 1);
    assert_eq!(table["rows"][0]["cells"], json!(["web", 3, ""]));
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "web");
    assert!(table["metadata"]["resourceVersion"].is_string());

    let one = send_with(
        &app,
        "GET",
        &format!("{CMS}/a?includeObject=None"),
        &accept,
        "",
    )
    .await
    .body;
    assert_eq!(one["columnDefinitions"][0]["name"], "Name");
    assert_eq!(one["columnDefinitions"][1]["name"], "Created At");
    assert_eq!(one["rows"][0]["cells"][0], "a");
    assert!(one["rows"][0].get("object").is_none());
}

#[tokio::test]
async fn bodies_in_yaml_and_responses_in_yaml() {
    let (app, _) = server().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n";
    let created = send_with(
        &app,
        "POST",
        CMS,
        &[("content-type", "application/yaml")],
        yaml,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let got = send_with(
        &app,
        "GET",
        &format!("{CMS}/y"),
        &[("accept", "application/yaml")],
        "",
    )
    .await;
    assert_eq!(got.headers["content-type"], "application/yaml");
    assert!(
        got.body
            .as_str()
            .is_some_and(|text| text.contains("name: y"))
    );
    let protobuf_only = send_with(
        &app,
        "GET",
        &format!("{CMS}/y"),
        &[("accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    assert_eq!(protobuf_only.status, StatusCode::OK);
    assert_eq!(
        protobuf_only.headers["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    let table_only = send_with(
        &app,
        "GET",
        &format!("{CMS}/y"),
        &[(
            "accept",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
        )],
        "",
    )
    .await;
    assert_eq!(table_only.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn bad_input_is_rejected_and_nothing_is_stored() {
    let (app, _) = server().await;
    let malformed = send(&app, "POST", CMS, "{\"metadata\": ").await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    let wrong_version = send(
        &app,
        "POST",
        CMS,
        r#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"a"}}"#,
    )
    .await;
    assert_eq!(wrong_version.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        wrong_version.body["message"],
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
    let huge = format!(
        r#"{{"metadata":{{"name":"h"}},"data":{{"k":"{}"}}}}"#,
        "x".repeat(4 << 20)
    );
    let too_large = send(&app, "POST", CMS, &huge).await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);

    let mistyped = send(
        &app,
        "POST",
        CMS,
        r#"{"metadata":{"name":"t"},"data":{"k":3}}"#,
    )
    .await;
    assert_eq!(mistyped.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        mistyped.body["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: data.k: invalid type: integer `3`, expected a string"#
    );

    let unknown = r#"{"metadata":{"name":"u"},"data":{"k":"v"},"spec":{"foo":1}}"#;
    let strict = send(
        &app,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        unknown,
    )
    .await;
    assert_eq!(strict.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        strict.body["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "spec""#
    );
    let twice = r#"{"metadata":{"name":"d"},"data":{"k":"v","k":"w"}}"#;
    let duplicate = send(
        &app,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        twice,
    )
    .await;
    assert_eq!(duplicate.status, StatusCode::BAD_REQUEST);
    let message = duplicate.body["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with(r#"strict decoding error: duplicate field "data.k""#),
        "{message}"
    );
    let list = send(&app, "GET", CMS, "").await.body;
    assert_eq!(list["items"], json!([]), "nothing partial is stored");

    let warned = send(&app, "POST", CMS, unknown).await;
    assert_eq!(warned.status, StatusCode::CREATED);
    assert_eq!(
        warned.headers["warning"],
        r#"299 - "unknown field \"spec\"""#
    );
    assert!(warned.body.get("spec").is_none());
}

#[tokio::test]
async fn unknown_paths_and_methods() {
    let (app, _) = server().await;
    assert_eq!(
        send(&app, "GET", "/api/v1/nothings", "").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(&app, "GET", "/apis/apps/v1/deployments/x", "")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(&app, "PUT", CMS, "{}").await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
    let status = send(&app, "GET", &format!("{CMS}/a/status"), "").await;
    assert_eq!(status.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn patches_of_every_type() {
    let (app, _) = server().await;
    send(&app, "POST", DEPLOYMENTS, &deployment("web", 1)).await;
    let url = format!("{DEPLOYMENTS}/web");
    let merged = send(&app, "PATCH", &url, r#"{"metadata":{"labels":{"a":"b"}}}"#).await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.body);
    assert_eq!(merged.body["metadata"]["labels"]["a"], "b");
    assert_eq!(merged.body["metadata"]["generation"], 1);

    let json_patch = r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#;
    let json_type = [("content-type", "application/json-patch+json")];
    let patched = send_with(&app, "PATCH", &url, &json_type, json_patch).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["spec"]["replicas"], 3);
    assert_eq!(patched.body["metadata"]["generation"], 2);

    let sidecar =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}}}"#;
    let smp_type = [("content-type", "application/strategic-merge-patch+json")];
    let strategic = send_with(&app, "PATCH", &url, &smp_type, sidecar).await;
    assert_eq!(strategic.status, StatusCode::OK, "{}", strategic.body);
    let containers = &strategic.body["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers.as_array().map(Vec::len),
        Some(2),
        "merged by name: {containers}"
    );

    let stale = r#"{"metadata":{"resourceVersion":"1"},"spec":{"replicas":9}}"#;
    assert_eq!(
        send(&app, "PATCH", &url, stale).await.status,
        StatusCode::CONFLICT
    );
    let status = send(
        &app,
        "PATCH",
        &format!("{url}/status"),
        r#"{"status":{"replicas":3},"spec":{"replicas":8}}"#,
    )
    .await;
    assert_eq!(status.body["status"]["replicas"], 3);
    assert_eq!(status.body["spec"]["replicas"], 3);
    let scaled = send(
        &app,
        "PATCH",
        &format!("{url}/scale"),
        r#"{"spec":{"replicas":5}}"#,
    )
    .await;
    assert_eq!(scaled.status, StatusCode::OK, "{}", scaled.body);
    assert_eq!(scaled.body["spec"]["replicas"], 5);

    let apply = [("content-type", "application/apply-patch+yaml")];
    let unnamed = send_with(&app, "PATCH", &url, &apply, "{}").await;
    assert_eq!(unnamed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        unnamed.body["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    let missing = send(&app, "PATCH", &format!("{DEPLOYMENTS}/nope"), "{}").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let broken = send_with(
        &app,
        "PATCH",
        &url,
        &json_type,
        r#"[{"op":"remove","path":"/spec/nothing"}]"#,
    )
    .await;
    assert_eq!(
        broken.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        broken.body
    );
}

#[tokio::test]
async fn verbs_a_kind_does_not_serve_are_405() {
    let (app, _) = server().await;
    send(
        &app,
        "POST",
        "/api/v1/namespaces",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kept"}}"#,
    )
    .await;
    let refused = send(&app, "DELETE", "/api/v1/namespaces", "").await;
    assert_eq!(
        refused.status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{}",
        refused.body
    );
    assert_eq!(refused.body["reason"], "MethodNotAllowed");
    let kept = send(&app, "GET", "/api/v1/namespaces/kept", "").await;
    assert_eq!(kept.status, StatusCode::OK, "nothing was deleted");
    // The verbs it serves still work.
    let deleted = send(&app, "DELETE", "/api/v1/namespaces/kept", "").await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
}

#[tokio::test]
async fn selectors_filter_lists_and_deletecollection() {
    let (app, _) = server().await;
    for name in ["a", "b", "c"] {
        send(&app, "POST", CMS, &config_map(name)).await;
    }
    let selected = send(
        &app,
        "GET",
        &format!("{CMS}?labelSelector=app%20in%20(a,b)&limit=1"),
        "",
    )
    .await
    .body;
    assert_eq!(selected["items"][0]["metadata"]["name"], "a");
    assert!(selected["metadata"]["continue"].is_string());
    assert!(
        selected["metadata"].get("remainingItemCount").is_none(),
        "no count with selectors"
    );
    let by_name = send(
        &app,
        "GET",
        &format!("{CMS}?fieldSelector=metadata.name%3Dc"),
        "",
    )
    .await
    .body;
    assert_eq!(by_name["items"].as_array().map(Vec::len), Some(1));
    let pod = r#"{"metadata":{"name":"p"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"i"}]}}"#;
    send(&app, "POST", PODS, pod).await;
    let on_node = send(
        &app,
        "GET",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1",
        "",
    )
    .await
    .body;
    assert_eq!(on_node["items"][0]["metadata"]["name"], "p");

    let deleted = send(&app, "DELETE", &format!("{CMS}?labelSelector=app%3Db"), "").await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    assert_eq!(deleted.body["kind"], "ConfigMapList");
    assert_eq!(deleted.body["items"][0]["metadata"]["name"], "b");
    let left = send(&app, "GET", CMS, "").await.body;
    assert_eq!(left["items"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn custom_subresources_reach_other_objects() {
    let (app, _) = server().await;
    let pod = r#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    let created = send(&app, "POST", PODS, pod).await.body;
    let binding = r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"n1"}}"#;
    let bound = send(&app, "POST", &format!("{PODS}/p/binding"), binding).await;
    assert_eq!(bound.status, StatusCode::OK, "{}", bound.body);
    let got = send(&app, "GET", &format!("{PODS}/p"), "").await.body;
    assert_eq!(got["spec"]["nodeName"], "n1");
    assert_ne!(
        got["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let missing = send(&app, "POST", &format!("{PODS}/nope/binding"), binding).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        send(&app, "POST", &format!("{PODS}/p/other"), "{}")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}
