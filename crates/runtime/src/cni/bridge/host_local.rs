//! IP address management with the on-disk format of the CNI `host-local` IPAM plugin
//! (containernetworking/plugins, `plugins/ipam/host-local/backend/disk`), so that the
//! in-process bridge network and the plugin can take turns on one network without handing
//! out an address twice.
//!
//! The state of network `N` lives in `<dataDir>/N/`:
//! - one file per reserved address, named by the address, holding `<container id>\r\n<ifname>`;
//! - `last_reserved_ip.0`, the last address handed out (allocation goes round-robin from it);
//! - `lock`, `flock`ed exclusively around every change.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::net::Ipv4Addr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use ipnet::Ipv4Net;
use nix::fcntl::{Flock, FlockArg};

/// host-local's default `dataDir`.
pub(crate) const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";
/// host-local's line break between the container ID and the interface name.
const LINE_BREAK: &str = "\r\n";
/// Name of the round-robin cursor of the first (only) range set.
const LAST_RESERVED: &str = "last_reserved_ip.0";
/// Name of the lock file.
const LOCK: &str = "lock";

/// One range: `subnet` without its network and broadcast addresses and without `gateway`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    /// The subnet addresses come from.
    pub(crate) subnet: Ipv4Net,
    /// The gateway, never handed out (host-local's default: the subnet's first address).
    pub(crate) gateway: Ipv4Addr,
}

impl Range {
    /// First and last address handed out, as integers (host-local's `rangeStart` and
    /// `rangeEnd` defaults: network + 1 and broadcast − 1). `None` for a /31 or /32.
    fn bounds(&self) -> Option<(u32, u32)> {
        let first = u32::from(self.subnet.network()).checked_add(1)?;
        let last = u32::from(self.subnet.broadcast()).checked_sub(1)?;
        (first <= last).then_some((first, last))
    }
}

