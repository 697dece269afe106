//! The shim daemon: starts the container with runc, copies its output into the CRI log
//! and to attach sessions, reaps it and records the exit.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::console::ConsoleSocket;
use super::exit::ExitStatus;
use super::log::Stream;
use super::{Options, Started, attach, protocol, record, stdio};
use crate::process::ProcessId;

/// How long output is still drained after the container's init exited. Daemonized
/// descendants may hold the pipes open; they must not keep the shim alive.
const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

/// Runs the daemon; `ready` receives the one-line report. Returns the exit code.
pub fn run(opts: &Options, ready: OwnedFd) -> i32 {
    let mut ready = std::fs::File::from(ready);
    if let Err(err) = detach(opts) {
        let _ = writeln!(ready, "error shim setup: {err:#}");
        return 1;
    }
    let running = match start_container(opts) {
        Ok(running) => running,
        Err(err) => {
            let _ = writeln!(ready, "error {}", single_line(&format!("{err:#}")));
            eprintln!("container {}: {err:#}", opts.id);
            return 1;
        }
    };
    let start = record::StartRecord {
        started: running.started,
        started_at: crate::id::now_nanos(),
    };
    if let Err(err) = record::write_started(&opts.bundle, &start) {
        eprintln!("container {}: recording the start: {err:#}", opts.id);
    }
    let _ = writeln!(ready, "{}", running.started.to_line());
    drop(ready);
    let status = wait_for(Pid::from_raw(running.started.init.pid));
    let finished_at = crate::id::now_nanos();
    drain(running.copiers, running.outputs);
    // Attach clients see the end of stream when the shim exits; new ones find no socket.
    let _ = std::fs::remove_file(opts.bundle.join(protocol::SOCKET));
    let exit = ExitStatus {
        exit_code: status,
        finished_at,
        oom_killed: crate::cgroup::oom_killed(&opts.cgroup),
    };
    let code = match exit.write(&opts.exit_file) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("container {}: writing exit file: {err:#}", opts.id);
            1
        }
    };
    delete_container(opts);
    code
}

/// `runc delete --force` once the exit is recorded (so the exit is reported without
/// waiting for it), as containerd's shim deletes the task after its exit: runc's state and
/// the container's cgroup go (with any process the container left in a shared PID
/// namespace), and RemoveContainer has nothing slow left to do. Marks success in the
/// bundle ([`record::DELETED_FILE`]); on failure RemoveContainer runs `runc delete` itself.
fn delete_container(opts: &Options) {
    let status = std::process::Command::new(&opts.runc)
        .arg("--root")
        .arg(&opts.runc_root)
        .args(["delete", "--force"])
        .arg(&opts.id)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() => {
            if let Err(err) = record::write_deleted(&opts.bundle) {
                eprintln!("container {}: recording the deletion: {err:#}", opts.id);
            }
        }
        Ok(status) => eprintln!("container {}: runc delete: {status}", opts.id),
        Err(err) => eprintln!("container {}: running runc delete: {err}", opts.id),
    }
}

/// New session (immune to signals sent to the kubelet's process group), stdio away from
/// the runtime's pipes (stderr goes to `<bundle>/shim.log`), and child subreaper so the
/// container's init is reparented to the shim. Records the shim in the bundle
/// ([`record::SHIM_FILE`]).
fn detach(opts: &Options) -> anyhow::Result<()> {
    nix::unistd::setsid().context("setsid")?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(opts.bundle.join("shim.log"))?;
    nix::unistd::dup2_stdin(&null)?;
    nix::unistd::dup2_stdout(&null)?;
    nix::unistd::dup2_stderr(&log)?;
    nix::sys::prctl::set_child_subreaper(true).context("PR_SET_CHILD_SUBREAPER")?;
    let me = ProcessId::of(std::process::id() as i32).context("reading the shim's own stat")?;
    record::write_shim(&opts.bundle, &me).context("recording the shim")
}

struct Running {
    started: Started,
    copiers: std::sync::mpsc::Receiver<()>,
    outputs: usize,
}

/// `runc run --detach` with the container's stdio from [`connect_stdio`]; on success
/// starts the log copier threads and the attach socket server, and identifies the init
/// process (from the pid file) and the shim. The init is the shim's child from here on
/// (child subreaper), so its PID cannot be reused before the shim reaps it.
fn start_container(opts: &Options) -> anyhow::Result<Running> {
    let bundle = protocol::open_dir(&opts.bundle)
        .with_context(|| format!("opening {}", opts.bundle.display()))?;
    let listener =
        protocol::bind_in(&bundle, protocol::SOCKET).context("binding the attach socket")?;
    let pid_file = opts.bundle.join("init.pid");
    let runc_log = opts.bundle.join("runc.log");
    let mut command = std::process::Command::new(&opts.runc);
    command
        .arg("--root")
        .arg(&opts.runc_root)
        .arg("--log")
        .arg(&runc_log)
        .arg("--log-format")
        .arg("json")
        .args(["run", "--detach", "--pid-file"])
        .arg(&pid_file);
    let kept = connect_stdio(opts, &mut command)?;
    command.arg("--bundle").arg(&opts.bundle).arg(&opts.id);
    let status = command
        .status()
        .with_context(|| format!("running {}", opts.runc.display()));
    drop(command); // closes our copies of the container's ends of the pipes
    if !status?.success() {
        bail!(
            "{}",
            runc_error(&runc_log).unwrap_or_else(|| "runc run failed".into())
        );
    }
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .with_context(|| format!("reading {}", pid_file.display()))?
        .trim()
        .parse()
        .context("parsing the container pid")?;
    let started = Started {
        init: ProcessId::of(pid).with_context(|| format!("container init {pid} vanished"))?,
        shim: ProcessId::of(std::process::id() as i32).context("reading the shim's own stat")?,
    };
    let (stdio, outputs) = kept.into_stdio(opts)?;
    let stdio = Arc::new(stdio);
    let count = outputs.len();
    let copiers = start_copiers(&stdio, outputs)?;
    attach::serve(listener, stdio).context("starting the attach server")?;
    Ok(Running {
        started,
        copiers,
        outputs: count,
    })
}

