//! The opaque `continue` token of paginated lists, as upstream encodes it
//! (`storage.EncodeContinue`): base64 (URL alphabet, no padding) of
//! `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<key after the prefix>\u0000"}`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::storage::Revision;

const VERSION: &str = "meta.k8s.io/v1";

#[derive(Serialize, Deserialize)]
struct Token {
    v: String,
    rv: Revision,
    start: String,
}

/// The revision of a token that continues at the latest revision, as upstream's tokens
/// handed out with a 410 for an expired one (`rv: -1`).
pub const LATEST: Revision = -1;

/// Where the next page starts: the list revision and the last key returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    /// The revision to read the next page at, or [`LATEST`].
    pub revision: Revision,
    /// The full key of the last item returned; the next page starts after it.
    pub last_key: String,
}

impl Continue {
    /// The token for `prefix`'s list.
    pub fn encode(&self, prefix: &str) -> String {
        let start = self.last_key.strip_prefix(prefix).unwrap_or(&self.last_key);
        let token = Token {
            v: VERSION.to_owned(),
            rv: self.revision,
            start: format!("{start}\u{0}"),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
    }

    /// Reads a token of `prefix`'s list. Errors: 400 `continue key is not valid: ...`.
    pub fn decode(token: &str, prefix: &str) -> Result<Continue, ApiError> {
        let invalid =
            |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid("incorrect encoding"))?;
        let token: Token =
            serde_json::from_slice(&bytes).map_err(|_| invalid("incorrect encoding"))?;
        if token.v != VERSION {
            return Err(invalid(&format!(
                "server does not recognize this encoded key version {:?}",
                token.v
            )));
        }
        if token.rv == 0 || token.rv < LATEST {
            return Err(invalid(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        let start = token.start.trim_end_matches('\u{0}');
        if start.is_empty() || start.contains("..") || start.starts_with('/') {
            return Err(invalid("incorrect encoded start key"));
        }
        Ok(Continue {
            revision: token.rv,
            last_key: format!("{prefix}{start}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let prefix = "/registry/configmaps/default/";
        let token = Continue {
            revision: 42,
            last_key: format!("{prefix}b"),
        };
        let text = token.encode(prefix);
        assert_eq!(Continue::decode(&text, prefix).unwrap(), token);
        assert_eq!(Continue::decode("!!", prefix).unwrap_err().code, 400);
        let other = URL_SAFE_NO_PAD.encode(br#"{"v":"x","rv":1,"start":"a"}"#);
        assert_eq!(Continue::decode(&other, prefix).unwrap_err().code, 400);
        // rv -1 (continue at the latest revision) is valid; 0 and below -1 are not.
        let latest = Continue {
            revision: LATEST,
            last_key: format!("{prefix}b"),
        };
        assert_eq!(
            Continue::decode(&latest.encode(prefix), prefix).unwrap(),
            latest
        );
        for rv in [0, -2] {
            let token = Continue {
                revision: rv,
                last_key: format!("{prefix}b"),
            };
            assert_eq!(
                Continue::decode(&token.encode(prefix), prefix)
                    .unwrap_err()
                    .code,
                400
            );
        }
    }
}
