//! DELETE of one object and of a collection (upstream `handlers.DeleteResource` and
//! `DeleteCollection`). `DeleteOptions` come from the query and, when sent, the body.
//! An object removed at once is answered with a Status Success (or the object, for kinds
//! that return it); one marked for deletion (finalizers, grace period) with the object.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::list;
use super::negotiation::{content_type, decode_object, read_body};
use super::object::meta_string;
use super::objects::ServerObjects;
use super::predicate::Predicate;
use super::request::Call;
use super::store::{DeleteOptions, Deleted};
use crate::error::ApiError;

/// The body of a DELETE (`meta.k8s.io/v1 DeleteOptions`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    grace_period_seconds: Option<i64>,
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    preconditions: Option<Preconditions>,
    #[serde(default)]
    dry_run: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

/// The options of a DELETE: the query's, overridden by the body's. Returns them and
/// whether it is a dry run.
async fn options(call: &Call, request: Request) -> Result<(DeleteOptions, bool), ApiError> {
    let params = &call.params;
    let mut options = DeleteOptions {
        grace_period_seconds: params.grace_period_seconds,
        propagation_policy: params.propagation_policy.clone(),
        orphan_dependents: params.orphan_dependents,
        ..Default::default()
    };
    let mut dry_run = params.dry_run;
    let (parts, body) = request.into_parts();
    let bytes = read_body(body).await?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        let value = decode_object(&content_type(&parts.headers), &bytes)?;
        let body: Body = serde_json::from_value(value)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        options.grace_period_seconds = body.grace_period_seconds.or(options.grace_period_seconds);
        options.propagation_policy = body.propagation_policy.or(options.propagation_policy);
        options.orphan_dependents = body.orphan_dependents.or(options.orphan_dependents);
        if let Some(pre) = body.preconditions {
            options.uid = pre.uid;
            options.resource_version = pre.resource_version;
        }
        dry_run |= body.dry_run.iter().any(|d| d == "All");
    }
    Ok((options, dry_run))
}

/// Upstream's warning on deleting a kind that orphans by default (batch/v1 Jobs) without a
/// propagation policy.
const ORPHAN_WARNING: &str = "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

/// The warnings of a delete with `options` (upstream's job REST Delete and
/// DeleteCollection).
fn warnings(call: &Call, options: &DeleteOptions) -> Vec<String> {
    let default_policy =
        options.propagation_policy.is_none() && options.orphan_dependents.is_none();
    if default_policy && call.kind.orphans_by_default() {
        vec![ORPHAN_WARNING.to_owned()]
    } else {
        Vec::new()
    }
}

/// The Status Success of an object removed at once (upstream `finalizeDelete`).
fn success(call: &Call, object: &Value) -> Value {
    let info = call.kind.info();
    let mut details = json!({
        "name": meta_string(object, "name"),
        "kind": info.plural,
        "uid": meta_string(object, "uid"),
    });
    if !info.group.is_empty() {
        details["group"] = info.group.clone().into();
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// Serves `DELETE .../<plural>/<name>`.
pub async fn serve(call: &Call, request: Request) -> Result<Response, ApiError> {
    let (options, dry_run) = options(call, request).await?;
    let objects = ServerObjects::new(&call.state, &call.user, dry_run);
    let ctx = objects.context();
    let body = match call
        .store()
        .delete(&ctx, call.namespace(), call.name(), &options)
        .await?
    {
        Deleted::Now(object) if !call.kind.return_deleted_object() => success(call, &object),
        Deleted::Now(object) | Deleted::Pending(object) => object,
    };
    Ok(call.respond(StatusCode::OK, &body, &warnings(call, &options)))
}

/// Serves `DELETE .../<plural>` (deletecollection): deletes every object the selectors
/// match and answers with the list of them.
pub async fn serve_collection(call: &Call, request: Request) -> Result<Response, ApiError> {
    let (options, dry_run) = options(call, request).await?;
    let predicate = Predicate::new(
        call.kind.as_ref(),
        call.params.label_selector.as_deref(),
        call.params.field_selector.as_deref(),
    )?;
    let store = call.store();
    let page = list::page(&store, call.namespace(), &Default::default(), &predicate).await?;
    let objects = ServerObjects::new(&call.state, &call.user, dry_run);
    let ctx = objects.context();
    let mut items = Vec::with_capacity(page.items.len());
    for object in &page.items {
        let namespace = object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str);
        match store
            .delete(&ctx, namespace, &meta_string(object, "name"), &options)
            .await
        {
            Ok(Deleted::Now(object) | Deleted::Pending(object)) => items.push(object),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let body = list::list_object(call.kind.info(), items, json!({}));
    Ok(call.respond(StatusCode::OK, &body, &warnings(call, &options)))
}
