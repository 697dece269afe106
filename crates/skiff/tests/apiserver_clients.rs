//! Client libraries against `skiff apiserver`, on SQLite and on etcd: the Python
//! `kubernetes` client from PyPI (in the venv `scripts/setup` makes) and kube-rs, each
//! doing CRUD, watch and pagination.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::apiserver::{Server, apiserver_async_cases, apiserver_cases};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use serde_json::json;

/// The venv with the `kubernetes` package (see `scripts/setup`).
const PYTHON: &str = "/var/lib/skiff-test/venv/bin/python3";
const WATCH_TIMEOUT: Duration = Duration::from_secs(30);

apiserver_cases! { python_client }
apiserver_async_cases! { kube_rs_crud, kube_rs_watch, kube_rs_pagination }

/// `tests/python/crud_watch_paginate.py` in its own namespace.
fn python_client(server: Server) {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run scripts/setup (it installs the Python kubernetes client)"
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/crud_watch_paginate.py"
    );
    let output = Command::new(PYTHON)
        .arg(script)
        .arg(server.kubeconfig())
        .arg("python-client")
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "{script} failed with {}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- apiserver log (tail) ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        server.log_tail()
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
}

/// A kube-rs client and a fresh namespace `ns`.
async fn setup(server: &Server, ns: &str) -> kube::Client {
    let client = server.client().await.expect("kube client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");
    client
}

fn configmap(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"set": "kube-rs"}}, "data": data}),
    )
    .expect("configmap")
}

/// The HTTP code of an API error (0 for other errors).
fn code(err: &kube::Error) -> u16 {
    match err {
        kube::Error::Api(status) => status.code,
        _ => 0,
    }
}

