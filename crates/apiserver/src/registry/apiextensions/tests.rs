//! CustomResourceDefinitions end to end through the REST layer: a definition is
//! established, its objects are pruned, defaulted and validated (schema and CEL), print
//! their columns, scale, read in both versions, show in discovery, and go with it.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::testing::{Reply, Server, causes};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.replicas <= 10", "message": "at most 10 replicas"}
                ],
                "properties": {
                    "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                    "image": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0, "default": 1}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "selector": {"type": "string"}
                }
            }
        }
    })
}

fn crontab_definition() -> Value {
    let version = |name: &str, storage: bool| {
        json!({
            "name": name,
            "served": true,
            "storage": storage,
            "schema": {"openAPIV3Schema": schema()},
            "subresources": {
                "status": {},
                "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"
                }
            },
            "additionalPrinterColumns": [
                {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}
            ],
            "selectableFields": [{"jsonPath": ".spec.image"}]
        })
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [version("v1", true), version("v2", false)]
        }
    })
}

async fn served(server: &Server, plural: &str, present: bool) {
    let wait = server.state.registry.wait_for(|registry| {
        registry
            .by_resource(&crate::error::GroupResource::new(
                "stable.example.com",
                plural,
            ))
            .is_some()
            == present
    });
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("{plural} served: {present} never came"));
}

fn crontab(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn message(reply: &Reply) -> String {
    reply.body["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn custom_resources_live_and_die_with_their_definition() {
    let server = Server::start().await;
    let controller = tokio::spawn(super::controller::run(server.state.clone()));

    let created = server.send("POST", CRDS, &crontab_definition()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    served(&server, "crontabs", true).await;
    let crd = server
        .send(
            "GET",
            &format!("{CRDS}/crontabs.stable.example.com"),
            &Value::Null,
        )
        .await
        .body;
    let conditions = crd["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let status_of = |type_: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == type_)
            .map(|c| c["status"].clone())
    };
    assert_eq!(status_of("NamesAccepted"), Some(json!("True")), "{crd}");
    assert_eq!(status_of("Established"), Some(json!("True")), "{crd}");
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "CronTab");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList");

    // Pruned and defaulted.
    let created = server
        .send(
            "POST",
            CRONTABS,
            &crontab(
                "a",
                json!({"cronSpec": "* * * * */5", "image": "web", "bogus": true}),
            ),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["replicas"], 1);
    assert!(
        created.body["spec"].get("bogus").is_none(),
        "{}",
        created.body
    );
    assert_eq!(created.body["metadata"]["generation"], 1);

    // The schema and the CEL rule refuse, with upstream's messages.
    let bad = server
        .send("POST", CRONTABS, &crontab("b", json!({"replicas": "x"})))
        .await;
    // As upstream, the scale accessor reports the same field too.
    assert_eq!(
        causes(&bad),
        [
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: x is of the type string, expected int64",
        ]
    );
    let bad = server
        .send("POST", CRONTABS, &crontab("b", json!({"replicas": 20})))
        .await;
    assert_eq!(
        causes(&bad),
        [r#"spec: Invalid value: "object": at most 10 replicas"#]
    );
    assert!(
        message(&bad).starts_with(r#"CronTab.stable.example.com "b" is invalid"#),
        "{}",
        bad.body
    );

    // Printer columns.
    let table = server.table(CRONTABS).await;
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["Name", "Spec", "Replicas"]);
    assert_eq!(table["rows"][0]["cells"], json!(["a", "* * * * */5", 1]));

    // Selectable fields.
    let selected = server
        .send(
            "GET",
            &format!("{CRONTABS}?fieldSelector=spec.image%3Dweb"),
            &Value::Null,
        )
        .await;
    assert_eq!(
        selected.body["items"].as_array().map(Vec::len),
        Some(1),
        "{}",
        selected.body
    );
    let refused = server
        .send(
            "GET",
            &format!("{CRONTABS}?fieldSelector=spec.cronSpec%3Dx"),
            &Value::Null,
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);

    // Scale.
    let scaled = server
        .send(
            "PATCH",
            &format!("{CRONTABS}/a/scale"),
            &json!({"spec": {"replicas": 3}}),
        )
        .await;
    assert_eq!(scaled.status, StatusCode::OK, "{}", scaled.body);
    let read = server
        .send("GET", &format!("{CRONTABS}/a"), &Value::Null)
        .await;
    assert_eq!(read.body["spec"]["replicas"], 3);
    assert_eq!(read.body["metadata"]["generation"], 2);

    // Custom resources take no strategic merge patch (415), but server-side apply.
    let strategic = server
        .send_as(
            "PATCH",
            &format!("{CRONTABS}/a"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"image": "x"}}),
        )
        .await;
    assert_eq!(
        strategic.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "{}",
        strategic.body
    );
    let applied = server
        .send_as(
            "PATCH",
            &format!("{CRONTABS}/a?fieldManager=tester&force=true"),
            "application/apply-patch+yaml",
            &crontab("a", json!({"image": "applied"})),
        )
        .await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.body);
    assert_eq!(applied.body["spec"]["image"], "applied");
    let managers: Vec<&str> = applied.body["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"tester"), "{}", applied.body);

    // The other version reads the same object.
    let v2 = server
        .send(
            "GET",
            "/apis/stable.example.com/v2/namespaces/default/crontabs/a",
            &Value::Null,
        )
        .await;
    assert_eq!(
        v2.body["apiVersion"], "stable.example.com/v2",
        "{}",
        v2.body
    );
    assert_eq!(v2.body["spec"]["replicas"], 3);

    // Discovery lists the kind with its names.
    let discovery: axum::Router = crate::discovery::router(
        server.state.registry.clone(),
        crate::discovery::testing::addresses(),
    );
    let response = tower::ServiceExt::oneshot(
        discovery,
        axum::http::Request::get("/apis/stable.example.com/v1")
            .body(axum::body::Body::empty())
            .expect("request"),
    )
    .await
    .expect("infallible");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let list: Value = serde_json::from_slice(&bytes).expect("json");
    let crontabs = list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "crontabs")
        .cloned()
        .unwrap_or_default();
    assert_eq!(crontabs["shortNames"], json!(["ct"]), "{list}");
    assert_eq!(crontabs["kind"], "CronTab");
    assert!(
        list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["name"] == "crontabs/scale")
    );

    // OpenAPI v3 publishes the schema (what `kubectl explain` reads).
    let openapi: axum::Router = crate::openapi::router(server.state.registry.clone());
    let response = tower::ServiceExt::oneshot(
        openapi,
        axum::http::Request::get("/openapi/v3/apis/stable.example.com/v1")
            .body(axum::body::Body::empty())
            .expect("request"),
    )
    .await
    .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let document: Value = serde_json::from_slice(&bytes).expect("json");
    let definition = &document["components"]["schemas"]["com.example.stable.v1.CronTab"];
    assert_eq!(
        definition["properties"]["spec"]["properties"]["replicas"]["type"], "integer",
        "{definition}"
    );
    assert!(
        document["paths"]
            .get("/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale")
            .is_some()
    );

    // Deleting the definition deletes its objects, then the definition.
    let deleted = server
        .send(
            "DELETE",
            &format!("{CRDS}/crontabs.stable.example.com"),
            &Value::Null,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    served(&server, "crontabs", false).await;
    let gone = server
        .send(
            "GET",
            &format!("{CRDS}/crontabs.stable.example.com"),
            &Value::Null,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.body);
    let left = server
        .state
        .storage
        .list("/registry/stable.example.com/crontabs/", None, 0, None)
        .await
        .expect("list");
    assert!(left.items.is_empty(), "objects left behind");
    controller.abort();
}

