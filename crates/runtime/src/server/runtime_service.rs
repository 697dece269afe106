//! `impl RuntimeService for Runtime`: the CRI v1 gRPC surface, delegating to the verbs in
//! [`crate::sandbox`], [`crate::container`] and [`crate::stats`].
//!
//! This layer also does what every verb shares, as containerd's CRI plugin does: it
//! resolves unique truncated IDs to full IDs, publishes the lifecycle events of
//! GetContainerEvents ([`crate::events`]) after a verb succeeded, and adds the verbose
//! `info` maps.

use k8s_cri::v1::runtime_service_server::RuntimeService;
use k8s_cri::v1::*;
use tonic::{Request, Response, Status};

use crate::container::State;
use crate::runtime::Runtime;

/// CRI API version served.
const API_VERSION: &str = "v1";
/// Runtime name reported by Version.
const RUNTIME_NAME: &str = "skiff";
/// `version` of Version: the kubelet-facing API version (containerd reports `0.1.0`).
const API_VERSION_KUBELET: &str = "0.1.0";
/// Runtime version reported by Version.
const RUNTIME_VERSION: &str = "0.1.0";

type Reply<T> = Result<Response<T>, Status>;

fn reply<T>(result: crate::error::Result<T>) -> Reply<T> {
    result.map(Response::new).map_err(Status::from)
}

impl Runtime {
    /// The full container ID for an ID or unique ID prefix (unchanged when unknown, so
    /// that the verb reports it as it was given).
    fn full_container_id(&self, id: &str) -> String {
        self.containers
            .resolve(id)
            .unwrap_or_else(|| id.to_string())
    }

    /// The full sandbox ID for an ID or unique ID prefix (see [`Self::full_container_id`]).
    fn full_sandbox_id(&self, id: &str) -> String {
        self.sandboxes.resolve(id).unwrap_or_else(|| id.to_string())
    }

    /// The sandbox of container `id` and its current state, if the container exists.
    async fn container_state(&self, id: &str) -> Option<(String, State)> {
        let entry = self.containers.get(id)?;
        let mut container = entry.lock().await;
        if let Err(err) = self.refresh(&mut container) {
            tracing::warn!(id, "refreshing container: {err:#}");
        }
        Some((container.sandbox_id.clone(), container.state))
    }
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
            version: API_VERSION_KUBELET.into(),
            runtime_name: RUNTIME_NAME.into(),
            runtime_version: RUNTIME_VERSION.into(),
            runtime_api_version: API_VERSION.into(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        req: Request<RunPodSandboxRequest>,
    ) -> Reply<RunPodSandboxResponse> {
        let response = Runtime::run_pod_sandbox(self, req.into_inner()).await?;
        let id = &response.pod_sandbox_id;
        self.emit(id, id, ContainerEventType::ContainerCreatedEvent)
            .await;
        self.emit(id, id, ContainerEventType::ContainerStartedEvent)
            .await;
        Ok(Response::new(response))
    }

    async fn stop_pod_sandbox(
        &self,
        req: Request<StopPodSandboxRequest>,
    ) -> Reply<StopPodSandboxResponse> {
        let mut req = req.into_inner();
        req.pod_sandbox_id = self.full_sandbox_id(&req.pod_sandbox_id);
        let id = req.pod_sandbox_id.clone();
        let response = Runtime::stop_pod_sandbox(self, req).await?;
        if self.sandboxes.get(&id).is_some() {
            self.emit_exits(&id).await;
            self.emit_stopped(&id, &id).await;
        }
        Ok(Response::new(response))
    }

    async fn remove_pod_sandbox(
        &self,
        req: Request<RemovePodSandboxRequest>,
    ) -> Reply<RemovePodSandboxResponse> {
        let mut req = req.into_inner();
        req.pod_sandbox_id = self.full_sandbox_id(&req.pod_sandbox_id);
        let id = req.pod_sandbox_id.clone();
        let last_status = self.sandbox_status_of(&id).await;
        let containers = self.container_ids_of(&id).await;
        let response = Runtime::remove_pod_sandbox(self, req).await?;
        for container in &containers {
            self.unwatch_exit(container);
        }
        if let Some(last_status) = last_status {
            self.emit_removal(&containers, &id, last_status).await;
        }
        Ok(Response::new(response))
    }

