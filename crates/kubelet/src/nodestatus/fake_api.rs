//! A fake API server for the node status and node lease tests: objects by path in
//! memory, answering GET, POST, PUT (with resourceVersion conflicts) and PATCH of
//! `/status` (strategic merge, applied as Skiff's API server does) with upstream's
//! Status errors, behind a real `kube::Client`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{Method, Request, Response, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::patch::tests::apply;

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    requests: Vec<(String, Value)>,
    /// Requests still to answer with 503 (an API server that is down).
    failures: usize,
    version: u64,
}

/// The fake; clones share it.
#[derive(Clone, Default)]
pub(crate) struct FakeApi(Arc<Mutex<State>>);

impl FakeApi {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A client of this fake.
    pub(crate) fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    /// The object at `path` (`/api/v1/nodes/n`).
    pub(crate) fn object(&self, path: &str) -> Option<Value> {
        self.lock().objects.get(path).cloned()
    }

    /// Stores `object` at `path`.
    pub(crate) fn insert(&self, path: &str, mut object: Value) {
        let mut state = self.lock();
        state.version += 1;
        object["metadata"]["resourceVersion"] = json!(state.version.to_string());
        state.objects.insert(path.to_owned(), object);
    }

    /// Deletes the object at `path`.
    pub(crate) fn remove(&self, path: &str) {
        self.lock().objects.remove(path);
    }

    /// Answers the next `n` requests with 503.
    pub(crate) fn fail_next(&self, n: usize) {
        self.lock().failures = n;
    }

    /// The requests so far, as `METHOD path`.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.lock()
            .requests
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// The bodies of the requests `request` (`PATCH /api/v1/nodes/n/status`), in order.
    pub(crate) fn bodies(&self, request: &str) -> Vec<Value> {
        let state = self.lock();
        let found = state.requests.iter().filter(|(r, _)| r == request);
        found.map(|(_, body)| body.clone()).collect()
    }

    /// Forgets the requests so far.
    pub(crate) fn clear_requests(&self) {
        self.lock().requests.clear();
    }

    async fn handle(&self, request: Request<kube::client::Body>) -> Response<Full<Bytes>> {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let body = match request.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut state = self.lock();
        state
            .requests
            .push((format!("{method} {path}"), body.clone()));
        if state.failures > 0 {
            state.failures -= 1;
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "down",
            );
        }
        state.version += 1;
        let version = state.version.to_string();
        match method {
            Method::GET => match state.objects.get(&path) {
                Some(object) => ok(StatusCode::OK, object),
                None => status(StatusCode::NOT_FOUND, "NotFound", "not found"),
            },
            Method::POST => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default();
                let item = format!("{path}/{name}");
                if state.objects.contains_key(&item) {
                    return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
                }
                let mut object = body.clone();
                object["metadata"]["uid"] = json!(format!("uid-{version}"));
                object["metadata"]["resourceVersion"] = json!(version);
                state.objects.insert(item, object.clone());
                ok(StatusCode::CREATED, &object)
            }
            Method::PUT => {
                let Some(current) = state.objects.get(&path) else {
                    return status(StatusCode::NOT_FOUND, "NotFound", "not found");
                };
                if current["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"] {
                    return status(
                        StatusCode::CONFLICT,
                        "Conflict",
                        "the object has been modified",
                    );
                }
                let mut object = body.clone();
                object["metadata"]["resourceVersion"] = json!(version);
                state.objects.insert(path, object.clone());
                ok(StatusCode::OK, &object)
            }
            Method::PATCH => {
                let Some(item) = path.strip_suffix("/status") else {
                    return status(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "MethodNotAllowed",
                        "main resource",
                    );
                };
                let Some(current) = state.objects.get(item).cloned() else {
                    return status(StatusCode::NOT_FOUND, "NotFound", "not found");
                };
                // Only the status changes through /status, as on Skiff's API server.
                let patched = apply(&current, &body);
                let mut object = current;
                object["status"] = patched["status"].clone();
                object["metadata"]["resourceVersion"] = json!(version);
                state.objects.insert(item.to_owned(), object.clone());
                ok(StatusCode::OK, &object)
            }
            _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "no"),
        }
    }
}

fn ok(code: StatusCode, object: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(object.to_string())));
    *response.status_mut() = code;
    response
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    ok(code, &body)
}
