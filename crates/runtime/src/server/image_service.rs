//! The CRI v1 ImageService, served by [`ImageManager`] (as containerd's CRI plugin serves it
//! from its image store).

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_cri::v1::image_service_server::ImageService;
use k8s_cri::v1::{
    FilesystemIdentifier, FilesystemUsage, Image, ImageFsInfoRequest, ImageFsInfoResponse,
    ImageSpec, ImageStatusRequest, ImageStatusResponse, Int64Value, ListImagesRequest,
    ListImagesResponse, PullImageRequest, PullImageResponse, RemoveImageRequest,
    RemoveImageResponse, UInt64Value,
};
use tonic::{Request, Response, Status};

use crate::image::{ImageManager, ImageRecord};

#[tonic::async_trait]
impl ImageService for ImageManager {
    /// Lists images; a filter image reference keeps only the image it names.
    async fn list_images(
        &self,
        request: Request<ListImagesRequest>,
    ) -> Result<Response<ListImagesResponse>, Status> {
        let filter = request
            .into_inner()
            .filter
            .and_then(|filter| filter.image)
            .map(|spec| spec.image)
            .filter(|image| !image.is_empty());
        let records = match filter {
            Some(image) => self.get(&image).into_iter().collect(),
            None => self.list(),
        };
        Ok(Response::new(ListImagesResponse {
            images: records.iter().map(cri_image).collect(),
        }))
    }

    /// The image, or no image when it is not present (not an error, per CRI). `verbose`
    /// adds `info["info"]`: JSON with containerd's keys, `chainID` (of the top layer) and
    /// `imageSpec` (the image config), plus `chainIDs` (every layer's, bottom first).
    async fn image_status(
        &self,
        request: Request<ImageStatusRequest>,
    ) -> Result<Response<ImageStatusResponse>, Status> {
        let request = request.into_inner();
        let image = requested_image(request.image)?;
        let Some(record) = self.get(&image) else {
            return Ok(Response::new(ImageStatusResponse::default()));
        };
        let mut info = std::collections::HashMap::new();
        if request.verbose {
            let details = serde_json::json!({
                "chainID": record.chain_ids.last(),
                "chainIDs": record.chain_ids,
                "imageSpec": record.config,
            });
            info.insert("info".to_string(), details.to_string());
        }
        Ok(Response::new(ImageStatusResponse {
            image: Some(cri_image(&record)),
            info,
        }))
    }

    /// Pulls the image; `image_ref` is the image ID.
    async fn pull_image(
        &self,
        request: Request<PullImageRequest>,
    ) -> Result<Response<PullImageResponse>, Status> {
        let request = request.into_inner();
        let image = requested_image(request.image)?;
        let record = self.pull(&image, request.auth.as_ref()).await?;
        Ok(Response::new(PullImageResponse {
            image_ref: record.id,
        }))
    }

    /// Removes the image; an absent image is fine.
    async fn remove_image(
        &self,
        request: Request<RemoveImageRequest>,
    ) -> Result<Response<RemoveImageResponse>, Status> {
        let image = requested_image(request.into_inner().image)?;
        self.remove(&image)?;
        Ok(Response::new(RemoveImageResponse {}))
    }

    /// Space (bytes, inodes) used by the image filesystem: blobs in the content store,
    /// unpacked layers and writable snapshots, measured now (containerd samples its
    /// snapshotter every 10 s). The mount point reported is the snapshotter's directory,
    /// as containerd reports its snapshotter's.
    async fn image_fs_info(
        &self,
        _request: Request<ImageFsInfoRequest>,
    ) -> Result<Response<ImageFsInfoResponse>, Status> {
        let dirs: Vec<_> = self
            .filesystem_dirs()
            .iter()
            .map(|dir| dir.to_path_buf())
            .collect();
        let root = self.snapshotter().root().to_path_buf();
        let (bytes, inodes) = tokio::task::spawn_blocking(move || disk_usage(&dirs))
            .await
            .map_err(|err| Status::internal(format!("image filesystem usage: {err}")))?
            .map_err(|err| Status::internal(format!("image filesystem usage: {err}")))?;
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or_default();
        Ok(Response::new(ImageFsInfoResponse {
            image_filesystems: vec![FilesystemUsage {
                timestamp,
                fs_id: Some(FilesystemIdentifier {
                    mountpoint: root.display().to_string(),
                }),
                used_bytes: Some(UInt64Value { value: bytes }),
                inodes_used: Some(UInt64Value { value: inodes }),
            }],
            container_filesystems: Vec::new(),
        }))
    }
}

