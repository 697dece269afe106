//! The shim: one small monitor process per running container (the role of
//! containerd-shim-runc-v2), outliving the runtime and the kubelet.
//!
//! Started by the runtime as `<shim_binary> shim --id ID --bundle DIR --runc PATH
//! --runc-root DIR --log-path FILE --exit-file FILE --cgroup PATH`. The started process
//! forks a daemon (new session, child subreaper) and exits as soon as the daemon reports
//! [`Started`] or `error <text>` on its stdout, so the runtime reaps it right away.
//! The daemon runs `runc run --detach` with pipes as the container's stdio, or with
//! `--console-socket` for a tty container (runc sends the pty master back), copies the
//! output into the CRI log file and to attached clients, keeps the container's stdin and
//! terminal for attach sessions on `<bundle>/attach.sock` ([`protocol`]), reaps the
//! container's init and writes the exit file.
//! No async runtime: plain threads (64 KiB stacks), so it is cheap and fork-safe.

mod attach;
mod console;
pub mod exit;
pub mod log;
mod monitor;
pub mod protocol;
pub mod record;
pub(crate) mod stdio;

pub use stdio::set_window_size;

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use anyhow::{Context as _, bail};

use crate::process::ProcessId;

/// The shim's command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Container ID (runc's container name).
    pub id: String,
    /// Bundle directory (holds `config.json`; the shim writes `init.pid`, `runc.log`,
    /// `shim.log` and its [`record`] files there).
    pub bundle: PathBuf,
    /// OCI runtime binary.
    pub runc: PathBuf,
    /// `runc --root` state directory.
    pub runc_root: PathBuf,
    /// CRI log file of the container.
    pub log_path: PathBuf,
    /// Where the [`exit::ExitStatus`] is written.
    pub exit_file: PathBuf,
    /// The container's cgroupsPath, to detect OOM kills.
    pub cgroup: PathBuf,
    /// The container has a terminal (CRI `ContainerConfig.tty`, OCI `process.terminal`).
    pub tty: bool,
    /// Keep the container's stdin open for attach sessions (CRI `stdin`).
    pub stdin: bool,
    /// Close the container's stdin once the first attach session's stdin ended (CRI
    /// `stdin_once`).
    pub stdin_once: bool,
}

impl Options {
    /// The arguments that [`Options::parse`] reads back (without the `shim` subcommand).
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut args = Vec::new();
        for (flag, value) in [
            ("--id", self.id.as_ref()),
            ("--bundle", self.bundle.as_os_str()),
            ("--runc", self.runc.as_os_str()),
            ("--runc-root", self.runc_root.as_os_str()),
            ("--log-path", self.log_path.as_os_str()),
            ("--exit-file", self.exit_file.as_os_str()),
            ("--cgroup", self.cgroup.as_os_str()),
        ] {
            args.push(flag.into());
            args.push(value.to_owned());
        }
        for (flag, value) in [
            ("--tty", self.tty),
            ("--stdin", self.stdin),
            ("--stdin-once", self.stdin_once),
        ] {
            args.push(flag.into());
            args.push(value.to_string().into());
        }
        args
    }

    /// Parses `--flag value` pairs; leading words (program name, `shim`) are skipped.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut rest = args.iter().skip_while(|a| !a.starts_with("--"));
        let mut opts = Options {
            id: String::new(),
            bundle: PathBuf::new(),
            runc: PathBuf::from("runc"),
            runc_root: PathBuf::new(),
            log_path: PathBuf::new(),
            exit_file: PathBuf::new(),
            cgroup: PathBuf::new(),
            tty: false,
            stdin: false,
            stdin_once: false,
        };
        while let Some(flag) = rest.next() {
            let value = rest
                .next()
                .with_context(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--id" => opts.id = value.clone(),
                "--bundle" => opts.bundle = value.into(),
                "--runc" => opts.runc = value.into(),
                "--runc-root" => opts.runc_root = value.into(),
                "--log-path" => opts.log_path = value.into(),
                "--exit-file" => opts.exit_file = value.into(),
                "--cgroup" => opts.cgroup = value.into(),
                "--tty" => opts.tty = parse_bool(flag, value)?,
                "--stdin" => opts.stdin = parse_bool(flag, value)?,
                "--stdin-once" => opts.stdin_once = parse_bool(flag, value)?,
                other => bail!("unknown shim flag {other}"),
            }
        }
        if opts.id.is_empty()
            || opts.bundle.as_os_str().is_empty()
            || opts.exit_file.as_os_str().is_empty()
        {
            bail!("--id, --bundle and --exit-file are required");
        }
        Ok(opts)
    }
}

