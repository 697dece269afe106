//! LIST from the stored bytes ([`crate::rest::stored_list`]): the JSON body is the very
//! bytes the decoded path writes, for every selector, page and continue token; values the
//! splice refuses and kinds that convert on read still come out decoded.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

use super::*;
use crate::error::GroupResource;
use crate::rest::list;
use crate::rest::params::Params;
use crate::rest::predicate::Predicate;
use crate::rest::store::Store;

/// Secrets whose reads convert: a label is added on the way out of storage.
struct ConvertedSecrets;
impl Strategy for ConvertedSecrets {
    type Object = Secret;
    fn decode_from_storage(&self, mut stored: Value) -> Result<Value, crate::ApiError> {
        stored["metadata"]["labels"]["decoded"] = "yes".into();
        Ok(stored)
    }
    fn stored_as_served(&self) -> bool {
        false
    }
}

/// The JSON body of the decoded path ([`list::page`] and [`list::list_object`]).
async fn decoded_body(
    state: &Arc<State>,
    resource: &GroupResource,
    namespace: Option<&str>,
    query: &str,
) -> Vec<u8> {
    let kind = state
        .registry
        .current()
        .by_resource(resource)
        .cloned()
        .expect("kind");
    let params = Params::parse(Some(query)).unwrap();
    let predicate = Predicate::new(
        kind.as_ref(),
        params.label_selector.as_deref(),
        params.field_selector.as_deref(),
    )
    .unwrap();
    let store = Store::new(state, kind.clone());
    let page = list::page(&store, namespace, &params, &predicate)
        .await
        .unwrap();
    let metadata = list::list_metadata(&page, &store.prefix(namespace));
    serde_json::to_vec(&list::list_object(kind.info(), page.items, metadata)).unwrap()
}

/// GET `uri`: status, Content-Length and the body's bytes.
async fn get_bytes(app: &Router, uri: &str) -> (StatusCode, Option<String>, Vec<u8>) {
    let request = Request::get(uri).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let length = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, length, bytes.to_vec())
}

#[tokio::test]
async fn lists_from_stored_bytes_equal_the_decoded_lists() {
    let (app, state) = server().await;
    let configmaps = GroupResource::new("", "configmaps");
    let pods = GroupResource::new("", "pods");
    for (i, app_label) in ["a", "b", "a", "c", "b"].iter().enumerate() {
        let body = serde_json::json!({
            "metadata": {"name": format!("cm-{i}"), "labels": {"app": app_label},
                         "annotations": {"note": "caf\u{e9} \"quoted\" \\ </>"}},
            "data": {"k": "v\n", "n": i.to_string()},
        });
        let reply = send(&app, "POST", CMS, &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    }
    // Values stored by another writer: keys out of order (decoded, not spliced), and a
    // value without metadata.
    state
        .storage
        .create(
            "/registry/configmaps/default/cm-x",
            br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-x","namespace":"default","labels":{"app":"a"}}}"#.to_vec(),
        )
        .await
        .unwrap();
    state
        .storage
        .create(
            "/registry/configmaps/default/cm-y",
            br#"{"apiVersion":"v1","kind":"ConfigMap"}"#.to_vec(),
        )
        .await
        .unwrap();
    for node in ["n1", "n2"] {
        let pod = serde_json::json!({
            "metadata": {"name": format!("p-{node}"), "labels": {"app": "a"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
        });
        let reply = send(&app, "POST", PODS, &pod.to_string()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    }

    let first = get_bytes(&app, &format!("{CMS}?limit=2")).await.2;
    let first: Value = serde_json::from_slice(&first).unwrap();
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    let cases = [
        (&configmaps, Some("default"), ""),
        (&configmaps, None, ""),
        (&configmaps, Some("default"), "limit=2"),
        (
            &configmaps,
            Some("default"),
            "limit=3&labelSelector=app%3Da",
        ),
        (
            &configmaps,
            Some("default"),
            "labelSelector=app%20in%20(a,b),app!%3Db",
        ),
        (
            &configmaps,
            Some("default"),
            "fieldSelector=metadata.name%3Dcm-3",
        ),
        (
            &configmaps,
            Some("default"),
            "fieldSelector=metadata.name!%3Dcm-3&limit=4",
        ),
        (
            &configmaps,
            Some("default"),
            &format!("limit=2&continue={token}"),
        ),
        (&configmaps, Some("default"), "resourceVersion=0"),
        (&pods, Some("default"), "fieldSelector=spec.nodeName%3Dn2"),
        (
            &pods,
            Some("default"),
            "labelSelector=app%3Da&fieldSelector=spec.nodeName!%3Dn2",
        ),
    ];
    for (resource, namespace, query) in cases {
        let path = match namespace {
            Some(ns) => format!("/api/v1/namespaces/{ns}/{}", resource.resource),
            None => format!("/api/v1/{}", resource.resource),
        };
        let (status, length, body) = get_bytes(&app, &format!("{path}?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{query}");
        let expected = decoded_body(&state, resource, namespace, query).await;
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&expected),
            "{path}?{query}"
        );
        assert_eq!(length, Some(body.len().to_string()), "{query}");
    }

    // The decoded fallbacks carry their resourceVersion too.
    let all = send(&app, "GET", CMS, "").await.body;
    let by_name: BTreeMap<String, &Value> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["metadata"]["name"].as_str().unwrap_or("").to_owned(), i))
        .collect();
    assert!(by_name["cm-x"]["metadata"]["resourceVersion"].is_string());
    assert_eq!(all["items"].as_array().unwrap().len(), 7);
    assert_eq!(
        by_name["cm-0"]["metadata"]["annotations"]["note"],
        "caf\u{e9} \"quoted\" \\ </>"
    );
}

#[tokio::test]
async fn kinds_that_convert_on_read_are_listed_converted() {
    let (app, state) = server().await;
    state
        .registry
        .update(|registry| registry.add(ConvertedSecrets));
    let secrets = "/api/v1/namespaces/default/secrets";
    let reply = send(&app, "POST", secrets, r#"{"metadata":{"name":"s"}}"#).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    let list = send(&app, "GET", secrets, "").await.body;
    assert_eq!(list["kind"], "SecretList");
    assert_eq!(list["items"][0]["metadata"]["labels"]["decoded"], "yes");
    assert!(list["items"][0]["metadata"]["resourceVersion"].is_string());
    let selected = send(&app, "GET", &format!("{secrets}?labelSelector=decoded"), "").await;
    assert_eq!(selected.body["items"].as_array().map(Vec::len), Some(1));
}
