//! `/healthz`, `/livez` and `/readyz` (upstream `k8s.io/apiserver/pkg/server/healthz`):
//! plain-text `ok`, or with `?verbose` one `[+]<check> ok` line per check and
//! `<endpoint> check passed`; a failed check answers 500 with `[-]<check> failed: reason
//! withheld` and `<endpoint> check failed`. Each check is also served alone at
//! `/<endpoint>/<check>`. Checks: `ping`, `log`, `etcd` (the store answers); `/readyz`
//! adds `shutdown` (fails once the server is shutting down).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::storage::Storage;

/// How long the store has to answer the `etcd` check.
const STORAGE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the checks look at.
pub struct Health {
    storage: Arc<dyn Storage>,
    /// Set when shutdown begins: `/readyz` fails from then on.
    pub shutting_down: AtomicBool,
}

impl Health {
    pub fn new(storage: Arc<dyn Storage>) -> Arc<Self> {
        Arc::new(Health {
            storage,
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Runs check `name`; `None` for an unknown check.
    async fn check(&self, name: &str) -> Option<bool> {
        Some(match name {
            "ping" | "log" => true,
            "etcd" => matches!(
                tokio::time::timeout(STORAGE_TIMEOUT, self.storage.current_revision()).await,
                Ok(Ok(_))
            ),
            "shutdown" => !self.shutting_down.load(Ordering::Relaxed),
            _ => return None,
        })
    }
}

/// The checks of an endpoint.
fn checks(endpoint: &str) -> &'static [&'static str] {
    if endpoint == "readyz" {
        &["ping", "log", "etcd", "shutdown"]
    } else {
        &["ping", "log", "etcd"]
    }
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// Whether the query asks for `verbose` (present, any value but `false`).
fn verbose(query: Option<&str>) -> bool {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
    pairs.iter().any(|(k, v)| k == "verbose" && v != "false")
}

/// The checks named in `exclude` parameters.
fn excluded(query: Option<&str>) -> Vec<String> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
    pairs
        .into_iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v)
        .collect()
}

async fn all(health: &Health, endpoint: &str, query: Option<&str>) -> Response {
    let skip = excluded(query);
    let mut lines = String::new();
    let mut passed = true;
    for name in checks(endpoint) {
        if skip.iter().any(|s| s == name) {
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        if health.check(name).await == Some(true) {
            lines.push_str(&format!("[+]{name} ok\n"));
        } else {
            passed = false;
            lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
        }
    }
    if passed {
        let body = if verbose(query) {
            format!("{lines}{endpoint} check passed\n")
        } else {
            "ok".to_owned()
        };
        text(StatusCode::OK, body)
    } else {
        text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{lines}{endpoint} check failed\n"),
        )
    }
}

async fn one(health: &Health, endpoint: &str, name: &str) -> Response {
    if !checks(endpoint).contains(&name) {
        return text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned());
    }
    match health.check(name).await {
        Some(true) => text(StatusCode::OK, "ok".to_owned()),
        _ => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal server error: reason withheld\n".to_owned(),
        ),
    }
}

/// The routes of the three endpoints and their single checks.
pub fn router<S: Clone + Send + Sync + 'static>(health: Arc<Health>) -> Router<S> {
    let mut router = Router::new();
    for endpoint in ["healthz", "livez", "readyz"] {
        router = router
            .route(
                &format!("/{endpoint}"),
                get(
                    move |State(h): State<Arc<Health>>, RawQuery(q): RawQuery| async move {
                        all(&h, endpoint, q.as_deref()).await
                    },
                ),
            )
            .route(
                &format!("/{endpoint}/{{check}}"),
                get(
                    move |State(h): State<Arc<Health>>, Path(check): Path<String>| async move {
                        one(&h, endpoint, &check).await
                    },
                ),
            );
    }
    router.with_state(health)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_query_flags() {
        assert!(verbose(Some("verbose")));
        assert!(verbose(Some("verbose=true")));
        assert!(!verbose(Some("verbose=false")));
        assert!(!verbose(None));
        assert_eq!(
            excluded(Some("exclude=etcd&exclude=log&verbose")),
            vec!["etcd", "log"]
        );
    }
}
