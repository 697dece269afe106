//! End-to-end: static pods through `skiff kubelet`, on its embedded runtime and on
//! Debian's containerd 1.6 (`<case>::embedded`, `<case>::containerd`), with real runc,
//! real CNI plugins and a real registry (issues 2 and 4). Run as root.

mod common;

use std::time::Duration;

use common::{Cluster, container_status, pod_ip, pod_phase};

common::node_cases! {
    httpd_static_pod_serves_and_logs,
    pods_reach_each_other,
    edit_replaces_and_delete_cleans_up,
    edited_host_network_pod_waits_for_its_predecessor,
    restart_policies,
    bad_input_is_reported_and_isolated,
    kubelet_sigkill_keeps_containers,
}

/// A busybox httpd pod becomes Running, answers on its pod IP, and logs in CRI format.
fn httpd_static_pod_serves_and_logs(cluster: Cluster) {
    cluster.write_manifest(
        "web.yaml",
        &common::httpd_pod("web", &cluster.image, "hello skiff"),
    );
    let name = cluster.static_name("web");

    let pod = cluster.wait_running(&name);
    let ip = pod_ip(&pod);
    assert_eq!(
        common::http_get(&ip, 8080, "/index.html").trim(),
        "hello skiff"
    );

    let status = container_status(&pod, "httpd");
    assert_eq!(status["restartCount"], 0);
    assert!(
        status["containerID"].as_str().unwrap_or("").contains("://"),
        "{status}"
    );
    assert!(
        status["imageID"].as_str().unwrap_or("").contains("sha256:"),
        "{status}"
    );
    assert_eq!(
        pod["status"]["hostIP"].as_str().map(|s| !s.is_empty()),
        Some(true)
    );

    let log = common::wait_log_line(&pod, "httpd", 0, "serving");
    for line in log.lines() {
        common::assert_cri_log_line(line);
    }

    // The runtime serves CRI v1 on its socket for standard CRI tools.
    let sandboxes = common::cri_pod_sandboxes(&cluster.node.cri_socket());
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    assert!(
        sandboxes
            .iter()
            .any(|s| s.metadata.as_ref().is_some_and(|m| m.uid == uid)),
        "ListPodSandbox on the CRI socket does not show the pod: {sandboxes:?}"
    );

    cluster.remove_manifest("web.yaml");
    cluster.wait_gone(&name);
    cluster.assert_no_leftovers();
}

/// Two pods get different IPs and reach each other over the pod network.
fn pods_reach_each_other(cluster: Cluster) {
    cluster.write_manifest(
        "server.yaml",
        &common::httpd_pod("server", &cluster.image, "from server"),
    );
    let server = cluster.wait_running(&cluster.static_name("server"));
    let server_ip = pod_ip(&server);

    let client = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  restartPolicy: Never
  containers:
  - name: wget
    image: {image}
    command: ["sh", "-c", "until wget -q -O - http://{server_ip}:8080/index.html; do sleep 0.5; done"]
"#,
        image = cluster.image
    );
    cluster.write_manifest("client.yaml", &client);
    let client_name = cluster.static_name("client");
    let client_pod = cluster.wait_for("client pod Succeeded", Duration::from_secs(90), |pods| {
        common::find_pod(pods, &client_name).is_some_and(|p| pod_phase(p) == "Succeeded")
    });
    let client_pod = common::find_pod(&client_pod, &client_name)
        .cloned()
        .unwrap_or_default();
    assert_ne!(pod_ip(&client_pod), server_ip, "two pods share an IP");
    let log = common::wait_log_line(&client_pod, "wget", 0, "from server");
    assert!(log.contains("from server"), "client log: {log}");

    cluster.remove_manifest("client.yaml");
    cluster.remove_manifest("server.yaml");
    cluster.wait_gone(&client_name);
    cluster.wait_gone(&cluster.static_name("server"));
    cluster.assert_no_leftovers();
}

