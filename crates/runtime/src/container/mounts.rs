//! The mounts of a container (containerd's `WithMounts`, `WithPodNamespaces`' files,
//! `WithVolumes`): the standard filesystems, the pod's hosts / hostname / resolv.conf and
//! `/dev/shm`, the CRI mounts with their propagation, and the volumes the image declares.

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use k8s_cri::v1::{ContainerConfig, Mount as CriMount, MountPropagation};
use oci_spec::runtime::{Mount, MountBuilder};

use super::spec::spec_error;
use crate::error::{Error, Result};
use crate::sandbox::{Paths, files, shm};

/// What the mounts depend on besides the CRI config.
pub struct MountInputs<'a> {
    /// The sandbox's volatile paths (hosts/hostname/resolv.conf, shm).
    pub sandbox_paths: &'a Paths,
    /// The pod uses the node's IPC namespace: the node's `/dev/shm` is bound in.
    pub host_ipc: bool,
    /// Privileged: `/sys` and `/sys/fs/cgroup` are writable if the pod also uses the
    /// node's network (as containerd 1.6 does; a pod network's sysfs stays read-only).
    pub privileged: bool,
    /// The pod uses the node's network namespace.
    pub host_network: bool,
    /// The rootfs is read-only: so are the pod's files.
    pub readonly_rootfs: bool,
    /// The mounted rootfs (image content copied into new volumes).
    pub rootfs: &'a Path,
    /// Where image volumes are created: `<dir>/<n>`.
    pub volumes_dir: &'a Path,
    /// The image config's `Volumes`.
    pub image_volumes: &'a [String],
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn mount(destination: &str, typ: &str, source: &Path, options: &[&str]) -> Result<Mount> {
    MountBuilder::default()
        .destination(destination)
        .typ(typ)
        .source(source)
        .options(strings(options))
        .build()
        .map_err(spec_error)
}

/// The container's mounts, in mount order, and the rootfs propagation its CRI mounts need
/// (`rslave` for HOST_TO_CONTAINER, `rshared` for BIDIRECTIONAL). CRI mounts win over the
/// standard mounts and image volumes on the same destination.
pub fn mounts(
    config: &ContainerConfig,
    inputs: &MountInputs<'_>,
) -> Result<(Vec<Mount>, Option<String>)> {
    let cri_destinations: HashSet<PathBuf> = config
        .mounts
        .iter()
        .map(|m| clean(&m.container_path))
        .collect();
    let sys = if inputs.privileged && inputs.host_network {
        "rw"
    } else {
        "ro"
    };
    let mut out = vec![
        mount(
            "/proc",
            "proc",
            Path::new("proc"),
            &["nosuid", "noexec", "nodev"],
        )?,
        mount(
            "/dev",
            "tmpfs",
            Path::new("tmpfs"),
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            Path::new("devpts"),
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        )?,
        mount(
            "/dev/mqueue",
            "mqueue",
            Path::new("mqueue"),
            &["nosuid", "noexec", "nodev"],
        )?,
        mount(
            "/sys",
            "sysfs",
            Path::new("sysfs"),
            &["nosuid", "noexec", "nodev", sys],
        )?,
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            Path::new("cgroup"),
            &["nosuid", "noexec", "nodev", "relatime", sys],
        )?,
    ];
    let rw = if inputs.readonly_rootfs { "ro" } else { "rw" };
    for (file, destination) in [
        (files::HOSTNAME, "/etc/hostname"),
        (files::HOSTS, "/etc/hosts"),
        (files::RESOLV_CONF, "/etc/resolv.conf"),
    ] {
        out.push(mount(
            destination,
            "bind",
            &inputs.sandbox_paths.files.join(file),
            &["rbind", "rprivate", rw],
        )?);
    }
    let shm_source = match inputs.host_ipc {
        true => PathBuf::from("/dev/shm"),
        false => shm::path(&inputs.sandbox_paths.files),
    };
    out.push(mount(
        "/dev/shm",
        "bind",
        &shm_source,
        &["rbind", "rprivate", "rw"],
    )?);
    out.retain(|m| !cri_destinations.contains(m.destination()));

    let mut cri_mounts = config.mounts.clone();
    cri_mounts.extend(image_volumes(inputs, &cri_destinations)?);
    cri_mounts.sort_by_key(|m| clean(&m.container_path).components().count());
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut propagation = None;
    for m in &cri_mounts {
        if !Path::new(&m.container_path).is_absolute() {
            return Err(Error::InvalidArgument(format!(
                "mount destination {:?} is not absolute",
                m.container_path
            )));
        }
        let source = host_source(&m.host_path)?;
        let mode = match MountPropagation::try_from(m.propagation)
            .unwrap_or(MountPropagation::PropagationPrivate)
        {
            MountPropagation::PropagationPrivate => "rprivate",
            MountPropagation::PropagationHostToContainer => {
                ensure_propagation(&mountinfo, &source, false)?;
                propagation.get_or_insert("rslave");
                "rslave"
            }
            MountPropagation::PropagationBidirectional => {
                ensure_propagation(&mountinfo, &source, true)?;
                propagation = Some("rshared");
                "rshared"
            }
        };
        let access = if m.readonly { "ro" } else { "rw" };
        out.push(mount(
            &m.container_path,
            "bind",
            &source,
            &["rbind", mode, access],
        )?);
    }
    Ok((out, propagation.map(str::to_string)))
}

