//! UUIDs as Kubernetes writes them (`metadata.uid`, token `jti`, lease holder
//! identities): RFC 4122 version 4, hyphenated lower-case hex. The randomness is the
//! caller's, so this module stays free of I/O.

/// The version 4 UUID made of `random` (16 random bytes): the version and variant bits
/// are set, the rest kept; `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`.
pub fn format_v4(mut random: [u8; 16]) -> String {
    random[6] = (random[6] & 0x0f) | 0x40;
    random[8] = (random[8] & 0x3f) | 0x80;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_and_variant_bits() {
        assert_eq!(
            format_v4([0xff; 16]),
            "ffffffff-ffff-4fff-bfff-ffffffffffff"
        );
        assert_eq!(format_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
    }
}
