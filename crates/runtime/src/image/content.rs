//! The content store: blobs (manifests, configs, layers) by digest, under
//! `<root>/content/blobs/sha256/<hex>` (the layout of an OCI image layout's `blobs/`).
//!
//! A blob is streamed into a temporary file in the same directory while its sha256 is
//! computed, and renamed into place only when the digest matches: a blob under its final
//! name is therefore always complete and valid, and is never downloaded again.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::snapshot::atomic;
use crate::snapshot::sha256_hex;

/// Why a blob could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// The name is not a `sha256:<hex>` digest.
    #[error("unsupported digest {0:?} (only sha256 is supported)")]
    InvalidDigest(String),
    /// The received bytes hash to something else.
    #[error("received content hashes to {actual}")]
    Mismatch {
        /// sha256 of what was received.
        actual: String,
    },
    /// The download stream failed.
    #[error("download failed: {0}")]
    Fetch(io::Error),
    /// Local storage failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Blobs by digest on the local filesystem.
#[derive(Debug)]
pub struct ContentStore {
    dir: PathBuf,
}

impl ContentStore {
    /// Opens (or creates) the store under `root` (`<root>/blobs/sha256`); with
    /// `clean_leftovers`, removes partial downloads left by an interrupted process (only
    /// the store's owner may: another process's downloads look the same).
    pub fn new(root: &Path, clean_leftovers: bool) -> io::Result<Self> {
        let dir = root.join("blobs").join("sha256");
        fs::create_dir_all(&dir)?;
        if clean_leftovers {
            atomic::remove_temporaries(&dir)?;
        }
        Ok(Self { dir })
    }

    /// Where the blob `digest` lives (whether or not it is present).
    pub fn path(&self, digest: &str) -> Result<PathBuf, ContentError> {
        sha256_hex(digest)
            .map(|hex| self.dir.join(hex))
            .ok_or_else(|| ContentError::InvalidDigest(digest.to_string()))
    }

    /// Whether the blob `digest` is present with the expected `size` (bytes).
    pub fn contains(&self, digest: &str, size: u64) -> bool {
        self.path(digest)
            .ok()
            .and_then(|path| fs::metadata(path).ok())
            .is_some_and(|meta| meta.is_file() && meta.len() == size)
    }

    /// Reads a (small) blob into memory.
    pub fn read(&self, digest: &str) -> Result<Vec<u8>, ContentError> {
        let path = self.path(digest)?;
        fs::read(&path).map_err(|source| ContentError::Io {
            context: format!("read {}", path.display()),
            source,
        })
    }

    /// Stores the bytes of `stream` as blob `digest`, verifying the digest while streaming.
    /// Returns the blob's path. Nothing is left behind on error.
    pub async fn write<S, B>(&self, digest: &str, mut stream: S) -> Result<PathBuf, ContentError>
    where
        S: Stream<Item = io::Result<B>> + Unpin,
        B: AsRef<[u8]>,
    {
        let path = self.path(digest)?;
        let temp = atomic::temp_path(&path);
        let result = async {
            let io = |context: &str| {
                let context = format!("{context} {}", temp.display());
                move |source| ContentError::Io { context, source }
            };
            let mut file = tokio::fs::File::create(&temp).await.map_err(io("create"))?;
            let mut hasher = Sha256::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(ContentError::Fetch)?;
                hasher.update(chunk.as_ref());
                file.write_all(chunk.as_ref()).await.map_err(io("write"))?;
            }
            file.sync_all().await.map_err(io("sync"))?;
            let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
            if actual != digest {
                return Err(ContentError::Mismatch { actual });
            }
            tokio::fs::rename(&temp, &path).await.map_err(io("rename"))
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        result.map(|()| path)
    }

    /// Copies the file at `source` into the store, hashing it on the way, and returns its
    /// digest and stored path. With `expected`, content that hashes to anything else is
    /// refused ([`ContentError::Mismatch`]). Nothing is left behind on error. Blocking.
    pub fn add_file(
        &self,
        source: &Path,
        expected: Option<&str>,
    ) -> Result<(String, PathBuf), ContentError> {
        if let Some(expected) = expected {
            self.path(expected)?;
        }
        let temp = atomic::temp_path(&self.dir.join("import"));
        let io = |context: String| move |source| ContentError::Io { context, source };
        let result = (|| {
            let mut input =
                fs::File::open(source).map_err(io(format!("open {}", source.display())))?;
            let mut output =
                fs::File::create(&temp).map_err(io(format!("create {}", temp.display())))?;
            let mut hasher = Sha256::new();
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                let n = std::io::Read::read(&mut input, &mut buffer)
                    .map_err(io(format!("read {}", source.display())))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
                std::io::Write::write_all(&mut output, &buffer[..n])
                    .map_err(io(format!("write {}", temp.display())))?;
            }
            output
                .sync_all()
                .map_err(io(format!("sync {}", temp.display())))?;
            let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
            if expected.is_some_and(|expected| expected != actual) {
                return Err(ContentError::Mismatch { actual });
            }
            let path = self.path(&actual)?;
            fs::rename(&temp, &path).map_err(io(format!("rename {}", temp.display())))?;
            Ok((actual, path))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        result
    }

    /// Removes the blob `digest`; absent is fine.
    pub fn remove(&self, digest: &str) -> Result<(), ContentError> {
        let path = self.path(digest)?;
        match fs::remove_file(&path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(ContentError::Io {
                context: format!("remove {}", path.display()),
                source: err,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(data: &[u8]) -> String {
        format!("sha256:{}", hex::encode(Sha256::digest(data)))
    }

    #[tokio::test]
    async fn stores_verified_blobs_and_rejects_mismatches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ContentStore::new(dir.path(), true).expect("store");
        let data = b"layer bytes";
        let digest = digest_of(data);
        let chunks = futures::stream::iter([Ok::<_, io::Error>(&data[..5]), Ok(&data[5..])]);
        let path = store.write(&digest, chunks).await.expect("write");
        assert_eq!(path, dir.path().join("blobs/sha256").join(&digest[7..]));
        assert_eq!(store.read(&digest).expect("read"), data);
        assert!(store.contains(&digest, data.len() as u64));
        assert!(!store.contains(&digest, 1));

        let wrong = digest_of(b"something else");
        let err = store
            .write(
                &wrong,
                futures::stream::iter([Ok::<_, io::Error>(&data[..])]),
            )
            .await;
        assert!(matches!(err, Err(ContentError::Mismatch { .. })));
        assert!(!store.contains(&wrong, data.len() as u64));
        let failing =
            futures::stream::iter([Ok(&data[..]), Err(io::Error::other("connection reset"))]);
        assert!(matches!(
            store.write(&wrong, failing).await,
            Err(ContentError::Fetch(_))
        ));
        let names: Vec<_> = fs::read_dir(dir.path().join("blobs/sha256"))
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "only the verified blob remains: {names:?}");
        assert!(matches!(
            store.path("md5:00"),
            Err(ContentError::InvalidDigest(_))
        ));

        let file = dir.path().join("file");
        fs::write(&file, data).expect("write file");
        let (added, path) = store.add_file(&file, None).expect("add");
        assert_eq!((added.as_str(), path.is_file()), (digest.as_str(), true));
        assert!(matches!(
            store.add_file(&file, Some(&wrong)),
            Err(ContentError::Mismatch { .. })
        ));

        store.remove(&digest).expect("remove");
        store.remove(&digest).expect("remove absent");
        assert!(!store.contains(&digest, data.len() as u64));
    }
}
