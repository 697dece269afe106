//! Object IDs: 64 hex characters from the kernel's random source, like containerd's.

use std::io::Read as _;

/// Returns a fresh random ID (32 random bytes, hex encoded).
pub fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Nanoseconds since the Unix epoch, the unit of every CRI timestamp.
pub fn now_nanos() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
}
