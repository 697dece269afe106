//! Applying a layer: unpacking one layer tar (a filesystem changeset, OCI image spec
//! `layer.md`) into its own empty directory, in the form overlayfs expects for a lower dir.
//!
//! Every entry keeps its permissions, ownership, mtime and extended attributes; hard links,
//! symlinks, device nodes and FIFOs are recreated. OCI whiteouts become overlayfs whiteouts
//! (as containerd's overlay applier does): `.wh.NAME` becomes a 0:0 character device `NAME`,
//! `.wh..wh..opq` becomes the xattr `trusted.overlay.opaque=y` on its directory.
//! Nothing is ever written outside the destination: absolute entry names, `..` components and
//! paths that would go through a symlink climbing above the destination are rejected. As in
//! containerd (`fs.RootPath`, `hardlinkRootPath`), an absolute symlink met on a path and an
//! absolute hard link target are taken relative to the layer root.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

use nix::sys::stat::{Mode, SFlag, UtimensatFlags, makedev, mknod, utimensat};
use nix::sys::time::TimeSpec;
use sha2::{Digest, Sha256};

/// Prefix of an OCI whiteout file name (`.wh.NAME` deletes `NAME` from lower layers).
const WHITEOUT_PREFIX: &[u8] = b".wh.";
/// OCI opaque whiteout: hides all lower-layer content of its directory.
const OPAQUE_WHITEOUT: &[u8] = b".wh..wh..opq";
/// The xattr overlayfs reads to treat a directory as opaque.
const OVERLAY_OPAQUE_XATTR: &str = "trusted.overlay.opaque";
/// PAX record prefix under which tar stores extended attributes.
const PAX_XATTR_PREFIX: &[u8] = b"SCHILY.xattr.";
/// Symlinks followed while resolving one path, as Linux's own limit (`MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a layer could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// An entry (or a hard link target) would land outside the layer directory.
    #[error("layer entry {path:?} escapes the layer root: {reason}")]
    PathEscape {
        /// The entry name as written in the archive.
        path: PathBuf,
        /// What made it escape.
        reason: String,
    },
    /// The uncompressed archive does not hash to the diff ID from the image config.
    #[error("uncompressed layer is {actual}, the image config says {expected}")]
    DiffIdMismatch {
        /// `rootfs.diff_ids` entry from the image config.
        expected: String,
        /// sha256 of the uncompressed tar stream.
        actual: String,
    },
    /// Reading the archive or writing the filesystem failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> ApplyError {
    let context = context.into();
    move |source| ApplyError::Io { context, source }
}

fn nix_err(context: impl Into<String>) -> impl FnOnce(nix::Error) -> ApplyError {
    let context = context.into();
    move |errno| ApplyError::Io {
        context,
        source: io::Error::from(errno),
    }
}

/// Unpacks the layer blob at `blob` (gzip, zstd or plain tar, detected from its first
/// bytes) into the existing empty directory `dest`, and checks that the uncompressed
/// stream hashes to `diff_id` (`sha256:<hex>`).
///
/// Blocking; run it on a blocking thread. On error `dest` holds a partial tree that the
/// caller must discard.
pub fn apply_layer(blob: &Path, dest: &Path, diff_id: &str) -> Result<(), ApplyError> {
    let file = File::open(blob).map_err(io_err(format!("open {}", blob.display())))?;
    let reader =
        decompress(BufReader::new(file)).map_err(io_err(format!("read {}", blob.display())))?;
    let mut hashed = HashingReader::new(reader);
    apply_tar(&mut hashed, dest)?;
    // The tar reader may stop before the end-of-archive padding; the diff ID covers it all.
    io::copy(&mut hashed, &mut io::sink()).map_err(io_err(format!("read {}", blob.display())))?;
    let actual = hashed.digest();
    if actual != diff_id {
        return Err(ApplyError::DiffIdMismatch {
            expected: diff_id.to_string(),
            actual,
        });
    }
    Ok(())
}

/// Picks the decompressor from the magic bytes: gzip `1f 8b`, zstd `28 b5 2f fd`, else tar.
fn decompress(mut reader: BufReader<File>) -> io::Result<Box<dyn Read + Send>> {
    let head = reader.fill_buf()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(reader)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Ok(Box::new(zstd::stream::read::Decoder::with_buffer(reader)?))
    } else {
        Ok(Box::new(reader))
    }
}

