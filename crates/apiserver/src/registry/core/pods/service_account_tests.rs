//! The ServiceAccount admission plugin through the REST layer: the token volume when the
//! account exists, the opt-outs, the missing account, existing mounts, imagePullSecrets,
//! mountable secrets and mirror pods.

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Value, json};

use super::{DEFAULT_API_TOKEN_MOUNT_PATH, TOKEN_VOLUME_PREFIX, mount_service_account_token};
use crate::registry::testing::Server;

const PODS: &str = "/api/v1/namespaces/default/pods";
const ACCOUNTS: &str = "/api/v1/namespaces/default/serviceaccounts";
/// Upstream's name suffix alphabet.
const ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

async fn account(server: &Server, account: Value) {
    let reply = server.send("POST", ACCOUNTS, &account).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
}

/// A pod `name` with `spec` merged over one container `app`.
fn pod(name: &str, spec: Value) -> Value {
    let mut pod = json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    });
    if let (Some(base), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        base.extend(extra.clone());
    }
    pod
}

/// Creates `pod`; the reply must be 201. Returns the stored pod.
async fn create(server: &Server, pod: &Value) -> Value {
    let reply = server.send("POST", PODS, pod).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body
}

/// The pod's `kube-api-access-` volumes.
fn token_volumes(pod: &Value) -> Vec<Value> {
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        })
        .cloned()
        .collect()
}

/// The mounts at the token path of the container list `list` (`containers`,
/// `initContainers`), one entry per container.
fn token_mounts(pod: &Value, list: &str) -> Vec<Option<Value>> {
    pod["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            c["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["mountPath"] == DEFAULT_API_TOKEN_MOUNT_PATH)
                .cloned()
        })
        .collect()
}

#[tokio::test]
async fn the_token_volume_is_mounted_in_every_container_when_the_account_exists() {
    let server = Server::start().await;
    account(&server, json!({"metadata": {"name": "default"}})).await;
    let created = create(
        &server,
        &pod(
            "web",
            json!({
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [
                    {"name": "app", "image": "busybox"},
                    {"name": "side", "image": "busybox", "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]},
                ],
                "volumes": [{"name": "tmp", "emptyDir": {}}],
            }),
        ),
    )
    .await;
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    assert_eq!(created["spec"]["serviceAccount"], "default");
    let volumes = token_volumes(&created);
    assert_eq!(volumes.len(), 1, "{}", created["spec"]);
    let name = volumes[0]["name"].as_str().unwrap_or_default().to_owned();
    let suffix = &name[TOKEN_VOLUME_PREFIX.len()..];
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(suffix.chars().all(|c| ALPHABET.contains(c)), "{name}");
    assert_eq!(
        volumes[0]["projected"],
        json!({
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        })
    );
    // The pod's own volume stays first.
    assert_eq!(created["spec"]["volumes"][0]["name"], "tmp");
    let expected =
        json!({"name": name, "readOnly": true, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH});
    let mounts = token_mounts(&created, "containers");
    assert_eq!(mounts, [Some(expected.clone()), Some(expected.clone())]);
    assert_eq!(token_mounts(&created, "initContainers"), [Some(expected)]);
    // The token mount goes after the container's own.
    assert_eq!(
        created["spec"]["containers"][1]["volumeMounts"][0]["mountPath"],
        "/tmp"
    );
    // A pod without the account's imagePullSecrets gets none.
    assert!(created["spec"].get("imagePullSecrets").is_none());

    // Another pod gets another volume name.
    let other = create(&server, &pod("web-2", json!({}))).await;
    assert_eq!(token_volumes(&other).len(), 1);
}

#[tokio::test]
async fn the_pod_or_its_account_may_opt_out() {
    let server = Server::start().await;
    account(&server, json!({"metadata": {"name": "default"}})).await;
    account(
        &server,
        json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false}),
    )
    .await;

    let pod_opts_out = create(
        &server,
        &pod(
            "pod-opts-out",
            json!({"automountServiceAccountToken": false}),
        ),
    )
    .await;
    assert!(token_volumes(&pod_opts_out).is_empty(), "{pod_opts_out}");
    assert_eq!(token_mounts(&pod_opts_out, "containers"), [None]);

    let account_opts_out = create(
        &server,
        &pod("account-opts-out", json!({"serviceAccountName": "quiet"})),
    )
    .await;
    assert_eq!(account_opts_out["spec"]["serviceAccountName"], "quiet");
    assert!(
        token_volumes(&account_opts_out).is_empty(),
        "{account_opts_out}"
    );
    assert_eq!(token_mounts(&account_opts_out, "containers"), [None]);

    // The pod's preference wins over the account's.
    let pod_opts_in = create(
        &server,
        &pod(
            "pod-opts-in",
            json!({"serviceAccountName": "quiet", "automountServiceAccountToken": true}),
        ),
    )
    .await;
    assert_eq!(token_volumes(&pod_opts_in).len(), 1, "{pod_opts_in}");
}

