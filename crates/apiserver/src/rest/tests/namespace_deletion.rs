//! Namespace deletion with the real namespace kind and its deleter: the DELETE marks the
//! namespace Terminating, new content is refused, the deleter deletes the content
//! gracefully and waits for what remains before the namespace goes.

use axum::http::StatusCode;
use serde_json::json;

use super::*;
use crate::authn::UserInfo;
use crate::registry::Objects;
use crate::registry::core::namespaces::deleter::{self, Progress};
use crate::rest::objects::ServerObjects;

const NS: &str = "/api/v1/namespaces/doomed";

/// A server whose namespaces are the real kind, with namespace `doomed` holding a
/// ConfigMap, a ConfigMap with a finalizer and a pod (30 s grace period).
async fn doomed() -> (Router, Arc<State>) {
    let mut registry = Registry::default();
    registry.add(crate::registry::core::namespaces::Namespaces);
    registry.add(ConfigMaps);
    registry.add(Pods);
    let state = Arc::new(State::new(
        registry,
        Arc::new(memory::Memory::new()),
        ClusterConfig::default(),
    ));
    let app = router(state.clone());
    let created = send(
        &app,
        "POST",
        "/api/v1/namespaces",
        r#"{"metadata":{"name":"doomed"}}"#,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["spec"]["finalizers"], json!(["kubernetes"]));
    let kept = json!({"metadata": {"name": "kept", "finalizers": ["example.com/keep"]}});
    for body in [
        config_map("plain"),
        kept.to_string(),
        r#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#.to_owned(),
    ] {
        let uri = if body.contains("containers") {
            format!("{NS}/pods")
        } else {
            format!("{NS}/configmaps")
        };
        let reply = send(&app, "POST", &uri, &body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    }
    (app, state)
}

async fn pass(state: &State) -> Progress {
    let user = UserInfo::anonymous();
    let objects = ServerObjects::new(state, &user, false);
    deleter::delete(&objects, "doomed")
        .await
        .expect("deleter pass")
}

fn condition<'v>(namespace: &'v Value, kind: &str) -> &'v Value {
    let conditions = namespace["status"]["conditions"]
        .as_array()
        .expect("conditions");
    conditions.iter().find(|c| c["type"] == kind).expect(kind)
}

#[tokio::test]
async fn delete_marks_the_namespace_and_the_deleter_removes_it_after_its_content() {
    let (app, state) = doomed().await;
    let deleted = send(&app, "DELETE", NS, "").await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    assert_eq!(deleted.body["kind"], "Namespace");
    assert_eq!(deleted.body["status"]["phase"], "Terminating");
    assert!(deleted.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(deleted.body["spec"]["finalizers"], json!(["kubernetes"]));
    // Deleting again leaves it as it is.
    let again = send(&app, "DELETE", NS, "").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(
        send(&app, "GET", &format!("{NS}/configmaps/plain"), "")
            .await
            .status,
        StatusCode::OK
    );

    let refused = send(
        &app,
        "POST",
        &format!("{NS}/configmaps"),
        &config_map("late"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(
        refused.body["message"],
        r#"configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated"#
    );

    // The pod waits for its grace period, the finalizer holds its ConfigMap.
    assert_eq!(pass(&state).await, Progress::ContentRemaining);
    let namespace = send(&app, "GET", NS, "").await.body;
    let remaining = condition(&namespace, "NamespaceContentRemaining");
    assert_eq!(remaining["status"], "True");
    assert_eq!(
        remaining["message"],
        "Some resources are remaining: configmaps. has 1 resource instances, pods. has 1 resource instances"
    );
    let finalizers = condition(&namespace, "NamespaceFinalizersRemaining");
    assert_eq!(
        finalizers["message"],
        "Some content in the namespace has finalizers remaining: example.com/keep in 1 resource instances"
    );
    assert_eq!(
        send(&app, "GET", &format!("{NS}/configmaps/plain"), "")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let pod = send(&app, "GET", &format!("{NS}/pods/p"), "").await.body;
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30);

    // The kubelet confirms the pod's end; the finalizer's owner lets go.
    let gone = send(
        &app,
        "DELETE",
        &format!("{NS}/pods/p?gracePeriodSeconds=0"),
        "",
    )
    .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    let release = send(
        &app,
        "PATCH",
        &format!("{NS}/configmaps/kept"),
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(release.status, StatusCode::OK, "{}", release.body);

    assert_eq!(pass(&state).await, Progress::Done);
    assert_eq!(
        send(&app, "GET", NS, "").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(pass(&state).await, Progress::Done);
}

#[tokio::test]
async fn other_spec_finalizers_keep_the_emptied_namespace() {
    let (app, state) = doomed().await;
    let mut finalize = |ns: &mut Value| {
        ns["spec"]["finalizers"] = json!(["kubernetes", "example.com/last"]);
        Ok::<(), crate::ApiError>(())
    };
    let user = UserInfo::anonymous();
    let objects = ServerObjects::new(&state, &user, false);
    let namespaces = crate::registry::core::namespaces::namespaces();
    objects
        .update(&namespaces, None, "doomed", &mut finalize)
        .await
        .expect("update");
    for uri in [format!("{NS}/pods/p?gracePeriodSeconds=0"), NS.to_owned()] {
        assert_eq!(send(&app, "DELETE", &uri, "").await.status, StatusCode::OK);
    }
    let release = send(
        &app,
        "PATCH",
        &format!("{NS}/configmaps/kept"),
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(release.status, StatusCode::OK, "{}", release.body);
    assert_eq!(pass(&state).await, Progress::FinalizersRemaining);
    let namespace = send(&app, "GET", NS, "").await.body;
    assert_eq!(namespace["spec"]["finalizers"], json!(["example.com/last"]));
    assert_eq!(
        condition(&namespace, "NamespaceContentRemaining")["reason"],
        "ContentRemoved"
    );
}