    async fn pod_sandbox_status(
        &self,
        req: Request<PodSandboxStatusRequest>,
    ) -> Reply<PodSandboxStatusResponse> {
        let mut req = req.into_inner();
        req.pod_sandbox_id = self.full_sandbox_id(&req.pod_sandbox_id);
        let verbose = req.verbose;
        let id = req.pod_sandbox_id.clone();
        let mut response = Runtime::pod_sandbox_status(self, req).await?;
        if verbose && let Some(entry) = self.sandboxes.get(&id) {
            response.info = self.sandbox_info(&*entry.lock().await);
        }
        Ok(Response::new(response))
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
        let mut req = req.into_inner();
        req.pod_sandbox_id = self.full_sandbox_id(&req.pod_sandbox_id);
        let sandbox_id = req.pod_sandbox_id.clone();
        let response = Runtime::create_container(self, req).await?;
        self.watch_exit(&response.container_id);
        self.emit(
            &response.container_id,
            &sandbox_id,
            ContainerEventType::ContainerCreatedEvent,
        )
        .await;
        Ok(Response::new(response))
    }

    async fn start_container(
        &self,
        req: Request<StartContainerRequest>,
    ) -> Reply<StartContainerResponse> {
        let mut req = req.into_inner();
        req.container_id = self.full_container_id(&req.container_id);
        let id = req.container_id.clone();
        // The exit watcher leaves an exit during the start to us, so that STARTED comes
        // before STOPPED.
        let starting = self.events.starting(&id);
        let result = Runtime::start_container(self, req).await;
        if let Some((sandbox_id, _)) = self.container_state(&id).await {
            if result.is_ok() {
                self.emit(&id, &sandbox_id, ContainerEventType::ContainerStartedEvent)
                    .await;
            }
            drop(starting);
            // Exited already, or never started (StartError).
            if let Some((_, State::Exited)) = self.container_state(&id).await {
                self.emit_stopped(&id, &sandbox_id).await;
            }
        }
        reply(result)
    }

    async fn stop_container(
        &self,
        req: Request<StopContainerRequest>,
    ) -> Reply<StopContainerResponse> {
        let mut req = req.into_inner();
        req.container_id = self.full_container_id(&req.container_id);
        let id = req.container_id.clone();
        // Stopping what is gone is not an error (CRI: StopContainer is idempotent).
        if self.containers.get(&id).is_none() {
            return Ok(Response::new(StopContainerResponse {}));
        }
        let response = Runtime::stop_container(self, req).await?;
        if let Some((sandbox_id, State::Exited)) = self.container_state(&id).await {
            self.emit_stopped(&id, &sandbox_id).await;
        }
        Ok(Response::new(response))
    }

    async fn remove_container(
        &self,
        req: Request<RemoveContainerRequest>,
    ) -> Reply<RemoveContainerResponse> {
        let mut req = req.into_inner();
        req.container_id = self.full_container_id(&req.container_id);
        let id = req.container_id.clone();
        let existed = self.container_state(&id).await;
        let response = Runtime::remove_container(self, req).await?;
        if let Some((sandbox_id, state)) = existed {
            self.unwatch_exit(&id);
            if state != State::Exited {
                // Force-removed while running: it stopped on the way.
                self.emit_stopped(&id, &sandbox_id).await;
            }
            self.emit(&id, &sandbox_id, ContainerEventType::ContainerDeletedEvent)
                .await;
        }
        Ok(Response::new(response))
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
        let mut req = req.into_inner();
        req.container_id = self.full_container_id(&req.container_id);
        let verbose = req.verbose;
        let id = req.container_id.clone();
        let mut response = Runtime::container_status(self, req).await?;
        if verbose && let Some(entry) = self.containers.get(&id) {
            response.info = self.container_info(&*entry.lock().await);
        }
        Ok(Response::new(response))
    }

    async fn update_container_resources(
        &self,
        req: Request<UpdateContainerResourcesRequest>,
    ) -> Reply<UpdateContainerResourcesResponse> {
        reply(Runtime::update_container_resources(self, req.into_inner()).await)
    }

