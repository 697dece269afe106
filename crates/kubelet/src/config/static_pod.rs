//! Defaults applied to static pods, read from a manifest file or a manifest URL (upstream
//! `pkg/kubelet/config/common.go` `applyDefaults`, plus the API server's pod defaulting
//! that static pods never go through).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use md5::{Digest, Md5};

/// Annotation naming the pod source (`file`, `http`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Annotation holding the hash of the pod as read from its source (the UID for static pods).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Annotation holding when the kubelet first saw the pod (RFC 3339).
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// The pod source name for manifest files.
pub const FILE_SOURCE: &str = "file";
/// The pod source name for the manifest URL.
pub const HTTP_SOURCE: &str = "http";

/// True for the sources of static pods (upstream: every source but the API server).
pub fn is_static_pod_source(source: &str) -> bool {
    source == FILE_SOURCE || source == HTTP_SOURCE
}

/// Computes the UID of a static pod: hex MD5 over `host:<node>`, `file:<path>` and the
/// manifest bytes, so the same file on the same node always gives the same UID and any
/// edit gives a new one.
pub fn static_pod_uid(node_name: &str, path: &Path, content: &[u8]) -> String {
    let mut hasher = Md5::new();
    hasher.update(format!("host:{node_name}").as_bytes());
    hasher.update(format!("file:{}", path.display()).as_bytes());
    hasher.update(content);
    hex::encode(hasher.finalize())
}

/// Computes the UID of a pod served by a manifest URL: hex MD5 over the pod as served
/// (its JSON) and `url:<url>`, so any edit of the pod gives a new UID.
pub fn http_pod_uid(url: &str, pod_json: &[u8]) -> String {
    let mut hasher = Md5::new();
    hasher.update(pod_json);
    hasher.update(format!("url:{url}").as_bytes());
    hex::encode(hasher.finalize())
}

/// Applies the static pod defaults to a pod read from `source` ([`FILE_SOURCE`] or
/// [`HTTP_SOURCE`]): name `<name>-<node>`, namespace `default`, UID `uid` (unless the
/// manifest sets one; see [`static_pod_uid`], [`http_pod_uid`]), config annotations
/// (`seen` is `seen_at`, RFC 3339), `spec.nodeName`, and the pod spec defaults of the
/// API server (`skiff_api::core::pod::default_pod`).
pub fn apply_static_pod_defaults(
    pod: &mut Pod,
    node_name: &str,
    source: &str,
    uid: String,
    seen_at: &str,
) {
    let meta = &mut pod.metadata;
    let node = node_name.to_lowercase();
    meta.name = Some(format!("{}-{node}", meta.name.clone().unwrap_or_default()));
    if meta.namespace.as_deref().unwrap_or("").is_empty() {
        meta.namespace = Some("default".to_owned());
    }
    if meta.uid.as_deref().unwrap_or("").is_empty() {
        meta.uid = Some(uid);
    }
    let uid = meta.uid.clone().unwrap_or_default();
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.to_owned(), source.to_owned());
    annotations.insert(CONFIG_HASH_ANNOTATION.to_owned(), uid);
    annotations.insert(CONFIG_SEEN_ANNOTATION.to_owned(), seen_at.to_owned());
    skiff_api::core::pod::default_pod(pod);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node_name.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn pod(image: &str) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn uid_is_stable_and_changes_with_content_node_and_path() {
        let p = Path::new("/etc/pods/web.yaml");
        let a = static_pod_uid("node1", p, b"abc");
        assert_eq!(a, static_pod_uid("node1", p, b"abc"));
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, static_pod_uid("node1", p, b"abd"));
        assert_ne!(a, static_pod_uid("node2", p, b"abc"));
        assert_ne!(a, static_pod_uid("node1", Path::new("/x.yaml"), b"abc"));
    }

    #[test]
    fn static_pod_defaults_follow_upstream() {
        let mut p = pod("busybox");
        let uid = static_pod_uid("Node1", Path::new("/m/web.yaml"), b"x");
        apply_static_pod_defaults(&mut p, "Node1", FILE_SOURCE, uid.clone(), "T");
        assert_eq!(p.metadata.name.as_deref(), Some("web-node1"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(p.metadata.uid.as_deref(), Some(uid.as_str()));
        let ann = p.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(ann[CONFIG_SOURCE_ANNOTATION], "file");
        assert_eq!(ann[CONFIG_HASH_ANNOTATION], uid);
        assert_eq!(ann[CONFIG_SEEN_ANNOTATION], "T");
        let spec = p.spec.unwrap_or_default();
        assert_eq!(spec.node_name.as_deref(), Some("Node1"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    }

    #[test]
    fn namespace_and_uid_from_manifest_are_kept() {
        let mut p = pod("busybox:1.36");
        p.metadata.namespace = Some("kube-system".into());
        p.metadata.uid = Some("given".into());
        apply_static_pod_defaults(&mut p, "n", HTTP_SOURCE, "computed".into(), "T");
        assert_eq!(p.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(p.metadata.uid.as_deref(), Some("given"));
        let ann = p.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(ann[CONFIG_SOURCE_ANNOTATION], "http");
        assert_eq!(ann[CONFIG_HASH_ANNOTATION], "given");
    }

    #[test]
    fn http_uid_depends_on_pod_and_url() {
        let a = http_pod_uid("http://h/p", b"{}");
        assert_eq!(a, http_pod_uid("http://h/p", b"{}"));
        assert_ne!(a, http_pod_uid("http://h/q", b"{}"));
        assert_ne!(a, http_pod_uid("http://h/p", b"{ }"));
        assert!(is_static_pod_source(HTTP_SOURCE) && is_static_pod_source(FILE_SOURCE));
        assert!(!is_static_pod_source("api"));
    }
}
