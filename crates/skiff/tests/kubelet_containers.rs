//! Containers end to end on `skiff kubelet` with its embedded runtime: lifecycle hooks,
//! graceful termination (preStop, the image's StopSignal, SIGKILL after the grace
//! period), termination messages, env expansion and the downward API, command/args
//! versus the image's Entrypoint/Cmd, workingDir and hostPort.
//!
//! One node runs all the pods at once; each pod covers one area.

mod common;

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{Cluster, container_status, find_pod, read_container_log};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The pod with the gracefully stopped containers; `generation` is in their env, so
/// changing it restarts them all.
fn graceful_pod(uid: &str, image: &str, stop_image: &str, generation: u32) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: graceful, uid: {uid}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: hooks
    image: {image}
    env: [{{name: GEN, value: "{generation}"}}]
    command: ["sh", "-c", "trap 'echo TERM; exit 0' TERM; echo started; while true; do sleep 0.1; done"]
    lifecycle:
      postStart: {{exec: {{command: ["sh", "-c", "echo POSTSTART > /proc/1/fd/1"]}}}}
      preStop: {{exec: {{command: ["sh", "-c", "echo PRESTOP > /proc/1/fd/1; sleep 1"]}}}}
  - name: stopsignal
    image: {stop_image}
    env: [{{name: GEN, value: "{generation}"}}]
    command: ["sh", "-c", "trap 'echo USR1; exit 0' USR1; trap 'echo TERM; exit 0' TERM; echo started; while true; do sleep 0.1; done"]
  - name: stubborn
    image: {image}
    env: [{{name: GEN, value: "{generation}"}}]
    command: ["sh", "-c", "trap 'echo IGNORED-TERM' TERM; echo started; while true; do sleep 0.1; done"]
  - name: httphook
    image: {image}
    env: [{{name: GEN, value: "{generation}"}}]
    ports: [{{name: hook, containerPort: 8081}}]
    command: ["sh", "-c", "trap 'echo TERM; exit 0' TERM; (while true; do printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\n\\r\\n' | nc -l -p 8081; done) & echo started; while true; do sleep 0.1; done"]
    lifecycle:
      preStop: {{httpGet: {{path: /prestop, port: hook, httpHeaders: [{{name: X-Hook, value: pre-stop}}]}}}}
"#
    )
}

fn poststart_fail_pod(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: poststart-fail}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {image}
    command: ["sh", "-c", "trap 'exit 143' TERM; while true; do sleep 0.1; done"]
    lifecycle:
      postStart: {{exec: {{command: ["sh", "-c", "echo boom; exit 3"]}}}}
"#
    )
}

fn termination_message_pod(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: termmsg}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: file
    image: {image}
    command: ["sh", "-c", "printf 'bye from file' > /dev/termination-log"]
  - name: fallback
    image: {image}
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo line1; echo last-words; exit 3"]
  - name: partial
    image: {image}
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "printf DONE; exit 1"]
  - name: never-started
    image: {image}
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["/no/such/binary"]
  - name: custom
    image: {image}
    terminationMessagePath: /tmp/my-message
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "printf 'custom path' > /tmp/my-message; echo not-this; exit 4"]
"#
    )
}

fn env_pod(image: &str) -> String {
    let field = |name: &str, path: &str| {
        format!("    - {{name: {name}, valueFrom: {{fieldRef: {{fieldPath: \"{path}\"}}}}}}\n")
    };
    let resource = |name: &str, resource: &str, divisor: &str| {
        format!(
            "    - {{name: {name}, valueFrom: {{resourceFieldRef: {{resource: {resource}, divisor: \"{divisor}\"}}}}}}\n"
        )
    };
    let fields: String = [
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
        field("POD_UID", "metadata.uid"),
        field("APP_LABEL", "metadata.labels['app']"),
        field("NOTE", "metadata.annotations['note']"),
        field("NODE", "spec.nodeName"),
        field("SA", "spec.serviceAccountName"),
        field("HOST_IP", "status.hostIP"),
        field("POD_IP", "status.podIP"),
        field("POD_IPS", "status.podIPs"),
        resource("MEM_LIMIT", "limits.memory", "1Mi"),
        resource("CPU_REQUEST", "requests.cpu", "1m"),
        resource("CPU_LIMIT", "limits.cpu", "1"),
    ]
    .concat();
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: env
  labels: {{app: envtest}}
  annotations: {{note: hello}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  serviceAccountName: robot
  containers:
  - name: env
    image: {image}
    workingDir: /etc
    resources: {{requests: {{cpu: 250m, memory: 32Mi}}, limits: {{memory: 64Mi}}}}
    env:
    - {{name: A, value: x}}
    - {{name: B, value: "$(A)-y"}}
    - {{name: C, value: "$$(A)"}}
    - {{name: D, value: "$(MISSING)"}}
{fields}    command: ["sh", "-c"]
    args: ["env > /dev/termination-log; echo \"ARG=$(B) WD=$(pwd)\" >> /dev/termination-log"]
"#
    )
}

