//! The CSR controllers and node IPAM end to end: a kubelet client CSR (made with
//! openssl) is auto-approved and signed by the cluster CA, a kube-apiserver-client CSR
//! approved with `kubectl certificate approve` is signed, a kubelet serving CSR with a
//! bad common name is not auto-approved and, once approved, gets `Failed`; Nodes get
//! distinct pod CIDRs from `--cluster-cidr`, a full range gives `CIDRNotAvailable`, and
//! a deleted Node's CIDR goes to the next Node.

use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;

use super::*;

/// Runs openssl; panics with its output when it fails.
fn openssl(args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A P-256 key and a CSR for `subject` (with `extra` openssl arguments) in `dir`; the
/// CSR's PEM.
fn make_request(dir: &Path, stem: &str, subject: &str, extra: &[&str]) -> String {
    let key = dir.join(format!("{stem}.key"));
    let csr = dir.join(format!("{stem}.csr"));
    let (key, csr) = (key.to_string_lossy(), csr.to_string_lossy());
    let mut args = vec![
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &csr,
        "-subj",
        subject,
    ];
    args.extend_from_slice(extra);
    openssl(&args);
    std::fs::read_to_string(&*csr).expect("read the CSR")
}

fn csr_object(name: &str, pem: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    let mut csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"signerName": signer, "usages": usages, "request": ""},
    }))
    .expect("a CSR");
    csr.spec.request = ByteString(pem.as_bytes().to_vec());
    csr
}

fn condition<'a>(
    csr: &'a CertificateSigningRequest,
    type_: &str,
) -> Option<&'a k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn certificate(csr: &CertificateSigningRequest) -> Option<&[u8]> {
    csr.status
        .as_ref()?
        .certificate
        .as_ref()
        .map(|c| c.0.as_slice())
        .filter(|c| !c.is_empty())
}

/// Waits, by watching, until `name` of `api` satisfies `done`; the object then.
async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    log: impl Fn() -> String,
    done: impl Fn(&K) -> bool,
) -> K
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let cond = move |o: Option<&K>| o.is_some_and(&done);
    let res = tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    match res {
        Ok(Ok(Some(o))) => o,
        other => panic!("timed out waiting for {what}: {other:?}\nlog:\n{}", log()),
    }
}

