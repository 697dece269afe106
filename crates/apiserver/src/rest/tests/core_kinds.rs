//! The core/v1 kinds of the built-in registry through the REST layer: field selectors
//! (the kubelet's `spec.clusterIP!=None` service list and watch), replicationcontrollers,
//! podtemplates, componentstatuses, the legacy bindings and `namespaces/finalize`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{DEPLOYMENTS, PODS};
use crate::registry::testing::Server;

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn services_select_on_cluster_ip_in_list_and_watch() {
    let server = Server::start().await;
    let services = "/api/v1/namespaces/default/services";
    let service = |name: &str, cluster_ip: Option<&str>| {
        let mut spec = json!({"ports": [{"port": 80}], "selector": {"app": name}});
        if let Some(ip) = cluster_ip {
            spec["clusterIP"] = ip.into();
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    let web = server.send("POST", services, &service("web", None)).await;
    assert_eq!(web.status, StatusCode::CREATED, "{}", web.body);
    let headless = server
        .send("POST", services, &service("db", Some("None")))
        .await;
    assert_eq!(headless.status, StatusCode::CREATED, "{}", headless.body);

    let selector = "fieldSelector=spec.clusterIP%21%3DNone";
    let list = server
        .send("GET", &format!("{services}?{selector}"), &Value::Null)
        .await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(names(&list.body), ["web"]);
    let typed = server
        .send(
            "GET",
            &format!("{services}?fieldSelector=spec.type%3DClusterIP"),
            &Value::Null,
        )
        .await;
    assert_eq!(names(&typed.body), ["db", "web"]);

    let watch = server
        .send(
            "GET",
            &format!("{services}?watch=1&{selector}&timeoutSeconds=1"),
            &Value::Null,
        )
        .await;
    assert_eq!(watch.status, StatusCode::OK);
    let text = match &watch.body {
        Value::String(text) => text.clone(),
        one => one.to_string(),
    };
    let watched: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(watched, ["web"]);

    let bad = server
        .send(
            "GET",
            &format!("{services}?fieldSelector=spec.ports%3D1"),
            &Value::Null,
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.body["message"], "field label not supported: spec.ports");
}

fn controller(replicas: i32, selector: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    })
}

#[tokio::test]
async fn replication_controllers_default_validate_scale_and_print() {
    let server = Server::start().await;
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let bad = server
        .send("POST", rcs, &controller(-1, json!({"app": "db"})))
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    let causes: Vec<&str> = bad.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(causes, ["spec.replicas", "spec.template.metadata.labels"]);

    // The selector and the labels default to the template's.
    let created = server.send("POST", rcs, &controller(2, json!({}))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(created.body["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(created.body["metadata"]["generation"], 1);
    let got = server
        .send("GET", &format!("{rcs}/web"), &Value::Null)
        .await;
    assert_eq!(got.body["spec"]["replicas"], 2);

    let scale = server
        .send("GET", &format!("{rcs}/web/scale"), &Value::Null)
        .await;
    assert_eq!(scale.status, StatusCode::OK, "{}", scale.body);
    assert_eq!(scale.body["spec"]["replicas"], 2);
    assert_eq!(scale.body["status"]["selector"], "app=web");
    let scaled = server
        .send(
            "PATCH",
            &format!("{rcs}/web/scale"),
            &json!({"spec": {"replicas": 5}}),
        )
        .await;
    assert_eq!(scaled.status, StatusCode::OK, "{}", scaled.body);
    let got = server
        .send("GET", &format!("{rcs}/web"), &Value::Null)
        .await;
    assert_eq!(got.body["spec"]["replicas"], 5);
    assert_eq!(got.body["metadata"]["generation"], 2);

    let status = server
        .send(
            "PATCH",
            &format!("{rcs}/web/status"),
            &json!({"status": {"replicas": 3, "readyReplicas": 2}}),
        )
        .await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    let selected = server
        .send(
            "GET",
            &format!("{rcs}?fieldSelector=status.replicas%3D3"),
            &Value::Null,
        )
        .await;
    assert_eq!(names(&selected.body), ["web"]);

    let table = server.table(rcs).await;
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let cells = table["rows"][0]["cells"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(cells[0..4], [json!("web"), json!(5), json!(3), json!(2)]);
    assert_eq!(cells[5..8], [json!("c"), json!("nginx"), json!("app=web")]);
}

#[tokio::test]
async fn pod_templates_validate_and_print() {
    let server = Server::start().await;
    let templates = "/api/v1/namespaces/default/podtemplates";
    let template = |containers: Value| {
        json!({
            "metadata": {"name": "t"},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}},
        })
    };
    let bad = server.send("POST", templates, &template(json!([]))).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    assert_eq!(
        bad.body["details"]["causes"][0]["field"],
        "template.spec.containers"
    );
    let created = server
        .send(
            "POST",
            templates,
            &template(json!([{"name": "c", "image": "nginx"}])),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["template"]["spec"]["restartPolicy"], "Always");
    let table = server.table(&format!("{templates}/t")).await;
    assert_eq!(table["columnDefinitions"][3]["name"], "Pod Labels");
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["t", "c", "nginx", "app=web"])
    );
}