#[tokio::test]
async fn bad_definitions_are_refused_whole() {
    let server = Server::start().await;
    let mut crd = crontab_definition();
    crd["spec"]["versions"][1]["storage"] = json!(true);
    let reply = server.send("POST", CRDS, &crd).await;
    assert!(
        causes(&reply)
            .iter()
            .any(|c| c.contains("must have exactly one version marked as storage version")),
        "{}",
        reply.body
    );

    let mut crd = crontab_definition();
    for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"] =
            json!({"description": "no type"});
    }
    let reply = server.send("POST", CRDS, &crd).await;
    assert!(
        causes(&reply).iter().any(|c| c
            == "spec.validation.openAPIV3Schema.properties[spec].properties[image].type: Required value: must not be empty for specified object fields"),
        "{}",
        reply.body
    );

    let mut crd = crontab_definition();
    for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
            json!([{"rule": "self.replicas <"}]);
    }
    let reply = server.send("POST", CRDS, &crd).await;
    assert!(
        causes(&reply)
            .iter()
            .any(|c| c.contains("x-kubernetes-validations[0].rule")
                && c.contains("compilation failed")),
        "{}",
        reply.body
    );
    let list = server.send("GET", CRDS, &Value::Null).await;
    assert_eq!(list.body["items"], json!([]), "nothing stored");
}
