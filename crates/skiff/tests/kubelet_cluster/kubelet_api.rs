//! The kubelet API in a cluster: the main port refuses anonymous requests (401), accepts
//! client certificates of the cluster CA and service-account tokens (TokenReview), each
//! authorized by a SubjectAccessReview; and `kubectl logs`, `exec`, `cp`, `port-forward`
//! and `attach` reach a pod through the API server, which calls the kubelet with its
//! `apiserver-kubelet-client` certificate.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use crate::common::http_get;
use crate::joined::Joined;

/// How long a pod may take to start.
const WAIT: Duration = Duration::from_secs(90);

/// `curl` to the kubelet's main port with `args`; returns the status code and body.
fn curl(joined: &Joined, path: &str, args: &[&str]) -> (u16, String) {
    let url = format!(
        "https://127.0.0.1:{}{path}",
        joined.cluster.node.main_port()
    );
    let output = Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(args)
        .arg(&url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Anonymous requests get 401 `Unauthorized`; a client certificate of the cluster CA and
/// a service-account token are authenticated and allowed (Skiff's authorizer answers the
/// SubjectAccessReviews; a 403 needs RBAC, see the unit tests).
pub fn main_port_authenticates_and_authorizes(joined: &Joined) {
    for path in [
        "/pods",
        "/healthz",
        "/stats/summary",
        "/containerLogs/default/x/y",
    ] {
        assert_eq!(
            curl(joined, path, &[]),
            (401, "Unauthorized".to_owned()),
            "anonymous GET {path}"
        );
    }
    assert_eq!(
        curl(
            joined,
            "/pods",
            &["-H", "Authorization: Bearer not-a-token"]
        ),
        (401, "Unauthorized".to_owned())
    );

    let pki = joined.api.data_dir().join("pki");
    let (cert, key) = (pki.join("admin.crt"), pki.join("admin.key"));
    let cert_args = [
        "--cert",
        cert.to_str().unwrap_or_default(),
        "--key",
        key.to_str().unwrap_or_default(),
    ];
    let (code, body) = curl(joined, "/pods", &cert_args);
    assert_eq!(code, 200, "admin certificate: {body}");
    assert!(body.contains("\"PodList\""), "{body}");

    // No controller creates `default` service accounts yet: create one.
    joined.kubectl(&["create", "serviceaccount", "kubelet-api-reader"]);
    let token = joined.kubectl(&["create", "token", "kubelet-api-reader"]);
    let header = format!("Authorization: Bearer {}", token.trim());
    let (code, body) = curl(joined, "/healthz", &["-H", &header]);
    assert_eq!((code, body.as_str()), (200, "ok"), "service-account token");
    let (code, body) = curl(joined, "/stats/summary", &["-H", &header]);
    assert_eq!(code, 200, "{body}");
}

/// A background kubectl whose stdout lines arrive on a channel; killed on drop.
struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Background {
    fn spawn(joined: &Joined, args: &[&str]) -> Background {
        let mut child = joined
            .api
            .kubectl_command(33)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kubectl");
        let stdout = child.stdout.take().expect("kubectl stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Background { child, lines }
    }

    /// The first line `pred` accepts; fails after 30 s.
    fn wait_line(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(_) => {}
                Err(e) => panic!("no {what} from kubectl: {e}"),
            }
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kubectl logs`, `exec` (with stdin), `cp` both ways, `port-forward` and `attach` on a
/// busybox pod bound to the node.
pub fn kubectl_streams_through_the_api_server(joined: &Joined) {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tools", "namespace": "default"},
        "spec": {
            "nodeName": joined.node_name(),
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": joined.cluster.image,
                "stdin": true,
                "command": ["sh", "-c", "echo started; mkdir -p /srv && echo hello-pf > /srv/index.html && httpd -p 8080 -h /srv; while read line; do echo \"got: $line\"; done; sleep 3600"],
                "ports": [{"containerPort": 8080}],
            }],
        },
    });
    joined.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    joined.eventually("tools Running", WAIT, || {
        joined
            .get(&["pod", "tools"])
            .filter(|p| p["status"]["phase"] == "Running")
    });

    // logs
    joined.eventually("the first log line", Duration::from_secs(20), || {
        joined
            .kubectl(&["logs", "tools"])
            .contains("started")
            .then_some(())
    });

    // exec, with and without stdin
    assert_eq!(
        joined
            .kubectl(&["exec", "tools", "--", "sh", "-c", "echo $((6 * 7))"])
            .trim(),
        "42"
    );
    assert_eq!(
        joined
            .kubectl_stdin(&["exec", "-i", "tools", "--", "cat"], "piped-in\n")
            .trim(),
        "piped-in"
    );

    // cp in and out
    let dir = tempfile::tempdir().expect("tempdir");
    let local_in = dir.path().join("in.txt");
    std::fs::write(&local_in, "copied-in\n").expect("write in.txt");
    joined.kubectl(&[
        "cp",
        local_in.to_str().unwrap_or_default(),
        "default/tools:/tmp/in.txt",
    ]);
    assert_eq!(
        joined
            .kubectl(&["exec", "tools", "--", "cat", "/tmp/in.txt"])
            .trim(),
        "copied-in"
    );
    let local_out = dir.path().join("out.html");
    joined.kubectl(&[
        "cp",
        "default/tools:/srv/index.html",
        local_out.to_str().unwrap_or_default(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&local_out)
            .unwrap_or_default()
            .trim(),
        "hello-pf"
    );

    // port-forward to the pod's httpd
    let forward = Background::spawn(joined, &["port-forward", "pod/tools", ":8080"]);
    let line = forward.wait_line("Forwarding from", |l| {
        l.starts_with("Forwarding from 127.0.0.1:")
    });
    let port: u16 = line
        .trim_start_matches("Forwarding from 127.0.0.1:")
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    assert_eq!(
        http_get("127.0.0.1", port, "/index.html").trim(),
        "hello-pf"
    );
    drop(forward);

    // attach: a line written to kubectl's stdin reaches the container, whose answer
    // comes back.
    let mut attach = Background::spawn(joined, &["attach", "-i", "tools"]);
    let mut stdin = attach.child.stdin.take().expect("attach stdin");
    // The attach may start after the first line was written: repeat until answered.
    let answered = (0..20).any(|_| {
        let _ = writeln!(stdin, "ping");
        let _ = stdin.flush();
        matches!(attach.lines.recv_timeout(Duration::from_secs(2)), Ok(l) if l == "got: ping")
    });
    assert!(answered, "kubectl attach: no answer to ping");
    drop(stdin);
    drop(attach);

    joined.kubectl(&["delete", "pod", "tools", "--timeout=60s"]);
}