/// Containers of the image whose config is Entrypoint `/bin/echo entry`, Cmd `cmd`,
/// WorkingDir `/tmp`: each prints one line.
fn commands_pod(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: cmds}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - {{name: image-defaults, image: {image}}}
  - {{name: args-only, image: {image}, args: [arg1]}}
  - {{name: command-only, image: {image}, command: [/bin/echo, cmd-only]}}
  - {{name: both, image: {image}, command: [/bin/echo], args: [a, b]}}
  - {{name: workdir-image, image: {image}, command: [pwd]}}
  - {{name: workdir-spec, image: {image}, command: [pwd], workingDir: /var}}
"#
    )
}

fn host_port_pod(image: &str, host_port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: hostport}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: {image}
    command: ["sh", "-c", "mkdir -p /srv && echo hostport-ok > /srv/index.html && exec httpd -f -p 8080 -h /srv"]
    ports: [{{containerPort: 8080, hostPort: {host_port}}}]
"#
    )
}

/// `(timestamp, text)` of each line of a CRI log.
fn log_entries(log: &str) -> Vec<(DateTime<Utc>, String)> {
    log.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, ' ');
            let time = DateTime::parse_from_rfc3339(fields.next()?).ok()?;
            Some((time.with_timezone(&Utc), fields.nth(2)?.to_owned()))
        })
        .collect()
}

/// The time of the first log entry whose text is `text`.
fn entry_time(entries: &[(DateTime<Utc>, String)], text: &str, log: &str) -> DateTime<Utc> {
    entries
        .iter()
        .find(|(_, t)| t == text)
        .map(|(time, _)| *time)
        .unwrap_or_else(|| panic!("no {text:?} in the log:\n{log}"))
}

fn api_time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("not a time: {value}"))
}

fn terminated<'a>(pod: &'a Value, container: &str) -> &'a Value {
    &container_status(pod, container)["state"]["terminated"]
}

/// Waits until every container of pod `name` has terminated, and returns the pod.
fn wait_all_terminated(cluster: &Cluster, name: &str) -> Value {
    let pods = cluster.wait_for(&format!("{name} terminated"), TIMEOUT, |pods| {
        find_pod(pods, name).is_some_and(|p| {
            p["status"]["containerStatuses"]
                .as_array()
                .is_some_and(|cs| {
                    !cs.is_empty() && cs.iter().all(|c| c["state"]["terminated"].is_object())
                })
        })
    });
    find_pod(&pods, name).cloned().unwrap_or_default()
}

