//! The links of the bridge network, driven through rtnetlink: the bridge and the host end
//! of each veth from the runtime's network namespace, `eth0` and `lo` from inside the pod's.
//!
//! Each attach and detach runs on a short-lived OS thread of its own, with netlink sockets
//! of its own: the kernel handles a netlink request inside the sender's `sendmsg` and allows
//! one dump at a time per socket, so a shared socket would serialize every pod's network
//! set-up behind one task (and fail concurrent dumps with EBUSY). The attach thread opens
//! its first socket in the runtime's namespace for the host side, then joins the pod's
//! namespace (`setns`) and opens a second one there; a socket stays bound to the namespace
//! it was opened in. The thread is never reused, so no other work runs in the pod's
//! namespace.

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use futures::TryStreamExt as _;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::link::{InfoData, InfoVeth, LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::{Handle, LinkBridge, LinkBridgePort, LinkUnspec, LinkVeth, RouteMessageBuilder};

/// Whether `err` is the netlink error `errno`.
fn is_errno(err: &rtnetlink::Error, errno: i32) -> bool {
    matches!(err, rtnetlink::Error::NetlinkError(msg) if msg.raw_code().abs() == errno)
}

/// Opens a netlink connection in the current thread's network namespace and drives it on
/// the current tokio runtime.
fn connect() -> anyhow::Result<Handle> {
    let (connection, handle, _) =
        rtnetlink::new_connection().context("opening a netlink socket")?;
    tokio::spawn(connection);
    Ok(handle)
}

/// The link named `name`, if any.
async fn link_by_name(handle: &Handle, name: &str) -> anyhow::Result<Option<LinkMessage>> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(link) => Ok(link),
        Err(err) if is_errno(&err, libc::ENODEV) => Ok(None),
        Err(err) => Err(err).with_context(|| format!("looking up link {name}")),
    }
}

/// Makes sure bridge `name` exists, is up and holds `gateway` (address and prefix, the
/// bridge plugin's `isGateway`). Returns its index. The address check is a netlink dump;
/// callers pass `checked`, the index this check last succeeded for, to skip it while the
/// bridge is the same. Safe to race with itself (each caller has its own socket).
async fn ensure_bridge(
    handle: &Handle,
    name: &str,
    gateway: Ipv4Net,
    checked: Option<u32>,
) -> anyhow::Result<u32> {
    let bridge = match link_by_name(handle, name).await? {
        Some(link) => link,
        None => {
            match handle
                .link()
                .add(LinkBridge::new(name).build())
                .execute()
                .await
            {
                Ok(()) => {}
                Err(err) if is_errno(&err, libc::EEXIST) => {}
                Err(err) => return Err(err).with_context(|| format!("creating bridge {name}")),
            }
            link_by_name(handle, name)
                .await?
                .with_context(|| format!("bridge {name} vanished after creation"))?
        }
    };
    let index = bridge.header.index;
    let up = bridge.header.flags.contains(LinkFlags::Up);
    if up && checked == Some(index) {
        return Ok(index);
    }
    if !up {
        handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .with_context(|| format!("setting bridge {name} up"))?;
    }
    let has_gateway = handle
        .address()
        .get()
        .set_link_index_filter(index)
        .set_address_filter(IpAddr::V4(gateway.addr()))
        .execute()
        .try_next()
        .await
        .with_context(|| format!("listing the addresses of {name}"))?
        .is_some_and(|addr| addr.header.prefix_len == gateway.prefix_len());
    if !has_gateway {
        match handle
            .address()
            .add(index, IpAddr::V4(gateway.addr()), gateway.prefix_len())
            .execute()
            .await
        {
            Ok(()) => {}
            Err(err) if is_errno(&err, libc::EEXIST) => {}
            Err(err) => {
                return Err(err).with_context(|| format!("adding {gateway} to bridge {name}"));
            }
        }
    }
    Ok(index)
}

/// Creates the veth pair: `host` in the runtime's namespace, attached to `bridge` and up,
/// and its peer `eth0` created directly in the pod's namespace `netns`. Sets hairpin mode
/// on the bridge port when asked.
async fn add_veth(
    handle: &Handle,
    host: &str,
    bridge: u32,
    netns: &Path,
    hairpin: bool,
) -> anyhow::Result<()> {
    let ns = std::fs::File::open(netns)
        .with_context(|| format!("opening network namespace {}", netns.display()))?;
    let peer = LinkUnspec::new_with_name(super::POD_IFNAME)
        .setns_by_fd(ns.as_raw_fd())
        .build();
    let message = LinkVeth::new(host, super::POD_IFNAME)
        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
        .controller(bridge)
        .up()
        .build();
    let mut created = handle.link().add(message.clone()).execute().await;
    if matches!(&created, Err(err) if is_errno(err, libc::EEXIST)) {
        // Left by an earlier attempt for this sandbox (the name derives from its ID).
        delete_link(handle, host).await?;
        created = handle.link().add(message).execute().await;
    }
    created.with_context(|| format!("creating veth {host}"))?;
    drop(ns);
    if hairpin {
        let index = link_by_name(handle, host)
            .await?
            .with_context(|| format!("veth {host} vanished after creation"))?
            .header
            .index;
        handle
            .link()
            .set_port(LinkBridgePort::new(index).hairpin(true).build())
            .execute()
            .await
            .with_context(|| format!("setting hairpin mode on {host}"))?;
    }
    Ok(())
}

