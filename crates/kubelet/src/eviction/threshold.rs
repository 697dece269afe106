//! Eviction signals and thresholds (upstream `pkg/kubelet/eviction/api` and
//! `helpers.go` `ParseThresholdConfig`): `memory.available<100Mi`, `nodefs.available<10%`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::error::{Error, Result};
use skiff_api::quantity;

/// What the eviction manager observes (upstream `evictionapi.Signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// `memory.available`: memory capacity minus the root cgroup's working set.
    MemoryAvailable,
    /// `allocatableMemory.available`: allocatable memory minus the pods' working set
    /// (only when `enforceNodeAllocatable` has `pods`).
    AllocatableMemoryAvailable,
    /// `nodefs.available`: free bytes of the kubelet root directory's filesystem.
    NodeFsAvailable,
    /// `nodefs.inodesFree`: free inodes of that filesystem.
    NodeFsInodesFree,
    /// `imagefs.available`: free bytes of the runtime's image filesystem.
    ImageFsAvailable,
    /// `imagefs.inodesFree`: free inodes of the image filesystem.
    ImageFsInodesFree,
}

impl Signal {
    /// Every signal with its configuration name.
    pub const ALL: [(Signal, &'static str); 6] = [
        (Signal::MemoryAvailable, "memory.available"),
        (
            Signal::AllocatableMemoryAvailable,
            "allocatableMemory.available",
        ),
        (Signal::NodeFsAvailable, "nodefs.available"),
        (Signal::NodeFsInodesFree, "nodefs.inodesFree"),
        (Signal::ImageFsAvailable, "imagefs.available"),
        (Signal::ImageFsInodesFree, "imagefs.inodesFree"),
    ];

    /// The configuration name (`memory.available`, ...).
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("", |(_, name)| name)
    }

    /// The signal named `name`.
    pub fn parse(name: &str) -> Option<Signal> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(s, _)| *s)
    }

    /// The resource this signal starves (upstream `signalToResource`): `memory`,
    /// `ephemeral-storage` or `inodes`.
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
        }
    }

    /// The node condition its pressure sets: `MemoryPressure` or `DiskPressure`.
    pub fn node_condition(self) -> &'static str {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => "MemoryPressure",
            _ => "DiskPressure",
        }
    }
}

/// A threshold amount: an absolute quantity or a fraction of the capacity.
#[derive(Debug, Clone, PartialEq)]
pub enum ThresholdValue {
    /// An absolute amount (bytes or inodes), with the quantity as written.
    Quantity(i64, String),
    /// A fraction of the capacity in (0, 1].
    Percentage(f64),
}

/// A hard threshold: evict when `signal` falls below `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The observed signal.
    pub signal: Signal,
    /// The amount below which it is met.
    pub value: ThresholdValue,
}

impl Threshold {
    /// The threshold in base units for a signal whose capacity is `capacity` (upstream
    /// `GetThresholdQuantity`: a percentage is `capacity * percentage`, truncated).
    pub fn quantity(&self, capacity: i64) -> i64 {
        match &self.value {
            ThresholdValue::Quantity(v, _) => *v,
            ThresholdValue::Percentage(p) => (capacity as f64 * p) as i64,
        }
    }

    /// The threshold as upstream prints it in eviction messages: the quantity as
    /// written, or `capacity * percentage` as a binary-SI quantity.
    pub fn display_quantity(&self, capacity: i64) -> String {
        match &self.value {
            ThresholdValue::Quantity(_, text) => text.clone(),
            ThresholdValue::Percentage(_) => quantity::format_binary_si(self.quantity(capacity)),
        }
    }

    /// True when `available` is below the threshold (upstream `thresholdsMet`).
    pub fn is_met(&self, available: i64, capacity: i64) -> bool {
        available < self.quantity(capacity)
    }
}

