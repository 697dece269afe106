//! Container manager (upstream `pkg/kubelet/cm`): QoS classes, the cgroup tree of pods
//! ([`container_manager::ContainerManager`] over the [`cgroupfs`] driver), pod resources
//! and node allocatable.

pub mod allocatable;
pub mod cgroupfs;
pub mod cgroups;
pub mod container_manager;
pub mod qos;
pub mod resources;

pub use container_manager::{ContainerManager, ContainerManagerConfig};

/// Total memory of the machine in bytes (MemTotal of /proc/meminfo); 0 if unknown.
pub fn machine_memory_capacity() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}
