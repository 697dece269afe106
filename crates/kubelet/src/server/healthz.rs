//! `GET /healthz` of the kubelet (upstream `k8s.io/apiserver/pkg/server/healthz` with the
//! kubelet's checks): `ping`, `log` and `pleg`. Healthy: 200 `ok`. A failing check: 500
//! with the per-check listing, its reason withheld from the body and logged, as upstream
//! does. `?verbose` lists the checks when healthy too.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use tracing::warn;

use crate::pleg::PlegHealth;

/// The `/healthz` route over the PLEG's health.
pub fn router(pleg: PlegHealth) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .with_state(pleg)
}

async fn healthz(
    State(pleg): State<PlegHealth>,
    Query(query): Query<HashMap<String, String>>,
) -> (StatusCode, String) {
    let checks = [("ping", Ok(())), ("log", Ok(())), ("pleg", pleg.healthy())];
    let mut listing = String::new();
    let mut failed = false;
    for (name, result) in checks {
        match result {
            Ok(()) => listing.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                warn!(check = name, %reason, "healthz check failed");
                listing.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed = true;
            }
        }
    }
    if failed {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{listing}healthz check failed\n"),
        )
    } else if query.contains_key("verbose") {
        (StatusCode::OK, format!("{listing}healthz check passed\n"))
    } else {
        (StatusCode::OK, "ok".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn get(app: &Router, uri: &str) -> (StatusCode, String) {
        let response = app
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn reports_pleg_health() {
        let pleg = PlegHealth::default();
        let app = router(pleg.clone());
        assert_eq!(
            get(&app, "/healthz").await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "[+]ping ok\n[+]log ok\n[-]pleg failed: reason withheld\nhealthz check failed\n"
                    .to_owned()
            )
        );
        pleg.mark_active();
        assert_eq!(
            get(&app, "/healthz").await,
            (StatusCode::OK, "ok".to_owned())
        );
        assert_eq!(
            get(&app, "/healthz?verbose").await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]log ok\n[+]pleg ok\nhealthz check passed\n".to_owned()
            )
        );
    }
}
