//! The busybox test image, built in memory from Debian's busybox-static.
//!
//! The image has one layer: `/bin/busybox` plus one symlink per applet in `/bin`,
//! `/etc/passwd` (root, nobody), `/etc/group` (root, nogroup) and the usual empty
//! directories (`/tmp` is 1777). The config sets `PATH` and `Cmd ["sh"]`. Tar entries
//! have a fixed mtime and uid/gid 0, so the same options always give the same digests.

use std::io::Write;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BUSYBOX: &str = "/bin/busybox";
/// mtime of every tar entry: 2024-01-01T00:00:00Z.
const MTIME: u64 = 1_704_067_200;
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

/// Layer compression.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// `tar+gzip` / `tar.gzip` layers.
    #[default]
    Gzip,
    /// `tar+zstd` / `tar.zstd` layers.
    Zstd,
    /// Uncompressed `tar` layers.
    None,
}

/// Which media types the manifests, configs and layers use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MediaTypes {
    /// `application/vnd.oci.image.*` (image-spec 1.0).
    #[default]
    Oci,
    /// `application/vnd.docker.distribution.manifest.v2+json` (Docker schema 2).
    Docker,
}

/// How to build the image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageOptions {
    /// Layer compression; default gzip.
    pub compression: Compression,
    /// OCI (default) or Docker media types.
    pub media_types: MediaTypes,
    /// Tag an image index (manifest list) holding the linux/amd64 manifest and a dummy
    /// linux/arm64/v8 one, instead of the amd64 manifest itself.
    pub index: bool,
}

/// A content-addressed document: a blob, a manifest or an index.
pub(crate) struct Content {
    pub media_type: String,
    pub digest: String,
    pub data: Vec<u8>,
}

impl Content {
    fn new(media_type: &str, data: Vec<u8>) -> Content {
        Content {
            media_type: media_type.to_string(),
            digest: sha256_digest(&data),
            data,
        }
    }

    fn descriptor(&self) -> Value {
        json!({"mediaType": self.media_type, "digest": self.digest, "size": self.data.len()})
    }
}

/// An image held in memory, ready for [`push`](crate::push).
pub struct Image {
    /// Layers and configs of every platform.
    pub(crate) blobs: Vec<Content>,
    /// Per-platform manifests, pushed by digest before `top` (empty without an index).
    pub(crate) children: Vec<Content>,
    /// What the tag points to: the amd64 manifest, or the index.
    pub(crate) top: Content,
    manifest_digest: String,
    config_digest: String,
}

impl Image {
    /// Digest of what the tag resolves to (`sha256:<hex>`): the index when built with
    /// [`ImageOptions::index`], else the amd64 manifest. This is the registry's
    /// `Docker-Content-Digest` for the tag.
    pub fn digest(&self) -> &str {
        &self.top.digest
    }

    /// Media type of what the tag resolves to (manifest or index).
    pub fn media_type(&self) -> &str {
        &self.top.media_type
    }

    /// Digest of the linux/amd64 image manifest.
    pub fn manifest_digest(&self) -> &str {
        &self.manifest_digest
    }

    /// Digest of the linux/amd64 config blob: the image ID a runtime reports.
    pub fn config_digest(&self) -> &str {
        &self.config_digest
    }
}

/// The busybox test image with default options: OCI media types, gzip, no index.
pub fn busybox() -> anyhow::Result<Image> {
    busybox_with(&ImageOptions::default())
}

/// The busybox test image with `options`.
///
/// Errors: `/bin/busybox` is missing or `busybox --list` fails.
pub fn busybox_with(options: &ImageOptions) -> anyhow::Result<Image> {
    let types = Types::new(options);
    let mut blobs = Vec::new();
    let amd64 = platform_manifest(&types, "amd64", busybox_layer()?, &mut blobs)?;
    let manifest_digest = amd64.digest.clone();
    let config_digest = blobs
        .iter()
        .find(|b| b.media_type == types.config)
        .map(|b| b.digest.clone())
        .context("config blob missing")?;
    if !options.index {
        return Ok(Image {
            blobs,
            children: Vec::new(),
            top: amd64,
            manifest_digest,
            config_digest,
        });
    }
    let arm64 = platform_manifest(&types, "arm64", empty_layer()?, &mut blobs)?;
    let platform = |arch: &str| match arch {
        "arm64" => json!({"architecture": arch, "os": "linux", "variant": "v8"}),
        _ => json!({"architecture": arch, "os": "linux"}),
    };
    let mut manifests = Vec::new();
    for (arch, m) in [("amd64", &amd64), ("arm64", &arm64)] {
        let mut d = m.descriptor();
        d["platform"] = platform(arch);
        manifests.push(d);
    }
    let index = json!({"schemaVersion": 2, "mediaType": types.index, "manifests": manifests});
    Ok(Image {
        blobs,
        children: vec![amd64, arm64],
        top: Content::new(types.index, serde_json::to_vec(&index)?),
        manifest_digest,
        config_digest,
    })
}

