//! Image pulls per imagePullPolicy with a pull backoff (upstream
//! `pkg/kubelet/images/image_manager.go` `EnsureImageExists`).

use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use k8s_cri::v1::{
    AuthConfig, ImageSpec, ImageStatusRequest, PodSandboxConfig, PullImageRequest,
    PullImageResponse,
};
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::info;

use super::backoff::Backoff;
use super::image_ref::apply_default_image_tag;
use super::sync_result::{
    ERR_IMAGE_NEVER_PULL, ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF, INVALID_IMAGE_NAME, SyncError,
};
use crate::cri::Cri;
use crate::events::{self, EventRecorder, EventType, format_go_duration};
use skiff_api::core::pod::default_image_pull_policy;

/// Ensures container images are present, pulling per policy.
#[derive(Default)]
pub struct ImageManager {
    backoff: Mutex<Backoff>,
}

impl ImageManager {
    /// Returns the image reference (ID) to create `container` from, pulling it when the
    /// policy says so (`Always`; `IfNotPresent` when absent; never for `Never`; unset:
    /// `Always` for `:latest` or untagged images, else `IfNotPresent`). Errors carry the waiting reason: `InvalidImageName`,
    /// `ErrImageNeverPull`, `ErrImagePull` (a pull failed), `ImagePullBackOff` (a recent
    /// pull failed and its backoff has not expired). Records upstream's events on the
    /// container through `recorder`: `Pulling`, `Pulled`, `Failed`, `BackOff`,
    /// `ErrImageNeverPull`, `InspectFailed`. A pull tries each of `credentials` in order
    /// (the pod's pull secrets matching the image), anonymously when there are none.
    pub async fn ensure_image_exists(
        &self,
        cri: &dyn Cri,
        recorder: &EventRecorder,
        pod: &Pod,
        container: &Container,
        sandbox_config: &PodSandboxConfig,
        credentials: &[AuthConfig],
    ) -> Result<String, SyncError> {
        let record = |event_type, reason: &str, message: &str| {
            recorder.container_event(pod, &container.name, "", event_type, reason, message);
        };
        let requested = container.image.clone().unwrap_or_default();
        let image = apply_default_image_tag(&requested).map_err(|e| {
            let message = format!("Failed to apply default image tag {requested:?}: {e}");
            record(
                EventType::Warning,
                events::FAILED_TO_INSPECT_IMAGE,
                &message,
            );
            SyncError::new(INVALID_IMAGE_NAME, message)
        })?;
        let spec = ImageSpec {
            image: image.clone(),
            user_specified_image: requested.clone(),
            ..Default::default()
        };
        let present = cri
            .image_status(ImageStatusRequest {
                image: Some(spec.clone()),
                verbose: false,
            })
            .await
            .map_err(|e| {
                let message = format!("Failed to inspect image {requested:?}: {}", e.message());
                record(
                    EventType::Warning,
                    events::FAILED_TO_INSPECT_IMAGE,
                    &message,
                );
                SyncError::new(ERR_IMAGE_PULL, message)
            })?
            .image
            .map(|i| i.id)
            .filter(|id| !id.is_empty());
        // A pod that skipped API defaulting gets the policy its tag implies.
        let policy = container
            .image_pull_policy
            .as_deref()
            .unwrap_or_else(|| default_image_pull_policy(&requested));
        match (policy, present) {
            ("Never", Some(id)) | ("IfNotPresent", Some(id)) => {
                let message = format!("Container image {requested:?} already present on machine");
                record(EventType::Normal, events::PULLED_IMAGE, &message);
                return Ok(id);
            }
            ("Never", None) => {
                let message = format!(
                    "Container image {requested:?} is not present with pull policy of Never"
                );
                record(
                    EventType::Warning,
                    events::ERR_IMAGE_NEVER_PULL_POLICY,
                    &message,
                );
                return Err(SyncError::new(ERR_IMAGE_NEVER_PULL, message));
            }
            _ => {}
        }
        let key = format!("{}_{requested}", pod.metadata.uid.as_deref().unwrap_or(""));
        if self
            .lock()
            .is_in_backoff_since_update(&key, SystemTime::now())
        {
            let message = format!("Back-off pulling image {requested:?}");
            record(EventType::Normal, events::BACK_OFF_PULL_IMAGE, &message);
            return Err(SyncError::new(IMAGE_PULL_BACK_OFF, message));
        }
        info!(image = %image, pod = pod.metadata.name.as_deref().unwrap_or(""), "pulling image");
        record(
            EventType::Normal,
            events::PULLING_IMAGE,
            &format!("Pulling image {requested:?}"),
        );
        let started = Instant::now();
        let pulled = pull_with_credentials(cri, &spec, sandbox_config, credentials).await;
        match pulled {
            Ok(resp) => {
                let size = cri
                    .image_status(ImageStatusRequest {
                        image: Some(ImageSpec {
                            image: resp.image_ref.clone(),
                            ..Default::default()
                        }),
                        verbose: false,
                    })
                    .await
                    .ok()
                    .and_then(|s| s.image)
                    .map_or(0, |i| i.size);
                // Pulls are not queued here: the pull (with its size lookup, as upstream's
                // puller measures it) took all of the time waited.
                let pull_duration = started.elapsed();
                record(
                    EventType::Normal,
                    events::PULLED_IMAGE,
                    &format!(
                        "Successfully pulled image {requested:?} in {} ({} including waiting). Image size: {size} bytes.",
                        format_go_duration(pull_duration),
                        format_go_duration(pull_duration),
                    ),
                );
                let mut backoff = self.lock();
                backoff.gc(SystemTime::now());
                Ok(resp.image_ref)
            }
            Err(e) => {
                let now = SystemTime::now();
                self.lock().next(&key, now, now);
                let message = format!("Failed to pull image {requested:?}: {}", e.message());
                record(EventType::Warning, events::FAILED_TO_PULL_IMAGE, &message);
                Err(SyncError::new(ERR_IMAGE_PULL, message))
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Pulls `spec` with each of `credentials` until one succeeds (upstream `PullImage` of
/// the kuberuntime image service), or without credentials when there are none. The
/// error of several failed attempts joins their messages as `[a, b]`.
async fn pull_with_credentials(
    cri: &dyn Cri,
    spec: &ImageSpec,
    sandbox_config: &PodSandboxConfig,
    credentials: &[AuthConfig],
) -> Result<PullImageResponse, tonic::Status> {
    let request = |auth: Option<AuthConfig>| PullImageRequest {
        image: Some(spec.clone()),
        auth,
        sandbox_config: Some(sandbox_config.clone()),
    };
    if credentials.is_empty() {
        return cri.pull_image(request(None)).await;
    }
    let mut errors = Vec::new();
    for auth in credentials {
        match cri.pull_image(request(Some(auth.clone()))).await {
            Ok(pulled) => return Ok(pulled),
            Err(e) => errors.push(e),
        }
    }
    if errors.len() == 1 {
        return Err(errors.remove(0));
    }
    let messages: Vec<&str> = errors.iter().map(|e| e.message()).collect();
    Err(tonic::Status::unknown(format!("[{}]", messages.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;

    fn auth(user: &str) -> AuthConfig {
        AuthConfig {
            username: user.into(),
            password: "p".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn pulls_try_each_credential_and_join_their_errors() {
        let cri = FakeCri::default();
        let spec = ImageSpec {
            image: "reg.example.com/app:1".into(),
            ..Default::default()
        };
        let sandbox = PodSandboxConfig::default();
        assert!(
            pull_with_credentials(&cri, &spec, &sandbox, &[])
                .await
                .is_ok()
        );
        assert!(
            pull_with_credentials(&cri, &spec, &sandbox, &[auth("a")])
                .await
                .is_ok()
        );
        cri.fail_pulls_of("reg.example.com/app:1");
        let one = pull_with_credentials(&cri, &spec, &sandbox, &[auth("a")])
            .await
            .unwrap_err();
        let two = pull_with_credentials(&cri, &spec, &sandbox, &[auth("a"), auth("b")])
            .await
            .unwrap_err();
        assert_eq!(
            two.message(),
            format!("[{}, {}]", one.message(), one.message())
        );
        let pulls = cri
            .calls()
            .iter()
            .filter(|c| c.starts_with("PullImage"))
            .count();
        assert_eq!(pulls, 5);
    }
}
