//! Service-account tokens: ES256 JWTs as upstream's `pkg/serviceaccount` issues them
//! (`claims.go`): `iss`, `sub` = `system:serviceaccount:<ns>:<name>`, `aud`, `exp`, `iat`,
//! `nbf`, `jti` and the private `kubernetes.io` claim naming the namespace, the
//! ServiceAccount (name, uid) and the bound object (pod or secret) if any. The header's
//! `kid` is upstream's key ID: the unpadded base64url SHA-256 of the public key's DER
//! (SubjectPublicKeyInfo), so `/openid/v1/jwks` can publish the key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The issuer Skiff's tokens carry (upstream `--service-account-issuer`, kubeadm's value).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A name and uid, as the `kubernetes.io` claim refers to objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ObjectRef {
    pub name: String,
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct KubernetesClaims {
    pub namespace: String,
    pub serviceaccount: ObjectRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
}

/// A token's claims. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    #[serde(deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    #[serde(default)]
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// JWT's `aud` is a string or a list of strings.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// What a token is issued for (the TokenRequest's fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    pub namespace: String,
    pub service_account: ObjectRef,
    pub pod: Option<ObjectRef>,
    pub secret: Option<ObjectRef>,
    /// Empty: the issuer (the API server's own audience).
    pub audiences: Vec<String>,
    /// Validity in seconds.
    pub expiration_seconds: i64,
}

/// Why a token was refused (logged, never shown: the client only sees 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("malformed token")]
    Malformed,
    #[error("token signed by another key or algorithm")]
    BadSignature,
    #[error("token issued by {0:?}")]
    WrongIssuer(String),
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet")]
    NotYetValid,
    #[error("token audiences {0:?} do not include the API server's")]
    WrongAudience(Vec<String>),
}

/// Signs and verifies service-account tokens with `sa.key` (ECDSA P-256).
pub struct TokenIssuer {
    issuer: String,
    key: EcdsaKeyPair,
    rng: SystemRandom,
    key_id: String,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("issuer", &self.issuer)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// Allowed clock skew when checking `nbf` and `exp` (upstream: 60 s leeway).
const LEEWAY_SECONDS: i64 = 60;

impl TokenIssuer {
    /// A signer for `issuer` from a PKCS#8 PEM ECDSA P-256 key. Errors: another key type.
    pub fn new(issuer: &str, key_pem: &str) -> anyhow::Result<Self> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| anyhow::anyhow!("reading the service-account key: {e}"))?;
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            der.secret_pkcs8_der(),
            &rng,
        )
        .map_err(|e| anyhow::anyhow!("the service-account key is not ECDSA P-256: {e}"))?;
        let key_id = B64.encode(Sha256::digest(spki_p256(key.public_key().as_ref())));
        Ok(TokenIssuer {
            issuer: issuer.to_owned(),
            key,
            rng,
            key_id,
        })
    }

    /// The `iss` of issued tokens.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// A signed token for `spec`, issued at `now` (Unix seconds). Returns the token and
    /// its expiry (Unix seconds).
    pub fn issue(&self, spec: &TokenSpec, now: i64) -> anyhow::Result<(String, i64)> {
        let audiences = if spec.audiences.is_empty() {
            vec![self.issuer.clone()]
        } else {
            spec.audiences.clone()
        };
        let exp = now + spec.expiration_seconds;
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: format!(
                "system:serviceaccount:{}:{}",
                spec.namespace, spec.service_account.name
            ),
            aud: audiences,
            exp,
            iat: now,
            nbf: now,
            jti: random_id(&self.rng)?,
            kubernetes: KubernetesClaims {
                namespace: spec.namespace.clone(),
                serviceaccount: spec.service_account.clone(),
                pod: spec.pod.clone(),
                secret: spec.secret.clone(),
            },
        };
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let signing_input = format!(
            "{}.{}",
            B64.encode(serde_json::to_vec(&header)?),
            B64.encode(serde_json::to_vec(&claims)?)
        );
        let signature = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|_| anyhow::anyhow!("signing a service-account token"))?;
        Ok((
            format!("{signing_input}.{}", B64.encode(signature.as_ref())),
            exp,
        ))
    }

    /// The claims of `token` if its signature is this issuer's, `iss` is the issuer, it is
    /// valid at `now` (with a minute of leeway) and its audiences include the issuer.
    /// Whether the ServiceAccount (and bound object) still exists is the caller's check.
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let decode = |s: &str| B64.decode(s).map_err(|_| TokenError::Malformed);
        let header: Value =
            serde_json::from_slice(&decode(header)?).map_err(|_| TokenError::Malformed)?;
        if header["alg"] != "ES256" {
            return Err(TokenError::BadSignature);
        }
        let signing_input = &token[..token.len() - signature.len() - 1];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signing_input.as_bytes(), &decode(signature)?)
            .map_err(|_| TokenError::BadSignature)?;
        let claims: Claims =
            serde_json::from_slice(&decode(payload)?).map_err(|_| TokenError::Malformed)?;
        if claims.iss != self.issuer {
            return Err(TokenError::WrongIssuer(claims.iss));
        }
        if now > claims.exp + LEEWAY_SECONDS {
            return Err(TokenError::Expired);
        }
        if now + LEEWAY_SECONDS < claims.nbf {
            return Err(TokenError::NotYetValid);
        }
        if !claims.aud.contains(&self.issuer) {
            return Err(TokenError::WrongAudience(claims.aud));
        }
        Ok(claims)
    }

    /// The public key as a JSON Web Key Set (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Value {
        // An uncompressed P-256 point: 0x04 || x (32 bytes) || y (32 bytes).
        let point = self.key.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        json!({"keys": [{
            "use": "sig",
            "kty": "EC",
            "kid": self.key_id,
            "crv": "P-256",
            "alg": "ES256",
            "x": B64.encode(x),
            "y": B64.encode(y),
        }]})
    }

    /// The OpenID provider configuration (`/.well-known/openid-configuration`), as
    /// upstream's `serviceaccount.NewOpenIDMetadata`.
    pub fn openid_configuration(&self) -> Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/openid/v1/jwks", self.issuer),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }
}

