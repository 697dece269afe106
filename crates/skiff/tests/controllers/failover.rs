//! The controller manager SIGKILLed in the middle of a rollout of 50 replicas, with a
//! second one standing by under leader election: the standby takes the Lease over, the
//! rollout completes, and at no point, watched, are there more pods than `maxSurge`
//! allows.

use k8s_openapi::api::coordination::v1::Lease;

use super::*;

const REPLICAS: usize = 50;
/// `maxSurge: 25%` of 50, rounded up as upstream rounds surge.
const MAX_SURGE: usize = 13;

fn holder(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_mid_rollout_is_replaced_and_surge_holds() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let election = [
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
        // Creates as fast as the API server takes them, so that the rollout is still
        // going when the leader dies.
        "--kube-api-qps=200",
        "--kube-api-burst=300",
    ];
    let mut first = ControllerManager::start(&api, &election);
    let client = api.client().await.expect("client");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let led = |l: Option<&Lease>| l.is_some_and(|l| !holder(l).is_empty());
    let lease = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(leases.clone(), "kube-controller-manager", led),
    )
    .await
    .expect("the first manager leads")
    .expect("watch")
    .expect("the lease");
    let leader = holder(&lease);
    let second = ControllerManager::start(&api, &election);

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let kubelets = simulate_kubelets(pods.clone());
    let mut manifest = serde_json::to_value(deployment_manifest("web", 50)).expect("json");
    manifest["spec"]["strategy"] = json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}});
    let path = api.data_dir().join("web.json");
    std::fs::write(&path, manifest.to_string()).expect("write the manifest");
    kubectl(&api, &["apply", "-f", &path.to_string_lossy()]);
    let ready = |m: &BTreeMap<String, Pod>, tag: &str| {
        m.values()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let image = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first()?.image.clone());
                image.is_some_and(|i| i.ends_with(tag))
            })
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count()
    };
    wait_pods(&pods, "web", "50 ready pods of web:1", |m| {
        m.len() == REPLICAS && ready(m, ":1") == REPLICAS
    })
    .await;

    // From here on, the most pods (not being deleted) that ever exist at once.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let ceiling = tokio::spawn(watch_extreme(
        pods.clone(),
        stop_rx,
        |seen: &BTreeMap<String, Pod>| {
            seen.values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count()
        },
    ));
    kubectl(
        &api,
        &["set", "image", "deployment/web", "c=registry.example/web:2"],
    );
    // The leader dies once the new ReplicaSet has a few pods, before the rollout ends.
    let started = wait_pods(&pods, "web", "the first pods of web:2", |m| {
        let new = m
            .values()
            .filter(|p| {
                let image = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first()?.image.clone());
                image.is_some_and(|i| i.ends_with(":2"))
            })
            .count();
        new >= 5
    })
    .await;
    let new_before = started
        .values()
        .filter(|p| {
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first()?.image.clone());
            image.is_some_and(|i| i.ends_with(":2"))
        })
        .count();
    first.child.kill().expect("SIGKILL the leader");
    let _ = first.child.wait();
    assert!(
        new_before < REPLICAS,
        "the rollout ended before the leader was killed"
    );

    // The standby takes the Lease over once it expires, and finishes the rollout.
    let taken =
        move |l: Option<&Lease>| l.is_some_and(|l| !holder(l).is_empty() && holder(l) != leader);
    tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(leases.clone(), "kube-controller-manager", taken),
    )
    .await
    .unwrap_or_else(|_| panic!("the standby never led; its log:\n{}", second.log()))
    .expect("watch");
    let out = api.kubectl(
        33,
        &["rollout", "status", "deployment/web", "--timeout=90s"],
    );
    assert!(
        out.status.success(),
        "rollout after the failover: {}{}\nstandby's log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        second.log()
    );
    wait_pods(&pods, "web", "50 ready pods of web:2", |m| {
        m.len() == REPLICAS && ready(m, ":2") == REPLICAS
    })
    .await;
    let _ = stop_tx.send(true);
    let (most, _) = ceiling.await.expect("pod watch");
    assert!(
        most <= REPLICAS + MAX_SURGE,
        "maxSurge broken across the failover: {most} pods at once (at most {})",
        REPLICAS + MAX_SURGE
    );
    kubelets.abort();
}
