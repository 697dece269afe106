//! Shared pieces of the end-to-end tests: a registry with the busybox test image and a node;
//! [`cri`]: the CRI suite's `cri_cases!` (one test per runtime flavor).

#![allow(dead_code, unused_imports, unused_macros)] // each test binary uses its own subset

pub mod apiserver;
pub mod cri;
pub mod embedded;
pub(crate) use cri::cri_cases;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use skiff_testkit::{Node, NodeOptions, NodeRuntime, Registry};

/// The runtime under a [`Cluster`]'s kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// The runtime embedded in `skiff kubelet`.
    Embedded,
    /// Debian's containerd 1.6 (`--container-runtime-endpoint`).
    Containerd,
}

/// A registry holding the busybox test image, and a `skiff kubelet` using it.
pub struct Cluster {
    // Field order matters: the node is dropped (and cleaned up) before the registry.
    pub node: Node,
    pub registry: Registry,
    /// The pushed test image, `127.0.0.1:PORT/skiff/busybox:test`.
    pub image: String,
    /// The runtime under the kubelet.
    pub runtime: Runtime,
}

impl Cluster {
    /// A cluster on the embedded runtime.
    pub fn start() -> Cluster {
        Cluster::start_on(Runtime::Embedded)
    }

    /// A cluster whose kubelet drives `runtime`.
    pub fn start_on(runtime: Runtime) -> Cluster {
        Cluster::start_with(runtime, Vec::new())
    }

    /// A cluster whose kubelet drives `runtime` and gets `extra_args` after the flags
    /// the node sets.
    pub fn start_with(runtime: Runtime, extra_args: Vec<String>) -> Cluster {
        let registry = Registry::start().expect("start the test registry");
        let busybox = skiff_testkit::busybox().expect("build the busybox image");
        let image = skiff_testkit::push(registry.host(), "skiff/busybox", "test", &busybox)
            .expect("push the busybox image");
        let node = Node::start(NodeOptions {
            skiff_bin: PathBuf::from(env!("CARGO_BIN_EXE_skiff")),
            extra_args,
            runtime: match runtime {
                Runtime::Embedded => NodeRuntime::Embedded,
                Runtime::Containerd => NodeRuntime::Containerd {
                    registry: registry.host().to_string(),
                },
            },
        })
        .unwrap_or_else(|e| panic!("start skiff kubelet on {runtime:?}: {e:#}"));
        Cluster {
            node,
            registry,
            image,
            runtime,
        }
    }

    /// The name of the static pod from a manifest whose pod is named `name`.
    pub fn static_name(&self, name: &str) -> String {
        format!("{name}-{}", self.node.node_name())
    }

    pub fn write_manifest(&self, file: &str, contents: &str) {
        self.node
            .write_manifest(file, contents)
            .expect("write the manifest");
    }

    pub fn remove_manifest(&self, file: &str) {
        self.node
            .remove_manifest(file)
            .expect("remove the manifest");
    }

    /// Polls `/pods` until `ready` holds; fails the test with the kubelet's log otherwise.
    pub fn wait_for(
        &self,
        desc: &str,
        timeout: Duration,
        ready: impl FnMut(&Value) -> bool,
    ) -> Value {
        self.node
            .wait_for(desc, timeout, ready)
            .unwrap_or_else(|err| panic!("{err:#}"))
    }

    /// Waits until the pod is Running with all containers ready, and returns it.
    pub fn wait_running(&self, name: &str) -> Value {
        let pods = self.wait_for(
            &format!("{name} Running"),
            Duration::from_secs(90),
            |pods| {
                find_pod(pods, name).is_some_and(|p| {
                    pod_phase(p) == "Running"
                        && p["status"]["containerStatuses"]
                            .as_array()
                            .is_some_and(|cs| cs.iter().all(|c| c["state"]["running"].is_object()))
                })
            },
        );
        find_pod(&pods, name).cloned().unwrap_or_default()
    }

    /// Waits until the pod is no longer listed.
    pub fn wait_gone(&self, name: &str) {
        self.wait_for(&format!("{name} gone"), Duration::from_secs(90), |pods| {
            find_pod(pods, name).is_none()
        });
    }

    /// Polls the kubelet log (up to 10 s) until it contains `needle`; fails the test with
    /// the log otherwise.
    pub fn wait_log(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.node.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the kubelet log never said {needle:?}:\n{}",
                self.node.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Fails the test if the node's pods left anything behind.
    pub fn assert_no_leftovers(&self) {
        // Teardown is asynchronous to the pod leaving /pods: allow it a few seconds.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = self.node.leftovers();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "left behind:\n{}\n--- kubelet log ---\n{}",
                left.join("\n"),
                self.node.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// The pod named `name` in a PodList.
pub fn find_pod<'a>(pods: &'a Value, name: &str) -> Option<&'a Value> {
    pods["items"]
        .as_array()?
        .iter()
        .find(|p| p["metadata"]["name"] == name)
}

pub fn pod_phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

pub fn pod_ip(pod: &Value) -> String {
    let ip = pod["status"]["podIP"].as_str().unwrap_or("");
    assert!(!ip.is_empty(), "pod has no IP: {pod}");
    ip.to_string()
}

/// The status of container `name` (Null when absent).
pub fn container_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or(&Value::Null)
}

/// A pod whose container serves `body` at /index.html on port 8080.
pub fn httpd_pod(name: &str, image: &str, body: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: httpd
    image: {image}
    command: ["sh", "-c", "mkdir -p /srv && echo '{body}' > /srv/index.html && echo serving && exec httpd -f -p 8080 -h /srv"]
    ports: [{{containerPort: 8080}}]
"#
    )
}

