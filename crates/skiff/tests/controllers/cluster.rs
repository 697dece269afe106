//! The cluster controllers end to end: the `default` ServiceAccount and the
//! `kube-root-ca.crt` ConfigMap in every namespace, restored when removed or edited, and
//! the pod garbage collector's threshold of terminated pods.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};

use super::*;

/// Waits, by watching, until the object `name` of `api` satisfies `done`.
async fn wait_named<K>(api: &Api<K>, name: &str, what: &str, done: impl Fn(&K) -> bool)
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let cond = move |o: Option<&K>| o.is_some_and(&done);
    let res = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    assert!(
        matches!(res, Ok(Ok(_))),
        "timed out waiting for {what}: {res:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_get_their_account_and_root_ca_and_terminated_pods_are_collected() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(
        &api,
        &["--leader-elect=false", "--terminated-pod-gc-threshold=2"],
    );
    let client = api.client().await.expect("client");
    let ca = std::fs::read_to_string(api.data_dir().join("pki/ca.crt")).expect("the cluster CA");

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create team-a");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team-a");
    wait_named(&accounts, "default", "team-a's default account", |_| true).await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let has_ca = |m: &ConfigMap| {
        m.data.as_ref().and_then(|d| d.get("ca.crt")) == Some(&ca)
            && m.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("kubernetes.io/description"))
    };
    wait_named(&maps, "kube-root-ca.crt", "team-a's root CA", has_ca).await;
    // Namespaces that existed before the controller manager have them too.
    let system: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    wait_named(&system, "kube-root-ca.crt", "kube-system's root CA", has_ca).await;

    // An edited ConfigMap is restored, a deleted one recreated, as is the account.
    maps.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"ca.crt": "not a CA"}})),
    )
    .await
    .expect("edit the root CA");
    wait_named(&maps, "kube-root-ca.crt", "the root CA restored", has_ca).await;
    maps.delete("kube-root-ca.crt", &Default::default())
        .await
        .expect("delete the root CA");
    accounts
        .delete("default", &Default::default())
        .await
        .expect("delete the account");
    wait_named(&maps, "kube-root-ca.crt", "the root CA recreated", has_ca).await;
    wait_named(&accounts, "default", "the account recreated", |_| true).await;

    // Four terminated pods with a threshold of 2: the two oldest go.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..4 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("done-{i}"), "labels": {"app": "done"}},
            "spec": {"containers": [{"name": "c", "image": "registry.example/x:1"}]},
        }))
        .expect("a pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create a pod");
        pods.patch_status(
            &format!("done-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .expect("mark it Succeeded");
    }
    let left = wait_pods(&pods, "done", "two terminated pods collected", |m| {
        m.len() == 2
    })
    .await;
    assert_eq!(
        left.keys().cloned().collect::<Vec<_>>(),
        ["done-2", "done-3"],
        "log:\n{}",
        cm.log()
    );
}
