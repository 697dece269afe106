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

/// The machine's capacity: `cpu` (millicores of the online CPUs), `memory` (MemTotal
/// bytes), `pid` (`kernel.pid_max`) and `ephemeral-storage` (size of the filesystem of
/// `root_dir`). Unreadable values are left out.
pub fn machine_capacity(root_dir: &Path) -> ResourceAmounts {
    let mut capacity = ResourceAmounts::new();
    if let Ok(cpus) = std::thread::available_parallelism() {
        capacity.insert("cpu".into(), i64::try_from(cpus.get()).unwrap_or(0) * 1000);
    }
    let memory = super::machine_memory_capacity();
    if memory > 0 {
        capacity.insert("memory".into(), memory);
    }
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
}