/// Checks `pem` was signed by the CA file `ca` and returns its subject.
fn verify(dir: &Path, stem: &str, pem: &[u8], ca: &Path) -> String {
    let path = dir.join(format!("{stem}.crt"));
    std::fs::write(&path, pem).expect("write the certificate");
    let path = path.to_string_lossy();
    let out = openssl(&["verify", "-CAfile", &ca.to_string_lossy(), &path]);
    assert!(out.contains(": OK"), "openssl verify: {out}");
    openssl(&[
        "x509",
        "-in",
        &path,
        "-noout",
        "-subject",
        "-ext",
        "extendedKeyUsage",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrs_are_approved_signed_or_failed_and_nodes_get_pod_cidrs() {
    let api = ApiServer::start(ApiServerOptions::new(
        env!("CARGO_BIN_EXE_skiff"),
        Backend::Sqlite,
    ))
    .unwrap_or_else(|e| panic!("start skiff apiserver: {e:#}"));
    let pki = api.data_dir().join("pki");
    let ca = pki.join("ca.crt");
    let cert_flag = format!("--cluster-signing-cert-file={}", ca.display());
    let key_flag = format!(
        "--cluster-signing-key-file={}",
        pki.join("ca.key").display()
    );
    // Upstream's older controller names; /17 node CIDRs so that two Nodes fill the range.
    let cm = ControllerManager::start(
        &api,
        &[
            "--leader-elect=false",
            "--controllers=csrapproving,csrsigning,csrcleaner,nodeipam",
            &cert_flag,
            &key_flag,
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--node-cidr-mask-size=17",
            "--service-cluster-ip-range=10.96.0.0/12",
        ],
    );
    let log = || cm.log();
    let client = api.client().await.expect("client");
    let dir = api.data_dir().join("csr-e2e");
    std::fs::create_dir_all(&dir).expect("a work directory");
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());

    // A node client certificate requested by the admin: approved (nodeclient) and signed.
    let pem = make_request(&dir, "n1", "/O=system:nodes/CN=system:node:e2e-n1", &[]);
    let obj = csr_object(
        "e2e-node-client",
        &pem,
        "kubernetes.io/kube-apiserver-client-kubelet",
        &["digital signature", "client auth"],
    );
    csrs.create(&PostParams::default(), &obj)
        .await
        .expect("create the node client CSR");
    let issued = wait_for(
        &csrs,
        "e2e-node-client",
        "the node client certificate",
        log,
        |c| certificate(c).is_some(),
    )
    .await;
    let approved = condition(&issued, "Approved").expect("the Approved condition");
    assert_eq!(approved.reason.as_deref(), Some("AutoApproved"));
    assert_eq!(
        approved.message.as_deref(),
        Some("Auto approving kubelet client certificate after SubjectAccessReview.")
    );
    let text = verify(&dir, "n1", certificate(&issued).unwrap_or_default(), &ca);
    assert!(
        text.contains("O = system:nodes, CN = system:node:e2e-n1"),
        "{text}"
    );
    assert!(text.contains("TLS Web Client Authentication"), "{text}");

    // A kube-apiserver-client request is signed once kubectl approves it.
    let pem = make_request(&dir, "alice", "/O=dev/CN=alice", &[]);
    let obj = csr_object(
        "e2e-alice",
        &pem,
        "kubernetes.io/kube-apiserver-client",
        &["client auth"],
    );
    csrs.create(&PostParams::default(), &obj)
        .await
        .expect("create alice's CSR");
    kubectl(&api, &["certificate", "approve", "e2e-alice"]);
    let issued = wait_for(&csrs, "e2e-alice", "alice's certificate", log, |c| {
        certificate(c).is_some()
    })
    .await;
    let text = verify(&dir, "alice", certificate(&issued).unwrap_or_default(), &ca);
    assert!(text.contains("O = dev, CN = alice"), "{text}");

    // A kubelet serving request with a common name not system:node:...: not
    // auto-approved (kubectl's approval is the only one), and Failed once approved.
    let pem = make_request(
        &dir,
        "serving",
        "/O=system:nodes/CN=e2e-n1",
        &["-addext", "subjectAltName=DNS:e2e-n1"],
    );
    let obj = csr_object(
        "e2e-bad-serving",
        &pem,
        "kubernetes.io/kubelet-serving",
        &["digital signature", "server auth"],
    );
    csrs.create(&PostParams::default(), &obj)
        .await
        .expect("create the serving CSR");
    kubectl(&api, &["certificate", "approve", "e2e-bad-serving"]);
    let failed = wait_for(
        &csrs,
        "e2e-bad-serving",
        "the serving CSR Failed",
        log,
        |c| condition(c, "Failed").is_some(),
    )
    .await;
    let f = condition(&failed, "Failed").expect("Failed");
    assert_eq!(f.reason.as_deref(), Some("SignerValidationFailure"));
    assert_eq!(
        f.message.as_deref(),
        Some("subject common name does not begin with system:node:")
    );
    assert_eq!(
        condition(&failed, "Approved").and_then(|c| c.reason.as_deref()),
        Some("KubectlApprove")
    );
    assert!(certificate(&failed).is_none());

    // Nodes get distinct pod CIDRs of 10.244.0.0/16.
    let nodes: Api<Node> = Api::all(client.clone());
    let node = |name: &str| -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a Node")
    };
    let cidrs = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.pod_cidrs.clone())
            .unwrap_or_default()
    };
    let mut got = Vec::new();
    for name in ["e2e-n1", "e2e-n2"] {
        nodes
            .create(&PostParams::default(), &node(name))
            .await
            .expect("create a Node");
        let n = wait_for(&nodes, name, "a pod CIDR", log, |n| !cidrs(n).is_empty()).await;
        let spec = n.spec.clone().unwrap_or_default();
        assert_eq!(spec.pod_cidr.as_ref(), cidrs(&n).first());
        got.push(cidrs(&n));
    }
    let mut all: Vec<String> = got.concat();
    all.sort();
    assert_eq!(all, ["10.244.0.0/17", "10.244.128.0/17"]);

    // The range is full: the third Node gets CIDRNotAvailable ...
    nodes
        .create(&PostParams::default(), &node("e2e-n3"))
        .await
        .expect("create a Node");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let stream = watcher::watcher(events, watcher::Config::default());
    futures::pin_mut!(stream);
    let seen = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.try_next().await.expect("watch events") {
            let (WatchEvent::Apply(e) | WatchEvent::InitApply(e)) = ev else {
                continue;
            };
            if e.reason.as_deref() == Some("CIDRNotAvailable")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("e2e-n3")
            {
                return e;
            }
        }
        panic!("the event watch ended");
    })
    .await
    .unwrap_or_else(|_| panic!("no CIDRNotAvailable event; log:\n{}", cm.log()));
    assert_eq!(seen.type_.as_deref(), Some("Warning"));
    assert_eq!(
        seen.note.as_deref(),
        Some("Node e2e-n3 status is now: CIDRNotAvailable")
    );

    // ... and the CIDR of a deleted Node once it is gone.
    nodes
        .delete("e2e-n1", &Default::default())
        .await
        .expect("delete e2e-n1");
    let n3 = wait_for(&nodes, "e2e-n3", "e2e-n1's CIDR for e2e-n3", log, |n| {
        !cidrs(n).is_empty()
    })
    .await;
    assert_eq!(cidrs(&n3), got[0]);

    for name in ["e2e-n2", "e2e-n3"] {
        let _ = nodes.delete(name, &Default::default()).await;
    }
    for name in ["e2e-node-client", "e2e-alice", "e2e-bad-serving"] {
        let _ = csrs.delete(name, &Default::default()).await;
    }
}
