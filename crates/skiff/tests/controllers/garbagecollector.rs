//! The garbage collector end to end: the three propagation policies, dangling owners, a
//! namespace holding a Job.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collector_cascades_as_upstream() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "default");
    for name in ["bg", "fg", "orphan"] {
        deployments
            .create(&PostParams::default(), &deployment_manifest(name, 2))
            .await
            .expect("create");
    }
    for name in ["bg", "fg", "orphan"] {
        wait_pods(&pods, name, "2 pods", |m| m.len() == 2).await;
    }

    // Background (kubectl's default): the Deployment goes at once, then its
    // ReplicaSet, then the pods.
    kubectl(&api, &["delete", "deployment", "bg"]);
    wait_objects(&sets, "bg", "no ReplicaSet of bg", BTreeMap::is_empty).await;
    wait_pods(&pods, "bg", "no pods of bg", BTreeMap::is_empty).await;

    // Foreground: kubectl waits until the Deployment is gone, which is after its
    // ReplicaSet and pods.
    kubectl(
        &api,
        &[
            "delete",
            "deployment",
            "fg",
            "--cascade=foreground",
            "--timeout=30s",
        ],
    );
    assert!(deployments.get_opt("fg").await.expect("get").is_none());
    wait_objects(&sets, "fg", "no ReplicaSet of fg", BTreeMap::is_empty).await;
    wait_pods(&pods, "fg", "no pods of fg", BTreeMap::is_empty).await;

    // Orphan: the ReplicaSet stays, without its owner reference, and keeps its pods.
    kubectl(
        &api,
        &[
            "delete",
            "deployment",
            "orphan",
            "--cascade=orphan",
            "--timeout=30s",
        ],
    );
    let left = wait_objects(&sets, "orphan", "an orphaned ReplicaSet", |m| {
        m.len() == 1
            && m.values().all(|rs| {
                rs.metadata
                    .owner_references
                    .as_ref()
                    .is_none_or(Vec::is_empty)
            })
    })
    .await;
    assert_eq!(left.len(), 1);
    let kept = wait_pods(&pods, "orphan", "the orphan's pods", |m| m.len() == 2).await;
    assert_eq!(kept.len(), 2);

    // A dangling reference: an object whose owner never existed is deleted.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let cm_obj: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dangling", "labels": {"app": "dangling"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}]},
    }))
    .expect("ConfigMap");
    cms.create(&PostParams::default(), &cm_obj)
        .await
        .expect("create");
    wait_objects(
        &cms,
        "dangling",
        "the dangling ConfigMap deleted",
        BTreeMap::is_empty,
    )
    .await;

    // A namespace holding a Job goes away: the namespace deleter deletes the Job with
    // the Job's default propagation, Orphan, and the collector removes the `orphan`
    // finalizer that would otherwise keep the Job, and the namespace, for ever.
    kubectl(&api, &["create", "namespace", "gc-ns"]);
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "gc-ns");
    let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.example/web:1"}]}}},
    }))
    .expect("Job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create the Job");
    let out = api.kubectl(33, &["delete", "namespace", "gc-ns", "--timeout=30s"]);
    assert!(
        out.status.success(),
        "namespace deletion: {}{}\nlog:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        cm.log()
    );
}
