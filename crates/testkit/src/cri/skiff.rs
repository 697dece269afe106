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

/// `skiff runtime` on `dir/rt` (root) and `dir/st` (state), with the CNI config in
/// `dir/cni`, plugins from `/usr/lib/cni`, and `subnet` as pod CIDR.
pub(super) fn command(dir: &Path, subnet: &str) -> anyhow::Result<Command> {
    let mut cmd = Command::new(binary()?);
    cmd.arg("runtime")
        .arg("--root")
        .arg(dir.join("rt"))
        .arg("--state")
        .arg(dir.join("st"))
        .arg("--cni-conf-dir")
        .arg(dir.join("cni"))
        .arg("--cni-bin-dir")
        .arg(super::CNI_BIN_DIR)
        .arg("--pod-cidr")
        .arg(subnet)
        .env("RUST_LOG", "info");
    Ok(cmd)
}
