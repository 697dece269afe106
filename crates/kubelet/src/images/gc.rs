//! Image garbage collection (upstream `pkg/kubelet/images/image_gc_manager.go`): when
//! the image filesystem is used above `imageGCHighThresholdPercent`, remove unused images,
//! least recently used first and none younger than `imageMinimumGCAge`, until usage is
//! down to `imageGCLowThresholdPercent`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use k8s_cri::v1::{
    ImageFsInfoRequest, ImageSpec, ListContainersRequest, ListImagesRequest, RemoveImageRequest,
};
use tracing::{info, warn};

use crate::cri::Cri;
use crate::error::{Error, Result};

/// Image GC period (upstream `ImageGCPeriod`, 5 min).
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// Thresholds of the image GC (upstream `ImageGCPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Collect when disk usage reaches this percentage (`imageGCHighThresholdPercent`).
    pub high_threshold_percent: i32,
    /// Collect down to this percentage (`imageGCLowThresholdPercent`).
    pub low_threshold_percent: i32,
    /// Images first seen less than this long ago are kept (`imageMinimumGCAge`).
    pub min_age: Duration,
}

/// What the GC remembers of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecord {
    /// When the GC first saw it.
    pub first_detected: SystemTime,
    /// When a container last used it.
    pub last_used: SystemTime,
    /// Size in bytes.
    pub size: u64,
    /// Pinned images are never removed.
    pub pinned: bool,
}

/// The images to remove to free `bytes_to_free` (upstream `freeSpace`): not in use, not
/// pinned, at least `min_age` old, least recently used (then first detected) first.
/// Returns their IDs and the bytes they free.
pub fn select_images(
    records: &HashMap<String, ImageRecord>,
    in_use: &HashSet<String>,
    bytes_to_free: u64,
    now: SystemTime,
    min_age: Duration,
) -> (Vec<String>, u64) {
    let mut candidates: Vec<(&String, &ImageRecord)> = records
        .iter()
        .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
        .collect();
    candidates.sort_by_key(|(id, r)| (r.last_used, r.first_detected, (*id).clone()));
    let mut freed = 0u64;
    let mut remove = Vec::new();
    for (id, record) in candidates {
        if freed >= bytes_to_free {
            break;
        }
        if now
            .duration_since(record.first_detected)
            .unwrap_or_default()
            < min_age
        {
            continue;
        }
        remove.push(id.clone());
        freed += record.size;
    }
    (remove, freed)
}

/// Bytes to free to get from `available` of `capacity` down to `low` percent used, when
/// usage is at or above `high` percent (upstream `GarbageCollect`); 0 otherwise.
pub fn bytes_to_free(capacity: u64, available: u64, policy: &ImageGcPolicy) -> u64 {
    if capacity == 0 {
        return 0;
    }
    let available = available.min(capacity);
    let usage_percent = 100 - (available * 100 / capacity) as i64;
    if usage_percent < i64::from(policy.high_threshold_percent) {
        return 0;
    }
    let target_available =
        capacity * (100 - u64::try_from(policy.low_threshold_percent).unwrap_or(0)) / 100;
    target_available.saturating_sub(available)
}

/// The image GC manager: tracks image use and removes unused images.
pub struct ImageGcManager {
    cri: Arc<dyn Cri>,
    policy: ImageGcPolicy,
    records: Mutex<HashMap<String, ImageRecord>>,
}

impl ImageGcManager {
    /// A manager with `policy` over `cri`.
    pub fn new(cri: Arc<dyn Cri>, policy: ImageGcPolicy) -> Self {
        Self {
            cri,
            policy,
            records: Mutex::new(HashMap::new()),
        }
    }

    /// Lists images and containers, records when each image was first seen and last used,
    /// and returns the IDs of the images in use (upstream `detectImages`; any container,
    /// running or not, uses its image).
    pub async fn detect_images(&self, now: SystemTime) -> Result<HashSet<String>> {
        let images = self
            .cri
            .list_images(ListImagesRequest { filter: None })
            .await
            .map_err(|e| Error::Image(format!("listing images: {}", e.message())))?
            .images;
        let containers = self
            .cri
            .list_containers(ListContainersRequest { filter: None })
            .await
            .map_err(|e| Error::Image(format!("listing containers: {}", e.message())))?
            .containers;
        let refs: HashSet<&str> = containers
            .iter()
            .flat_map(|c| {
                [
                    c.image_ref.as_str(),
                    c.image.as_ref().map_or("", |i| i.image.as_str()),
                ]
            })
            .filter(|r| !r.is_empty())
            .collect();
        let mut in_use = HashSet::new();
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        let present: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        records.retain(|id, _| present.contains(id.as_str()));
        for image in &images {
            let used = refs.contains(image.id.as_str())
                || image.repo_tags.iter().any(|t| refs.contains(t.as_str()))
                || image.repo_digests.iter().any(|d| refs.contains(d.as_str()));
            let record = records
                .entry(image.id.clone())
                .or_insert_with(|| ImageRecord {
                    first_detected: now,
                    last_used: SystemTime::UNIX_EPOCH,
                    size: image.size,
                    pinned: image.pinned,
                });
            record.size = image.size;
            record.pinned = image.pinned;
            if used {
                record.last_used = now;
                in_use.insert(image.id.clone());
            }
        }
        Ok(in_use)
    }

