//! Pod defaulting (upstream `SetDefaults_Pod`, `SetDefaults_PodSpec`, `SetDefaults_Container`,
//! `SetDefaults_Probe`, `SetDefaults_Volume` and the volume sources' defaults).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, HTTPGetAction, Lifecycle, LifecycleHandler, Pod,
    PodSecurityContext, PodSpec, Probe, ResourceRequirements, Volume,
};

use crate::core::image::split_tag_and_digest;

/// The mode of files in secret, configMap, downwardAPI and projected volumes: 0644.
pub const DEFAULT_MODE: i32 = 0o644;

/// Defaults a pod as the API server does on create and update: [`default_pod_spec`], then
/// what upstream applies to pods but not to pod templates: resource requests default to
/// the limits, `enableServiceLinks` true, and with `hostNetwork` the host ports of the
/// container ports.
pub fn default_pod(pod: &mut Pod) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    default_pod_spec(spec);
    spec.enable_service_links.get_or_insert(true);
    let host_network = spec.host_network == Some(true);
    for container in containers_mut(spec) {
        if let Some(resources) = container.resources.as_mut() {
            default_requests_from_limits(resources);
        }
        if host_network {
            for port in container.ports.iter_mut().flatten() {
                if port.host_port.unwrap_or(0) == 0 {
                    port.host_port = Some(port.container_port);
                }
            }
        }
    }
}

/// Defaults a pod spec, also of pod templates: restartPolicy `Always`, dnsPolicy
/// `ClusterFirst`, an empty securityContext, terminationGracePeriodSeconds 30,
/// schedulerName `default-scheduler`, and the defaults of its containers and volumes.
pub fn default_pod_spec(spec: &mut PodSpec) {
    spec.dns_policy
        .get_or_insert_with(|| "ClusterFirst".to_owned());
    spec.restart_policy
        .get_or_insert_with(|| "Always".to_owned());
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".to_owned());
    for container in containers_mut(spec) {
        default_container(container);
    }
    super::ephemeral::default_ephemeral_containers(spec);
    for volume in spec.volumes.iter_mut().flatten() {
        default_volume(volume);
    }
}

fn containers_mut(spec: &mut PodSpec) -> impl Iterator<Item = &mut Container> {
    spec.init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut())
}

/// Defaults one container: the image pull policy from the image's tag
/// ([`default_image_pull_policy`]), termination message path `/dev/termination-log` and
/// policy `File`, port protocol `TCP`, probe timings, HTTP handlers' path and scheme, and
/// `apiVersion` v1 of environment field references.
pub fn default_container(container: &mut Container) {
    if container.image_pull_policy.is_none() {
        let image = container.image.as_deref().unwrap_or("");
        container.image_pull_policy = Some(default_image_pull_policy(image).to_owned());
    }
    container
        .termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".to_owned());
    container
        .termination_message_policy
        .get_or_insert_with(|| "File".to_owned());
    for port in container.ports.iter_mut().flatten() {
        port.protocol.get_or_insert_with(|| "TCP".to_owned());
    }
    for probe in [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(probe);
    }
    if let Some(lifecycle) = container.lifecycle.as_mut() {
        default_lifecycle(lifecycle);
    }
    for env in container.env.iter_mut().flatten() {
        default_env(env);
    }
}

/// `Always` for images tagged `:latest` or without tag and digest, else `IfNotPresent`.
pub fn default_image_pull_policy(image: &str) -> &'static str {
    match split_tag_and_digest(image) {
        (Some("latest"), _) | (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

/// A resource with a limit but no request gets request = limit.
pub fn default_requests_from_limits(resources: &mut ResourceRequirements) {
    let Some(limits) = resources.limits.as_ref() else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(BTreeMap::new);
    for (name, quantity) in limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| quantity.clone());
    }
}

/// Upstream `SetDefaults_Probe`: timeout 1 s, period 10 s, success 1, failure 3.
fn default_probe(probe: &mut Probe) {
    probe.timeout_seconds.get_or_insert(1);
    probe.period_seconds.get_or_insert(10);
    probe.success_threshold.get_or_insert(1);
    probe.failure_threshold.get_or_insert(3);
    if let Some(http) = probe.http_get.as_mut() {
        default_http_get(http);
    }
}

fn default_lifecycle(lifecycle: &mut Lifecycle) {
    let handlers: [&mut Option<LifecycleHandler>; 2] =
        [&mut lifecycle.post_start, &mut lifecycle.pre_stop];
    for handler in handlers.into_iter().flatten() {
        if let Some(http) = handler.http_get.as_mut() {
            default_http_get(http);
        }
    }
}

/// Upstream `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP`.
fn default_http_get(http: &mut HTTPGetAction) {
    if http.path.as_deref().unwrap_or("").is_empty() {
        http.path = Some("/".to_owned());
    }
    http.scheme.get_or_insert_with(|| "HTTP".to_owned());
}

fn default_env(env: &mut EnvVar) {
    if let Some(field_ref) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
        field_ref.api_version.get_or_insert_with(|| "v1".to_owned());
    }
}

