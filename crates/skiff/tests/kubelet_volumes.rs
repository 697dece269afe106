//! End-to-end: pod volumes through `skiff kubelet` with the embedded runtime and real runc
//! (issue 4's volumes): emptyDir on disk and in memory, hostPath types, downwardAPI,
//! subPath / subPathExpr, readOnly, and teardown. Run as root.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Cluster, container_status, find_pod, pod_phase, wait_log_line};

/// Mount points of the host (this process's mount namespace).
fn host_mount_points() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(PathBuf::from))
        .collect()
}

/// Polls `check` every 200 ms for up to 20 s; panics with `what` otherwise.
fn poll(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn volumes_pod(image: &str, host_dir: &Path) -> String {
    let reader = [
        "until [ -f /cache/msg ]; do sleep 0.2; done",
        "echo \"shared=$(cat /cache/msg)\"",
        "grep ' /mem ' /proc/mounts",
        "echo labels:; cat /info/labels; echo",
        "echo annotations:; cat /info/annotations; echo",
        "echo \"name=$(cat /info/name)\"",
        "echo sub > /sub/file && echo sub-ok",
        "echo expr > /expr/file && echo expr-ok",
        "if touch /ro/x 2>/dev/null; then echo ro-writable; else echo ro-refused; fi",
        "if touch /info/x 2>/dev/null; then echo info-writable; else echo info-refused; fi",
        "echo done; exec sleep 3600",
    ]
    .join("\n      ");
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: vols
  labels: {{app: vols, tier: e2e}}
  annotations: {{note: hello}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: {image}
    command: ["sh", "-c", "echo shared > /cache/msg && echo from-pod > /host/out.txt && until grep -q ' /prop/inner ' /proc/mounts; do sleep 0.2; done; echo propagated; exec sleep 3600"]
    volumeMounts:
    - {{name: cache, mountPath: /cache}}
    - {{name: host, mountPath: /host}}
    - {{name: prop, mountPath: /prop, mountPropagation: HostToContainer}}
  - name: reader
    image: {image}
    env:
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    command: ["sh", "-c"]
    args:
    - |
      {reader}
    volumeMounts:
    - {{name: cache, mountPath: /cache}}
    - {{name: mem, mountPath: /mem}}
    - {{name: info, mountPath: /info}}
    - {{name: cache, mountPath: /sub, subPath: nested/dir}}
    - {{name: cache, mountPath: /expr, subPathExpr: "by-pod/$(POD_NAME)"}}
    - {{name: cache, mountPath: /ro, readOnly: true}}
  volumes:
  - name: cache
    emptyDir: {{}}
  - name: prop
    emptyDir: {{}}
  - name: mem
    emptyDir: {{medium: Memory, sizeLimit: 16Mi}}
  - name: host
    hostPath: {{path: {host}, type: DirectoryOrCreate}}
  - name: info
    downwardAPI:
      items:
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: annotations, fieldRef: {{fieldPath: metadata.annotations}}}}
      - {{path: name, fieldRef: {{fieldPath: metadata.name}}}}
"#,
        host = host_dir.display()
    )
}

fn missing_file_pod(image: &str, missing: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: nofile}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {image}
    command: ["sleep", "3600"]
    volumeMounts: [{{name: f, mountPath: /f}}]
  volumes:
  - name: f
    hostPath: {{path: {missing}, type: File}}
"#,
        missing = missing.display()
    )
}

