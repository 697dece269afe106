//! End-to-end: the kubelet's HTTP API on a real node (issue 4: stats, metrics and the
//! kubelet API), on the embedded runtime and on containerd 1.6. One node, two static
//! pods: a logger (logs, follow, exec, attach, restart, previous) and a busybox httpd
//! (port-forward). The HTTPS port is checked with its self-signed certificate (curl, and
//! rustls in [`TlsTunnel`] for the SPDY and WebSocket clients). Run as root.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Cluster, container_status};
use serde_json::Value;
use skiff_testkit::TlsTunnel;
use skiff_testkit::stream::{Session, spdy, websocket};

/// A container that logs three lines, a fourth once `/tmp/go` exists, and exits 3 once
/// `/tmp/exit` exists.
fn logger_pod(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: logger}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {image}
    command: ["sh", "-c", "echo one; echo two; echo three; until [ -f /tmp/go ]; do sleep 0.2; done; echo later; until [ -f /tmp/exit ]; do sleep 0.2; done; exit 3"]
"#
    )
}

/// The node's HTTPS API through curl, verifying the self-signed certificate.
struct Https {
    base: String,
    ca: PathBuf,
}

impl Https {
    fn new(cluster: &Cluster) -> Https {
        Https {
            base: format!("https://127.0.0.1:{}", cluster.node.main_port()),
            ca: cluster.node.dir().join("kubelet/pki/kubelet.crt"),
        }
    }

    fn curl(&self, path: &str) -> Command {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--cacert"])
            .arg(&self.ca)
            .arg(format!("{}{path}", self.base));
        cmd
    }

    /// GET `path`: (HTTP status, body).
    fn get(&self, path: &str) -> (u16, String) {
        let out = self
            .curl(path)
            .args(["-w", "\n%{http_code}"])
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "curl {path}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (body, code) = text.rsplit_once('\n').unwrap_or_default();
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }

    /// GET `path`, expecting 200.
    fn ok(&self, path: &str) -> String {
        let (code, body) = self.get(path);
        assert_eq!(code, 200, "GET {path}: {body}");
        body
    }

    /// A streaming GET: lines arrive on the receiver as curl reads them.
    fn stream(&self, path: &str) -> (Child, mpsc::Receiver<String>) {
        let mut child = self
            .curl(path)
            .arg("-N")
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn curl");
        let stdout = child.stdout.take().expect("curl stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        (child, rx)
    }
}

/// GET `http://127.0.0.1:<read-only port><path>`.
fn read_only(cluster: &Cluster, path: &str) -> String {
    let url = format!("http://127.0.0.1:{}{path}", cluster.node.port());
    ureq::get(&url)
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// Waits for `line` on a streaming response.
fn expect_line(lines: &mpsc::Receiver<String>, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(got) if got == line => return,
            Ok(_) => {}
            Err(e) => panic!("{line:?} never arrived on the followed logs: {e}"),
        }
    }
}

