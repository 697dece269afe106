//! kubectl end to end against `skiff apiserver`, on SQLite and on etcd: kubectl 1.33 for
//! every verb a user types, kubectl 1.27 for version skew. No kubelet, no containers: the
//! API alone (pods stay Pending, unscheduled).

mod common;

use std::time::Duration;

use common::apiserver::{KUBECTL_OLDEST, Server, apiserver_cases, names, row, table};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

apiserver_cases! {
    bootstrap_objects,
    create_and_get,
    apply_twice_1_33,
    server_side_apply,
    watch,
    describe,
    patch_and_edit,
    label_annotate_scale,
    delete_cascade,
    wait,
    discovery,
    explain_enums,
    api_resources_all,
    custom_resources,
    pagination,
    errors,
    version_skew_1_27,
    generators_config,
    generators_workloads,
    generators_services,
    generators_cluster,
    protobuf_responses,
}

/// A Deployment `name` (label `app=<name>`) whose container `main` runs `image` with `env`.
fn deployment(name: &str, replicas: i32, image: &str, env: &[(&str, &str)]) -> String {
    let env: String = env
        .iter()
        .map(|(k, v)| format!("        - name: {k}\n          value: \"{v}\"\n"))
        .collect();
    let env = if env.is_empty() {
        String::new()
    } else {
        format!("        env:\n{env}")
    };
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: main
        image: {image}
{env}"
    )
}

/// A Pod `name` with `labels` (`k: v` pairs) whose container `main` runs `image`.
fn pod(name: &str, image: &str, labels: &[(&str, &str)]) -> String {
    let labels: String = labels
        .iter()
        .map(|(k, v)| format!("    {k}: {v}\n"))
        .collect();
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
{labels}spec:
  containers:
  - name: main
    image: {image}
"
    )
}

/// A ConfigMap `name` with `data` and `labels`.
fn configmap(name: &str, data: &[(&str, &str)], labels: &[(&str, &str)]) -> String {
    let map = |pairs: &[(&str, &str)]| -> String {
        pairs
            .iter()
            .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
            .collect()
    };
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  labels:
{}data:
{}",
        if labels.is_empty() {
            "    {}\n".to_string()
        } else {
            map(labels)
        },
        map(data)
    )
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("bad JSON ({e}):\n{text}"))
}

/// The four namespaces and the `kubernetes` service exist from the start; `/version`
/// reports the emulated release.
fn bootstrap_objects(server: Server) {
    let rows = table(&server.kubectl_ok(&["get", "namespaces"]));
    assert_eq!(rows[0], ["NAME", "STATUS", "AGE"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(row(&rows, ns)[1], "Active", "{rows:?}");
    }

    let svc = server.get_json(&["service", "kubernetes", "-n", "default"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["clusterIP"], "10.96.0.1",
        "first IP of 10.96.0.0/12"
    );
    assert_eq!(svc["spec"]["ports"][0]["name"], "https");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], server.port());
    let rows = table(&server.kubectl_ok(&["get", "services", "-n", "default"]));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        row(&rows, "kubernetes")[..5],
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    );

    let version = json_of(&server.kubectl_ok(&["version", "-o", "json"]));
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.37.0+skiff");
    assert_eq!(version["serverVersion"]["major"], "1");
    assert_eq!(version["serverVersion"]["minor"], "37");
    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(
            server.kubectl_ok(&["get", "--raw", path]).trim(),
            "ok",
            "{path}"
        );
    }
}

/// `create -f` of several kinds, then `get` in every output format, with label and field
/// selectors, and the defaults the server filled in.
fn create_and_get(server: Server) {
    let file = server.manifest(
        "objects.yaml",
        &[
            configmap("settings", &[("a", "1"), ("b", "2")], &[]),
            pod(
                "front",
                "registry.example/web:1.0",
                &[("app", "web"), ("tier", "front")],
            ),
            pod(
                "back",
                "registry.example/db",
                &[("app", "web"), ("tier", "back")],
            ),
            deployment("web", 2, "registry.example/web:1.0", &[]),
        ]
        .join("---\n"),
    );
    let out = server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "configmap/settings created",
            "pod/front created",
            "pod/back created",
            "deployment.apps/web created"
        ]
    );

    // Tables with the upstream columns.
    let rows = table(&server.kubectl_ok(&["get", "pods"]));
    assert_eq!(rows[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(row(&rows, "front")[1..4], ["0/1", "Pending", "0"]);
    let rows = table(&server.kubectl_ok(&["get", "pods", "-o", "wide"]));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ]
    );
    assert_eq!(
        row(&rows, "back")[5..],
        ["<none>", "<none>", "<none>", "<none>"]
    );
    let rows = table(&server.kubectl_ok(&["get", "deployments", "-o", "wide"]));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let web = row(&rows, "web");
    assert_eq!(web[1], "0/2");
    assert_eq!(web[5..], ["main", "registry.example/web:1.0", "app=web"]);
    let rows = table(&server.kubectl_ok(&["get", "configmaps", "settings"]));
    assert_eq!(rows[0], ["NAME", "DATA", "AGE"]);
    assert_eq!(row(&rows, "settings")[1], "2");

    // JSON with the metadata and defaults the server set.
    let front = server.get_json(&["pod", "front"]);
    let meta = &front["metadata"];
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["uid"].as_str().map(str::len), Some(36), "{meta}");
    assert!(meta["creationTimestamp"].is_string(), "{meta}");
    let rv = meta["resourceVersion"].as_str().unwrap_or_default();
    assert!(rv.parse::<u64>().is_ok(), "resourceVersion {rv:?}");
    let spec = &front["spec"];
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        spec["containers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );
    assert_eq!(front["status"]["phase"], "Pending");
    let web = server.get_json(&["deployment", "web"]);
    assert_eq!(web["metadata"]["generation"], 1);
    assert_eq!(web["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(web["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(web["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(web["spec"]["progressDeadlineSeconds"], 600);

    // YAML and jsonpath.
    let yaml = server.kubectl_ok(&["get", "pod", "back", "-o", "yaml"]);
    assert!(yaml.contains("kind: Pod\n"), "{yaml}");
    assert!(yaml.contains("  restartPolicy: Always\n"), "{yaml}");
    assert_eq!(
        server.kubectl_ok(&[
            "get",
            "pod",
            "back",
            "-o",
            "jsonpath={.spec.containers[0].imagePullPolicy}"
        ]),
        "Always",
        "an image without a tag is pulled Always"
    );
    assert_eq!(
        server.kubectl_ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]),
        "back front"
    );

    // Labels and selectors.
    let rows = table(&server.kubectl_ok(&["get", "pods", "--show-labels"]));
    assert_eq!(rows[0].last().map(String::as_str), Some("LABELS"));
    assert_eq!(
        row(&rows, "front").last().map(String::as_str),
        Some("app=web,tier=front")
    );
    let select = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["get", "pods", "-o", "name"];
        all.extend_from_slice(args);
        server
            .kubectl_ok(&all)
            .lines()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(select(&["-l", "tier=front"]), ["pod/front"]);
    assert_eq!(
        select(&["-l", "tier in (front,back)"]),
        ["pod/back", "pod/front"]
    );
    assert_eq!(select(&["-l", "tier!=front"]), ["pod/back"]);
    assert_eq!(
        select(&["-l", "app=web,!missing"]),
        ["pod/back", "pod/front"]
    );
    assert!(select(&["-l", "tier=none"]).is_empty());
    assert_eq!(
        select(&["--field-selector", "metadata.name=back"]),
        ["pod/back"]
    );
    assert_eq!(
        select(&["--field-selector", "status.phase=Pending,spec.nodeName="]),
        ["pod/back", "pod/front"]
    );
    assert!(select(&["--field-selector", "status.phase=Running"]).is_empty());
    let err = server.kubectl_err(&["get", "pods", "--field-selector", "spec.bogus=x"]);
    assert!(err.contains("BadRequest"), "{err}");

    // get --raw with limit: one item and a continue token, then the rest.
    let page =
        json_of(&server.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/default/pods?limit=1"]));
    assert_eq!(page["kind"], "PodList");
    assert_eq!(page["apiVersion"], "v1");
    assert_eq!(names(&page), ["back"]);
    assert_eq!(
        page["metadata"]["remainingItemCount"], 1,
        "{}",
        page["metadata"]
    );
    let token = page["metadata"]["continue"].as_str().unwrap_or_default();
    assert!(!token.is_empty(), "{}", page["metadata"]);
    let rest = json_of(&server.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/pods?limit=1&continue={token}"),
    ]));
    assert_eq!(names(&rest), ["front"]);
    assert!(
        rest["metadata"]["continue"]
            .as_str()
            .is_none_or(str::is_empty),
        "{}",
        rest["metadata"]
    );
}

fn apply_twice_1_33(server: Server) {
    apply_twice(&server, common::apiserver::KUBECTL);
}

/// Client-side `apply` creates, leaves an unchanged object alone, and applies a change (a
/// new image and a removed env var) as a strategic merge patch.
fn apply_twice(server: &Server, minor: u32) {
    let v1 = server.manifest(
        "v1.yaml",
        &deployment(
            "api",
            1,
            "registry.example/api:1.0",
            &[("A", "1"), ("B", "2")],
        ),
    );
    let v2 = server.manifest(
        "v2.yaml",
        &deployment("api", 1, "registry.example/api:2.0", &[("A", "1")]),
    );
    let apply = |file: &std::path::Path| {
        server
            .kubectl_ok_at(minor, &["apply", "-f", file.to_str().unwrap()])
            .trim()
            .to_string()
    };
    assert_eq!(apply(&v1), "deployment.apps/api created");
    assert_eq!(apply(&v1), "deployment.apps/api unchanged");
    assert_eq!(apply(&v2), "deployment.apps/api configured");

    let out = server.kubectl_ok_at(minor, &["get", "deployment", "api", "-o", "json"]);
    let api = json_of(&out);
    let container = &api["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/api:2.0");
    assert_eq!(container["env"], json!([{"name": "A", "value": "1"}]));
    assert_eq!(api["metadata"]["generation"], 2);
    let applied =
        api["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_default();
    assert!(applied.contains("registry.example/api:2.0"), "{applied:?}");
}

/// `apply --server-side`: creates, conflicts with another field manager on a changed
/// field, `--force-conflicts` takes it over, and both managers own fields.
fn server_side_apply(server: Server) {
    let v1 = server.manifest(
        "ssa1.yaml",
        &deployment("ssa", 1, "registry.example/ssa:1", &[]),
    );
    let v2 = server.manifest(
        "ssa2.yaml",
        &deployment("ssa", 3, "registry.example/ssa:1", &[]),
    );
    let (v1, v2) = (v1.to_str().unwrap(), v2.to_str().unwrap());
    let created = server.kubectl_ok(&["apply", "--server-side", "-f", v1]);
    assert_eq!(created.trim(), "deployment.apps/ssa serverside-applied");
    let conflict =
        server.kubectl_err(&["apply", "--server-side", "--field-manager=other", "-f", v2]);
    assert!(
        conflict
            .contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{conflict}"
    );
    let forced = server.kubectl_ok(&[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        v2,
    ]);
    assert_eq!(forced.trim(), "deployment.apps/ssa serverside-applied");
    let ssa = server.get_json(&["deployment", "ssa", "--show-managed-fields"]);
    assert_eq!(ssa["spec"]["replicas"], 3);
    let mut managers: Vec<(&str, &str)> = ssa["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let text = |k: &str| e[k].as_str().unwrap_or_default();
                    (text("manager"), text("operation"))
                })
                .collect()
        })
        .unwrap_or_default();
    managers.sort();
    assert_eq!(managers, [("kubectl", "Apply"), ("other", "Apply")]);
}