/// Unpacks an uncompressed layer tar stream into `dest` (see the module docs).
fn apply_tar<R: Read>(reader: R, dest: &Path) -> Result<(), ApplyError> {
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    // Applied by `apply_xattrs` for every entry type (tar only does it for regular files).
    archive.set_unpack_xattrs(false);
    let mut dir_mtimes = Vec::new();
    let entries = archive.entries().map_err(io_err("read layer tar"))?;
    for entry in entries {
        let mut entry = entry.map_err(io_err("read layer tar entry"))?;
        apply_entry(dest, &mut entry, &mut dir_mtimes)?;
    }
    // Creating children changes a directory's mtime, so directories get theirs last.
    for (dir, mtime) in dir_mtimes {
        set_mtime(&dir, mtime)?;
    }
    Ok(())
}

fn apply_entry<R: Read>(
    root: &Path,
    entry: &mut tar::Entry<R>,
    dir_mtimes: &mut Vec<(PathBuf, u64)>,
) -> Result<(), ApplyError> {
    let kind = entry.header().entry_type();
    if kind.is_pax_global_extensions() {
        return Ok(());
    }
    let raw = entry
        .path()
        .map_err(io_err("read layer tar entry name"))?
        .into_owned();
    let mut parts = clean_path(&raw)?;
    let Some(name) = parts.pop() else {
        // The layer root itself (`./`): the snapshot directory already exists.
        return Ok(());
    };
    let parent = resolve_dir(root, &raw, &parts, true)?;
    let name_bytes = name.as_bytes();
    if name_bytes == OPAQUE_WHITEOUT {
        return set_xattr(&parent, OVERLAY_OPAQUE_XATTR.as_bytes(), b"y");
    }
    if let Some(hidden) = name_bytes.strip_prefix(WHITEOUT_PREFIX) {
        return make_whiteout(&parent.join(OsStr::from_bytes(hidden)));
    }
    let dst = parent.join(&name);
    replace_existing(&dst, kind.is_dir())?;
    match kind {
        tar::EntryType::Link => return make_hard_link(root, entry, &dst),
        tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
            make_node(&dst, entry.header(), kind)?;
        }
        _ => {
            entry
                .unpack(&dst)
                .map_err(io_err(format!("unpack {}", raw.display())))?;
        }
    }
    apply_xattrs(entry, &dst)?;
    if kind.is_dir()
        && let Ok(mtime) = entry.header().mtime()
    {
        dir_mtimes.push((dst, mtime));
    }
    Ok(())
}

/// Splits an entry name into plain components, rejecting absolute names and `..`.
fn clean_path(raw: &Path) -> Result<Vec<OsString>, ApplyError> {
    let mut parts = Vec::new();
    for component in raw.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_os_string()),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(escape(raw, "absolute path"));
            }
            Component::ParentDir => return Err(escape(raw, "`..` component")),
        }
    }
    Ok(parts)
}

fn escape(raw: &Path, reason: impl Into<String>) -> ApplyError {
    ApplyError::PathEscape {
        path: raw.to_path_buf(),
        reason: reason.into(),
    }
}

/// One step of a path walk: a name, or `..` coming from a symlink target.
enum Step {
    Name(OsString),
    Up,
}

/// Resolves the directory `parts` under `root`, following symlinks met on the way inside
/// `root`: an absolute target starts again at `root` (containerd's `fs.RootPath`), a target
/// climbing above `root` is rejected. With `create`, missing directories are created (mode 0755, as tar does).
fn resolve_dir(
    root: &Path,
    raw: &Path,
    parts: &[OsString],
    create: bool,
) -> Result<PathBuf, ApplyError> {
    let mut stack: Vec<OsString> = Vec::new();
    let mut pending: Vec<Step> = parts.iter().rev().cloned().map(Step::Name).collect();
    let mut hops = 0;
    while let Some(step) = pending.pop() {
        let part = match step {
            Step::Up => {
                if stack.pop().is_none() {
                    return Err(escape(raw, "a symlink on the path climbs above the root"));
                }
                continue;
            }
            Step::Name(part) => part,
        };
        let here: PathBuf = root
            .iter()
            .chain(stack.iter().map(OsString::as_os_str))
            .collect();
        let next = here.join(&part);
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(escape(raw, "too many levels of symlinks"));
                }
                let target =
                    fs::read_link(&next).map_err(io_err(format!("readlink {}", next.display())))?;
                let mut steps = Vec::new();
                for component in target.components() {
                    match component {
                        Component::Normal(name) => steps.push(Step::Name(name.to_os_string())),
                        Component::ParentDir => steps.push(Step::Up),
                        Component::CurDir => {}
                        Component::RootDir | Component::Prefix(_) => {
                            // Absolute: from the layer root, never the host's.
                            stack.clear();
                            steps.clear();
                        }
                    }
                }
                pending.extend(steps.into_iter().rev());
            }
            Ok(meta) if meta.is_dir() => stack.push(part),
            Ok(_) => {
                return Err(ApplyError::Io {
                    context: format!("resolve {}", raw.display()),
                    source: io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{} is not a directory", next.display()),
                    ),
                });
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound && create => {
                fs::DirBuilder::new()
                    .mode(0o755)
                    .create(&next)
                    .map_err(io_err(format!("mkdir {}", next.display())))?;
                stack.push(part);
            }
            Err(err) => return Err(io_err(format!("stat {}", next.display()))(err)),
        }
    }
    Ok(root
        .iter()
        .chain(stack.iter().map(OsString::as_os_str))
        .collect())
}

