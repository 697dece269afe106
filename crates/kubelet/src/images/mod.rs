//! Images on the node (upstream `pkg/kubelet/images`): [`gc`] removes unused images when
//! the image filesystem fills up.

pub mod gc;