/// `get -w` sees a concurrent create, update and delete (server-side Table watch and a
/// jsonpath watch of one object).
fn watch(server: Server) {
    create_configmap(&server, "w1", "v", "one");
    let mut table_watch =
        server.kubectl_spawn(&["get", "configmaps", "-w", "--output-watch-events"]);
    let mut value_watch = server.kubectl_spawn(&[
        "get",
        "configmap",
        "w1",
        "-w",
        "-o",
        "jsonpath={.data.v}{\"\\n\"}",
    ]);
    let cells =
        |line: &str| -> Vec<String> { line.split_whitespace().map(str::to_string).collect() };
    let header = table_watch.wait_line(WAIT, |l| l.starts_with("EVENT"));
    assert_eq!(cells(&header), ["EVENT", "NAME", "DATA", "AGE"]);
    table_watch.wait_line(WAIT, |l| l.starts_with("ADDED") && l.contains(" w1 "));
    assert_eq!(value_watch.wait_line(WAIT, |l| !l.is_empty()), "one");

    create_configmap(&server, "w2", "v", "x");
    let added = table_watch.wait_line(WAIT, |l| cells(l).get(1).is_some_and(|c| c == "w2"));
    assert_eq!(cells(&added)[..3], ["ADDED", "w2", "1"]);
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "w1",
        "--type=merge",
        "-p",
        r#"{"data":{"v":"two","w":"3"}}"#,
    ]);
    let modified = table_watch.wait_line(WAIT, |l| l.starts_with("MODIFIED"));
    assert_eq!(cells(&modified)[..3], ["MODIFIED", "w1", "2"]);
    assert_eq!(value_watch.wait_line(WAIT, |l| !l.is_empty()), "two");
    server.kubectl_ok(&["delete", "configmap", "w2"]);
    let deleted = table_watch.wait_line(WAIT, |l| l.starts_with("DELETED"));
    assert_eq!(cells(&deleted)[..2], ["DELETED", "w2"]);
}

/// The value of the `describe` line `Key:  value` (first match), trimmed.
fn described<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key:?} line in:\n{text}"))
}

fn describe(server: Server) {
    let file = server.manifest(
        "objects.yaml",
        &[
            pod("p1", "registry.example/web:1.0", &[("app", "web")]),
            deployment("web", 2, "registry.example/web:1.0", &[]),
            configmap("settings", &[("color", "blue")], &[]),
        ]
        .join("---\n"),
    );
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);

    let out = server.kubectl_ok(&["describe", "pod", "p1"]);
    assert_eq!(described(&out, "Name"), "p1");
    assert_eq!(described(&out, "Namespace"), "default");
    assert_eq!(described(&out, "Labels"), "app=web");
    assert_eq!(described(&out, "Status"), "Pending");
    assert_eq!(described(&out, "Node"), "<none>");
    assert_eq!(described(&out, "    Image"), "registry.example/web:1.0");
    assert!(out.contains("\nContainers:\n  main:\n"), "{out}");
    assert!(out.contains("\nEvents:"), "{out}");

    let out = server.kubectl_ok(&["describe", "deployment", "web"]);
    assert_eq!(described(&out, "Name"), "web");
    assert_eq!(described(&out, "Selector"), "app=web");
    assert!(
        described(&out, "Replicas").starts_with("2 desired"),
        "{out}"
    );
    assert_eq!(described(&out, "StrategyType"), "RollingUpdate");
    assert_eq!(
        described(&out, "RollingUpdateStrategy"),
        "25% max unavailable, 25% max surge"
    );

    let out = server.kubectl_ok(&["describe", "configmap", "settings"]);
    assert!(out.contains("\ncolor:\n----\nblue\n"), "{out}");
}

/// `kubectl patch` with each patch type, and `kubectl edit` through a sed `KUBE_EDITOR`.
fn patch_and_edit(server: Server) {
    let manifest = deployment(
        "web",
        1,
        "registry.example/web:1.0",
        &[("A", "1"), ("B", "2")],
    ) + "      - name: side\n        image: registry.example/side:1.0\n";
    let file = server.manifest("web.yaml", &manifest);
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let containers = |server: &Server| -> Value {
        server.get_json(&["deployment", "web"])["spec"]["template"]["spec"]["containers"].clone()
    };

    // Strategic merge: containers merge by name; env and the other container stay.
    let out = server.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.example/web:2.0"}]}}}}"#,
    ]);
    assert_eq!(out.trim(), "deployment.apps/web patched");
    let c = containers(&server);
    assert_eq!(c.as_array().map(Vec::len), Some(2), "{c}");
    assert_eq!(c[0]["image"], "registry.example/web:2.0");
    assert_eq!(
        c[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(c[1]["name"], "side");

    // JSON merge patch: a list is replaced whole; null removes a key.
    server.kubectl_ok(&["label", "deployment", "web", "team=blue"]);
    server.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"team":null,"tier":"web"}},"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.example/web:3.0"}]}}}}"#,
    ]);
    let web = server.get_json(&["deployment", "web"]);
    assert_eq!(
        web["metadata"]["labels"],
        json!({"app": "web", "tier": "web"})
    );
    let c = &web["spec"]["template"]["spec"]["containers"];
    assert_eq!(c.as_array().map(Vec::len), Some(1), "{c}");
    assert_eq!(c[0]["image"], "registry.example/web:3.0");
    assert!(c[0].get("env").is_none(), "{c}");
    assert_eq!(
        c[0]["imagePullPolicy"], "IfNotPresent",
        "defaults apply to patched objects"
    );

    // JSON patch, and a failing test operation that changes nothing.
    server.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":4},{"op":"add","path":"/metadata/annotations","value":{"note":"hi"}}]"#,
    ]);
    let web = server.get_json(&["deployment", "web"]);
    assert_eq!(web["spec"]["replicas"], 4);
    assert_eq!(web["metadata"]["annotations"]["note"], "hi");
    let generation = web["metadata"]["generation"].clone();
    server.kubectl_err(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":99},{"op":"replace","path":"/spec/replicas","value":5}]"#,
    ]);
    let web = server.get_json(&["deployment", "web"]);
    assert_eq!(web["spec"]["replicas"], 4);
    assert_eq!(web["metadata"]["generation"], generation);

    // kubectl edit, the editor being sed on the temporary file.
    create_configmap(&server, "edited", "v", "one");
    let out = server.kubectl_with(
        &["edit", "configmap", "edited"],
        &[("KUBE_EDITOR", "sed -i s/one/two/")],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        server.report(33, &["edit"], &out, "edit")
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "configmap/edited edited"
    );
    assert_eq!(
        server.kubectl_ok(&["get", "configmap", "edited", "-o", "jsonpath={.data.v}"]),
        "two"
    );
    let out = server.kubectl_with(
        &["edit", "deployment", "web"],
        &[("KUBE_EDITOR", "sed -i 's/replicas: 4/replicas: 6/'")],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        server.report(33, &["edit"], &out, "edit")
    );
    assert_eq!(
        server.kubectl_ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "6"
    );
}