/// Removes what is at `dst` unless both it and the new entry are directories (tar semantics:
/// a later entry replaces an earlier one; a symlink is removed, never followed).
fn replace_existing(dst: &Path, new_is_dir: bool) -> Result<(), ApplyError> {
    let result = match fs::symlink_metadata(dst) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
        Ok(meta) if meta.is_dir() && new_is_dir => Ok(()),
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(dst),
        Ok(_) => fs::remove_file(dst),
    };
    result.map_err(io_err(format!("replace {}", dst.display())))
}

fn make_hard_link<R: Read>(
    root: &Path,
    entry: &tar::Entry<R>,
    dst: &Path,
) -> Result<(), ApplyError> {
    let target = entry
        .link_name()
        .map_err(io_err(format!("read link name of {}", dst.display())))?
        .ok_or_else(|| ApplyError::Io {
            context: format!("hard link {}", dst.display()),
            source: io::Error::new(io::ErrorKind::InvalidData, "no link target"),
        })?
        .into_owned();
    // An absolute target names a file of the layer (containerd's `hardlinkRootPath`).
    let relative = target.strip_prefix("/").unwrap_or(&target);
    let mut parts = clean_path(relative)?;
    let Some(name) = parts.pop() else {
        return Err(escape(&target, "hard link to the layer root"));
    };
    let source = resolve_dir(root, &target, &parts, false)?.join(name);
    fs::hard_link(&source, dst).map_err(io_err(format!(
        "hard link {} to {}",
        dst.display(),
        source.display()
    )))
}

fn make_node(dst: &Path, header: &tar::Header, kind: tar::EntryType) -> Result<(), ApplyError> {
    let context = format!("mknod {}", dst.display());
    let major = header
        .device_major()
        .map_err(io_err(&context))?
        .unwrap_or(0);
    let minor = header
        .device_minor()
        .map_err(io_err(&context))?
        .unwrap_or(0);
    let sflag = match kind {
        tar::EntryType::Char => SFlag::S_IFCHR,
        tar::EntryType::Block => SFlag::S_IFBLK,
        _ => SFlag::S_IFIFO,
    };
    let mode = header.mode().map_err(io_err(&context))? & 0o7777;
    mknod(
        dst,
        sflag,
        Mode::empty(),
        makedev(u64::from(major), u64::from(minor)),
    )
    .map_err(nix_err(&context))?;
    let uid = header.uid().map_err(io_err(&context))?;
    let gid = header.gid().map_err(io_err(&context))?;
    std::os::unix::fs::lchown(dst, u32::try_from(uid).ok(), u32::try_from(gid).ok())
        .map_err(io_err(format!("chown {}", dst.display())))?;
    // Set after chown (which clears set-id bits) and independent of the umask.
    fs::set_permissions(dst, std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(io_err(format!("chmod {}", dst.display())))?;
    if let Ok(mtime) = header.mtime() {
        set_mtime(dst, mtime)?;
    }
    Ok(())
}

/// An overlayfs whiteout: a character device 0:0 owned by root.
fn make_whiteout(dst: &Path) -> Result<(), ApplyError> {
    replace_existing(dst, false)?;
    mknod(dst, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0))
        .map_err(nix_err(format!("mknod whiteout {}", dst.display())))?;
    std::os::unix::fs::lchown(dst, Some(0), Some(0))
        .map_err(io_err(format!("chown {}", dst.display())))
}