/// What the shim keeps of the container's stdio while runc starts it.
enum Kept {
    /// Our ends of the pipes.
    Pipes {
        stdin: Option<OwnedFd>,
        stdout: OwnedFd,
        stderr: OwnedFd,
    },
    /// Where runc sends the terminal.
    Terminal(ConsoleSocket),
}

/// Gives runc the container's stdio: pipes (stdin only when the container keeps one), or
/// `--console-socket` for a terminal.
fn connect_stdio(opts: &Options, command: &mut std::process::Command) -> anyhow::Result<Kept> {
    if opts.tty {
        let console = ConsoleSocket::bind(&opts.bundle).context("binding the console socket")?;
        command
            .arg("--console-socket")
            .arg(console.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        return Ok(Kept::Terminal(console));
    }
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC);
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    command
        .stdout(Stdio::from(out_write))
        .stderr(Stdio::from(err_write));
    let stdin = match opts.stdin {
        true => {
            let (read, write) = pipe()?;
            command.stdin(Stdio::from(read));
            Some(write)
        }
        false => {
            command.stdin(Stdio::null());
            None
        }
    };
    Ok(Kept::Pipes {
        stdin,
        stdout: out_read,
        stderr: err_read,
    })
}

impl Kept {
    /// Once runc started the container: the shim's [`stdio::Stdio`] and the output streams
    /// to copy.
    fn into_stdio(self, opts: &Options) -> anyhow::Result<(stdio::Stdio, Vec<(Stream, File)>)> {
        if let Some(dir) = opts.log_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = stdio::open_log(&opts.log_path)
            .with_context(|| format!("opening log {}", opts.log_path.display()))?;
        let (stdin, terminal, outputs) = match self {
            Kept::Pipes {
                stdin,
                stdout,
                stderr,
            } => (
                stdin.map(File::from),
                None,
                vec![
                    (Stream::Stdout, File::from(stdout)),
                    (Stream::Stderr, File::from(stderr)),
                ],
            ),
            Kept::Terminal(console) => {
                let master = console.receive()?;
                let stdin = match opts.stdin {
                    true => Some(File::from(master.try_clone()?)),
                    false => None,
                };
                let output = File::from(master.try_clone()?);
                (stdin, Some(master), vec![(Stream::Stdout, output)])
            }
        };
        let stdio = stdio::Stdio::new(log, opts.log_path.clone(), stdin, opts.stdin_once, terminal);
        Ok((stdio, outputs))
    }
}

/// The error messages runc logged (JSON log lines with `"level":"error"`).
fn runc_error(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let messages: Vec<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|entry| entry["level"] == "error" || entry["level"] == "fatal")
        .filter_map(|entry| entry["msg"].as_str().map(str::to_string))
        .collect();
    (!messages.is_empty()).then(|| messages.join(": "))
}

fn start_copiers(
    stdio: &Arc<stdio::Stdio>,
    outputs: Vec<(Stream, File)>,
) -> anyhow::Result<std::sync::mpsc::Receiver<()>> {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for (stream, src) in outputs {
        let (stdio, done) = (stdio.clone(), done_tx.clone());
        std::thread::Builder::new()
            .stack_size(attach::THREAD_STACK)
            .spawn(move || {
                if let Err(err) = stdio.copy(stream, src) {
                    eprintln!("copying container output: {err}");
                }
                let _ = done.send(());
            })?;
    }
    Ok(done_rx)
}

/// Reaps children until `init` exits; returns its exit code (`128 + signal` if killed).
/// Other reparented descendants are reaped along the way.
fn wait_for(init: Pid) -> i32 {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == init => return code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == init => return 128 + signal as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(err) => {
                eprintln!("waitpid: {err}");
                return 255;
            }
        }
    }
}

/// Waits for the `outputs` copiers to see EOF, at most [`DRAIN_DEADLINE`] in total.
fn drain(copiers: std::sync::mpsc::Receiver<()>, outputs: usize) {
    let deadline = std::time::Instant::now() + DRAIN_DEADLINE;
    for _ in 0..outputs {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if copiers.recv_timeout(left).is_err() {
            return;
        }
    }
}

fn single_line(text: &str) -> String {
    text.replace('\n', " ")
}
