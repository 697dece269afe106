//! Clients of the CRI streaming endpoints (the URLs of CRI Exec / Attach / PortForward),
//! as the kubelet and kubectl speak them: [`spdy`] (SPDY/3.1 upgrade, the framing of
//! `skiff_runtime::streaming::spdy`) and [`websocket`] (the channel protocols, with
//! tokio-tungstenite). Async (tokio).

pub mod spdy;
pub mod websocket;

use std::time::Duration;

pub use skiff_runtime::streaming::protocol::{Status, TerminalSizeMessage};

/// What a remote command session sends; the stream flags must match the CRI request
/// the URL came from.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// Open stdin and send these bytes, then close it.
    pub stdin: Option<Vec<u8>>,
    /// Wait this long after the streams are up (and the resize is sent) before sending
    /// stdin.
    pub stdin_delay: Duration,
    /// Read stdout.
    pub stdout: bool,
    /// Read stderr.
    pub stderr: bool,
    /// A terminal was asked for (opens the resize stream).
    pub tty: bool,
    /// Terminal size sent first (with `tty`).
    pub resize: Option<TerminalSizeMessage>,
}

/// How a remote command session ended (`Debug` shows the streams as text).
#[derive(Clone, Default)]
pub struct Outcome {
    /// All of stdout.
    pub stdout: Vec<u8>,
    /// All of stderr.
    pub stderr: Vec<u8>,
    /// The raw error stream (a `Status` JSON from protocol v4 on).
    pub error: Vec<u8>,
}

impl Outcome {
    /// The error stream as a `Status`; `None` when empty or not JSON.
    pub fn status(&self) -> Option<Status> {
        serde_json::from_slice(&self.error).ok()
    }

    /// The exit code the `Status` reports (0 for success).
    pub fn exit_code(&self) -> Option<i32> {
        self.status()?.exit_status()
    }

    /// stdout as text.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome")
            .field("stdout", &String::from_utf8_lossy(&self.stdout))
            .field("stderr", &String::from_utf8_lossy(&self.stderr))
            .field("error", &String::from_utf8_lossy(&self.error))
            .finish()
    }
}

/// A streaming URL's `host:port` and path (`http://` URLs only, as the CRI hands out).
pub(crate) fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow::anyhow!("not an http:// URL: {url}"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Ok((
        host.to_string(),
        if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    ))
}