async fn kube_rs_crud(server: Server) {
    let client = setup(&server, "crud").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "crud");
    let pp = PostParams::default();

    let created = cms
        .create(&pp, &configmap("c1", json!({"k": "v1"})))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    let err = cms
        .create(&pp, &configmap("c1", json!({})))
        .await
        .expect_err("duplicate create");
    assert_eq!(code(&err), 409, "{err}");

    let mut got = cms.get("c1").await.expect("get");
    assert_eq!(got.data, created.data);
    got.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = cms.replace("c1", &pp, &got).await.expect("replace");
    assert_eq!(replaced.data, got.data);
    let err = cms
        .replace("c1", &pp, &got)
        .await
        .expect_err("stale replace");
    assert_eq!(code(&err), 409, "{err}");

    let patched = cms
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "x"}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data.as_ref().map(|d| d.len()), Some(2));
    cms.delete("c1", &DeleteParams::default())
        .await
        .expect("delete");
    let err = cms.get("c1").await.expect_err("get after delete");
    assert_eq!(code(&err), 404, "{err}");
    assert!(cms.get_opt("c1").await.expect("get_opt").is_none());

    let deployments: Api<Deployment> = Api::namespaced(client, "crud");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [
                    {"name": "main", "image": "registry.example/web:1.0"},
                    {"name": "side", "image": "registry.example/side:1.0"}
                ]}
            }
        }
    }))
    .expect("deployment");
    deployments
        .create(&pp, &deployment)
        .await
        .expect("create deployment");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "registry.example/web:2.0"}]}}}});
    let patched = deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("strategic merge patch");
    let containers = patched
        .spec
        .template
        .spec
        .map(|s| s.containers)
        .unwrap_or_default();
    let images: Vec<_> = containers
        .iter()
        .filter_map(|c| c.image.as_deref())
        .collect();
    assert_eq!(
        images,
        ["registry.example/web:2.0", "registry.example/side:1.0"]
    );
    let scale = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("patch scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(4));
    let scale = deployments.get_scale("web").await.expect("get scale");
    assert_eq!(scale.status.map(|s| s.replicas), Some(0));
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete deployment");
    assert!(
        deployments
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

/// One line per kube-runtime watcher event: `init`, `init-apply <name>`, `init-done`,
/// `apply <name>`, `delete <name>`.
fn describe(event: watcher::Event<ConfigMap>) -> String {
    let name = |cm: ConfigMap| cm.metadata.name.unwrap_or_default();
    match event {
        watcher::Event::Init => "init".to_string(),
        watcher::Event::InitApply(cm) => format!("init-apply {}", name(cm)),
        watcher::Event::InitDone => "init-done".to_string(),
        watcher::Event::Apply(cm) => format!("apply {}", name(cm)),
        watcher::Event::Delete(cm) => format!("delete {}", name(cm)),
    }
}

/// Receives watcher events into `seen` until one equals `last`; fails the test if none does
/// within 30 s.
async fn next_until(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    last: &str,
    seen: &mut Vec<String>,
) {
    while seen.last().map(String::as_str) != Some(last) {
        match tokio::time::timeout(WATCH_TIMEOUT, rx.recv()).await {
            Ok(Some(event)) => seen.push(event),
            _ => panic!("the watcher stopped before {last:?}: {seen:?}"),
        }
    }
}

/// A raw watch from a resourceVersion sees ADDED, MODIFIED and DELETED; kube-runtime's
/// watcher lists, then follows the same changes.
async fn kube_rs_watch(server: Server) {
    let client = setup(&server, "watch").await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "watch");
    let pp = PostParams::default();
    cms.create(&pp, &configmap("before", json!({"v": "0"})))
        .await
        .expect("create");
    let version = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list resourceVersion");

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn({
        let cms = cms.clone();
        async move {
            let mut events = watcher(cms, watcher::Config::default()).boxed();
            while let Some(event) = events.try_next().await? {
                if tx.send(describe(event)).is_err() {
                    break;
                }
            }
            Ok::<_, watcher::Error>(())
        }
    });
    let mut seen = Vec::new();
    next_until(&mut rx, "init-done", &mut seen).await;
    assert_eq!(seen, ["init", "init-apply before", "init-done"]);

    let raw = cms
        .watch(&WatchParams::default().timeout(30), &version)
        .await
        .expect("watch");
    cms.create(&pp, &configmap("w", json!({"v": "1"})))
        .await
        .expect("create");
    cms.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch");
    cms.delete("w", &DeleteParams::default())
        .await
        .expect("delete");

    let mut events = Vec::new();
    let mut raw = Box::pin(raw);
    tokio::time::timeout(WATCH_TIMEOUT, async {
        while let Some(event) = raw.try_next().await.expect("watch event") {
            let (kind, cm) = match event {
                WatchEvent::Added(cm) => ("ADDED", cm),
                WatchEvent::Modified(cm) => ("MODIFIED", cm),
                WatchEvent::Deleted(cm) => ("DELETED", cm),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            };
            let value = cm
                .data
                .and_then(|d| d.get("v").cloned())
                .unwrap_or_default();
            events.push(format!(
                "{kind} {} {value}",
                cm.metadata.name.unwrap_or_default()
            ));
            if kind == "DELETED" {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the watch did not see the deletion: {events:?}"));
    assert_eq!(events, ["ADDED w 1", "MODIFIED w 2", "DELETED w 2"]);

    seen.clear();
    next_until(&mut rx, "delete w", &mut seen).await;
    assert_eq!(seen, ["apply w", "apply w", "delete w"]);
    follower.abort();
}

/// limit/continue pages through a list in order, without duplicates, on one snapshot.
async fn kube_rs_pagination(server: Server) {
    let client = setup(&server, "pages").await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "pages");
    let names: Vec<String> = (0..23).map(|i| format!("page-{i:02}")).collect();
    for name in &names {
        cms.create(&PostParams::default(), &configmap(name, json!({})))
            .await
            .expect("create");
    }

    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut first_version = None;
    loop {
        let mut params = ListParams::default().labels("set=kube-rs").limit(5);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = cms.list(&params).await.expect("list page");
        pages += 1;
        assert!(page.items.len() <= 5);
        // Every page is served from the first page's snapshot.
        let version = page.metadata.resource_version.clone();
        first_version.get_or_insert(version.clone());
        assert_eq!(Some(version), first_version);
        seen.extend(page.items.into_iter().filter_map(|cm| cm.metadata.name));
        if pages == 1 {
            // A change after the first page does not show in the later pages.
            cms.create(&PostParams::default(), &configmap("page-99", json!({})))
                .await
                .expect("create");
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 5);
    assert_eq!(seen, names);
    let all = cms
        .list(&ListParams::default().labels("set=kube-rs"))
        .await
        .expect("list");
    assert_eq!(all.items.len(), 24);
}
