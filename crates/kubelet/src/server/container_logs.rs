//! `GET /containerLogs/{namespace}/{pod}/{container}` (upstream `server.go`
//! `getContainerLogs` and `kubelet_pods.go` `GetKubeletContainerLogs`): the container's
//! CRI log file as text, with the v1 `PodLogOptions` query parameters `follow`,
//! `previous`, `timestamps`, `tailLines`, `limitBytes`, `sinceSeconds` and `sinceTime`.

use std::path::PathBuf;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_cri::v1::{ContainerState, ContainerStatusRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::ServerState;
use super::cri_log::{LogOptions, read_logs};
use super::lookup::{FoundPod, HttpError, find_pod, parse_bool, strip_runtime};
use crate::error::{Error, Result};

/// Chunks buffered between the file reader and the response.
const LOG_CHANNEL: usize = 16;

/// The handler.
pub async fn container_logs(
    State(state): State<ServerState>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    match serve(state, &namespace, &pod, &container, &query).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// The query parameters.
#[derive(Debug, Default, PartialEq)]
struct LogQuery {
    previous: bool,
    options: LogOptions,
}

/// Parses and validates the query (upstream `ValidatePodLogOptions`: at most one of
/// `sinceSeconds` / `sinceTime`, `tailLines` >= 0, `limitBytes` and `sinceSeconds` >= 1).
fn parse_query(query: &[(String, String)], now: DateTime<Utc>) -> Result<LogQuery, HttpError> {
    let invalid = || {
        HttpError(
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"message": "Invalid request."}"#.to_owned(),
        )
    };
    let mut q = LogQuery::default();
    let mut since_seconds = None;
    let mut since_time = None;
    for (key, value) in query {
        let flag = || parse_bool(value).ok_or_else(invalid);
        let number = || value.parse::<i64>().map_err(|_| invalid());
        match key.as_str() {
            "follow" => q.options.follow = flag()?,
            "previous" => q.previous = flag()?,
            "timestamps" => q.options.timestamps = flag()?,
            "tailLines" => q.options.tail = Some(u64::try_from(number()?).map_err(|_| invalid())?),
            "limitBytes" => {
                q.options.limit_bytes = Some(
                    u64::try_from(number()?)
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(invalid)?,
                )
            }
            "sinceSeconds" => {
                since_seconds = Some(number()?)
                    .filter(|n| *n >= 1)
                    .map(Some)
                    .ok_or_else(invalid)?
            }
            "sinceTime" => {
                since_time = Some(DateTime::parse_from_rfc3339(value).map_err(|_| invalid())?)
            }
            _ => {}
        }
    }
    q.options.since = match (since_seconds, since_time) {
        (Some(_), Some(_)) => return Err(invalid()),
        (Some(s), None) => Some((now - chrono::Duration::seconds(s)).fixed_offset()),
        (None, t) => t,
    };
    Ok(q)
}

async fn serve(
    state: ServerState,
    namespace: &str,
    pod_name: &str,
    container: &str,
    query: &[(String, String)],
) -> Result<Response, HttpError> {
    let q = parse_query(query, Utc::now())?;
    let pod = find_pod(&state, namespace, pod_name).ok_or_else(|| {
        HttpError(
            StatusCode::NOT_FOUND,
            format!("pod {pod_name:?} does not exist\n"),
        )
    })?;
    if !pod.has_container(container) {
        return Err(HttpError(
            StatusCode::NOT_FOUND,
            format!("container {container:?} not found in pod {pod_name:?}\n"),
        ));
    }
    let bad = |msg: String| HttpError(StatusCode::BAD_REQUEST, msg);
    let id = log_container_id(&pod, container, q.previous).map_err(|e| bad(e.to_string()))?;
    let status = state
        .cri
        .container_status(ContainerStatusRequest {
            container_id: id.clone(),
            verbose: false,
        })
        .await
        .map_err(|e| {
            bad(format!(
                "failed to get container status {id:?}: {}",
                e.message()
            ))
        })?
        .status
        .ok_or_else(|| bad(format!("container {id:?} not found")))?;
    let log_path = PathBuf::from(&status.log_path);
    let log_path = if log_path.is_absolute() {
        log_path
    } else {
        state
            .pod_logs_dir
            .join(format!("{namespace}_{pod_name}_{}", pod.uid()))
            .join(log_path)
    };
    let (tx, rx) = mpsc::channel(LOG_CHANNEL);
    // Open errors are reported before the body starts.
    std::fs::metadata(&log_path).map_err(|e| {
        bad(format!(
            "failed to open log file {:?}: {e}",
            log_path.display()
        ))
    })?;
    let cri = state.cri.clone();
    tokio::spawn(async move {
        let running = || {
            let cri = cri.clone();
            let id = id.clone();
            async move {
                cri.container_status(ContainerStatusRequest {
                    container_id: id,
                    verbose: false,
                })
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| s.state == ContainerState::ContainerRunning as i32)
            }
        };
        if let Err(e) = read_logs(log_path, q.options, tx, running).await {
            tracing::warn!(error = %e, "reading container logs");
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, std::io::Error>));
    Ok(([(header::CONTENT_TYPE, "text/plain")], body).into_response())
}

/// Which container instance's logs to read (upstream `validateContainerLogStatus`),
/// or the upstream message why none can be.
fn log_container_id(pod: &FoundPod, container: &str, previous: bool) -> Result<String> {
    let pod_name = pod.name();
    let status = pod.container_status(container).ok_or_else(|| {
        Error::Log(format!(
            "container {container:?} in pod {pod_name:?} is not available"
        ))
    })?;
    let state = status.state.clone().unwrap_or_default();
    let last = status.last_state.clone().unwrap_or_default();
    let last_terminated_id = last
        .terminated
        .as_ref()
        .and_then(|t| t.container_id.as_deref())
        .filter(|id| !id.is_empty());
    let terminated = || {
        Error::Log(format!(
            "container {container:?} in pod {pod_name:?} is terminated"
        ))
    };
    let id = if previous {
        last_terminated_id.ok_or_else(|| {
            Error::Log(format!(
                "previous terminated container {container:?} in pod {pod_name:?} not found"
            ))
        })?
    } else if state.running.is_some() {
        status.container_id.as_deref().unwrap_or_default()
    } else if let Some(t) = &state.terminated {
        match t.container_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => last_terminated_id.ok_or_else(terminated)?,
        }
    } else if last.terminated.is_some() {
        last_terminated_id.ok_or_else(terminated)?
    } else if let Some(waiting) = &state.waiting {
        let reason = waiting.reason.as_deref().unwrap_or_default();
        let why = match reason {
            "ErrImagePull" => "image can't be pulled",
            "ImagePullBackOff" => "trying and failing to pull image",
            other => other,
        };
        return Err(Error::Log(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: {why}"
        )));
    } else {
        return Err(Error::Log(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start - no logs yet"
        )));
    };
    Ok(strip_runtime(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting, ContainerStatus, Pod, PodStatus,
    };

    fn pod_with(status: ContainerStatus) -> FoundPod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        FoundPod {
            pod: std::sync::Arc::new(pod),
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "c".into(),
                    ..status
                }]),
                ..Default::default()
            }),
        }
    }

    fn terminated(id: &str) -> Option<ApiState> {
        Some(ApiState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(id.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn picks_the_instance_as_upstream() {
        let running = pod_with(ContainerStatus {
            container_id: Some("skiff://new".into()),
            state: Some(ApiState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            last_state: terminated("skiff://old"),
            ..Default::default()
        });
        assert_eq!(log_container_id(&running, "c", false).unwrap(), "new");
        assert_eq!(log_container_id(&running, "c", true).unwrap(), "old");
        let first = pod_with(ContainerStatus {
            container_id: Some("skiff://x".into()),
            state: Some(ApiState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            log_container_id(&first, "c", true).unwrap_err().to_string(),
            "previous terminated container \"c\" in pod \"p\" not found"
        );
        let pulling = pod_with(ContainerStatus {
            state: Some(ApiState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ImagePullBackOff".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            log_container_id(&pulling, "c", false)
                .unwrap_err()
                .to_string(),
            "container \"c\" in pod \"p\" is waiting to start: trying and failing to pull image"
        );
        assert!(
            log_container_id(&pulling, "other", false)
                .unwrap_err()
                .to_string()
                .ends_with("is not available")
        );
    }

    fn q(pairs: &[(&str, &str)]) -> Result<LogQuery, HttpError> {
        let pairs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_query(&pairs, DateTime::from_timestamp(1000, 0).unwrap())
    }

    #[test]
    fn parses_pod_log_options() {
        let parsed = q(&[
            ("follow", "true"),
            ("previous", "1"),
            ("timestamps", "true"),
            ("tailLines", "3"),
            ("limitBytes", "10"),
            ("sinceSeconds", "10"),
        ])
        .unwrap();
        assert!(parsed.previous);
        assert_eq!(
            parsed.options,
            LogOptions {
                since: DateTime::from_timestamp(990, 0).map(|t| t.fixed_offset()),
                tail: Some(3),
                limit_bytes: Some(10),
                timestamps: true,
                follow: true,
            }
        );
        assert_eq!(q(&[]).unwrap(), LogQuery::default());
        for bad in [
            &[("tailLines", "-1")][..],
            &[("limitBytes", "0")],
            &[("sinceSeconds", "0")],
            &[("follow", "yes")],
            &[("sinceSeconds", "5"), ("sinceTime", "2026-01-01T00:00:00Z")],
        ] {
            assert_eq!(
                q(bad).unwrap_err().0,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{bad:?}"
            );
        }
    }
}
