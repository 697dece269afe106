//! CRI container resources, read back from the container's own cgroup files (v1 or v2),
//! against Skiff's runtime and containerd 1.6: CPU shares / quota / period / cpuset,
//! memory limit, oom_score_adj, UpdateContainerResources on running and created
//! containers, and OOM kills reported as `OOMKilled`.

mod common;
mod oneshot;

use anyhow::ensure;
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use oneshot::*;

common::cri_cases! {
    resources_in_cgroups,
    update_running_container,
    update_created_container,
    update_reflected_in_status,
    oom_kill_reported,
    hugepage_limits,
}

const MIB: i64 = 1 << 20;

/// Prints `shares=`, `quota=`, `period=`, `cpus=`, `memory=` of the container's own
/// cgroup, from the v1 controller files or the v2 unified ones (where `shares` is the
/// converted `cpu.weight`).
const CGROUP_REPORT: &str = r#"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  echo shares=$(cat /sys/fs/cgroup/cpu.weight)
  set -- $(cat /sys/fs/cgroup/cpu.max); echo quota=$1; echo period=$2
  echo cpus=$(cat /sys/fs/cgroup/cpuset.cpus)
  echo memory=$(cat /sys/fs/cgroup/memory.max)
else
  echo shares=$(cat /sys/fs/cgroup/cpu/cpu.shares)
  echo quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)
  echo period=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)
  echo cpus=$(cat /sys/fs/cgroup/cpuset/cpuset.cpus)
  echo memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
fi
echo oom_score_adj=$(cat /proc/self/oom_score_adj)
"#;

/// The `key=value` lines a [`CGROUP_REPORT`] should print for `res`.
fn expected(res: &LinuxContainerResources) -> Vec<String> {
    let shares = if cgroup_v2() {
        // runc's conversion of shares (2..262144) to cpu.weight (1..10000).
        (1 + ((res.cpu_shares - 2) * 9999) / 262142).to_string()
    } else {
        res.cpu_shares.to_string()
    };
    vec![
        format!("shares={shares}"),
        format!("quota={}", res.cpu_quota),
        format!("period={}", res.cpu_period),
        format!("cpus={}", res.cpuset_cpus),
        format!("memory={}", res.memory_limit_in_bytes),
    ]
}

fn check_report(out: &str, res: &LinuxContainerResources) -> anyhow::Result<()> {
    for line in expected(res) {
        ensure!(out.lines().any(|l| l == line), "no {line:?} in\n{out}");
    }
    Ok(())
}

fn limits(shares: i64, quota: i64, memory: i64) -> LinuxContainerResources {
    LinuxContainerResources {
        cpu_shares: shares,
        cpu_quota: quota,
        cpu_period: 100_000,
        cpuset_cpus: "0".into(),
        memory_limit_in_bytes: memory,
        ..Default::default()
    }
}

/// CPU and memory limits and oom_score_adj as the container sees them.
async fn resources_in_cgroups(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("limits");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let res = limits(512, 50_000, 64 * MIB);
    let mut config = shell(rt, "limits", CGROUP_REPORT);
    *resources(&mut config) = LinuxContainerResources {
        oom_score_adj: 500,
        ..res.clone()
    };
    let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
    check_report(&out, &res)?;
    ensure!(out.contains("oom_score_adj=500"), "{out}");
    remove_pod(rt, &sandbox_id).await
}

async fn update(
    rt: &CriRuntime,
    id: &str,
    res: &LinuxContainerResources,
) -> Result<(), tonic::Status> {
    rt.runtime_client()
        .update_container_resources(UpdateContainerResourcesRequest {
            container_id: id.to_string(),
            linux: Some(res.clone()),
            ..Default::default()
        })
        .await
        .map(drop)
}