fn label_annotate_scale(server: Server) {
    let file = server.manifest(
        "objects.yaml",
        &[
            pod("p1", "registry.example/web:1.0", &[("app", "web")]),
            deployment("web", 2, "registry.example/web:1.0", &[]),
        ]
        .join("---\n"),
    );
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let labels = |server: &Server| server.get_json(&["pod", "p1"])["metadata"]["labels"].clone();

    assert_eq!(
        server
            .kubectl_ok(&["label", "pod", "p1", "env=prod"])
            .trim(),
        "pod/p1 labeled"
    );
    assert_eq!(labels(&server), json!({"app": "web", "env": "prod"}));
    let err = server.kubectl_err(&["label", "pod", "p1", "env=dev"]);
    assert!(
        err.contains("'env' already has a value (prod), and --overwrite is false"),
        "{err}"
    );
    server.kubectl_ok(&["label", "pod", "p1", "env=dev", "--overwrite"]);
    assert_eq!(labels(&server)["env"], "dev");
    let rows = table(&server.kubectl_ok(&["get", "pods", "--show-labels"]));
    assert_eq!(
        row(&rows, "p1").last().map(String::as_str),
        Some("app=web,env=dev")
    );
    assert_eq!(
        server.kubectl_ok(&["label", "pod", "p1", "env-"]).trim(),
        "pod/p1 unlabeled"
    );
    assert_eq!(labels(&server), json!({"app": "web"}));
    let err = server.kubectl_err(&["label", "pod", "p1", "bad key=x"]);
    assert!(!err.is_empty());

    assert_eq!(
        server
            .kubectl_ok(&["annotate", "pod", "p1", "owner=team-a"])
            .trim(),
        "pod/p1 annotated"
    );
    assert_eq!(
        server.kubectl_ok(&[
            "get",
            "pod",
            "p1",
            "-o",
            "jsonpath={.metadata.annotations.owner}"
        ]),
        "team-a"
    );
    server.kubectl_ok(&["annotate", "pod", "p1", "owner-"]);
    assert!(
        server.get_json(&["pod", "p1"])["metadata"]["annotations"]
            .get("owner")
            .is_none()
    );

    assert_eq!(
        server
            .kubectl_ok(&["scale", "deployment", "web", "--replicas=3"])
            .trim(),
        "deployment.apps/web scaled"
    );
    let web = server.get_json(&["deployment", "web"]);
    assert_eq!(web["spec"]["replicas"], 3);
    assert_eq!(web["metadata"]["generation"], 2);
    let err = server.kubectl_err(&[
        "scale",
        "deployment",
        "web",
        "--current-replicas=2",
        "--replicas=5",
    ]);
    assert!(err.contains("Expected replicas to be 2, was 3"), "{err}");
    assert_eq!(
        server.get_json(&["deployment", "web"])["spec"]["replicas"],
        3
    );
    let scale = json_of(&server.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
    ]));
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=web");
}