/// One node, two pods: one using every volume type, one whose hostPath File is missing.
#[test]
fn volumes_are_set_up_mounted_and_torn_down() {
    let cluster = Cluster::start();
    let host_dir = cluster.node.dir().join("hostpath/created");
    let missing = cluster.node.dir().join("no-such-file");
    cluster.write_manifest("vols.yaml", &volumes_pod(&cluster.image, &host_dir));
    cluster.write_manifest("nofile.yaml", &missing_file_pod(&cluster.image, &missing));
    let vols = cluster.static_name("vols");
    let nofile = cluster.static_name("nofile");

    let pod = cluster.wait_running(&vols);
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let log = wait_log_line(&pod, "reader", 0, "done");
    // emptyDir shared by both containers.
    assert!(log.contains("shared=shared"), "{log}");
    // emptyDir medium Memory: a tmpfs of the sizeLimit.
    let mem = log
        .lines()
        .find(|l| l.contains(" /mem tmpfs "))
        .unwrap_or_else(|| panic!("no tmpfs on /mem:\n{log}"));
    assert!(mem.contains("size=16384k"), "{mem}");
    // downwardAPI files.
    assert!(log.contains("app=\"vols\""), "{log}");
    assert!(log.contains("tier=\"e2e\""), "{log}");
    assert!(log.contains("note=\"hello\""), "{log}");
    assert!(log.contains(&format!("name={vols}")), "{log}");
    // readOnly mounts (explicit, and the downwardAPI volume always) refuse writes.
    assert!(log.contains("ro-refused"), "{log}");
    assert!(log.contains("info-refused"), "{log}");
    assert!(log.contains("sub-ok") && log.contains("expr-ok"), "{log}");

    // On the host: hostPath created and written, subPaths inside the emptyDir, tmpfs mounts.
    assert_eq!(
        std::fs::read_to_string(host_dir.join("out.txt")).unwrap_or_default(),
        "from-pod\n"
    );
    let pod_dir = cluster.node.dir().join("kubelet/pods").join(&uid);
    let cache = pod_dir.join("volumes/kubernetes.io~empty-dir/cache");
    assert!(cache.join("nested/dir/file").is_file());
    assert!(cache.join("by-pod").join(&vols).join("file").is_file());
    // The Summary API reports the pod's volumes (not the hostPath one, as upstream).
    let summary: serde_json::Value = serde_json::from_str(&common::http_get(
        "127.0.0.1",
        cluster.node.port(),
        "/stats/summary",
    ))
    .expect("Summary JSON");
    let volumes = summary["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["podRef"]["uid"] == uid.as_str())
        .map(|p| p["volume"].clone())
        .unwrap_or_default();
    let volume = |name: &str| {
        volumes
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no volume {name} in {volumes}"))
    };
    assert!(volume("cache")["usedBytes"].as_u64() > Some(0), "{volumes}");
    assert_eq!(volume("mem")["capacityBytes"], 16 << 20, "{volumes}");
    assert!(volume("info")["inodesUsed"].as_u64() > Some(0), "{volumes}");
    assert!(!volumes.to_string().contains("\"host\""), "{volumes}");
    let mem_dir = pod_dir.join("volumes/kubernetes.io~empty-dir/mem");
    let info_dir = pod_dir.join("volumes/kubernetes.io~downward-api/info");
    let mounts = host_mount_points();
    assert!(
        mounts.contains(&mem_dir),
        "{} not mounted",
        mem_dir.display()
    );
    assert!(
        mounts.contains(&info_dir),
        "{} not mounted",
        info_dir.display()
    );
    assert!(
        std::fs::read_link(info_dir.join("labels")).is_ok_and(|l| l == Path::new("..data/labels"))
    );

    // HostToContainer propagation: a mount made on the host inside the volume later shows
    // up in the container (the kubelet root is rshared, the container mount rslave). It
    // stays mounted for the teardown to remove.
    let inner = pod_dir.join("volumes/kubernetes.io~empty-dir/prop/inner");
    std::fs::create_dir(&inner).expect("mkdir inner");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&inner)
        .status()
        .expect("run mount");
    assert!(mounted.success());
    wait_log_line(&pod, "writer", 0, "propagated");

    // hostPath File on a missing path: the pod waits in ContainerCreating, and the kubelet
    // reports upstream's FailedMount message.
    let pods = cluster.wait_for("nofile listed", Duration::from_secs(30), |pods| {
        find_pod(pods, &nofile).is_some()
    });
    let stuck = find_pod(&pods, &nofile).cloned().unwrap_or_default();
    assert_eq!(pod_phase(&stuck), "Pending");
    assert_eq!(
        container_status(&stuck, "main")["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    let expected = format!(
        "MountVolume.SetUp failed for volume \"f\" : hostPath type check failed: {} is not a file",
        missing.display()
    );
    poll("the FailedMount message in the kubelet log", || {
        cluster.node.log().contains(&expected)
    });
    assert!(!missing.exists());

    // Removal: containers, then volumes (tmpfs unmounted), then the pod directories.
    cluster.remove_manifest("vols.yaml");
    cluster.remove_manifest("nofile.yaml");
    cluster.wait_gone(&vols);
    cluster.wait_gone(&nofile);
    poll("pod directories removed", || {
        std::fs::read_dir(cluster.node.dir().join("kubelet/pods"))
            .map(|mut d| d.next().is_none())
            .unwrap_or(true)
    });
    let mounts = host_mount_points();
    for dir in [&mem_dir, &info_dir, &inner] {
        assert!(!mounts.contains(dir), "{} still mounted", dir.display());
    }
    assert!(
        host_dir.join("out.txt").is_file(),
        "hostPath content is kept"
    );
    cluster.assert_no_leftovers();
}
