//! An [`Image`] as the files of an OCI image layout or of a `docker save` archive, for
//! air-gapped import tests; [`archive_tar`] packs them (any names, even unsafe ones).

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::{Content, Image};

/// One file of an archive: its path inside the archive and its bytes.
pub type ArchiveFile = (String, Vec<u8>);

impl Image {
    /// The files of an OCI image layout (image-spec `image-layout.md`): `oci-layout`,
    /// `index.json` with one entry for what the tag points to, annotated
    /// `org.opencontainers.image.ref.name: ref_name` (a full reference like
    /// `example.com/app:v1`, or a bare tag), and every blob and manifest under
    /// `blobs/sha256/<hex>`.
    pub fn oci_layout_files(&self, ref_name: &str) -> Vec<ArchiveFile> {
        let mut entry = self.top.descriptor();
        entry["annotations"] = json!({"org.opencontainers.image.ref.name": ref_name});
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [entry],
        });
        let mut files = vec![
            (
                "oci-layout".to_string(),
                br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
            ),
            ("index.json".to_string(), index.to_string().into_bytes()),
        ];
        let contents = self
            .blobs
            .iter()
            .chain(&self.children)
            .chain(std::iter::once(&self.top));
        files.extend(contents.map(|content| (blob_path(content), content.data.clone())));
        files
    }

    /// The files of a `docker save` archive of the primary platform: `manifest.json`
    /// (`Config`, `RepoTags`, `Layers`), the config as `<config-hex>.json` and each layer
    /// blob as `<layer-hex>/layer.tar`. Docker writes uncompressed layers; build the
    /// image from [`Compression::None`](crate::Compression) layers to get the same.
    ///
    /// Errors: the image's manifest cannot be read back.
    pub fn docker_archive_files(&self, repo_tags: &[&str]) -> anyhow::Result<Vec<ArchiveFile>> {
        let manifest_content = if self.children.is_empty() {
            &self.top
        } else {
            &self.children[0]
        };
        let manifest: Value = serde_json::from_slice(&manifest_content.data)?;
        let hex = |digest: &Value| -> anyhow::Result<String> {
            let digest = digest.as_str().context("descriptor without a digest")?;
            Ok(digest.trim_start_matches("sha256:").to_string())
        };
        let config_name = format!("{}.json", hex(&manifest["config"]["digest"])?);
        let mut files = vec![(
            config_name.clone(),
            self.blob(&manifest["config"])?.to_vec(),
        )];
        let mut layer_names = Vec::new();
        for layer in manifest["layers"]
            .as_array()
            .context("manifest without layers")?
        {
            let name = format!("{}/layer.tar", hex(&layer["digest"])?);
            files.push((name.clone(), self.blob(layer)?.to_vec()));
            layer_names.push(name);
        }
        let saved = json!([{
            "Config": config_name,
            "RepoTags": repo_tags,
            "Layers": layer_names,
        }]);
        files.insert(
            0,
            ("manifest.json".to_string(), saved.to_string().into_bytes()),
        );
        Ok(files)
    }

    fn blob(&self, descriptor: &Value) -> anyhow::Result<&[u8]> {
        let digest = descriptor["digest"].as_str().unwrap_or_default();
        match self.blobs.iter().find(|blob| blob.digest == digest) {
            Some(blob) => Ok(&blob.data),
            None => bail!("no blob {digest} in the image"),
        }
    }
}

fn blob_path(content: &Content) -> String {
    format!(
        "blobs/sha256/{}",
        content.digest.trim_start_matches("sha256:")
    )
}

/// A tar of `files`, in order, with their names exactly as given (`../x` included, to
/// test path checks) and parent directories not listed.
///
/// Errors: a name longer than 100 bytes (the ustar name field).
pub fn archive_tar(files: &[ArchiveFile]) -> anyhow::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut header = tar::Header::new_ustar();
        let field = &mut header.as_old_mut().name;
        if name.len() > field.len() {
            bail!("archive name {name:?} is longer than {} bytes", field.len());
        }
        field[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_size(data.len() as u64);
        header.set_mtime(0);
        header.set_cksum();
        tar.append(&header, data.as_slice())?;
    }
    Ok(tar.into_inner()?)
}

/// Writes `files` under `dir` (an unpacked archive, like an OCI layout directory).
///
/// Errors: a name that is absolute or has `..`, or the write fails.
pub fn write_files(dir: &Path, files: &[ArchiveFile]) -> anyhow::Result<()> {
    for (name, data) in files {
        let relative = Path::new(name);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!("refusing to write {name:?} outside {}", dir.display());
        }
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, data).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
