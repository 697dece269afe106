//! Pods and workloads through the REST layer: warnings on create and update (pods and
//! deployments), and the `ephemeralcontainers` and `resize` part subresources.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::registry::testing::{Reply, Server, causes};

const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// The texts of a response's `Warning` headers (`299 - "<text>"`), unquoted.
fn warnings(reply: &Reply) -> Vec<String> {
    reply
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| {
            let quoted = v.strip_prefix("299 - ").unwrap_or(v);
            serde_json::from_str::<String>(quoted).unwrap_or_else(|_| quoted.to_owned())
        })
        .collect()
}

fn container() -> Value {
    json!({
        "name": "app", "image": "nginx:1.27",
        "env": [{"name": "FOO", "value": "1"}, {"name": "FOO", "value": "2"}],
        "ports": [{"containerPort": 80}, {"containerPort": 80}],
    })
}

#[tokio::test]
async fn pods_and_deployments_warn_as_upstream() {
    let server = Server::start().await;
    let pod = json!({"metadata": {"name": "web.1"}, "spec": {"containers": [container()]}});
    let expected = [
        "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]",
        "spec.containers[0].env[1]: hides previous definition of \"FOO\", which may be dropped when using apply",
        "spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
    ];
    // Dry run warns too, and stores nothing.
    let dry = server
        .send("POST", &format!("{PODS}?dryRun=All"), &pod)
        .await;
    assert_eq!(dry.status, StatusCode::CREATED, "{}", dry.body);
    assert_eq!(warnings(&dry), expected);
    let missing = server
        .send("GET", &format!("{PODS}/web.1"), &Value::Null)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    let created = server.send("POST", PODS, &pod).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(warnings(&created), expected);
    // The duplicates are kept as sent, as upstream stores them.
    let spec = &created.body["spec"]["containers"][0];
    assert_eq!(spec["env"].as_array().map(Vec::len), Some(2));
    assert_eq!(spec["ports"].as_array().map(Vec::len), Some(2));

    // Upstream skips warnings on pod updates.
    let mut update = created.body.clone();
    update["spec"]["containers"][0]["image"] = json!("nginx:1.28");
    let updated = server.send("PUT", &format!("{PODS}/web.1"), &update).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.body);
    assert!(warnings(&updated).is_empty(), "{:?}", warnings(&updated));

    // Unknown fields and the kind's warnings come together, unknown fields first.
    let other = json!({"metadata": {"name": "other"}, "spec": {"bogus": 1, "containers": [{
        "name": "app", "image": "nginx", "env": [{"name": "A", "value": "x"}, {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}});
    let reply = server.send("POST", PODS, &other).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    assert_eq!(
        warnings(&reply),
        [
            "unknown field \"spec.bogus\"",
            "spec.containers[0].env[1]: hides previous definition of \"A\", which may be dropped when using apply",
        ]
    );

    let deployment = json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                "nodeSelector": {"beta.kubernetes.io/arch": "amd64"},
                "containers": [container()]}},
        },
    });
    let created = server.send("POST", DEPLOYMENTS, &deployment).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let template_warnings = [
        "spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use \"kubernetes.io/arch\" instead",
        "spec.template.spec.containers[0].env[1]: hides previous definition of \"FOO\", which may be dropped when using apply",
        "spec.template.spec.containers[0].ports[1]: duplicate port definition with spec.template.spec.containers[0].ports[0]",
    ];
    assert_eq!(warnings(&created), template_warnings);

    // A change outside the spec keeps the generation: no warnings.
    let mut relabeled = created.body.clone();
    relabeled["metadata"]["labels"] = json!({"tier": "front"});
    let reply = server
        .send("PUT", &format!("{DEPLOYMENTS}/web"), &relabeled)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["metadata"]["generation"], 1);
    assert!(warnings(&reply).is_empty(), "{:?}", warnings(&reply));

    // A spec change (here through a patch) warns about the template again.
    let reply = server
        .send(
            "PATCH",
            &format!("{DEPLOYMENTS}/web"),
            &json!({"spec": {"replicas": 3}}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["metadata"]["generation"], 2);
    assert_eq!(warnings(&reply), template_warnings);

    // A dotted deployment name is valid, with upstream's warning for workloads.
    let mut dotted = deployment.clone();
    dotted["metadata"]["name"] = json!("web.v2");
    dotted["spec"]["template"]["spec"] = json!({"containers": [{"name": "app", "image": "nginx"}]});
    let reply = server.send("POST", DEPLOYMENTS, &dotted).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    assert_eq!(
        warnings(&reply),
        [
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"
        ]
    );
}

/// Upstream ValidatePodCreate: a pod with scheduling gates cannot be created bound.
#[tokio::test]
async fn a_gated_pod_cannot_be_created_with_its_node() {
    let server = Server::start().await;
    let pod = json!({"metadata": {"name": "g"}, "spec": {"nodeName": "n1",
        "schedulingGates": [{"name": "example.com/wait"}],
        "containers": [{"name": "app", "image": "nginx"}]}});
    let reply = server.send("POST", PODS, &pod).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.body
    );
    assert_eq!(
        causes(&reply),
        ["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]
    );
}

