//! The Skiff flavor: `skiff runtime` with the runtime's private directories.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::Context;

static SKIFF_BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Sets the `skiff` binary the Skiff flavor runs, once per process (in the binary's
/// tests: `env!("CARGO_BIN_EXE_skiff")`; `crates/skiff/tests/common` does it). Later
/// calls are ignored.
pub fn set_skiff_binary(path: impl Into<PathBuf>) {
    let _ = SKIFF_BINARY.set(path.into());
}

/// The binary set by [`set_skiff_binary`], else `$SKIFF_BIN`.
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = SKIFF_BINARY.get() {
        return Ok(path.clone());
    }
    std::env::var_os("SKIFF_BIN")
        .map(PathBuf::from)
        .context("no skiff binary: call skiff_testkit::cri::set_skiff_binary or set SKIFF_BIN")
}

/// The CRI socket of a runtime in `dir`.
pub(super) fn socket(dir: &Path) -> PathBuf {
    dir.join("st/skiff.sock")
}

/// Writes `dir/skiff.toml` and returns `skiff runtime --config dir/skiff.toml`: root
/// `dir/rt`, state `dir/st`, CNI config in `dir/cni` with plugins from `/usr/lib/cni`,
/// `subnet` as pod CIDR, the streaming server on a free loopback port. The local
/// registry needs no entry (loopback registries are spoken to in plain HTTP).
pub(super) fn command(dir: &Path, subnet: &str) -> anyhow::Result<Command> {
    let config = dir.join("skiff.toml");
    std::fs::write(&config, config_toml(dir, subnet))?;
    write_gated_runc(dir)?;
    let mut cmd = Command::new(binary()?);
    cmd.arg("runtime")
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "info");
    Ok(cmd)
}

/// The runtime handler `gated`: runc behind [`GATED_RUNC`], which holds every `runc run`
/// while the file `<dir>/gate-closed` exists, after creating `<dir>/gate-waiting`. Tests
/// use it to keep one container's start in flight.
pub const GATED_HANDLER: &str = "gated";
/// The wrapper script of [`GATED_HANDLER`], in the runtime's directory.
pub const GATED_RUNC: &str = "gated-runc";

fn write_gated_runc(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let gate = dir.join("gate-closed");
    let waiting = dir.join("gate-waiting");
    let script = format!(
        "#!/bin/sh\nfor arg in \"$@\"; do\n  if [ \"$arg\" = run ]; then\n    while [ -e '{gate}' ]; do : > '{waiting}'; sleep 0.05; done\n    break\n  fi\ndone\nexec /usr/sbin/runc \"$@\"\n",
        gate = gate.display(),
        waiting = waiting.display(),
    );
    let path = dir.join(GATED_RUNC);
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn config_toml(dir: &Path, subnet: &str) -> String {
    let path = |sub: &str| super::toml_string(&dir.join(sub));
    format!(
        "root = {root}\nstate = {state}\n\n[cni]\nconf_dir = {cni}\nbin_dirs = [\"{bin}\"]\npod_cidr = \"{subnet}\"\n\n[stream]\naddress = \"127.0.0.1\"\nport = 0\n\n[runtimes.{GATED_HANDLER}]\nbinary = {gated}\n",
        root = path("rt"),
        state = path("st"),
        cni = path("cni"),
        bin = super::CNI_BIN_DIR,
        gated = path(GATED_RUNC),
    )
}
