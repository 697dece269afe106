//! Running one probe of a container (upstream `prober.go`): picks the handler of the probe
//! spec, retries it when it cannot run, and turns its outcome into a [`ProbeResult`],
//! logging failures with upstream's event messages ("Liveness probe failed: ...").

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tracing::{debug, warn};

use super::worker::ProbeTiming;
use super::{ProbeType, exec, grpc, http, tcp};
use crate::cri::Cri;
use crate::error::{Error, Result};
use crate::events::{self, EventRecorder, EventType};
use crate::kuberuntime::env::expand;
use crate::prober::results::ProbeResult;

/// Times a probe that could not be run is retried before the attempt is given up
/// (upstream `maxProbeRetries`).
const MAX_PROBE_RETRIES: usize = 3;

/// What a probe handler concluded (upstream `probe.Result` without `Unknown`, which is
/// the `Err` of [`HandlerResult`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The check passed.
    Success,
    /// The check passed with a remark (an HTTP redirect that was not followed).
    Warning,
    /// The check failed.
    Failure,
}

/// A handler's outcome and its output (the failure message, command output or response
/// body), or an error when the probe could not be run at all.
pub type HandlerResult = Result<(Outcome, String)>;

/// Runs probes; the probe workers call it each period. [`Prober`] is the real one.
#[async_trait]
pub trait ProbeRunner: Send + Sync {
    /// Runs the `probe_type` probe of `container` (runtime ID `container_id`) of `pod`,
    /// whose IP is `pod_ip`. `Err` when the probe could not be run: the worker then drops
    /// the attempt instead of counting it.
    async fn probe(
        &self,
        probe_type: ProbeType,
        pod: &Pod,
        pod_ip: &str,
        container: &Container,
        container_id: &str,
    ) -> Result<ProbeResult>;
}

/// The production [`ProbeRunner`]: exec through the CRI, httpGet, tcpSocket and grpc over
/// the pod network.
pub struct Prober {
    cri: Arc<dyn Cri>,
    /// Records the Unhealthy / ProbeWarning events (log-only by default).
    recorder: EventRecorder,
}

impl Prober {
    /// A prober running exec probes through `cri`.
    pub fn new(cri: Arc<dyn Cri>) -> Self {
        Self {
            cri,
            recorder: EventRecorder::default(),
        }
    }

    /// This prober, recording probe failures as events through `recorder`.
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// Records a Warning event about the probed container (upstream
    /// `recordContainerEvent`).
    fn record(
        &self,
        pod: &Pod,
        container: &Container,
        container_id: &str,
        reason: &str,
        message: &str,
    ) {
        self.recorder.container_event(
            pod,
            &container.name,
            container_id,
            EventType::Warning,
            reason,
            message,
        );
    }

    /// One run of the probe's handler (upstream `runProbe`).
    async fn run_probe(
        &self,
        probe: &Probe,
        pod_ip: &str,
        container: &Container,
        container_id: &str,
    ) -> HandlerResult {
        let timeout = ProbeTiming::of(probe).timeout;
        if let Some(action) = &probe.exec {
            let command = expand_static(action.command.as_deref().unwrap_or_default(), container);
            return exec::probe(&*self.cri, container_id, command, timeout).await;
        }
        if let Some(action) = &probe.http_get {
            let request = http::ProbeRequest::for_action(action, container, pod_ip)?;
            return Ok(http::probe(&request, timeout).await);
        }
        if let Some(action) = &probe.tcp_socket {
            let port = resolve_container_port(&action.port, container)?;
            let host = action
                .host
                .as_deref()
                .filter(|h| !h.is_empty())
                .unwrap_or(pod_ip);
            return Ok(tcp::probe(host, port, timeout).await);
        }
        if let Some(action) = &probe.grpc {
            let service = action.service.as_deref().unwrap_or("");
            return Ok(grpc::probe(pod_ip, action.port, service, timeout).await);
        }
        Err(Error::Probe(format!(
            "missing probe handler for container {}",
            container.name
        )))
    }
}