/// Editing a manifest replaces the pod's container; deleting it leaves nothing behind.
fn edit_replaces_and_delete_cleans_up(cluster: Cluster) {
    let name = cluster.static_name("edit");
    cluster.write_manifest(
        "edit.yaml",
        &common::sleep_pod("edit", &cluster.image, "v1"),
    );
    let first = cluster.wait_running(&name);
    let first_id = container_status(&first, "main")["containerID"].clone();
    let first_uid = first["metadata"]["uid"].clone();

    cluster.write_manifest(
        "edit.yaml",
        &common::sleep_pod("edit", &cluster.image, "v2"),
    );
    let second = cluster.wait_for("the edited pod Running", Duration::from_secs(90), |pods| {
        common::find_pod(pods, &name)
            .is_some_and(|p| p["metadata"]["uid"] != first_uid && pod_phase(p) == "Running")
    });
    let second = common::find_pod(&second, &name)
        .cloned()
        .unwrap_or_default();
    let second_id = container_status(&second, "main")["containerID"].clone();
    assert_ne!(first_id, second_id, "the container was not replaced");
    common::wait_log_line(&second, "main", 0, "VERSION=v2");

    cluster.remove_manifest("edit.yaml");
    cluster.wait_gone(&name);
    cluster.assert_no_leftovers();
}

/// An edited static pod starts only once its predecessor has terminated, as upstream: a
/// host-network server finds its port free and starts once (restartCount 0).
fn edited_host_network_pod_waits_for_its_predecessor(cluster: Cluster) {
    let port = common::free_port();
    let manifest = |body: &str| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: hostweb}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: {image}
    command: ["sh", "-c", "mkdir -p /srv && echo {body} > /srv/index.html && exec httpd -f -p 127.0.0.1:{port} -h /srv"]
"#,
            image = cluster.image
        )
    };
    let name = cluster.static_name("hostweb");
    cluster.write_manifest("hostweb.yaml", &manifest("v1"));
    let first = cluster.wait_running(&name);
    assert_eq!(
        common::http_get("127.0.0.1", port, "/index.html").trim(),
        "v1"
    );

    cluster.write_manifest("hostweb.yaml", &manifest("v2"));
    let pods = cluster.wait_for("the edited pod serving", Duration::from_secs(90), |pods| {
        common::find_pod(pods, &name).is_some_and(|p| {
            p["metadata"]["uid"] != first["metadata"]["uid"]
                && container_status(p, "httpd")["state"]["running"].is_object()
        })
    });
    assert_eq!(
        common::http_get("127.0.0.1", port, "/index.html").trim(),
        "v2"
    );
    let second = common::find_pod(&pods, &name).cloned().unwrap_or_default();
    assert_eq!(
        container_status(&second, "httpd")["restartCount"],
        0,
        "the new pod started while the old one still held the port: {second}"
    );

    cluster.remove_manifest("hostweb.yaml");
    cluster.wait_gone(&name);
    cluster.assert_no_leftovers();
}

/// OnFailure restarts a failing container; Never ends the pod Failed with the exit code.
fn restart_policies(cluster: Cluster) {
    let exit_pod = |name: &str, policy: &str, code: u8| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: {policy}\n  containers:\n  - name: main\n    image: {}\n    command: [sh, -c, 'echo failing; exit {code}']\n",
            cluster.image
        )
    };
    cluster.write_manifest("onfailure.yaml", &exit_pod("onfailure", "OnFailure", 1));
    cluster.write_manifest("never.yaml", &exit_pod("never", "Never", 3));
    let onfailure = cluster.static_name("onfailure");
    let never = cluster.static_name("never");

    let pods = cluster.wait_for("the Never pod Failed", Duration::from_secs(60), |pods| {
        common::find_pod(pods, &never).is_some_and(|p| pod_phase(p) == "Failed")
    });
    let never_pod = common::find_pod(&pods, &never).cloned().unwrap_or_default();
    let terminated = &container_status(&never_pod, "main")["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 3, "{never_pod}");
    assert_eq!(terminated["reason"], "Error", "{never_pod}");

    cluster.wait_for(
        "the OnFailure pod restarted",
        Duration::from_secs(90),
        |pods| {
            common::find_pod(pods, &onfailure).is_some_and(|p| {
                container_status(p, "main")["restartCount"]
                    .as_u64()
                    .unwrap_or(0)
                    >= 1
            })
        },
    );

    cluster.remove_manifest("onfailure.yaml");
    cluster.remove_manifest("never.yaml");
    cluster.wait_gone(&onfailure);
    cluster.wait_gone(&never);
    cluster.assert_no_leftovers();
}

