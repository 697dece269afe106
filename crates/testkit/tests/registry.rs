//! The testkit's own tests: a real registry, real pushes, manifests fetched back.

use serde_json::Value;
use sha2::{Digest, Sha256};
use skiff_testkit::{Compression, ImageOptions, MediaTypes, Registry, busybox, busybox_with, push};
use std::net::TcpStream;

/// GET `path` on `host` with `accept`; returns (status, Docker-Content-Digest, body).
fn get(host: &str, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut response = agent
        .get(format!("http://{host}{path}"))
        .header("Accept", accept)
        .call()
        .unwrap();
    let digest = response
        .headers()
        .get("docker-content-digest")
        .map(|d| d.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()
        .unwrap();
    (response.status().as_u16(), digest, body)
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

/// Fetches `repo:tag` as `media_type` and checks status, digest and media type.
fn fetch_manifest(
    host: &str,
    repo: &str,
    reference: &str,
    media_type: &str,
    digest: &str,
) -> Value {
    let (status, header_digest, body) = get(
        host,
        &format!("/v2/{repo}/manifests/{reference}"),
        media_type,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header_digest, digest);
    assert_eq!(sha256(&body), digest);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["mediaType"], media_type);
    doc
}

#[test]
fn pushed_busybox_manifest_and_blobs_come_back() {
    let registry = Registry::start().unwrap();
    let host = registry.host().to_string();
    assert!(host.starts_with("127.0.0.1:"));
    let image = busybox().unwrap();
    let reference = push(&host, "test/busybox", "v1", &image).unwrap();
    assert_eq!(reference, format!("{host}/test/busybox:v1"));

    let manifest = fetch_manifest(
        &host,
        "test/busybox",
        "v1",
        image.media_type(),
        image.digest(),
    );
    assert_eq!(
        image.media_type(),
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(manifest["config"]["digest"], image.config_digest());
    assert_eq!(
        manifest["layers"][0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );

    let (status, _, config) = get(
        &host,
        &format!("/v2/test/busybox/blobs/{}", image.config_digest()),
        "*/*",
    );
    assert_eq!(status, 200);
    assert_eq!(sha256(&config), image.config_digest());
    let config: Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(
        config["config"]["Env"][0],
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin"
    );

    // Pushing again is idempotent (blobs already present are skipped).
    push(&host, "test/busybox", "v1", &image).unwrap();
    drop(registry);
    assert!(
        TcpStream::connect(&host).is_err(),
        "registry still listening after drop"
    );
}

#[test]
fn index_push_serves_the_index_and_both_platform_manifests() {
    for media_types in [MediaTypes::Oci, MediaTypes::Docker] {
        let registry = Registry::start().unwrap();
        let host = registry.host();
        let image = busybox_with(&ImageOptions {
            media_types,
            index: true,
            ..Default::default()
        })
        .unwrap();
        push(host, "multi/busybox", "latest", &image).unwrap();
        let index = fetch_manifest(
            host,
            "multi/busybox",
            "latest",
            image.media_type(),
            image.digest(),
        );
        let manifests = index["manifests"].as_array().unwrap();
        let archs: Vec<&str> = manifests
            .iter()
            .map(|m| m["platform"]["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(archs, ["amd64", "arm64"]);
        assert_eq!(manifests[0]["digest"], image.manifest_digest());
        for m in manifests {
            let digest = m["digest"].as_str().unwrap();
            let media_type = m["mediaType"].as_str().unwrap();
            fetch_manifest(host, "multi/busybox", digest, media_type, digest);
        }
    }
}

#[test]
fn zstd_and_uncompressed_docker_variants_push() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    for (tag, compression, media_types, layer_type) in [
        (
            "zstd",
            Compression::Zstd,
            MediaTypes::Oci,
            "application/vnd.oci.image.layer.v1.tar+zstd",
        ),
        (
            "plain",
            Compression::None,
            MediaTypes::Docker,
            "application/vnd.docker.image.rootfs.diff.tar",
        ),
    ] {
        let image = busybox_with(&ImageOptions {
            compression,
            media_types,
            index: false,
        })
        .unwrap();
        push(host, "variants/busybox", tag, &image).unwrap();
        let manifest = fetch_manifest(
            host,
            "variants/busybox",
            tag,
            image.media_type(),
            image.digest(),
        );
        assert_eq!(manifest["layers"][0]["mediaType"], layer_type);
        let layer_digest = manifest["layers"][0]["digest"].as_str().unwrap();
        let (status, _, layer) = get(
            host,
            &format!("/v2/variants/busybox/blobs/{layer_digest}"),
            "*/*",
        );
        assert_eq!(status, 200);
        let tar = match compression {
            Compression::Zstd => zstd::decode_all(layer.as_slice()).unwrap(),
            _ => layer,
        };
        let mut archive = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().any(|n| n == "bin/busybox"), "{names:?}");
    }
}
