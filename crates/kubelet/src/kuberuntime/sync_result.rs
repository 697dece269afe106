//! Outcomes of SyncPod (upstream `kubecontainer.PodSyncResult` and the `Err*` reasons
//! that become container waiting reasons).

/// Waiting reason: restart delayed by the crash-loop backoff.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
/// Waiting reason: the last image pull failed.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// Waiting reason: image pull delayed by the pull backoff.
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
/// Waiting reason: the image is absent and the policy is Never.
pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
/// Waiting reason: the image reference cannot be parsed.
pub const INVALID_IMAGE_NAME: &str = "InvalidImageName";
/// Waiting reason: the container config could not be generated.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";
/// Waiting reason: CreateContainer failed.
pub const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";
/// Waiting reason: StartContainer failed.
pub const RUN_CONTAINER_ERROR: &str = "RunContainerError";
/// Waiting reason: the postStart hook failed and the container was killed
/// (upstream `ErrPostStartHook`).
pub const POST_START_HOOK_ERROR: &str = "PostStartHookError";

/// A failed step, with a waiting reason and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncError {
    /// Machine-readable reason (one of the constants of this module).
    pub reason: &'static str,
    /// Human-readable detail.
    pub message: String,
}

impl SyncError {
    /// A new error with `reason` and `message`.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// What one SyncPod did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSyncResult {
    /// One entry per container SyncPod tried to start: name and error, if any.
    pub start_results: Vec<(String, Option<SyncError>)>,
    /// Failures of pod-level steps (sandbox creation, kills).
    pub errors: Vec<String>,
    /// Shortest time after which a backoff that blocked a start expires.
    pub retry_after: Option<std::time::Duration>,
}

impl PodSyncResult {
    /// True when any step failed.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty() || self.start_results.iter().any(|(_, e)| e.is_some())
    }

    /// All failures as one line.
    pub fn error_message(&self) -> String {
        self.errors
            .iter()
            .cloned()
            .chain(self.start_results.iter().filter_map(|(name, e)| {
                e.as_ref()
                    .map(|e| format!("{name}: {}: {}", e.reason, e.message))
            }))
            .collect::<Vec<_>>()
            .join("; ")
    }
}
