//! A container's `volumeMounts` as CRI mounts (upstream `makeMounts` in
//! `kubelet_pods.go` and `translateMountPropagation`).

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_cri::v1::{Mount, MountPropagation};
use k8s_openapi::api::core::v1::{Container, VolumeMount};

use super::manager::MountedVolume;
use super::subpath::{prepare_safe_subpath, safe_make_dir, validate_path_no_backsteps};
use crate::error::{Error, Result};
use crate::kuberuntime::env::expand_with;

/// The CRI propagation of a `mountPropagation` (upstream `translateMountPropagation`):
/// unset and `None` are PRIVATE, `HostToContainer` is HOST_TO_CONTAINER (rslave),
/// `Bidirectional` is BIDIRECTIONAL (rshared).
fn translate_mount_propagation(mode: Option<&str>) -> Result<MountPropagation> {
    match mode {
        None | Some("None") => Ok(MountPropagation::PropagationPrivate),
        Some("HostToContainer") => Ok(MountPropagation::PropagationHostToContainer),
        Some("Bidirectional") => Ok(MountPropagation::PropagationBidirectional),
        Some(other) => Err(Error::Volume(format!(
            "invalid MountPropagation mode: {other:?}"
        ))),
    }
}

/// `subPathExpr` expanded against the container environment (upstream
/// `ExpandContainerVolumeMounts`); errors `missing value for A, B` when a referenced
/// variable is undefined or empty.
fn expand_sub_path_expr(expr: &str, env: &[(String, String)]) -> Result<String> {
    let vars: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut missing = BTreeSet::new();
    let expanded = expand_with(expr, |name| match vars.get(name) {
        Some(v) if !v.is_empty() => Some((*v).to_owned()),
        _ => {
            missing.insert(name.to_owned());
            Some(String::new())
        }
    });
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(Error::Volume(format!(
            "missing value for {}",
            missing.into_iter().collect::<Vec<_>>().join(", ")
        )))
    }
}

/// The host path of `mount`'s subPath inside `volume_path`, created (with the volume
/// root's mode) when missing; the subPath must be relative, free of `..` and resolve
/// inside the volume.
fn sub_path_host_path(
    mount: &VolumeMount,
    container: &str,
    volume_path: &Path,
    sub_path: &str,
) -> Result<PathBuf> {
    let sub = Path::new(sub_path);
    if sub.is_absolute() {
        return Err(Error::Volume(format!(
            "error SubPath `{sub_path}` must not be an absolute path"
        )));
    }
    validate_path_no_backsteps(sub)
        .map_err(|e| Error::Volume(format!("unable to provision SubPath `{sub_path}`: {e}")))?;
    if std::fs::symlink_metadata(volume_path.join(sub)).is_err() {
        let perm = std::fs::metadata(volume_path)
            .map_err(|e| Error::io("stat", volume_path, e))?
            .permissions()
            .mode()
            & 0o7777;
        if let Err(e) = safe_make_dir(sub, volume_path, perm) {
            tracing::warn!(container, volume_mount = %mount.name, error = %e, "failed to create subPath directory");
            // Upstream hides the detail from the user: it may describe the host.
            return Err(Error::Volume(format!(
                "failed to create subPath directory for volumeMount {:?} of container {container:?}",
                mount.name
            )));
        }
    }
    prepare_safe_subpath(volume_path, sub).map_err(|e| {
        tracing::warn!(container, volume_mount = %mount.name, error = %e, "failed to prepare subPath");
        Error::Volume(format!(
            "failed to prepare subPath for volumeMount {:?} of container {container:?}",
            mount.name
        ))
    })
}

