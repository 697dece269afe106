//! Reading an image archive safely: a directory (an OCI image layout, an unpacked
//! `docker save`) or a tar of one, plain or gzip-compressed. A tar is unpacked into a
//! scratch directory first (symlinks and hard links are remembered, not created), and
//! every name, whether from the tar or from the archive's JSON, must stay inside it.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

use super::Error;
use crate::snapshot::atomic;

/// JSON documents (index, manifests, configs) larger than this are refused.
const MAX_DOCUMENT: u64 = 16 << 20;
/// Links followed at most when resolving one name.
const MAX_LINKS: usize = 16;

/// An opened archive.
pub struct Archive {
    /// Where the files are: the directory itself, or the scratch copy of a tar.
    root: PathBuf,
    /// The archive as given, for errors.
    source: String,
    /// Symlinks and hard links of a tar: clean name -> clean target name.
    links: HashMap<String, String>,
    /// The scratch directory, removed on drop (tar archives only).
    scratch: Option<PathBuf>,
}

impl Archive {
    /// Opens the directory or tar file at `path`; a tar is unpacked under `scratch_dir`
    /// (in a temporary entry removed on drop, or at the owner's next start).
    pub fn open(path: &Path, scratch_dir: &Path) -> Result<Archive, Error> {
        let source = path.display().to_string();
        let meta = fs::metadata(path).map_err(|err| io_error(&source, "open archive", err))?;
        if meta.is_dir() {
            return Ok(Archive {
                root: path.to_path_buf(),
                source,
                links: HashMap::new(),
                scratch: None,
            });
        }
        fs::create_dir_all(scratch_dir)
            .map_err(|err| io_error(&source, "create scratch directory", err))?;
        let scratch = atomic::temp_path(&scratch_dir.join("archive"));
        let mut archive = Archive {
            root: scratch.clone(),
            source,
            links: HashMap::new(),
            scratch: Some(scratch),
        };
        archive.unpack(path)?;
        Ok(archive)
    }

    /// The archive as given, for messages.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the archive has a regular file `name`.
    pub fn has(&self, name: &str) -> bool {
        self.path(name).is_ok()
    }

    /// The contents of the JSON document `name`.
    pub fn read_json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, Error> {
        let path = self.path(name)?;
        let file = fs::File::open(&path).map_err(|err| self.io(&format!("open {name}"), err))?;
        let mut data = Vec::new();
        file.take(MAX_DOCUMENT + 1)
            .read_to_end(&mut data)
            .map_err(|err| self.io(&format!("read {name}"), err))?;
        if data.len() as u64 > MAX_DOCUMENT {
            return Err(self.invalid(format!("{name} is larger than {MAX_DOCUMENT} bytes")));
        }
        serde_json::from_slice(&data).map_err(|err| self.invalid(format!("{name}: {err}")))
    }