/// `delete` and its `--cascade` variants: background deletes at once; foreground and
/// orphan leave the object with `deletionTimestamp` and the garbage collector's
/// finalizer, removed by the last finalizer's removal.
fn delete_cascade(server: Server) {
    let file = server.manifest(
        "objects.yaml",
        &[
            pod("p1", "registry.example/web:1.0", &[]),
            configmap("c1", &[("a", "b")], &[]),
            deployment("bg", 1, "registry.example/web:1.0", &[]),
            deployment("fg", 1, "registry.example/web:1.0", &[]),
            deployment("orphan", 1, "registry.example/web:1.0", &[]),
        ]
        .join("---\n"),
    );
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let gone = |kind: &str, name: &str| {
        let err = server.kubectl_err(&["get", kind, name]);
        assert!(
            err.contains("(NotFound)") && err.contains(&format!("\"{name}\" not found")),
            "{err}"
        );
    };

    let out = server.kubectl_ok(&["delete", "configmap", "c1"]);
    assert!(out.starts_with("configmap \"c1\" deleted"), "{out}");
    gone("configmap", "c1");
    let out = server.kubectl_ok(&["delete", "pod", "p1"]);
    assert!(out.starts_with("pod \"p1\" deleted"), "{out}");
    gone("pod", "p1");
    let out = server.kubectl_ok(&["delete", "deployment", "bg", "--cascade=background"]);
    assert!(out.starts_with("deployment.apps \"bg\" deleted"), "{out}");
    gone("deployment", "bg");

    for (name, cascade, finalizer) in [
        ("fg", "--cascade=foreground", "foregroundDeletion"),
        ("orphan", "--cascade=orphan", "orphan"),
    ] {
        server.kubectl_ok(&["delete", "deployment", name, cascade, "--wait=false"]);
        let object = server.get_json(&["deployment", name]);
        assert!(
            object["metadata"]["deletionTimestamp"].is_string(),
            "{}",
            object["metadata"]
        );
        assert_eq!(
            object["metadata"]["finalizers"],
            json!([finalizer]),
            "{cascade}"
        );
        server.kubectl_ok(&[
            "patch",
            "deployment",
            name,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ]);
        gone("deployment", name);
    }

    // A finalizer of the user's own holds the object until it is removed.
    create_configmap(&server, "held", "a", "b");
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    server.kubectl_ok(&["delete", "configmap", "held", "--wait=false"]);
    let held = server.get_json(&["configmap", "held"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    server.kubectl_ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    gone("configmap", "held");
}

/// `kubectl wait` for a condition (set through the status subresource), for deletion and
/// for a jsonpath value, and its timeout.
fn wait(server: Server) {
    let file = server.manifest(
        "objects.yaml",
        &[
            pod("p1", "registry.example/web:1.0", &[]),
            configmap("c1", &[("a", "b")], &[]),
            deployment("web", 1, "registry.example/web:1.0", &[]),
        ]
        .join("---\n"),
    );
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);

    let mut ready =
        server.kubectl_spawn(&["wait", "--for=condition=Ready", "pod/p1", "--timeout=60s"]);
    let mut deleted =
        server.kubectl_spawn(&["wait", "--for=delete", "configmap/c1", "--timeout=60s"]);
    let mut scaled = server.kubectl_spawn(&[
        "wait",
        "--for=jsonpath={.spec.replicas}=3",
        "deployment/web",
        "--timeout=60s",
    ]);
    std::thread::sleep(Duration::from_millis(500));

    server.kubectl_ok(&[
        "patch",
        "pod",
        "p1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    server.kubectl_ok(&["delete", "configmap", "c1"]);
    server.kubectl_ok(&["scale", "deployment", "web", "--replicas=3"]);
    for (waiter, expected) in [
        (&mut ready, "pod/p1 condition met"),
        (&mut deleted, "configmap/c1 condition met"),
        (&mut scaled, "deployment.apps/web condition met"),
    ] {
        let (status, stderr) = waiter.wait_exit(WAIT);
        assert!(
            status.success(),
            "{expected}: {status}: {stderr} {:?}",
            waiter.seen()
        );
        assert_eq!(waiter.seen(), [expected]);
    }
    // The status subresource changed the status only.
    let p1 = server.get_json(&["pod", "p1"]);
    assert_eq!(p1["status"]["conditions"][0]["type"], "Ready");

    let err = server.kubectl_err(&[
        "wait",
        "--for=condition=Ready",
        "deployment/web",
        "--timeout=1s",
    ]);
    assert!(
        err.contains("timed out waiting for the condition on deployments/web"),
        "{err}"
    );
}

/// `kubectl explain` of an enum field prints its values (upstream's OpenAPI `enum`) and
/// the `Possible enum values:` paragraph of its description.
fn explain_enums(server: Server) {
    let out = server.kubectl_ok(&["explain", "pod.spec.restartPolicy"]);
    assert!(
        out.contains("restartPolicy") && out.contains("ENUM:"),
        "{out}"
    );
    let listed: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("ENUM:"))
        .skip(1)
        .take(3)
        .map(str::trim)
        .collect();
    assert_eq!(listed, ["Always", "Never", "OnFailure"], "{out}");
    assert!(out.contains("Possible enum values:"), "{out}");
    let out = server.kubectl_ok(&["explain", "service.spec.type"]);
    assert!(
        out.contains("ENUM:") && out.contains("ExternalName"),
        "{out}"
    );
}

/// api-versions, api-resources, explain and the raw discovery documents.
fn discovery(server: Server) {
    let versions: Vec<String> = server
        .kubectl_ok(&["api-versions"])
        .lines()
        .map(str::to_string)
        .collect();
    for group_version in [
        "v1",
        "apps/v1",
        "batch/v1",
        "coordination.k8s.io/v1",
        "discovery.k8s.io/v1",
        "events.k8s.io/v1",
        "certificates.k8s.io/v1",
        "node.k8s.io/v1",
        "scheduling.k8s.io/v1",
        "policy/v1",
    ] {
        assert!(
            versions.iter().any(|v| v == group_version),
            "{group_version} in {versions:?}"
        );
    }

    let rows = table(&server.kubectl_ok(&["api-resources"]));
    assert_eq!(
        rows[0],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    for expected in [
        &["pods", "po", "v1", "true", "Pod"][..],
        &["namespaces", "ns", "v1", "false", "Namespace"],
        &["services", "svc", "v1", "true", "Service"],
        &["configmaps", "cm", "v1", "true", "ConfigMap"],
        &["nodes", "no", "v1", "false", "Node"],
        &["deployments", "deploy", "apps/v1", "true", "Deployment"],
        &["cronjobs", "cj", "batch/v1", "true", "CronJob"],
        &["leases", "coordination.k8s.io/v1", "true", "Lease"],
        &[
            "priorityclasses",
            "pc",
            "scheduling.k8s.io/v1",
            "false",
            "PriorityClass",
        ],
        &[
            "poddisruptionbudgets",
            "pdb",
            "policy/v1",
            "true",
            "PodDisruptionBudget",
        ],
        &[
            "replicationcontrollers",
            "rc",
            "v1",
            "true",
            "ReplicationController",
        ],
        &["componentstatuses", "cs", "v1", "false", "ComponentStatus"],
        &["podtemplates", "v1", "true", "PodTemplate"],
        &[
            "storageclasses",
            "sc",
            "storage.k8s.io/v1",
            "false",
            "StorageClass",
        ],
        &["csinodes", "storage.k8s.io/v1", "false", "CSINode"],
        &[
            "ingresses",
            "ing",
            "networking.k8s.io/v1",
            "true",
            "Ingress",
        ],
        &[
            "networkpolicies",
            "netpol",
            "networking.k8s.io/v1",
            "true",
            "NetworkPolicy",
        ],
        &[
            "ipaddresses",
            "ip",
            "networking.k8s.io/v1",
            "false",
            "IPAddress",
        ],
        &[
            "clusterroles",
            "rbac.authorization.k8s.io/v1",
            "false",
            "ClusterRole",
        ],
        &[
            "rolebindings",
            "rbac.authorization.k8s.io/v1",
            "true",
            "RoleBinding",
        ],
        &[
            "validatingwebhookconfigurations",
            "admissionregistration.k8s.io/v1",
            "false",
            "ValidatingWebhookConfiguration",
        ],
        &[
            "flowschemas",
            "flowcontrol.apiserver.k8s.io/v1",
            "false",
            "FlowSchema",
        ],
    ] {
        assert!(
            rows.iter().any(|r| r == expected),
            "{expected:?} in {rows:#?}"
        );
    }
    let cluster_scoped = server.kubectl_ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    for name in [
        "namespaces",
        "nodes",
        "persistentvolumes",
        "certificatesigningrequests.certificates.k8s.io",
        "runtimeclasses.node.k8s.io",
    ] {
        assert!(
            cluster_scoped.lines().any(|l| l == name),
            "{name} in {cluster_scoped}"
        );
    }
    // The upstream kubelet's service watch, and the kinds' own verbs.
    let services = server.kubectl_ok(&[
        "get",
        "services",
        "-A",
        "--field-selector",
        "spec.clusterIP!=None",
        "-o",
        "name",
    ]);
    assert!(
        services.lines().any(|l| l == "service/kubernetes"),
        "{services}"
    );
    let refused = server.kubectl_err(&["delete", "--raw", "/api/v1/namespaces"]);
    assert!(
        refused.contains("MethodNotAllowed") || refused.contains("not allow"),
        "{refused}"
    );
    assert!(
        server
            .kubectl_ok(&["get", "namespace", "default", "-o", "name"])
            .contains("default")
    );
    let statuses = server.kubectl_ok(&["get", "componentstatuses", "-o", "name"]);
    assert!(statuses.contains("componentstatus/etcd-0"), "{statuses}");
    // The review APIs: a SelfSubjectReview and a SelfSubjectAccessReview.
    let whoami = json_of(&server.kubectl_ok(&["auth", "whoami", "-o", "json"]));
    assert_eq!(
        whoami["status"]["userInfo"]["username"], "kubernetes-admin",
        "{whoami}"
    );
    let can_i = server.kubectl_ok(&["auth", "can-i", "create", "pods"]);
    assert_eq!(can_i.trim(), "yes");
    let apps = server.kubectl_ok(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert_eq!(
        apps.lines().collect::<Vec<_>>(),
        [
            "controllerrevisions.apps",
            "daemonsets.apps",
            "deployments.apps",
            "replicasets.apps",
            "statefulsets.apps"
        ]
    );

    let out = server.kubectl_ok(&["explain", "pods.spec.containers"]);
    assert!(out.contains("KIND:") && out.contains("Pod"), "{out}");
    assert!(
        out.contains("containers\t<[]Container>") || out.contains("containers <[]Container>"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("image") && l.contains("<string>")),
        "{out}"
    );
    let out = server.kubectl_ok(&["explain", "deployment.spec.replicas"]);
    assert!(
        out.contains("replicas") && out.contains("<integer>"),
        "{out}"
    );

    let v3 = json_of(&server.kubectl_ok(&["get", "--raw", "/openapi/v3"]));
    for path in ["api/v1", "apis/apps/v1"] {
        assert!(
            v3["paths"][path]["serverRelativeURL"].is_string(),
            "{path} in {v3}"
        );
    }
    let group = json_of(&server.kubectl_ok(&["get", "--raw", "/apis/apps/v1"]));
    assert_eq!(group["kind"], "APIResourceList");
    assert_eq!(group["groupVersion"], "apps/v1");
}

/// The cells of a kubectl table by its header's column positions (cells may be empty, as
/// SHORTNAMES often are).
fn columns(text: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let mut starts = Vec::new();
    let mut previous = ' ';
    for (i, c) in header.char_indices() {
        if c != ' ' && previous == ' ' {
            starts.push(i);
        }
        previous = c;
    }
    lines
        .map(|line| {
            starts
                .iter()
                .enumerate()
                .map(|(n, start)| {
                    let end = starts.get(n + 1).copied().unwrap_or(line.len());
                    line.get(*start..end.min(line.len()))
                        .unwrap_or_default()
                        .trim()
                        .to_owned()
                })
                .collect()
        })
        .collect()
}

/// `[a b]` or `a,b` as a list.
fn list_cell(cell: &str) -> Vec<String> {
    cell.trim_matches(|c| c == '[' || c == ']')
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `kubectl api-resources -o wide` lists exactly the 60 resource types kube-apiserver
/// 1.33.3 serves by default, with upstream's names, short names, versions, scopes, kinds,
/// verbs and categories.
fn api_resources_all(server: Server) {
    const ALL: &str = "create,delete,deletecollection,get,list,patch,update,watch";
    const NS: &str = "create,delete,get,list,patch,update,watch";
    #[rustfmt::skip]
    let expected: &[(&str, &str, &str, bool, &str, &str, &str)] = &[
        ("bindings", "", "v1", true, "Binding", "create", ""),
        ("componentstatuses", "cs", "v1", false, "ComponentStatus", "get,list", ""),
        ("configmaps", "cm", "v1", true, "ConfigMap", ALL, ""),
        ("endpoints", "ep", "v1", true, "Endpoints", ALL, ""),
        ("events", "ev", "v1", true, "Event", ALL, ""),
        ("limitranges", "limits", "v1", true, "LimitRange", ALL, ""),
        ("namespaces", "ns", "v1", false, "Namespace", NS, ""),
        ("nodes", "no", "v1", false, "Node", ALL, ""),
        ("persistentvolumeclaims", "pvc", "v1", true, "PersistentVolumeClaim", ALL, ""),
        ("persistentvolumes", "pv", "v1", false, "PersistentVolume", ALL, ""),
        ("pods", "po", "v1", true, "Pod", ALL, "all"),
        ("podtemplates", "", "v1", true, "PodTemplate", ALL, ""),
        ("replicationcontrollers", "rc", "v1", true, "ReplicationController", ALL, "all"),
        ("resourcequotas", "quota", "v1", true, "ResourceQuota", ALL, ""),
        ("secrets", "", "v1", true, "Secret", ALL, ""),
        ("serviceaccounts", "sa", "v1", true, "ServiceAccount", ALL, ""),
        ("services", "svc", "v1", true, "Service", ALL, "all"),
        ("mutatingwebhookconfigurations", "", "admissionregistration.k8s.io/v1", false, "MutatingWebhookConfiguration", ALL, "api-extensions"),
        ("validatingadmissionpolicies", "", "admissionregistration.k8s.io/v1", false, "ValidatingAdmissionPolicy", ALL, "api-extensions"),
        ("validatingadmissionpolicybindings", "", "admissionregistration.k8s.io/v1", false, "ValidatingAdmissionPolicyBinding", ALL, "api-extensions"),
        ("validatingwebhookconfigurations", "", "admissionregistration.k8s.io/v1", false, "ValidatingWebhookConfiguration", ALL, "api-extensions"),
        ("customresourcedefinitions", "crd,crds", "apiextensions.k8s.io/v1", false, "CustomResourceDefinition", ALL, "api-extensions"),
        ("apiservices", "", "apiregistration.k8s.io/v1", false, "APIService", ALL, "api-extensions"),
        ("controllerrevisions", "", "apps/v1", true, "ControllerRevision", ALL, ""),
        ("daemonsets", "ds", "apps/v1", true, "DaemonSet", ALL, "all"),
        ("deployments", "deploy", "apps/v1", true, "Deployment", ALL, "all"),
        ("replicasets", "rs", "apps/v1", true, "ReplicaSet", ALL, "all"),
        ("statefulsets", "sts", "apps/v1", true, "StatefulSet", ALL, "all"),
        ("selfsubjectreviews", "", "authentication.k8s.io/v1", false, "SelfSubjectReview", "create", ""),
        ("tokenreviews", "", "authentication.k8s.io/v1", false, "TokenReview", "create", ""),
        ("localsubjectaccessreviews", "", "authorization.k8s.io/v1", true, "LocalSubjectAccessReview", "create", ""),
        ("selfsubjectaccessreviews", "", "authorization.k8s.io/v1", false, "SelfSubjectAccessReview", "create", ""),
        ("selfsubjectrulesreviews", "", "authorization.k8s.io/v1", false, "SelfSubjectRulesReview", "create", ""),
        ("subjectaccessreviews", "", "authorization.k8s.io/v1", false, "SubjectAccessReview", "create", ""),
        ("horizontalpodautoscalers", "hpa", "autoscaling/v2", true, "HorizontalPodAutoscaler", ALL, "all"),
        ("cronjobs", "cj", "batch/v1", true, "CronJob", ALL, "all"),
        ("jobs", "", "batch/v1", true, "Job", ALL, "all"),
        ("certificatesigningrequests", "csr", "certificates.k8s.io/v1", false, "CertificateSigningRequest", ALL, ""),
        ("leases", "", "coordination.k8s.io/v1", true, "Lease", ALL, ""),
        ("endpointslices", "", "discovery.k8s.io/v1", true, "EndpointSlice", ALL, ""),
        ("events", "ev", "events.k8s.io/v1", true, "Event", ALL, ""),
        ("flowschemas", "", "flowcontrol.apiserver.k8s.io/v1", false, "FlowSchema", ALL, ""),
        ("prioritylevelconfigurations", "", "flowcontrol.apiserver.k8s.io/v1", false, "PriorityLevelConfiguration", ALL, ""),
        ("ingressclasses", "", "networking.k8s.io/v1", false, "IngressClass", ALL, ""),
        ("ingresses", "ing", "networking.k8s.io/v1", true, "Ingress", ALL, ""),
        ("ipaddresses", "ip", "networking.k8s.io/v1", false, "IPAddress", ALL, ""),
        ("networkpolicies", "netpol", "networking.k8s.io/v1", true, "NetworkPolicy", ALL, ""),
        ("servicecidrs", "", "networking.k8s.io/v1", false, "ServiceCIDR", ALL, ""),
        ("runtimeclasses", "", "node.k8s.io/v1", false, "RuntimeClass", ALL, ""),
        ("poddisruptionbudgets", "pdb", "policy/v1", true, "PodDisruptionBudget", ALL, ""),
        ("clusterrolebindings", "", "rbac.authorization.k8s.io/v1", false, "ClusterRoleBinding", ALL, ""),
        ("clusterroles", "", "rbac.authorization.k8s.io/v1", false, "ClusterRole", ALL, ""),
        ("rolebindings", "", "rbac.authorization.k8s.io/v1", true, "RoleBinding", ALL, ""),
        ("roles", "", "rbac.authorization.k8s.io/v1", true, "Role", ALL, ""),
        ("priorityclasses", "pc", "scheduling.k8s.io/v1", false, "PriorityClass", ALL, ""),
        ("csidrivers", "", "storage.k8s.io/v1", false, "CSIDriver", ALL, ""),
        ("csinodes", "", "storage.k8s.io/v1", false, "CSINode", ALL, ""),
        ("csistoragecapacities", "", "storage.k8s.io/v1", true, "CSIStorageCapacity", ALL, ""),
        ("storageclasses", "sc", "storage.k8s.io/v1", false, "StorageClass", ALL, ""),
        ("volumeattachments", "", "storage.k8s.io/v1", false, "VolumeAttachment", ALL, ""),
    ];
    assert_eq!(expected.len(), 60);
    let split = |cell: &str| -> Vec<String> {
        let mut list: Vec<String> = list_cell(cell);
        list.sort();
        list
    };
    let mut want: Vec<Vec<String>> = expected
        .iter()
        .map(
            |(name, short, version, namespaced, kind, verbs, categories)| {
                vec![
                    (*name).to_owned(),
                    split(short).join(","),
                    (*version).to_owned(),
                    namespaced.to_string(),
                    (*kind).to_owned(),
                    split(verbs).join(","),
                    split(categories).join(","),
                ]
            },
        )
        .collect();
    let text = server.kubectl_ok(&["api-resources", "-o", "wide"]);
    let mut got: Vec<Vec<String>> = columns(&text)
        .into_iter()
        .map(|row| {
            let cell = |i: usize| row.get(i).cloned().unwrap_or_default();
            vec![
                cell(0),
                split(&cell(1)).join(","),
                cell(2),
                cell(3),
                cell(4),
                split(&cell(5)).join(","),
                split(&cell(6)).join(","),
            ]
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{text}");
}

/// A CustomResourceDefinition through kubectl: established, its objects pruned, defaulted
/// and checked by a CEL rule, printed with its columns, explained, scaled, and deleted
/// with the definition.
fn custom_resources(server: Server) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.demo.skiff.dev"},
        "spec": {
            "group": "demo.skiff.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
                },
                "additionalPrinterColumns": [
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "What the widget should be.",
                            "x-kubernetes-validations": [
                                {"rule": "self.replicas <= 5", "message": "no more than 5 widgets"}
                            ],
                            "properties": {
                                "color": {"type": "string", "enum": ["red", "blue"], "default": "red",
                                          "description": "The widget's color."},
                                "replicas": {"type": "integer", "minimum": 0, "default": 1}
                            }
                        },
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
                    }
                }}
            }]
        }
    });
    let apply = |name: &str, manifest: &str| {
        let path = server.manifest(name, manifest);
        let path = path.to_string_lossy().into_owned();
        server
            .api
            .kubectl(33, &["apply", "--validate=warn", "-f", &path])
    };
    let applied = apply("crd.json", &crd.to_string());
    assert!(applied.status.success(), "{applied:?}");
    server.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.demo.skiff.dev",
        "--timeout=30s",
    ]);
    let widget = |name: &str, spec: Value| {
        json!({"apiVersion": "demo.skiff.dev/v1", "kind": "Widget",
               "metadata": {"name": name, "namespace": "default"}, "spec": spec})
        .to_string()
    };
    // Unknown fields are pruned, with a warning.
    let applied = apply(
        "w1.json",
        &widget("w1", json!({"replicas": 2, "shape": "round"})),
    );
    assert!(applied.status.success(), "{applied:?}");
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(stderr.contains(r#"unknown field "spec.shape""#), "{stderr}");
    let stored = json_of(&server.kubectl_ok(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(
        stored["spec"],
        json!({"color": "red", "replicas": 2}),
        "{stored}"
    );

    let refused = apply("w2.json", &widget("w2", json!({"replicas": 9})));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("no more than 5 widgets"),
        "{stderr}"
    );
    let refused = apply("w3.json", &widget("w3", json!({"color": "green"})));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains(r#"Unsupported value: "green""#),
        "{stderr}"
    );

    let rows = table(&server.kubectl_ok(&["get", "wd"]));
    assert_eq!(rows[0], ["NAME", "COLOR", "REPLICAS"]);
    assert_eq!(rows[1], ["w1", "red", "2"]);

    let explained = server.kubectl_ok(&["explain", "widget.spec"]);
    assert!(
        explained.contains("What the widget should be."),
        "{explained}"
    );
    assert!(
        explained.contains("color") && explained.contains("<string>"),
        "{explained}"
    );

    server.kubectl_ok(&["scale", "widget", "w1", "--replicas=4"]);
    let scaled = json_of(&server.kubectl_ok(&["get", "widget", "w1", "-o", "json"]));
    assert_eq!(scaled["spec"]["replicas"], 4);

    // The served group version has its Local APIService, kept in sync (upstream's
    // crdregistration), and loses it with the definition.
    let registered = common::apiserver::eventually("v1.demo.skiff.dev APIService", WAIT, || {
        let get = server.api.kubectl(
            33,
            &["get", "apiservice", "v1.demo.skiff.dev", "-o", "json"],
        );
        get.status
            .success()
            .then(|| json_of(&String::from_utf8_lossy(&get.stdout)))
    });
    assert_eq!(registered["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(registered["spec"]["versionPriority"], 100);
    assert_eq!(
        registered["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );

    server.kubectl_ok(&[
        "delete",
        "crd",
        "widgets.demo.skiff.dev",
        "--wait=true",
        "--timeout=30s",
    ]);
    let gone = server.kubectl_err(&["get", "widgets.demo.skiff.dev"]);
    assert!(
        gone.contains("the server doesn't have a resource type"),
        "{gone}"
    );
    common::apiserver::eventually("v1.demo.skiff.dev APIService gone", WAIT, || {
        let get = server
            .api
            .kubectl(33, &["get", "apiservice", "v1.demo.skiff.dev"]);
        (!get.status.success()).then_some(())
    });
}

/// `get --chunk-size` pages through a list with limit/continue and shows it whole.
fn pagination(server: Server) {
    let all: Vec<String> = (0..25).map(|i| format!("page-{i:02}")).collect();
    let docs: Vec<String> = all
        .iter()
        .map(|name| configmap(name, &[("n", name)], &[("set", "page")]))
        .collect();
    let file = server.manifest("pages.yaml", &docs.join("---\n"));
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);

    let output = server.api.kubectl(
        33,
        &[
            "get",
            "configmaps",
            "-l",
            "set=page",
            "--chunk-size=10",
            "-o",
            "name",
            "-v=6",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let expected: Vec<String> = all.iter().map(|n| format!("configmap/{n}")).collect();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected);
    let requests: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("/configmaps?"))
        .collect();
    assert_eq!(
        requests.len(),
        3,
        "three pages of at most 10: {requests:#?}"
    );
    assert!(
        requests.iter().all(|l| l.contains("limit=10")),
        "{requests:#?}"
    );
    assert!(
        requests[1..].iter().all(|l| l.contains("continue=")),
        "{requests:#?}"
    );

    let rows =
        table(&server.kubectl_ok(&["get", "configmaps", "-l", "set=page", "--chunk-size=7"]));
    assert_eq!(rows.len(), 26, "one header and 25 rows: {rows:#?}");
    assert_eq!(
        rows.iter().filter(|r| r[0] == "NAME").count(),
        1,
        "{rows:#?}"
    );
}

/// Errors carry the upstream reasons and messages, and nothing partial is stored.
fn errors(server: Server) {
    let cm = server.manifest("cm.yaml", &configmap("c1", &[("a", "1")], &[]));
    let cm_path = cm.to_str().unwrap();
    server.kubectl_ok(&["create", "-f", cm_path]);

    // 409 AlreadyExists.
    let err = server.kubectl_err(&["create", "-f", cm_path]);
    assert!(
        err.contains(&format!(
            "Error from server (AlreadyExists): error when creating \"{cm_path}\": configmaps \"c1\" already exists"
        )),
        "{err}"
    );

    // 409 Conflict: a replace with a stale resourceVersion.
    let stale = server.kubectl_ok(&["get", "configmap", "c1", "-o", "json"]);
    let stale = server.manifest(
        "stale.json",
        &stale.replace("\"a\": \"1\"", "\"a\": \"stale\""),
    );
    server.kubectl_ok(&["label", "configmap", "c1", "changed=yes"]);
    let stale_path = stale.to_str().unwrap();
    let err = server.kubectl_err(&["replace", "-f", stale_path]);
    assert!(
        err.contains(&format!(
            "Error from server (Conflict): error when replacing \"{stale_path}\": Operation cannot be fulfilled on configmaps \"c1\": the object has been modified; please apply your changes to the latest version and try again"
        )),
        "{err}"
    );
    assert_eq!(
        server.kubectl_ok(&["get", "configmap", "c1", "-o", "jsonpath={.data.a}"]),
        "1"
    );

    // 422 Invalid with the upstream field errors.
    let invalid = [
        (
            "noimage.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: noimage\nspec:\n  containers:\n  - name: main\n",
            "The Pod \"noimage\" is invalid: spec.containers[0].image: Required value",
        ),
        (
            "negative.yaml",
            &deployment("negative", -1, "registry.example/web:1.0", &[]),
            "The Deployment \"negative\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "badname.yaml",
            &configmap("Bad_Name", &[("a", "1")], &[]),
            "The ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ),
    ];
    for (file, manifest, message) in invalid {
        let path = server.manifest(file, manifest);
        let err = server.kubectl_err(&["create", "-f", path.to_str().unwrap()]);
        assert!(err.contains(message), "expected {message:?} in:\n{err}");
    }
    let raw = server.api.kubectl(
        33,
        &["create", "--raw", "/api/v1/namespaces/default/pods", "-f", server.manifest("noimage.json", r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"noimage"},"spec":{"containers":[{"name":"main"}]}}"#).to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&raw.stderr);
    assert!(
        !raw.status.success() && stderr.contains("is invalid"),
        "{stderr}"
    );
    server.kubectl_err(&["get", "pod", "noimage"]);

    // 404 NotFound.
    let err = server.kubectl_err(&["get", "configmap", "nope"]);
    assert!(
        err.contains("Error from server (NotFound): configmaps \"nope\" not found"),
        "{err}"
    );
    let err = server.kubectl_err(&["get", "deployment", "nope"]);
    assert!(
        err.contains("Error from server (NotFound): deployments.apps \"nope\" not found"),
        "{err}"
    );
    let err = server.kubectl_err(&["delete", "namespace", "nope"]);
    assert!(
        err.contains("Error from server (NotFound): namespaces \"nope\" not found"),
        "{err}"
    );

    // Malformed input: kubectl's own YAML parser, then the server's JSON decoder.
    let bad = server.manifest(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n",
    );
    let err = server.kubectl_err(&["create", "-f", bad.to_str().unwrap()]);
    assert!(err.contains("error converting YAML to JSON"), "{err}");
    let bad = server.manifest(
        "bad.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"#,
    );
    let raw = server.api.kubectl(
        33,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/configmaps",
            "-f",
            bad.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&raw.stderr);
    assert!(
        !raw.status.success() && stderr.contains("BadRequest"),
        "{stderr}"
    );

    // Unknown fields: strict (kubectl's default) rejects, warn stores with a warning,
    // ignore stores silently.
    let with_foo = |name: &str| {
        deployment(name, 1, "registry.example/web:1.0", &[])
            .replace("spec:\n  replicas", "spec:\n  foo: bar\n  replicas")
    };
    let strict = server.manifest("strict.yaml", &with_foo("strict"));
    let err = server.kubectl_err(&["create", "-f", strict.to_str().unwrap()]);
    assert!(
        err.contains("BadRequest") && err.contains("unknown field \"spec.foo\""),
        "{err}"
    );
    server.kubectl_err(&["get", "deployment", "strict"]);
    let warn = server.manifest("warn.yaml", &with_foo("warn"));
    let out = server.api.kubectl(
        33,
        &["create", "-f", warn.to_str().unwrap(), "--validate=warn"],
    );
    assert!(
        out.status.success(),
        "{}",
        server.report(33, &["create", "--validate=warn"], &out, "warn")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: unknown field \"spec.foo\""),
        "{stderr}"
    );
    let ignore = server.manifest("ignore.yaml", &with_foo("ignore"));
    let out = server.api.kubectl(
        33,
        &["create", "-f", ignore.to_str().unwrap(), "--validate=false"],
    );
    assert!(
        out.status.success(),
        "{}",
        server.report(33, &["create", "--validate=false"], &out, "ignore")
    );
    assert!(String::from_utf8_lossy(&out.stderr).trim().is_empty());
    let stored = server.get_json(&["deployment", "ignore"]);
    assert!(stored["spec"].get("foo").is_none(), "{stored}");
}

/// kubectl 1.27 against the server: create, apply twice, get, explain, api-resources,
/// delete.
fn version_skew_1_27(server: Server) {
    let old = KUBECTL_OLDEST;
    let file = server.manifest(
        "objects.yaml",
        &[
            configmap("settings", &[("a", "1")], &[("app", "old")]),
            pod("p1", "registry.example/web:1.0", &[("app", "old")]),
        ]
        .join("---\n"),
    );
    let out = server.kubectl_ok_at(old, &["create", "-f", file.to_str().unwrap()]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["configmap/settings created", "pod/p1 created"]
    );
    apply_twice(&server, old);

    let rows = table(&server.kubectl_ok_at(old, &["get", "pods"]));
    assert_eq!(rows[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(row(&rows, "p1")[1..4], ["0/1", "Pending", "0"]);
    let list =
        json_of(&server.kubectl_ok_at(old, &["get", "configmaps", "-l", "app=old", "-o", "json"]));
    assert_eq!(names(&list), ["settings"]);

    let out = server.kubectl_ok_at(old, &["explain", "pods.spec.containers"]);
    assert!(
        out.contains("containers") && out.contains("Container"),
        "{out}"
    );
    let rows = table(&server.kubectl_ok_at(old, &["api-resources"]));
    assert!(
        rows.iter()
            .any(|r| r == &["deployments", "deploy", "apps/v1", "true", "Deployment"]),
        "{rows:#?}"
    );

    let out = server.kubectl_ok_at(old, &["delete", "-f", file.to_str().unwrap()]);
    assert!(
        out.contains("configmap \"settings\" deleted") && out.contains("pod \"p1\" deleted"),
        "{out}"
    );
    let err = server.kubectl_err_at(old, &["get", "configmap", "settings"]);
    assert!(err.contains("NotFound"), "{err}");
}

/// Creates a ConfigMap with kubectl's generator (a protobuf request body).
fn create_configmap(server: &Server, name: &str, key: &str, value: &str) {
    server.kubectl_ok(&[
        "create",
        "configmap",
        name,
        &format!("--from-literal={key}={value}"),
    ]);
}

/// kubectl's generators (`kubectl create configmap`) send protobuf request bodies.
#[test]
fn create_configmap_generator_sends_protobuf() {
    let server = Server::start(common::apiserver::Store::Sqlite);
    server.kubectl_ok(&["create", "configmap", "generated", "--from-literal=a=b"]);
    let stored = server.get_json(&["configmap", "generated"]);
    assert_eq!(stored["data"], json!({"a": "b"}));
}

/// Base64 of `text`, as `data` of a Secret holds it.
fn base64(text: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The decoded value of `key` in the `data` of the stored Secret `name`.
fn secret_value(server: &Server, name: &str, key: &str) -> Vec<u8> {
    use base64::Engine;
    let secret = server.get_json(&["secret", name]);
    let encoded = secret["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{secret}"));
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64 data")
}

/// kubectl 1.33's ConfigMap and Secret generators (protobuf bodies): the stored objects
/// carry the literal, file and binary data, the type, and no empty fields.
fn generators_config(server: Server) {
    let binary = server.manifest("blob.bin", "");
    std::fs::write(&binary, [0u8, 0xff, 0xfe, 1]).unwrap();
    let text = server.manifest("note.txt", "hello\n");
    server.kubectl_ok(&[
        "create",
        "configmap",
        "gen-cm",
        "--from-literal=a=b",
        "--from-literal=empty=",
        &format!("--from-file={}", text.display()),
        &format!("--from-file=blob={}", binary.display()),
    ]);
    let cm = server.get_json(&["configmap", "gen-cm"]);
    assert_eq!(
        cm["data"],
        json!({"a": "b", "empty": "", "note.txt": "hello\n"}),
        "{cm}"
    );
    assert_eq!(
        cm["binaryData"],
        json!({"blob": base64(&[0, 0xff, 0xfe, 1])})
    );
    assert_eq!(cm["metadata"]["namespace"], "default");
    assert!(cm["metadata"]["creationTimestamp"].is_string(), "{cm}");
    assert!(cm["metadata"].get("generateName").is_none(), "{cm}");

    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "gen-secret",
        "--from-literal=user=admin",
        "--type=example.com/creds",
    ]);
    let secret = server.get_json(&["secret", "gen-secret"]);
    assert_eq!(secret["type"], "example.com/creds");
    assert_eq!(secret["data"], json!({"user": base64(b"admin")}));

    let key = server.manifest("tls.key", "");
    let cert = server.manifest("tls.crt", "");
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=gen.example", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success());
    server.kubectl_ok(&[
        "create",
        "secret",
        "tls",
        "gen-tls",
        &format!("--cert={}", cert.display()),
        &format!("--key={}", key.display()),
    ]);
    let tls = server.get_json(&["secret", "gen-tls"]);
    assert_eq!(tls["type"], "kubernetes.io/tls");
    assert_eq!(
        secret_value(&server, "gen-tls", "tls.crt"),
        std::fs::read(&cert).unwrap()
    );

    server.kubectl_ok(&[
        "create",
        "secret",
        "docker-registry",
        "gen-pull",
        "--docker-server=registry.example",
        "--docker-username=robot",
        "--docker-password=s3cret",
    ]);
    let pull = server.get_json(&["secret", "gen-pull"]);
    assert_eq!(pull["type"], "kubernetes.io/dockerconfigjson");
    let config: Value =
        serde_json::from_slice(&secret_value(&server, "gen-pull", ".dockerconfigjson")).unwrap();
    assert_eq!(config["auths"]["registry.example"]["username"], "robot");
    assert_eq!(config["auths"]["registry.example"]["password"], "s3cret");
}

/// kubectl 1.33's Deployment, Job and CronJob generators (protobuf bodies): the stored
/// objects carry what was asked, defaulted as upstream (empty strings Go sends for unset
/// fields are not stored).
fn generators_workloads(server: Server) {
    server.kubectl_ok(&[
        "create",
        "deployment",
        "gen-web",
        "--image=registry.example/web:1.0",
        "--replicas=3",
        "--port=8080",
    ]);
    let deploy = server.get_json(&["deployment", "gen-web"]);
    assert_eq!(deploy["spec"]["replicas"], 3);
    assert_eq!(
        deploy["spec"]["selector"],
        json!({"matchLabels": {"app": "gen-web"}})
    );
    assert_eq!(
        deploy["spec"]["strategy"]["type"], "RollingUpdate",
        "{deploy}"
    );
    assert_eq!(deploy["spec"]["revisionHistoryLimit"], 10);
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "web");
    assert_eq!(container["image"], "registry.example/web:1.0");
    assert_eq!(
        container["ports"],
        json!([{"containerPort": 8080, "protocol": "TCP"}])
    );
    assert_eq!(container["resources"], json!({}));
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    let pod_spec = &deploy["spec"]["template"]["spec"];
    assert_eq!(pod_spec["restartPolicy"], "Always");
    assert_eq!(pod_spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod_spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod_spec["schedulerName"], "default-scheduler");

    server.kubectl_ok(&[
        "create",
        "job",
        "gen-job",
        "--image=registry.example/tool:1",
        "--",
        "echo",
        "hi",
    ]);
    let job = server.get_json(&["job", "gen-job"]);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["echo", "hi"]));
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert_eq!(job["spec"]["backoffLimit"], 6);
    assert_eq!(job["spec"]["completions"], 1);

    server.kubectl_ok(&[
        "create",
        "cronjob",
        "gen-cron",
        "--image=registry.example/tool:1",
        "--schedule=*/5 * * * *",
        "--",
        "date",
    ]);
    let cron = server.get_json(&["cronjob", "gen-cron"]);
    assert_eq!(cron["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(cron["spec"]["suspend"], false);
    let template = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(template["containers"][0]["command"], json!(["date"]));
    assert_eq!(template["restartPolicy"], "OnFailure");
}

/// kubectl 1.33's Service generators (protobuf bodies): ClusterIP, NodePort and
/// ExternalName services as asked, with allocated addresses and ports.
fn generators_services(server: Server) {
    server.kubectl_ok(&["create", "service", "clusterip", "gen-cip", "--tcp=80:8080"]);
    let svc = server.get_json(&["service", "gen-cip"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]),
        "{svc}"
    );
    assert_eq!(svc["spec"]["selector"], json!({"app": "gen-cip"}));
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| !ip.is_empty()),
        "{svc}"
    );

    server.kubectl_ok(&[
        "create",
        "service",
        "nodeport",
        "gen-np",
        "--tcp=443:8443",
        "--node-port=30443",
    ]);
    let svc = server.get_json(&["service", "gen-np"]);
    assert_eq!(svc["spec"]["type"], "NodePort");
    assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30443, "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8443);

    server.kubectl_ok(&[
        "create",
        "service",
        "externalname",
        "gen-ext",
        "--external-name=db.example.com",
    ]);
    let svc = server.get_json(&["service", "gen-ext"]);
    assert_eq!(svc["spec"]["type"], "ExternalName");
    assert_eq!(svc["spec"]["externalName"], "db.example.com");
    assert!(svc["spec"].get("clusterIP").is_none(), "{svc}");
}

/// kubectl 1.33's Namespace, ServiceAccount, ResourceQuota, PriorityClass,
/// PodDisruptionBudget generators and `create token` (protobuf bodies).
fn generators_cluster(server: Server) {
    server.kubectl_ok(&["create", "namespace", "gen-ns"]);
    let ns = server.get_json(&["namespace", "gen-ns"]);
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));

    server.kubectl_ok(&["create", "serviceaccount", "gen-sa", "-n", "gen-ns"]);
    let sa = server.get_json(&["serviceaccount", "gen-sa", "-n", "gen-ns"]);
    assert_eq!(sa["metadata"]["namespace"], "gen-ns");

    server.kubectl_ok(&[
        "create",
        "quota",
        "gen-quota",
        "--hard=cpu=1,memory=1Gi,pods=2",
        "--scopes=NotBestEffort",
    ]);
    let quota = server.get_json(&["resourcequota", "gen-quota"]);
    assert_eq!(
        quota["spec"]["hard"],
        json!({"cpu": "1", "memory": "1Gi", "pods": "2"})
    );
    assert_eq!(quota["spec"]["scopes"], json!(["NotBestEffort"]));

    server.kubectl_ok(&[
        "create",
        "priorityclass",
        "gen-high",
        "--value=1000",
        "--description=high priority",
        "--preemption-policy=Never",
    ]);
    let pc = server.get_json(&["priorityclass", "gen-high"]);
    assert_eq!(pc["value"], 1000);
    assert_eq!(pc["description"], "high priority");
    assert_eq!(pc["preemptionPolicy"], "Never");

    server.kubectl_ok(&[
        "create",
        "poddisruptionbudget",
        "gen-pdb",
        "--selector=app=web",
        "--min-available=50%",
    ]);
    let pdb = server.get_json(&["pdb", "gen-pdb"]);
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    assert_eq!(
        pdb["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    server.kubectl_ok(&[
        "create",
        "pdb",
        "gen-pdb-int",
        "--selector=app=web",
        "--max-unavailable=1",
    ]);
    let pdb = server.get_json(&["pdb", "gen-pdb-int"]);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);

    let token = server.kubectl_ok(&["create", "token", "gen-sa", "-n", "gen-ns", "--duration=1h"]);
    let parts: Vec<&str> = token.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    use base64::Engine;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[1])
            .expect("base64url claims"),
    )
    .expect("JSON claims");
    assert_eq!(claims["sub"], "system:serviceaccount:gen-ns:gen-sa");
    let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(lifetime, 3600, "{claims}");
}

