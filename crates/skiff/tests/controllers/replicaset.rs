//! The ReplicaSet controller end to end.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_set_creates_adopts_scales_and_releases() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");

    // An orphan that matches the selector exists before the ReplicaSet: it is adopted,
    // so only two pods are created.
    let orphan: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("orphan");
    let rs = sets
        .create(&PostParams::default(), &replica_set("web", 3, 0))
        .await
        .expect("create the ReplicaSet");
    let uid = rs.metadata.uid.clone().expect("uid");
    let owned = |m: &BTreeMap<String, Pod>, n: usize| {
        m.len() == n
            && m.values()
                .all(|p| owner_uid(p).as_deref() == Some(uid.as_str()))
    };
    let got = wait_pods(&pods, "web", "3 owned pods", |m| owned(m, 3)).await;
    assert!(
        got.contains_key("orphan"),
        "the orphan was adopted: {:?}",
        got.keys()
    );
    for (name, p) in &got {
        if name != "orphan" {
            assert!(name.starts_with("web-"), "{name}");
            assert_eq!(
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("tier"))
                    .map(String::as_str),
                Some("front")
            );
            let r = &p.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (r.kind.as_str(), r.block_owner_deletion),
                ("ReplicaSet", Some(true))
            );
        }
    }
    wait_rs(&sets, "web", "replicas 3", |rs| {
        let s = rs.status.clone().unwrap_or_default();
        // The orphan lacks the template's `tier` label: not fully labelled.
        s.replicas == 3 && s.fully_labeled_replicas == Some(2) && s.observed_generation == Some(1)
    })
    .await;

    // Two pods become Ready: ready and available (minReadySeconds 0).
    let names: Vec<String> = got.keys().filter(|n| *n != "orphan").cloned().collect();
    for n in &names {
        set_ready(&pods, n).await;
    }
    wait_rs(&sets, "web", "2 ready", |rs| {
        let s = rs.status.clone().unwrap_or_default();
        s.ready_replicas == Some(2) && s.available_replicas == Some(2)
    })
    .await;

    // Scaled to 2: the pod that is not ready goes first.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale down");
    let left = wait_pods(&pods, "web", "2 pods", |m| owned(m, 2)).await;
    let mut kept: Vec<&String> = left.keys().collect();
    kept.sort();
    let mut ready: Vec<&String> = names.iter().collect();
    ready.sort();
    assert_eq!(kept, ready, "the ready pods are kept");

    // A pod relabelled out of the selector is released and replaced.
    let released = names[0].clone();
    pods.patch(
        &released,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .expect("relabel");
    wait_pods(&pods, "web", "a replacement", |m| {
        owned(m, 2) && !m.contains_key(&released)
    })
    .await;
    let freed = pods.get(&released).await.expect("still there");
    assert_eq!(
        owner_uid(&freed),
        None,
        "released: {:?}",
        freed.metadata.owner_references
    );

    // Events from the controller, written in the background: watched for.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let stream = watcher::watcher(events, watcher::Config::default());
    futures::pin_mut!(stream);
    let mut reasons = std::collections::BTreeSet::new();
    let want = ["SuccessfulCreate", "SuccessfulDelete"];
    let seen_all = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.try_next().await.expect("watch events") {
            if let WatchEvent::Apply(e) | WatchEvent::InitApply(e) = ev
                && e.involved_object.name.as_deref() == Some("web")
                && let Some(r) = e.reason
            {
                reasons.insert(r);
            }
            if want.iter().all(|w| reasons.contains(*w)) {
                return;
            }
        }
    })
    .await;
    assert!(seen_all.is_ok(), "events {reasons:?}; log:\n{}", cm.log());

    // The health and metrics endpoint, with client-go's work queue metrics.
    let port = cm.port;
    let (status, body) = tokio::task::spawn_blocking(move || {
        skiff_testkit::scheduler::https_get_insecure(port, "/healthz")
    })
    .await
    .expect("join")
    .expect("GET /healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = tokio::task::spawn_blocking(move || {
        skiff_testkit::scheduler::https_get_insecure(port, "/metrics")
    })
    .await
    .expect("join")
    .expect("GET /metrics");
    assert_eq!(status, 200);
    for line in [
        "workqueue_adds_total{name=\"replicaset\"}",
        "workqueue_work_duration_seconds_count{name=\"replicaset\"}",
    ] {
        assert!(body.contains(line), "{line} missing from {body}");
    }
}