/// Parses `evictionHard` (signal name to `<quantity>` or `<percent>%`) into thresholds
/// (upstream `ParseThresholdConfig` for hard thresholds). Zero thresholds (`0` or
/// `0%`) are dropped, as upstream does. When `allocatable_enforced` (enforceNodeAllocatable
/// has `pods`), a `memory.available` threshold is repeated for
/// `allocatableMemory.available`.
///
/// Errors name the bad entry: an unknown signal, a malformed, negative or over-100%
/// value.
pub fn parse_thresholds(
    config: &BTreeMap<String, String>,
    allocatable_enforced: bool,
) -> anyhow::Result<Vec<Threshold>> {
    let mut out = Vec::new();
    for (name, value) in config {
        let signal = Signal::parse(name)
            .ok_or_else(|| anyhow::anyhow!("eviction threshold: unknown signal {name:?}"))?;
        let value = parse_value(value)
            .map_err(|e| anyhow::anyhow!("eviction threshold {name}={value}: {e}"))?;
        let zero = match &value {
            ThresholdValue::Quantity(v, _) => *v == 0,
            ThresholdValue::Percentage(p) => *p == 0.0,
        };
        if zero {
            continue;
        }
        if signal == Signal::MemoryAvailable && allocatable_enforced {
            out.push(Threshold {
                signal: Signal::AllocatableMemoryAvailable,
                value: value.clone(),
            });
        }
        out.push(Threshold { signal, value });
    }
    out.sort_by_key(|t| t.signal);
    Ok(out)
}

/// Parses one threshold value: a non-negative quantity (`100Mi`) or a percentage in
/// [0%, 100%] (`10%`, kept as a fraction). Errors say what is wrong with `value`.
pub(crate) fn parse_value(value: &str) -> Result<ThresholdValue> {
    let value = value.trim();
    if let Some(percent) = value.strip_suffix('%') {
        let p: f64 = percent
            .trim()
            .parse()
            .map_err(|_| Error::Config(format!("invalid percentage {value:?}")))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(Error::Config(format!(
                "percentage {value:?} must be between 0% and 100%"
            )));
        }
        return Ok(ThresholdValue::Percentage(p / 100.0));
    }
    let parsed = quantity::parse(&Quantity(value.to_owned()))
        .ok_or_else(|| Error::Config(format!("invalid quantity {value:?}")))?;
    if parsed < 0.0 {
        return Err(Error::Config(format!("quantity {value:?} is negative")));
    }
    Ok(ThresholdValue::Quantity(
        parsed.ceil() as i64,
        value.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_quantities_and_percentages() {
        let t = parse_thresholds(
            &config(&[
                ("memory.available", "100Mi"),
                ("nodefs.available", "10%"),
                ("imagefs.available", "0%"),
                ("nodefs.inodesFree", "5%"),
            ]),
            true,
        )
        .unwrap();
        let signals: Vec<_> = t.iter().map(|t| t.signal).collect();
        assert_eq!(
            signals,
            [
                Signal::MemoryAvailable,
                Signal::AllocatableMemoryAvailable,
                Signal::NodeFsAvailable,
                Signal::NodeFsInodesFree
            ]
        );
        assert_eq!(t[0].quantity(1 << 30), 100 << 20);
        assert_eq!(t[0].display_quantity(1 << 30), "100Mi");
        assert_eq!(t[2].quantity(1000), 100);
        assert_eq!(t[2].display_quantity(10 << 30), "1Gi");
        assert!(t[2].is_met(99, 1000));
        assert!(!t[2].is_met(100, 1000));
        assert_eq!(t[3].value, ThresholdValue::Percentage(0.05));
    }

    #[test]
    fn rejects_bad_entries() {
        for (k, v) in [
            ("memory.free", "1Gi"),
            ("memory.available", "lots"),
            ("nodefs.available", "120%"),
            ("nodefs.available", "-1%"),
            ("memory.available", "-5Mi"),
        ] {
            assert!(
                parse_thresholds(&config(&[(k, v)]), false).is_err(),
                "{k}={v}"
            );
        }
        let t = parse_thresholds(&config(&[("memory.available", "1Gi")]), false).unwrap();
        assert_eq!(t.len(), 1);
    }
}