/// Upstream `SetDefaults_Volume` and the sources' defaults: a volume without a source is
/// an emptyDir; secret, configMap, downwardAPI and projected volumes get mode 0644;
/// hostPath type `""`; service account token projections expire after 3600 s.
pub fn default_volume(volume: &mut Volume) {
    if !has_source(volume) {
        volume.empty_dir = Some(EmptyDirVolumeSource::default());
    }
    if let Some(secret) = volume.secret.as_mut() {
        secret.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(config_map) = volume.config_map.as_mut() {
        config_map.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(downward) = volume.downward_api.as_mut() {
        downward.default_mode.get_or_insert(DEFAULT_MODE);
        for item in downward.items.iter_mut().flatten() {
            if let Some(field_ref) = item.field_ref.as_mut() {
                field_ref.api_version.get_or_insert_with(|| "v1".to_owned());
            }
        }
    }
    if let Some(projected) = volume.projected.as_mut() {
        projected.default_mode.get_or_insert(DEFAULT_MODE);
        for source in projected.sources.iter_mut().flatten() {
            if let Some(token) = source.service_account_token.as_mut() {
                token.expiration_seconds.get_or_insert(3600);
            }
            let items = source
                .downward_api
                .iter_mut()
                .flat_map(|d| d.items.iter_mut().flatten());
            for item in items {
                if let Some(field_ref) = item.field_ref.as_mut() {
                    field_ref.api_version.get_or_insert_with(|| "v1".to_owned());
                }
            }
        }
    }
    if let Some(host_path) = volume.host_path.as_mut() {
        host_path.type_.get_or_insert_with(String::new);
    }
}

/// The number of volume sources a volume sets (one is valid).
pub fn source_count(volume: &Volume) -> usize {
    let v = volume;
    [
        v.aws_elastic_block_store.is_some(),
        v.azure_disk.is_some(),
        v.azure_file.is_some(),
        v.cephfs.is_some(),
        v.cinder.is_some(),
        v.config_map.is_some(),
        v.csi.is_some(),
        v.downward_api.is_some(),
        v.empty_dir.is_some(),
        v.ephemeral.is_some(),
        v.fc.is_some(),
        v.flex_volume.is_some(),
        v.flocker.is_some(),
        v.gce_persistent_disk.is_some(),
        v.git_repo.is_some(),
        v.glusterfs.is_some(),
        v.host_path.is_some(),
        v.image.is_some(),
        v.iscsi.is_some(),
        v.nfs.is_some(),
        v.persistent_volume_claim.is_some(),
        v.photon_persistent_disk.is_some(),
        v.portworx_volume.is_some(),
        v.projected.is_some(),
        v.quobyte.is_some(),
        v.rbd.is_some(),
        v.scale_io.is_some(),
        v.secret.is_some(),
        v.storageos.is_some(),
        v.vsphere_volume.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count()
}

fn has_source(volume: &Volume) -> bool {
    source_count(volume) > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, SecretVolumeSource};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap_or_default()
    }

    #[test]
    fn pod_spec_defaults_follow_upstream() {
        let mut p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"port": 80}},
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "500m"}}}],
                "volumes": [{"name": "a"}, {"name": "s", "secret": {"secretName": "x"}},
                            {"name": "h", "hostPath": {"path": "/x"}}]}
        }));
        default_pod(&mut p);
        let spec = p.spec.unwrap_or_default();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.enable_service_links, Some(true));
        assert!(spec.security_context.is_some());
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        assert_eq!(
            c.ports,
            Some(vec![ContainerPort {
                container_port: 80,
                protocol: Some("TCP".into()),
                ..Default::default()
            }])
        );
        let probe = c.liveness_probe.clone().unwrap_or_default();
        assert_eq!(
            (
                probe.timeout_seconds,
                probe.period_seconds,
                probe.success_threshold,
                probe.failure_threshold
            ),
            (Some(1), Some(10), Some(1), Some(3))
        );
        let http = probe.http_get.unwrap_or_default();
        assert_eq!(
            (http.path.as_deref(), http.scheme.as_deref()),
            (Some("/"), Some("HTTP"))
        );
        let env = c.env.clone().unwrap_or_default();
        let field_ref = env[0]
            .value_from
            .clone()
            .and_then(|v| v.field_ref)
            .unwrap_or_default();
        assert_eq!(field_ref.api_version.as_deref(), Some("v1"));
        let requests = c
            .resources
            .clone()
            .and_then(|r| r.requests)
            .unwrap_or_default();
        assert_eq!(requests.get("cpu"), Some(&Quantity("500m".into())));
        let volumes = spec.volumes.unwrap_or_default();
        assert_eq!(volumes[0].empty_dir, Some(EmptyDirVolumeSource::default()));
        assert_eq!(
            volumes[1].secret,
            Some(SecretVolumeSource {
                secret_name: Some("x".into()),
                default_mode: Some(420),
                ..Default::default()
            })
        );
        assert_eq!(
            volumes[2]
                .host_path
                .clone()
                .and_then(|h| h.type_)
                .as_deref(),
            Some("")
        );
    }

    #[test]
    fn host_network_pods_get_host_ports() {
        let mut p = pod(serde_json::json!({
            "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "x",
                "ports": [{"containerPort": 8080}]}]}
        }));
        default_pod(&mut p);
        let spec = p.spec.unwrap_or_default();
        let ports = spec.containers[0].ports.clone().unwrap_or_default();
        assert_eq!(ports[0].host_port, Some(8080));
    }

    #[test]
    fn image_pull_policy_defaults() {
        assert_eq!(default_image_pull_policy("busybox"), "Always");
        assert_eq!(default_image_pull_policy("busybox:latest"), "Always");
        assert_eq!(
            default_image_pull_policy("127.0.0.1:5000/busybox"),
            "Always"
        );
        assert_eq!(
            default_image_pull_policy("127.0.0.1:5000/busybox:1.36"),
            "IfNotPresent"
        );
        assert_eq!(
            default_image_pull_policy("busybox@sha256:0123456789abcdef"),
            "IfNotPresent"
        );
    }
}
