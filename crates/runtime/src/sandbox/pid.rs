//! The pod's shared PID namespace (CRI pid mode `POD`): a PID namespace lives only as long
//! as its init, so a sandbox that shares one needs a process holding it. That holder is a
//! minimal init, `skiff pod-init` (hidden): it joins the pod's network, IPC and UTS
//! namespaces, unshares a PID namespace and forks its PID 1, which only reaps the orphans
//! that get reparented to it (SIGCHLD ignored, so the kernel reaps them) and sleeps.
//! Containers join `/proc/<holder>/ns/pid`. The holder is recorded (PID + start time) in
//! the persisted sandbox, so a restarted runtime finds it, and also, before its PID is
//! reported, in the sandbox's namespace directory ([`RECORD_FILE`]), so that a runtime
//! killed before it saved the sandbox still finds it when it cleans up; SIGKILLed by
//! StopPodSandbox and RemovePodSandbox: the kernel then kills everything left in the
//! namespace. Sandboxes that do not share their PID namespace have no process at all.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use nix::sched::CloneFlags;
use nix::sys::signal::{SigHandler, Signal};

use super::Sandbox;
use crate::error::Result;
use crate::process::ProcessId;
use crate::runtime::Runtime;

/// The subcommand the runtime runs as `<shim_binary> pod-init --ns PATH...`.
pub const SUBCOMMAND: &str = "pod-init";

/// `<state>/ns/<id>/pid-holder.json`: the holder's [`ProcessId`], written by
/// `skiff pod-init --record PATH` before it reports the PID.
pub const RECORD_FILE: &str = "pid-holder.json";

/// How long the holder may take to report its PID, and to die after SIGKILL.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `/proc/<pid>/ns/pid` of the holder: what containers of the pod join.
pub fn namespace_path(holder: &ProcessId) -> PathBuf {
    PathBuf::from(format!("/proc/{}/ns/pid", holder.pid))
}

/// Entry point of `skiff pod-init --record FILE [--ns PATH...]`: joins each namespace pin,
/// forks the PID namespace's init, records it in FILE ([`RECORD_FILE`]), prints its host
/// PID and exits. Must run before any
/// other thread exists (`setns` of some namespaces and `fork` need a single thread).
/// Returns the process exit code.
pub fn main(args: Vec<String>) -> i32 {
    match spawn_holder(&args) {
        Ok(pid) => {
            println!("{pid}");
            0
        }
        Err(err) => {
            eprintln!("skiff {SUBCOMMAND}: {err:#}");
            1
        }
    }
}

fn spawn_holder(args: &[String]) -> anyhow::Result<i32> {
    let mut args = args.iter();
    let mut record = None;
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--record", Some(path)) => record = Some(PathBuf::from(path)),
            ("--ns", Some(path)) => {
                let file = std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
                nix::sched::setns(file, CloneFlags::empty())
                    .with_context(|| format!("joining {path}"))?;
            }
            _ => bail!("usage: skiff {SUBCOMMAND} --record FILE [--ns PATH]..."),
        }
    }
    let record = record.with_context(|| format!("usage: skiff {SUBCOMMAND} --record FILE"))?;
    nix::sched::unshare(CloneFlags::CLONE_NEWPID).context("unshare(CLONE_NEWPID)")?;
    // SAFETY: single-threaded (see `main`); the child only makes async-signal-safe calls
    // before it parks forever.
    match unsafe { nix::unistd::fork() }.context("fork")? {
        nix::unistd::ForkResult::Parent { child } => {
            let holder = ProcessId::of(child.as_raw()).context("the holder exited at once")?;
            crate::store::write_volatile(&record, &serde_json::to_vec(&holder)?)?;
            Ok(child.as_raw())
        }
        nix::unistd::ForkResult::Child => hold(),
    }
}

/// PID 1 of the pod's PID namespace.
fn hold() -> ! {
    let _ = nix::unistd::setsid();
    let _ = nix::unistd::chdir("/");
    if let Ok(null) = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
    // SAFETY: setting a disposition, no handler code runs.
    let _ = unsafe { nix::sys::signal::signal(Signal::SIGCHLD, SigHandler::SigIgn) };
    loop {
        nix::unistd::pause();
    }
}

/// The holder recorded in the namespace directory `ns_dir`, if any.
pub fn recorded_holder(ns_dir: &std::path::Path) -> Option<ProcessId> {
    let data = std::fs::read(ns_dir.join(RECORD_FILE)).ok()?;
    serde_json::from_slice(&data).ok()
}

/// SIGKILLs the holder recorded in `ns_dir` if it still runs (without waiting).
pub fn kill_recorded_holder(ns_dir: &std::path::Path) {
    if let Some(holder) = recorded_holder(ns_dir).filter(ProcessId::is_alive) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(holder.pid), Signal::SIGKILL);
    }
}

impl Runtime {
    /// Starts the PID namespace holder of `sandbox` in its pinned namespaces.
    pub(crate) async fn start_pid_holder(&self, sandbox: &Sandbox) -> Result<ProcessId> {
        let ns_dir = self.sandbox_paths(&sandbox.id).ns;
        let mut cmd = tokio::process::Command::new(&self.config.shim_binary);
        cmd.arg(SUBCOMMAND)
            .arg("--record")
            .arg(ns_dir.join(RECORD_FILE))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for kind in &sandbox.pinned {
            cmd.arg("--ns").arg(super::ns::pin_path(&ns_dir, *kind));
        }
        let output = tokio::time::timeout(TIMEOUT, cmd.output())
            .await
            .context("the pod's PID namespace holder did not start in time")?
            .with_context(|| format!("running {}", self.config.shim_binary.display()))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let pid: i32 = match (output.status.success(), text.trim().parse()) {
            (true, Ok(pid)) => pid,
            _ => {
                return Err(anyhow::anyhow!(
                    "starting the pod's PID namespace holder ({}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                )
                .into());
            }
        };
        Ok(ProcessId::of(pid).context("the pod's PID namespace holder exited at once")?)
    }

    /// SIGKILLs the sandbox's PID namespace holder (and with it every process left in the
    /// namespace) and waits until it is gone. No holder, or a dead one, is fine. A holder
    /// the record lacks (the runtime was killed before saving it) is found in
    /// [`RECORD_FILE`].
    pub(crate) async fn stop_pid_holder(&self, sandbox: &mut Sandbox) -> Result<()> {
        let ns_dir = self.sandbox_paths(&sandbox.id).ns;
        let Some(holder) = sandbox.pid_holder.or_else(|| recorded_holder(&ns_dir)) else {
            return Ok(());
        };
        if holder.is_alive() {
            let pid = nix::unistd::Pid::from_raw(holder.pid);
            match nix::sys::signal::kill(pid, Signal::SIGKILL) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(err) => {
                    return Err(anyhow::anyhow!("killing the PID namespace holder: {err}").into());
                }
            }
            let deadline = tokio::time::Instant::now() + TIMEOUT;
            while holder.is_alive() {
                if tokio::time::Instant::now() >= deadline {
                    return Err(anyhow::anyhow!(
                        "the PID namespace holder {} did not die after SIGKILL",
                        holder.pid
                    )
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        sandbox.pid_holder = None;
        if self.sandboxes.get(&sandbox.id).is_some() {
            self.sandbox_store.save(&sandbox.id, &*sandbox)?;
        }
        Ok(())
    }
}