fn parse_bool(flag: &str, value: &str) -> anyhow::Result<bool> {
    value
        .parse()
        .with_context(|| format!("{flag} takes true or false, not {value:?}"))
}

/// The daemon's report once the container runs, one line:
/// `started <init pid> <init start time> <shim pid> <shim start time>`. Both processes are
/// identified with their start times so that the runtime can later tell whether they still
/// run (see [`ProcessId`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Started {
    /// The container's init process.
    pub init: ProcessId,
    /// The shim daemon monitoring it.
    pub shim: ProcessId,
}

impl Started {
    /// The report line, without the newline.
    pub fn to_line(&self) -> String {
        format!(
            "started {} {} {} {}",
            self.init.pid, self.init.start_time, self.shim.pid, self.shim.start_time
        )
    }

    /// Parses [`Started::to_line`]; `None` for anything else.
    pub fn parse(line: &str) -> Option<Started> {
        let mut words = line.trim().strip_prefix("started ")?.split_whitespace();
        let mut next = || words.next()?.parse::<u64>().ok();
        let mut process = || {
            Some(ProcessId {
                pid: i32::try_from(next()?).ok()?,
                start_time: next()?,
            })
        };
        Some(Started {
            init: process()?,
            shim: process()?,
        })
    }
}

/// Entry point of `skiff shim ...`. Must run before any other thread exists (it forks).
/// Returns the process exit code: 0 once the daemon reported, non-zero on usage errors or
/// when the daemon died without reporting.
pub fn main(args: Vec<String>) -> i32 {
    let opts = match Options::parse(&args) {
        Ok(opts) => opts,
        Err(err) => {
            eprintln!("skiff shim: {err:#}");
            return 2;
        }
    };
    match spawn_daemon(&opts) {
        Ok(report) => {
            let mut stdout = std::io::stdout();
            let _ = stdout
                .write_all(report.as_bytes())
                .and_then(|_| stdout.flush());
            0
        }
        Err(err) => {
            eprintln!("skiff shim: {err:#}");
            1
        }
    }
}

/// Forks the daemon and waits for its one-line report on a pipe.
fn spawn_daemon(opts: &Options) -> anyhow::Result<String> {
    let (ready_read, ready_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("pipe")?;
    // SAFETY: the shim runs before any other thread is started (see `main`), so the child
    // may continue to use the allocator and the standard library.
    match unsafe { nix::unistd::fork() }.context("fork")? {
        nix::unistd::ForkResult::Child => {
            drop(ready_read);
            let code = monitor::run(opts, ready_write);
            std::process::exit(code);
        }
        nix::unistd::ForkResult::Parent { .. } => {
            drop(ready_write);
            let mut report = String::new();
            std::fs::File::from(ready_read)
                .read_to_string(&mut report)
                .context("reading the shim report")?;
            if report.is_empty() {
                bail!("the shim daemon exited without reporting");
            }
            Ok(report)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_roundtrip() {
        let opts = Options {
            id: "abc".into(),
            bundle: "/run/b".into(),
            runc: "/usr/sbin/runc".into(),
            runc_root: "/run/r".into(),
            log_path: "/var/log/x.log".into(),
            exit_file: "/run/b/exit.json".into(),
            cgroup: "/skiff/s/abc".into(),
            tty: true,
            stdin: true,
            stdin_once: false,
        };
        let mut args = vec!["skiff".to_string(), "shim".to_string()];
        args.extend(opts.to_args().into_iter().map(|a| a.into_string().unwrap()));
        assert_eq!(Options::parse(&args).unwrap(), opts);
        assert!(Options::parse(&["--id".into()]).is_err());
        args.extend(["--tty".to_string(), "yes".to_string()]);
        assert!(Options::parse(&args).is_err());
    }

    #[test]
    fn report_roundtrip() {
        let started = Started {
            init: ProcessId {
                pid: 42,
                start_time: 1000,
            },
            shim: ProcessId {
                pid: 41,
                start_time: 999,
            },
        };
        assert_eq!(Started::parse(&started.to_line()), Some(started));
        assert_eq!(Started::parse("started 42"), None);
        assert_eq!(Started::parse("error boom"), None);
    }
}
