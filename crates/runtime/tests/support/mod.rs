//! Test support: a throwaway local registry (Debian's `docker-registry`, distribution 2.8)
//! and helpers to build and push tiny images with `oci-client`.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::manifest::{
    ImageIndexEntry, OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor,
    OciImageIndex, OciImageManifest, Platform,
};
use oci_client::{Client, Reference};
use oci_spec::image::{Arch, Os};
use sha2::{Digest, Sha256};

const REGISTRY_BINARY: &str = "/usr/bin/docker-registry";

/// A registry listening on a free loopback port; killed and deleted on drop.
pub struct Registry {
    child: Child,
    _dir: tempfile::TempDir,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

impl Registry {
    /// Starts a registry with filesystem storage in a temporary directory.
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .expect("free port")
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                dir.path().join("data").display()
            ),
        )
        .expect("write registry config");
        let child = Command::new(REGISTRY_BINARY)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = Registry {
            child,
            _dir: dir,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&registry.addr).is_err() {
            assert!(Instant::now() < deadline, "registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sha256:<hex>` of `data`.
pub fn digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// One file system entry of a test layer.
pub enum Entry<'a> {
    Dir(&'a str),
    File(&'a str, &'a [u8]),
    Symlink(&'a str, &'a str),
}

/// An uncompressed layer tar with fixed ownership 0:0 and mtime.
pub fn layer_tar(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(1_700_000_000);
        match entry {
            Entry::Dir(path) => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder.append_data(&mut header, path, std::io::empty())
            }
            Entry::File(path, data) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(0o644);
                header.set_size(data.len() as u64);
                builder.append_data(&mut header, path, *data)
            }
            Entry::Symlink(path, target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                builder.append_link(&mut header, path, target)
            }
        }
        .expect("append tar entry");
    }
    builder.into_inner().expect("finish tar")
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut encoder, data).expect("gzip");
    encoder.finish().expect("gzip")
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).expect("zstd")
}

/// A layer to push: compressed blob, media type, and the uncompressed tar's digest.
pub struct Layer {
    pub blob: Vec<u8>,
    pub media_type: &'static str,
    pub diff_id: String,
}

impl Layer {
    pub fn gzip(tar: &[u8]) -> Layer {
        Layer {
            blob: gzip(tar),
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
            diff_id: digest(tar),
        }
    }

    pub fn zstd(tar: &[u8]) -> Layer {
        Layer {
            blob: zstd(tar),
            media_type: "application/vnd.oci.image.layer.v1.tar+zstd",
            diff_id: digest(tar),
        }
    }
}

/// A pushed single-platform image.
pub struct Pushed {
    pub config_digest: String,
    pub manifest_digest: String,
    pub manifest_size: usize,
    pub layers_size: u64,
}

/// Pushes to a loopback registry with `oci-client`.
pub struct Pusher {
    client: Client,
}

impl Pusher {
    pub fn new() -> Pusher {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::try_from(ClientConfig {
            protocol: ClientProtocol::Http,
            ..ClientConfig::default()
        })
        .expect("client");
        Pusher { client }
    }

    /// Pushes layers, config and manifest; the manifest goes under its own digest.
    /// `diff_ids` overrides the config's `rootfs.diff_ids` (to build broken images).
    pub async fn push_image(
        &self,
        repository: &str,
        layers: &[Layer],
        architecture: &str,
        diff_ids: Option<Vec<String>>,
    ) -> Pushed {
        let reference: Reference = format!("{repository}:staging").parse().expect("reference");
        let diff_ids =
            diff_ids.unwrap_or_else(|| layers.iter().map(|layer| layer.diff_id.clone()).collect());
        let config = serde_json::json!({
            "architecture": architecture,
            "os": "linux",
            "config": {
                "User": "1000:1000",
                "Entrypoint": ["/bin/sh"],
                "Env": ["PATH=/bin"],
            },
            "rootfs": { "type": "layers", "diff_ids": diff_ids },
        });
        let config = serde_json::to_vec(&config).expect("config json");
        let image_layers: Vec<ImageLayer> = layers
            .iter()
            .map(|layer| ImageLayer::new(layer.blob.clone(), layer.media_type.to_string(), None))
            .collect();
        for layer in &image_layers {
            self.client
                .push_blob(&reference, layer.data.clone(), &layer.sha256_digest())
                .await
                .expect("push layer");
        }
        let config_digest = digest(&config);
        self.client
            .push_blob(&reference, config.clone(), &config_digest)
            .await
            .expect("push config");
        let manifest = OciImageManifest {
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
            config: OciDescriptor {
                media_type: "application/vnd.oci.image.config.v1+json".to_string(),
                digest: config_digest.clone(),
                size: config.len() as i64,
                ..OciDescriptor::default()
            },
            layers: image_layers
                .iter()
                .map(|layer| OciDescriptor {
                    media_type: layer.media_type.clone(),
                    digest: layer.sha256_digest(),
                    size: layer.data.len() as i64,
                    ..OciDescriptor::default()
                })
                .collect(),
            ..OciImageManifest::default()
        };
        let body = serde_json::to_vec(&manifest).expect("manifest json");
        let manifest_digest = digest(&body);
        let by_digest = reference.clone_with_digest(manifest_digest.clone());
        self.client
            .push_manifest_raw(
                &by_digest,
                body.clone(),
                OCI_IMAGE_MEDIA_TYPE.parse().expect("content type"),
            )
            .await
            .expect("push manifest");
        Pushed {
            config_digest,
            manifest_digest,
            manifest_size: body.len(),
            layers_size: layers.iter().map(|layer| layer.blob.len() as u64).sum(),
        }
    }

    /// Tags `reference` with an image index of `(architecture, image)` entries; returns the
    /// index digest.
    pub async fn push_index(&self, reference: &str, images: &[(Arch, &Pushed)]) -> String {
        let reference: Reference = reference.parse().expect("reference");
        let index = OciImageIndex {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_INDEX_MEDIA_TYPE.to_string()),
            manifests: images
                .iter()
                .map(|(arch, pushed)| ImageIndexEntry {
                    media_type: OCI_IMAGE_MEDIA_TYPE.to_string(),
                    digest: pushed.manifest_digest.clone(),
                    size: pushed.manifest_size as i64,
                    platform: Some(Platform {
                        architecture: arch.clone(),
                        os: Os::Linux,
                        os_version: None,
                        os_features: None,
                        variant: None,
                        features: None,
                    }),
                    annotations: None,
                    artifact_type: None,
                })
                .collect(),
            artifact_type: None,
            annotations: None,
        };
        let body = serde_json::to_vec(&index).expect("index json");
        self.client
            .push_manifest_raw(
                &reference,
                body.clone(),
                OCI_IMAGE_INDEX_MEDIA_TYPE.parse().expect("content type"),
            )
            .await
            .expect("push index");
        digest(&body)
    }
}
