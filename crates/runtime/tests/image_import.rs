//! Air-gapped import of OCI image layouts and `docker save` archives built by the testkit:
//! names, unpacked layers, visibility to a runtime that already has the store open, and
//! broken archives that must leave nothing visible. Needs root (layer ownership).

use std::path::Path;

use serde_json::json;
use skiff_runtime::RuntimeConfig;
use skiff_runtime::image::{Error, ImageManager};
use skiff_testkit::{
    ArchiveFile, Compression, Image, ImageBuilder, Layer, Platform, TarEntry, archive_tar,
    layer_tar, write_files,
};

fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

fn config(root: &Path) -> RuntimeConfig {
    RuntimeConfig {
        root: root.to_path_buf(),
        ..RuntimeConfig::default()
    }
}

/// A two-layer image whose top layer holds `/etc/name` = `name`.
fn image(name: &str, compression: Compression) -> Image {
    let bottom = layer_tar(&[TarEntry::dir("etc/", 0o755)]).expect("tar");
    let top =
        layer_tar(&[TarEntry::file("etc/name", 0o644, name.as_bytes().to_vec())]).expect("tar");
    ImageBuilder::new()
        .platform(
            Platform::new(
                "amd64",
                vec![
                    Layer::new(bottom, compression),
                    Layer::new(top, compression),
                ],
            )
            .config(json!({"Cmd": ["/bin/sh"]})),
        )
        .build()
        .expect("image")
}

fn name_in_top_layer(images: &ImageManager, reference: &str) -> String {
    let record = images.get(reference).expect("imported image");
    let top = record.chain_ids.last().expect("layers");
    let dir = images.snapshotter().layer_dir(top).expect("layer dir");
    std::fs::read_to_string(dir.join("etc/name")).expect("unpacked file")
}

