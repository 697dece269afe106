//! How upstream's allocators pick a free value of a range (`randomScanStrategyWithOffset`
//! in `pkg/registry/core/service/allocator`): the range's lower band is kept for the
//! values clients ask for (static allocation; KEP-3070 for cluster IPs, KEP-3668 for node
//! ports), dynamic allocation takes a random free value of the upper band — a random start,
//! scanning forward and wrapping — and the lower band only once the upper one is full.
//!
//! Values are offsets into the range (`0..size`).

/// The lower band of a range of cluster IPs: `min(max(16, size / 16), 256)` addresses of
/// a CIDR of `cidr_size` addresses, none for CIDRs of 16 addresses or fewer (upstream
/// `ipallocator.calculateRangeOffset`).
pub fn cluster_ip_static_band(cidr_size: u128) -> u128 {
    static_band(cidr_size, 16, 16, 256)
}

/// The lower band of a node port range of `size` ports: `min(max(16, size / 32), 128)`,
/// none for ranges of 16 ports or fewer (upstream `portallocator.calculateRangeOffset`).
pub fn node_port_static_band(size: u128) -> u128 {
    static_band(size, 16, 32, 128)
}

fn static_band(size: u128, min: u128, step: u128, max: u128) -> u128 {
    if size <= min {
        return 0;
    }
    (size / step).clamp(min, max)
}

/// A free offset of `0..size` whose lower `band` offsets are tried last, or `None` when
/// every offset is taken. `taken` says whether an offset is in use and `in_use` how many
/// are (which bounds the scan of large ranges: `in_use + 1` consecutive offsets always
/// hold a free one). `random(n)` is a random number below `n`.
pub fn random_free(
    size: u128,
    band: u128,
    in_use: usize,
    taken: &dyn Fn(u128) -> bool,
    random: &mut dyn FnMut(u128) -> u128,
) -> Option<u128> {
    let band = band.min(size);
    let probes = u128::try_from(in_use)
        .unwrap_or(u128::MAX)
        .saturating_add(1);
    let mut scan = |start: u128, len: u128| -> Option<u128> {
        if len == 0 {
            return None;
        }
        let first = random(len);
        (0..len.min(probes))
            .map(|i| start + (first + i) % len)
            .find(|at| !taken(*at))
    };
    scan(band, size - band).or_else(|| scan(0, band))
}

/// A uniformly random number below `n` (`n` > 0), for [`random_free`].
pub fn random_below(n: u128) -> u128 {
    rand::random_range(0..n.max(1))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn static_bands_as_upstream() {
        // A /28 has 16 addresses: no band; a /24 256: 16; a /20 4096: 256; a /12 capped.
        assert_eq!(cluster_ip_static_band(16), 0);
        assert_eq!(cluster_ip_static_band(32), 16);
        assert_eq!(cluster_ip_static_band(256), 16);
        assert_eq!(cluster_ip_static_band(1024), 64);
        assert_eq!(cluster_ip_static_band(1 << 20), 256);
        // The default node port range 30000-32767 has 2768 ports: 86.
        assert_eq!(node_port_static_band(2768), 86);
        assert_eq!(node_port_static_band(16), 0);
        assert_eq!(node_port_static_band(100), 16);
        assert_eq!(node_port_static_band(65536), 128);
    }

    #[test]
    fn takes_random_values_of_the_upper_band_first() {
        let taken: HashSet<u128> = HashSet::new();
        let picks: HashSet<u128> = (0..50)
            .filter_map(|_| random_free(256, 16, 0, &|at| taken.contains(&at), &mut random_below))
            .collect();
        assert!(picks.iter().all(|at| (16..256).contains(at)), "{picks:?}");
        // Not the lowest free value every time (50 draws of 240 values).
        assert!(picks.len() > 1, "{picks:?}");
    }

    #[test]
    fn scans_forward_and_wraps_then_falls_back_to_the_lower_band() {
        // The upper band 4..10 has 8 and 9 free; a start at offset 3 of the band (7)
        // finds 8, a start at 5 (9) finds 9, a start at 0 (4) wraps nowhere: 8.
        let taken: HashSet<u128> = [4, 5, 6, 7].into();
        let pick = |start: u128| {
            random_free(10, 4, taken.len(), &|at| taken.contains(&at), &mut |_| {
                start
            })
        };
        assert_eq!(pick(3), Some(8));
        assert_eq!(pick(5), Some(9));
        assert_eq!(pick(0), Some(8));
        let full_upper: HashSet<u128> = (2..10).collect();
        let lower = random_free(10, 4, 8, &|at| full_upper.contains(&at), &mut |_| 1);
        assert_eq!(lower, Some(1));
        let all: HashSet<u128> = (0..10).collect();
        assert_eq!(
            random_free(10, 4, 10, &|at| all.contains(&at), &mut |n| n - 1),
            None
        );
    }

    #[test]
    fn a_huge_range_is_scanned_only_as_far_as_needed() {
        let taken: HashSet<u128> = (1000..1003).collect();
        let free = random_free(u128::MAX, 256, 3, &|at| taken.contains(&at), &mut |_| 744);
        assert_eq!(free, Some(1003));
    }
}
