//! Pulls real images from a real registry (Debian's docker-registry on a loopback port),
//! then checks the unpacked layers, the image record, the CRI ImageService and an overlay
//! mount of the result. Needs root (ownership, device nodes, mounts).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use k8s_cri::v1::image_service_server::ImageService;
use k8s_cri::v1::{
    ImageFilter, ImageFsInfoRequest, ImageSpec, ImageStatusRequest, ListImagesRequest,
    PullImageRequest, RemoveImageRequest,
};
use serde_json::json;
use skiff_runtime::RuntimeConfig;
use skiff_runtime::image::{Error, ImageManager};
use skiff_runtime::snapshot::unmount;
use skiff_testkit::{
    Compression, ImageBuilder, Layer, Platform, Registry, TarEntry, layer_tar, push,
};

/// The image store under `root`, with the default pull settings.
fn open_images(root: &Path) -> anyhow::Result<ImageManager> {
    ImageManager::new(&RuntimeConfig {
        root: root.to_path_buf(),
        ..RuntimeConfig::default()
    })
}

fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// The execution config of every test image.
fn exec_config() -> serde_json::Value {
    json!({"User": "1000:1000", "Entrypoint": ["/bin/sh"], "Env": ["PATH=/bin"]})
}

fn layer(entries: &[TarEntry], compression: Compression) -> Layer {
    Layer::new(layer_tar(entries).expect("layer tar"), compression)
}

fn spec(image: &str) -> Option<ImageSpec> {
    Some(ImageSpec {
        image: image.to_string(),
        ..Default::default()
    })
}

