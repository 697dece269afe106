//! The WebSocket channel framing of the Kubernetes streaming protocols
//! (`k8s.io/apimachinery/pkg/util/httpstream/wsstream`): each message starts with its
//! channel number (binary protocols) or the ASCII digit of it followed by the payload in
//! base64 (`base64.channel.k8s.io` protocols, text messages).

use base64::Engine as _;

/// How a channel protocol encodes its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Binary messages: `[channel, payload...]`.
    Binary,
    /// Text messages: `'0' + channel`, then the payload in standard base64.
    Base64,
}

/// A message payload for `channel` carrying `data`: bytes for a binary message, or (with
/// [`Encoding::Base64`]) the UTF-8 text of a text message.
pub fn encode(channel: u8, data: &[u8], encoding: Encoding) -> Vec<u8> {
    match encoding {
        Encoding::Binary => {
            let mut message = Vec::with_capacity(data.len() + 1);
            message.push(channel);
            message.extend_from_slice(data);
            message
        }
        Encoding::Base64 => {
            let mut message = vec![b'0'.wrapping_add(channel)];
            message.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(data)
                    .as_bytes(),
            );
            message
        }
    }
}

/// The channel and payload of a received message; `None` for an empty or undecodable one.
pub fn decode(message: &[u8], encoding: Encoding) -> Option<(u8, Vec<u8>)> {
    let (&first, rest) = message.split_first()?;
    match encoding {
        Encoding::Binary => Some((first, rest.to_vec())),
        Encoding::Base64 => {
            let data = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .ok()?;
            Some((first.wrapping_sub(b'0'), data))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_in_both_encodings() {
        assert_eq!(encode(1, b"hi", Encoding::Binary), b"\x01hi");
        assert_eq!(encode(1, b"hi", Encoding::Base64), b"1aGk=");
        for encoding in [Encoding::Binary, Encoding::Base64] {
            let message = encode(3, b"\0\xffdata", encoding);
            assert_eq!(
                decode(&message, encoding),
                Some((3, b"\0\xffdata".to_vec()))
            );
        }
        assert_eq!(decode(b"", Encoding::Binary), None);
        assert_eq!(decode(b"1!!", Encoding::Base64), None);
    }
}
