//! Namespace deletion with the real namespace kind, the API server's part of it: the DELETE
//! marks the namespace Terminating and new content is refused; the namespace goes when the
//! namespace controller (in the controller manager) empties `spec.finalizers` through
//! `finalize`, or stays while other `spec.finalizers` remain.

use axum::http::StatusCode;
use serde_json::json;

use super::*;
use crate::authn::UserInfo;
use crate::registry::Objects;
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

/// The namespace controller's last step: `spec.finalizers` without `kubernetes`.
async fn finalize(app: &Router, finalizers: Value) -> Reply {
    let body = json!({"metadata": {"name": "doomed"}, "spec": {"finalizers": finalizers}});
    send(app, "PUT", &format!("{NS}/finalize"), &body.to_string()).await
}

#[tokio::test]
async fn delete_marks_the_namespace_and_finalize_removes_it() {
    let (app, _) = doomed().await;
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

    // The API server deletes no content itself: that is the namespace controller's.
    assert_eq!(
        send(&app, "GET", &format!("{NS}/configmaps/plain"), "")
            .await
            .status,
        StatusCode::OK
    );
    let done = finalize(&app, json!([])).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.body["spec"]["finalizers"], json!([]));
    assert_eq!(
        send(&app, "GET", NS, "").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn other_spec_finalizers_keep_the_emptied_namespace() {
    let (app, state) = doomed().await;
    let mut two = |ns: &mut Value| {
        ns["spec"]["finalizers"] = json!(["kubernetes", "example.com/last"]);
        Ok::<(), crate::ApiError>(())
    };
    let user = UserInfo::anonymous();
    let objects = ServerObjects::new(&state, &user, false);
    let namespaces = crate::registry::core::namespaces::namespaces();
    objects
        .update(&namespaces, None, "doomed", &mut two)
        .await
        .expect("update");
    let deleted = send(&app, "DELETE", NS, "").await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    let done = finalize(&app, json!(["example.com/last"])).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    let namespace = send(&app, "GET", NS, "").await.body;
    assert_eq!(namespace["spec"]["finalizers"], json!(["example.com/last"]));
    assert_eq!(namespace["status"]["phase"], "Terminating");
}
