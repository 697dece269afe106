//! Chain IDs: the identity of a stack of layers (OCI image spec, `config.md`, "Layer ChainID").

use sha2::{Digest, Sha256};

/// Computes the chain ID of every prefix of `diff_ids` (bottom layer first).
///
/// `ChainID(L0) = DiffID(L0)`, `ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln))`,
/// each written as `sha256:<hex>`. The result has one entry per diff ID, bottom first, so
/// the last entry identifies the whole image root filesystem.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut chain = Vec::with_capacity(diff_ids.len());
    for diff_id in diff_ids {
        let next = match chain.last() {
            None => diff_id.clone(),
            Some(parent) => {
                let digest = Sha256::digest(format!("{parent} {diff_id}").as_bytes());
                format!("sha256:{}", hex::encode(digest))
            }
        };
        chain.push(next);
    }
    chain
}

/// The hex part of a `sha256:<64 lowercase hex>` digest, or `None` if `digest` is not one.
pub(crate) fn sha256_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    valid.then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_chain_id_is_the_diff_id_and_later_ones_hash_the_parent() {
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        let chain = chain_ids(&[a.clone(), b.clone()]);
        assert_eq!(chain[0], a);
        let expected = Sha256::digest(format!("{a} {b}").as_bytes());
        assert_eq!(chain[1], format!("sha256:{}", hex::encode(expected)));
        assert!(chain_ids(&[]).is_empty());
    }

    #[test]
    fn only_sha256_digests_have_a_hex_part() {
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(sha256_hex(&format!("sha256:{hex}")), Some(hex.as_str()));
        assert_eq!(sha256_hex(&format!("sha256:{}", hex.to_uppercase())), None);
        assert_eq!(sha256_hex("sha256:../../etc"), None);
        assert_eq!(sha256_hex(&format!("sha512:{hex}")), None);
    }

    #[test]
    fn matches_a_known_value() {
        // echo -n "sha256:<64 a> sha256:<64 b>" | sha256sum
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' '{a} {b}' | sha256sum"))
            .output()
            .expect("sha256sum runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let hex = text.split_whitespace().next().unwrap_or_default();
        assert_eq!(chain_ids(&[a, b])[1], format!("sha256:{hex}"));
    }
}