fn requested_image(spec: Option<ImageSpec>) -> Result<String, Status> {
    spec.map(|spec| spec.image)
        .filter(|image| !image.is_empty())
        .ok_or_else(|| Status::invalid_argument("image spec with an image reference is required"))
}

/// An image in CRI terms. The config's `User` (`user[:group]`) gives `uid` when numeric,
/// else `username` (as the kubelet and containerd read it).
fn cri_image(record: &ImageRecord) -> Image {
    let user = record
        .config
        .config()
        .as_ref()
        .and_then(|config| config.user().clone())
        .unwrap_or_default();
    let user = user.split(':').next().unwrap_or_default();
    let (uid, username) = match user.parse::<i64>() {
        Ok(uid) => (Some(Int64Value { value: uid }), String::new()),
        Err(_) => (None, user.to_string()),
    };
    Image {
        id: record.id.clone(),
        repo_tags: record.repo_tags.clone(),
        repo_digests: record.repo_digests.clone(),
        size: record.size,
        uid,
        username,
        spec: Some(ImageSpec {
            image: record.id.clone(),
            ..Default::default()
        }),
        pinned: false,
    }
}

/// Bytes (allocated blocks) and inodes used under `roots`, each inode counted once.
fn disk_usage(roots: &[PathBuf]) -> io::Result<(u64, u64)> {
    let mut seen = HashSet::new();
    let mut bytes = 0;
    let mut pending = roots.to_vec();
    while let Some(path) = pending.pop() {
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            // Removed while walking (a snapshot went away): not in use any more.
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => {
                return Err(io::Error::new(
                    err.kind(),
                    format!("{}: {err}", path.display()),
                ));
            }
        };
        if !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        bytes += meta.blocks() * 512;
        if meta.is_dir() {
            match std::fs::read_dir(&path) {
                Ok(entries) => {
                    for entry in entries {
                        pending.push(entry?.path());
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
    }
    Ok((bytes, seen.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(user: Option<&str>) -> ImageRecord {
        let mut config = oci_spec::image::ImageConfiguration::default();
        let mut exec = oci_spec::image::Config::default();
        exec.set_user(user.map(str::to_string));
        config.set_config(Some(exec));
        ImageRecord {
            id: format!("sha256:{}", "a".repeat(64)),
            repo_tags: vec!["docker.io/library/busybox:latest".into()],
            repo_digests: vec![],
            chain_ids: vec![],
            size: 42,
            config,
        }
    }

    #[test]
    fn user_becomes_uid_or_username() {
        let numeric = cri_image(&record(Some("1000:1000")));
        assert_eq!(numeric.uid, Some(Int64Value { value: 1000 }));
        assert_eq!(numeric.username, "");
        let named = cri_image(&record(Some("nobody")));
        assert_eq!(named.uid, None);
        assert_eq!(named.username, "nobody");
        let root = cri_image(&record(None));
        assert_eq!((root.uid, root.username.as_str()), (None, ""));
        assert_eq!(root.size, 42);
    }

    #[test]
    fn disk_usage_counts_hard_links_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a"), vec![1u8; 10_000]).expect("write");
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).expect("link");
        let (bytes, inodes) = disk_usage(&[dir.path().to_path_buf()]).expect("usage");
        assert_eq!(inodes, 2, "the directory and one file");
        assert!(bytes >= 10_000, "{bytes}");
    }
}