    async fn reopen_container_log(
        &self,
        req: Request<ReopenContainerLogRequest>,
    ) -> Reply<ReopenContainerLogResponse> {
        reply(Runtime::reopen_container_log(self, req.into_inner()).await)
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
        req: Request<ContainerStatsRequest>,
    ) -> Reply<ContainerStatsResponse> {
        let mut req = req.into_inner();
        req.container_id = self.full_container_id(&req.container_id);
        reply(Runtime::container_stats(self, req).await)
    }

    async fn list_container_stats(
        &self,
        req: Request<ListContainerStatsRequest>,
    ) -> Reply<ListContainerStatsResponse> {
        reply(Runtime::list_container_stats(self, req.into_inner()).await)
    }

    async fn pod_sandbox_stats(
        &self,
        req: Request<PodSandboxStatsRequest>,
    ) -> Reply<PodSandboxStatsResponse> {
        let mut req = req.into_inner();
        req.pod_sandbox_id = self.full_sandbox_id(&req.pod_sandbox_id);
        reply(Runtime::pod_sandbox_stats(self, req).await)
    }

    async fn list_pod_sandbox_stats(
        &self,
        req: Request<ListPodSandboxStatsRequest>,
    ) -> Reply<ListPodSandboxStatsResponse> {
        reply(Runtime::list_pod_sandbox_stats(self, req.into_inner()).await)
    }

    /// Applies `network_config.pod_cidr` to Skiff's default conflist (an empty CIDR, or a
    /// conflist that is not Skiff's, is left alone); `InvalidArgument` for a bad CIDR.
    async fn update_runtime_config(
        &self,
        req: Request<UpdateRuntimeConfigRequest>,
    ) -> Reply<UpdateRuntimeConfigResponse> {
        let pod_cidr = req
            .into_inner()
            .runtime_config
            .and_then(|config| config.network_config)
            .map(|network| network.pod_cidr)
            .unwrap_or_default();
        if pod_cidr.is_empty() {
            return Ok(Response::new(UpdateRuntimeConfigResponse {}));
        }
        // The kubelet may send several CIDRs (dual stack), comma-separated: the first one
        // is the default network's subnet.
        let first = pod_cidr.split(',').next().unwrap_or_default().trim();
        let cidr: ipnet::IpNet = first.parse().map_err(|err| {
            Status::invalid_argument(format!("invalid pod CIDR {pod_cidr:?}: {err}"))
        })?;
        if self
            .cni
            .update_pod_cidr(&cidr)
            .map_err(|err| Status::internal(format!("updating the pod CIDR: {err:#}")))?
        {
            tracing::info!(%cidr, "pod CIDR applied to the default CNI configuration");
        }
        Ok(Response::new(UpdateRuntimeConfigResponse {}))
    }

    async fn status(&self, req: Request<StatusRequest>) -> Reply<StatusResponse> {
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
        // The default handler is also listed as `""` (what a pod without a RuntimeClass
        // asks for), as containerd lists it; the kubelet looks the pod's handler up here.
        let runtime_handlers = std::iter::once("")
            .chain(self.config.handlers.keys().map(String::as_str))
            .map(|name| RuntimeHandler {
                name: name.to_owned(),
                features: Some(RuntimeHandlerFeatures::default()),
            })
            .collect();
        Ok(Response::new(StatusResponse {
            status: Some(RuntimeStatus { conditions }),
            info: if req.into_inner().verbose {
                self.status_info()
            } else {
                Default::default()
            },
            runtime_handlers,
            ..Default::default()
        }))
    }

    async fn checkpoint_container(
        &self,
        _req: Request<CheckpointContainerRequest>,
    ) -> Reply<CheckpointContainerResponse> {
        unimplemented("CheckpointContainer")
    }

    type GetContainerEventsStream = crate::events::EventStream;

    async fn get_container_events(
        &self,
        _req: Request<GetEventsRequest>,
    ) -> Reply<Self::GetContainerEventsStream> {
        Ok(Response::new(self.subscribe().await?))
    }

    async fn list_metric_descriptors(
        &self,
        _req: Request<ListMetricDescriptorsRequest>,
    ) -> Reply<ListMetricDescriptorsResponse> {
        Ok(Response::new(crate::stats::metrics::descriptors()))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _req: Request<ListPodSandboxMetricsRequest>,
    ) -> Reply<ListPodSandboxMetricsResponse> {
        reply(Runtime::list_pod_sandbox_metrics(self).await)
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