fn nat_rules_mentioning(port: u16) -> Vec<String> {
    let out = Command::new("iptables-save")
        .args(["-t", "nat"])
        .output()
        .expect("run iptables-save");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.contains(&format!("--dport {port} ")) || l.ends_with(&format!("--dport {port}"))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn container_lifecycle_env_commands_and_ports() {
    let cluster = Cluster::start();
    let custom = skiff_testkit::busybox_configured(json!({
        "Entrypoint": ["/bin/echo", "entry"],
        "Cmd": ["cmd"],
        "WorkingDir": "/tmp",
        "StopSignal": "SIGUSR1",
    }))
    .expect("build the configured image");
    let custom = skiff_testkit::push(cluster.registry.host(), "skiff/configured", "test", &custom)
        .expect("push the configured image");
    let image = cluster.image.clone();
    let node = cluster.node.node_name();
    let graceful_uid = format!("graceful-{node}");
    let host_port = common::free_port();

    cluster.write_manifest(
        "graceful.yaml",
        &graceful_pod(&graceful_uid, &image, &custom, 1),
    );
    cluster.write_manifest("poststart.yaml", &poststart_fail_pod(&image));
    cluster.write_manifest("termmsg.yaml", &termination_message_pod(&image));
    cluster.write_manifest("env.yaml", &env_pod(&image));
    cluster.write_manifest("cmds.yaml", &commands_pod(&custom));
    cluster.write_manifest("hostport.yaml", &host_port_pod(&image, host_port));

    // hostPort: reachable on the node's own (non-loopback) address through portmap.
    let hostport = cluster.wait_running(&cluster.static_name("hostport"));
    let host_ip = hostport["status"]["hostIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!host_ip.is_empty() && host_ip != "127.0.0.1", "{hostport}");
    assert_eq!(
        common::http_get(&host_ip, host_port, "/index.html").trim(),
        "hostport-ok"
    );
    assert!(
        !nat_rules_mentioning(host_port).is_empty(),
        "no portmap DNAT rule"
    );

    // Termination messages: the file, the log fallback on error, a custom path.
    let termmsg = wait_all_terminated(&cluster, &cluster.static_name("termmsg"));
    let file = terminated(&termmsg, "file");
    assert_eq!(
        (file["exitCode"].as_i64(), file["reason"].as_str()),
        (Some(0), Some("Completed"))
    );
    assert_eq!(file["message"], "bye from file", "{termmsg}");
    let fallback = terminated(&termmsg, "fallback");
    assert_eq!(
        (fallback["exitCode"].as_i64(), fallback["reason"].as_str()),
        (Some(3), Some("Error"))
    );
    assert_eq!(fallback["message"], "line1\nlast-words\n", "{termmsg}");
    // Output without a final newline comes back as written (the runtime logs it as a
    // partial line, as containerd does).
    assert_eq!(
        terminated(&termmsg, "partial")["message"],
        "DONE",
        "{termmsg}"
    );
    // A container that never ran has an empty log, not a missing one.
    let never = terminated(&termmsg, "never-started");
    assert_eq!(never["reason"], "StartError", "{termmsg}");
    assert!(
        !never["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Error on reading"),
        "{termmsg}"
    );
    let custom_path = terminated(&termmsg, "custom");
    assert_eq!(custom_path["exitCode"], 4);
    assert_eq!(custom_path["message"], "custom path", "{termmsg}");

    // Env: expansion, the downward API and resource values, seen by the container.
    let env = wait_all_terminated(&cluster, &cluster.static_name("env"));
    let state = terminated(&env, "env");
    assert_eq!(state["exitCode"], 0, "{env}");
    let message = state["message"].as_str().unwrap_or_default();
    let vars: Vec<&str> = message.lines().collect();
    let pod_ip = env["status"]["podIP"].as_str().unwrap_or_default();
    let expected = [
        "A=x".to_owned(),
        "B=x-y".to_owned(),
        "C=$(A)".to_owned(),
        "D=$(MISSING)".to_owned(),
        format!("POD_NAME={}", cluster.static_name("env")),
        "POD_NAMESPACE=default".to_owned(),
        format!(
            "POD_UID={}",
            env["metadata"]["uid"].as_str().unwrap_or_default()
        ),
        "APP_LABEL=envtest".to_owned(),
        "NOTE=hello".to_owned(),
        format!("NODE={node}"),
        "SA=robot".to_owned(),
        format!("HOST_IP={host_ip}"),
        format!("POD_IP={pod_ip}"),
        format!("POD_IPS={pod_ip}"),
        "MEM_LIMIT=64".to_owned(),
        "CPU_REQUEST=250".to_owned(),
        "ARG=x-y WD=/etc".to_owned(),
    ];
    for want in &expected {
        assert!(
            vars.contains(&want.as_str()),
            "{want:?} not in the environment:\n{message}"
        );
    }
    let cpus = vars
        .iter()
        .find_map(|v| v.strip_prefix("CPU_LIMIT="))
        .and_then(|v| v.parse::<u32>().ok());
    assert!(
        cpus.is_some_and(|n| n >= 1),
        "CPU_LIMIT is not the node's CPUs:\n{message}"
    );

    // command/args versus the image's Entrypoint/Cmd, and workingDir.
    let cmds = wait_all_terminated(&cluster, &cluster.static_name("cmds"));
    for (container, want) in [
        ("image-defaults", "entry cmd"),
        ("args-only", "entry arg1"),
        ("command-only", "cmd-only"),
        ("both", "a b"),
        ("workdir-image", "/tmp"),
        ("workdir-spec", "/var"),
    ] {
        assert_eq!(
            terminated(&cmds, container)["exitCode"],
            0,
            "{container}: {cmds}"
        );
        let log = read_container_log(&cmds, container, 0);
        let lines: Vec<String> = log_entries(&log).into_iter().map(|(_, t)| t).collect();
        assert_eq!(lines, [want], "{container}");
    }

    // A failing postStart hook kills the container, which is restarted per policy.
    let name = cluster.static_name("poststart-fail");
    let pods = cluster.wait_for("the postStart failure", TIMEOUT, |pods| {
        find_pod(pods, &name).is_some_and(|p| {
            let status = container_status(p, "app");
            status["lastState"]["terminated"]["exitCode"] == 143
                && matches!(
                    status["state"]["waiting"]["reason"].as_str(),
                    Some("PostStartHookError" | "CrashLoopBackOff")
                )
        })
    });
    let log = cluster.node.log();
    assert!(
        log.contains(r#"Exec lifecycle hook ([sh -c echo boom; exit 3]) for Container "app""#)
            && log.contains("boom"),
        "no postStart failure logged: {}",
        find_pod(&pods, &name).cloned().unwrap_or_default()
    );

    // Graceful termination: an edit restarts the containers of `graceful`.
    let graceful_name = cluster.static_name("graceful");
    let first = cluster.wait_running(&graceful_name);
    common::wait_log_line(&first, "hooks", 0, "POSTSTART");
    cluster.write_manifest(
        "graceful.yaml",
        &graceful_pod(&graceful_uid, &image, &custom, 2),
    );
    let pods = cluster.wait_for("graceful restarted", TIMEOUT, |pods| {
        find_pod(pods, &graceful_name).is_some_and(|p| {
            ["hooks", "stopsignal", "stubborn", "httphook"]
                .iter()
                .all(|c| {
                    let s = container_status(p, c);
                    s["restartCount"] == 1 && s["lastState"]["terminated"].is_object()
                })
        })
    });
    let graceful = find_pod(&pods, &graceful_name).cloned().unwrap_or_default();
    let last = |c: &str| container_status(&graceful, c)["lastState"]["terminated"].clone();

    // preStop ran (and finished) before SIGTERM.
    let log = read_container_log(&graceful, "hooks", 0);
    let entries = log_entries(&log);
    let pre_stop = entry_time(&entries, "PRESTOP", &log);
    let term = entry_time(&entries, "TERM", &log);
    assert!(
        term - pre_stop >= chrono::Duration::milliseconds(900),
        "SIGTERM came before the preStop hook finished:\n{log}"
    );
    assert_eq!(last("hooks")["exitCode"], 0, "{graceful}");

    // An httpGet preStop hook reaches the pod IP on the named port, with its header.
    let log = read_container_log(&graceful, "httphook", 0);
    let texts: Vec<String> = log_entries(&log)
        .into_iter()
        .map(|(_, t)| t.trim_end().to_owned())
        .collect();
    for want in ["GET /prestop HTTP/1.1", "X-Hook: pre-stop", "TERM"] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in:\n{log}");
    }

    // The image's StopSignal replaces SIGTERM.
    let log = read_container_log(&graceful, "stopsignal", 0);
    let texts: Vec<String> = log_entries(&log).into_iter().map(|(_, t)| t).collect();
    assert!(
        texts.contains(&"USR1".to_owned()) && !texts.contains(&"TERM".to_owned()),
        "{log}"
    );
    assert_eq!(last("stopsignal")["exitCode"], 0, "{graceful}");

    // A container ignoring SIGTERM is SIGKILLed once the grace period (2 s) is over.
    let log = read_container_log(&graceful, "stubborn", 0);
    let ignored = entry_time(&log_entries(&log), "IGNORED-TERM", &log);
    let stubborn = last("stubborn");
    assert_eq!(stubborn["exitCode"], 137, "{graceful}");
    // finishedAt has whole seconds, so the log line's time is cut to whole seconds too:
    // the 2 s grace period then shows as at least 1 s however late the line was logged.
    let ignored = chrono::DurationRound::duration_trunc(ignored, chrono::Duration::seconds(1))
        .expect("a time that truncates to seconds");
    let waited = api_time(&stubborn["finishedAt"]) - ignored;
    assert!(
        waited >= chrono::Duration::seconds(1),
        "killed after {waited}"
    );

    for file in [
        "graceful.yaml",
        "poststart.yaml",
        "termmsg.yaml",
        "env.yaml",
        "cmds.yaml",
        "hostport.yaml",
    ] {
        cluster.remove_manifest(file);
    }
    for name in [
        "graceful",
        "poststart-fail",
        "termmsg",
        "env",
        "cmds",
        "hostport",
    ] {
        cluster.wait_gone(&cluster.static_name(name));
    }
    cluster.assert_no_leftovers();
    assert_eq!(nat_rules_mentioning(host_port), Vec::<String>::new());
}

/// `runAsNonRoot` (pod or container level) refuses a container that would run as root,
/// with upstream's `CreateContainerConfigError` messages: a root image, `runAsUser: 0`, an
/// image with a user name that cannot be checked. A numeric non-root user runs.
#[test]
fn run_as_non_root_refuses_root() {
    let cluster = Cluster::start();
    let push = |name: &str, user: &str| {
        let image =
            skiff_testkit::busybox_configured(json!({"User": user})).expect("build the image");
        skiff_testkit::push(cluster.registry.host(), name, "test", &image).expect("push")
    };
    let named = push("skiff/user-nobody", "nobody");
    let numeric = push("skiff/user-numeric", "65534");
    let root = cluster.image.clone();
    let sleep = "    command: [\"sh\", \"-c\", \"id -u; exec sleep 3600\"]\n";
    let pod_level = "  securityContext: {runAsNonRoot: true}\n";
    let cases = [
        ("root-image", root.as_str(), pod_level, String::new()),
        (
            "runasuser-zero",
            root.as_str(),
            "",
            "    securityContext: {runAsNonRoot: true, runAsUser: 0}\n".to_owned(),
        ),
        ("named-user", named.as_str(), pod_level, String::new()),
        (
            "named-user-overridden",
            named.as_str(),
            "",
            "    securityContext: {runAsNonRoot: true, runAsUser: 1000}\n".to_owned(),
        ),
        ("numeric-user", numeric.as_str(), pod_level, String::new()),
    ];
    for (name, image, spec, container) in &cases {
        cluster.write_manifest(
            &format!("{name}.yaml"),
            &common::single_container_pod(name, image, spec, &format!("{container}{sleep}")),
        );
    }

    let refused = [
        (
            "root-image",
            "container has runAsNonRoot and image will run as root (pod: ",
        ),
        (
            "runasuser-zero",
            "container's runAsUser breaks non-root policy (pod: ",
        ),
        (
            "named-user",
            "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: ",
        ),
    ];
    for (name, message) in refused {
        let full = cluster.static_name(name);
        let pods = cluster.wait_for(&format!("{name} refused"), TIMEOUT, |pods| {
            find_pod(pods, &full).is_some_and(|p| {
                container_status(p, "main")["state"]["waiting"]["reason"]
                    == "CreateContainerConfigError"
            })
        });
        let pod = find_pod(&pods, &full).cloned().unwrap_or_default();
        let waiting = &container_status(&pod, "main")["state"]["waiting"];
        let text = waiting["message"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(message) && text.ends_with(", container: main)"),
            "{name}: {waiting}"
        );
        assert!(text.contains(&format!("{full}_default(")), "{name}: {text}");
    }
    for (name, uid) in [("named-user-overridden", "1000"), ("numeric-user", "65534")] {
        let pod = cluster.wait_running(&cluster.static_name(name));
        let log = common::wait_log_line(&pod, "main", 0, uid);
        let lines: Vec<String> = log_entries(&log).into_iter().map(|(_, t)| t).collect();
        assert_eq!(
            lines.first().map(String::as_str),
            Some(uid),
            "{name}: {log}"
        );
    }
}
