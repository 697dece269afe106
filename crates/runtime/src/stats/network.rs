//! Per-interface traffic counters of a pod's network namespace, read from
//! `/proc/thread-self/net/dev` by a short-lived thread that entered the namespace (the
//! thread's namespace is what that file shows; `/sys/class/net` would show the namespace
//! sysfs was mounted in).

use std::path::Path;

use anyhow::Context as _;
use nix::sched::CloneFlags;

/// Counters of one interface, cumulative since it was created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interface {
    /// Interface name (`eth0`).
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Transmit errors.
    pub tx_errors: u64,
}

/// The interfaces of the network namespace pinned at `netns` (loopback excluded, as
/// containerd and cAdvisor report them), in the order the kernel lists them.
pub fn interfaces(netns: &Path) -> anyhow::Result<Vec<Interface>> {
    let netns = netns.to_path_buf();
    std::thread::Builder::new()
        .name("netns-stats".into())
        .spawn(move || -> anyhow::Result<String> {
            let file = std::fs::File::open(&netns)
                .with_context(|| format!("opening {}", netns.display()))?;
            // Only this thread enters the namespace, and it ends right after.
            nix::sched::setns(&file, CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("entering {}", netns.display()))?;
            std::fs::read_to_string("/proc/thread-self/net/dev")
                .context("reading /proc/thread-self/net/dev")
        })
        .context("spawning the netns thread")?
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("netns thread panicked")))
        .map(|text| parse_net_dev(&text))
}

/// Parses `/proc/net/dev`: two header lines, then `name: rx_bytes rx_packets rx_errs ...
/// (8 receive columns) tx_bytes tx_packets tx_errs ...`. Loopback and malformed lines are
/// skipped.
pub fn parse_net_dev(text: &str) -> Vec<Interface> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, counters) = line.split_once(':')?;
            let name = name.trim();
            let counters: Vec<u64> = counters
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            (name != "lo" && counters.len() >= 16).then(|| Interface {
                name: name.to_string(),
                rx_bytes: counters[0],
                rx_errors: counters[2],
                tx_bytes: counters[8],
                tx_errors: counters[10],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     840      10    0    0    0     0          0         0      840      10    0    0    0     0       0          0
  eth0:   12345     100    2    0    0     0          0         0     6789      50    1    0    0     0       0          0
";

    #[test]
    fn parses_interfaces_without_loopback() {
        assert_eq!(
            parse_net_dev(NET_DEV),
            vec![Interface {
                name: "eth0".into(),
                rx_bytes: 12345,
                rx_errors: 2,
                tx_bytes: 6789,
                tx_errors: 1,
            }]
        );
        assert!(parse_net_dev("h1\nh2\n  eth0: 1 2 3\n").is_empty());
    }

    #[test]
    fn reads_this_process_namespace() {
        // The thread-self view of our own namespace lists at least what /proc/net/dev does.
        let own = interfaces(Path::new("/proc/self/ns/net")).unwrap();
        let expected = parse_net_dev(&std::fs::read_to_string("/proc/net/dev").unwrap());
        let names = |list: &[Interface]| list.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&own), names(&expected));
    }
}