/// Leftovers of imports: entries of `<root>/import` and temporaries of the stores.
fn leftovers(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["import", "content/blobs/sha256", "snapshots", "images"] {
        for entry in std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if dir == "import" || name.starts_with(".tmp-") {
                found.push(format!("{dir}/{name}"));
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn imports_oci_layouts_visible_to_a_running_runtime() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    // The runtime's own store, open before the import, as a running runtime has it.
    let runtime = ImageManager::new(&config(root.path())).expect("runtime store");
    let tool = ImageManager::attach(&config(root.path())).expect("import store");

    // A layout directory named with a full reference.
    let built = image("layout-dir", Compression::Gzip);
    let dir = tempfile::tempdir().expect("tempdir");
    write_files(dir.path(), &built.oci_layout_files("example.com/app:v1")).expect("layout");
    let records = tool.import(dir.path()).await.expect("import directory");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].id, built.config_digest());
    assert_eq!(records[0].repo_tags, vec!["example.com/app:v1".to_string()]);
    assert_eq!(
        records[0].repo_digests,
        vec![format!("example.com/app@{}", built.digest())]
    );
    let seen = runtime
        .get("example.com/app:v1")
        .expect("visible to the runtime");
    assert_eq!(seen.id, built.config_digest());
    assert_eq!(
        name_in_top_layer(&runtime, "example.com/app:v1"),
        "layout-dir"
    );

    // A gzip-compressed tar of a layout whose ref name is a bare tag: untagged, by ID.
    let built = image("bare-tag", Compression::Zstd);
    let tar = archive_tar(&built.oci_layout_files("v2")).expect("tar");
    let file = dir.path().join("bare.tar.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).expect("gzip");
    std::fs::write(&file, gz.finish().expect("gzip")).expect("write");
    let records = tool.import(&file).await.expect("import tar.gz");
    assert!(
        records[0].repo_tags.is_empty(),
        "{:?}",
        records[0].repo_tags
    );
    assert!(runtime.get(built.config_digest()).is_some());
    assert_eq!(runtime.list().len(), 2);
    assert_eq!(leftovers(root.path()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn imports_docker_save_archives_with_their_repo_tags() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let images = ImageManager::new(&config(root.path())).expect("store");
    let built = image("docker-save", Compression::None);
    let files = built
        .docker_archive_files(&["busybox:saved", "registry.local:5000/team/app:1.0"])
        .expect("docker archive");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("saved.tar");
    std::fs::write(&file, archive_tar(&files).expect("tar")).expect("write");
    let records = images.import(&file).await.expect("import");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].id, built.config_digest());
    assert_eq!(
        records[0].repo_tags,
        vec![
            "docker.io/library/busybox:saved".to_string(),
            "registry.local:5000/team/app:1.0".to_string()
        ]
    );
    assert_eq!(name_in_top_layer(&images, "busybox:saved"), "docker-save");
    // Importing again changes nothing.
    images.import(&file).await.expect("import again");
    assert_eq!(images.list().len(), 1);
    assert_eq!(leftovers(root.path()), Vec::<String>::new());
}

/// Imports `files` as a tar and returns the error, checking nothing became visible.
async fn import_broken(files: &[ArchiveFile]) -> Error {
    let root = tempfile::tempdir().expect("tempdir");
    let images = ImageManager::new(&config(root.path())).expect("store");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("broken.tar");
    std::fs::write(&file, archive_tar(files).expect("tar")).expect("write");
    let err = images.import(&file).await.expect_err("broken archive");
    assert!(images.list().is_empty(), "no image visible after: {err}");
    assert_eq!(leftovers(root.path()), Vec::<String>::new());
    assert!(
        err.to_string().contains("broken.tar"),
        "names the archive: {err}"
    );
    err
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_archives_are_refused_and_leave_nothing_visible() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // Two images in one layout, the second missing its top layer: neither is imported.
    let good = image("good", Compression::Gzip);
    let bad = image("bad", Compression::Gzip);
    let mut good_files = good.oci_layout_files("example.com/good:v1");
    let bad_files = bad.oci_layout_files("example.com/bad:v1");
    let mut index: serde_json::Value = serde_json::from_slice(&good_files[1].1).expect("index");
    let bad_index: serde_json::Value = serde_json::from_slice(&bad_files[1].1).expect("index");
    index["manifests"]
        .as_array_mut()
        .expect("entries")
        .push(bad_index["manifests"][0].clone());
    good_files[1].1 = index.to_string().into_bytes();
    let bad_manifest: serde_json::Value =
        serde_json::from_slice(&bad_files.last().expect("manifest").1).expect("manifest");
    let missing_layer = bad_manifest["layers"][1]["digest"]
        .as_str()
        .expect("digest")
        .trim_start_matches("sha256:")
        .to_string();
    good_files.extend(
        bad_files
            .into_iter()
            .skip(2)
            .filter(|(name, _)| !name.ends_with(&missing_layer)),
    );
    let err = import_broken(&good_files).await;
    assert!(matches!(err, Error::InvalidContent { .. }), "{err}");
    assert!(err.to_string().contains("missing file"), "{err}");
    assert_eq!(
        tonic::Status::from(err).code(),
        tonic::Code::FailedPrecondition
    );

    // A blob whose bytes do not match its digest.
    let mut tampered = good.oci_layout_files("example.com/good:v1");
    let layer_file = tampered
        .iter_mut()
        .find(|(name, data)| name.starts_with("blobs/") && data.starts_with(&[0x1f, 0x8b]))
        .expect("a gzip layer");
    layer_file.1.push(0);
    let err = import_broken(&tampered).await;
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err}");

    // Names that leave the archive: in the tar, and in docker's manifest.json.
    let mut escaping = good.oci_layout_files("example.com/good:v1");
    escaping.push(("../escaped".to_string(), b"x".to_vec()));
    let err = import_broken(&escaping).await;
    assert!(err.to_string().contains("path escape"), "{err}");
    let plain = image("plain", Compression::None);
    let mut docker = plain.docker_archive_files(&["app:v1"]).expect("archive");
    docker[0].1 = json!([{
        "Config": format!("{}.json", plain.config_digest().trim_start_matches("sha256:")),
        "RepoTags": ["app:v1"],
        "Layers": ["../../etc/passwd", "x/layer.tar"],
    }])
    .to_string()
    .into_bytes();
    let err = import_broken(&docker).await;
    assert!(err.to_string().contains("path escape"), "{err}");

    // Not an image archive at all.
    let err = import_broken(&[("hello.txt".to_string(), b"hi".to_vec())]).await;
    assert!(err.to_string().contains("index.json"), "{err}");
}
