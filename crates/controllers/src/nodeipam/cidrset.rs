//! One cluster CIDR cut into node CIDRs of one size (upstream
//! `pkg/controller/nodeipam/ipam/cidrset`): allocation goes round the range from where
//! the last one ended, so a released CIDR is handed out again only after the others.

use std::net::IpAddr;

use ipnet::IpNet;

/// The largest difference between the cluster and node mask sizes (upstream's
/// `clusterSubnetMaxDiff`: at most 65,536 node CIDRs).
const MAX_DIFF: u8 = 16;

/// The node CIDRs of one cluster CIDR and which are in use.
#[derive(Debug, Clone)]
pub(crate) struct CidrSet {
    cluster: IpNet,
    node_prefix: u8,
    used: Vec<bool>,
    allocated: usize,
    next_candidate: usize,
}

/// An address as a number (IPv4 in the low 32 bits).
fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl CidrSet {
    /// `cluster` cut into `/node_prefix` CIDRs. Errors: a node prefix shorter than the
    /// cluster's, longer than the family's bits, or more than 16 bits longer.
    pub(crate) fn new(cluster: IpNet, node_prefix: u8) -> Result<Self, String> {
        let cluster = cluster.trunc();
        if node_prefix < cluster.prefix_len() || node_prefix > cluster.max_prefix_len() {
            return Err(format!(
                "the node CIDR mask size {node_prefix} must be between the cluster CIDR {cluster}'s mask size and {}",
                cluster.max_prefix_len()
            ));
        }
        if node_prefix - cluster.prefix_len() > MAX_DIFF {
            return Err(format!(
                "the node CIDR mask size {node_prefix} is more than {MAX_DIFF} bits longer than the cluster CIDR {cluster}'s"
            ));
        }
        let count = 1usize << (node_prefix - cluster.prefix_len());
        Ok(Self {
            cluster,
            node_prefix,
            used: vec![false; count],
            allocated: 0,
            next_candidate: 0,
        })
    }

    /// The cluster CIDR.
    pub(crate) fn cluster(&self) -> IpNet {
        self.cluster
    }

    /// The node CIDR at `index`.
    fn cidr(&self, index: usize) -> Option<IpNet> {
        let host_bits = u32::from(self.cluster.max_prefix_len() - self.node_prefix);
        let offset = u128::try_from(index).ok()?.checked_shl(host_bits)?;
        let base = to_u128(self.cluster.network()) + offset;
        let ip = match self.cluster {
            IpNet::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(u32::try_from(base).ok()?)),
            IpNet::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(base)),
        };
        IpNet::new(ip, self.node_prefix).ok()
    }

    /// The first free node CIDR from the last allocation on (upstream `AllocateNext`).
    /// Errors: every one is in use.
    pub(crate) fn allocate_next(&mut self) -> Result<IpNet, String> {
        let count = self.used.len();
        for i in 0..count {
            let candidate = (self.next_candidate + i) % count;
            if !self.used[candidate] {
                self.used[candidate] = true;
                self.allocated += 1;
                self.next_candidate = (candidate + 1) % count;
                return self
                    .cidr(candidate)
                    .ok_or_else(|| format!("node CIDR {candidate} out of range"));
            }
        }
        Err(
            "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
                .to_owned(),
        )
    }

    /// The indices of the node CIDRs that `cidr` overlaps (upstream
    /// `getBeginningAndEndIndices`). Errors: `cidr` is of another family or outside the
    /// cluster CIDR.
    fn indices(&self, cidr: IpNet) -> Result<std::ops::RangeInclusive<usize>, String> {
        let cidr = cidr.trunc();
        let same_family = matches!(
            (cidr, self.cluster),
            (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
        );
        let overlaps = self.cluster.contains(&cidr.network()) || cidr.contains(&self.cluster);
        if !same_family || !overlaps {
            return Err(format!(
                "cidr {cidr} is out the range of cluster cidr {}",
                self.cluster
            ));
        }
        let host_bits = u32::from(self.cluster.max_prefix_len() - self.node_prefix);
        let base = to_u128(self.cluster.network());
        let first = to_u128(cidr.network()).max(base);
        let last = to_u128(cidr.broadcast()).min(to_u128(self.cluster.broadcast()));
        let index = |addr: u128| usize::try_from((addr - base) >> host_bits).unwrap_or(usize::MAX);
        Ok(index(first)..=index(last).min(self.used.len().saturating_sub(1)))
    }

    /// Marks every node CIDR `cidr` overlaps as used (upstream `Occupy`). Errors: see
    /// [`CidrSet::indices`].
    pub(crate) fn occupy(&mut self, cidr: IpNet) -> Result<(), String> {
        for i in self.indices(cidr)? {
            if !self.used[i] {
                self.used[i] = true;
                self.allocated += 1;
            }
        }
        Ok(())
    }

    /// Marks every node CIDR `cidr` overlaps as free (upstream `Release`). Errors: see
    /// [`CidrSet::indices`].
    pub(crate) fn release(&mut self, cidr: IpNet) -> Result<(), String> {
        for i in self.indices(cidr)? {
            if self.used[i] {
                self.used[i] = false;
                self.allocated -= 1;
            }
        }
        Ok(())
    }

    /// How many node CIDRs are in use.
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn allocates_in_order_round_the_range() {
        let mut set = CidrSet::new(net("10.244.0.0/22"), 24).unwrap();
        let got: Vec<String> = (0..4)
            .map(|_| set.allocate_next().unwrap().to_string())
            .collect();
        assert_eq!(
            got,
            [
                "10.244.0.0/24",
                "10.244.1.0/24",
                "10.244.2.0/24",
                "10.244.3.0/24"
            ]
        );
        assert!(
            set.allocate_next()
                .unwrap_err()
                .contains("no remaining CIDRs")
        );
        set.release(net("10.244.1.0/24")).unwrap();
        assert_eq!(set.allocate_next().unwrap(), net("10.244.1.0/24"));
        assert_eq!(set.allocated(), 4);
    }

    #[test]
    fn released_cidrs_come_back_after_the_others() {
        let mut set = CidrSet::new(net("10.0.0.0/16"), 24).unwrap();
        let first = set.allocate_next().unwrap();
        set.release(first).unwrap();
        assert_eq!(set.allocate_next().unwrap(), net("10.0.1.0/24"));
    }

    #[test]
    fn occupy_marks_overlapping_cidrs() {
        let mut set = CidrSet::new(net("10.0.0.0/16"), 24).unwrap();
        // A bigger range (a service range) takes every node CIDR it covers.
        set.occupy(net("10.0.0.0/23")).unwrap();
        assert_eq!(set.allocated(), 2);
        assert_eq!(set.allocate_next().unwrap(), net("10.0.2.0/24"));
        // A range that covers the whole cluster CIDR takes all of it.
        let mut all = CidrSet::new(net("10.96.0.0/16"), 24).unwrap();
        all.occupy(net("10.96.0.0/12")).unwrap();
        assert!(all.allocate_next().is_err());
        assert!(set.occupy(net("192.168.0.0/24")).is_err());
        assert!(set.occupy(net("fd00::/64")).is_err());
    }

    #[test]
    fn ipv6_and_bad_sizes() {
        let mut set = CidrSet::new(net("fd00:10:244::/56"), 64).unwrap();
        assert_eq!(set.allocate_next().unwrap(), net("fd00:10:244::/64"));
        assert_eq!(set.allocate_next().unwrap(), net("fd00:10:244:1::/64"));
        assert!(CidrSet::new(net("10.0.0.0/16"), 8).is_err());
        assert!(CidrSet::new(net("10.0.0.0/8"), 25).is_err());
        assert!(CidrSet::new(net("fd00::/48"), 129).is_err());
    }
}
