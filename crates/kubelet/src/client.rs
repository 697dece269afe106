//! The kubelet's client of the API server (upstream's `KubeClient` built from
//! `--kubeconfig`): a `kube::Client` for the node's own objects, its pods, Lease, events
//! and the ConfigMaps, Secrets and tokens its pods use, rate-limited with `kubeAPIQPS` /
//! `kubeAPIBurst` (see `skiff_client`).

pub use skiff_client::{flowcontrol, from_kubeconfig};
