//! The disruption and resource quota controllers end to end: a budget's status as its
//! pods turn Ready, evictions through the API server's eviction subresource (one
//! allowed, the next refused with 429), `kubectl drain` refused while the budget allows
//! nothing, and a ResourceQuota's `status.used` following creates and deletes.
//!
//! Pods are bound to a hand-made Node so that deleting them is graceful (no kubelet
//! confirms it: an evicted pod stays terminating), and the test marks them Ready itself.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, EvictParams};

use super::*;

/// Waits, by watching, until the object `name` of `api` satisfies `done`; it then.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, done: impl Fn(&K) -> bool) -> K
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
    match res {
        Ok(Ok(Some(o))) => o,
        other => {
            let now = api.get(name).await.ok();
            panic!("timed out waiting for {what}: {other:?}; now {now:?}")
        }
    }
}

/// `(expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed)`.
fn numbers(pdb: &PodDisruptionBudget) -> (i32, i32, i32, i32) {
    let s = pdb.status.clone().unwrap_or_default();
    (
        s.expected_pods.unwrap_or(-1),
        s.current_healthy.unwrap_or(-1),
        s.desired_healthy.unwrap_or(-1),
        s.disruptions_allowed.unwrap_or(-1),
    )
}

fn allowed_condition(pdb: &PodDisruptionBudget) -> Option<(String, String)> {
    let c = pdb
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionAllowed")?;
    Some((c.status.clone(), c.reason.clone()))
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_guard_evictions_and_drain_and_quotas_count_usage() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    // No node lifecycle controller: the hand-made Node has no Lease.
    let cm = ControllerManager::start(
        &api,
        &[
            "--leader-elect=false",
            "--controllers=replicaset-controller,disruption-controller,resourcequota-controller",
        ],
    );
    let client = api.client().await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "pdb-node"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    }))
    .expect("a Node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create the node");

    // A ReplicaSet of 3 pods on that node, under a budget of minAvailable 2.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let mut rs = replica_set("guarded", 3, 0);
    if let Some(spec) = rs.spec.template.as_mut().and_then(|t| t.spec.as_mut()) {
        spec.node_name = Some("pdb-node".to_owned());
    }
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create the ReplicaSet");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .expect("a budget");
    budgets
        .create(&PostParams::default(), &pdb)
        .await
        .expect("create the budget");
    let created = wait_pods(&pods, "guarded", "3 pods", |m| m.len() == 3).await;
    // Not Ready yet: nothing may be disrupted.
    let st = wait_for(&budgets, "guarded", "the budget observed", |b| {
        numbers(b) == (3, 0, 2, 0)
    })
    .await;
    assert_eq!(
        allowed_condition(&st),
        Some(("False".into(), "InsufficientPods".into()))
    );
    for name in created.keys() {
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .expect("mark it Running");
        set_ready(&pods, name).await;
    }
    let st = wait_for(&budgets, "guarded", "one disruption allowed", |b| {
        numbers(b) == (3, 3, 2, 1)
    })
    .await;
    assert_eq!(
        allowed_condition(&st),
        Some(("True".into(), "SufficientPods".into()))
    );
    assert_eq!(
        st.status.as_ref().and_then(|s| s.observed_generation),
        st.metadata.generation
    );

    // One eviction is allowed.
    let mut names = created.keys().cloned();
    let first = names.next().expect("a pod");
    let second = names.next().expect("another pod");
    pods.evict(&first, &EvictParams::default())
        .await
        .expect("the first eviction is allowed");
    // Deleted gracefully (no kubelet confirms it) or at once.
    let evicted = pods.get_opt(&first).await.expect("get the evicted pod");
    assert!(
        evicted.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "the evicted pod is being deleted"
    );
    // The replacement is not Ready: the budget allows nothing, and the next eviction is
    // refused with upstream's 429.
    wait_for(&budgets, "guarded", "no disruption allowed", |b| {
        let (_, healthy, _, allowed) = numbers(b);
        healthy == 2 && allowed == 0
    })
    .await;
    match pods.evict(&second, &EvictParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 429, "{s:?}");
            assert_eq!(
                s.message,
                "Cannot evict pod as it would violate the pod's disruption budget."
            );
        }
        other => panic!("the second eviction should be refused: {other:?}"),
    }

    // kubectl drain retries its evictions every 5 s and gives up at its timeout.
    let out = api.kubectl(
        33,
        &[
            "drain",
            "pdb-node",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=10s",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "drain should fail: {stderr}");
    assert!(stderr.contains("disruption budget"), "{stderr}");
    let left = pods.list(&Default::default()).await.expect("list pods");
    let standing: Vec<&Pod> = left
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
        .collect();
    assert_eq!(standing.len(), 2, "the Ready pods survive the drain");
    assert!(
        standing
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(second.as_str()))
    );
    let cordoned = nodes.get("pdb-node").await.expect("the node");
    assert_eq!(
        cordoned.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true)
    );

    // A quota in a namespace of its own follows creates and deletes.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "quota-e2e"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create the namespace");
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "quota-e2e");
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "compute"},
        "spec": {"hard": {"pods": "10", "requests.cpu": "2", "count/deployments.apps": "5"}},
    }))
    .expect("a quota");
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("create the quota");
    let used_is = |want: [(&'static str, &'static str); 3]| {
        move |q: &ResourceQuota| {
            let used = q
                .status
                .as_ref()
                .and_then(|s| s.used.clone())
                .unwrap_or_default();
            used.len() == 3
                && want
                    .iter()
                    .all(|(k, v)| used.get(*k).is_some_and(|q| q.0 == *v))
        }
    };
    let q = wait_for(
        &quotas,
        "compute",
        "an empty usage",
        used_is([
            ("pods", "0"),
            ("requests.cpu", "0"),
            ("count/deployments.apps", "0"),
        ]),
    )
    .await;
    assert_eq!(
        q.status.and_then(|s| s.hard),
        quota.spec.and_then(|s| s.hard)
    );
    let quota_pods: Api<Pod> = Api::namespaced(client.clone(), "quota-e2e");
    for name in ["q-a", "q-b"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "registry.example/x:1",
                "resources": {"requests": {"cpu": "500m"}}}]},
        }))
        .expect("a pod");
        quota_pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("create a pod");
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "quota-e2e");
    deployments
        .create(&PostParams::default(), &deployment_manifest("q-web", 1))
        .await
        .expect("create a Deployment");
    wait_for(
        &quotas,
        "compute",
        "two pods and a Deployment counted",
        used_is([
            ("pods", "2"),
            ("requests.cpu", "1"),
            ("count/deployments.apps", "1"),
        ]),
    )
    .await;
    quota_pods
        .delete("q-a", &DeleteParams::default())
        .await
        .expect("delete a pod");
    deployments
        .delete("q-web", &DeleteParams::default())
        .await
        .expect("delete the Deployment");
    wait_for(
        &quotas,
        "compute",
        "the deletes counted",
        used_is([
            ("pods", "1"),
            ("requests.cpu", "500m"),
            ("count/deployments.apps", "0"),
        ]),
    )
    .await;

    // Clean up.
    quotas
        .delete("compute", &DeleteParams::default())
        .await
        .expect("delete the quota");
    quota_pods
        .delete("q-b", &DeleteParams::default())
        .await
        .expect("delete the last pod");
    budgets
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete the budget");
    sets.delete("guarded", &DeleteParams::default())
        .await
        .expect("delete the ReplicaSet");
    drop(cm);
}
