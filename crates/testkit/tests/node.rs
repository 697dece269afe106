//! The Node harness against a stand-in kubelet (busybox httpd serving /healthz and
//! /pods), so the harness is tested without the real `skiff` binary.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use skiff_testkit::{Node, NodeOptions, NodeRuntime};

/// A script taking the kubelet's flags: it checks them, logs a line and serves
/// `<root-dir>/www` (`healthz`, `pods`) on the read-only port.
const FAKE_KUBELET: &str = r#"#!/bin/sh
[ "$1" = kubelet ] || exit 2
shift
while [ $# -gt 0 ]; do
  case "$1" in
    --root-dir) root="$2" ;;
    --read-only-port) port="$2" ;;
    --eviction-hard=*) shift; continue ;;
    --pod-manifest-path|--runtime-root|--runtime-state|--hostname-override|--cni-conf-dir|--pod-cidr|--file-check-frequency|--port|--cgroup-root) ;;
    *) echo "unexpected flag $1"; exit 2 ;;
  esac
  shift 2
done
mkdir -p "$root/www"
echo ok > "$root/www/healthz"
echo '{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}' > "$root/www/pods"
echo "fake kubelet serving on $port"
exec /bin/busybox httpd -f -p "127.0.0.1:$port" -h "$root/www"
"#;

fn fake_kubelet() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skiff");
    std::fs::write(&path, FAKE_KUBELET).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, path)
}

fn start() -> (tempfile::TempDir, Node) {
    let (bin_dir, skiff_bin) = fake_kubelet();
    let node = Node::start(NodeOptions {
        skiff_bin,
        extra_args: Vec::new(),
        runtime: NodeRuntime::Embedded,
    })
    .unwrap();
    (bin_dir, node)
}

#[test]
fn node_starts_serves_pods_and_restarts() {
    let (_bin, mut node) = start();
    let dir = node.dir().to_path_buf();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("sk-") && name.len() == 11, "{name}");
    assert_eq!(node.node_name(), format!("node-{}", &name[3..]));
    assert!(node.bridge().len() <= 15);

    let conflist: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cni/10-test.conflist")).unwrap()).unwrap();
    assert_eq!(
        conflist["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
        node.pod_cidr()
    );
    assert_eq!(conflist["plugins"][0]["bridge"], node.bridge());
    assert!(node.pod_cidr().starts_with("10.2") && node.pod_cidr().ends_with(".0/24"));

    assert_eq!(node.pods().unwrap()["items"], serde_json::json!([]));
    assert!(node.pod("web").is_none());
    node.write_manifest("web.yaml", "kind: Pod\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("manifests/web.yaml")).unwrap(),
        "kind: Pod\n"
    );
    assert_eq!(std::fs::read_dir(dir.join("manifests")).unwrap().count(), 1);
    node.remove_manifest("web.yaml").unwrap();
    node.remove_manifest("web.yaml").unwrap();

    let err = node
        .wait_for("a pod that never comes", Duration::from_millis(300), |l| {
            l["items"].as_array().is_some_and(|i| !i.is_empty())
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a pod that never comes") && err.contains("PodList"),
        "{err}"
    );
    assert!(err.contains("fake kubelet serving"), "{err}");

    let first = node.pid().unwrap();
    node.kill9().unwrap();
    assert!(node.pods().is_err());
    node.restart().unwrap();
    assert_ne!(node.pid(), Some(first));
    assert_eq!(node.log().matches("fake kubelet serving").count(), 2);
    node.wait_clean(Duration::from_secs(1)).unwrap();

    drop(node);
    assert!(!dir.exists());
}

#[test]
fn leftovers_are_reported_and_cleaned_on_drop() {
    let (_bin, node) = start();
    let dir = node.dir().to_path_buf();
    let mnt = dir.join("st/mnt");
    std::fs::create_dir(&mnt).unwrap();
    mount_tmpfs(&mnt);
    let ipam = dir
        .join("ipam")
        .join(format!("sk-{}", &node.node_name()[5..]));
    std::fs::create_dir_all(&ipam).unwrap();
    std::fs::write(ipam.join("lock"), "").unwrap();
    std::fs::write(ipam.join("10.0.0.2"), "abc\neth0").unwrap();
    // Like a shim: a process whose command line mentions the node directory. It sleeps in
    // 1 s steps with its output detached, so that once it is killed no orphaned `sleep`
    // lingers or holds the test's output pipe open.
    let stray = Command::new("/bin/busybox")
        .args([
            "sh",
            "-c",
            "while :; do sleep 1; done",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // Like the bridge plugin's ipMasq rule: a per-pod chain, jumped to with a comment.
    let hex = &node.node_name()[5..];
    let chain = format!("CNI-{hex}");
    let comment = format!("name: \"sk-{hex}\" id: \"abc\"");
    iptables(&["-N", &chain]);
    iptables(&["-A", &chain, "-j", "RETURN"]);
    iptables(&[
        "-A",
        "POSTROUTING",
        "-s",
        "10.0.0.2/32",
        "-m",
        "comment",
        "--comment",
        &comment,
        "-j",
        &chain,
    ]);

    let found = node.leftovers();
    let has = |prefix: &str| found.iter().any(|l| l.starts_with(prefix));
    assert!(has(&format!("mount {}", mnt.display())), "{found:?}");
    assert!(
        has("ip reservation sk-") && found.iter().any(|l| l.contains("10.0.0.2 (abc eth0)")),
        "{found:?}"
    );
    assert!(has(&format!("process {}", stray.id())), "{found:?}");
    assert!(
        has("iptables -t nat -A POSTROUTING -s 10.0.0.2/32"),
        "{found:?}"
    );
    assert_eq!(found.len(), 4, "{found:?}");
    let err = node
        .wait_clean(Duration::from_millis(300))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("still not clean") && err.contains("10.0.0.2"),
        "{err}"
    );

    drop(node);
    assert!(!dir.exists());
    assert!(!is_mounted(&mnt));
    let nat = Command::new("iptables")
        .args(["-w", "-t", "nat", "-S"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&nat.stdout).contains(&chain),
        "iptables rules left"
    );
    let stray_pid = stray.id();
    let mut stray = stray;
    assert!(
        stray.wait().is_ok(),
        "stray {stray_pid} reaped after SIGKILL"
    );
}

fn mount_tmpfs(target: &Path) {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(target)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn is_mounted(target: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(target.to_str().unwrap()))
}

fn iptables(args: &[&str]) {
    let ok = Command::new("iptables")
        .args(["-w", "-t", "nat"])
        .args(args)
        .status()
        .unwrap();
    assert!(ok.success(), "iptables {args:?}");
}