/// New limits reach a running container's cgroup at once.
async fn update_running_container(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("update");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(rt, "sleeper", "exec sleep 3600");
    *resources(&mut config) = limits(512, 50_000, 64 * MIB);
    let id = create_start(rt, &sandbox_id, &sandbox, config).await?;
    let new = limits(256, 20_000, 48 * MIB);
    update(rt, &id, &new).await?;
    check_report(&exec(rt, &id, CGROUP_REPORT).await?, &new)?;
    remove_pod(rt, &sandbox_id).await
}

/// New limits of a created container apply when it starts.
async fn update_created_container(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("created");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(rt, "report", CGROUP_REPORT);
    *resources(&mut config) = limits(512, 50_000, 64 * MIB);
    let id = create(rt, &sandbox_id, &sandbox, config).await?;
    let new = limits(1024, 30_000, 40 * MIB);
    update(rt, &id, &new).await?;
    start(rt, &id).await?;
    let status = wait_exit(rt, &id).await?;
    let out = log_text(&rt.log_path("created", "report"));
    ensure!(status.exit_code == 0, "{status:?}\n{out}");
    check_report(&out, &new)?;
    remove_pod(rt, &sandbox_id).await
}

/// ContainerStatus reports the resources after an update, unnamed fields kept.
async fn update_reflected_in_status(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("status");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(rt, "sleeper", "exec sleep 3600");
    *resources(&mut config) = limits(512, 50_000, 64 * MIB);
    let id = create_start(rt, &sandbox_id, &sandbox, config).await?;
    let only_memory = LinuxContainerResources {
        memory_limit_in_bytes: 48 * MIB,
        ..Default::default()
    };
    update(rt, &id, &only_memory).await?;
    let reported = status(rt, &id)
        .await?
        .resources
        .and_then(|r| r.linux)
        .unwrap_or_default();
    ensure!(
        reported.memory_limit_in_bytes == 48 * MIB
            && reported.cpu_shares == 512
            && reported.cpu_quota == 50_000,
        "{reported:?}"
    );
    check_report(
        &exec(rt, &id, CGROUP_REPORT).await?,
        &limits(512, 50_000, 48 * MIB),
    )?;
    remove_pod(rt, &sandbox_id).await
}

/// A container that allocates past its memory limit is OOM-killed and reported with
/// reason `OOMKilled`.
async fn oom_kill_reported(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("oom");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let mut config = shell(rt, "hog", "head -c 200m /dev/zero | tail");
    *resources(&mut config) = LinuxContainerResources {
        memory_limit_in_bytes: 32 * MIB,
        memory_swap_limit_in_bytes: 32 * MIB,
        ..Default::default()
    };
    let id = create_start(rt, &sandbox_id, &sandbox, config).await?;
    let status = wait_exit(rt, &id).await?;
    ensure!(
        status.reason == "OOMKilled" && status.exit_code != 0,
        "{status:?}"
    );
    remove_pod(rt, &sandbox_id).await
}

/// Hugepage limits (the kubelet sends one per page size the node supports) are accepted
/// and, where the container sees a hugetlb controller, applied.
async fn hugepage_limits(rt: &CriRuntime) -> anyhow::Result<()> {
    rt.pull(&rt.busybox()).await?;
    let sandbox = rt.sandbox_config("huge");
    let sandbox_id = run_pod(rt, &sandbox).await?;
    let script = "cat /sys/fs/cgroup/hugetlb.2MB.max /sys/fs/cgroup/hugetlb/hugetlb.2MB.limit_in_bytes \
                  2>/dev/null; true";
    let mut config = shell(rt, "huge", script);
    resources(&mut config).hugepage_limits = vec![HugepageLimit {
        page_size: "2MB".into(),
        limit: 4 * MIB as u64,
    }];
    let out = output_of(rt, &sandbox_id, &sandbox, config).await?;
    ensure!(
        out.trim().is_empty() || out.trim() == (4 * MIB).to_string(),
        "hugetlb limit: {out}"
    );
    remove_pod(rt, &sandbox_id).await
}