/// `curl` as the admin (the server's client certificate) with `Accept: <accept>`:
/// (HTTP code, Content-Type, body).
fn curl_as_admin(server: &Server, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let pki = server.data_dir().join("pki");
    let body = server.manifest("curl-body", "");
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(["-H", &format!("Accept: {accept}"), "-o"])
        .arg(&body)
        .args(["-w", "%{http_code} %{content_type}"])
        .arg(format!("{}{path}", server.url()))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (code, content_type) = text.split_once(' ').unwrap_or((&text, ""));
    (
        code.parse().unwrap_or(0),
        content_type.to_owned(),
        std::fs::read(&body).expect("curl's body"),
    )
}

/// `protoc --decode_raw` of a protobuf message: its text form; fails the test if protoc
/// cannot parse it.
fn protoc_decode_raw(message: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("protoc")
        .arg("--decode_raw")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run protoc");
    child.stdin.take().unwrap().write_all(message).unwrap();
    let out = child.wait_with_output().expect("protoc output");
    assert!(
        out.status.success(),
        "protoc --decode_raw: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Objects, lists, errors and watches in protobuf (`Accept:
/// application/vnd.kubernetes.protobuf`), read back with protoc and with Skiff's decoder:
/// the same objects as in JSON.
fn protobuf_responses(server: Server) {
    server.kubectl_ok(&["create", "configmap", "pb-cm", "--from-literal=a=b"]);
    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "pb-secret",
        "--from-literal=k=v",
    ]);
    server.kubectl_ok(&[
        "create",
        "deployment",
        "pb-web",
        "--image=registry.example/web:1",
    ]);
    server.kubectl_ok(&["create", "service", "nodeport", "pb-svc", "--tcp=80:8080"]);
    let file = server.manifest(
        "pod.yaml",
        &pod("pb-pod", "registry.example/web:1", &[("app", "pb")]),
    );
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);

    for path in [
        "/api/v1/namespaces/default/configmaps/pb-cm",
        "/api/v1/namespaces/default/secrets/pb-secret",
        "/apis/apps/v1/namespaces/default/deployments/pb-web",
        "/api/v1/namespaces/default/services/pb-svc",
        "/api/v1/namespaces/default/pods/pb-pod",
        "/api/v1/namespaces/default/configmaps",
    ] {
        let (code, content_type, body) = curl_as_admin(&server, path, PROTOBUF);
        assert_eq!((code, content_type.as_str()), (200, PROTOBUF), "{path}");
        assert_eq!(&body[..4], b"k8s\0", "{path}");
        let raw = protoc_decode_raw(&body[4..]);
        assert!(raw.contains("1 {"), "{path}: {raw}");
        let decoded = skiff_api::protobuf::decode(&body).expect("Skiff decodes the response");
        let mut json = json_of(&server.kubectl_ok(&["get", "--raw", path]));
        // List items carry no TypeMeta in protobuf.
        let items = json.get_mut("items").and_then(Value::as_array_mut);
        for item in items.into_iter().flatten() {
            let item = item.as_object_mut().unwrap();
            item.remove("apiVersion");
            item.remove("kind");
        }
        assert_eq!(decoded, json, "{path}");
    }

    let (code, content_type, body) = curl_as_admin(
        &server,
        "/api/v1/namespaces/default/configmaps/absent",
        PROTOBUF,
    );
    assert_eq!((code, content_type.as_str()), (404, PROTOBUF));
    let status = skiff_api::protobuf::decode(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);
    assert_eq!(status["message"], "configmaps \"absent\" not found");

    let (code, _, _) = curl_as_admin(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    );
    assert_eq!(code, 406);

    let (code, content_type, body) = curl_as_admin(
        &server,
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dpb-cm",
        PROTOBUF,
    );
    assert_eq!(
        (code, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    let mut events = Vec::new();
    let mut rest = &body[..];
    while rest.len() >= 4 {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let frame = &rest[4..4 + len];
        protoc_decode_raw(frame);
        events.push(skiff_api::protobuf::decode_watch_event(frame).expect("a WatchEvent"));
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "a partial frame");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "ADDED");
    assert_eq!(events[0].1["metadata"]["name"], "pb-cm");
    assert_eq!(events[0].1["data"], json!({"a": "b"}));
}

