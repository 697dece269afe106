//! persistentVolumeClaim volumes bound to a hostPath or local PersistentVolume
//! (upstream: the volume manager's `getPVCExtractPV` and `getPVSpec`, then the hostPath
//! or local plugin of the PersistentVolume). The claim and volume are read from the API
//! server on every setup; the path is the PersistentVolume's, checked as a hostPath.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod, Volume};

use super::host_path::check_type;
use super::plugin::VolumePlugin;
use super::subpath::validate_path_no_backsteps;
use crate::error::{Error, Result};
use crate::objects::ObjectSource;

/// Plugin name under which claims are set up (the volume itself stays on the node's path).
pub const PVC_PLUGIN_NAME: &str = "kubernetes.io/persistent-volume-claim";

/// persistentVolumeClaim volumes of hostPath and local PersistentVolumes.
pub struct PersistentVolumeClaimPlugin {
    /// Where claims and volumes are read.
    pub objects: Arc<dyn ObjectSource>,
}

impl PersistentVolumeClaimPlugin {
    /// The PersistentVolume bound to claim `namespace/claim` (upstream `getPVCExtractPV`
    /// + `getPVSpec`), with upstream's errors.
    fn bound_volume(&self, namespace: &str, claim: &str) -> Result<Arc<PersistentVolume>> {
        let pvc = self
            .objects
            .get_persistent_volume_claim(namespace, claim)
            .map_err(|e| Error::Volume(format!("error processing PVC {namespace}/{claim}: failed to fetch PVC from API server: {e}")))?;
        if pvc.metadata.deletion_timestamp.is_some() {
            return Err(Error::Volume(format!(
                "error processing PVC {namespace}/{claim}: PVC is being deleted"
            )));
        }
        let phase = pvc
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        let volume_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or("");
        if phase != "Bound" || volume_name.is_empty() {
            return Err(Error::Volume(format!(
                "error processing PVC {namespace}/{claim}: PVC is not bound"
            )));
        }
        let pv = self.objects.get_persistent_volume(volume_name).map_err(|e| {
            Error::Volume(format!("error processing PVC {namespace}/{claim}: failed to fetch PV {volume_name:?} from API server: {e}"))
        })?;
        let claim_uid = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .map(|r| r.uid.as_deref().unwrap_or(""));
        let expected = pvc.metadata.uid.as_deref().unwrap_or("");
        match claim_uid {
            None => Err(Error::Volume(format!(
                "error processing PVC {namespace}/{claim}: found PV object {volume_name:?} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"
            ))),
            Some(uid) if uid != expected => Err(Error::Volume(format!(
                "error processing PVC {namespace}/{claim}: found PV object {volume_name:?} but its pv.Spec.ClaimRef.UID ({uid:?}) does not point to claim.UID ({expected:?})"
            ))),
            Some(_) => Ok(pv),
        }
    }
}

impl VolumePlugin for PersistentVolumeClaimPlugin {
    fn name(&self) -> &'static str {
        PVC_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.persistent_volume_claim.is_some()
    }

    fn setup(&self, pod: &Pod, volume: &Volume, _dir: &Path) -> Result<PathBuf> {
        let claim = volume
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str())
            .unwrap_or("");
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let pv = self.bound_volume(namespace, claim)?;
        let spec = pv.spec.clone().unwrap_or_default();
        let (path, path_type) = if let Some(host_path) = &spec.host_path {
            (
                host_path.path.clone(),
                host_path.type_.clone().unwrap_or_default(),
            )
        } else if let Some(local) = &spec.local {
            // A local volume must already exist (upstream's local plugin mounts it as is).
            (local.path.clone(), String::new())
        } else {
            let name = pv.metadata.name.as_deref().unwrap_or("");
            return Err(Error::Volume(format!(
                "PersistentVolume {name:?} of claim {namespace}/{claim} is neither hostPath nor local: not supported"
            )));
        };
        let path = PathBuf::from(path);
        validate_path_no_backsteps(&path)
            .map_err(|e| Error::Volume(format!("invalid path `{}`: {e}", path.display())))?;
        check_type(&path, &path_type)?;
        if !path.exists() {
            return Err(Error::Volume(format!(
                "path {:?} does not exist",
                path.display().to_string()
            )));
        }
        Ok(path)
    }

    /// The data lives on the node's path and is never removed.
    fn teardown(&self, dir: &Path) -> Result<()> {
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", dir, e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::fake::FakeObjects;
    use k8s_openapi::api::core::v1::{
        HostPathVolumeSource, LocalVolumeSource, ObjectReference, PersistentVolumeClaim,
        PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource,
        PersistentVolumeSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn claim(phase: &str, volume: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                uid: Some("claim-uid".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                volume_name: Some(volume.into()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    fn pv(name: &str, uid: &str, spec: PersistentVolumeSpec) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                claim_ref: Some(ObjectReference {
                    uid: Some(uid.into()),
                    ..Default::default()
                }),
                ..spec
            }),
            status: None,
        }
    }

    fn setup(fake: Arc<FakeObjects>) -> Result<PathBuf> {
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let volume = Volume {
            name: "v".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "data".into(),
                read_only: None,
            }),
            ..Default::default()
        };
        PersistentVolumeClaimPlugin { objects: fake }.setup(&pod, &volume, Path::new("/unused"))
    }

    #[test]
    fn claims_resolve_to_host_path_and_local_volumes() {
        let tmp = tempfile::tempdir().unwrap();
        let host = tmp.path().join("pv");
        let fake = FakeObjects::with(|s| {
            s.claims
                .insert(("ns".into(), "data".into()), claim("Bound", "pv1"));
            s.volumes.insert(
                "pv1".into(),
                pv(
                    "pv1",
                    "claim-uid",
                    PersistentVolumeSpec {
                        host_path: Some(HostPathVolumeSource {
                            path: host.display().to_string(),
                            type_: Some("DirectoryOrCreate".into()),
                        }),
                        ..Default::default()
                    },
                ),
            );
        });
        assert_eq!(setup(fake.clone()).unwrap(), host);
        assert!(host.is_dir());
        fake.edit(|s| {
            s.volumes.insert(
                "pv1".into(),
                pv(
                    "pv1",
                    "claim-uid",
                    PersistentVolumeSpec {
                        local: Some(LocalVolumeSource {
                            path: tmp.path().join("missing").display().to_string(),
                            fs_type: None,
                        }),
                        ..Default::default()
                    },
                ),
            );
        });
        assert!(
            setup(fake)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
    }

    #[test]
    fn unbound_or_foreign_claims_fail_like_upstream() {
        let fake = FakeObjects::with(|s| {
            s.claims
                .insert(("ns".into(), "data".into()), claim("Pending", ""));
        });
        assert_eq!(
            setup(fake.clone()).unwrap_err().to_string(),
            "error processing PVC ns/data: PVC is not bound"
        );
        fake.edit(|s| {
            s.claims
                .insert(("ns".into(), "data".into()), claim("Bound", "pv1"));
            s.volumes.insert(
                "pv1".into(),
                pv("pv1", "other", PersistentVolumeSpec::default()),
            );
        });
        assert_eq!(
            setup(fake.clone()).unwrap_err().to_string(),
            "error processing PVC ns/data: found PV object \"pv1\" but its pv.Spec.ClaimRef.UID (\"other\") does not point to claim.UID (\"claim-uid\")"
        );
        fake.edit(|s| s.claims.clear());
        assert_eq!(
            setup(fake).unwrap_err().to_string(),
            "error processing PVC ns/data: failed to fetch PVC from API server: persistentvolumeclaims \"data\" not found"
        );
    }
}
