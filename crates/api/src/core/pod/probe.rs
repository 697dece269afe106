//! Validation of a container's probes (upstream `validateProbe`, `validateLivenessProbe`,
//! `validateReadinessProbe`, `validateStartupProbe`).

use k8s_openapi::api::core::v1::{Container, Probe};

use crate::core::non_negative;
use crate::field::{ErrorList, FieldError, Path};

/// The problems of `container`'s probes; `path` is the container's
/// (`spec.containers[0]`): exactly one handler, no negative timing, a `successThreshold`
/// of 1 for liveness and startup probes, and a positive `terminationGracePeriodSeconds`
/// only on those.
pub fn validate_probes(errors: &mut ErrorList, path: &Path, container: &Container) {
    let probes = [
        ("livenessProbe", container.liveness_probe.as_ref(), false),
        ("readinessProbe", container.readiness_probe.as_ref(), true),
        ("startupProbe", container.startup_probe.as_ref(), false),
    ];
    for (name, probe, readiness) in probes {
        if let Some(probe) = probe {
            validate_probe(errors, &path.child(name), probe, readiness);
        }
    }
}

fn validate_probe(errors: &mut ErrorList, path: &Path, probe: &Probe, readiness: bool) {
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
        0 => errors.push(FieldError::required(path, "must specify a handler type")),
        1 => {}
        _ => errors.push(FieldError::forbidden(
            path,
            "may not specify more than 1 handler type",
        )),
    }
    let timings = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (name, value) in timings {
        non_negative(errors, &path.child(name), value.map(i64::from));
    }
    if let Some(v) = probe.termination_grace_period_seconds {
        let problem = match readiness {
            true => Some("must not be set for readinessProbes"),
            false if v <= 0 => Some("must be greater than 0"),
            false => None,
        };
        if let Some(problem) = problem {
            errors.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                v,
                problem,
            ));
        }
    }
    if !readiness && let Some(v) = probe.success_threshold.filter(|v| *v != 1) {
        errors.push(FieldError::invalid(
            &path.child("successThreshold"),
            v,
            "must be 1",
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
        validate_probes(
            &mut errors,
            &Path::new("spec").child("containers").index(0),
            &container,
        );
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.containers[0].readinessProbe: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
                "spec.containers[0].startupProbe: Required value: must specify a handler type",
            ]
        );
    }
}