/// Skiff's deviation: no ServiceAccount, no refusal and no injection (until the
/// ServiceAccount controller exists).
#[tokio::test]
async fn a_missing_account_gets_no_token_volume() {
    let server = Server::start().await;
    let created = create(&server, &pod("no-default", json!({}))).await;
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    assert!(created["spec"].get("volumes").is_none(), "{created}");
    assert_eq!(token_mounts(&created, "containers"), [None]);

    // The deprecated field names the account when serviceAccountName is unset.
    let named = create(
        &server,
        &pod("old-field", json!({"serviceAccount": "nobody"})),
    )
    .await;
    assert_eq!(named["spec"]["serviceAccountName"], "nobody");
    assert_eq!(named["spec"]["serviceAccount"], "nobody");
    assert!(named["spec"].get("volumes").is_none(), "{named}");
}

#[tokio::test]
async fn an_existing_mount_at_the_token_path_is_respected() {
    let server = Server::start().await;
    account(&server, json!({"metadata": {"name": "default"}})).await;
    let own_mount = json!({"name": "own", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH});

    // Every container mounts its own: no token volume.
    let all_own = create(
        &server,
        &pod(
            "all-own",
            json!({
                "containers": [{"name": "app", "image": "busybox", "volumeMounts": [own_mount.clone()]}],
                "volumes": [{"name": "own", "emptyDir": {}}],
            }),
        ),
    )
    .await;
    assert!(token_volumes(&all_own).is_empty(), "{all_own}");
    assert_eq!(
        all_own["spec"]["containers"][0]["volumeMounts"],
        json!([own_mount.clone()])
    );

    // One does, the other gets the token volume.
    let one_own = create(
        &server,
        &pod(
            "one-own",
            json!({
                "containers": [
                    {"name": "app", "image": "busybox", "volumeMounts": [own_mount.clone()]},
                    {"name": "side", "image": "busybox"},
                ],
                "volumes": [{"name": "own", "emptyDir": {}}],
            }),
        ),
    )
    .await;
    let volumes = token_volumes(&one_own);
    assert_eq!(volumes.len(), 1, "{one_own}");
    let mounts = token_mounts(&one_own, "containers");
    assert_eq!(mounts[0], Some(own_mount));
    assert_eq!(
        mounts[1].as_ref().map(|m| m["name"].clone()),
        Some(volumes[0]["name"].clone())
    );
}

#[test]
fn a_kube_api_access_volume_of_the_pod_is_reused() {
    let mut spec: PodSpec = serde_json::from_value(json!({
        "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "kube-api-access-mine", "emptyDir": {}}],
    }))
    .expect("a pod spec");
    mount_service_account_token(&mut spec, || panic!("no name is generated"));
    let spec = serde_json::to_value(&spec).expect("JSON");
    assert_eq!(
        spec["volumes"],
        json!([{"name": "kube-api-access-mine", "emptyDir": {}}])
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": "kube-api-access-mine", "readOnly": true, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}])
    );
}

