//! Pulls through the registry configuration and under adverse conditions, against a real
//! registry (Debian's docker-registry): basic auth from the CRI AuthConfig and from the
//! config, mirrors, the no-progress timeout, concurrent pulls sharing a layer, and an
//! interrupted pull. Needs root (layer ownership).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_cri::v1::AuthConfig;
use skiff_runtime::RuntimeConfig;
use skiff_runtime::config::{Credentials, RegistryHost};
use skiff_runtime::image::{Error, ImageManager};
use skiff_testkit::{
    Compression, Image, ImageBuilder, Layer, Platform, Proxy, Registry, TarEntry, Throttle,
    layer_tar,
};

fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// An image of one small layer holding `name`.
fn small_image(name: &str) -> Image {
    let tar = layer_tar(&[TarEntry::file(name, 0o644, name.as_bytes().to_vec())]).expect("tar");
    ImageBuilder::new()
        .platform(Platform::new(
            "amd64",
            vec![Layer::new(tar, Compression::Gzip)],
        ))
        .build()
        .expect("image")
}

/// An uncompressed layer of `size` random bytes in one file (its blob digest is its diff
/// ID, and it does not shrink).
fn big_layer(name: &str, size: usize) -> Layer {
    let mut data = vec![0u8; size];
    let mut state = 0x2545_f491_4f6c_dd1du64 ^ name.len() as u64;
    for byte in &mut data {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    let tar = layer_tar(&[TarEntry::file(name, 0o644, data)]).expect("tar");
    Layer::new(tar, Compression::None)
}

fn image_of(layers: Vec<Layer>) -> Image {
    ImageBuilder::new()
        .platform(Platform::new("amd64", layers))
        .build()
        .expect("image")
}

fn open(root: &Path, configure: impl FnOnce(&mut RuntimeConfig)) -> ImageManager {
    let mut config = RuntimeConfig {
        root: root.to_path_buf(),
        ..RuntimeConfig::default()
    };
    configure(&mut config);
    ImageManager::new(&config).expect("image manager")
}

/// Names under the content store and snapshotter that are work in progress.
fn temporaries(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["content/blobs/sha256", "snapshots", "images"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(".tmp-") {
                    found.push(format!("{dir}/{name}"));
                }
            }
        }
    }
    found
}

/// Pulls `image` without credentials, then as `username` with a wrong password: both are
/// refused with `Unauthenticated` and nothing is stored. Returns the wrong credentials and
/// the error of the second pull.
async fn refused_without_the_right_credentials(
    images: &ImageManager,
    image: &str,
    username: &str,
) -> (AuthConfig, Error) {
    let err = images.pull(image, None).await.expect_err("anonymous");
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
    let wrong = AuthConfig {
        username: username.into(),
        password: "wrong".into(),
        ..Default::default()
    };
    let err = images.pull(image, Some(&wrong)).await.expect_err("wrong");
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
    assert!(images.list().is_empty());
    (wrong, err)
}

