//! Names and messages of the Kubernetes streaming protocols, shared by the server and by
//! clients (`k8s.io/apimachinery/pkg/util/remotecommand`, `.../httpstream`,
//! `.../wsstream` and `k8s.io/api/core/v1` upstream).

use serde::{Deserialize, Serialize};

/// Request and response header naming the sub-protocol of a SPDY upgrade.
pub const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";
/// SPDY stream header naming the stream's role ([`stream_type`]).
pub const STREAM_TYPE_HEADER: &str = "streamType";
/// SPDY port-forward stream header: the pod port.
pub const PORT_HEADER: &str = "port";
/// SPDY port-forward stream header pairing a data stream with its error stream.
pub const REQUEST_ID_HEADER: &str = "requestID";

/// Values of the `streamType` header.
pub mod stream_type {
    /// Exit status / errors (server to client).
    pub const ERROR: &str = "error";
    /// The process' stdin.
    pub const STDIN: &str = "stdin";
    /// The process' stdout.
    pub const STDOUT: &str = "stdout";
    /// The process' stderr.
    pub const STDERR: &str = "stderr";
    /// Terminal size changes (`{"Width":..,"Height":..}` JSON, client to server).
    pub const RESIZE: &str = "resize";
    /// Port-forward payload.
    pub const DATA: &str = "data";
}

/// Remote command sub-protocols, newest first. Over SPDY: v4 (exit status as a
/// [`Status`] JSON on the error stream), v3 (adds the resize stream), v2, and the first
/// one (`channel.k8s.io`), whose error stream carries plain text. Over WebSocket: v5
/// (adds the close signal), v4, and their base64 text variants.
pub mod remotecommand {
    /// WebSocket v5: v4 plus [`super::channel::CLOSE`].
    pub const V5: &str = "v5.channel.k8s.io";
    /// SPDY and WebSocket v4.
    pub const V4: &str = "v4.channel.k8s.io";
    /// WebSocket v4 with base64 text frames.
    pub const V4_BASE64: &str = "v4.base64.channel.k8s.io";
    /// SPDY v3.
    pub const V3: &str = "v3.channel.k8s.io";
    /// SPDY v2.
    pub const V2: &str = "v2.channel.k8s.io";
    /// SPDY v1 and WebSocket without version.
    pub const V1: &str = "channel.k8s.io";
    /// WebSocket without version, base64 text frames.
    pub const V1_BASE64: &str = "base64.channel.k8s.io";
}

/// Port-forward sub-protocols.
pub mod portforward {
    /// SPDY, and WebSocket binary frames.
    pub const V1: &str = "portforward.k8s.io";
}

/// WebSocket channel numbers: the first byte of each binary message (in base64 mode, the
/// ASCII digit of the number).
pub mod channel {
    /// Client to server: the process' stdin.
    pub const STDIN: u8 = 0;
    /// Server to client: stdout.
    pub const STDOUT: u8 = 1;
    /// Server to client: stderr.
    pub const STDERR: u8 = 2;
    /// Server to client: the exit status.
    pub const ERROR: u8 = 3;
    /// Client to server: terminal size changes.
    pub const RESIZE: u8 = 4;
    /// v5: `[CLOSE, n]` half-closes channel `n`.
    pub const CLOSE: u8 = 255;
}

/// `metav1.Status` as the v4 remote command protocol writes it on the error stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Always empty (`{}`).
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// `Success` or `Failure`.
    pub status: String,
    /// Human-readable description of the failure.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason: `NonZeroExitCode`, `InternalError`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Causes; the exit code is the cause with reason `ExitCode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// HTTP-style code (500 for internal errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
}

/// `metav1.StatusDetails`, reduced to its causes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusDetails {
    /// The individual causes.
    #[serde(default)]
    pub causes: Vec<StatusCause>,
}

/// `metav1.StatusCause`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// Cause type (`ExitCode`); its JSON name is `reason`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Cause text (the exit code in decimal for `ExitCode`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `Status.reason` of a command that exited with a non-zero code.
pub const NON_ZERO_EXIT_CODE: &str = "NonZeroExitCode";
/// `StatusCause.reason` carrying the exit code.
pub const EXIT_CODE_CAUSE: &str = "ExitCode";

impl Status {
    /// The command exited 0 (or the attach ended normally).
    pub fn success() -> Self {
        Self {
            status: "Success".into(),
            ..Default::default()
        }
    }

    /// The command `cmd` exited with `code` (non-zero).
    pub fn exit_code(cmd: &[String], code: i32) -> Self {
        Self {
            status: "Failure".into(),
            message: format!(
                "command terminated with non-zero exit code: error executing command {cmd:?}, exit code {code}"
            ),
            reason: NON_ZERO_EXIT_CODE.into(),
            details: Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: EXIT_CODE_CAUSE.into(),
                    message: code.to_string(),
                }],
            }),
            ..Default::default()
        }
    }

    /// Running the command failed (`apierrors.NewInternalError`).
    pub fn internal_error(err: &str) -> Self {
        Self {
            status: "Failure".into(),
            message: format!("Internal error occurred: {err}"),
            reason: "InternalError".into(),
            details: Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: String::new(),
                    message: err.to_string(),
                }],
            }),
            code: Some(500),
            ..Default::default()
        }
    }

    /// The exit code this status reports: 0 for success, the `ExitCode` cause for
    /// `NonZeroExitCode`, `None` for other failures.
    pub fn exit_status(&self) -> Option<i32> {
        if self.status == "Success" {
            return Some(0);
        }
        if self.reason != NON_ZERO_EXIT_CODE {
            return None;
        }
        self.details
            .as_ref()?
            .causes
            .iter()
            .find(|cause| cause.reason == EXIT_CODE_CAUSE)?
            .message
            .parse()
            .ok()
    }
}

/// A terminal size message of the resize stream / channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSizeMessage {
    /// Columns.
    #[serde(rename = "Width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height")]
    pub height: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_serialize_as_metav1_status() {
        assert_eq!(
            serde_json::to_string(&Status::success()).unwrap(),
            r#"{"metadata":{},"status":"Success"}"#
        );
        let failure = Status::exit_code(&["sh".into(), "-c".into(), "exit 3".into()], 3);
        let json = serde_json::to_value(&failure).unwrap();
        assert_eq!(json["reason"], "NonZeroExitCode");
        assert_eq!(json["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(json["details"]["causes"][0]["message"], "3");
        assert_eq!(failure.exit_status(), Some(3));
        assert_eq!(Status::success().exit_status(), Some(0));
        assert_eq!(Status::internal_error("boom").exit_status(), None);
        assert_eq!(
            serde_json::to_value(Status::internal_error("boom")).unwrap()["code"],
            500
        );
    }
}