fn xattr(path: &Path, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut value = [0u8; 64];
    // SAFETY: NUL-terminated strings and a buffer of the given length.
    let n = unsafe {
        libc::lgetxattr(
            c_path.as_ptr(),
            name.as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    usize::try_from(n).ok().map(|n| value[..n].to_vec())
}

#[tokio::test(flavor = "multi_thread")]
async fn pulls_a_multi_platform_image_and_serves_it_over_cri() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start().expect("registry");
    let repository = format!("{}/skiff-test/tiny", registry.host());
    let bottom = layer(
        &[
            TarEntry::dir("etc/", 0o755),
            TarEntry::file("etc/hello", 0o644, b"hello from the gzip layer\n"),
            TarEntry::file("etc/old", 0o644, b"removed by the top layer\n"),
            TarEntry::dir("opaque/", 0o755),
            TarEntry::file("opaque/a", 0o644, b"hidden by an opaque whiteout\n"),
            TarEntry::symlink("bin/sh", "busybox"),
        ],
        Compression::Gzip,
    );
    let top = layer(
        &[
            TarEntry::file("etc/greeting", 0o644, b"hi from the zstd layer\n"),
            TarEntry::file("etc/.wh.old", 0o644, b""),
            TarEntry::file("opaque/.wh..wh..opq", 0o644, b""),
            TarEntry::file("opaque/b", 0o644, b"new\n"),
        ],
        Compression::Zstd,
    );
    let arm_only = layer(
        &[TarEntry::file("arch", 0o644, b"arm64\n")],
        Compression::Gzip,
    );
    // The index lists arm64 first: the runtime must pick linux/amd64, not the first entry.
    let built = ImageBuilder::new()
        .platform(Platform::new("arm64", vec![arm_only]).config(exec_config()))
        .platform(Platform::new("amd64", vec![bottom.clone(), top]).config(exec_config()))
        .index()
        .build()
        .expect("build image");
    let amd64 = &built.platforms()[1];
    assert_eq!(amd64.architecture, "amd64");
    let image = push(registry.host(), "skiff-test/tiny", "v1", &built).expect("push");
    assert_eq!(image, format!("{repository}:v1"));
    let index_digest = built.digest();

    let root = tempfile::tempdir().expect("tempdir");
    let images = open_images(root.path()).expect("image manager");
    let record = images.pull(&image, None).await.expect("pull");
    assert_eq!(
        record.id, amd64.config_digest,
        "the linux/amd64 entry is chosen"
    );
    assert_eq!(record.repo_tags, vec![image.clone()]);
    assert_eq!(
        record.repo_digests,
        vec![format!("{repository}@{index_digest}")]
    );
    assert_eq!(record.size, amd64.layers_size);
    assert_eq!(record.chain_ids.len(), 2);
    assert_eq!(record.chain_ids[0], bottom.diff_id());
    let user = record
        .config
        .config()
        .as_ref()
        .and_then(|config| config.user().clone());
    assert_eq!(user.as_deref(), Some("1000:1000"));

    // Layers unpacked under their chain IDs, whiteouts in overlayfs form.
    let snapshots = images.snapshotter();
    let bottom_dir = snapshots.layer_dir(&record.chain_ids[0]).expect("dir");
    let top_dir = snapshots.layer_dir(&record.chain_ids[1]).expect("dir");
    assert_eq!(
        std::fs::read(bottom_dir.join("etc/hello")).expect("read"),
        b"hello from the gzip layer\n"
    );
    assert_eq!(
        std::fs::read_link(bottom_dir.join("bin/sh")).expect("symlink"),
        Path::new("busybox")
    );
    let whiteout = std::fs::symlink_metadata(top_dir.join("etc/old")).expect("whiteout");
    assert!(whiteout.file_type().is_char_device() && whiteout.rdev() == 0);
    assert_eq!(
        xattr(&top_dir.join("opaque"), c"trusted.overlay.opaque").as_deref(),
        Some(&b"y"[..])
    );
    // Blobs in the content store, by digest.
    let blob = root
        .path()
        .join("content/blobs/sha256")
        .join(&amd64.config_digest["sha256:".len()..]);
    assert!(blob.is_file());

    // Lookups by tag, ID, bare hex, repo digest; a second pull changes nothing.
    assert_eq!(images.get(&image).map(|r| r.id), Some(record.id.clone()));
    assert!(images.get(&record.id).is_some());
    assert!(images.get(&record.id["sha256:".len()..]).is_some());
    assert!(
        images
            .get(&format!("{repository}@{index_digest}"))
            .is_some()
    );
    assert!(images.get(&format!("{repository}:v2")).is_none());
    let blob_mtime = std::fs::metadata(&blob)
        .expect("stat")
        .modified()
        .expect("mtime");
    let again = images.pull(&image, None).await.expect("pull again");
    assert_eq!(again.id, record.id);
    assert_eq!(
        std::fs::metadata(&blob)
            .expect("stat")
            .modified()
            .expect("mtime"),
        blob_mtime,
        "present blobs are not downloaded again"
    );
    // Records survive a restart.
    let reopened = open_images(root.path()).expect("reopen");
    assert_eq!(reopened.list().len(), 1);
    drop(reopened);

    // The overlay of the image shows the merged tree.
    let mount = snapshots
        .prepare("pull-test-rootfs", &record.chain_ids)
        .expect("prepare");
    let target = root.path().join("rootfs");
    std::fs::create_dir(&target).expect("mkdir");
    mount.mount(&target).expect("mount");
    let seen = (
        target.join("etc/hello").exists(),
        target.join("etc/greeting").exists(),
        target.join("etc/old").exists(),
        target.join("opaque/a").exists(),
        target.join("opaque/b").exists(),
    );
    unmount(&target).expect("unmount");
    assert_eq!(seen, (true, true, false, false, true));
    snapshots
        .remove("pull-test-rootfs")
        .expect("remove snapshot");

    // The CRI ImageService.
    let status = images
        .image_status(tonic::Request::new(ImageStatusRequest {
            image: spec(&image),
            verbose: true,
        }))
        .await
        .expect("status")
        .into_inner();
    let cri_image = status.image.expect("image present");
    assert_eq!(cri_image.id, record.id);
    assert_eq!(cri_image.uid.map(|uid| uid.value), Some(1000));
    assert!(status.info["info"].contains("chainIDs"));
    let listed = images
        .list_images(tonic::Request::new(ListImagesRequest {
            filter: Some(ImageFilter {
                image: spec(&image),
            }),
        }))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.images.len(), 1);
    let fs_info = images
        .image_fs_info(tonic::Request::new(ImageFsInfoRequest {}))
        .await
        .expect("fs info")
        .into_inner();
    let usage = &fs_info.image_filesystems[0];
    assert!(usage.used_bytes.as_ref().expect("bytes").value > 0);
    assert!(usage.inodes_used.as_ref().expect("inodes").value >= 10);
    assert!(usage.timestamp > 0);

    images
        .remove_image(tonic::Request::new(RemoveImageRequest {
            image: spec(&image),
        }))
        .await
        .expect("remove");
    images
        .remove_image(tonic::Request::new(RemoveImageRequest {
            image: spec(&image),
        }))
        .await
        .expect("removing an absent image is fine");
    let status = images
        .image_status(tonic::Request::new(ImageStatusRequest {
            image: spec(&image),
            verbose: false,
        }))
        .await
        .expect("status of an absent image is not an error")
        .into_inner();
    assert!(status.image.is_none());
    assert!(
        !bottom_dir.exists() && !top_dir.exists(),
        "layers collected"
    );
    assert!(!blob.exists(), "blobs collected");

    // Pull through the CRI call returns the image ID.
    let pulled = images
        .pull_image(tonic::Request::new(PullImageRequest {
            image: spec(&image),
            ..Default::default()
        }))
        .await
        .expect("pull")
        .into_inner();
    assert_eq!(pulled.image_ref, record.id);
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_pulls_leave_no_image_and_report_what_went_wrong() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start().expect("registry");
    let repository = format!("{}/skiff-test/broken", registry.host());
    let root = tempfile::tempdir().expect("tempdir");
    let images = open_images(root.path()).expect("image manager");

    // Unknown tag: NotFound, naming the image.
    let missing = format!("{repository}:nope");
    let err = images.pull(&missing, None).await.expect_err("no such tag");
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let status = tonic::Status::from(err);
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains(&missing), "{}", status.message());

    // A layer that does not match the config's diff ID: DataLoss, nothing visible.
    let good = layer(&[TarEntry::file("ok", 0o644, b"ok\n")], Compression::Gzip);
    let lying = layer(
        &[TarEntry::file("evil", 0o644, b"not what the config says\n")],
        Compression::Zstd,
    );
    let diff_ids = vec![good.diff_id(), good.diff_id()];
    let built = ImageBuilder::new()
        .platform(
            Platform::new("amd64", vec![good, lying])
                .config(exec_config())
                .diff_ids(diff_ids),
        )
        .index()
        .build()
        .expect("build image");
    let image = push(registry.host(), "skiff-test/broken", "v1", &built).expect("push");
    let err = images
        .pull(&image, None)
        .await
        .expect_err("diff ID mismatch");
    let status = tonic::Status::from(err);
    assert_eq!(status.code(), tonic::Code::DataLoss, "{}", status.message());
    assert!(status.message().contains(&image), "{}", status.message());
    assert!(images.get(&image).is_none());
    assert!(images.list().is_empty());
    let leftovers: Vec<_> = std::fs::read_dir(images.snapshotter().root())
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Malformed reference and unreachable registry.
    let err = images
        .pull("Not A Reference", None)
        .await
        .expect_err("bad ref");
    assert_eq!(
        tonic::Status::from(err).code(),
        tonic::Code::InvalidArgument
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("port");
    let err = images
        .pull(&format!("{closed}/nothing:here"), None)
        .await
        .expect_err("nothing listens");
    assert_eq!(tonic::Status::from(err).code(), tonic::Code::Unavailable);
}
