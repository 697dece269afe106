//! `impl RuntimeService for Runtime`: the CRI v1 gRPC surface, delegating to the verbs in
//! [`crate::sandbox`] and [`crate::container`].

use std::collections::HashMap;

use k8s_cri::v1::runtime_service_server::RuntimeService;
use k8s_cri::v1::*;
use tonic::{Request, Response, Status};

use crate::runtime::Runtime;

/// CRI API version served.
const API_VERSION: &str = "v1";
/// Runtime name reported by Version.
const RUNTIME_NAME: &str = "skiff";
/// Runtime version reported by Version.
const RUNTIME_VERSION: &str = "0.1.0";

type Reply<T> = Result<Response<T>, Status>;

fn reply<T>(result: crate::error::Result<T>) -> Reply<T> {
    result.map(Response::new).map_err(Status::from)
}

fn unimplemented<T>(what: &str) -> Reply<T> {
    Err(Status::unimplemented(format!(
        "{what} is not implemented by skiff yet"
    )))
}

#[tonic::async_trait]
impl RuntimeService for Runtime {
    async fn version(&self, _req: Request<VersionRequest>) -> Reply<VersionResponse> {
        Ok(Response::new(VersionResponse {
            version: "0.1.0".into(),
            runtime_name: RUNTIME_NAME.into(),
            runtime_version: RUNTIME_VERSION.into(),
            runtime_api_version: API_VERSION.into(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        req: Request<RunPodSandboxRequest>,
    ) -> Reply<RunPodSandboxResponse> {
        reply(Runtime::run_pod_sandbox(self, req.into_inner()).await)
    }

    async fn stop_pod_sandbox(
        &self,
        req: Request<StopPodSandboxRequest>,
    ) -> Reply<StopPodSandboxResponse> {
        reply(Runtime::stop_pod_sandbox(self, req.into_inner()).await)
    }

    async fn remove_pod_sandbox(
        &self,
        req: Request<RemovePodSandboxRequest>,
    ) -> Reply<RemovePodSandboxResponse> {
        reply(Runtime::remove_pod_sandbox(self, req.into_inner()).await)
    }

    async fn pod_sandbox_status(
        &self,
        req: Request<PodSandboxStatusRequest>,
    ) -> Reply<PodSandboxStatusResponse> {
        reply(Runtime::pod_sandbox_status(self, req.into_inner()).await)
    }

    async fn list_pod_sandbox(
        &self,
        req: Request<ListPodSandboxRequest>,
    ) -> Reply<ListPodSandboxResponse> {
        reply(Runtime::list_pod_sandbox(self, req.into_inner()).await)
    }

    async fn create_container(
        &self,
        req: Request<CreateContainerRequest>,
    ) -> Reply<CreateContainerResponse> {
        reply(Runtime::create_container(self, req.into_inner()).await)
    }

    async fn start_container(
        &self,
        req: Request<StartContainerRequest>,
    ) -> Reply<StartContainerResponse> {
        reply(Runtime::start_container(self, req.into_inner()).await)
    }

    async fn stop_container(
        &self,
        req: Request<StopContainerRequest>,
    ) -> Reply<StopContainerResponse> {
        reply(Runtime::stop_container(self, req.into_inner()).await)
    }

    async fn remove_container(
        &self,
        req: Request<RemoveContainerRequest>,
    ) -> Reply<RemoveContainerResponse> {
        reply(Runtime::remove_container(self, req.into_inner()).await)
    }

    async fn list_containers(
        &self,
        req: Request<ListContainersRequest>,
    ) -> Reply<ListContainersResponse> {
        reply(Runtime::list_containers(self, req.into_inner()).await)
    }

    async fn container_status(
        &self,
        req: Request<ContainerStatusRequest>,
    ) -> Reply<ContainerStatusResponse> {
        reply(Runtime::container_status(self, req.into_inner()).await)
    }

    async fn update_container_resources(
        &self,
        _req: Request<UpdateContainerResourcesRequest>,
    ) -> Reply<UpdateContainerResourcesResponse> {
        unimplemented("UpdateContainerResources")
    }

    async fn reopen_container_log(
        &self,
        _req: Request<ReopenContainerLogRequest>,
    ) -> Reply<ReopenContainerLogResponse> {
        unimplemented("ReopenContainerLog")
    }

    async fn exec_sync(&self, req: Request<ExecSyncRequest>) -> Reply<ExecSyncResponse> {
        reply(Runtime::exec_sync(self, req.into_inner()).await)
    }

    async fn exec(&self, req: Request<ExecRequest>) -> Reply<ExecResponse> {
        reply(Runtime::exec(self, req.into_inner()).await)
    }

    async fn attach(&self, req: Request<AttachRequest>) -> Reply<AttachResponse> {
        reply(Runtime::attach(self, req.into_inner()).await)
    }

    async fn port_forward(&self, req: Request<PortForwardRequest>) -> Reply<PortForwardResponse> {
        reply(Runtime::port_forward(self, req.into_inner()).await)
    }

    async fn container_stats(
        &self,
        _req: Request<ContainerStatsRequest>,
    ) -> Reply<ContainerStatsResponse> {
        unimplemented("ContainerStats")
    }

    async fn list_container_stats(
        &self,
        _req: Request<ListContainerStatsRequest>,
    ) -> Reply<ListContainerStatsResponse> {
        unimplemented("ListContainerStats")
    }

    async fn pod_sandbox_stats(
        &self,
        _req: Request<PodSandboxStatsRequest>,
    ) -> Reply<PodSandboxStatsResponse> {
        unimplemented("PodSandboxStats")
    }

    async fn list_pod_sandbox_stats(
        &self,
        _req: Request<ListPodSandboxStatsRequest>,
    ) -> Reply<ListPodSandboxStatsResponse> {
        unimplemented("ListPodSandboxStats")
    }

    async fn update_runtime_config(
        &self,
        _req: Request<UpdateRuntimeConfigRequest>,
    ) -> Reply<UpdateRuntimeConfigResponse> {
        unimplemented("UpdateRuntimeConfig")
    }

    async fn status(&self, _req: Request<StatusRequest>) -> Reply<StatusResponse> {
        let network = self.cni.network();
        let conditions = vec![
            RuntimeCondition {
                r#type: "RuntimeReady".into(),
                status: true,
                ..Default::default()
            },
            RuntimeCondition {
                r#type: "NetworkReady".into(),
                status: network.is_ok(),
                reason: if network.is_ok() {
                    String::new()
                } else {
                    "NetworkPluginNotReady".into()
                },
                message: network
                    .err()
                    .map(|err| format!("{err:#}"))
                    .unwrap_or_default(),
            },
        ];
        Ok(Response::new(StatusResponse {
            status: Some(RuntimeStatus { conditions }),
            info: HashMap::new(),
            ..Default::default()
        }))
    }

    async fn checkpoint_container(
        &self,
        _req: Request<CheckpointContainerRequest>,
    ) -> Reply<CheckpointContainerResponse> {
        unimplemented("CheckpointContainer")
    }

    type GetContainerEventsStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<ContainerEventResponse, Status>> + Send + 'static>,
    >;

    async fn get_container_events(
        &self,
        _req: Request<GetEventsRequest>,
    ) -> Reply<Self::GetContainerEventsStream> {
        unimplemented("GetContainerEvents")
    }

    async fn list_metric_descriptors(
        &self,
        _req: Request<ListMetricDescriptorsRequest>,
    ) -> Reply<ListMetricDescriptorsResponse> {
        unimplemented("ListMetricDescriptors")
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _req: Request<ListPodSandboxMetricsRequest>,
    ) -> Reply<ListPodSandboxMetricsResponse> {
        unimplemented("ListPodSandboxMetrics")
    }

    async fn runtime_config(
        &self,
        _req: Request<RuntimeConfigRequest>,
    ) -> Reply<RuntimeConfigResponse> {
        Ok(Response::new(RuntimeConfigResponse {
            linux: Some(LinuxRuntimeConfiguration {
                cgroup_driver: CgroupDriver::Cgroupfs as i32,
            }),
        }))
    }
}
