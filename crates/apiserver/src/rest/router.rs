//! Routing (upstream `endpoints/installer.go`): `/api/v1/...` and
//! `/apis/<group>/<version>/...` paths to a kind, namespace, name and subresource, and
//! the method to a verb.
//!
//! Paths: `[namespaces/<ns>/]<plural>[/<name>[/<subresource>]]`, with the legacy
//! `watch/` prefix. `namespaces/<ns>/<x>` is a namespaced collection when `<x>` is a
//! namespaced kind of the group version, else a subresource of namespace `<ns>`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State as AxumState};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

use super::State;
use super::negotiation::{Format, Output};
use super::params::Params;
use super::request::Call;
use super::store::Target;
use super::{create, delete, get, list, patch, scale, update, watch};
use crate::authn::UserInfo;
use crate::error::ApiError;

/// The router of every kind's REST paths. The authenticated [`UserInfo`] is read from the
/// request's extensions (an admin when absent).
pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/api/v1/{*path}", any(core))
        .route("/apis/{group}/{version}/{*path}", any(grouped))
        .with_state(state)
}

async fn core(
    AxumState(state): AxumState<Arc<State>>,
    Path(path): Path<String>,
    request: Request,
) -> Response {
    serve(state, "", "v1", &path, request).await
}

async fn grouped(
    AxumState(state): AxumState<Arc<State>>,
    Path((group, version, path)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    serve(state, &group, &version, &path, request).await
}

/// The subresource that forwards requests (pods, services and nodes), with any path
/// after it.
const PROXY: &str = "proxy";

/// 404 for paths that name nothing, as upstream's.
fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// 405 for a method a path does not take, as upstream's.
pub fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

/// The user a request runs as when no authentication middleware set one (tests and
/// in-process callers): upstream's admin.
fn default_user() -> UserInfo {
    UserInfo {
        name: "system:admin".to_owned(),
        uid: String::new(),
        groups: vec![
            "system:masters".to_owned(),
            "system:authenticated".to_owned(),
        ],
    }
}

async fn serve(
    state: Arc<State>,
    group: &str,
    version: &str,
    path: &str,
    request: Request,
) -> Response {
    let output = Output::negotiate(request.headers()).ok();
    match route(state, group, version, path, request).await {
        Ok(response) => response,
        // A client that negotiated protobuf gets its Status in protobuf, as upstream.
        Err(e) => match output {
            Some(output) if output.format == Format::Protobuf => {
                let code =
                    StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                output.respond(code, &e.status_json(), &[])
            }
            _ => e.into_response(),
        },
    }
}

async fn route(
    state: Arc<State>,
    group: &str,
    version: &str,
    path: &str,
    request: Request,
) -> Result<Response, ApiError> {
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let legacy_watch = segments.first() == Some(&"watch");
    if legacy_watch {
        segments.remove(0);
    }
    let registry = state.registry.current();
    let namespaced_collection = segments.len() >= 3
        && segments[0] == "namespaces"
        && registry
            .lookup(group, version, segments[2])
            .is_some_and(|k| k.info().namespaced);
    let (namespace, rest) = if namespaced_collection {
        (Some(segments[1].to_owned()), &segments[2..])
    } else {
        (None, &segments[..])
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        // `.../<name>/proxy/<path...>` (upstream's connecters with a subpath).
        [plural, name, sub, ..] if *sub == PROXY => (*plural, Some(*name), Some(*sub)),
        _ => return Err(not_found()),
    };
    let kind = registry
        .lookup(group, version, plural)
        .ok_or_else(not_found)?
        .clone();
    if kind.info().namespaced && namespace.is_none() && name.is_some() {
        return Err(not_found());
    }
    // A proxied request's query and Accept header are the backend's.
    let proxied = subresource == Some(PROXY);
    let (mut params, output) = if proxied {
        let output = Output::negotiate(request.headers()).unwrap_or(Output::JSON);
        (Params::default(), output)
    } else {
        (
            Params::parse(request.uri().query())?,
            Output::negotiate(request.headers())?,
        )
    };
    params.watch |= legacy_watch;
    let user = request
        .extensions()
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_else(default_user);
    let call = Call {
        state,
        kind,
        namespace,
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
        params,
        output,
        user,
    };
    dispatch(call, request).await
}

/// The verb of a request on a main resource (upstream's RequestInfo verbs), `None` for
/// subresources and methods no verb has.
fn main_resource_verb(call: &Call, method: &Method) -> Option<&'static str> {
    if call.subresource.is_some() {
        return None;
    }
    let collection = call.name.is_none();
    Some(match *method {
        Method::GET if call.params.watch => "watch",
        Method::GET if collection => "list",
        Method::GET => "get",
        Method::POST if collection => "create",
        Method::PUT if !collection => "update",
        Method::PATCH if !collection => "patch",
        Method::DELETE if collection => "deletecollection",
        Method::DELETE => "delete",
        _ => return None,
    })
}

async fn dispatch(call: Call, request: Request) -> Result<Response, ApiError> {
    let method = request.method().clone();
    if main_resource_verb(&call, &method).is_some_and(|verb| !call.kind.verbs().contains(&verb)) {
        return Err(method_not_allowed());
    }
    if let Some(own) = call.kind.unstored() {
        return super::unstored::serve(&call, own.as_ref(), request).await;
    }
    let all_namespaces = call.kind.info().namespaced && call.namespace.is_none();
    match (call.name.is_some(), call.subresource.as_deref()) {
        (false, _) => match method {
            Method::GET if call.params.watch => watch::serve(call).await,
            Method::GET => list::serve(&call).await,
            Method::POST if !all_namespaces => create::serve(&call, request).await,
            Method::DELETE if !all_namespaces => delete::serve_collection(&call, request).await,
            _ => Err(method_not_allowed()),
        },
        (true, None) => match method {
            Method::GET if call.params.watch => watch::serve(call).await,
            Method::GET => get::serve(&call).await,
            Method::PUT => update::serve(&call, Target::Main, request).await,
            Method::PATCH => patch::serve(&call, Target::Main, request).await,
            Method::DELETE => delete::serve(&call, request).await,
            _ => Err(method_not_allowed()),
        },
        (true, Some("status")) if call.kind.status_subresource() => match method {
            Method::GET => get::serve(&call).await,
            Method::PUT => update::serve(&call, Target::Status, request).await,
            Method::PATCH => patch::serve(&call, Target::Status, request).await,
            _ => Err(method_not_allowed()),
        },
        (true, Some(sub)) if call.kind.part_subresources().contains(&sub) => {
            let part = call
                .kind
                .part_subresources()
                .iter()
                .find(|p| **p == sub)
                .copied()
                .ok_or_else(not_found)?;
            match method {
                Method::GET => get::serve(&call).await,
                Method::PUT => update::serve(&call, Target::Part(part), request).await,
                Method::PATCH => patch::serve(&call, Target::Part(part), request).await,
                _ => Err(method_not_allowed()),
            }
        }
        (true, Some("scale")) if call.kind.scale().is_some() => {
            let spec = call.kind.scale().cloned().ok_or_else(not_found)?;
            scale::serve(&call, &spec, request).await
        }
        (true, Some(sub)) => {
            let handler = call
                .kind
                .subresources()
                .iter()
                .find(|s| s.name() == sub)
                .cloned()
                .ok_or_else(not_found)?;
            let objects = call.objects();
            let ctx = objects.context();
            handler
                .handle(&ctx, call.namespace(), call.name(), request)
                .await
        }
    }
}
