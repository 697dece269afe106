//! The ServiceAccount admission's token volume: in a new namespace with the `default`
//! ServiceAccount and the `kube-root-ca.crt` ConfigMap (what the ServiceAccount and root-CA
//! controllers will create), a pod gets `kube-api-access-<suffix>` mounted at
//! `/var/run/secrets/kubernetes.io/serviceaccount`; its token, CA and namespace files are
//! right, and the token authenticates against the API server as the pod's account.

use std::time::Duration;

use serde_json::{Value, json};

use crate::joined::Joined;

/// How long a pod may take to start or go.
const WAIT: Duration = Duration::from_secs(90);
/// Where the admission mounts the token volume.
const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The pod's token authenticates as `system:serviceaccount:<ns>:default`.
pub fn automounted_token_authenticates(joined: &Joined) {
    let ns = format!("sa-token-{}", std::process::id());
    let ca_path = joined.api.data_dir().join("pki").join("ca.crt");
    let ca = std::fs::read_to_string(&ca_path).expect("the cluster CA");
    joined.kubectl(&["create", "namespace", &ns]);
    let objects = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": ns}, "data": {"ca.crt": ca}},
        ],
    });
    joined.kubectl_stdin(&["create", "-f", "-"], &objects.to_string());
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "token-reader", "namespace": ns},
        "spec": {
            "nodeName": joined.node_name(),
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": joined.cluster.image,
                "command": ["sleep", "3600"],
            }],
        },
    });
    let created: Value = serde_json::from_str(
        &joined.kubectl_stdin(&["create", "-f", "-", "-o", "json"], &pod.to_string()),
    )
    .expect("the created pod");
    let volume = created["spec"]["volumes"]
        .as_array()
        .and_then(|vs| vs.first())
        .cloned()
        .unwrap_or_default();
    assert!(
        volume["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-")),
        "{created}"
    );
    assert_eq!(
        created["spec"]["containers"][0]["volumeMounts"][0],
        json!({"name": volume["name"], "readOnly": true, "mountPath": TOKEN_DIR})
    );
    joined.eventually("token-reader Running", WAIT, || {
        joined
            .get(&["pod", "token-reader", "-n", &ns])
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let read = |file: &str| {
        joined.kubectl(&[
            "exec",
            "-n",
            &ns,
            "token-reader",
            "--",
            "cat",
            &format!("{TOKEN_DIR}/{file}"),
        ])
    };
    let token = read("token");
    assert_eq!(read("namespace"), ns);
    assert_eq!(read("ca.crt"), ca);
    assert!(token.split('.').count() == 3, "a JWT: {token:?}");

    // The token, from the host, authenticates as the pod's service account.
    let dir = tempfile::tempdir().expect("a directory for the kubeconfig");
    let kubeconfig = dir.path().join("token.kubeconfig");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "skiff", "cluster": {
            "server": joined.api.url(),
            "certificate-authority": ca_path.display().to_string(),
        }}],
        "users": [{"name": "pod", "user": {"token": token}}],
        "contexts": [{"name": "pod", "context": {"cluster": "skiff", "user": "pod"}}],
        "current-context": "pod",
    });
    std::fs::write(&kubeconfig, config.to_string()).expect("write the kubeconfig");
    let output = std::process::Command::new(skiff_testkit::apiserver::kubectl_path(33))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["auth", "whoami", "-o", "json"])
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl");
    assert!(
        output.status.success(),
        "kubectl auth whoami with the pod's token: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let whoami: Value = serde_json::from_slice(&output.stdout).expect("a SelfSubjectReview");
    let user = &whoami["status"]["userInfo"];
    assert_eq!(
        user["username"],
        format!("system:serviceaccount:{ns}:default"),
        "{whoami}"
    );

    // The pod goes (the kubelet stops it); the namespace is marked for deletion (this
    // cluster runs no controller manager to empty it).
    joined.kubectl(&["delete", "pod", "token-reader", "-n", &ns, "--timeout=60s"]);
    joined.kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