#[tokio::test]
async fn component_statuses_are_computed_and_read_only() {
    let server = Server::start().await;
    let list = server
        .send("GET", "/api/v1/componentstatuses", &Value::Null)
        .await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_eq!(list.body["kind"], "ComponentStatusList");
    assert_eq!(
        names(&list.body),
        ["scheduler", "controller-manager", "etcd-0"]
    );
    assert_eq!(
        list.body["items"][2]["conditions"],
        json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
    assert!(list.headers.get("warning").is_some());
    let etcd = server
        .send("GET", "/api/v1/componentstatuses/etcd-0", &Value::Null)
        .await;
    assert_eq!(etcd.body["metadata"]["name"], "etcd-0");
    let table = server.table("/api/v1/componentstatuses").await;
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["scheduler", "Healthy", "ok", ""])
    );
    let missing = server
        .send("GET", "/api/v1/componentstatuses/nope", &Value::Null)
        .await;
    assert_eq!(missing.body["message"], "Component not found: nope");
    let post = server
        .send("POST", "/api/v1/componentstatuses", &json!({}))
        .await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn legacy_bindings_bind_pods() {
    let server = Server::start().await;
    let pod = json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    });
    let created = server.send("POST", PODS, &pod).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let bindings = "/api/v1/namespaces/default/bindings";
    let no_target = json!({"metadata": {"name": "web"}, "target": {}});
    let bad = server.send("POST", bindings, &no_target).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    // A Binding for another pod of the same name (a stale UID) is refused, as upstream's
    // UID precondition does.
    let stale = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "web", "uid": "0000-stale"},
        "target": {"kind": "Node", "name": "node-1"},
    });
    let refused = server.send("POST", bindings, &stale).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let uid = created.body["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        refused.body["message"],
        format!(
            "Operation cannot be fulfilled on pods \"web\": Precondition failed: UID in precondition: 0000-stale, UID in object meta: {uid}"
        )
    );
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "web", "uid": uid},
        "target": {"kind": "Node", "name": "node-1"},
    });
    let bound = server.send("POST", bindings, &binding).await;
    assert_eq!(bound.status, StatusCode::CREATED, "{}", bound.body);
    assert_eq!(bound.body["status"], "Success");
    let pod = server
        .send("GET", &format!("{PODS}/web"), &Value::Null)
        .await;
    assert_eq!(pod.body["spec"]["nodeName"], "node-1");
    let list = server.send("GET", bindings, &Value::Null).await;
    assert_eq!(list.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn namespace_finalize_replaces_only_spec_finalizers() {
    let server = Server::start().await;
    let created = server
        .send(
            "POST",
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "team"}}),
        )
        .await;
    assert_eq!(created.body["spec"]["finalizers"], json!(["kubernetes"]));
    let finalize = "/api/v1/namespaces/team/finalize";
    let bad = json!({"metadata": {"name": "team"}, "spec": {"finalizers": ["nope"]}});
    let refused = server.send("PUT", finalize, &bad).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.body
    );
    assert_eq!(
        refused.body["details"]["causes"][0]["field"],
        "spec.finalizers[0]"
    );
    let body = json!({
        "metadata": {"name": "team", "labels": {"ignored": "yes"}},
        "spec": {"finalizers": ["example.com/hold"]},
    });
    let done = server.send("PUT", finalize, &body).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.body["spec"]["finalizers"], json!(["example.com/hold"]));
    let got = server
        .send("GET", "/api/v1/namespaces/team", &Value::Null)
        .await;
    assert_eq!(got.body["spec"]["finalizers"], json!(["example.com/hold"]));
    assert!(got.body["metadata"]["labels"].get("ignored").is_none());
    let get = server.send("GET", finalize, &Value::Null).await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// `deployments/status` takes annotations (the controller writes the revision there, as
/// upstream's status strategy allows) but not labels or the spec.
#[tokio::test]
async fn deployment_status_takes_annotations_only() {
    let server = Server::start().await;
    let body: Value = serde_json::from_str(&super::deployment("web", 2)).expect("json");
    let created = server.send("POST", DEPLOYMENTS, &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let patched = server
        .send(
            "PATCH",
            &format!("{DEPLOYMENTS}/web/status"),
            &json!({
                "metadata": {"labels": {"x": "y"},
                             "annotations": {"deployment.kubernetes.io/revision": "1"}},
                "spec": {"replicas": 5},
                "status": {"observedGeneration": 1, "replicas": 2},
            }),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let d = server
        .send("GET", &format!("{DEPLOYMENTS}/web"), &Value::Null)
        .await
        .body;
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert!(d["metadata"]["labels"]["x"].is_null(), "{d}");
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["status"]["replicas"], 2);
}

/// `nodes/status` takes labels and annotations along with the status (upstream's node
/// status strategy resets only the spec; the kubelet patches its labels this way), while a
/// ReplicationController's `/status` keeps the stored metadata.
#[tokio::test]
async fn node_status_takes_labels_but_not_the_spec() {
    let server = Server::start().await;
    let nodes = "/api/v1/nodes";
    let created = server
        .send(
            "POST",
            nodes,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let patched = server
        .send(
            "PATCH",
            &format!("{nodes}/n1/status"),
            &json!({
                "metadata": {"labels": {"kubernetes.io/os": "linux"},
                             "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
                "spec": {"unschedulable": true},
                "status": {"capacity": {"pods": "110"}},
            }),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let node = server
        .send("GET", &format!("{nodes}/n1"), &Value::Null)
        .await
        .body;
    assert_eq!(node["metadata"]["labels"]["kubernetes.io/os"], "linux");
    assert_eq!(
        node["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
        "true"
    );
    assert_eq!(node["status"]["capacity"]["pods"], "110");
    assert!(node["spec"]["unschedulable"].is_null(), "{node}");

    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = server
        .send("POST", rcs, &controller(1, json!({"app": "web"})))
        .await;
    assert_eq!(rc.status, StatusCode::CREATED, "{}", rc.body);
    let name = rc.body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let status = server
        .send(
            "PATCH",
            &format!("{rcs}/{name}/status"),
            &json!({"metadata": {"labels": {"sneaky": "yes"}}, "status": {"replicas": 1}}),
        )
        .await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    assert!(
        status.body["metadata"]["labels"]["sneaky"].is_null(),
        "{}",
        status.body
    );
}
