//! CRI streaming (Exec / Attach / PortForward URLs and the sessions behind them), run
//! against Skiff's runtime and containerd 1.6 (see `common::cri`), with the SPDY/3.1 and
//! WebSocket clients of `skiff_testkit::stream`: exec with stdin / stdout / stderr and
//! exit codes, a terminal and its resize, attach to a container echoing its stdin,
//! port-forward to a pod's httpd, and the error cases (NotFound, FailedPrecondition,
//! InvalidArgument, used or unknown tokens answered 404).
//!
//! containerd 1.6 vendors a kubelet streaming server from before the v5 WebSocket
//! protocol: the v5 cases run on Skiff only.

mod common;

use std::time::Duration;

use anyhow::{Context, ensure};
use common::cri::{CriRuntime, Flavor};
use k8s_cri::v1::*;
use skiff_testkit::stream::{Outcome, Session, TerminalSizeMessage, spdy, websocket};
use tonic::Code;

common::cri_cases! {
    exec_over_spdy,
    exec_with_terminal_and_resize,
    exec_over_websocket_v4,
    exec_over_websocket_v5 => skiff_only("containerd 1.6's streaming server predates the v5 WebSocket protocol"),
    attach_over_spdy,
    attach_over_websocket_v5 => skiff_only("containerd 1.6's streaming server predates the v5 WebSocket protocol"),
    port_forward_over_spdy,
    port_forward_over_websocket,
    streaming_errors,
}

/// A busybox httpd serving `body` on port 8080.
fn httpd_args(body: &str) -> Vec<String> {
    let script =
        format!("mkdir -p /www && echo {body} > /www/index.html && exec httpd -f -p 8080 -h /www");
    vec!["sh".into(), "-c".into(), script]
}

/// A pod `name` with one container `main` running `args`; returns (sandbox, container).
async fn pod(
    rt: &CriRuntime,
    name: &str,
    config: ContainerConfig,
) -> anyhow::Result<(String, String)> {
    rt.pull(&rt.busybox()).await?;
    let sandbox_id = rt.run_sandbox(name).await?;
    let container_id = rt.run_container(&sandbox_id, name, config).await?;
    Ok((sandbox_id, container_id))
}

