//! Summaries and the printed tables.

use std::time::Duration;

use super::memory::Sample;

/// Measured durations of one operation.
pub struct Timing {
    pub operation: &'static str,
    pub samples: Vec<Duration>,
}

/// min, median and p90 (nearest rank) of `samples`, in milliseconds; zeros when empty.
pub fn summary(samples: &[Duration]) -> (f64, f64, f64) {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |q: f64| -> f64 {
        if ms.is_empty() {
            return 0.0;
        }
        let index = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
        ms[index]
    };
    (ms.first().copied().unwrap_or(0.0), rank(0.5), rank(0.9))
}

pub fn timing_table(timings: &[Timing], count: usize) -> String {
    let mut out = format!(
        "{:<34} {:>9} {:>9} {:>9}   (ms, {count} iterations)\n",
        "operation", "min", "median", "p90"
    );
    for timing in timings {
        let (min, median, p90) = summary(&timing.samples);
        out += &format!(
            "{:<34} {min:>9.1} {median:>9.1} {p90:>9.1}\n",
            timing.operation
        );
    }
    out
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

pub fn memory_table(rows: &[Sample]) -> String {
    let mut out = format!(
        "{:>5} {:>12} {:>12} {:>10} {:>14} {:>14}   (MiB)\n",
        "pods", "runtime RSS", "runtime PSS", "per-pod", "per-pod RSS", "per-pod PSS"
    );
    out += &format!("{:>5} {:>12} {:>12} {:>10}\n", "", "", "", "procs");
    for row in rows {
        out += &format!(
            "{:>5} {:>12} {:>12} {:>10} {:>14} {:>14}\n",
            row.pods,
            mib(row.runtime.rss_kib),
            mib(row.runtime.pss_kib),
            row.per_pod_processes,
            mib(row.per_pod.rss_kib),
            mib(row.per_pod.pss_kib),
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last())
        && last.pods > first.pods
    {
        let pods = (last.pods - first.pods) as u64;
        let per = |a: u64, b: u64| mib(b.saturating_sub(a) / pods);
        out += &format!(
            "per pod ({} -> {} pods): runtime RSS +{} MiB, per-pod processes RSS {} MiB, PSS {} MiB; total PSS {} MiB\n",
            first.pods,
            last.pods,
            per(first.runtime.rss_kib, last.runtime.rss_kib),
            per(first.per_pod.rss_kib, last.per_pod.rss_kib),
            per(first.per_pod.pss_kib, last.per_pod.pss_kib),
            per(
                first.runtime.pss_kib + first.per_pod.pss_kib,
                last.runtime.pss_kib + last.per_pod.pss_kib
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_summary() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        assert_eq!(summary(&ms(&[5, 1, 3, 2, 4])), (1.0, 3.0, 5.0));
        assert_eq!(
            summary(&ms(&[10, 1, 2, 3, 4, 5, 6, 7, 8, 9])),
            (1.0, 5.0, 9.0)
        );
        assert_eq!(summary(&[]), (0.0, 0.0, 0.0));
    }
}