#[tokio::test]
async fn ephemeral_containers_are_added_through_their_subresource() {
    let server = Server::start().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "app", "image": "nginx"}]}});
    let reply = server.send("POST", PODS, &pod).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);

    // Not on create.
    let mut with_debugger = pod.clone();
    with_debugger["metadata"]["name"] = json!("q");
    with_debugger["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "busybox"}]);
    let reply = server.send("POST", PODS, &with_debugger).await;
    assert_eq!(
        causes(&reply),
        ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
    );

    // What `kubectl debug` sends: a strategic merge patch of the subresource.
    let uri = format!("{PODS}/p/ephemeralcontainers");
    let patch = json!({"spec": {
        "containers": [{"name": "app", "image": "changed"}],
        "ephemeralContainers": [{"name": "debugger", "image": "busybox",
            "targetContainerName": "app", "stdin": true, "tty": true, "resources": {}}],
    }});
    let reply = server.send_as("PATCH", &uri, STRATEGIC, &patch).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(warnings(&reply).is_empty());
    let debugger = &reply.body["spec"]["ephemeralContainers"][0];
    assert_eq!(debugger["name"], "debugger");
    assert_eq!(debugger["targetContainerName"], "app");
    assert_eq!(debugger["terminationMessagePolicy"], "File");
    assert_eq!(debugger["imagePullPolicy"], "Always");
    // Only ephemeral containers change through the subresource.
    assert_eq!(reply.body["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(reply.body["status"]["phase"], "Pending");

    let reply = server.send("GET", &uri, &Value::Null).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["kind"], "Pod");
    assert_eq!(
        reply.body["spec"]["ephemeralContainers"][0]["name"],
        "debugger"
    );

    // Existing ones may be neither removed nor changed.
    let remove = json!([{"op": "remove", "path": "/spec/ephemeralContainers/0"}]);
    let reply = server
        .send_as("PATCH", &uri, "application/json-patch+json", &remove)
        .await;
    assert_eq!(
        causes(&reply),
        [
            "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
        ]
    );
    let change =
        json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "alpine"}]}});
    let reply = server.send_as("PATCH", &uri, STRATEGIC, &change).await;
    let found = causes(&reply);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(
            "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"
        ),
        "{found:?}"
    );
    // Nor through the pod itself.
    let mut pod = server
        .send("GET", &format!("{PODS}/p"), &Value::Null)
        .await
        .body;
    pod["spec"]["ephemeralContainers"] = json!([]);
    let reply = server.send("PUT", &format!("{PODS}/p"), &pod).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.body
    );

    // Discovery lists the subresources with the Pod kind.
    let registry = server.state.registry.current();
    let pods = registry.lookup("", "v1", "pods").expect("pods");
    let listed: Vec<(String, Vec<&str>, String)> = crate::discovery::subresources(pods.as_ref())
        .iter()
        .filter(|s| ["ephemeralcontainers", "resize"].contains(&s.name))
        .map(|s| (s.name.to_owned(), s.verbs.clone(), s.kind.to_owned()))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "ephemeralcontainers".to_owned(),
                vec!["get", "patch", "update"],
                "Pod".to_owned()
            ),
            (
                "resize".to_owned(),
                vec!["get", "patch", "update"],
                "Pod".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn resize_changes_only_cpu_and_memory() {
    let server = Server::start().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{
        "name": "app", "image": "nginx",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    }]}});
    let reply = server.send("POST", PODS, &pod).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    let uri = format!("{PODS}/p/resize");

    // The pod itself refuses resource changes.
    let mut changed = reply.body.clone();
    changed["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("200m");
    let reply = server.send("PUT", &format!("{PODS}/p"), &changed).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.body
    );

    // The subresource takes a cpu change, and drops anything but resources.
    let patch = json!({"spec": {"containers": [{"name": "app", "image": "other",
        "resources": {"requests": {"cpu": "200m"}}}]}});
    let reply = server.send_as("PATCH", &uri, STRATEGIC, &patch).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let c = &reply.body["spec"]["containers"][0];
    assert_eq!(c["resources"]["requests"]["cpu"], "200m");
    assert_eq!(c["resources"]["requests"]["memory"], "64Mi");
    assert_eq!(c["image"], "nginx");
    assert_eq!(reply.body["metadata"]["generation"], 2);
    assert_eq!(reply.body["status"]["qosClass"], "Burstable");

    // Resources other than cpu and memory may not change.
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]}});
    let reply = server.send_as("PATCH", &uri, STRATEGIC, &patch).await;
    assert_eq!(
        causes(&reply),
        ["spec: Forbidden: only cpu and memory resources are mutable"]
    );
    // Nor may the QoS class, nor a memory limit go down without RestartContainer.
    let patch = json!({"spec": {"containers": [{"name": "app",
        "resources": {"limits": {"memory": "64Mi"}}}]}});
    let reply = server.send_as("PATCH", &uri, STRATEGIC, &patch).await;
    assert_eq!(
        causes(&reply),
        [
            "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"
        ]
    );
    let patch = json!({"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": "200m", "memory": "128Mi"},
        "limits": {"cpu": "200m", "memory": "128Mi"}}}]}});
    let reply = server.send_as("PATCH", &uri, STRATEGIC, &patch).await;
    assert_eq!(
        causes(&reply),
        [
            "spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
        ]
    );
}