apiserver_cases! {
    service_addresses_are_random_above_the_static_band,
    api_server_address_by_client_cidr,
}

/// Cluster IPs and node ports are random and above upstream's static band (the lowest
/// 256 addresses of the default /12 and the lowest 86 ports of 30000-32767), not the
/// lowest free ones.
fn service_addresses_are_random_above_the_static_band(server: Server) {
    let services: Vec<String> = (0..4)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\nspec:\n  type: NodePort\n  selector:\n    app: s{i}\n  ports:\n  - port: 80\n"
            )
        })
        .collect();
    let file = server.manifest("services.yaml", &services.join("---\n"));
    server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let list = server.get_json(&["services"]);
    let mut ips = Vec::new();
    for service in list["items"].as_array().unwrap() {
        if service["metadata"]["name"] == "kubernetes" {
            continue;
        }
        let ip: std::net::Ipv4Addr = service["spec"]["clusterIP"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let offset = u32::from(ip) - u32::from(std::net::Ipv4Addr::new(10, 96, 0, 1));
        assert!(
            (256..(1 << 20) - 2).contains(&offset),
            "{ip} in the static band"
        );
        let port = service["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!(
            (30086..=32767).contains(&port),
            "node port {port} in the static band"
        );
        ips.push(ip);
    }
    assert_eq!(ips.len(), 4, "{list}");
    // A requested address of the static band is still given.
    let fixed = server.manifest(
        "fixed.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: fixed\nspec:\n  clusterIP: 10.96.0.10\n  ports:\n  - port: 80\n",
    );
    server.kubectl_ok(&["create", "-f", fixed.to_str().unwrap()]);
    let fixed = server.get_json(&["service", "fixed"]);
    assert_eq!(fixed["spec"]["clusterIP"], "10.96.0.10");
}

