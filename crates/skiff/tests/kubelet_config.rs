//! `skiff kubelet --config`: a KubeletConfiguration file drives the kubelet, flags override
//! it, broken files are refused with the field named; the http pod source
//! (`staticPodURL`) runs the pods a local HTTP server lists, next to the file source.

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cluster, Runtime, find_pod, free_port, pod_phase, sleep_pod};
use skiff_testkit::FileServer;

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

/// A v1 PodList in YAML holding the given pod manifests (YAML mappings).
fn pod_list(pods: &[String]) -> String {
    let mut list = String::from("apiVersion: v1\nkind: PodList\nitems:\n");
    for pod in pods {
        for (i, line) in pod.lines().enumerate() {
            list.push_str(if i == 0 { "- " } else { "  " });
            list.push_str(line);
            list.push('\n');
        }
    }
    list
}

/// Runs `skiff kubelet --config <file>` and returns its exit success and stderr; fails the
/// test if it does not exit within 30 s.
fn run_kubelet_with(config: &Path, scratch: &Path) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("kubelet")
        .arg("--config")
        .arg(config)
        .args(["--hostname-override", "config-test"])
        .arg("--root-dir")
        .arg(scratch.join("kubelet"))
        .arg("--runtime-root")
        .arg(scratch.join("rt"))
        .arg("--runtime-state")
        .arg(scratch.join("st"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn skiff kubelet");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait for skiff kubelet").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("skiff kubelet --config {} did not exit", config.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("skiff kubelet output");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn broken_config_files_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: &[(&str, String, &[&str])] = &[
        (
            "unknown.yaml",
            format!("{HEADER}staticPodPat: /etc/kubernetes/manifests\n"),
            &["unknown field `staticPodPat`"],
        ),
        (
            "duration.yaml",
            format!("{HEADER}syncFrequency: 10 seconds\n"),
            &["syncFrequency", "invalid duration \"10 seconds\""],
        ),
        (
            "driver.yaml",
            format!("{HEADER}cgroupDriver: systemd\n"),
            &["cgroupDriver: unsupported value \"systemd\""],
        ),
        (
            "kind.yaml",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n".into(),
            &["kind: must be \"KubeletConfiguration\""],
        ),
        (
            "gc.yaml",
            format!("{HEADER}imageGCHighThresholdPercent: 60\nimageGCLowThresholdPercent: 70\n"),
            &["imageGCLowThresholdPercent: 70 must be less than imageGCHighThresholdPercent (60)"],
        ),
        (
            "eviction.yaml",
            format!("{HEADER}evictionHard:\n  nodefs.available: \"120%\"\n"),
            &["evictionHard[nodefs.available]", "120%"],
        ),
    ];
    for (name, body, needles) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, body).expect("write the config file");
        let (success, stderr) = run_kubelet_with(&file, dir.path());
        assert!(!success, "{name} was accepted:\n{stderr}");
        assert!(
            stderr.contains(&file.display().to_string()),
            "{name}: the message does not name the file:\n{stderr}"
        );
        for needle in *needles {
            assert!(
                stderr.contains(needle),
                "{name}: no {needle:?} in:\n{stderr}"
            );
        }
    }
    assert!(
        !dir.path().join("rt").exists(),
        "the runtime must not start with a broken configuration"
    );
}

#[test]
fn config_file_and_manifest_url_drive_the_kubelet() {
    // Declared first: dropped after the cluster, which drains its pods.
    let server = FileServer::start().expect("start the file server");
    let config_dir = tempfile::tempdir().expect("tempdir");
    let overridden_port = free_port();
    let config = config_dir.path().join("kubelet.yaml");
    let config_yaml = format!(
        r#"{HEADER}staticPodURL: {url}
staticPodURLHeader:
  X-Skiff-Test: [config-e2e]
httpCheckFrequency: 1s
readOnlyPort: {overridden_port}
syncFrequency: 30s
evictionHard: {{memory.available: 1Mi, nodefs.available: 1%, imagefs.available: 1%}}
# Written by kubeadm: honoured (authentication, cluster DNS) or accepted and ignored
# (resolvConf, which Skiff does not implement yet).
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
"#,
        url = server.url("pods.yaml"),
    );
    std::fs::write(&config, config_yaml).expect("write the config file");

    let cluster = Cluster::start_with(
        Runtime::Embedded,
        vec!["--config".into(), config.display().to_string()],
    );
    // Until now the URL answered 404: the http source keeps trying.
    let listed = pod_list(&[sleep_pod("fromurl", &cluster.image, "1")]);
    server
        .write("pods.yaml", &listed)
        .expect("serve the pod list");
    cluster.write_manifest("local.yaml", &sleep_pod("local", &cluster.image, "1"));

    let from_url = cluster.static_name("fromurl");
    let pod = cluster.wait_running(&from_url);
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["kubernetes.io/config.source"], "http", "{pod}");
    assert_eq!(annotations["kubernetes.io/config.hash"], uid.as_str());
    assert_eq!(pod["spec"]["nodeName"], cluster.node.node_name().as_str());
    assert_eq!(pod["metadata"]["namespace"], "default");
    // Both sources are merged.
    cluster.wait_running(&cluster.static_name("local"));

    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.to_ascii_lowercase().contains("x-skiff-test: config-e2e")),
        "staticPodURLHeader was not sent: {requests:?}"
    );
    assert!(
        TcpStream::connect(("127.0.0.1", overridden_port)).is_err(),
        "--read-only-port must override the file's readOnlyPort"
    );
    let log = cluster.node.log();
    assert!(
        log.contains("not implemented by Skiff") && log.contains("resolvConf"),
        "ignored fields are reported"
    );

    // A broken body keeps the last good pods.
    server.write("pods.yaml", "kind: [").expect("serve garbage");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cluster
        .node
        .log()
        .contains("unable to read pods from the manifest URL")
    {
        assert!(Instant::now() < deadline, "the bad body was never reported");
        std::thread::sleep(Duration::from_millis(200));
    }
    let pods = cluster.node.pods().expect("GET /pods");
    let still = find_pod(&pods, &from_url).expect("the pod survives a bad body");
    assert_eq!(still["metadata"]["uid"], uid.as_str());
    assert_eq!(pod_phase(still), "Running");

    // Once the URL stops listing the pod, it goes; the file pod stays.
    server
        .write("pods.yaml", &pod_list(&[]))
        .expect("serve an empty list");
    cluster.wait_gone(&from_url);
    let pods = cluster.node.pods().expect("GET /pods");
    assert!(find_pod(&pods, &cluster.static_name("local")).is_some());
    cluster.remove_manifest("local.yaml");
    cluster.wait_gone(&cluster.static_name("local"));
    cluster.assert_no_leftovers();
}
