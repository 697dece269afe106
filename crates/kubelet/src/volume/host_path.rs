//! The hostPath plugin (upstream `pkg/volume/hostpath`): a path of the node itself,
//! checked (and for the `...OrCreate` types created) according to its `type`.

use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, Volume};

use super::plugin::VolumePlugin;
use super::subpath::validate_path_no_backsteps;
use crate::error::{Error, Result};

/// Plugin name of hostPath volumes.
pub const HOST_PATH_PLUGIN_NAME: &str = "kubernetes.io/host-path";

/// hostPath volumes. They keep nothing under the pod directory.
pub struct HostPathPlugin;

/// Checks (and creates, for `DirectoryOrCreate` with mode 0755 and `FileOrCreate` with
/// mode 0644) `path` according to the hostPath `type` (upstream `checkType`); `""`
/// checks nothing. Errors like upstream: `hostPath type check failed: /x is not a
/// directory`, `... is not a file`, `... is not a socket file`, `... is not a character
/// device`, `... is not a block device`, and `T is an invalid volume type`.
pub fn check_type(path: &Path, path_type: &str) -> Result<()> {
    // Stat follows symlinks, as upstream's GetFileType does.
    let file_type = std::fs::metadata(path).ok().map(|m| m.file_type());
    let failed = |what: &str| {
        Err(Error::Volume(format!(
            "hostPath type check failed: {} is not {what}",
            path.display()
        )))
    };
    let check = |ok: bool, what: &str| if ok { Ok(()) } else { failed(what) };
    match path_type {
        "" => Ok(()),
        "DirectoryOrCreate" if file_type.is_none() => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
            .map_err(|e| Error::io("mkdir", path, e)),
        "DirectoryOrCreate" | "Directory" => {
            check(file_type.is_some_and(|t| t.is_dir()), "a directory")
        }
        "FileOrCreate" if file_type.is_none() => OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(|e| Error::io("create", path, e)),
        "FileOrCreate" | "File" => check(file_type.is_some_and(|t| t.is_file()), "a file"),
        "Socket" => check(file_type.is_some_and(|t| t.is_socket()), "a socket file"),
        "CharDevice" => check(
            file_type.is_some_and(|t| t.is_char_device()),
            "a character device",
        ),
        "BlockDevice" => check(
            file_type.is_some_and(|t| t.is_block_device()),
            "a block device",
        ),
        other => Err(Error::Volume(format!("{other} is an invalid volume type"))),
    }
}

impl VolumePlugin for HostPathPlugin {
    fn name(&self) -> &'static str {
        HOST_PATH_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.host_path.is_some()
    }

    fn setup(&self, _pod: &Pod, volume: &Volume, _dir: &Path) -> Result<PathBuf> {
        let source = volume.host_path.clone().unwrap_or_default();
        let path = PathBuf::from(&source.path);
        validate_path_no_backsteps(&path)
            .map_err(|e| Error::Volume(format!("invalid HostPath `{}`: {e}", source.path)))?;
        check_type(&path, source.type_.as_deref().unwrap_or(""))?;
        Ok(path)
    }

    fn teardown(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn type_checks_follow_upstream() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        let file = tmp.path().join("f");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(&file, "x").unwrap();
        let socket = tmp.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = tmp.path().join("link-to-dir");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let missing = tmp.path().join("missing");

        for (path, ty) in [
            (&dir, "Directory"),
            (&link, "Directory"),
            (&dir, "DirectoryOrCreate"),
            (&file, "File"),
            (&file, "FileOrCreate"),
            (&socket, "Socket"),
            (&missing, ""),
        ] {
            assert_eq!(check_type(path, ty), Ok(()), "{} {ty}", path.display());
        }
        assert_eq!(check_type(Path::new("/dev/null"), "CharDevice"), Ok(()));
        let failures = [
            (&file, "Directory", "is not a directory"),
            (&missing, "Directory", "is not a directory"),
            (&dir, "DirectoryOrCreate", ""),
            (&dir, "File", "is not a file"),
            (&missing, "File", "is not a file"),
            (&dir, "FileOrCreate", "is not a file"),
            (&file, "Socket", "is not a socket file"),
            (&file, "CharDevice", "is not a character device"),
            (&file, "BlockDevice", "is not a block device"),
        ];
        for (path, ty, what) in failures.into_iter().filter(|f| !f.2.is_empty()) {
            assert_eq!(
                check_type(path, ty).unwrap_err().to_string(),
                format!("hostPath type check failed: {} {what}", path.display())
            );
        }
        assert_eq!(
            check_type(&dir, "Pipe").unwrap_err().to_string(),
            "Pipe is an invalid volume type"
        );
    }

    #[test]
    fn or_create_types_create_with_upstream_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let new_dir = tmp.path().join("a/b");
        check_type(&new_dir, "DirectoryOrCreate").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert!(new_dir.is_dir());
        // The process umask may clear bits, never add them.
        assert_eq!(mode(&new_dir) & !0o755, 0);
        let new_file = tmp.path().join("f");
        check_type(&new_file, "FileOrCreate").unwrap();
        assert!(new_file.is_file());
        assert_eq!(mode(&new_file) & !0o644, 0);
        // A missing parent of a FileOrCreate path is not created, as upstream.
        assert!(check_type(&tmp.path().join("x/f"), "FileOrCreate").is_err());
    }

    #[test]
    fn setup_rejects_backsteps() {
        let volume = Volume {
            name: "h".into(),
            host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                path: "/tmp/../etc".into(),
                type_: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            HostPathPlugin
                .setup(&Pod::default(), &volume, Path::new("/unused"))
                .unwrap_err()
                .to_string(),
            "invalid HostPath `/tmp/../etc`: must not contain '..'"
        );
    }
}
