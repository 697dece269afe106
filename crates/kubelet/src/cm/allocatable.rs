//! Node capacity and allocatable (upstream `pkg/kubelet/cm/node_container_manager_linux.go`
//! and `container_manager_linux.go` `GetNodeAllocatableReservation`):
//! allocatable = capacity − systemReserved − kubeReserved − hard eviction thresholds;
//! the `kubepods` cgroup is limited to capacity − systemReserved − kubeReserved.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::resources::ResourceAmounts;
use crate::eviction::threshold::{Signal, Threshold};
use skiff_api::quantity;

/// The resource name of the process-ID capacity (upstream `pidlimit.PIDs`).
pub const PIDS: &str = "pid";

/// Prefix of the hugepages resources (`hugepages-2Mi`, upstream `ResourceHugePagesPrefix`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";
/// Where the kernel lists the huge page pools, one `hugepages-<size>kB` directory per size.
const HUGEPAGES_SYSFS: &str = "/sys/kernel/mm/hugepages";

/// The machine's capacity, the one source of the node's capacity and allocatable (the
/// container manager, the downward API defaults and the node status all read it): `cpu`
/// (millicores of the online CPUs), `memory` (MemTotal bytes), `hugepages-<size>` (bytes
/// of each huge page pool, 0 when empty, as cAdvisor's `CapacityFromMachineInfo`), `pid`
/// (`kernel.pid_max`) and `ephemeral-storage` (size of the filesystem of `root_dir`).
/// Unreadable values are left out.
pub fn machine_capacity(root_dir: &Path) -> ResourceAmounts {
    let mut capacity = ResourceAmounts::new();
    capacity.insert("cpu".into(), online_cpus() * 1000);
    let memory = super::machine_memory_capacity();
    if memory > 0 {
        capacity.insert("memory".into(), memory);
    }
    capacity.extend(hugepages_capacity(Path::new(HUGEPAGES_SYSFS)));
    if let Some(pid_max) = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        capacity.insert(PIDS.into(), pid_max);
    }
    if let Ok(fs) = nix::sys::statvfs::statvfs(root_dir) {
        let bytes = fs.blocks() as u128 * fs.fragment_size() as u128;
        capacity.insert(
            "ephemeral-storage".into(),
            i64::try_from(bytes).unwrap_or(i64::MAX),
        );
    }
    capacity
}

/// Online CPUs from `/sys/devices/system/cpu/online` (`0-3,6`), as cAdvisor counts the
/// machine's cores, else the parallelism the process sees.
fn online_cpus() -> i64 {
    let from_sysfs = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| {
            list.trim()
                .split(',')
                .map(|range| match range.split_once('-') {
                    Some((a, b)) => Some(b.parse::<i64>().ok()? - a.parse::<i64>().ok()? + 1),
                    None => range.parse::<i64>().ok().map(|_| 1),
                })
                .sum::<Option<i64>>()
        });
    from_sysfs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as i64))
}

/// The huge page pools under `dir` (`hugepages-2048kB/nr_hugepages`), as
/// `hugepages-<page size in canonical binary SI>` → bytes (`hugepages-2Mi`, `hugepages-1Gi`).
/// Unreadable pools are left out.
pub fn hugepages_capacity(dir: &Path) -> ResourceAmounts {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return ResourceAmounts::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let kib: i64 = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let pages: i64 = std::fs::read_to_string(entry.path().join("nr_hugepages"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let page_size = kib.checked_mul(1024)?;
            Some((
                format!(
                    "{HUGEPAGES_PREFIX}{}",
                    quantity::format_binary_si(page_size)
                ),
                page_size.saturating_mul(pages),
            ))
        })
        .collect()
}

/// Parses a reservation (`systemReserved` / `kubeReserved`: resource name to quantity)
/// into amounts (cpu in millicores).
///
/// Errors name a malformed or negative quantity.
pub fn parse_reservation(reserved: &BTreeMap<String, String>) -> anyhow::Result<ResourceAmounts> {
    reserved
        .iter()
        .map(|(name, value)| {
            let q = Quantity(value.clone());
            let parsed = quantity::parse(&q)
                .filter(|v| *v >= 0.0)
                .ok_or_else(|| anyhow::anyhow!("reserved {name}={value}: invalid quantity"))?;
            let amount = if name == "cpu" {
                (parsed * 1000.0).ceil() as i64
            } else {
                parsed.ceil() as i64
            };
            Ok((name.clone(), amount))
        })
        .collect()
}

