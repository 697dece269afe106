//! The exec probe handler (upstream `pkg/probe/exec` with the CRI `ExecSync` runner):
//! runs a command in the container; exit code 0 is success, a timeout is a failure.

use std::time::Duration;

use k8s_cri::v1::ExecSyncRequest;
use tonic::Code;

use super::probe::{HandlerResult, Outcome};
use crate::cri::Cri;
use crate::error::Error;

/// Most bytes of command output kept (upstream `maxReadLength`, 10 KiB).
const MAX_OUTPUT: usize = 10 * 1024;
/// Time the runtime gets on top of the probe timeout to answer (upstream adds its runtime
/// request timeout, 2 min).
const RUNTIME_SLACK: Duration = Duration::from_secs(120);

/// Runs `command` in container `container_id` through CRI ExecSync with `timeout`
/// (whole seconds, at least 1). Output is stdout then stderr, at most 10 KiB. A timeout is
/// a failure whose output is `command "<command>" timed out`; other runtime errors
/// (container gone, no such runtime call) are errors.
pub async fn probe(
    cri: &dyn Cri,
    container_id: &str,
    command: Vec<String>,
    timeout: Duration,
) -> HandlerResult {
    let timed_out = format!("command {:?} timed out", command.join(" "));
    let request = ExecSyncRequest {
        container_id: container_id.to_owned(),
        cmd: command,
        timeout: i64::try_from(timeout.as_secs().max(1)).unwrap_or(i64::MAX),
    };
    let response = match tokio::time::timeout(timeout + RUNTIME_SLACK, cri.exec_sync(request)).await
    {
        Err(_) => return Ok((Outcome::Failure, timed_out)),
        Ok(Err(status)) if status.code() == Code::DeadlineExceeded => {
            return Ok((Outcome::Failure, timed_out));
        }
        Ok(Err(status)) => {
            return Err(Error::Probe(format!(
                "exec in container failed: {}",
                status.message()
            )));
        }
        Ok(Ok(response)) => response,
    };
    let mut output = response.stdout;
    output.extend(response.stderr);
    output.truncate(MAX_OUTPUT);
    let output = String::from_utf8_lossy(&output).into_owned();
    let outcome = match response.exit_code {
        0 => Outcome::Success,
        _ => Outcome::Failure,
    };
    Ok((outcome, output))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[tokio::test]
    async fn exit_code_decides_and_output_is_kept() {
        let cri = FakeCri::default();
        cri.script_exec(0, "ok\n", "", Duration::ZERO);
        assert_eq!(
            probe(&cri, "c1", cmd(&["true"]), Duration::from_secs(1)).await,
            Ok((Outcome::Success, "ok\n".into()))
        );
        cri.script_exec(1, "out ", "err", Duration::ZERO);
        assert_eq!(
            probe(&cri, "c1", cmd(&["false"]), Duration::from_secs(1)).await,
            Ok((Outcome::Failure, "out err".into()))
        );
        let sent = cri.exec_requests();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1].container_id, "c1");
        assert_eq!(sent[1].cmd, ["false"]);
        assert_eq!(sent[1].timeout, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_is_a_failure() {
        let cri = FakeCri::default();
        cri.script_exec(0, "", "", Duration::from_secs(5));
        assert_eq!(
            probe(&cri, "c1", cmd(&["sleep", "5"]), Duration::from_secs(2)).await,
            Ok((Outcome::Failure, r#"command "sleep 5" timed out"#.into()))
        );
    }

    #[tokio::test]
    async fn runtime_errors_are_errors() {
        let cri = FakeCri::default();
        assert!(
            probe(&cri, "missing", cmd(&["true"]), Duration::from_secs(1))
                .await
                .is_err()
        );
    }
}