/// `/api`'s `serverAddressByClientCIDRs` names the advertise address and secure port (the
/// `kubernetes` endpoints'), not whatever host the client dialled.
fn api_server_address_by_client_cidr(server: Server) {
    let endpoints = server.get_json(&["endpoints", "kubernetes"]);
    let subset = &endpoints["subsets"][0];
    let expected = format!(
        "{}:{}",
        subset["addresses"][0]["ip"].as_str().unwrap(),
        subset["ports"][0]["port"]
    );
    let api = json_of(&server.kubectl_ok(&["get", "--raw", "/api"]));
    assert_eq!(
        api["serverAddressByClientCIDRs"],
        json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": expected}])
    );
}

apiserver_cases! {
    api_aggregation,
}

/// API aggregation: the trust ConfigMap and the built-in Local APIServices from the start;
/// an extension API server started here (HTTPS, front-proxy client certificate required)
/// registered by an APIService whose Service and Endpoints point at it becomes Available,
/// shows in discovery and `api-resources`, and is reached through the API server with the
/// user in the front-proxy headers; an APIService of a missing Service is
/// `False (ServiceNotFound)` and its requests get 503.
fn api_aggregation(server: Server) {
    use base64::Engine as _;
    use skiff_apiserver::aggregator::sample::SampleApiServer;

    let trust = server.get_json(&[
        "configmap",
        "extension-apiserver-authentication",
        "-n",
        "kube-system",
    ]);
    let data = &trust["data"];
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        "[\"X-Remote-Extra-\"]"
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert!(
        data["client-ca-file"]
            .as_str()
            .is_some_and(|ca| ca.starts_with("-----BEGIN CERTIFICATE-----"))
    );
    let front_proxy_ca = data["requestheader-client-ca-file"]
        .as_str()
        .expect("requestheader-client-ca-file")
        .to_owned();
    assert_ne!(
        data["client-ca-file"].as_str(),
        Some(front_proxy_ca.as_str())
    );

    // Every built-in group version has its Local APIService with upstream's priorities.
    let rows = table(&server.kubectl_ok(&["get", "apiservices"]));
    assert_eq!(rows[0], ["NAME", "SERVICE", "AVAILABLE", "AGE"]);
    for name in [
        "v1.",
        "v1.apps",
        "v2.autoscaling",
        "v1.apiregistration.k8s.io",
    ] {
        assert_eq!(row(&rows, name)[1..3], ["Local", "True"], "{name}");
    }
    let apps = server.get_json(&["apiservice", "v1.apps"]);
    assert_eq!(apps["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(apps["spec"]["versionPriority"], 15);
    assert_eq!(apps["status"]["conditions"][0]["reason"], "Local");

    // The extension API server listens on the advertise address (Endpoints may not name
    // loopback addresses).
    let kubernetes = server.get_json(&["endpoints", "kubernetes", "-n", "default"]);
    let host: std::net::IpAddr = kubernetes["subsets"][0]["addresses"][0]["ip"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .expect("the kubernetes endpoints' address");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let backend = runtime
        .block_on(SampleApiServer::start(
            host,
            "wardle.example.com",
            "v1alpha1",
            "api.wardle.svc",
            &front_proxy_ca,
            &["front-proxy-client"],
        ))
        .expect("start the extension API server");
    let port = backend.address.port();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&backend.ca_pem);
    let file = server.manifest(
        "aggregation.yaml",
        &format!(
            "apiVersion: v1
kind: Namespace
metadata:
  name: wardle
---
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: wardle
spec:
  ports:
  - name: https
    port: 443
    targetPort: {port}
---
apiVersion: v1
kind: Endpoints
metadata:
  name: api
  namespace: wardle
subsets:
- addresses:
  - ip: \"{host}\"
  ports:
  - name: https
    port: {port}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.wardle.example.com
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {ca_bundle}
  service:
    namespace: wardle
    name: api
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.missing.example.com
spec:
  group: missing.example.com
  version: v1beta1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
  service:
    namespace: wardle
    name: nothere
"
        ),
    );
    server.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);

    let condition = |name: &str| {
        let api = server.get_json(&["apiservice", name]);
        api["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Available").cloned())
    };
    let available = common::apiserver::eventually("wardle Available", WAIT, || {
        condition("v1alpha1.wardle.example.com").filter(|c| c["status"] == "True")
    });
    assert_eq!(available["reason"], "Passed");
    assert_eq!(available["message"], "all checks passed");
    let missing = common::apiserver::eventually("missing's condition", WAIT, || {
        condition("v1beta1.missing.example.com")
    });
    assert_eq!(missing["status"], "False");
    assert_eq!(missing["reason"], "ServiceNotFound");
    assert_eq!(
        missing["message"],
        "service/nothere in \"wardle\" is not present"
    );
    let rows = table(&server.kubectl_ok(&["get", "apiservices"]));
    assert_eq!(
        row(&rows, "v1alpha1.wardle.example.com")[1..3],
        ["wardle/api", "True"]
    );
    assert_eq!(
        row(&rows, "v1beta1.missing.example.com")[1..3],
        ["wardle/nothere", "False (ServiceNotFound)"]
    );

    // Proxied, with the user in the front-proxy headers and no credential of the client.
    let list = json_of(&server.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
    ]));
    assert_eq!(list["kind"], "FlunderList");
    let annotations = &list["items"][0]["metadata"]["annotations"];
    assert_eq!(annotations["sample/user"], "kubernetes-admin");
    let groups = annotations["sample/groups"].as_str().unwrap_or_default();
    assert!(groups.split(',').any(|g| g == "system:masters"), "{groups}");
    assert!(annotations.get("sample/authorization").is_none());
    // A stream passes through.
    let watched = server.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/wardle.example.com/v1alpha1/flunders?watch=1",
    ]);
    assert_eq!(json_of(watched.trim())["type"], "ADDED");

    // Discovery: /apis, the group, api-resources, and kubectl's own get.
    let apis = json_of(&server.kubectl_ok(&["get", "--raw", "/apis"]));
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(groups[0], "apiregistration.k8s.io");
    assert!(groups.contains(&"wardle.example.com"), "{groups:?}");
    assert!(!groups.contains(&"missing.example.com"), "{groups:?}");
    let group = json_of(&server.kubectl_ok(&["get", "--raw", "/apis/wardle.example.com"]));
    assert_eq!(
        group["preferredVersion"]["groupVersion"],
        "wardle.example.com/v1alpha1"
    );
    let resources = table(&server.kubectl_ok(&["api-resources", "--api-group=wardle.example.com"]));
    assert_eq!(
        row(&resources, "flunders"),
        [
            "flunders",
            "fl",
            "wardle.example.com/v1alpha1",
            "true",
            "Flunder"
        ]
    );
    assert!(
        server
            .kubectl_ok(&["api-versions"])
            .lines()
            .any(|l| l == "wardle.example.com/v1alpha1")
    );
    assert_eq!(
        server
            .kubectl_ok(&["get", "fl", "-n", "default", "-o", "name"])
            .trim(),
        "flunder.wardle.example.com/first"
    );

    // OpenAPI: the backend's v3 document is listed and reached (so `kubectl explain`
    // works), and its v2 paths and definitions are merged, its clashing ObjectMeta renamed.
    let index = json_of(&server.kubectl_ok(&["get", "--raw", "/openapi/v3"]));
    assert_eq!(
        index["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"],
        "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=SAMPLE"
    );
    assert!(index["paths"].get("api/v1").is_some());
    let explained = server.kubectl_ok(&["explain", "flunders.spec"]);
    assert!(explained.contains("The flunder's color"), "{explained}");
    // The merged v2 document, in protobuf.
    let explained =
        server.kubectl_ok(&["explain", "flunders.spec", "--output=plaintext-openapiv2"]);
    assert!(explained.contains("The flunder's color"), "{explained}");
    let v2 = json_of(&server.kubectl_ok(&["get", "--raw", "/openapi/v2"]));
    assert!(
        v2["paths"]
            .get("/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders")
            .is_some()
    );
    assert!(
        v2["paths"]
            .get("/api/v1/namespaces/{namespace}/pods")
            .is_some()
    );
    assert!(
        v2["definitions"]
            .get("com.example.wardle.v1alpha1.Flunder")
            .is_some()
    );
    assert_eq!(
        v2["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta_v2"]["description"],
        "the sample's own ObjectMeta"
    );

    // The APIService of a missing Service: 503 service unavailable.
    let err = server.kubectl_err(&["get", "--raw", "/apis/missing.example.com/v1beta1"]);
    assert!(err.contains("ServiceUnavailable"), "{err}");
    drop(backend);
}