/// The state directory of one network, `<data_dir>/<network>`.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store of network `network` under `data_dir`. The network name must be one path
    /// component (CNI requires names of letters, digits, `_`, `.` and `-`).
    pub(crate) fn new(data_dir: &Path, network: &str) -> anyhow::Result<Self> {
        let valid = !network.is_empty()
            && network != "."
            && network != ".."
            && network
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !valid {
            bail!("invalid CNI network name {network:?}");
        }
        Ok(Self {
            dir: data_dir.join(network),
        })
    }

    fn lock(&self) -> anyhow::Result<Flock<File>> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let path = self.dir.join(LOCK);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| errno)
            .with_context(|| format!("locking {}", path.display()))
    }

    /// Reserves an address of `range` for `(id, ifname)`, going round-robin from the last
    /// one handed out. An address already held by the same `(id, ifname)` is returned again
    /// (a retried ADD). Fails when the range is exhausted.
    pub(crate) fn reserve(
        &self,
        range: &Range,
        id: &str,
        ifname: &str,
    ) -> anyhow::Result<Ipv4Addr> {
        let _lock = self.lock()?;
        let owner = format!("{}{LINE_BREAK}{ifname}", id.trim());
        if let Some(ip) = self.held_by(id, ifname)?.into_iter().next() {
            return Ok(ip);
        }
        let (first, last) = range
            .bounds()
            .with_context(|| format!("subnet {} has no usable addresses", range.subnet))?;
        let cursor = std::fs::read_to_string(self.dir.join(LAST_RESERVED))
            .ok()
            .and_then(|text| text.trim().parse::<Ipv4Addr>().ok())
            .map(u32::from)
            .filter(|ip| (first..=last).contains(ip));
        let start = match cursor {
            Some(ip) if ip < last => ip + 1,
            _ => first,
        };
        let gateway = u32::from(range.gateway);
        let candidates = (start..=last).chain(first..start);
        for candidate in candidates.filter(|ip| *ip != gateway) {
            let ip = Ipv4Addr::from(candidate);
            let path = self.dir.join(ip.to_string());
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut file) => {
                    if let Err(err) = file.write_all(owner.as_bytes()) {
                        let _ = std::fs::remove_file(&path);
                        return Err(err).with_context(|| format!("writing {}", path.display()));
                    }
                    crate::store::write_volatile(
                        &self.dir.join(LAST_RESERVED),
                        ip.to_string().as_bytes(),
                    )?;
                    return Ok(ip);
                }
                Err(err) if err.kind() == ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(err).with_context(|| format!("creating {}", path.display()));
                }
            }
        }
        bail!("no IP addresses available in range set: {}", range.subnet)
    }

    /// Releases every address held by `(id, ifname)` (or by `id` alone, the format of older
    /// host-local versions). Returns how many reservations are left in the network.
    pub(crate) fn release(&self, id: &str, ifname: &str) -> anyhow::Result<usize> {
        let _lock = self.lock()?;
        for ip in self.held_by(id, ifname)? {
            let path = self.dir.join(ip.to_string());
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(err).with_context(|| format!("removing {}", path.display()));
                }
            }
        }
        Ok(self.reservations()?.len())
    }

    /// How many addresses of the network are reserved.
    pub(crate) fn reserved(&self) -> anyhow::Result<usize> {
        Ok(self.reservations()?.len())
    }

    /// Every reserved address of the network with its owner file's content.
    fn reservations(&self) -> anyhow::Result<Vec<(Ipv4Addr, String)>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err).with_context(|| format!("reading {}", self.dir.display())),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Some(ip) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<Ipv4Addr>().ok())
            else {
                continue;
            };
            let owner = std::fs::read_to_string(entry.path()).unwrap_or_default();
            found.push((ip, owner));
        }
        Ok(found)
    }

    /// Addresses held by `(id, ifname)`, or by `id` alone.
    fn held_by(&self, id: &str, ifname: &str) -> anyhow::Result<Vec<Ipv4Addr>> {
        let id = id.trim();
        let full = format!("{id}{LINE_BREAK}{ifname}");
        Ok(self
            .reservations()?
            .into_iter()
            .filter(|(_, owner)| owner.trim() == id || owner.trim_end() == full)
            .map(|(ip, _)| ip)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(subnet: &str) -> Range {
        let subnet: Ipv4Net = subnet.parse().unwrap();
        let gateway = Ipv4Addr::from(u32::from(subnet.network()) + 1);
        Range { subnet, gateway }
    }

    #[test]
    fn round_robin_skips_gateway_taken_and_wraps() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "net").unwrap();
        let r = range("10.9.0.0/29"); // .1 gateway, .2 ..= .6 usable
        let a = store.reserve(&r, "a", "eth0").unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 9, 0, 2));
        // Same owner again: the same address.
        assert_eq!(store.reserve(&r, "a", "eth0").unwrap(), a);
        // Taken by the plugin meanwhile: skipped.
        std::fs::write(dir.path().join("net/10.9.0.3"), "x\r\neth0").unwrap();
        assert_eq!(
            store.reserve(&r, "b", "eth0").unwrap(),
            Ipv4Addr::new(10, 9, 0, 4)
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("net/10.9.0.4")).unwrap(),
            "b\r\neth0"
        );
        store.reserve(&r, "c", "eth0").unwrap();
        store.reserve(&r, "d", "eth0").unwrap();
        assert!(store.reserve(&r, "e", "eth0").is_err(), "range exhausted");
        // Released: handed out again, round-robin from the cursor (.6), wrapping to .2.
        assert_eq!(store.release("a", "eth0").unwrap(), 4);
        assert_eq!(store.reserve(&r, "e", "eth0").unwrap(), a);
    }

    #[test]
    fn release_takes_old_format_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), "net").unwrap();
        std::fs::create_dir_all(dir.path().join("net")).unwrap();
        std::fs::write(dir.path().join("net/10.9.0.7"), "old\n").unwrap();
        std::fs::write(dir.path().join("net/10.9.0.8"), "other\r\neth0").unwrap();
        assert_eq!(store.release("old", "eth0").unwrap(), 1);
        assert!(!dir.path().join("net/10.9.0.7").exists());
        assert_eq!(store.release("missing", "eth0").unwrap(), 1);
    }

    #[test]
    fn bad_names_and_tiny_subnets_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Store::new(dir.path(), "../x").is_err());
        assert!(Store::new(dir.path(), "").is_err());
        let store = Store::new(dir.path(), "net").unwrap();
        assert!(store.reserve(&range("10.9.0.0/31"), "a", "eth0").is_err());
    }
}
