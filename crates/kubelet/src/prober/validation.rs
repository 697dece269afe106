//! Validation of a container's probes (upstream `validateProbe`,
//! `validateLivenessProbe`, `validateStartupProbe` in `pkg/apis/core/validation`).

use k8s_openapi::api::core::v1::{Container, Probe};

use super::ProbeType;

/// Appends the problems of `container`'s probes to `errors` as `field: message`, where
/// `field` is the container's path (`spec.containers[0]`): exactly one handler, no
/// negative timing, a `successThreshold` of 1 for liveness and startup probes, and a
/// positive `terminationGracePeriodSeconds` only on those.
pub fn validate_probes(errors: &mut Vec<String>, field: &str, container: &Container) {
    for probe_type in ProbeType::ALL {
        if let Some(probe) = probe_type.spec(container) {
            validate_probe(
                errors,
                &format!("{field}.{}", field_name(probe_type)),
                probe_type,
                probe,
            );
        }
    }
}

fn field_name(probe_type: ProbeType) -> &'static str {
    match probe_type {
        ProbeType::Liveness => "livenessProbe",
        ProbeType::Readiness => "readinessProbe",
        ProbeType::Startup => "startupProbe",
    }
}

fn validate_probe(errors: &mut Vec<String>, field: &str, probe_type: ProbeType, probe: &Probe) {
    let handlers = [
        probe.exec.is_some(),
        probe.http_get.is_some(),
        probe.tcp_socket.is_some(),
        probe.grpc.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    match handlers {
        0 => errors.push(format!(
            "{field}: Required value: must specify a handler type"
        )),
        1 => {}
        _ => errors.push(format!(
            "{field}: Forbidden: may not specify more than 1 handler type"
        )),
    }
    let fields = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (name, value) in fields {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(format!(
                "{field}.{name}: Invalid value: {v}: must be greater than or equal to 0"
            ));
        }
    }
    if let Some(v) = probe.termination_grace_period_seconds {
        let problem = match probe_type {
            ProbeType::Readiness => Some("must not be set for readinessProbes"),
            _ if v <= 0 => Some("must be greater than 0"),
            _ => None,
        };
        if let Some(problem) = problem {
            errors.push(format!(
                "{field}.terminationGracePeriodSeconds: Invalid value: {v}: {problem}"
            ));
        }
    }
    if probe_type != ProbeType::Readiness
        && let Some(v) = probe.success_threshold.filter(|v| *v != 1)
    {
        errors.push(format!(
            "{field}.successThreshold: Invalid value: {v}: must be 1"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ExecAction, TCPSocketAction};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn exec() -> Option<ExecAction> {
        Some(ExecAction {
            command: Some(vec!["true".into()]),
        })
    }

    #[test]
    fn handlers_thresholds_and_signs_are_checked() {
        let container = Container {
            name: "c".into(),
            liveness_probe: Some(Probe {
                exec: exec(),
                success_threshold: Some(2),
                termination_grace_period_seconds: Some(0),
                ..Default::default()
            }),
            readiness_probe: Some(Probe {
                exec: exec(),
                tcp_socket: Some(TCPSocketAction {
                    port: IntOrString::Int(80),
                    ..Default::default()
                }),
                success_threshold: Some(3),
                period_seconds: Some(-1),
                termination_grace_period_seconds: Some(5),
                ..Default::default()
            }),
            startup_probe: Some(Probe::default()),
            ..Default::default()
        };
        let mut errors = Vec::new();
        validate_probes(&mut errors, "spec.containers[0]", &container);
        assert_eq!(
            errors,
            [
                "spec.containers[0].startupProbe: Required value: must specify a handler type",
                "spec.containers[0].readinessProbe: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
                "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
            ]
        );
    }
}