    /// Removes unused images until `bytes_to_free` are freed; returns the bytes freed.
    pub async fn free_space(&self, bytes_to_free: u64, now: SystemTime) -> Result<u64> {
        let in_use = self.detect_images(now).await?;
        let (ids, _) = {
            let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
            select_images(&records, &in_use, bytes_to_free, now, self.policy.min_age)
        };
        let mut freed = 0;
        for id in ids {
            info!(image = %id, "garbage collecting image");
            let removed = self
                .cri
                .remove_image(RemoveImageRequest {
                    image: Some(ImageSpec {
                        image: id.clone(),
                        ..Default::default()
                    }),
                })
                .await;
            match removed {
                Ok(_) => {
                    let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
                    freed += records.remove(&id).map_or(0, |r| r.size);
                }
                Err(e) => warn!(image = %id, error = %e.message(), "image removal failed"),
            }
        }
        Ok(freed)
    }

    /// One periodic collection (upstream `GarbageCollect`): frees space when the image
    /// filesystem is used at or above the high threshold.
    pub async fn garbage_collect(&self) -> Result<()> {
        let info = self
            .cri
            .image_fs_info(ImageFsInfoRequest {})
            .await
            .map_err(|e| Error::Image(format!("ImageFsInfo: {}", e.message())))?;
        let Some(mountpoint) = info
            .image_filesystems
            .first()
            .and_then(|f| f.fs_id.as_ref())
            .map(|id| id.mountpoint.clone())
        else {
            return Err(Error::Image(
                "the runtime reports no image filesystem".into(),
            ));
        };
        let fs = nix::sys::statvfs::statvfs(Path::new(&mountpoint))
            .map_err(|e| Error::Image(format!("statvfs {mountpoint}: {e}")))?;
        let capacity = fs.blocks() * fs.fragment_size();
        let available = fs.blocks_available() * fs.fragment_size();
        let wanted = bytes_to_free(capacity, available, &self.policy);
        let now = SystemTime::now();
        if wanted == 0 {
            // Still track use, so that last-used times are right when space runs short.
            return self.detect_images(now).await.map(|_| ());
        }
        info!(
            bytes = wanted,
            "image filesystem above the high threshold; freeing images"
        );
        let freed = self.free_space(wanted, now).await?;
        if freed < wanted {
            return Err(Error::Image(format!(
                "Failed to garbage collect required amount of images. Attempted to free {wanted} bytes, but only found {freed} bytes eligible to free."
            )));
        }
        Ok(())
    }

    /// Removes every unused image old enough (the eviction manager's reclaim, upstream
    /// `DeleteUnusedImages`); returns the bytes freed.
    pub async fn delete_unused_images(&self) -> Result<u64> {
        self.free_space(u64::MAX, SystemTime::now()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn record(first: u64, last: u64, size: u64) -> ImageRecord {
        ImageRecord {
            first_detected: at(first),
            last_used: at(last),
            size,
            pinned: false,
        }
    }

    #[test]
    fn selects_least_recently_used_unused_old_images() {
        let mut records: HashMap<String, ImageRecord> = [
            ("used".to_owned(), record(0, 1000, 100)),
            ("old".to_owned(), record(0, 10, 100)),
            ("older".to_owned(), record(0, 5, 100)),
            ("young".to_owned(), record(990, 0, 100)),
            ("recent".to_owned(), record(0, 500, 100)),
        ]
        .into();
        records.insert(
            "pinned".into(),
            ImageRecord {
                pinned: true,
                ..record(0, 0, 100)
            },
        );
        let in_use: HashSet<String> = ["used".to_owned()].into();
        let now = at(1000);
        let min_age = Duration::from_secs(120);
        let (ids, freed) = select_images(&records, &in_use, 150, now, min_age);
        assert_eq!(
            (ids, freed),
            (vec!["older".to_owned(), "old".to_owned()], 200)
        );
        let (ids, freed) = select_images(&records, &in_use, u64::MAX, now, min_age);
        assert_eq!(ids, ["older", "old", "recent"]);
        assert_eq!(freed, 300);
    }

    #[test]
    fn frees_down_to_the_low_threshold_above_the_high_one() {
        let policy = ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::ZERO,
        };
        assert_eq!(bytes_to_free(1000, 200, &policy), 0);
        assert_eq!(bytes_to_free(1000, 150, &policy), 50);
        assert_eq!(bytes_to_free(1000, 100, &policy), 100);
        assert_eq!(bytes_to_free(0, 0, &policy), 0);
    }
}