/// What the hard eviction thresholds hold back (upstream `hardEvictionReservation`):
/// `memory` for `memory.available`, `ephemeral-storage` for `nodefs.available`, each
/// resolved against the capacity.
pub fn hard_eviction_reservation(
    thresholds: &[Threshold],
    capacity: &ResourceAmounts,
) -> ResourceAmounts {
    let mut out = ResourceAmounts::new();
    for t in thresholds {
        let resource = match t.signal {
            Signal::MemoryAvailable => "memory",
            Signal::NodeFsAvailable => "ephemeral-storage",
            _ => continue,
        };
        let cap = capacity.get(resource).copied().unwrap_or(0);
        out.insert(resource.into(), t.quantity(cap));
    }
    out
}

/// `capacity` minus every reservation in `reservations`, floored at 0; resources
/// without capacity are left out.
pub fn subtract(capacity: &ResourceAmounts, reservations: &[&ResourceAmounts]) -> ResourceAmounts {
    capacity
        .iter()
        .map(|(name, cap)| {
            let reserved: i64 = reservations.iter().filter_map(|r| r.get(name)).sum();
            (name.clone(), (cap - reserved).max(0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::threshold::parse_thresholds;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn allocatable_subtracts_reservations_and_eviction() {
        let capacity: ResourceAmounts = [
            ("cpu".to_owned(), 4000),
            ("memory".to_owned(), 8 << 30),
            ("ephemeral-storage".to_owned(), 100 << 30),
            (PIDS.to_owned(), 4_194_304),
        ]
        .into();
        let system = parse_reservation(&map(&[("cpu", "500m"), ("memory", "1Gi")])).unwrap();
        let kube = parse_reservation(&map(&[("memory", "512Mi"), ("pid", "1000")])).unwrap();
        let thresholds = parse_thresholds(
            &map(&[("memory.available", "100Mi"), ("nodefs.available", "10%")]),
            true,
        )
        .unwrap();
        let eviction = hard_eviction_reservation(&thresholds, &capacity);
        let allocatable = subtract(&capacity, &[&system, &kube, &eviction]);
        assert_eq!(allocatable["cpu"], 3500);
        assert_eq!(
            allocatable["memory"],
            (8 << 30) - (1 << 30) - (512 << 20) - (100 << 20)
        );
        assert_eq!(allocatable["ephemeral-storage"], 90 << 30);
        assert_eq!(allocatable[PIDS], 4_194_304 - 1000);
        let enforced = subtract(&capacity, &[&system, &kube]);
        assert_eq!(enforced["memory"], (8 << 30) - (1 << 30) - (512 << 20));
        let huge = parse_reservation(&map(&[("cpu", "64")])).unwrap();
        assert_eq!(subtract(&capacity, &[&huge])["cpu"], 0);
        assert!(parse_reservation(&map(&[("memory", "-1Gi")])).is_err());
    }

    #[test]
    fn hugepages_pools_are_named_by_page_size() {
        let dir = tempfile::tempdir().unwrap();
        for (pool, pages) in [("hugepages-2048kB", "3\n"), ("hugepages-1048576kB", "0\n")] {
            std::fs::create_dir(dir.path().join(pool)).unwrap();
            std::fs::write(dir.path().join(pool).join("nr_hugepages"), pages).unwrap();
        }
        std::fs::create_dir(dir.path().join("unrelated")).unwrap();
        let pools = hugepages_capacity(dir.path());
        assert_eq!(
            pools,
            ResourceAmounts::from([
                ("hugepages-1Gi".to_owned(), 0),
                ("hugepages-2Mi".to_owned(), 3 << 21),
            ])
        );
        assert!(hugepages_capacity(&dir.path().join("missing")).is_empty());
    }
}