/// The CRI mounts of `container`'s `volumeMounts`, in order, from the pod's set-up
/// `volumes` (upstream `makeMounts`). `env` gives the container environment; it is
/// called only when a mount has a `subPathExpr`.
///
/// Errors (the container then waits with `CreateContainerConfigError`): `cannot find
/// volume "v" to mount into container "c"`, subPath errors, an invalid propagation, or
/// `Bidirectional` propagation in an unprivileged container.
pub fn make_mounts(
    container: &Container,
    volumes: &HashMap<String, MountedVolume>,
    env: impl FnOnce() -> Result<Vec<(String, String)>>,
) -> Result<Vec<Mount>> {
    let mut env = Some(env);
    let mut resolved_env: Option<Vec<(String, String)>> = None;
    let privileged = container
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let volume = volumes.get(&mount.name).ok_or_else(|| {
            Error::Volume(format!(
                "cannot find volume {:?} to mount into container {:?}",
                mount.name, container.name
            ))
        })?;
        let mut sub_path = mount.sub_path.clone().unwrap_or_default();
        if let Some(expr) = mount.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            if resolved_env.is_none() {
                let compute = env
                    .take()
                    .ok_or_else(|| Error::Volume("container environment unavailable".to_owned()))?;
                resolved_env = Some(compute()?);
            }
            sub_path = expand_sub_path_expr(expr, resolved_env.as_deref().unwrap_or_default())?;
        }
        let host_path = if sub_path.is_empty() {
            volume.path.clone()
        } else {
            sub_path_host_path(mount, &container.name, &volume.path, &sub_path)?
        };
        let propagation = translate_mount_propagation(mount.mount_propagation.as_deref())?;
        if propagation == MountPropagation::PropagationBidirectional && !privileged {
            return Err(Error::Volume(
                "Bidirectional mount propagation is available only to privileged containers"
                    .to_owned(),
            ));
        }
        let container_path = if mount.mount_path.starts_with('/') {
            mount.mount_path.clone()
        } else {
            format!("/{}", mount.mount_path)
        };
        mounts.push(Mount {
            container_path,
            host_path: host_path.to_string_lossy().into_owned(),
            readonly: mount.read_only.unwrap_or(false) || volume.read_only,
            selinux_relabel: false,
            propagation: propagation as i32,
            ..Default::default()
        });
    }
    Ok(mounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::SecurityContext;
    use std::os::unix::fs::symlink;

    fn volume(path: &Path, read_only: bool) -> MountedVolume {
        MountedVolume {
            plugin: "kubernetes.io/empty-dir",
            path: path.to_path_buf(),
            read_only,
        }
    }

    fn vm(name: &str, path: &str) -> VolumeMount {
        VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            ..Default::default()
        }
    }

    fn container(mounts: Vec<VolumeMount>) -> Container {
        Container {
            name: "c".into(),
            volume_mounts: Some(mounts),
            ..Default::default()
        }
    }

    fn no_env() -> Result<Vec<(String, String)>> {
        panic!("env not needed without subPathExpr")
    }

    #[test]
    fn mounts_carry_paths_modes_and_propagation() {
        let tmp = tempfile::tempdir().unwrap();
        let volumes = HashMap::from([
            ("data".to_owned(), volume(tmp.path(), false)),
            ("info".to_owned(), volume(tmp.path(), true)),
        ]);
        let mut ro = vm("data", "/ro");
        ro.read_only = Some(true);
        let mut h2c = vm("data", "/h2c");
        h2c.mount_propagation = Some("HostToContainer".into());
        let mut none = vm("data", "relative");
        none.mount_propagation = Some("None".into());
        let mounts = make_mounts(
            &container(vec![ro, vm("info", "/info"), h2c, none]),
            &volumes,
            no_env,
        )
        .unwrap();
        let host = tmp.path().to_string_lossy().into_owned();
        let summary: Vec<(&str, &str, bool, i32)> = mounts
            .iter()
            .map(|m| {
                (
                    m.container_path.as_str(),
                    m.host_path.as_str(),
                    m.readonly,
                    m.propagation,
                )
            })
            .collect();
        let private = MountPropagation::PropagationPrivate as i32;
        assert_eq!(
            summary,
            vec![
                ("/ro", host.as_str(), true, private),
                ("/info", host.as_str(), true, private),
                (
                    "/h2c",
                    host.as_str(),
                    false,
                    MountPropagation::PropagationHostToContainer as i32
                ),
                ("/relative", host.as_str(), false, private),
            ]
        );
        assert!(mounts.iter().all(|m| !m.selinux_relabel));
    }

    #[test]
    fn unknown_volumes_and_bad_propagation_are_config_errors() {
        let volumes = HashMap::from([("data".to_owned(), volume(Path::new("/tmp"), false))]);
        assert_eq!(
            make_mounts(&container(vec![vm("nope", "/x")]), &volumes, no_env)
                .unwrap_err()
                .to_string(),
            "cannot find volume \"nope\" to mount into container \"c\""
        );
        let mut bidi = vm("data", "/b");
        bidi.mount_propagation = Some("Bidirectional".into());
        let mut unprivileged = container(vec![bidi.clone()]);
        assert!(make_mounts(&unprivileged, &volumes, no_env).is_err());
        unprivileged.security_context = Some(SecurityContext {
            privileged: Some(true),
            ..Default::default()
        });
        let mounts = make_mounts(&unprivileged, &volumes, no_env).unwrap();
        assert_eq!(
            mounts[0].propagation,
            MountPropagation::PropagationBidirectional as i32
        );
        bidi.mount_propagation = Some("Sideways".into());
        assert_eq!(
            make_mounts(&container(vec![bidi]), &volumes, no_env)
                .unwrap_err()
                .to_string(),
            "invalid MountPropagation mode: \"Sideways\""
        );
    }

    #[test]
    fn sub_paths_are_created_expanded_and_confined() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let volumes = HashMap::from([("data".to_owned(), volume(&root, false))]);
        let mut sub = vm("data", "/sub");
        sub.sub_path = Some("a/b".into());
        let mut expr = vm("data", "/expr");
        expr.sub_path_expr = Some("logs/$(POD)".into());
        let env = || Ok(vec![("POD".to_owned(), "web-1".to_owned())]);
        let mounts = make_mounts(&container(vec![sub, expr.clone()]), &volumes, env).unwrap();
        let canonical = std::fs::canonicalize(&root).unwrap();
        assert_eq!(mounts[0].host_path, canonical.join("a/b").to_string_lossy());
        assert_eq!(
            mounts[1].host_path,
            canonical.join("logs/web-1").to_string_lossy()
        );
        let mode = std::fs::metadata(root.join("a/b"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o777);

        let empty_env = || Ok(vec![("POD".to_owned(), String::new())]);
        assert_eq!(
            make_mounts(&container(vec![expr]), &volumes, empty_env)
                .unwrap_err()
                .to_string(),
            "missing value for POD"
        );
        let with_sub = |s: &str| {
            let mut m = vm("data", "/s");
            m.sub_path = Some(s.into());
            make_mounts(&container(vec![m]), &volumes, no_env)
        };
        assert_eq!(
            with_sub("../etc").unwrap_err().to_string(),
            "unable to provision SubPath `../etc`: must not contain '..'"
        );
        assert_eq!(
            with_sub("/etc").unwrap_err().to_string(),
            "error SubPath `/etc` must not be an absolute path"
        );
        symlink("/etc", root.join("escape")).unwrap();
        assert_eq!(
            with_sub("escape").unwrap_err().to_string(),
            "failed to prepare subPath for volumeMount \"data\" of container \"c\""
        );
        assert_eq!(
            with_sub("escape/new").unwrap_err().to_string(),
            "failed to create subPath directory for volumeMount \"data\" of container \"c\""
        );
    }
}
