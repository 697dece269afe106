//! A local registry serving the busybox test image, for demos and manual testing.
//!
//! `skiff-test-registry --listen IP:PORT --push REPO:TAG` starts Debian's
//! `docker-registry` on IP:PORT, pushes the busybox test image as REPO:TAG, prints
//! `ready IP:PORT/REPO:TAG` on stdout, then serves until SIGTERM or SIGINT, when it
//! stops the registry and removes its storage. Errors go to stderr with exit code 1.

use anyhow::{Context, bail};
use skiff_testkit::Registry;
use std::io::Write;

const USAGE: &str = "usage: skiff-test-registry --listen IP:PORT --push REPO:TAG";

struct Args {
    listen: String,
    repo: String,
    tag: String,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let mut listen = None;
    let mut push = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => listen = Some(value()?),
            "--push" => push = Some(value()?),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let listen = listen.with_context(|| format!("--listen IP:PORT is required\n{USAGE}"))?;
    let push = push.with_context(|| format!("--push REPO:TAG is required\n{USAGE}"))?;
    let Some((repo, tag)) = push.rsplit_once(':') else {
        bail!("--push {push:?} has no tag (REPO:TAG, e.g. skiff/busybox:latest)");
    };
    if repo.is_empty() || tag.is_empty() || repo.contains(':') {
        bail!("--push {push:?} is not REPO:TAG (e.g. skiff/busybox:latest)");
    }
    Ok(Args {
        listen,
        repo: repo.to_string(),
        tag: tag.to_string(),
    })
}

fn run() -> anyhow::Result<()> {
    let args = parse_args()?;
    // Blocked before any thread exists, so every thread inherits the mask and the signals
    // stay pending for `wait_for_signal` (children get a clean mask from std's spawn).
    let stop_signals = block_stop_signals()?;
    let registry = Registry::start_on(&args.listen)?;
    let image = skiff_testkit::busybox()?;
    let reference = skiff_testkit::push(registry.host(), &args.repo, &args.tag, &image)
        .with_context(|| format!("pushing the busybox image as {}:{}", args.repo, args.tag))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready {reference}")?;
    stdout.flush()?;
    drop(stdout);
    let signal = wait_for_signal(&stop_signals)?;
    eprintln!("signal {signal}: stopping the registry");
    drop(registry);
    Ok(())
}

/// Blocks SIGTERM and SIGINT in the calling thread; returns the set for `sigwait`.
fn block_stop_signals() -> anyhow::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data initialised by sigemptyset before use; the calls get
    // valid pointers to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc)).context("blocking SIGTERM/SIGINT");
        }
        Ok(set)
    }
}

/// Waits until one of the signals in `set` (blocked) arrives; returns its number.
fn wait_for_signal(set: &libc::sigset_t) -> anyhow::Result<libc::c_int> {
    let mut signal = 0;
    // SAFETY: `set` is an initialised signal set and `signal` a valid out pointer.
    let rc = unsafe { libc::sigwait(set, &mut signal) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc)).context("waiting for a signal");
    }
    Ok(signal)
}