#[tokio::test(flavor = "multi_thread")]
async fn basic_auth_from_the_request_or_the_config() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start_with_htpasswd("skiff", "s3cret").expect("registry");
    let image = registry
        .push("skiff-test/private", "v1", &small_image("private"))
        .expect("push");
    let root = tempfile::tempdir().expect("tempdir");
    let images = open(root.path(), |_| {});

    // No credentials, then wrong ones: Unauthenticated, saying so.
    let (wrong, err) = refused_without_the_right_credentials(&images, &image, "skiff").await;
    let status = tonic::Status::from(err);
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(
        status.message().to_lowercase().contains("unauthorized"),
        "{}",
        status.message()
    );

    // username/password, then the base64 `auth` field.
    let right = AuthConfig {
        username: "skiff".into(),
        password: "s3cret".into(),
        ..Default::default()
    };
    let record = images.pull(&image, Some(&right)).await.expect("pull");
    assert_eq!(record.repo_tags, vec![image.clone()]);
    images.remove(&image).expect("remove");
    let encoded = AuthConfig {
        auth: base64::engine::general_purpose::STANDARD.encode("skiff:s3cret"),
        ..Default::default()
    };
    images
        .pull(&image, Some(&encoded))
        .await
        .expect("pull with auth");
    images.remove(&image).expect("remove");

    // The configured credentials when the request has none (an empty AuthConfig counts
    // as none), but not over the request's own.
    let root = tempfile::tempdir().expect("tempdir");
    let configured = open(root.path(), |config| {
        config.registries.insert(
            registry.host().to_string(),
            RegistryHost {
                auth: Some(Credentials::Basic {
                    username: "skiff".into(),
                    password: "s3cret".into(),
                }),
                ..Default::default()
            },
        );
    });
    configured
        .pull(&image, Some(&AuthConfig::default()))
        .await
        .expect("pull with configured credentials");
    configured.remove(&image).expect("remove");
    let err = configured
        .pull(&image, Some(&wrong))
        .await
        .expect_err("request wins");
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_token_auth_with_basic_credentials() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start_with_token_auth("skiff", "t0ken").expect("registry");
    let image = registry
        .push("skiff-test/tokened", "v1", &small_image("tokened"))
        .expect("push");
    let root = tempfile::tempdir().expect("tempdir");
    let images = open(root.path(), |_| {});
    refused_without_the_right_credentials(&images, &image, "skiff").await;
    let right = AuthConfig {
        username: "skiff".into(),
        password: "t0ken".into(),
        ..Default::default()
    };
    images.pull(&image, Some(&right)).await.expect("pull");
    assert!(images.get(&image).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn mirrors_are_tried_in_order_before_the_registry() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let mirror = Registry::start().expect("mirror");
    let upstream = Registry::start().expect("registry");
    let built = small_image("mirrored");
    mirror.push("skiff-test/app", "v1", &built).expect("push");
    let only_upstream = small_image("upstream-only");
    upstream
        .push("skiff-test/other", "v1", &only_upstream)
        .expect("push");
    // A dead mirror (nothing listens there), then a working one, for a registry host that
    // does not exist: the pull never needs it.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").to_string()
    };
    let absent = "registry.invalid:5000";
    let root = tempfile::tempdir().expect("tempdir");
    let images = open(root.path(), |config| {
        let mut registries = BTreeMap::new();
        registries.insert(
            absent.to_string(),
            RegistryHost {
                mirrors: vec![
                    format!("http://{dead}"),
                    format!("http://{}", mirror.host()),
                ],
                ..Default::default()
            },
        );
        registries.insert(
            upstream.host().to_string(),
            RegistryHost {
                mirrors: vec![format!("http://{}", mirror.host())],
                ..Default::default()
            },
        );
        config.registries = registries;
    });
    let image = format!("{absent}/skiff-test/app:v1");
    let record = images
        .pull(&image, None)
        .await
        .expect("pull via the mirror");
    assert_eq!(record.id, built.config_digest());
    assert_eq!(
        record.repo_tags,
        vec![image],
        "named as requested, not as the mirror"
    );
    // The mirror lacks this one: the registry itself serves it.
    let other = format!("{}/skiff-test/other:v1", upstream.host());
    let record = images
        .pull(&other, None)
        .await
        .expect("pull from the registry");
    assert_eq!(record.id, only_upstream.config_digest());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_pull_times_out_while_other_pulls_proceed() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start().expect("registry");
    let stalled_image = image_of(vec![big_layer("big", 2 << 20)]);
    registry
        .push("skiff-test/stalls", "v1", &stalled_image)
        .expect("push");
    let quick = registry
        .push("skiff-test/quick", "v1", &small_image("quick"))
        .expect("push");
    // Manifests and configs pass; the 2 MiB layer stops after 256 KiB.
    let proxy = Proxy::start(
        registry.host(),
        Throttle {
            stall_after: Some(256 << 10),
            ..Default::default()
        },
    )
    .expect("proxy");
    let timeout = Duration::from_secs(3);
    let root = tempfile::tempdir().expect("tempdir");
    let images = open(root.path(), |config| config.pull_progress_timeout = timeout);
    let stalled = format!("{}/skiff-test/stalls:v1", proxy.host());

    let started = Instant::now();
    let (stalled_result, quick_result) = tokio::join!(images.pull(&stalled, None), async {
        // Starts once the stalled pull is under way; must not wait for it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let result = images.pull(&quick, None).await;
        (result, started.elapsed())
    });
    let (quick_result, quick_done) = quick_result;
    quick_result.expect("the other pull");
    assert!(quick_done < timeout, "the other pull waited {quick_done:?}");
    let err = stalled_result.expect_err("stalled pull");
    assert!(matches!(err, Error::NoProgress { .. }), "{err}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= timeout && elapsed < timeout * 4,
        "timed out after {elapsed:?}"
    );
    let status = tonic::Status::from(err);
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(
        status.message().contains("no progress"),
        "{}",
        status.message()
    );
    assert!(images.get(&stalled).is_none(), "nothing visible");
    assert_eq!(images.list().len(), 1);
    assert_eq!(temporaries(root.path()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_pulls_download_a_shared_layer_once() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start().expect("registry");
    let shared = big_layer("shared", 2 << 20);
    let shared_digest = shared.diff_id();
    let first = image_of(vec![shared.clone(), big_layer("first", 1 << 10)]);
    let second = image_of(vec![shared, big_layer("second-one", 1 << 10)]);
    registry
        .push("skiff-test/first", "v1", &first)
        .expect("push");
    registry
        .push("skiff-test/second", "v1", &second)
        .expect("push");
    // 2 MiB at 2 MiB/s: both pulls reach the shared layer while it is downloading.
    let proxy = Proxy::start(
        registry.host(),
        Throttle {
            bytes_per_second: Some(2 << 20),
            ..Default::default()
        },
    )
    .expect("proxy");
    let root = tempfile::tempdir().expect("tempdir");
    let images = open(root.path(), |_| {});
    let a = format!("{}/skiff-test/first:v1", proxy.host());
    let b = format!("{}/skiff-test/second:v1", proxy.host());
    let started = Instant::now();
    let (a, b) = tokio::join!(images.pull(&a, None), images.pull(&b, None));
    let elapsed = started.elapsed();
    assert_eq!(a.expect("first").id, first.config_digest());
    assert_eq!(b.expect("second").id, second.config_digest());
    assert_eq!(
        registry.blob_gets(&shared_digest).expect("access log"),
        1,
        "the shared layer is downloaded once"
    );
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_pull_leaves_nothing_after_a_restart() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let registry = Registry::start().expect("registry");
    let built = image_of(vec![big_layer("interrupted", 2 << 20)]);
    registry
        .push("skiff-test/interrupted", "v1", &built)
        .expect("push");
    let proxy = Proxy::start(
        registry.host(),
        Throttle {
            stall_after: Some(256 << 10),
            ..Default::default()
        },
    )
    .expect("proxy");
    let root = tempfile::tempdir().expect("tempdir");
    let image = format!("{}/skiff-test/interrupted:v1", proxy.host());
    {
        let images = std::sync::Arc::new(open(root.path(), |_| {}));
        let pull = {
            let images = images.clone();
            let image = image.clone();
            tokio::spawn(async move { images.pull(&image, None).await })
        };
        // Wait for the partial layer blob, then stop the pull there, as a kill would.
        let deadline = Instant::now() + Duration::from_secs(20);
        while temporaries(root.path()).is_empty() {
            assert!(Instant::now() < deadline, "the download never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        pull.abort();
        let _ = pull.await;
        assert!(images.get(&image).is_none());
    }
    assert!(
        !temporaries(root.path()).is_empty(),
        "a partial blob was left"
    );
    let reopened = open(root.path(), |_| {});
    assert!(reopened.list().is_empty(), "no image after the restart");
    assert_eq!(temporaries(root.path()), Vec::<String>::new());
    let blob = root
        .path()
        .join("content/blobs/sha256")
        .join(&built.platforms()[0].config_digest["sha256:".len()..]);
    assert!(blob.is_file(), "complete blobs stay, to be reused");
}
