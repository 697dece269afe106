//! Watch streams: initial events, events after a resourceVersion, live events,
//! bookmarks and 410 for a compacted revision.

use axum::http::StatusCode;

use super::*;

/// The events of a watch that ends by its timeout.
async fn events(app: &Router, uri: &str) -> Vec<Value> {
    let reply = send(app, "GET", uri, "").await;
    assert_eq!(reply.status, StatusCode::OK);
    let text = match &reply.body {
        Value::String(text) => text.clone(),
        one => one.to_string(),
    };
    text.lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect()
}

fn summary(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let name = e["object"]["metadata"]["name"].as_str().unwrap_or_default();
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                name.to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test]
async fn watch_from_a_revision_sends_later_changes() {
    let (app, _) = server().await;
    let a = send(&app, "POST", CMS, &config_map("a")).await.body;
    let rv = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut changed = a.clone();
    changed["data"]["k"] = "w".into();
    send(&app, "PUT", &format!("{CMS}/a"), &changed.to_string()).await;
    send(&app, "POST", CMS, &config_map("b")).await;
    send(&app, "DELETE", &format!("{CMS}/a"), "").await;
    let got = events(
        &app,
        &format!("{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
    )
    .await;
    assert_eq!(
        summary(&got),
        pairs(&[("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")])
    );
    assert_eq!(got[1]["object"]["kind"], "ConfigMap");
    let deleted_rv: i64 = got[2]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    let added_rv: i64 = got[1]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    assert!(
        deleted_rv > added_rv,
        "a DELETED event carries the revision of the delete"
    );
}

#[tokio::test]
async fn watch_without_revision_starts_with_the_current_objects_then_goes_live() {
    let (app, _) = server().await;
    send(&app, "POST", CMS, &config_map("a")).await;
    let writer = app.clone();
    let live = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        send(&writer, "POST", CMS, &config_map("b")).await;
    });
    let got = events(&app, &format!("{CMS}?watch=true&timeoutSeconds=1")).await;
    live.await.expect("writer");
    assert_eq!(summary(&got), pairs(&[("ADDED", "a"), ("ADDED", "b")]));
}

#[tokio::test]
async fn selectors_turn_changes_into_added_and_deleted() {
    let (app, _) = server().await;
    let a = send(&app, "POST", CMS, &config_map("a")).await.body;
    let rv = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut relabeled = a.clone();
    relabeled["metadata"]["labels"]["app"] = "other".into();
    let away = send(&app, "PUT", &format!("{CMS}/a"), &relabeled.to_string())
        .await
        .body;
    let mut back = away.clone();
    back["metadata"]["labels"]["app"] = "a".into();
    send(&app, "PUT", &format!("{CMS}/a"), &back.to_string()).await;
    let got = events(
        &app,
        &format!("{CMS}?watch=1&resourceVersion={rv}&labelSelector=app%3Da&timeoutSeconds=1"),
    )
    .await;
    assert_eq!(summary(&got), pairs(&[("DELETED", "a"), ("ADDED", "a")]));
}

#[tokio::test]
async fn initial_events_end_with_an_annotated_bookmark() {
    let (app, _) = server().await;
    send(&app, "POST", CMS, &config_map("a")).await;
    let uri = format!(
        "{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let got = events(&app, &uri).await;
    assert_eq!(got[0]["type"], "ADDED");
    assert_eq!(got[1]["type"], "BOOKMARK");
    let metadata = &got[1]["object"]["metadata"];
    assert_eq!(metadata["annotations"]["k8s.io/initial-events-end"], "true");
    assert!(metadata["resourceVersion"].is_string());
    assert!(metadata.get("name").is_none());
}

#[tokio::test]
async fn compacted_revisions_end_with_a_410_error_event() {
    let (app, state) = server().await;
    send(&app, "POST", CMS, &config_map("a")).await;
    send(&app, "POST", CMS, &config_map("b")).await;
    state.storage.compact(3).await.expect("compact");
    let got = events(
        &app,
        &format!("{CMS}?watch=1&resourceVersion=1&timeoutSeconds=1"),
    )
    .await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["type"], "ERROR");
    assert_eq!(got[0]["object"]["kind"], "Status");
    assert_eq!(got[0]["object"]["code"], 410);
    assert_eq!(got[0]["object"]["reason"], "Expired");
}