/// The DER SubjectPublicKeyInfo of an uncompressed P-256 point (the fixed prefix of
/// id-ecPublicKey with prime256v1, then the 65-byte point as a BIT STRING).
fn spki_p256(point: &[u8]) -> Vec<u8> {
    const PREFIX: [u8; 26] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ];
    let mut der = PREFIX.to_vec();
    der.extend_from_slice(point);
    der
}

/// A random UUID (v4) for `jti`.
fn random_id(rng: &SystemRandom) -> anyhow::Result<String> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    rng.fill(&mut b)
        .map_err(|_| anyhow::anyhow!("no randomness"))?;
    Ok(skiff_api::uuid::format_v4(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer() -> TokenIssuer {
        let key = rcgen::KeyPair::generate().unwrap();
        TokenIssuer::new(DEFAULT_ISSUER, &key.serialize_pem()).unwrap()
    }

    fn spec() -> TokenSpec {
        TokenSpec {
            namespace: "ns1".into(),
            service_account: ObjectRef {
                name: "builder".into(),
                uid: "u-1".into(),
            },
            pod: None,
            secret: None,
            audiences: Vec::new(),
            expiration_seconds: 3600,
        }
    }

    #[test]
    fn signs_and_verifies() {
        let iss = issuer();
        let (token, exp) = iss.issue(&spec(), 1_000_000).unwrap();
        assert_eq!(exp, 1_003_600);
        let claims = iss.verify(&token, 1_000_010).unwrap();
        assert_eq!(claims.sub, "system:serviceaccount:ns1:builder");
        assert_eq!(claims.aud, vec![DEFAULT_ISSUER.to_owned()]);
        assert_eq!(claims.kubernetes.serviceaccount.uid, "u-1");
        assert_eq!(claims.nbf, 1_000_000);
    }

    #[test]
    fn matches_the_published_key_id_and_spki() {
        let key = rcgen::KeyPair::generate().unwrap();
        let iss = TokenIssuer::new(DEFAULT_ISSUER, &key.serialize_pem()).unwrap();
        use rcgen::PublicKeyData;
        assert_eq!(
            spki_p256(iss.key.public_key().as_ref()),
            key.subject_public_key_info()
        );
        assert_eq!(iss.jwks()["keys"][0]["kid"], iss.key_id);
        let (token, _) = iss.issue(&spec(), 1).unwrap();
        let header: Value =
            serde_json::from_slice(&B64.decode(token.split('.').next().unwrap()).unwrap()).unwrap();
        assert_eq!(header["kid"], iss.key_id);
    }

    #[test]
    fn rejects_expired_foreign_and_other_audience() {
        let iss = issuer();
        let (token, _) = iss.issue(&spec(), 1_000_000).unwrap();
        assert_eq!(iss.verify(&token, 1_003_600 + 61), Err(TokenError::Expired));
        assert_eq!(
            iss.verify(&token, 1_000_000 - 61),
            Err(TokenError::NotYetValid)
        );
        assert_eq!(
            issuer().verify(&token, 1_000_000),
            Err(TokenError::BadSignature)
        );
        let other = TokenSpec {
            audiences: vec!["vault".into()],
            ..spec()
        };
        let (token, _) = iss.issue(&other, 1_000_000).unwrap();
        assert_eq!(
            iss.verify(&token, 1_000_000),
            Err(TokenError::WrongAudience(vec!["vault".into()]))
        );
    }

    #[test]
    fn rejects_tampered_and_malformed() {
        let iss = issuer();
        let (token, _) = iss.issue(&spec(), 1_000_000).unwrap();
        let mut parts: Vec<&str> = token.split('.').collect();
        let mut claims: Value = serde_json::from_slice(&B64.decode(parts[1]).unwrap()).unwrap();
        claims["sub"] = "system:serviceaccount:kube-system:admin".into();
        let forged = B64.encode(serde_json::to_vec(&claims).unwrap());
        parts[1] = &forged;
        assert_eq!(
            iss.verify(&parts.join("."), 1_000_000),
            Err(TokenError::BadSignature)
        );
        for bad in ["", "a.b", "a.b.c.d", "!!.!!.!!"] {
            assert_eq!(iss.verify(bad, 1), Err(TokenError::Malformed), "{bad}");
        }
    }
}
