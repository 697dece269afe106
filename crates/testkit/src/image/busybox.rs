//! The busybox test image, built in memory from Debian's busybox-static.
//!
//! The image has one layer: `/bin/busybox` plus one symlink per applet in `/bin`,
//! `/etc/passwd` (root, nobody), `/etc/group` (root, nogroup) and the usual empty
//! directories (`/tmp` is 1777). The config sets `PATH` and `Cmd ["sh"]`. The same
//! options always give the same digests.

use std::process::Command;

use anyhow::{Context, bail};
use serde_json::json;

use super::{Image, ImageBuilder, Layer, MediaTypes, Platform, TarEntry, layer_tar};
use crate::Compression;

const BUSYBOX: &str = "/bin/busybox";
const PATH_ENV: &str = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
const DIRS: &[(&str, u32)] = &[
    ("bin", 0o755),
    ("dev", 0o755),
    ("etc", 0o755),
    ("home", 0o755),
    ("proc", 0o555),
    ("root", 0o700),
    ("sys", 0o555),
    ("tmp", 0o1777),
    ("var", 0o755),
    ("var/www", 0o755),
];
const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// How to build the busybox image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageOptions {
    /// Layer compression; default gzip.
    pub compression: Compression,
    /// OCI (default) or Docker media types.
    pub media_types: MediaTypes,
    /// Tag an image index (manifest list) holding the linux/amd64 manifest and a dummy
    /// linux/arm64/v8 one (an empty layer), instead of the amd64 manifest itself.
    pub index: bool,
}

/// The busybox test image with default options: OCI media types, gzip, no index.
pub fn busybox() -> anyhow::Result<Image> {
    busybox_with(&ImageOptions::default())
}

/// The busybox test image with `options`; its first platform is linux/amd64.
///
/// Errors: `/bin/busybox` is missing or `busybox --list` fails.
pub fn busybox_with(options: &ImageOptions) -> anyhow::Result<Image> {
    let config = json!({"Env": [PATH_ENV], "Cmd": ["sh"]});
    let layer = Layer::new(busybox_layer()?, options.compression);
    let mut builder = ImageBuilder::new()
        .media_types(options.media_types)
        .platform(Platform::new("amd64", vec![layer]).config(config.clone()));
    if options.index {
        let empty = Layer::new(layer_tar(&[])?, options.compression);
        builder = builder
            .platform(
                Platform::new("arm64", vec![empty])
                    .variant("v8")
                    .config(config),
            )
            .index();
    }
    builder.build()
}

/// The busybox layer with an image config of `config` (`Entrypoint`, `Cmd`,
/// `WorkingDir`, `StopSignal`, ...) plus `Env: [PATH]` unless `config` sets `Env`.
///
/// Errors: as [`busybox`].
pub fn busybox_configured(config: serde_json::Value) -> anyhow::Result<Image> {
    let mut config = config;
    if let Some(obj) = config.as_object_mut() {
        obj.entry("Env").or_insert_with(|| json!([PATH_ENV]));
    }
    let layer = Layer::new(busybox_layer()?, Compression::Gzip);
    ImageBuilder::new()
        .platform(Platform::new("amd64", vec![layer]).config(config))
        .build()
}

/// A stand-in for the Kubernetes pause image, for runtimes that run a sandbox container
/// (containerd's `sandbox_image`): the busybox layer with `Entrypoint
/// ["/bin/sleep", "2147483647"]`.
///
/// Tests cannot fetch `registry.k8s.io/pause` (no internet). The stand-in holds the pod's
/// namespaces just as well; unlike the real pause it does not reap zombies of a shared
/// PID namespace and, as PID 1, ignores SIGTERM, so stopping the sandbox takes the
/// runtime's SIGKILL path.
pub fn pause() -> anyhow::Result<Image> {
    let config = json!({"Env": [PATH_ENV], "Entrypoint": ["/bin/sleep", "2147483647"]});
    let layer = Layer::new(busybox_layer()?, Compression::Gzip);
    ImageBuilder::new()
        .platform(Platform::new("amd64", vec![layer]).config(config))
        .build()
}

/// The uncompressed busybox layer.
fn busybox_layer() -> anyhow::Result<Vec<u8>> {
    let binary = std::fs::read(BUSYBOX).with_context(|| format!("reading {BUSYBOX}"))?;
    let out = Command::new(BUSYBOX)
        .arg("--list")
        .output()
        .with_context(|| format!("running {BUSYBOX} --list"))?;
    if !out.status.success() {
        bail!("{BUSYBOX} --list failed: {}", out.status);
    }
    let mut applets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox" && !a.contains('/'))
        .map(String::from)
        .collect();
    applets.sort();
    applets.dedup();

    let mut entries: Vec<TarEntry> = DIRS
        .iter()
        .map(|(dir, mode)| TarEntry::dir(*dir, *mode))
        .collect();
    entries.push(TarEntry::file("bin/busybox", 0o755, binary));
    entries.extend(
        applets
            .iter()
            .map(|applet| TarEntry::symlink(format!("bin/{applet}"), "busybox")),
    );
    entries.push(TarEntry::file("etc/passwd", 0o644, PASSWD));
    entries.push(TarEntry::file("etc/group", 0o644, GROUP));
    layer_tar(&entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn busybox_layer_has_applets_users_and_dirs() {
        let layer = busybox_layer().unwrap();
        let mut archive = tar::Archive::new(layer.as_slice());
        let entries: Vec<(String, tar::EntryType, u32)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                (path, h.entry_type(), h.mode().unwrap())
            })
            .collect();
        let find = |p: &str| entries.iter().find(|e| e.0 == p).cloned();
        assert_eq!(find("tmp").map(|e| e.2), Some(0o1777));
        assert_eq!(
            find("bin/busybox").map(|e| e.1),
            Some(tar::EntryType::Regular)
        );
        assert_eq!(find("bin/sh").map(|e| e.1), Some(tar::EntryType::Symlink));
        assert!(find("bin/httpd").is_some() && find("etc/passwd").is_some());
        assert!(find("var/www").is_some());
    }

    #[test]
    fn pause_sleeps_forever_as_its_entrypoint() {
        let image = pause().unwrap();
        let blob = image
            .blobs
            .iter()
            .find(|b| b.digest == image.config_digest());
        let config: Value = serde_json::from_slice(&blob.unwrap().data).unwrap();
        assert_eq!(
            config["config"]["Entrypoint"],
            json!(["/bin/sleep", "2147483647"])
        );
        assert_ne!(image.digest(), busybox().unwrap().digest());
    }

    #[test]
    fn builds_are_deterministic() {
        let opts = ImageOptions {
            index: true,
            ..Default::default()
        };
        let (a, b) = (busybox_with(&opts).unwrap(), busybox_with(&opts).unwrap());
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.children.len(), 2);
        assert_eq!(a.media_type(), "application/vnd.oci.image.index.v1+json");
        let config: Value = serde_json::from_slice(
            &a.blobs
                .iter()
                .find(|b| b.digest == a.config_digest())
                .unwrap()
                .data,
        )
        .unwrap();
        assert_eq!(config["architecture"], "amd64");
        assert_eq!(config["config"]["Cmd"], json!(["sh"]));
    }
}