/// Deletes link `name` (both ends of a veth); a missing link is fine.
async fn delete_link(handle: &Handle, name: &str) -> anyhow::Result<()> {
    let Some(link) = link_by_name(handle, name).await? else {
        return Ok(());
    };
    match handle.link().del(link.header.index).execute().await {
        Ok(()) => Ok(()),
        Err(err) if is_errno(&err, libc::ENODEV) => Ok(()),
        Err(err) => Err(err).with_context(|| format!("deleting link {name}")),
    }
}

/// What the pod's side of the attachment is given.
#[derive(Debug, Clone)]
pub(crate) struct PodSide {
    /// The pod's address and prefix on `eth0`.
    pub(crate) address: Ipv4Net,
    /// The gateway every route goes through.
    pub(crate) gateway: Ipv4Addr,
    /// Route destinations.
    pub(crate) routes: Vec<Ipv4Net>,
}

/// What the host's side of the attachment is given.
#[derive(Debug, Clone)]
pub(crate) struct HostSide {
    /// The bridge's name.
    pub(crate) bridge: String,
    /// The gateway address and prefix the bridge holds.
    pub(crate) gateway: Ipv4Net,
    /// The bridge index whose address was last found in place (see [`ensure_bridge`]).
    pub(crate) checked: Option<u32>,
    /// The host end of the veth.
    pub(crate) veth: String,
    /// Hairpin mode on the bridge port.
    pub(crate) hairpin: bool,
}

/// What an attach did: the bridge's index (for the caller's cache) and `eth0`'s MAC address
/// (`aa:bb:...`).
#[derive(Debug, Clone)]
pub(crate) struct Attached {
    pub(crate) bridge_index: u32,
    pub(crate) mac: String,
}

/// Attaches the pod whose network namespace is `netns`: the bridge (created or checked),
/// the veth pair (host end on the bridge, `eth0` in the pod), then inside the pod `lo` up,
/// `eth0`'s address, `eth0` up and the routes through the gateway.
pub(crate) async fn attach(
    netns: PathBuf,
    host: HostSide,
    pod: PodSide,
) -> anyhow::Result<Attached> {
    on_own_thread(move |runtime| {
        let bridge_index = runtime.block_on(async {
            let handle = connect()?;
            let index = ensure_bridge(&handle, &host.bridge, host.gateway, host.checked).await?;
            add_veth(&handle, &host.veth, index, &netns, host.hairpin).await?;
            anyhow::Ok(index)
        })?;
        let ns = std::fs::File::open(&netns)
            .with_context(|| format!("opening network namespace {}", netns.display()))?;
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("joining network namespace {}", netns.display()))?;
        let mac = runtime.block_on(configure_pod(pod))?;
        Ok(Attached { bridge_index, mac })
    })
    .await
}

/// Deletes link `name` of the runtime's namespace (both ends of a veth); a missing link is
/// fine.
pub(crate) async fn detach(name: String) -> anyhow::Result<()> {
    on_own_thread(move |runtime| {
        runtime.block_on(async {
            let handle = connect()?;
            delete_link(&handle, &name).await
        })
    })
    .await
}

/// Runs `work` on a fresh OS thread with a current-thread tokio runtime of its own.
async fn on_own_thread<T: Send + 'static>(
    work: impl FnOnce(&tokio::runtime::Runtime) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("skiff-netlink".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .context("building the netlink thread's runtime")
                .and_then(|runtime| work(&runtime));
            let _ = tx.send(result);
        })
        .context("starting the netlink thread")?;
    rx.await
        .map_err(|_| anyhow!("the netlink thread ended without an answer"))?
}

/// Inside the pod's namespace (the current thread's): sets `lo` up, gives `eth0` its
/// address, sets it up and adds the routes through the gateway. Returns `eth0`'s MAC.
async fn configure_pod(side: PodSide) -> anyhow::Result<String> {
    let handle = connect()?;
    let lo = link_by_name(&handle, "lo")
        .await?
        .context("the pod has no lo")?;
    handle
        .link()
        .set(LinkUnspec::new_with_index(lo.header.index).up().build())
        .execute()
        .await
        .context("setting lo up")?;
    let eth0 = link_by_name(&handle, super::POD_IFNAME)
        .await?
        .context("the pod has no eth0")?;
    let index = eth0.header.index;
    handle
        .address()
        .add(
            index,
            IpAddr::V4(side.address.addr()),
            side.address.prefix_len(),
        )
        .execute()
        .await
        .with_context(|| format!("adding {} to eth0", side.address))?;
    handle
        .link()
        .set(LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .context("setting eth0 up")?;
    for dst in &side.routes {
        let route = RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(dst.network(), dst.prefix_len())
            .gateway(side.gateway)
            .output_interface(index)
            .build();
        handle
            .route()
            .add(route)
            .execute()
            .await
            .with_context(|| format!("adding route {dst} via {}", side.gateway))?;
    }
    let mac = eth0.attributes.iter().find_map(|attr| match attr {
        LinkAttribute::Address(bytes) => Some(
            bytes
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
        ),
        _ => None,
    });
    Ok(mac.unwrap_or_default())
}