    /// Where the regular file `name` is. Errors: the name leaves the archive (path
    /// escape), or there is no such file.
    pub fn path(&self, name: &str) -> Result<PathBuf, Error> {
        let mut current = clean(name).map_err(|reason| self.escape(name, reason))?;
        for _ in 0..MAX_LINKS {
            match self.links.get(&current) {
                Some(target) => current = target.clone(),
                None => break,
            }
        }
        let path = self.root.join(&current);
        if self.scratch.is_none() {
            // A directory may hold symlinks of its own: they must not lead outside.
            let root = self
                .root
                .canonicalize()
                .map_err(|err| self.io("resolve archive directory", err))?;
            match path.canonicalize() {
                Ok(resolved) if !resolved.starts_with(&root) => {
                    return Err(self.escape(name, "a symlink leads outside the archive"));
                }
                Ok(_) => {}
                Err(_) => return Err(self.missing(name)),
            }
        }
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() => Ok(path),
            _ => Err(self.missing(name)),
        }
    }

    fn unpack(&mut self, tar_path: &Path) -> Result<(), Error> {
        let file = fs::File::open(tar_path).map_err(|err| self.io("open archive", err))?;
        let mut reader = BufReader::new(file);
        let gzip = reader
            .fill_buf()
            .map(|head| head.starts_with(&[0x1f, 0x8b]))
            .map_err(|err| self.io("read archive", err))?;
        let reader: Box<dyn Read> = if gzip {
            Box::new(flate2::read::GzDecoder::new(reader))
        } else {
            Box::new(reader)
        };
        fs::create_dir(&self.root).map_err(|err| self.io("create scratch directory", err))?;
        let mut tar = tar::Archive::new(reader);
        let entries = tar
            .entries()
            .map_err(|err| self.invalid(format!("not a tar archive: {err}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|err| self.invalid(format!("bad tar entry: {err}")))?;
            let raw = entry.path_bytes().into_owned();
            let name = String::from_utf8(raw)
                .map_err(|_| self.invalid("a tar entry name is not UTF-8".to_string()))?;
            let name = clean(&name).map_err(|reason| self.escape(&name, reason))?;
            if name.is_empty() {
                continue;
            }
            let kind = entry.header().entry_type();
            if kind.is_dir() {
                let dir = self.root.join(&name);
                fs::create_dir_all(&dir).map_err(|err| self.io(&format!("unpack {name}"), err))?;
            } else if kind.is_file() {
                let path = self.root.join(&name);
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)
                        .map_err(|err| self.io(&format!("unpack {name}"), err))?;
                }
                self.links.remove(&name);
                let mut out = fs::File::create(&path)
                    .map_err(|err| self.io(&format!("unpack {name}"), err))?;
                io::copy(&mut entry, &mut out)
                    .map_err(|err| self.invalid(format!("truncated entry {name}: {err}")))?;
            } else if kind.is_symlink() || kind.is_hard_link() {
                let target = entry
                    .link_name_bytes()
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                    .unwrap_or_default();
                // Symlinks are relative to their directory, hard links to the archive root.
                let joined = match (kind.is_symlink(), name.rsplit_once('/')) {
                    (true, Some((dir, _))) if !target.starts_with('/') => {
                        format!("{dir}/{target}")
                    }
                    _ => target.clone(),
                };
                let resolved = clean(&joined).map_err(|reason| self.escape(&name, reason))?;
                self.links.insert(name, resolved);
            }
            // Other entry kinds (devices, fifos) have no place in an image archive.
        }
        Ok(())
    }

    fn io(&self, context: &str, err: io::Error) -> Error {
        io_error(&self.source, context, err)
    }

    fn invalid(&self, detail: String) -> Error {
        Error::InvalidContent {
            image: self.source.clone(),
            detail,
        }
    }

    fn escape(&self, name: &str, reason: &str) -> Error {
        self.invalid(format!("path escape: {name:?}: {reason}"))
    }

    fn missing(&self, name: &str) -> Error {
        self.invalid(format!("missing file {name:?}"))
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        if let Some(scratch) = &self.scratch {
            let _ = fs::remove_dir_all(scratch);
        }
    }
}

fn io_error(source: &str, context: &str, err: io::Error) -> Error {
    Error::Io {
        image: source.to_string(),
        context: context.to_string(),
        source: err,
    }
}

/// `name` as a plain relative path (`./a//b` -> `a/b`, `a/../b` -> `b`). Errors:
/// absolute, or a `..` that climbs out of the archive.
fn clean(name: &str) -> Result<String, &'static str> {
    let mut parts = Vec::new();
    for component in Path::new(name).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop().ok_or("`..` leads outside the archive")?;
            }
            Component::RootDir | Component::Prefix(_) => return Err("absolute path"),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_the_archive() {
        assert_eq!(clean("./blobs//sha256/ab"), Ok("blobs/sha256/ab".into()));
        assert_eq!(clean("a/../b/layer.tar"), Ok("b/layer.tar".into()));
        assert!(clean("../etc/passwd").is_err());
        assert!(clean("a/../../b").is_err());
        assert!(clean("/etc/passwd").is_err());
    }
}
