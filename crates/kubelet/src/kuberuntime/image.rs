//! Image pulls per imagePullPolicy with a pull backoff (upstream
//! `pkg/kubelet/images/image_manager.go` `EnsureImageExists`).

use std::sync::Mutex;
use std::time::SystemTime;

use k8s_cri::v1::{ImageSpec, ImageStatusRequest, PodSandboxConfig, PullImageRequest};
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::info;

use super::backoff::Backoff;
use super::image_ref::apply_default_image_tag;
use super::sync_result::{
    ERR_IMAGE_NEVER_PULL, ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF, INVALID_IMAGE_NAME, SyncError,
};
use crate::cri::Cri;
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
    /// pull failed and its backoff has not expired).
    pub async fn ensure_image_exists(
        &self,
        cri: &dyn Cri,
        pod: &Pod,
        container: &Container,
        sandbox_config: &PodSandboxConfig,
    ) -> Result<String, SyncError> {
        let requested = container.image.clone().unwrap_or_default();
        let image = apply_default_image_tag(&requested).map_err(|e| {
            SyncError::new(
                INVALID_IMAGE_NAME,
                format!("Failed to apply default image tag {requested:?}: {e}"),
            )
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
                SyncError::new(
                    ERR_IMAGE_PULL,
                    format!("Failed to inspect image {requested:?}: {}", e.message()),
                )
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
            ("Never", Some(id)) | ("IfNotPresent", Some(id)) => return Ok(id),
            ("Never", None) => {
                return Err(SyncError::new(
                    ERR_IMAGE_NEVER_PULL,
                    format!(
                        "Container image {requested:?} is not present with pull policy of Never"
                    ),
                ));
            }
            _ => {}
        }
        let key = format!("{}_{requested}", pod.metadata.uid.as_deref().unwrap_or(""));
        if self
            .lock()
            .is_in_backoff_since_update(&key, SystemTime::now())
        {
            return Err(SyncError::new(
                IMAGE_PULL_BACK_OFF,
                format!("Back-off pulling image {requested:?}"),
            ));
        }
        info!(image = %image, pod = pod.metadata.name.as_deref().unwrap_or(""), "pulling image");
        let pulled = cri
            .pull_image(PullImageRequest {
                image: Some(spec),
                auth: None,
                sandbox_config: Some(sandbox_config.clone()),
            })
            .await;
        match pulled {
            Ok(resp) => {
                let mut backoff = self.lock();
                backoff.gc(SystemTime::now());
                Ok(resp.image_ref)
            }
            Err(e) => {
                let now = SystemTime::now();
                self.lock().next(&key, now, now);
                Err(SyncError::new(
                    ERR_IMAGE_PULL,
                    format!("Failed to pull image {requested:?}: {}", e.message()),
                ))
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
