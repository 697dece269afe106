//! The Deployment controller end to end: rollouts watched step by step, history, undo,
//! scale, pause.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_rolls_out_undoes_and_scales() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let cm = ControllerManager::start(&api, &["--leader-elect=false"]);
    let client = api.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let kubelets = simulate_kubelets(pods.clone());
    let manifest = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]},
            },
        },
    });
    let path = api.data_dir().join("web.json");
    std::fs::write(&path, manifest.to_string()).expect("write the manifest");
    let path = path.to_string_lossy().into_owned();
    kubectl(&api, &["apply", "-f", &path]);
    let rollout = |what: &str| {
        let out = api.kubectl(
            33,
            &["rollout", "status", "deployment/web", "--timeout=60s"],
        );
        assert!(
            out.status.success(),
            "{what}: {}{}\nlog:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            cm.log()
        );
    };
    rollout("first rollout");
    let first = wait_pods(&pods, "web", "3 pods of web:1", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":1"))
    })
    .await;
    assert_eq!(first.len(), 3);

    // The rolling update never has fewer than 2 ready pods, nor ReplicaSets asking for
    // more than 4 pods in all (a pod being deleted may still be seen as a new one
    // starts, with upstream too).
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let ready_floor = tokio::spawn(watch_extreme(
        pods.clone(),
        stop_rx.clone(),
        |seen: &BTreeMap<String, Pod>| {
            let ready = seen
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            usize::MAX - ready
        },
    ));
    let surge_ceiling = tokio::spawn(watch_extreme(
        Api::<ReplicaSet>::namespaced(client.clone(), "default"),
        stop_rx,
        |seen: &BTreeMap<String, ReplicaSet>| {
            seen.values()
                .map(|rs| usize::try_from(rs.spec.replicas.unwrap_or(0)).unwrap_or(0))
                .sum()
        },
    ));
    kubectl(
        &api,
        &["set", "image", "deployment/web", "c=registry.example/web:2"],
    );
    rollout("rollout of web:2");
    let second = wait_pods(&pods, "web", "3 pods of web:2", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":2"))
    })
    .await;
    assert_eq!(second.len(), 3);
    let _ = stop_tx.send(true);
    let min_ready = usize::MAX - ready_floor.await.expect("ready watch").0;
    // (the trace: each ReplicaSet change, `name rv spec.replicas`, and the sum after it)
    let (max_pods, trace) = surge_ceiling.await.expect("ReplicaSet watch");
    assert!(
        min_ready >= 2,
        "maxUnavailable 1 broken: {min_ready} ready pods at worst"
    );
    assert!(
        max_pods <= 4,
        "maxSurge 1 broken: ReplicaSets asked for {max_pods} pods: {trace:#?}\nlog:\n{}",
        cm.log()
    );

    let history = kubectl(&api, &["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");
    let d: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "default");
    let web = d.get("web").await.expect("get");
    let revision = web
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
        .cloned();
    assert_eq!(
        revision.as_deref(),
        Some("2"),
        "{:?}",
        web.metadata.annotations
    );
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(sets.lines().count(), 2, "{sets}");

    // Undo: back to web:1, by the old ReplicaSet (now revision 3).
    kubectl(&api, &["rollout", "undo", "deployment/web"]);
    rollout("undo");
    wait_pods(&pods, "web", "3 pods of web:1 again", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":1"))
    })
    .await;
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(
        sets.lines().count(),
        2,
        "no new ReplicaSet for an old template: {sets}\n{}\n{}",
        kubectl(
            &api,
            &["get", "deploy", "web", "-o", "jsonpath={.spec.template}"]
        ),
        kubectl(
            &api,
            &[
                "get",
                "rs",
                "-o",
                "jsonpath={range .items[*]}{.spec.template}{\"\\n\"}{end}"
            ]
        )
    );

    // Scale to 0 and back.
    kubectl(&api, &["scale", "deployment/web", "--replicas=0"]);
    wait_pods(&pods, "web", "no pods", BTreeMap::is_empty).await;
    kubectl(&api, &["scale", "deployment/web", "--replicas=3"]);
    rollout("scaled back");
    wait_pods(&pods, "web", "3 pods", |m| m.len() == 3).await;
    // The status settles on 3 of everything, with upstream's conditions.
    let cond = |c: &k8s_openapi::api::apps::v1::Deployment| {
        let status = c.status.clone().unwrap_or_default();
        let has = |t: &str, st: &str, reason: &str| {
            status.conditions.iter().flatten().any(|c| {
                c.type_.as_deref() == Some(t)
                    && c.status.as_deref() == Some(st)
                    && c.reason.as_deref() == Some(reason)
            })
        };
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas,
        ) == (Some(3), Some(3), Some(3))
            && has("Available", "True", "MinimumReplicasAvailable")
            && has("Progressing", "True", "NewReplicaSetAvailable")
    };
    let settled = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(
            d.clone(),
            "web",
            move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| o.is_some_and(cond),
        ),
    )
    .await;
    assert!(
        matches!(settled, Ok(Ok(_))),
        "status {:?}; log:\n{}",
        d.get("web").await.ok().and_then(|w| w.status),
        cm.log()
    );

    // Pause: a new template makes no new ReplicaSet until resumed; restart rolls anew.
    kubectl(&api, &["rollout", "pause", "deployment/web"]);
    let paused = move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| {
        o.and_then(|d| d.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_.as_deref() == Some("Progressing")
                        && c.reason.as_deref() == Some("DeploymentPaused")
                })
            })
    };
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(d.clone(), "web", paused),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "Progressing=DeploymentPaused; log:\n{}",
        cm.log()
    );
    kubectl(
        &api,
        &["set", "image", "deployment/web", "c=registry.example/web:3"],
    );
    // The controller saw the new generation (paused) without a third ReplicaSet.
    let generation = d.get("web").await.expect("get").metadata.generation;
    let observed = move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| {
        o.and_then(|d| d.status.as_ref())
            .and_then(|s| s.observed_generation)
            >= generation
    };
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(d.clone(), "web", observed),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "observedGeneration; log:\n{}",
        cm.log()
    );
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(sets.lines().count(), 2, "paused: {sets}");
    kubectl(&api, &["rollout", "resume", "deployment/web"]);
    rollout("resumed");
    wait_pods(&pods, "web", "3 pods of web:3", |m| {
        m.len() == 3 && images(m).iter().all(|i| i.ends_with(":3"))
    })
    .await;
    kubectl(&api, &["rollout", "restart", "deployment/web"]);
    rollout("restarted");
    let sets = kubectl(&api, &["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(
        sets.lines().count(),
        4,
        "restart makes a new ReplicaSet: {sets}"
    );

    // A rollout that misses its progress deadline is reported, and revives once its
    // pods become ready.
    let mut slow = deployment_manifest("slow", 1);
    slow.spec.progress_deadline_seconds = Some(2);
    if let Some(m) = slow.spec.template.metadata.as_mut() {
        m.labels
            .get_or_insert_with(Default::default)
            .insert("hold".into(), "1".into());
    }
    d.create(&PostParams::default(), &slow)
        .await
        .expect("create slow");
    let progressing = |reason: &'static str| {
        move |o: Option<&k8s_openapi::api::apps::v1::Deployment>| {
            o.and_then(|d| d.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_.as_deref() == Some("Progressing")
                            && c.reason.as_deref() == Some(reason)
                    })
                })
        }
    };
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(
            d.clone(),
            "slow",
            progressing("ProgressDeadlineExceeded"),
        ),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "ProgressDeadlineExceeded; log:\n{}",
        cm.log()
    );
    let held = wait_pods(&pods, "slow", "the held pod", |m| m.len() == 1).await;
    for name in held.keys() {
        set_ready(&pods, name).await;
    }
    let got = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(
            d.clone(),
            "slow",
            progressing("NewReplicaSetAvailable"),
        ),
    )
    .await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "revived after the deadline; log:\n{}",
        cm.log()
    );
    kubelets.abort();
}