/// The media types for one [`ImageOptions`].
struct Types {
    manifest: &'static str,
    index: &'static str,
    config: &'static str,
    layer: &'static str,
    compression: Compression,
}

impl Types {
    fn new(options: &ImageOptions) -> Types {
        let c = options.compression;
        match options.media_types {
            MediaTypes::Oci => Types {
                manifest: "application/vnd.oci.image.manifest.v1+json",
                index: "application/vnd.oci.image.index.v1+json",
                config: "application/vnd.oci.image.config.v1+json",
                layer: match c {
                    Compression::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
                    Compression::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
                    Compression::None => "application/vnd.oci.image.layer.v1.tar",
                },
                compression: c,
            },
            MediaTypes::Docker => Types {
                manifest: "application/vnd.docker.distribution.manifest.v2+json",
                index: "application/vnd.docker.distribution.manifest.list.v2+json",
                config: "application/vnd.docker.container.image.v1+json",
                layer: match c {
                    Compression::Gzip => "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    Compression::Zstd => "application/vnd.docker.image.rootfs.diff.tar.zstd",
                    Compression::None => "application/vnd.docker.image.rootfs.diff.tar",
                },
                compression: c,
            },
        }
    }
}

/// Builds config + layer blobs for `arch` (appended to `blobs`) and returns the manifest.
fn platform_manifest(
    types: &Types,
    arch: &str,
    tar: Vec<u8>,
    blobs: &mut Vec<Content>,
) -> anyhow::Result<Content> {
    let diff_id = sha256_digest(&tar);
    let layer = Content::new(types.layer, compress(types.compression, tar)?);
    let config = json!({
        "architecture": arch,
        "os": "linux",
        "config": {"Env": [PATH_ENV], "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    });
    let config = Content::new(types.config, serde_json::to_vec(&config)?);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": types.manifest,
        "config": config.descriptor(),
        "layers": [layer.descriptor()],
    });
    blobs.push(config);
    blobs.push(layer);
    Ok(Content::new(types.manifest, serde_json::to_vec(&manifest)?))
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

    let mut tar = tar::Builder::new(Vec::new());
    for (dir, mode) in DIRS {
        append(&mut tar, tar::EntryType::Directory, dir, *mode, b"")?;
    }
    append(
        &mut tar,
        tar::EntryType::Regular,
        "bin/busybox",
        0o755,
        &binary,
    )?;
    for applet in &applets {
        let mut header = header(tar::EntryType::Symlink, 0o777, 0);
        tar.append_link(&mut header, format!("bin/{applet}"), "busybox")?;
    }
    append(
        &mut tar,
        tar::EntryType::Regular,
        "etc/passwd",
        0o644,
        PASSWD.as_bytes(),
    )?;
    append(
        &mut tar,
        tar::EntryType::Regular,
        "etc/group",
        0o644,
        GROUP.as_bytes(),
    )?;
    Ok(tar.into_inner()?)
}

/// An uncompressed tar with no entries (the dummy arm64 layer).
fn empty_layer() -> anyhow::Result<Vec<u8>> {
    Ok(tar::Builder::new(Vec::new()).into_inner()?)
}

fn append(
    tar: &mut tar::Builder<Vec<u8>>,
    kind: tar::EntryType,
    path: &str,
    mode: u32,
    data: &[u8],
) -> anyhow::Result<()> {
    let mut header = header(kind, mode, data.len() as u64);
    tar.append_data(&mut header, path, data)?;
    Ok(())
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(MTIME);
    h
}

fn compress(compression: Compression, tar: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    Ok(match compression {
        Compression::None => tar,
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(&tar)?;
            enc.finish()?
        }
        Compression::Zstd => zstd::encode_all(tar.as_slice(), 3)?,
    })
}

/// `sha256:<hex>` of `data`.
pub(crate) fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(tar: &[u8]) -> Vec<(String, tar::EntryType, u32)> {
        let mut archive = tar::Archive::new(tar);
        archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                (path, h.entry_type(), h.mode().unwrap())
            })
            .collect()
    }

    #[test]
    fn busybox_layer_has_applets_users_and_dirs() {
        let layer = busybox_layer().unwrap();
        let entries = entries(&layer);
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
