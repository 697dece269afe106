//! Bad input, each answered as upstream answers it, while a healthy ReplicaSet beside it
//! keeps being served: a Deployment whose selector does not match its template and
//! CronJobs whose schedule or time zone do not parse are refused by the API with
//! upstream's field errors; an object whose owner does not exist is collected by the
//! garbage collector. (A Job template that the API accepts and the kubelet refuses needs
//! a kubelet: `server.rs`.)

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_upstream_answers_and_nothing_else_stops() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // A Deployment whose selector does not match its template.
    let mut mismatched = serde_json::to_value(deployment_manifest("mismatched", 1)).expect("json");
    mismatched["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    let refused = apply_err(&api, "mismatched.json", &mismatched);
    assert!(
        refused.contains(
            r#"The Deployment "mismatched" is invalid: spec.template.metadata.labels: Invalid value: {"app":"mismatched"}: `selector` does not match template `labels`"#
        ),
        "{refused}"
    );

    // A CronJob whose schedule does not parse, and one with an unknown time zone.
    let cronjob = |name: &str, schedule: &str, zone: Option<&str>| {
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "timeZone": zone,
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.example/web:1"}]}}}}}})
    };
    let refused = apply_err(
        &api,
        "bad-cron.json",
        &cronjob("bad-cron", "every tuesday", None),
    );
    assert!(
        refused.contains(r#"The CronJob "bad-cron" is invalid: spec.schedule: Invalid value: "every tuesday": expected exactly 5 fields, found 2: [every tuesday]"#),
        "{refused}"
    );
    let refused = apply_err(
        &api,
        "bad-zone.json",
        &cronjob("bad-zone", "* * * * *", Some("Mars/Olympus")),
    );
    assert!(
        refused.contains(r#"The CronJob "bad-zone" is invalid: spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus"#),
        "{refused}"
    );

    // An ownerReference to an owner that does not exist: the dependent is collected.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let orphan: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "dangling", "labels": {"app": "dangling"}, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "never-was",
            "uid": "00000000-0000-0000-0000-000000000001",
        }]},
    }))
    .expect("a ConfigMap");
    maps.create(&PostParams::default(), &orphan)
        .await
        .expect("create the dangling ConfigMap");
    wait_objects(
        &maps,
        "dangling",
        "the dangling ConfigMap collected",
        BTreeMap::is_empty,
    )
    .await;

    // Meanwhile a healthy ReplicaSet is served as usual.
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    sets.create(&PostParams::default(), &replica_set("healthy", 2, 0))
        .await
        .expect("create the ReplicaSet");
    wait_pods(&pods, "healthy", "2 pods of the healthy ReplicaSet", |m| {
        m.len() == 2
    })
    .await;
    assert!(
        !cm.log().contains("panicked"),
        "the controller manager panicked:\n{}",
        cm.log()
    );
}

/// `kubectl apply -f` of `object`, which must fail; its stderr.
fn apply_err(api: &ApiServer, file: &str, object: &serde_json::Value) -> String {
    let path = api.data_dir().join(file);
    std::fs::write(&path, object.to_string()).expect("write the manifest");
    let out = api.kubectl(33, &["apply", "-f", &path.to_string_lossy()]);
    assert!(!out.status.success(), "kubectl apply of {file} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
