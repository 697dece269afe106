//! CRI container logs on real runc, run against Skiff's runtime and containerd 1.6 (see
//! `common::cri`): a tty container's output (stdout and stderr merged by the terminal) is
//! logged as stdout, and ReopenContainerLog after the kubelet renamed the log — also after
//! the runtime was SIGKILLed and restarted — sends later output to a new file.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use tonic::Code;

common::cri_cases! {
    tty_output_is_logged_as_stdout,
    reopen_container_log,
}

/// CRI log records of `path` as (stream, tag, content); none when it does not exist.
fn records(path: &Path) -> anyhow::Result<Vec<(String, String, String)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).context(format!("reading {}", path.display())),
    };
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.splitn(4, ' ').collect();
            ensure!(fields.len() == 4, "not a CRI log line: {line:?}");
            Ok((fields[1].into(), fields[2].into(), fields[3].into()))
        })
        .collect()
}

/// Polls the log at `path` until a `stream` record contains `text` (20 s at most).
async fn wait_for_record(path: &Path, stream: &str, text: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = records(path)?;
        if found
            .iter()
            .any(|(s, _, c)| s == stream && c.contains(text))
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "no {stream} record with {text:?} in {}: {found:?}",
                path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_exited(rt: &CriRuntime, id: &str) -> anyhow::Result<ContainerStatus> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = rt
            .runtime_client()
            .container_status(ContainerStatusRequest {
                container_id: id.to_string(),
                verbose: false,
            })
            .await?
            .into_inner()
            .status
            .context("ContainerStatus without status")?;
        if status.state == ContainerState::ContainerExited as i32 {
            return Ok(status);
        }
        ensure!(Instant::now() < deadline, "container {id} did not exit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn reopen(rt: &CriRuntime, id: &str) -> Result<(), tonic::Status> {
    rt.runtime_client()
        .reopen_container_log(ReopenContainerLogRequest {
            container_id: id.to_string(),
        })
        .await
        .map(|_| ())
}

/// `tty: true`: the terminal merges stderr into its output, which the log records as
/// stdout (with the terminal's `\r\n` line ends).
async fn tty_output_is_logged_as_stdout(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let sandbox = rt.run_sandbox("tty").await?;
    let config = ContainerConfig {
        tty: true,
        ..rt.container_config(
            "term",
            &image,
            ["sh", "-c", "echo to-out; echo to-err >&2; test -t 1"],
        )
    };
    let id = rt.run_container(&sandbox, "tty", config).await?;
    let status = wait_exited(rt, &id).await?;
    ensure!(status.exit_code == 0, "stdout is a terminal: {status:?}");
    let log = rt.log_path("tty", "term");
    wait_for_record(&log, "stdout", "to-out").await?;
    wait_for_record(&log, "stdout", "to-err").await?;
    let found = records(&log)?;
    ensure!(
        found.iter().all(|(stream, _, _)| stream == "stdout"),
        "only stdout records: {found:?}"
    );
    Ok(())
}

/// The kubelet's log rotation: rename the file, ReopenContainerLog, later output lands in
/// a new file at the log path. Works on a container started before the runtime was
/// SIGKILLed and restarted. NotFound for an unknown container; for an exited one the CRI
/// lets the runtime either succeed or fail, but a failure must not create a new file.
async fn reopen_container_log(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let sandbox = rt.run_sandbox("rotate").await?;
    let script = "i=0; while [ ! -e /stop ]; do echo line-$i; i=$((i+1)); sleep 0.1; done";
    let config = rt.container_config("ticker", &image, ["sh", "-c", script]);
    let id = rt.run_container(&sandbox, "rotate", config).await?;
    let log = rt.log_path("rotate", "ticker");
    wait_for_record(&log, "stdout", "line-1").await?;

    rt.kill9().await?;
    rt.restart().await?;
    let rotated = log.with_extension("log.1");
    std::fs::rename(&log, &rotated)?;
    reopen(rt, &id).await?;
    wait_for_record(&log, "stdout", "line-").await?;
    let numbers = |path: &Path| -> anyhow::Result<Vec<u64>> {
        Ok(records(path)?
            .iter()
            .filter_map(|(_, _, c)| c.strip_prefix("line-")?.parse().ok())
            .collect())
    };
    let (old, new) = (numbers(&rotated)?, numbers(&log)?);
    ensure!(
        old.iter().max() < new.iter().min(),
        "the new file continues the old one: {old:?} then {new:?}"
    );

    let missing = reopen(rt, "0123456789abcdef").await.unwrap_err();
    ensure!(
        missing.code() == Code::NotFound,
        "unknown container: {missing:?}"
    );

    rt.runtime_client()
        .exec_sync(ExecSyncRequest {
            container_id: id.clone(),
            cmd: vec!["touch".into(), "/stop".into()],
            timeout: 10,
        })
        .await?;
    wait_exited(rt, &id).await?;
    std::fs::rename(&log, log.with_extension("log.2"))?;
    if let Err(status) = reopen(rt, &id).await {
        ensure!(
            status.code() != Code::NotFound && status.code() != Code::Ok,
            "exited container: {status:?}"
        );
        ensure!(!log.exists(), "a failed reopen created {}", log.display());
    }
    Ok(())
}
