//! The namespace controller end to end: `kubectl delete namespace` marks the namespace
//! Terminating and refuses new content; the controller deletes a Deployment, a Job, a
//! CronJob, a pod bound to a node (the test confirms its end, as the kubelet would), a PVC
//! and objects carrying the garbage collector's `foregroundDeletion` and `orphan`
//! finalizers; a ConfigMap held by a foreign finalizer keeps the namespace (its
//! conditions say so) until the finalizer goes, and then the namespace is gone.

use k8s_openapi::api::core::v1::Namespace;

use super::*;

const NS: &str = "doomed";

fn in_namespace(mut object: serde_json::Value) -> serde_json::Value {
    object["metadata"]["namespace"] = json!(NS);
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_deletion_removes_every_kind_of_content() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    kubectl(&api, &["create", "namespace", NS]);

    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]}});
    let mut job_template = template.clone();
    job_template["spec"]["restartPolicy"] = json!("Never");
    let objects = [
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": template}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
            "spec": {"template": job_template}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
            "spec": {"schedule": "*/1 * * * *",
                     "jobTemplate": {"spec": {"template": job_template}}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"},
            "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "c", "image": "registry.example/web:1"}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fg", "finalizers": ["foregroundDeletion"]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "orphaned", "finalizers": ["orphan"]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    ];
    let list = json!({"apiVersion": "v1", "kind": "List",
        "items": objects.into_iter().map(in_namespace).collect::<Vec<_>>()});
    let file = api.data_dir().join("doomed.json");
    std::fs::write(&file, list.to_string()).expect("write the manifest");
    kubectl(&api, &["create", "-f", file.to_str().expect("utf-8 path")]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    wait_pods(&pods, "web", "the Deployment's and the Job's pods", |m| {
        m.len() >= 3
    })
    .await;

    let out = kubectl(&api, &["delete", "namespace", NS, "--wait=false"]);
    assert!(
        out.starts_with(&format!("namespace \"{NS}\" deleted")),
        "{out}"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let marked = namespaces.get(NS).await.expect("the namespace");
    assert_eq!(
        marked.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let late = api.kubectl(33, &["create", "configmap", "late", "-n", NS]);
    let err = String::from_utf8_lossy(&late.stderr);
    assert!(
        err.contains(&format!("configmaps \"late\" is forbidden: unable to create new content in namespace {NS} because it is being terminated")),
        "{err}"
    );

    // The bound pod gets its grace period; its kubelet would then confirm its end.
    let cond = |p: Option<&Pod>| p.is_none_or(|p| p.metadata.deletion_timestamp.is_some());
    tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(pods.clone(), "bound", cond),
    )
    .await
    .expect("the bound pod is being deleted")
    .expect("watch");
    let force = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = pods.delete("bound", &force).await;

    // Everything but the held ConfigMap goes, and the namespace says what holds it.
    let expected = "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances";
    let held = |n: Option<&Namespace>| {
        n.and_then(|n| n.status.as_ref()?.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "NamespaceFinalizersRemaining"
                        && c.status == "True"
                        && c.message.as_deref() == Some(expected)
                })
            })
    };
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        kube::runtime::wait::await_condition(namespaces.clone(), NS, held),
    )
    .await;
    if !matches!(waited, Ok(Ok(Some(_)))) {
        let now = namespaces.get(NS).await.ok().and_then(|n| n.status);
        panic!(
            "the namespace never named only the held ConfigMap: {waited:?}\nstatus: {now:#?}\ncontroller manager:\n{}",
            cm.log()
        );
    }
    let left = api.kubectl(
        33,
        &[
            "get",
            "pods,deployments,replicasets,jobs,cronjobs,pvc,configmaps,serviceaccounts",
            "-n",
            NS,
            "-o",
            "name",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&left.stdout).trim(),
        "configmap/held",
        "{}",
        String::from_utf8_lossy(&left.stderr)
    );

    kubectl(
        &api,
        &[
            "patch",
            "configmap",
            "held",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    let out = api.kubectl(
        33,
        &[
            "wait",
            "--for=delete",
            &format!("namespace/{NS}"),
            "--timeout=30s",
        ],
    );
    assert!(
        out.status.success(),
        "the namespace stays: {}\ncontroller manager:\n{}",
        String::from_utf8_lossy(&out.stderr),
        cm.log()
    );
    assert!(namespaces.get_opt(NS).await.expect("get").is_none());
}