#[tokio::test]
async fn the_accounts_image_pull_secrets_are_copied_to_pods_without_any() {
    let server = Server::start().await;
    account(
        &server,
        json!({
            "metadata": {"name": "puller"},
            "automountServiceAccountToken": false,
            "imagePullSecrets": [{"name": "registry-a"}, {"name": "registry-b"}],
        }),
    )
    .await;
    let copied = create(
        &server,
        &pod("copied", json!({"serviceAccountName": "puller"})),
    )
    .await;
    assert_eq!(
        copied["spec"]["imagePullSecrets"],
        json!([{"name": "registry-a"}, {"name": "registry-b"}])
    );
    let own = create(
        &server,
        &pod(
            "own",
            json!({"serviceAccountName": "puller", "imagePullSecrets": [{"name": "mine"}]}),
        ),
    )
    .await;
    assert_eq!(own["spec"]["imagePullSecrets"], json!([{"name": "mine"}]));
}

#[tokio::test]
async fn an_account_may_limit_its_pods_to_its_secrets() {
    let server = Server::start().await;
    account(
        &server,
        json!({
            "metadata": {"name": "strict", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}},
            "automountServiceAccountToken": false,
            "secrets": [{"name": "allowed"}],
        }),
    )
    .await;
    let secret_volume = |name: &str, secret: &str| {
        pod(
            name,
            json!({
                "serviceAccountName": "strict",
                "volumes": [{"name": "s", "secret": {"secretName": secret}}],
            }),
        )
    };
    create(&server, &secret_volume("allowed", "allowed")).await;
    let refused = server
        .send("POST", PODS, &secret_volume("refused", "other"))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(
        refused.body["message"],
        "pods \"refused\" is forbidden: volume with secret.secretName=\"other\" is not allowed because service account strict does not reference that secret"
    );
    let env = pod(
        "env",
        json!({
            "serviceAccountName": "strict",
            "containers": [{"name": "app", "image": "busybox", "env": [
                {"name": "P", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}},
            ]}],
        }),
    );
    let refused = server.send("POST", PODS, &env).await;
    assert_eq!(
        refused.body["message"],
        "pods \"env\" is forbidden: container app with envVar P referencing secret.secretName=\"other\" is not allowed because service account strict does not reference that secret"
    );
}

#[tokio::test]
async fn mirror_pods_are_left_alone_but_may_not_reference_accounts_or_secrets() {
    let server = Server::start().await;
    account(&server, json!({"metadata": {"name": "default"}})).await;
    let mirror = |name: &str, spec: Value| {
        let mut p = pod(name, spec);
        p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
        p
    };

    let plain = create(&server, &mirror("static-web", json!({}))).await;
    assert!(plain["spec"].get("serviceAccountName").is_none(), "{plain}");
    assert!(plain["spec"].get("volumes").is_none(), "{plain}");
    assert_eq!(token_mounts(&plain, "containers"), [None]);

    let cases = [
        (
            json!({"serviceAccountName": "default"}),
            "a mirror pod may not reference service accounts",
        ),
        (
            json!({"volumes": [{"name": "s", "secret": {"secretName": "creds"}}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"imagePullSecrets": [{"name": "registry"}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"containers": [{"name": "app", "image": "busybox", "envFrom": [{"secretRef": {"name": "creds"}}]}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}),
            "a mirror pod may not use ServiceAccountToken volume projections",
        ),
    ];
    for (i, (spec, why)) in cases.into_iter().enumerate() {
        let name = format!("static-{i}");
        let reply = server.send("POST", PODS, &mirror(&name, spec)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
        assert_eq!(
            reply.body["message"],
            format!("pods \"{name}\" is forbidden: {why}")
        );
        let stored = server
            .send("GET", &format!("{PODS}/{name}"), &Value::Null)
            .await;
        assert_eq!(stored.status, StatusCode::NOT_FOUND);
    }
}