/// Checks that the mount holding `source` propagates: shared for BIDIRECTIONAL, shared or
/// slave for HOST_TO_CONTAINER, with containerd's error (`ensureShared`,
/// `ensureSharedOrSlave`; gRPC `Unknown`).
fn ensure_propagation(mountinfo: &str, source: &Path, need_shared: bool) -> Result<()> {
    let entry = crate::sandbox::ns::containing_mount(mountinfo, source).ok_or_else(|| {
        Error::Unknown(format!("could not find the mount of {}", source.display()))
    })?;
    let ok = entry.shared || (!need_shared && entry.slave);
    if ok {
        return Ok(());
    }
    let wanted = if need_shared {
        "a shared mount"
    } else {
        "a shared or slave mount"
    };
    Err(Error::Unknown(format!(
        "path {:?} is mounted on {:?} but it is not {wanted}",
        source.display().to_string(),
        entry.mount_point
    )))
}

/// The image's declared volumes that no CRI mount covers, as CRI mounts of new directories
/// under `volumes_dir` holding a copy of what the image has at that path (containerd's
/// default `image_volume = "mkdir"` behaviour with `WithVolumes`' copy).
fn image_volumes(
    inputs: &MountInputs<'_>,
    cri_destinations: &HashSet<PathBuf>,
) -> Result<Vec<CriMount>> {
    let mut out = Vec::new();
    let mut volumes: Vec<&String> = inputs.image_volumes.iter().collect();
    volumes.sort();
    for (n, destination) in volumes.into_iter().enumerate() {
        let clean_dest = clean(destination);
        if !clean_dest.is_absolute() || cri_destinations.contains(&clean_dest) {
            continue;
        }
        let host = inputs.volumes_dir.join(n.to_string());
        std::fs::create_dir_all(&host).map_err(|err| {
            Error::Internal(anyhow::anyhow!("creating {}: {err}", host.display()))
        })?;
        // The image's path with its symlinks resolved inside the rootfs (containerd's
        // `fs.RootPath`); only a directory there is copied.
        let in_image = super::root_path::secure_join(inputs.rootfs, &clean_dest);
        if let Ok(in_image) = in_image
            && std::fs::symlink_metadata(&in_image).is_ok_and(|m| m.is_dir())
        {
            copy_tree(&in_image, &host).map_err(|err| {
                Error::Internal(anyhow::anyhow!(
                    "copying image content of volume {destination}: {err}"
                ))
            })?;
        }
        out.push(CriMount {
            container_path: destination.clone(),
            host_path: host.to_string_lossy().into_owned(),
            ..Default::default()
        });
    }
    Ok(out)
}

/// Copies the directory tree `from` into the existing directory `to`: files, directories
/// and symlinks, with modes and owners.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    std::os::unix::fs::lchown(to, Some(meta.uid()), Some(meta.gid()))?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let meta = std::fs::symlink_metadata(&src)?;
        let file_type = meta.file_type();
        if file_type.is_dir() {
            std::fs::create_dir(&dst)?;
            copy_tree(&src, &dst)?;
            continue;
        } else if file_type.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if file_type.is_file() {
            std::fs::copy(&src, &dst)?;
        } else {
            // Device nodes, FIFOs and sockets in image volumes are not copied.
            continue;
        }
        std::os::unix::fs::lchown(&dst, Some(meta.uid()), Some(meta.gid()))?;
    }
    Ok(())
}

/// The host side of a CRI mount: created as a directory when missing (as containerd and
/// dockershim do), symlinks resolved.
fn host_source(host_path: &str) -> Result<PathBuf> {
    let path = Path::new(host_path);
    if !path.is_absolute() {
        return Err(Error::InvalidArgument(format!(
            "mount source {host_path:?} is not absolute"
        )));
    }
    if std::fs::symlink_metadata(path).is_err() {
        std::fs::create_dir_all(path).map_err(|err| {
            Error::Internal(anyhow::anyhow!("creating mount source {host_path}: {err}"))
        })?;
    }
    Ok(path.canonicalize()?)
}

fn clean(path: &str) -> PathBuf {
    Path::new(path).components().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propagation_needs_a_propagating_mount() {
        let info = "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    40 27 0:5 / /run rw master:3 - tmpfs tmpfs rw\n\
                    41 27 0:6 / /private rw - ext3 /dev/root rw\n";
        assert!(ensure_propagation(info, Path::new("/var/x"), true).is_ok());
        assert!(ensure_propagation(info, Path::new("/run/x"), false).is_ok());
        assert!(matches!(
            ensure_propagation(info, Path::new("/run/x"), true),
            Err(Error::Unknown(_))
        ));
        assert!(ensure_propagation(info, Path::new("/private/x"), false).is_err());
    }

    #[test]
    fn copies_image_content_into_volumes() {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("data/sub")).unwrap();
        std::fs::write(rootfs.join("data/sub/f"), "x").unwrap();
        std::os::unix::fs::symlink("sub/f", rootfs.join("data/link")).unwrap();
        let paths = Paths {
            files: dir.path().join("files"),
            ns: dir.path().join("ns"),
        };
        let volumes_dir = dir.path().join("volumes");
        let inputs = MountInputs {
            sandbox_paths: &paths,
            host_ipc: false,
            privileged: false,
            host_network: false,
            readonly_rootfs: false,
            rootfs: &rootfs,
            volumes_dir: &volumes_dir,
            image_volumes: &[
                "/data".to_string(),
                "/empty".to_string(),
                "/covered".to_string(),
            ],
        };
        let covered = HashSet::from([PathBuf::from("/covered")]);
        let mounts = image_volumes(&inputs, &covered).unwrap();
        assert_eq!(mounts.len(), 2);
        let data = Path::new(&mounts[0].host_path);
        assert_eq!(std::fs::read_to_string(data.join("sub/f")).unwrap(), "x");
        assert_eq!(
            std::fs::read_link(data.join("link")).unwrap(),
            Path::new("sub/f")
        );
        assert_eq!(mounts[1].container_path, "/empty");
    }
}