fn apply_xattrs<R: Read>(entry: &mut tar::Entry<R>, dst: &Path) -> Result<(), ApplyError> {
    let context = format!("read xattrs of {}", dst.display());
    let Some(extensions) = entry.pax_extensions().map_err(io_err(&context))? else {
        return Ok(());
    };
    let mut xattrs = Vec::new();
    for extension in extensions {
        let extension = extension.map_err(io_err(&context))?;
        if let Some(name) = extension.key_bytes().strip_prefix(PAX_XATTR_PREFIX) {
            xattrs.push((name.to_vec(), extension.value_bytes().to_vec()));
        }
    }
    for (name, value) in xattrs {
        set_xattr(dst, &name, &value)?;
    }
    Ok(())
}

/// `lsetxattr(2)`: sets an extended attribute without following a final symlink.
fn set_xattr(path: &Path, name: &[u8], value: &[u8]) -> Result<(), ApplyError> {
    let context = || {
        format!(
            "set xattr {} on {}",
            String::from_utf8_lossy(name),
            path.display()
        )
    };
    let invalid = |_| ApplyError::Io {
        context: context(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in name"),
    };
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
    let c_name = CString::new(name).map_err(invalid)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; `value` is a valid
    // buffer of `value.len()` bytes.
    let rc = unsafe {
        libc::lsetxattr(
            c_path.as_ptr(),
            c_name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc != 0 {
        return Err(io_err(context())(io::Error::last_os_error()));
    }
    Ok(())
}

fn set_mtime(path: &Path, mtime: u64) -> Result<(), ApplyError> {
    let secs = i64::try_from(mtime).unwrap_or(i64::MAX);
    let time = TimeSpec::new(secs, 0);
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &time,
        &time,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(nix_err(format!("set mtime of {}", path.display())))
}

/// A reader that hashes (sha256) everything read through it.
struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> HashingReader<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// `sha256:<hex>` of everything read so far.
    fn digest(self) -> String {
        format!("sha256:{}", hex::encode(self.hasher.finalize()))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    /// Builds a tar archive in memory from (name, kind, content/link target) triples.
    struct TarBuilder {
        builder: tar::Builder<Vec<u8>>,
    }

    impl TarBuilder {
        fn new() -> Self {
            Self {
                builder: tar::Builder::new(Vec::new()),
            }
        }

        fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_mode(mode);
            header.set_size(size);
            header.set_uid(1234);
            header.set_gid(5678);
            header.set_mtime(1_000_000);
            header
        }

        /// Writes the name into the raw header bytes, bypassing the tar crate's own
        /// checks (so tests can produce hostile archives).
        fn raw_name(header: &mut tar::Header, name: &str) {
            let bytes = &mut header.as_old_mut().name;
            bytes.fill(0);
            bytes[..name.len()].copy_from_slice(name.as_bytes());
            header.set_cksum();
        }

        fn file(mut self, name: &str, data: &[u8]) -> Self {
            let mut header = Self::header(tar::EntryType::Regular, 0o640, data.len() as u64);
            Self::raw_name(&mut header, name);
            self.builder.append(&header, data).expect("append");
            self
        }

        fn dir(mut self, name: &str) -> Self {
            let mut header = Self::header(tar::EntryType::Directory, 0o750, 0);
            Self::raw_name(&mut header, name);
            self.builder.append(&header, io::empty()).expect("append");
            self
        }

        fn link(mut self, kind: tar::EntryType, name: &str, target: &str) -> Self {
            let mut header = Self::header(kind, 0o777, 0);
            header.set_link_name(target).expect("link name");
            Self::raw_name(&mut header, name);
            self.builder.append(&header, io::empty()).expect("append");
            self
        }

        fn device(mut self, name: &str, major: u32, minor: u32) -> Self {
            let mut header = Self::header(tar::EntryType::Char, 0o620, 0);
            header.set_device_major(major).expect("major");
            header.set_device_minor(minor).expect("minor");
            Self::raw_name(&mut header, name);
            self.builder.append(&header, io::empty()).expect("append");
            self
        }

        fn file_with_xattr(mut self, name: &str, key: &str, value: &[u8]) -> Self {
            let record = format!("SCHILY.xattr.{key}");
            self.builder
                .append_pax_extensions([(record.as_str(), value)])
                .expect("pax");
            self.file(name, b"x")
        }

        fn finish(self) -> Vec<u8> {
            self.builder.into_inner().expect("finish")
        }
    }

    fn apply(archive: &[u8]) -> (tempfile::TempDir, Result<(), ApplyError>) {
        let outer = tempfile::tempdir().expect("tempdir");
        let root = outer.path().join("fs");
        fs::create_dir(&root).expect("mkdir");
        let result = apply_tar(archive, &root);
        (outer, result)
    }

    #[test]
    fn unpacks_files_dirs_links_and_devices_with_metadata() {
        let archive = TarBuilder::new()
            .dir("./etc/")
            .file("./etc/hostname", b"skiff\n")
            .link(tar::EntryType::Symlink, "etc/link", "hostname")
            .link(tar::EntryType::Link, "etc/hard", "etc/hostname")
            .device("dev-null", 1, 3)
            .file_with_xattr("cap", "user.skiff", b"yes")
            .finish();
        let (dir, result) = apply(&archive);
        result.expect("apply");
        let root = dir.path().join("fs");
        let hostname = root.join("etc/hostname");
        assert_eq!(fs::read(&hostname).expect("read"), b"skiff\n");
        let meta = fs::metadata(&hostname).expect("stat");
        assert_eq!(meta.mode() & 0o7777, 0o640);
        assert_eq!((meta.uid(), meta.gid()), (1234, 5678));
        assert_eq!(meta.mtime(), 1_000_000);
        assert_eq!(meta.nlink(), 2, "hard link shares the inode");
        let etc = fs::metadata(root.join("etc")).expect("stat");
        assert_eq!(etc.mode() & 0o7777, 0o750);
        assert_eq!(etc.mtime(), 1_000_000, "directory mtime restored last");
        assert_eq!(
            fs::read_link(root.join("etc/link")).expect("readlink"),
            Path::new("hostname")
        );
        let dev = fs::symlink_metadata(root.join("dev-null")).expect("stat");
        assert!(dev.file_type().is_char_device());
        assert_eq!(dev.rdev(), makedev(1, 3));
        assert_eq!(dev.mode() & 0o7777, 0o620);
        let mut value = [0u8; 8];
        let c_path = CString::new(root.join("cap").as_os_str().as_bytes()).expect("path");
        // SAFETY: valid NUL-terminated strings and a buffer of the given length.
        let n = unsafe {
            libc::lgetxattr(
                c_path.as_ptr(),
                c"user.skiff".as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        assert_eq!(n, 3, "xattr restored");
        assert_eq!(&value[..3], b"yes");
    }

    #[test]
    fn converts_whiteouts_to_overlayfs_form() {
        let archive = TarBuilder::new()
            .dir("gone/")
            .file(".wh.removed", b"")
            .file("opaque/.wh..wh..opq", b"")
            .finish();
        let (dir, result) = apply(&archive);
        result.expect("apply");
        let root = dir.path().join("fs");
        let whiteout = fs::symlink_metadata(root.join("removed")).expect("whiteout exists");
        assert!(whiteout.file_type().is_char_device());
        assert_eq!(whiteout.rdev(), 0);
        assert_eq!((whiteout.uid(), whiteout.gid()), (0, 0));
        assert!(!root.join(".wh.removed").exists());
        assert!(!root.join("opaque/.wh..wh..opq").exists());
        let mut value = [0u8; 4];
        let c_path = CString::new(root.join("opaque").as_os_str().as_bytes()).expect("path");
        // SAFETY: valid NUL-terminated strings and a buffer of the given length.
        let n = unsafe {
            libc::lgetxattr(
                c_path.as_ptr(),
                c"trusted.overlay.opaque".as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        assert_eq!(n, 1);
        assert_eq!(value[0], b'y');
    }

    fn assert_escape(archive: Vec<u8>, outside: &Path) {
        let (dir, result) = apply(&archive);
        match result {
            Err(ApplyError::PathEscape { .. }) => {}
            other => panic!("expected a path escape error, got {other:?}"),
        }
        assert!(!outside.exists(), "{} was written", outside.display());
        drop(dir);
    }

    #[test]
    fn rejects_entries_escaping_the_root() {
        let victim = tempfile::tempdir().expect("tempdir");
        let outside = victim.path().join("pwned");
        let outside_name = outside.to_str().expect("utf-8 path");

        assert_escape(
            TarBuilder::new().file(outside_name, b"x").finish(),
            &outside,
        );
        let dotdot = format!("../../../../../../../..{outside_name}");
        assert_escape(TarBuilder::new().file(&dotdot, b"x").finish(), &outside);
        // A symlink to an outside directory, then a file written through it: the absolute
        // target is taken inside the layer root.
        let through = TarBuilder::new()
            .link(
                tar::EntryType::Symlink,
                "evil",
                victim.path().to_str().expect("utf-8"),
            )
            .file("evil/pwned", b"x")
            .finish();
        let (dir, result) = apply(&through);
        result.expect("apply through an absolute symlink");
        assert!(!outside.exists(), "{} was written", outside.display());
        let inside = dir
            .path()
            .join("fs")
            .join(outside.strip_prefix("/").expect("absolute"));
        assert_eq!(fs::read(&inside).expect("written inside the layer"), b"x");
        // A relative symlink climbing out.
        let climbing = TarBuilder::new()
            .link(tar::EntryType::Symlink, "up", "../../../../../../../..")
            .file(&format!("up{outside_name}"), b"x")
            .finish();
        assert_escape(climbing, &outside);
        // A hard link to a file outside, by `..` or through a symlink climbing out.
        let hard = TarBuilder::new()
            .link(tar::EntryType::Link, "h", "../../etc/passwd")
            .finish();
        assert_escape(hard, &outside);
        let hard = TarBuilder::new()
            .link(tar::EntryType::Symlink, "up", "../../../../../../../..")
            .link(tar::EntryType::Link, "h", "up/etc/passwd")
            .finish();
        assert_escape(hard, &outside);
    }

    /// An absolute hard link target names a file of the layer, as containerd takes it.
    #[test]
    fn absolute_hard_link_targets_are_inside_the_layer() {
        let archive = TarBuilder::new()
            .dir("etc/")
            .file("etc/os-release", b"ID=test\n")
            .link(tar::EntryType::Link, "usr-os-release", "/etc/os-release")
            .finish();
        let (dir, result) = apply(&archive);
        result.expect("apply");
        let root = dir.path().join("fs");
        let meta = fs::metadata(root.join("usr-os-release")).expect("stat");
        assert_eq!(meta.nlink(), 2, "a hard link to the layer's file");
        assert_eq!(
            fs::read(root.join("usr-os-release")).expect("read"),
            b"ID=test\n"
        );
    }

    #[test]
    fn follows_symlinks_that_stay_inside() {
        let archive = TarBuilder::new()
            .dir("usr/")
            .dir("usr/lib/")
            .link(tar::EntryType::Symlink, "lib", "usr/lib")
            .file("lib/libc.so", b"elf")
            .finish();
        let (dir, result) = apply(&archive);
        result.expect("apply");
        let root = dir.path().join("fs");
        assert_eq!(
            fs::read(root.join("usr/lib/libc.so")).expect("read"),
            b"elf"
        );
    }

    #[test]
    fn later_entries_replace_earlier_ones() {
        let archive = TarBuilder::new()
            .link(tar::EntryType::Symlink, "a", "/etc")
            .file("a", b"file")
            .finish();
        let (dir, result) = apply(&archive);
        result.expect("apply");
        let a = dir.path().join("fs/a");
        assert!(fs::symlink_metadata(&a).expect("stat").is_file());
    }

    #[test]
    fn checks_the_diff_id_of_compressed_blobs() {
        let archive = TarBuilder::new().file("hello", b"world").finish();
        let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(&archive)));
        let dir = tempfile::tempdir().expect("tempdir");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut gz, &archive).expect("gzip");
        let blobs = [
            ("plain", archive.clone()),
            ("gzip", gz.finish().expect("gzip")),
            (
                "zstd",
                zstd::encode_all(archive.as_slice(), 3).expect("zstd"),
            ),
        ];
        for (name, data) in blobs {
            let blob = dir.path().join(name);
            fs::write(&blob, data).expect("write");
            let dest = dir.path().join(format!("{name}-fs"));
            fs::create_dir(&dest).expect("mkdir");
            apply_layer(&blob, &dest, &diff_id).expect("apply");
            assert_eq!(fs::read(dest.join("hello")).expect("read"), b"world");

            let other = dir.path().join(format!("{name}-bad"));
            fs::create_dir(&other).expect("mkdir");
            let wrong = format!("sha256:{}", "0".repeat(64));
            match apply_layer(&blob, &other, &wrong) {
                Err(ApplyError::DiffIdMismatch { actual, .. }) => assert_eq!(actual, diff_id),
                other => panic!("expected a diff ID mismatch, got {other:?}"),
            }
        }
    }
}
