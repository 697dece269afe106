//! Masquerading of a pod subnet, set up once per network rather than once per pod.
//!
//! The bridge plugin's `ipMasq` adds a chain per container (`CNI-<hash>`, about nine
//! iptables calls per pod, serialized by the xtables lock). The same effect for the whole
//! subnet is one chain, `SKIFF-MASQ-<hash>`, and one jump from `nat POSTROUTING`:
//!
//! ```text
//! -A POSTROUTING -s <subnet> -m comment --comment "skiff: masquerade for CNI network \"<name>\"" -j SKIFF-MASQ-<hash>
//! -A SKIFF-MASQ-<hash> -d <subnet> -j RETURN
//! -A SKIFF-MASQ-<hash> -d 224.0.0.0/4 -j RETURN
//! -A SKIFF-MASQ-<hash> -j MASQUERADE
//! ```
//!
//! Like a node's other network set-up (the bridge itself), the rules are added with the
//! network's first pod and kept while the runtime runs; the runtime removes them when it
//! shuts down with no pod left on the network.

use std::process::Stdio;

use anyhow::{Context as _, bail};
use ipnet::Ipv4Net;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

/// The masquerade rules of one network.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Masquerade {
    subnet: Ipv4Net,
    chain: String,
    comment: String,
}

impl Masquerade {
    /// The rules of network `network` over `subnet`.
    pub(crate) fn new(network: &str, subnet: Ipv4Net) -> Self {
        let digest = Sha256::digest(format!("{network}\n{subnet}").as_bytes());
        Self {
            subnet,
            chain: format!("SKIFF-MASQ-{}", hex::encode(&digest[..4]).to_uppercase()),
            comment: format!("skiff: masquerade for CNI network \"{network}\""),
        }
    }

    fn jump(&self) -> Vec<String> {
        [
            "-s",
            &self.subnet.to_string(),
            "-m",
            "comment",
            "--comment",
            &self.comment,
            "-j",
            &self.chain,
        ]
        .map(String::from)
        .to_vec()
    }

    /// Writes the chain (replacing its rules) in one `iptables-restore`, then adds the jump
    /// from `POSTROUTING` unless it is there.
    pub(crate) async fn ensure(&self) -> anyhow::Result<()> {
        let chain = &self.chain;
        let subnet = self.subnet;
        let rules = format!(
            "*nat\n:{chain} - [0:0]\n-A {chain} -d {subnet} -j RETURN\n-A {chain} -d 224.0.0.0/4 -j RETURN\n-A {chain} -j MASQUERADE\nCOMMIT\n"
        );
        restore(&rules).await?;
        let mut check = vec!["-C".to_string(), "POSTROUTING".into()];
        check.extend(self.jump());
        if iptables(&check).await.is_err() {
            let mut append = vec!["-A".to_string(), "POSTROUTING".into()];
            append.extend(self.jump());
            iptables(&append).await?;
        }
        Ok(())
    }

    /// Removes the jump and the chain; rules already gone are fine.
    pub(crate) async fn remove(&self) -> anyhow::Result<()> {
        let mut delete = vec!["-D".to_string(), "POSTROUTING".into()];
        delete.extend(self.jump());
        while iptables(&delete).await.is_ok() {}
        let chain = self.chain.clone();
        let exists = iptables(&["-S".into(), chain.clone()]).await.is_ok();
        if exists {
            iptables(&["-F".into(), chain.clone()]).await?;
            iptables(&["-X".into(), chain]).await?;
        }
        Ok(())
    }
}

/// `iptables -w -t nat <args>`; a non-zero exit is an error carrying the first line of
/// stderr.
async fn iptables(args: &[String]) -> anyhow::Result<()> {
    let output = tokio::process::Command::new("iptables")
        .args(["-w", "-t", "nat"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("running iptables")?;
    if !output.status.success() {
        bail!(
            "iptables {}: {}",
            args.join(" "),
            first_line(&output.stderr)
        );
    }
    Ok(())
}

/// `iptables-restore -w --noflush` with `rules` on stdin.
async fn restore(rules: &str) -> anyhow::Result<()> {
    let mut child = tokio::process::Command::new("iptables-restore")
        .args(["-w", "--noflush"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running iptables-restore")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(rules.as_bytes()).await?;
    }
    let output = child.wait_with_output().await?;
    if !output.status.success() {
        bail!("iptables-restore: {}", first_line(&output.stderr));
    }
    Ok(())
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("failed")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_fit_and_differ() {
        let a = Masquerade::new("skiff", "10.88.0.0/16".parse().unwrap());
        let b = Masquerade::new("skiff", "10.89.0.0/16".parse().unwrap());
        assert!(
            a.chain.len() <= 28,
            "iptables chain names are at most 28 bytes"
        );
        assert!(a.chain.starts_with("SKIFF-MASQ-"));
        assert_ne!(a.chain, b.chain);
        assert!(
            a.jump()
                .contains(&"skiff: masquerade for CNI network \"skiff\"".to_string())
        );
    }
}