/// Broken manifests and unpullable images are reported and never disturb other pods.
fn bad_input_is_reported_and_isolated(cluster: Cluster) {
    cluster.write_manifest(
        "good.yaml",
        &common::httpd_pod("good", &cluster.image, "still fine"),
    );
    cluster.write_manifest(
        "broken-yaml.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n",
    );
    cluster.write_manifest(
        "wrong-type.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: wrongtype}\nspec:\n  containers: \"not a list\"\n",
    );
    let image_pod = |name: &str, image: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: main\n    image: \"{image}\"\n"
        )
    };
    cluster.write_manifest(
        "malformed.yaml",
        &image_pod("malformed", "Not A//Valid:Ref:"),
    );
    let missing_image = format!("{}/skiff/does-not-exist:1.0", cluster.registry.host());
    cluster.write_manifest("missing.yaml", &image_pod("missing", &missing_image));

    let good = cluster.wait_running(&cluster.static_name("good"));
    let missing = cluster.static_name("missing");
    let malformed = cluster.static_name("malformed");
    cluster.wait_for("pull failures reported", Duration::from_secs(60), |pods| {
        let reason = |name: &str| {
            common::find_pod(pods, name)
                .map(|p| container_status(p, "main")["state"]["waiting"]["reason"].clone())
                .unwrap_or_default()
        };
        matches!(
            reason(&missing).as_str(),
            Some("ErrImagePull" | "ImagePullBackOff")
        ) && reason(&malformed).as_str() == Some("InvalidImageName")
    });

    let log = cluster.node.log();
    assert!(
        log.contains("broken-yaml.yaml"),
        "no error names the invalid YAML file"
    );
    assert!(
        log.contains("wrong-type.yaml"),
        "no error names the wrongly typed manifest"
    );
    assert!(cluster.node.pod("wrongtype").is_none());

    // The good pod was never disturbed.
    let ip = pod_ip(&good);
    assert_eq!(
        common::http_get(&ip, 8080, "/index.html").trim(),
        "still fine"
    );
    let again = cluster.node.pod("good").unwrap_or_default();
    assert_eq!(container_status(&again, "httpd")["restartCount"], 0);

    for file in [
        "good.yaml",
        "broken-yaml.yaml",
        "wrong-type.yaml",
        "malformed.yaml",
        "missing.yaml",
    ] {
        cluster.remove_manifest(file);
    }
    cluster.wait_gone(&cluster.static_name("good"));
    cluster.wait_gone(&missing);
    cluster.wait_gone(&malformed);
    cluster.assert_no_leftovers();
}

/// SIGKILL of the kubelet leaves containers running: same IDs, same restartCount, same log file.
fn kubelet_sigkill_keeps_containers(mut cluster: Cluster) {
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: ticker}}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: {}\n    command: [sh, -c, 'i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done']\n",
        cluster.image
    );
    cluster.write_manifest("ticker.yaml", &manifest);
    let name = cluster.static_name("ticker");
    let before = cluster.wait_running(&name);
    let before_status = container_status(&before, "main").clone();
    let log_before = common::wait_log_line(&before, "main", 0, "tick 3");

    cluster.node.kill9().expect("SIGKILL the kubelet");
    std::thread::sleep(Duration::from_secs(1));
    cluster.node.restart().expect("restart the kubelet");

    let after = cluster.wait_running(&name);
    let after_status = container_status(&after, "main");
    assert_eq!(
        after_status["containerID"],
        before_status["containerID"],
        "the container was replaced; kubelet log:\n{}",
        cluster.node.log()
    );
    assert_eq!(after_status["restartCount"], before_status["restartCount"]);
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);

    std::thread::sleep(Duration::from_secs(1));
    let log_after = common::read_container_log(&after, "main", 0);
    assert!(
        log_after.starts_with(&log_before),
        "the log file was replaced; before:\n{log_before}\nafter:\n{log_after}\nmetadata: {:?}\nraw: {:?}\nkubelet log:\n{}",
        std::fs::metadata(common::container_log_path(&after, "main", 0)),
        std::fs::read(common::container_log_path(&after, "main", 0))
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        cluster.node.log()
    );
    assert!(
        log_after.len() > log_before.len(),
        "the container stopped logging"
    );

    cluster.remove_manifest("ticker.yaml");
    cluster.wait_gone(&name);
    cluster.assert_no_leftovers();
}