/// Polls `check` until it holds (30 s).
fn eventually(what: &str, mut check: impl FnMut() -> Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = None;
    while Instant::now() < deadline {
        match check() {
            None => return,
            Some(state) => last = Some(state),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!(
        "timed out waiting for {what}; last: {}",
        last.unwrap_or_default()
    );
}

/// Percent-encodes everything but letters, digits and `-._~`.
fn query_escape(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

common::node_cases!(kubelet_api_logs_exec_port_forward_stats_and_metrics);

fn kubelet_api_logs_exec_port_forward_stats_and_metrics(cluster: Cluster) {
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    cluster.write_manifest("logger.yaml", &logger_pod(&cluster.image));
    cluster.write_manifest(
        "web.yaml",
        &common::httpd_pod("web", &cluster.image, "through the kubelet"),
    );
    let logger = cluster.static_name("logger");
    let web = cluster.static_name("web");
    cluster.wait_running(&logger);
    cluster.wait_running(&web);
    let https = Https::new(&cluster);
    let logs = format!("/containerLogs/default/{logger}/main");

    // HTTPS /pods with the self-signed certificate, and /runningpods/ from the runtime.
    let pods: Value = serde_json::from_str(&https.ok("/pods")).expect("PodList");
    assert_eq!(pods["kind"], "PodList");
    assert_eq!(pods["items"].as_array().map(Vec::len), Some(2), "{pods}");
    let running: Value = serde_json::from_str(&https.ok("/runningpods/")).expect("PodList");
    let names: Vec<_> = running["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"].clone(),
                p["spec"]["containers"][0]["name"].clone(),
            )
        })
        .collect();
    assert!(
        names.contains(&(logger.clone().into(), "main".into())),
        "{running}"
    );
    assert!(
        names.contains(&(web.clone().into(), "httpd".into())),
        "{running}"
    );

    // Logs: whole, tailLines, timestamps, limitBytes; errors as upstream.
    eventually("the logger's three lines", || {
        let body = https.ok(&logs);
        (body != "one\ntwo\nthree\n").then_some(body)
    });
    assert_eq!(https.ok(&format!("{logs}?tailLines=2")), "two\nthree\n");
    assert_eq!(https.ok(&format!("{logs}?limitBytes=6")), "one\ntw");
    let stamped = https.ok(&format!("{logs}?timestamps=true&tailLines=1"));
    let (stamp, text) = stamped
        .trim_end()
        .split_once(' ')
        .expect("timestamp prefix");
    assert!(
        chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
        "{stamped}"
    );
    assert_eq!(text, "three");
    let (code, body) = https.get(&format!("{logs}?previous=true"));
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("previous terminated container \"main\""),
        "{body}"
    );
    assert_eq!(
        https
            .get(&format!("/containerLogs/default/{logger}/nope"))
            .0,
        404
    );
    assert_eq!(https.get(&format!("{logs}?tailLines=-1")).0, 422);

    // Follow: a line logged later (after an exec through the kubelet) arrives.
    let (mut follow, lines) = https.stream(&format!("{logs}?follow=true"));
    expect_line(&lines, "three");
    let tunnel = rt
        .block_on(TlsTunnel::start(
            ([127, 0, 0, 1], cluster.node.main_port()).into(),
            "localhost",
            &https.ca,
        ))
        .expect("TLS tunnel");
    let streams = Session {
        stdout: true,
        stderr: true,
        ..Session::default()
    };
    let exec = |command: &str| {
        format!(
            "{}/exec/default/{logger}/main?command=sh&command=-c&command={}&output=1&error=1",
            tunnel.base_url(),
            query_escape(command)
        )
    };
    let spdy_out = rt
        .block_on(spdy::remote_command(
            &exec("touch /tmp/go; echo spdy-ok; echo to-stderr >&2"),
            "v4.channel.k8s.io",
            &streams,
        ))
        .expect("exec over SPDY through the kubelet");
    assert_eq!(spdy_out.stdout_text(), "spdy-ok\n", "{spdy_out:?}");
    assert_eq!(String::from_utf8_lossy(&spdy_out.stderr), "to-stderr\n");
    assert_eq!(spdy_out.exit_code(), Some(0), "{spdy_out:?}");
    expect_line(&lines, "later");

    // Attach: what the container's main process writes from now on arrives (execs
    // write to its stdout; each takes long enough for the attach to be connected).
    let attach_url = format!(
        "{}/attach/default/{logger}/main?output=1&error=1",
        tunnel.base_url()
    );
    let attach_streams = streams.clone();
    let attach = rt.spawn(async move {
        spdy::remote_command(&attach_url, "v4.channel.k8s.io", &attach_streams).await
    });
    for _ in 0..3 {
        let tick = rt
            .block_on(spdy::remote_command(
                &exec("echo tick > /proc/1/fd/1"),
                "v4.channel.k8s.io",
                &streams,
            ))
            .expect("exec through the kubelet");
        assert_eq!(tick.exit_code(), Some(0), "{tick:?}");
    }

    // Exec over WebSocket makes the container exit: the attach and the follow end, it
    // restarts, and `previous` shows the first instance's logs.
    let ws_out = rt
        .block_on(websocket::remote_command(
            &exec("echo ws-ok; touch /tmp/exit"),
            "v4.channel.k8s.io",
            &streams,
        ))
        .expect("exec over WebSocket through the kubelet");
    assert_eq!(ws_out.stdout_text(), "ws-ok\n", "{ws_out:?}");
    let attached = rt
        .block_on(attach)
        .expect("attach task")
        .expect("attach through the kubelet");
    assert!(attached.stdout_text().contains("tick\n"), "{attached:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while follow.try_wait().expect("curl status").is_none() {
        assert!(
            Instant::now() < deadline,
            "follow did not end when the container exited"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.wait_for("logger restarted", Duration::from_secs(60), |pods| {
        common::find_pod(pods, &logger).is_some_and(|p| {
            let c = container_status(p, "main");
            c["restartCount"] == 1 && c["state"]["running"].is_object()
        })
    });
    assert_eq!(
        https.ok(&format!("{logs}?previous=true")),
        "one\ntwo\nthree\nlater\ntick\ntick\ntick\n"
    );
    eventually("the new instance's logs", || {
        let body = https.ok(&logs);
        (body != "one\ntwo\nthree\n").then_some(body)
    });

    // Port-forward through the kubelet reaches httpd in the pod.
    let forward_url = format!("{}/portForward/default/{web}", tunnel.base_url());
    let (reply, error) = rt
        .block_on(async {
            let mut session = spdy::PortForward::connect(&forward_url).await?;
            session
                .open(8080)
                .await?
                .exchange(b"GET /index.html HTTP/1.0\r\n\r\n")
                .await
        })
        .expect("port-forward through the kubelet");
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.contains("through the kubelet"), "{reply} {error}");

    // /logs/ lists the node's log directory.
    let listing = https.ok("/logs/");
    assert!(listing.contains("<a href=\"pods/\">pods/</a>"), "{listing}");
    assert!(
        https
            .ok("/logs/pods/")
            .contains(&format!("default_{logger}_"))
    );

    // Summary API on the read-only port: the node and both pods with usage figures.
    let summary: Value =
        serde_json::from_str(&read_only(&cluster, "/stats/summary")).expect("Summary");
    let node = &summary["node"];
    assert_eq!(node["nodeName"], cluster.node.node_name());
    assert!(
        node["cpu"]["usageCoreNanoSeconds"].as_u64() > Some(0),
        "{node}"
    );
    assert!(
        node["memory"]["workingSetBytes"].as_u64() > Some(0),
        "{node}"
    );
    assert!(node["fs"]["capacityBytes"].as_u64() > Some(0), "{node}");
    // Usage is the runtime's (containerd 1.6 reports 0 until its first usage scan).
    assert!(
        node["runtime"]["imageFs"]["capacityBytes"].as_u64() > Some(0),
        "{node}"
    );
    assert!(node["runtime"]["imageFs"]["usedBytes"].is_u64(), "{node}");
    assert!(node["rlimit"]["maxpid"].as_i64() > Some(0), "{node}");
    let system = &node["systemContainers"][0];
    assert_eq!(system["name"], "pods", "{node}");
    assert!(
        system["memory"]["workingSetBytes"].as_u64() > Some(0),
        "{node}"
    );
    let pod = summary["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["podRef"]["name"] == web.as_str())
        .unwrap_or_else(|| panic!("{web} not in the summary: {summary}"));
    assert_eq!(pod["podRef"]["namespace"], "default");
    let container = &pod["containers"][0];
    assert_eq!(container["name"], "httpd");
    assert!(
        container["memory"]["workingSetBytes"].as_u64() > Some(0),
        "{pod}"
    );
    assert!(pod["memory"]["workingSetBytes"].as_u64() > Some(0), "{pod}");
    assert!(container["logs"]["usedBytes"].as_u64() > Some(0), "{pod}");
    assert!(pod["ephemeral-storage"].is_object(), "{pod}");

    // Metrics.
    let metrics = read_only(&cluster, "/metrics");
    for needle in [
        "kubelet_running_pods 2".to_owned(),
        "kubelet_running_containers{container_state=\"running\"} 2".to_owned(),
        "# TYPE kubelet_pleg_relist_duration_seconds histogram".to_owned(),
        "kubelet_pleg_relist_interval_seconds_count".to_owned(),
        "kubelet_pod_start_duration_seconds_count".to_owned(),
        "kubelet_pod_worker_duration_seconds_count{operation_type=\"create\"}".to_owned(),
        "kubelet_runtime_operations_total{operation_type=\"run_podsandbox\"}".to_owned(),
        "kubelet_started_containers_total".to_owned(),
        format!(
            "kubelet_node_name{{node=\"{}\"}} 1",
            cluster.node.node_name()
        ),
    ] {
        assert!(
            metrics.contains(&needle),
            "no {needle:?} in /metrics:\n{metrics}"
        );
    }
    let resource = https.ok("/metrics/resource");
    for needle in [
        "node_cpu_usage_seconds_total ",
        "node_memory_working_set_bytes ",
        &format!(
            "container_memory_working_set_bytes{{container=\"httpd\",namespace=\"default\",pod=\"{web}\"}}"
        ),
        &format!("pod_cpu_usage_seconds_total{{namespace=\"default\",pod=\"{web}\"}}"),
        "container_start_time_seconds{",
        "scrape_error 0",
    ] {
        assert!(
            resource.contains(needle),
            "no {needle:?} in /metrics/resource:\n{resource}"
        );
    }

    drop(tunnel);
    cluster.remove_manifest("logger.yaml");
    cluster.remove_manifest("web.yaml");
    cluster.wait_gone(&logger);
    cluster.wait_gone(&web);
    cluster.assert_no_leftovers();
}

/// Container log rotation (the container log manager): a pod writing numbered lines with
/// `--container-log-max-size 16Ki --container-log-max-files 4` gets its log rotated and
/// gzipped (all rotated files but the newest), never more than four files on disk, and
/// `/containerLogs` reads across the rotated files without losing a line.
#[test]
fn container_logs_rotate_and_read_across_rotation() {
    let cluster = Cluster::start_with(
        common::Runtime::Embedded,
        [
            "--container-log-max-size",
            "16Ki",
            "--container-log-max-files",
            "4",
        ]
        .map(String::from)
        .to_vec(),
    );
    let noisy = common::single_container_pod(
        "noisy",
        &cluster.image,
        "",
        "    command: [\"sh\", \"-c\", \"i=0; while true; do echo \\\"line $i ................................................................\\\"; i=$((i+1)); usleep 2000; done\"]\n",
    );
    cluster.write_manifest("noisy.yaml", &noisy);
    let name = cluster.static_name("noisy");
    let pod = cluster.wait_running(&name);
    let dir = common::container_log_path(&pod, "main", 0)
        .parent()
        .expect("log directory")
        .to_owned();
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    // Two rotations: one rotated file compressed, the newest one not.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let names = files();
        assert!(
            names.len() <= 4,
            "more than containerLogMaxFiles: {names:?}"
        );
        if names.iter().any(|n| n.ends_with(".gz")) {
            assert!(names.contains(&"0.log".to_owned()), "{names:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no compressed rotated log: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Every line from the oldest rotated file to the live one, none missing.
    let https = Https::new(&cluster);
    let body = https.ok(&format!("/containerLogs/default/{name}/main"));
    let numbers: Vec<u64> = body
        .lines()
        .filter_map(|l| l.strip_prefix("line ")?.split(' ').next()?.parse().ok())
        .collect();
    let live = std::fs::read_to_string(dir.join("0.log")).unwrap_or_default();
    let first_live: u64 = live
        .lines()
        .find_map(|l| l.split_once(" F line ")?.1.split(' ').next()?.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(
        numbers.first().is_some_and(|first| *first < first_live),
        "nothing read from the rotated files (first live line {first_live}): {:?}",
        numbers.first()
    );
    for pair in numbers.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "a line is missing across the rotation"
        );
    }
    // tailLines counts lines across the files too (lines written while the response is
    // read come on top, as upstream's reader goes on to the end of the file).
    let tail = https.ok(&format!("/containerLogs/default/{name}/main?tailLines=200"));
    let numbers: Vec<u64> = tail
        .lines()
        .filter_map(|l| l.strip_prefix("line ")?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        (200..260).contains(&numbers.len()),
        "{} lines",
        numbers.len()
    );
    for pair in numbers.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "a line is missing in the tail");
    }
    cluster.remove_manifest("noisy.yaml");
    cluster.wait_gone(&name);
}
