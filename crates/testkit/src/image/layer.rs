//! Image layers: deterministic tar archives and their compressed blobs.

use std::io::Write;

use super::sha256_digest;

/// mtime of every tar entry: 2024-01-01T00:00:00Z.
const MTIME: u64 = 1_704_067_200;

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

/// One entry of a layer tar, owned by uid/gid 0 with a fixed mtime.
///
/// Whiteouts are plain entries with the OCI names: an empty file `dir/.wh.<name>` hides
/// `dir/<name>` of lower layers, `dir/.wh..wh..opq` makes `dir` opaque.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TarEntry {
    /// A directory with permission bits `mode` (e.g. `0o1777`).
    Dir { path: String, mode: u32 },
    /// A regular file with permission bits `mode` holding `data`.
    File {
        path: String,
        mode: u32,
        data: Vec<u8>,
    },
    /// A symbolic link to `target`.
    Symlink { path: String, target: String },
}

impl TarEntry {
    /// A directory entry.
    pub fn dir(path: impl Into<String>, mode: u32) -> TarEntry {
        TarEntry::Dir {
            path: path.into(),
            mode,
        }
    }

    /// A regular file entry.
    pub fn file(path: impl Into<String>, mode: u32, data: impl Into<Vec<u8>>) -> TarEntry {
        TarEntry::File {
            path: path.into(),
            mode,
            data: data.into(),
        }
    }

    /// A symlink entry (mode 0777).
    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> TarEntry {
        TarEntry::Symlink {
            path: path.into(),
            target: target.into(),
        }
    }
}

/// An uncompressed layer tar (ustar) of `entries`, in order. Same entries, same bytes.
///
/// Errors: a path or link target the tar format cannot hold.
pub fn layer_tar(entries: &[TarEntry]) -> anyhow::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for entry in entries {
        match entry {
            TarEntry::Dir { path, mode } => {
                let mut h = header(tar::EntryType::Directory, *mode, 0);
                tar.append_data(&mut h, path, std::io::empty())?;
            }
            TarEntry::File { path, mode, data } => {
                let mut h = header(tar::EntryType::Regular, *mode, data.len() as u64);
                tar.append_data(&mut h, path, data.as_slice())?;
            }
            TarEntry::Symlink { path, target } => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                tar.append_link(&mut h, path, target)?;
            }
        }
    }
    Ok(tar.into_inner()?)
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

/// A layer of an image: its uncompressed tar and how it is compressed in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The uncompressed tar (see [`layer_tar`]).
    pub tar: Vec<u8>,
    /// The blob's compression.
    pub compression: Compression,
}

impl Layer {
    /// A layer from an uncompressed `tar`, compressed with `compression`.
    pub fn new(tar: Vec<u8>, compression: Compression) -> Layer {
        Layer { tar, compression }
    }

    /// The diff ID (`sha256:<hex>` of the uncompressed tar), as listed in the config's
    /// `rootfs.diff_ids`; for the bottom layer it is also the chain ID.
    pub fn diff_id(&self) -> String {
        sha256_digest(&self.tar)
    }

    /// The blob as stored in the registry.
    pub(crate) fn blob(&self) -> anyhow::Result<Vec<u8>> {
        Ok(match self.compression {
            Compression::None => self.tar.clone(),
            Compression::Gzip => {
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(&self.tar)?;
                enc.finish()?
            }
            Compression::Zstd => zstd::encode_all(self.tar.as_slice(), 3)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_entries_round_trip_and_layers_compress() {
        let tar = layer_tar(&[
            TarEntry::dir("tmp", 0o1777),
            TarEntry::file("etc/.wh.old", 0o644, b""),
            TarEntry::symlink("bin/sh", "busybox"),
        ])
        .unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let seen: Vec<(String, tar::EntryType, u32, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                let path = e.path().unwrap().to_string_lossy().into_owned();
                (path, h.entry_type(), h.mode().unwrap(), h.mtime().unwrap())
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("tmp".into(), tar::EntryType::Directory, 0o1777, MTIME),
                ("etc/.wh.old".into(), tar::EntryType::Regular, 0o644, MTIME),
                ("bin/sh".into(), tar::EntryType::Symlink, 0o777, MTIME),
            ]
        );

        let gzip = Layer::new(tar.clone(), Compression::Gzip).blob().unwrap();
        let mut unzipped = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gzip[..]), &mut unzipped)
            .unwrap();
        assert_eq!(unzipped, tar);
        let zstd = Layer::new(tar.clone(), Compression::Zstd).blob().unwrap();
        assert_eq!(zstd::decode_all(zstd.as_slice()).unwrap(), tar);
        let plain = Layer::new(tar.clone(), Compression::None);
        assert_eq!(plain.blob().unwrap(), tar);
        assert_eq!(plain.diff_id(), sha256_digest(&tar));
    }
}