async fn sleeper(rt: &CriRuntime, name: &str) -> anyhow::Result<String> {
    let config = rt.container_config("main", &rt.busybox(), ["sleep", "3600"]);
    Ok(pod(rt, name, config).await?.1)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// CRI Exec; the flags are those of `session`.
async fn exec_url(
    rt: &CriRuntime,
    container_id: &str,
    cmd: &[&str],
    session: &Session,
) -> Result<String, tonic::Status> {
    rt.runtime_client()
        .exec(ExecRequest {
            container_id: container_id.into(),
            cmd: strings(cmd),
            tty: session.tty,
            stdin: session.stdin.is_some(),
            stdout: session.stdout,
            stderr: session.stderr,
        })
        .await
        .map(|r| r.into_inner().url)
}

fn all_streams(stdin: &str) -> Session {
    Session {
        stdin: Some(stdin.as_bytes().to_vec()),
        stdout: true,
        stderr: true,
        ..Default::default()
    }
}

fn ensure_outcome(outcome: &Outcome, stdout: &str, stderr: &str, code: i32) -> anyhow::Result<()> {
    ensure!(
        outcome.stdout == stdout.as_bytes()
            && outcome.stderr == stderr.as_bytes()
            && outcome.exit_code() == Some(code),
        "expected stdout {stdout:?}, stderr {stderr:?}, exit code {code}; got {outcome:?}"
    );
    Ok(())
}

/// stdin reaches the command and its end closes it, stdout and stderr come back apart,
/// the exit code is reported as a v4 Status (NonZeroExitCode / ExitCode cause), and
/// older protocols report the failure as text.
async fn exec_over_spdy(rt: &CriRuntime) -> anyhow::Result<()> {
    let container_id = sleeper(rt, "exec-spdy").await?;
    let cmd = ["sh", "-c", "cat; echo oops >&2; exit 3"];
    let session = all_streams("hello\n");
    let url = exec_url(rt, &container_id, &cmd, &session).await?;
    let outcome = spdy::remote_command(&url, "v4.channel.k8s.io", &session).await?;
    ensure_outcome(&outcome, "hello\n", "oops\n", 3)?;

    let session = Session {
        stdout: true,
        ..Default::default()
    };
    let url = exec_url(rt, &container_id, &["echo", "fine"], &session).await?;
    let outcome = spdy::remote_command(&url, "v4.channel.k8s.io", &session).await?;
    ensure_outcome(&outcome, "fine\n", "", 0)?;

    let session = Session {
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let url = exec_url(rt, &container_id, &["sh", "-c", "exit 7"], &session).await?;
    let outcome = spdy::remote_command(&url, "v2.channel.k8s.io", &session).await?;
    let text = String::from_utf8_lossy(&outcome.error);
    ensure!(
        text.contains("non-zero exit code") && outcome.status().is_none(),
        "v2 error stream: {text:?}"
    );
    Ok(())
}

/// A terminal: the resize sent first is the size `stty` sees, stderr is merged.
async fn exec_with_terminal_and_resize(rt: &CriRuntime) -> anyhow::Result<()> {
    let container_id = sleeper(rt, "exec-tty").await?;
    let session = Session {
        stdout: true,
        tty: true,
        resize: Some(TerminalSizeMessage {
            width: 123,
            height: 45,
        }),
        ..Default::default()
    };
    let cmd = ["sh", "-c", "sleep 1; stty size; echo to-stderr >&2"];
    let url = exec_url(rt, &container_id, &cmd, &session).await?;
    let outcome = spdy::remote_command(&url, "v4.channel.k8s.io", &session).await?;
    let stdout = outcome.stdout_text();
    ensure!(
        stdout == "45 123\r\nto-stderr\r\n" && outcome.exit_code() == Some(0),
        "{outcome:?} ({stdout:?})"
    );
    Ok(())
}

/// WebSocket v4 (binary and base64): output channels and the Status on the error channel.
async fn exec_over_websocket_v4(rt: &CriRuntime) -> anyhow::Result<()> {
    let container_id = sleeper(rt, "exec-ws4").await?;
    let session = Session {
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let cmd = ["sh", "-c", "echo out; echo oops >&2; exit 3"];
    for protocol in ["v4.channel.k8s.io", "v4.base64.channel.k8s.io"] {
        let url = exec_url(rt, &container_id, &cmd, &session).await?;
        let outcome = websocket::remote_command(&url, protocol, &session).await?;
        ensure_outcome(&outcome, "out\n", "oops\n", 3).with_context(|| protocol.to_string())?;
    }
    Ok(())
}

/// WebSocket v5: the close message ends the command's stdin.
async fn exec_over_websocket_v5(rt: &CriRuntime) -> anyhow::Result<()> {
    let container_id = sleeper(rt, "exec-ws5").await?;
    let session = all_streams("over websocket\n");
    let cmd = ["sh", "-c", "cat; echo oops >&2; exit 4"];
    let url = exec_url(rt, &container_id, &cmd, &session).await?;
    let outcome = websocket::remote_command(&url, "v5.channel.k8s.io", &session).await?;
    ensure_outcome(&outcome, "over websocket\n", "oops\n", 4)
}

/// A container running `cat` with an open stdin (closed after the first attach ends).
async fn echoing_container(rt: &CriRuntime, name: &str) -> anyhow::Result<String> {
    let mut config = rt.container_config("main", &rt.busybox(), ["cat"]);
    config.stdin = true;
    config.stdin_once = true;
    Ok(pod(rt, name, config).await?.1)
}

async fn attach_url(
    rt: &CriRuntime,
    container_id: &str,
    session: &Session,
) -> anyhow::Result<String> {
    Ok(rt
        .runtime_client()
        .attach(AttachRequest {
            container_id: container_id.into(),
            stdin: session.stdin.is_some(),
            tty: session.tty,
            stdout: session.stdout,
            stderr: session.stderr,
        })
        .await?
        .into_inner()
        .url)
}

/// Attach: what is written to the container's stdin comes back on stdout; closing stdin
/// (stdin_once) ends the container and the session.
async fn attach_over_spdy(rt: &CriRuntime) -> anyhow::Result<()> {
    let container_id = echoing_container(rt, "attach-spdy").await?;
    let session = all_streams("echo me\n");
    let url = attach_url(rt, &container_id, &session).await?;
    let outcome = spdy::remote_command(&url, "v4.channel.k8s.io", &session).await?;
    ensure_outcome(&outcome, "echo me\n", "", 0)
}

async fn attach_over_websocket_v5(rt: &CriRuntime) -> anyhow::Result<()> {
    let container_id = echoing_container(rt, "attach-ws").await?;
    let session = all_streams("echo me too\n");
    let url = attach_url(rt, &container_id, &session).await?;
    let outcome = websocket::remote_command(&url, "v5.channel.k8s.io", &session).await?;
    ensure_outcome(&outcome, "echo me too\n", "", 0)
}

/// CRI PortForward for `ports` (what WebSocket sessions forward).
async fn port_forward_url(
    rt: &CriRuntime,
    sandbox_id: &str,
    ports: &[i32],
) -> Result<String, tonic::Status> {
    rt.runtime_client()
        .port_forward(PortForwardRequest {
            pod_sandbox_id: sandbox_id.into(),
            port: ports.to_vec(),
        })
        .await
        .map(|r| r.into_inner().url)
}

/// A pod serving `body` over HTTP on 8080, once it answers; returns its sandbox ID.
async fn web_pod(rt: &CriRuntime, name: &str, body: &str) -> anyhow::Result<String> {
    let config = rt.container_config("main", &rt.busybox(), httpd_args(body));
    let (sandbox_id, container_id) = pod(rt, name, config).await?;
    // Ready when the server answers from inside the pod.
    let probe = ExecSyncRequest {
        container_id,
        cmd: strings(&[
            "sh",
            "-c",
            "echo -e 'GET / HTTP/1.0\\r\\n' | nc 127.0.0.1 8080",
        ]),
        timeout: 5,
    };
    for _ in 0..100 {
        let out = rt
            .runtime_client()
            .exec_sync(probe.clone())
            .await?
            .into_inner();
        if String::from_utf8_lossy(&out.stdout).contains(body) {
            return Ok(sandbox_id);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the httpd of {name} never answered")
}

const GET: &[u8] = b"GET / HTTP/1.0\r\n\r\n";

/// SPDY port-forward: two connections in one session reach the pod's loopback port
/// 8080 (the pod's network namespace, not the host's); a closed port is reported on the
/// error stream.
async fn port_forward_over_spdy(rt: &CriRuntime) -> anyhow::Result<()> {
    let sandbox_id = web_pod(rt, "pf-spdy", "forwarded-spdy").await?;
    let url = port_forward_url(rt, &sandbox_id, &[]).await?;
    let mut session = spdy::PortForward::connect(&url).await?;
    for _ in 0..2 {
        let (reply, error) = session.open(8080).await?.exchange(GET).await?;
        let reply = String::from_utf8_lossy(&reply);
        ensure!(
            reply.starts_with("HTTP/1.") && reply.contains("forwarded-spdy") && error.is_empty(),
            "reply {reply:?}, error {error:?}"
        );
    }
    let (reply, error) = session.open(8081).await?.exchange(GET).await?;
    ensure!(
        reply.is_empty() && error.contains("8081"),
        "closed port: reply {reply:?}, error {error:?}"
    );
    Ok(())
}

/// WebSocket port-forward (the ports of the CRI request): the 2-byte port prefix on both channels, then the
/// pod's answer.
async fn port_forward_over_websocket(rt: &CriRuntime) -> anyhow::Result<()> {
    let sandbox_id = web_pod(rt, "pf-ws", "forwarded-ws").await?;
    let url = port_forward_url(rt, &sandbox_id, &[8080]).await?;
    let results = websocket::port_forward(&url, "v4.channel.k8s.io", &[8080], GET).await?;
    let (reply, error) = &results[0];
    let reply = String::from_utf8_lossy(reply);
    ensure!(
        reply.contains("forwarded-ws") && error.is_empty(),
        "reply {reply:?}, error {error:?}"
    );
    Ok(())
}

fn ensure_code<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: Code,
    what: &str,
) -> anyhow::Result<()> {
    match result {
        Err(status) if status.code() == code => Ok(()),
        other => anyhow::bail!("{what}: expected {code:?}, got {other:?}"),
    }
}

fn ensure_http_status(
    result: anyhow::Result<Outcome>,
    status: u16,
    what: &str,
) -> anyhow::Result<()> {
    match result {
        Err(err)
            if err
                .downcast_ref::<spdy::Refused>()
                .is_some_and(|r| r.status == status) =>
        {
            Ok(())
        }
        other => anyhow::bail!("{what}: expected HTTP {status}, got {other:?}"),
    }
}

/// NotFound for unknown containers and sandboxes, FailedPrecondition for a container
/// that is not running, InvalidArgument for impossible stream combinations, 404 for a
/// token used twice or never issued.
async fn streaming_errors(rt: &CriRuntime) -> anyhow::Result<()> {
    let session = Session {
        stdout: true,
        ..Default::default()
    };
    let missing = "0".repeat(64);
    ensure_code(
        exec_url(rt, &missing, &["true"], &session).await,
        Code::NotFound,
        "Exec",
    )?;
    let attach = rt
        .runtime_client()
        .attach(AttachRequest {
            container_id: missing.clone(),
            stdout: true,
            ..Default::default()
        })
        .await;
    ensure_code(attach, Code::NotFound, "Attach")?;
    ensure_code(
        port_forward_url(rt, &missing, &[]).await,
        Code::NotFound,
        "PortForward",
    )?;

    rt.pull(&rt.busybox()).await?;
    let sandbox_id = rt.run_sandbox("stream-errors").await?;
    let created = rt
        .runtime_client()
        .create_container(CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(rt.container_config("idle", &rt.busybox(), ["sleep", "3600"])),
            sandbox_config: Some(rt.sandbox_config("stream-errors")),
        })
        .await?
        .into_inner()
        .container_id;
    // containerd 1.6 answers with a plain error (Unknown) where the state check calls for
    // FailedPrecondition.
    let not_running = match rt.flavor() {
        Flavor::Skiff => Code::FailedPrecondition,
        Flavor::Containerd => Code::Unknown,
    };
    ensure_code(
        exec_url(rt, &created, &["true"], &session).await,
        not_running,
        "Exec in a created container",
    )?;

    let running = rt
        .run_container(
            &sandbox_id,
            "stream-errors",
            rt.container_config("main", &rt.busybox(), ["sleep", "3600"]),
        )
        .await?;
    let tty_with_stderr = Session {
        tty: true,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    ensure_code(
        exec_url(rt, &running, &["true"], &tty_with_stderr).await,
        Code::InvalidArgument,
        "tty with stderr",
    )?;
    ensure_code(
        exec_url(rt, &running, &["true"], &Session::default()).await,
        Code::InvalidArgument,
        "no stream",
    )?;

    let url = exec_url(rt, &running, &["echo", "once"], &session).await?;
    let outcome = spdy::remote_command(&url, "v4.channel.k8s.io", &session).await?;
    ensure_outcome(&outcome, "once\n", "", 0)?;
    ensure_http_status(
        spdy::remote_command(&url, "v4.channel.k8s.io", &session).await,
        404,
        "a used token",
    )?;
    let (base, _) = url.rsplit_once('/').context("URL without token")?;
    ensure_http_status(
        spdy::remote_command(
            &format!("{base}/not-a-token"),
            "v4.channel.k8s.io",
            &session,
        )
        .await,
        404,
        "an unknown token",
    )?;
    // The URL names the stream server of this runtime.
    ensure!(url.starts_with("http://127.0.0.1:"), "{url}");
    Ok(())
}
