//! NodeVolumeLimits (upstream `framework/plugins/nodevolumelimits`): a node must not get
//! more volumes of a CSI driver than the driver can attach there. Only the CSI plugin
//! ([`csi`]) exists upstream in 1.33 (the in-tree cloud limits plugins are gone).

pub mod csi;

pub use csi::{CsiLimits, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NAME, new};
