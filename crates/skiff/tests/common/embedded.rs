//! Helpers of the tests that drive Skiff's embedded runtime in-process (`Runtime` through
//! its tonic `RuntimeService` trait).

use skiff_runtime::Runtime;
use skiff_runtime::k8s_cri::v1::runtime_service_server::RuntimeService;
use skiff_runtime::k8s_cri::v1::*;
use skiff_runtime::tonic::Request;

/// Whether the test runs as root (the embedded-runtime tests skip otherwise).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

/// `<pid>: <command line>` of every process whose command line contains `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

/// CreateContainer + StartContainer; returns the container ID.
pub async fn create_and_start(
    runtime: &Runtime,
    sandbox_id: &str,
    sandbox_config: &PodSandboxConfig,
    config: ContainerConfig,
) -> String {
    let container_id = runtime
        .create_container(Request::new(CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_owned(),
            config: Some(config),
            sandbox_config: Some(sandbox_config.clone()),
        }))
        .await
        .unwrap()
        .into_inner()
        .container_id;
    runtime
        .start_container(Request::new(StartContainerRequest {
            container_id: container_id.clone(),
        }))
        .await
        .unwrap();
    container_id
}

/// ContainerStatus (not verbose) of container `id`.
pub async fn container_status(runtime: &Runtime, id: &str) -> ContainerStatus {
    runtime
        .container_status(Request::new(ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: false,
        }))
        .await
        .unwrap()
        .into_inner()
        .status
        .unwrap()
}
