//! Test harness for Skiff: everything an end-to-end test needs, without the internet.
//!
//! - [`FileServer`]: a tiny blocking HTTP server for the files of a directory (pod
//!   manifests for `--manifest-url`), recording the requests it answers.
//! - [`Registry`]: a real OCI registry (Debian's `docker-registry`, distribution 2.8) on a
//!   free loopback port, removed on drop.
//! - [`ImageBuilder`] builds OCI images in memory from layer tars ([`layer_tar`]);
//!   [`busybox`] / [`busybox_with`] build the test image with it from Debian's
//!   busybox-static; [`push`] uploads an image to a registry.
//! - [`TlsTunnel`] (async): plain TCP in, verified TLS out, for the [`stream`] clients
//!   against the kubelet's HTTPS port.
//! - [`Etcd`]: a single-member etcd (Debian's etcd-server) on free loopback ports with a
//!   temporary data directory, removed on drop.
//! - [`Proxy`]: a TCP proxy that slows down or stalls a server's responses ([`Throttle`]).
//! - [`Node`]: a running `skiff kubelet` (on its embedded runtime or on a private
//!   containerd, [`NodeRuntime`]) with its own directories, CNI network, read-only and
//!   HTTPS ports, torn down (pods, mounts, bridge, iptables rules) on drop.
//! - [`cri::CriRuntime`]: a CRI runtime (`skiff runtime` or containerd 1.6) for the CRI
//!   integration suite, with async (tokio) gRPC clients; [`pause`] is the sandbox image
//!   it gives containerd.
//!
//! - [`ApiServer`]: a running `skiff apiserver` on SQLite or an etcd ([`Backend`]) with a
//!   temporary data directory, its admin kubeconfig, kubectl and kube-rs clients, SIGKILL and
//!   restart.
//!
//! - [`Scheduler`]: a running `skiff scheduler` against an API server, with its health
//!   endpoints ([`scheduler::https_get_insecure`]), SIGKILL and restart.
//!
//! - [`stream`]: async clients of the CRI streaming endpoints (exec / attach /
//!   port-forward over SPDY/3.1 and WebSocket).
//!
//! Apart from [`cri`] and [`stream`], the API is blocking (plain threads, no async runtime), so it works from `#[test]`
//! and, with care for blocking, from `#[tokio::test]`.

pub mod apiserver;
pub mod cri;
mod daemon;
mod etcd;
mod file_server;
mod image;
mod node;
mod proxy;
mod push;
mod registry;
pub mod scheduler;
mod spawn;
pub mod stream;
mod sys;
pub use sys::{rss_kib, rss_parts_kib};
mod tls_tunnel;
mod token;

pub use apiserver::{ApiServer, ApiServerOptions, Backend};
pub use etcd::Etcd;
pub use file_server::FileServer;
pub use image::{
    ArchiveFile, Compression, Image, ImageBuilder, ImageOptions, Layer, MediaTypes, Platform,
    PlatformManifest, TarEntry, archive_tar, busybox, busybox_configured, busybox_with, layer_tar,
    pause, write_files,
};
pub use node::{Node, NodeOptions, NodeRuntime};
pub use proxy::{Proxy, Throttle};
pub use push::push;
pub use registry::Registry;
pub use scheduler::Scheduler;
pub use tls_tunnel::TlsTunnel;
