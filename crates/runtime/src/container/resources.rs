//! CRI `LinuxContainerResources` as OCI cgroup resources (containerd's `WithResources`),
//! shared by CreateContainer and UpdateContainerResources.

use k8s_cri::v1::LinuxContainerResources;
use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxHugepageLimitBuilder, LinuxMemoryBuilder, LinuxResources,
};

use super::spec::spec_error;
use crate::error::Result;

/// Sets the CPU, memory, hugepage and unified (cgroup v2) limits of `res` on `out`. Zero
/// and empty values leave a setting alone (the CRI has no way to say "unset"), so applying
/// an update onto a container's current resources keeps what the update does not name.
/// Units: CPU shares (relative weight), quota and period in µs, memory and swap in bytes
/// (swap is memory + swap, as the OCI spec and cgroup v1 `memsw`), hugepage limits in
/// bytes per page size (`2MB`, `1GB`). Hugepage limits are dropped when `hugetlb` is false
/// (no hugetlb controller the OCI runtime can use): the kubelet sends
/// them for every page size, and containerd's default `tolerate_missing_hugetlb_controller`
/// ignores them likewise.
pub fn apply(res: &LinuxContainerResources, out: &mut LinuxResources, hugetlb: bool) -> Result<()> {
    let mut cpu = out.cpu().clone().unwrap_or_default();
    if res.cpu_shares > 0 {
        cpu.set_shares(Some(res.cpu_shares as u64));
    }
    if res.cpu_quota != 0 {
        cpu.set_quota(Some(res.cpu_quota));
    }
    if res.cpu_period > 0 {
        cpu.set_period(Some(res.cpu_period as u64));
    }
    if !res.cpuset_cpus.is_empty() {
        cpu.set_cpus(Some(res.cpuset_cpus.clone()));
    }
    if !res.cpuset_mems.is_empty() {
        cpu.set_mems(Some(res.cpuset_mems.clone()));
    }
    if cpu != LinuxCpuBuilder::default().build().map_err(spec_error)? {
        out.set_cpu(Some(cpu));
    }

    let mut memory = out.memory().unwrap_or_default();
    if res.memory_limit_in_bytes > 0 {
        memory.set_limit(Some(res.memory_limit_in_bytes));
    }
    if res.memory_swap_limit_in_bytes > 0 {
        memory.set_swap(Some(res.memory_swap_limit_in_bytes));
    }
    if memory != LinuxMemoryBuilder::default().build().map_err(spec_error)? {
        out.set_memory(Some(memory));
    }

    if hugetlb && !res.hugepage_limits.is_empty() {
        let mut limits = out.hugepage_limits().clone().unwrap_or_default();
        for h in &res.hugepage_limits {
            limits.retain(|l| l.page_size() != &h.page_size);
            limits.push(
                LinuxHugepageLimitBuilder::default()
                    .page_size(h.page_size.clone())
                    .limit(h.limit as i64)
                    .build()
                    .map_err(spec_error)?,
            );
        }
        out.set_hugepage_limits(Some(limits));
    }
    if !res.unified.is_empty() {
        let mut unified = out.unified().clone().unwrap_or_default();
        unified.extend(res.unified.clone());
        out.set_unified(Some(unified));
    }
    Ok(())
}

/// `current` with the non-zero fields of `update` replacing its own (what the container's
/// resources are after UpdateContainerResources).
pub fn merge(
    current: &LinuxContainerResources,
    update: &LinuxContainerResources,
) -> LinuxContainerResources {
    let pick_i64 = |new: i64, old: i64| if new != 0 { new } else { old };
    let pick_str = |new: &String, old: &String| {
        if new.is_empty() {
            old.clone()
        } else {
            new.clone()
        }
    };
    let mut hugepage_limits = current.hugepage_limits.clone();
    for h in &update.hugepage_limits {
        hugepage_limits.retain(|l| l.page_size != h.page_size);
        hugepage_limits.push(h.clone());
    }
    let mut unified = current.unified.clone();
    unified.extend(update.unified.clone());
    LinuxContainerResources {
        cpu_period: pick_i64(update.cpu_period, current.cpu_period),
        cpu_quota: pick_i64(update.cpu_quota, current.cpu_quota),
        cpu_shares: pick_i64(update.cpu_shares, current.cpu_shares),
        memory_limit_in_bytes: pick_i64(
            update.memory_limit_in_bytes,
            current.memory_limit_in_bytes,
        ),
        oom_score_adj: pick_i64(update.oom_score_adj, current.oom_score_adj),
        cpuset_cpus: pick_str(&update.cpuset_cpus, &current.cpuset_cpus),
        cpuset_mems: pick_str(&update.cpuset_mems, &current.cpuset_mems),
        hugepage_limits,
        unified,
        memory_swap_limit_in_bytes: pick_i64(
            update.memory_swap_limit_in_bytes,
            current.memory_swap_limit_in_bytes,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_cri::v1::HugepageLimit;

    #[test]
    fn cri_resources_to_oci() {
        let res = LinuxContainerResources {
            cpu_shares: 512,
            cpu_quota: 50_000,
            cpu_period: 100_000,
            cpuset_cpus: "0".into(),
            memory_limit_in_bytes: 64 << 20,
            memory_swap_limit_in_bytes: 128 << 20,
            hugepage_limits: vec![HugepageLimit {
                page_size: "2MB".into(),
                limit: 2 << 20,
            }],
            ..Default::default()
        };
        let mut out = LinuxResources::default();
        apply(&res, &mut out, true).unwrap();
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(json["cpu"]["shares"], 512);
        assert_eq!(json["cpu"]["quota"], 50_000);
        assert_eq!(json["cpu"]["period"], 100_000);
        assert_eq!(json["cpu"]["cpus"], "0");
        assert_eq!(json["memory"]["limit"], 64 << 20);
        assert_eq!(json["memory"]["swap"], 128 << 20);
        assert_eq!(json["hugepageLimits"][0]["pageSize"], "2MB");

        // An update naming only the memory keeps the CPU settings.
        let update = LinuxContainerResources {
            memory_limit_in_bytes: 32 << 20,
            ..Default::default()
        };
        apply(&update, &mut out, true).unwrap();
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(json["cpu"]["shares"], 512);
        assert_eq!(json["memory"]["limit"], 32 << 20);
        let merged = merge(&res, &update);
        assert_eq!(merged.memory_limit_in_bytes, 32 << 20);
        assert_eq!(merged.cpu_quota, 50_000);
        assert_eq!(merged.hugepage_limits.len(), 1);
    }

    #[test]
    fn nothing_requested_sets_nothing() {
        let mut out = LinuxResources::default();
        apply(&LinuxContainerResources::default(), &mut out, true).unwrap();
        assert_eq!(out, LinuxResources::default());
        let huge = LinuxContainerResources {
            hugepage_limits: vec![HugepageLimit {
                page_size: "2MB".into(),
                limit: 0,
            }],
            ..Default::default()
        };
        apply(&huge, &mut out, false).unwrap();
        assert_eq!(out, LinuxResources::default());
    }
}