/// The status of init container `name` (Null when absent).
pub fn init_container_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The pod condition of type `type_` (Null when absent).
pub fn pod_condition<'a>(pod: &'a Value, type_: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// An RFC 3339 timestamp field of the API (panics on anything else).
pub fn timestamp(value: &Value) -> chrono::DateTime<chrono::FixedOffset> {
    value
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .unwrap_or_else(|| panic!("not a timestamp: {value}"))
}

/// A static pod `name` (grace period 1 s) with one container `main` running `image`:
/// `extra_spec` are YAML lines at the spec's indentation, `container` lines at the
/// container's (both may be empty; each line ends with a newline).
pub fn single_container_pod(name: &str, image: &str, extra_spec: &str, container: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
{extra_spec}  containers:
  - name: main
    image: {image}
{container}"#
    )
}

/// A long-running pod that prints `VERSION=<version>` first.
pub fn sleep_pod(name: &str, image: &str, version: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: {image}
    env: [{{name: VERSION, value: "{version}"}}]
    command: ["sh", "-c", "echo VERSION=$VERSION; exec sleep 3600"]
"#
    )
}

/// GET http://ip:port/path from the host (the host reaches pods through the CNI bridge).
pub fn http_get(ip: &str, port: u16, path: &str) -> String {
    let url = format!("http://{ip}:{port}{path}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match ureq::get(&url)
            .call()
            .and_then(|mut r| r.body_mut().read_to_string())
        {
            Ok(body) => return body,
            Err(err) if Instant::now() > deadline => panic!("GET {url}: {err}"),
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// `/var/log/pods/<ns>_<name>_<uid>/<container>/<restart>.log`
pub fn container_log_path(pod: &Value, container: &str, restart: u32) -> PathBuf {
    let meta = &pod["metadata"];
    let ns = meta["namespace"].as_str().unwrap_or("default");
    let name = meta["name"].as_str().unwrap_or_default();
    let uid = meta["uid"].as_str().unwrap_or_default();
    PathBuf::from(format!(
        "/var/log/pods/{ns}_{name}_{uid}/{container}/{restart}.log"
    ))
}

pub fn read_container_log(pod: &Value, container: &str, restart: u32) -> String {
    std::fs::read_to_string(container_log_path(pod, container, restart)).unwrap_or_default()
}

/// Waits until the container's CRI log holds `needle`, and returns the whole log.
pub fn wait_log_line(pod: &Value, container: &str, restart: u32, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = read_container_log(pod, container, restart);
        if log.contains(needle) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "{} never contained {needle:?}; it holds:\n{log}",
            container_log_path(pod, container, restart).display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `<RFC 3339 timestamp> <stdout|stderr> <F|P> <text>` (the CRI log format).
pub fn assert_cri_log_line(line: &str) {
    let mut fields = line.splitn(4, ' ');
    let (time, stream, tag) = (fields.next(), fields.next(), fields.next());
    let ok = time.is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok())
        && matches!(stream, Some("stdout" | "stderr"))
        && matches!(tag, Some("F" | "P"));
    assert!(ok, "not a CRI log line: {line:?}");
}

/// Runs `call` against the CRI v1 gRPC socket at `socket`, as crictl would connect.
pub fn with_cri<T, F: std::future::Future<Output = T>>(
    socket: &std::path::Path,
    call: impl FnOnce(skiff_kubelet::cri::Remote) -> F,
) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let endpoint = format!("unix://{}", socket.display());
        let cri = skiff_kubelet::cri::Remote::connect(&endpoint)
            .await
            .expect("connect to the CRI socket");
        call(cri).await
    })
}

/// ListPodSandbox over the CRI socket at `socket`.
pub fn cri_pod_sandboxes(socket: &std::path::Path) -> Vec<k8s_cri::v1::PodSandbox> {
    use skiff_kubelet::cri::Cri;
    with_cri(socket, |cri| async move {
        cri.list_pod_sandbox(Default::default())
            .await
            .expect("ListPodSandbox")
            .items
    })
}

/// ListContainers over the CRI socket at `socket`.
pub fn cri_containers(socket: &std::path::Path) -> Vec<k8s_cri::v1::Container> {
    use skiff_kubelet::cri::Cri;
    with_cri(socket, |cri| async move {
        cri.list_containers(Default::default())
            .await
            .expect("ListContainers")
            .containers
    })
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One test per runtime for each case `fn case(cluster: Cluster)`: `case::embedded` and
/// `case::containerd`, each on a fresh [`Cluster`]. A case that cannot work on containerd
/// is listed as `case => embedded_only("reason")`: its containerd test is generated
/// `#[ignore = "reason"]`.
///
/// ```ignore
/// common::node_cases! {
///     serves_http,
///     runtime_socket => embedded_only("the embedded runtime's own socket"),
/// }
/// fn serves_http(cluster: Cluster) { ... }
/// ```
macro_rules! node_cases {
    ($($case:ident $(=> embedded_only($reason:literal))?),* $(,)?) => {
        $(
            mod $case {
                #[test]
                fn embedded() {
                    super::$case(crate::common::Cluster::start_on(
                        crate::common::Runtime::Embedded,
                    ));
                }

                $(#[ignore = $reason])?
                #[test]
                fn containerd() {
                    super::$case(crate::common::Cluster::start_on(
                        crate::common::Runtime::Containerd,
                    ));
                }
            }
        )*
    };
}
pub(crate) use node_cases;
