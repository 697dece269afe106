//! A Docker registry token server (the "token" auth of CNCF distribution): clients with the
//! right basic credentials get a JWT for the scopes they ask for, signed (RS256) with a key
//! whose self-signed certificate is the registry's `rootcertbundle`. Keys and signatures
//! come from the `openssl` command.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::json;

const OPENSSL: &str = "/usr/bin/openssl";
/// The `iss` of the tokens, as the registry expects it.
pub(crate) const ISSUER: &str = "skiff-testkit";
/// The `service` (token `aud`) of the registry.
pub(crate) const SERVICE: &str = "skiff-test-registry";
const TOKEN_LIFETIME: Duration = Duration::from_secs(300);

/// A running token server on `127.0.0.1:<free port>`; stops on drop.
pub(crate) struct TokenServer {
    addr: String,
    signer: Arc<Signer>,
    stop: Arc<AtomicBool>,
}

/// What issues tokens: the signing key, its certificate and the accepted credentials.
struct Signer {
    key: PathBuf,
    /// The certificate, DER, standard base64 (the JWS `x5c` chain of one).
    cert_der: String,
    user: String,
    password: String,
}

impl TokenServer {
    /// Generates a key and certificate under `dir` (`token.key`, `token.crt`) and starts
    /// serving `GET /token` for `user` / `password`.
    pub(crate) fn start(dir: &Path, user: &str, password: &str) -> anyhow::Result<TokenServer> {
        let key = dir.join("token.key");
        let cert = dir.join("token.crt");
        let (key_arg, cert_arg) = (path_arg(&key), path_arg(&cert));
        openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=skiff-testkit-token",
                "-keyout",
                &key_arg,
                "-out",
                &cert_arg,
            ],
            None,
        )?;
        let der = openssl(&["x509", "-outform", "DER", "-in", &cert_arg], None)?;
        let signer = Arc::new(Signer {
            key,
            cert_der: STANDARD.encode(der),
            user: user.to_string(),
            password: password.to_string(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").context("token server listen")?;
        let addr = listener.local_addr()?.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let signer = signer.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let signer = signer.clone();
                        std::thread::spawn(move || {
                            let _ = serve(stream, &signer);
                        });
                    }
                }
            });
        }
        Ok(TokenServer { addr, signer, stop })
    }

    /// The token endpoint, the `realm` of the registry's challenge.
    pub(crate) fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// A token granting `actions` on `repository`, as the server would issue it.
    pub(crate) fn mint(&self, repository: &str, actions: &[&str]) -> anyhow::Result<String> {
        let scope = format!("repository:{repository}:{}", actions.join(","));
        self.signer.token(&[scope])
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Answers one request: `GET /token?scope=..` with the right basic credentials (or none,
/// for an anonymous token without access) gets a token; wrong credentials 401; anything
/// else 404 (so containerd falls back from its OAuth POST to GET).
fn serve(mut stream: TcpStream, signer: &Signer) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorization = Some(value.trim().to_string());
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, body) = if method != "GET" || path != "/token" {
        ("404 Not Found", json!({"errors": [{"code": "NOT_FOUND"}]}))
    } else {
        match credentials(authorization.as_deref()) {
            Some((user, password)) if user != signer.user || password != signer.password => (
                "401 Unauthorized",
                json!({"errors": [{"code": "UNAUTHORIZED", "message": "wrong credentials"}]}),
            ),
            found => {
                let scopes: Vec<String> = if found.is_some() {
                    query
                        .split('&')
                        .filter_map(|pair| pair.strip_prefix("scope="))
                        .map(percent_decode)
                        .collect()
                } else {
                    Vec::new()
                };
                let token = signer.token(&scopes)?;
                (
                    "200 OK",
                    json!({"token": token, "access_token": token, "expires_in": TOKEN_LIFETIME.as_secs()}),
                )
            }
        }
    };
    let body = body.to_string();
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    Ok(())
}

impl Signer {
    /// A JWT (RS256, `x5c` = the certificate) granting the `repository:<name>:<actions>`
    /// scopes.
    fn token(&self, scopes: &[String]) -> anyhow::Result<String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let access: Vec<_> = scopes
            .iter()
            .filter_map(|scope| {
                let mut parts = scope.splitn(3, ':');
                let (kind, name, actions) = (parts.next()?, parts.next()?, parts.next()?);
                Some(json!({"type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()}))
            })
            .collect();
        let header = json!({"typ": "JWT", "alg": "RS256", "x5c": [self.cert_der]});
        let claims = json!({
            "iss": ISSUER, "sub": self.user, "aud": SERVICE,
            "iat": now, "nbf": now - 10, "exp": now + TOKEN_LIFETIME.as_secs(),
            "jti": format!("{now}-{}", scopes.len()),
            "access": access,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let key = path_arg(&self.key);
        let signature = openssl(
            &["dgst", "-sha256", "-sign", &key],
            Some(signing_input.as_bytes()),
        )?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

/// User and password of a `Basic` authorization header.
fn credentials(authorization: Option<&str>) -> Option<(String, String)> {
    let encoded = authorization?.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// `%XX` escapes (and `+`) of a query value decoded.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, byte) => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs `openssl args`, feeding `input`; returns its stdout.
fn openssl(args: &[&str], input: Option<&[u8]>) -> anyhow::Result<Vec<u8>> {
    let mut child = Command::new(OPENSSL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {OPENSSL}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.unwrap_or_default())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "openssl {} failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_credentials_are_decoded() {
        assert_eq!(
            percent_decode("repository%3Acri%2Fprivate%3Apull%2Cpush"),
            "repository:cri/private:pull,push"
        );
        assert_eq!(percent_decode("a+b%2"), "a b%2");
        let header = format!("Basic {}", STANDARD.encode("user:pa:ss"));
        assert_eq!(
            credentials(Some(&header)),
            Some(("user".to_string(), "pa:ss".to_string()))
        );
        assert_eq!(credentials(Some("Bearer x")), None);
        assert_eq!(credentials(None), None);
    }
}