#[async_trait]
impl ProbeRunner for Prober {
    async fn probe(
        &self,
        probe_type: ProbeType,
        pod: &Pod,
        pod_ip: &str,
        container: &Container,
        container_id: &str,
    ) -> Result<ProbeResult> {
        let Some(spec) = probe_type.spec(container) else {
            return Ok(ProbeResult::Success);
        };
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        let mut outcome = Err(Error::Probe(String::new()));
        for _ in 0..MAX_PROBE_RETRIES {
            outcome = self.run_probe(spec, pod_ip, container, container_id).await;
            if outcome.is_ok() {
                break;
            }
        }
        match outcome {
            Err(error) => {
                warn!(pod = %pod_name, container = %container.name, "{probe_type} probe errored: {error}");
                let message =
                    format!("{probe_type} probe errored and resulted in unknown state: {error}");
                self.record(
                    pod,
                    container,
                    container_id,
                    events::CONTAINER_UNHEALTHY,
                    &message,
                );
                Err(error)
            }
            Ok((Outcome::Failure, output)) => {
                warn!(pod = %pod_name, container = %container.name, "{probe_type} probe failed: {output}");
                let message = format!("{probe_type} probe failed: {output}");
                self.record(
                    pod,
                    container,
                    container_id,
                    events::CONTAINER_UNHEALTHY,
                    &message,
                );
                Ok(ProbeResult::Failure)
            }
            Ok((Outcome::Warning, output)) => {
                warn!(pod = %pod_name, container = %container.name, "{probe_type} probe warning: {output}");
                let message = format!("{probe_type} probe warning: {output}");
                self.record(
                    pod,
                    container,
                    container_id,
                    events::CONTAINER_PROBE_WARNING,
                    &message,
                );
                Ok(ProbeResult::Success)
            }
            Ok((Outcome::Success, _)) => {
                debug!(pod = %pod_name, container = %container.name, "{probe_type} probe succeeded");
                Ok(ProbeResult::Success)
            }
        }
    }
}

/// `command` with `$(VAR)` expanded against the container's literal `env` values only
/// (upstream `ExpandContainerCommandOnlyStatic`: exec probes see neither the downward
/// API nor `valueFrom` values, which expand to empty strings).
fn expand_static(command: &[String], container: &Container) -> Vec<String> {
    let vars: HashMap<&str, &str> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    command.iter().map(|arg| expand(arg, &vars)).collect()
}

/// The port number of a probe's `port`: a number, or the name of one of the container's
/// ports, or a number written as a string (upstream `probe.ResolveContainerPort`).
/// Errors with upstream's messages when the name is unknown or the number is out of range.
pub fn resolve_container_port(port: &IntOrString, container: &Container) -> Result<u16> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            let by_name = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port));
            match by_name {
                Some(n) => n,
                None => name
                    .parse::<i64>()
                    .map_err(|_| Error::Probe(format!("port {name} not found")))?,
            }
        }
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Error::Probe(format!("invalid port number: {number}")))
}

/// `host:port`, with an IPv6 host in brackets (Go's `net.JoinHostPort`).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector};

    fn container() -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }]),
            env: Some(vec![
                EnvVar {
                    name: "FILE".into(),
                    value: Some("/tmp/ready".into()),
                    ..Default::default()
                },
                EnvVar {
                    name: "IP".into(),
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "status.podIP".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn ports_resolve_by_number_name_or_numeric_string() {
        let c = container();
        let resolve = |p: IntOrString| resolve_container_port(&p, &c);
        assert_eq!(resolve(IntOrString::Int(80)), Ok(80));
        assert_eq!(resolve(IntOrString::String("http".into())), Ok(8080));
        assert_eq!(resolve(IntOrString::String("9090".into())), Ok(9090));
        assert_eq!(
            resolve(IntOrString::String("grpc".into())),
            Err(Error::Probe("port grpc not found".into()))
        );
        assert_eq!(
            resolve(IntOrString::Int(70000)),
            Err(Error::Probe("invalid port number: 70000".into()))
        );
        assert_eq!(
            resolve(IntOrString::Int(0)),
            Err(Error::Probe("invalid port number: 0".into()))
        );
    }

    #[test]
    fn exec_commands_expand_only_literal_env() {
        let command = ["test", "-f", "$(FILE)", "$(IP)", "$(NONE)"].map(String::from);
        assert_eq!(
            expand_static(&command, &container()),
            ["test", "-f", "/tmp/ready", "", "$(NONE)"]
        );
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
    }
}
