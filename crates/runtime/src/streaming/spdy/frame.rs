//! SPDY/3 frames (draft-mbelshe-httpbis-spdy-00 section 2.2 and 2.6, with the session flow
//! control window of SPDY/3.1) and their codec for `tokio_util::codec::{FramedRead,
//! FramedWrite}`. Header blocks go through [`super::zlib`].

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::zlib::{Compressor, Decompressor};

/// The SPDY version spoken (SPDY/3.1 uses version 3 frames).
pub const VERSION: u16 = 3;
/// `FLAG_FIN`: the sender's last frame on the stream (SYN_STREAM, SYN_REPLY, HEADERS, DATA).
pub const FLAG_FIN: u8 = 0x01;
/// `FLAG_UNIDIRECTIONAL` on SYN_STREAM: the recipient will not send on the stream.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// RST_STREAM status `PROTOCOL_ERROR`.
pub const RST_PROTOCOL_ERROR: u32 = 1;
/// RST_STREAM status `REFUSED_STREAM`.
pub const RST_REFUSED_STREAM: u32 = 3;
/// RST_STREAM status `CANCEL`.
pub const RST_CANCEL: u32 = 5;
/// Largest frame payload accepted (the 24-bit length field's limit).
pub const MAX_FRAME_LEN: usize = (1 << 24) - 1;
/// Largest decompressed header block accepted.
const MAX_HEADER_BLOCK: usize = 1 << 20;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// A header block: lower-case names with their values, in order (a name may repeat).
pub type Headers = Vec<(String, String)>;

/// The value of header `name` (case-insensitive), if present.
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// One SPDY/3 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens stream `stream_id` (odd from the client, even from the server).
    SynStream {
        stream_id: u32,
        associated_to: u32,
        priority: u8,
        flags: u8,
        headers: Headers,
    },
    /// Accepts a stream opened by the peer.
    SynReply {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    /// Aborts a stream with a status code (`RST_*`).
    RstStream { stream_id: u32, status: u32 },
    /// Session settings as `(flags, id, value)` entries.
    Settings {
        flags: u8,
        entries: Vec<(u8, u32, u32)>,
    },
    /// Liveness check; the recipient echoes it.
    Ping { id: u32 },
    /// The sender stops accepting streams above `last_good_stream_id`.
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    /// More headers for a stream.
    Headers {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    /// Grows the peer's send window of a stream (0: the session) by `delta` bytes.
    WindowUpdate { stream_id: u32, delta: u32 },
    /// Stream payload.
    Data {
        stream_id: u32,
        flags: u8,
        data: Bytes,
    },
}

/// Errors decoding frames: the session cannot go on after one.
fn invalid(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

/// Encodes frames, compressing header blocks with the connection's outgoing zlib stream.
#[derive(Default)]
pub struct FrameEncoder {
    compressor: Compressor,
}

impl Encoder<Frame> for FrameEncoder {
    type Error = std::io::Error;

    fn encode(&mut self, frame: Frame, out: &mut BytesMut) -> std::io::Result<()> {
        let mut payload = BytesMut::new();
        let (kind, flags) = match frame {
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if data.len() > MAX_FRAME_LEN {
                    return Err(invalid("data frame too large"));
                }
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u32(u32::from(flags) << 24 | data.len() as u32);
                out.put_slice(&data);
                return Ok(());
            }
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                flags,
                headers,
            } => {
                payload.put_u32(stream_id & 0x7fff_ffff);
                payload.put_u32(associated_to & 0x7fff_ffff);
                payload.put_u8((priority & 0x07) << 5);
                payload.put_u8(0);
                payload.put_slice(&self.compressor.compress(&header_block(&headers))?);
                (SYN_STREAM, flags)
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            } => {
                payload.put_u32(stream_id & 0x7fff_ffff);
                payload.put_slice(&self.compressor.compress(&header_block(&headers))?);
                (SYN_REPLY, flags)
            }
            Frame::Headers {
                stream_id,
                flags,
                headers,
            } => {
                payload.put_u32(stream_id & 0x7fff_ffff);
                payload.put_slice(&self.compressor.compress(&header_block(&headers))?);
                (HEADERS, flags)
            }
            Frame::RstStream { stream_id, status } => {
                payload.put_u32(stream_id & 0x7fff_ffff);
                payload.put_u32(status);
                (RST_STREAM, 0)
            }
            Frame::Settings { flags, entries } => {
                payload.put_u32(entries.len() as u32);
                for (entry_flags, id, value) in entries {
                    payload.put_u32(u32::from(entry_flags) << 24 | (id & 0x00ff_ffff));
                    payload.put_u32(value);
                }
                (SETTINGS, flags)
            }
            Frame::Ping { id } => {
                payload.put_u32(id);
                (PING, 0)
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                payload.put_u32(last_good_stream_id & 0x7fff_ffff);
                payload.put_u32(status);
                (GOAWAY, 0)
            }
            Frame::WindowUpdate { stream_id, delta } => {
                payload.put_u32(stream_id & 0x7fff_ffff);
                payload.put_u32(delta & 0x7fff_ffff);
                (WINDOW_UPDATE, 0)
            }
        };
        if payload.len() > MAX_FRAME_LEN {
            return Err(invalid("control frame too large"));
        }
        out.put_u16(0x8000 | VERSION);
        out.put_u16(kind);
        out.put_u32(u32::from(flags) << 24 | payload.len() as u32);
        out.put_slice(&payload);
        Ok(())
    }
}

/// Decodes frames, decompressing header blocks with the connection's incoming zlib stream.
/// Control frames of unknown types are skipped, as SPDY/3 asks.
#[derive(Default)]
pub struct FrameDecoder {
    decompressor: Decompressor,
}

impl Decoder for FrameDecoder {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        loop {
            if buf.len() < 8 {
                return Ok(None);
            }
            let length = (u32::from_be_bytes([0, buf[5], buf[6], buf[7]])) as usize;
            if buf.len() < 8 + length {
                buf.reserve(8 + length - buf.len());
                return Ok(None);
            }
            let head = buf.split_to(8);
            let mut payload = buf.split_to(length).freeze();
            let flags = head[4];
            if head[0] & 0x80 == 0 {
                let stream_id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
                return Ok(Some(Frame::Data {
                    stream_id,
                    flags,
                    data: payload,
                }));
            }
            let version = u16::from_be_bytes([head[0], head[1]]) & 0x7fff;
            if version != VERSION {
                return Err(invalid(format!("unsupported SPDY version {version}")));
            }
            let kind = u16::from_be_bytes([head[2], head[3]]);
            if let Some(frame) = self.control(kind, flags, &mut payload)? {
                return Ok(Some(frame));
            }
        }
    }
}

impl FrameDecoder {
    fn control(&mut self, kind: u16, flags: u8, p: &mut Bytes) -> std::io::Result<Option<Frame>> {
        let need = |p: &Bytes, n: usize| {
            if p.len() < n {
                Err(invalid(format!("control frame type {kind} too short")))
            } else {
                Ok(())
            }
        };
        let frame = match kind {
            SYN_STREAM => {
                need(p, 10)?;
                let stream_id = p.get_u32() & 0x7fff_ffff;
                let associated_to = p.get_u32() & 0x7fff_ffff;
                let priority = p.get_u8() >> 5;
                p.advance(1);
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority,
                    flags,
                    headers: self.headers(p)?,
                }
            }
            SYN_REPLY => {
                need(p, 4)?;
                let stream_id = p.get_u32() & 0x7fff_ffff;
                Frame::SynReply {
                    stream_id,
                    flags,
                    headers: self.headers(p)?,
                }
            }
            HEADERS => {
                need(p, 4)?;
                let stream_id = p.get_u32() & 0x7fff_ffff;
                Frame::Headers {
                    stream_id,
                    flags,
                    headers: self.headers(p)?,
                }
            }
            RST_STREAM => {
                need(p, 8)?;
                Frame::RstStream {
                    stream_id: p.get_u32() & 0x7fff_ffff,
                    status: p.get_u32(),
                }
            }
            SETTINGS => {
                need(p, 4)?;
                let count = p.get_u32() as usize;
                need(p, count.saturating_mul(8))?;
                let entries = (0..count)
                    .map(|_| {
                        let id = p.get_u32();
                        ((id >> 24) as u8, id & 0x00ff_ffff, p.get_u32())
                    })
                    .collect();
                Frame::Settings { flags, entries }
            }
            PING => {
                need(p, 4)?;
                Frame::Ping { id: p.get_u32() }
            }
            GOAWAY => {
                need(p, 4)?;
                let last_good_stream_id = p.get_u32() & 0x7fff_ffff;
                // SPDY/2-style GOAWAY frames carry no status.
                let status = if p.len() >= 4 { p.get_u32() } else { 0 };
                Frame::GoAway {
                    last_good_stream_id,
                    status,
                }
            }
            WINDOW_UPDATE => {
                need(p, 8)?;
                Frame::WindowUpdate {
                    stream_id: p.get_u32() & 0x7fff_ffff,
                    delta: p.get_u32() & 0x7fff_ffff,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(frame))
    }

    /// Decompresses and parses a header block. Values holding NUL-separated parts become
    /// one entry per part.
    fn headers(&mut self, compressed: &Bytes) -> std::io::Result<Headers> {
        let block = self.decompressor.decompress(compressed, MAX_HEADER_BLOCK)?;
        let mut p = Bytes::from(block);
        let count = read_u32(&mut p)? as usize;
        let mut headers = Headers::with_capacity(count.min(64));
        for _ in 0..count {
            let name = read_string(&mut p)?.to_ascii_lowercase();
            let value = read_string(&mut p)?;
            for part in value.split('\0') {
                headers.push((name.clone(), part.to_string()));
            }
        }
        Ok(headers)
    }
}

fn read_u32(p: &mut Bytes) -> std::io::Result<u32> {
    if p.len() < 4 {
        return Err(invalid("truncated header block"));
    }
    Ok(p.get_u32())
}

/// A length-prefixed UTF-8 string of a header block.
fn read_string(p: &mut Bytes) -> std::io::Result<String> {
    let len = read_u32(p)? as usize;
    if p.len() < len {
        return Err(invalid("truncated header block"));
    }
    String::from_utf8(p.split_to(len).to_vec()).map_err(|_| invalid("header block is not UTF-8"))
}

/// The uncompressed header block: pairs with repeated names joined by NUL.
fn header_block(headers: &Headers) -> Vec<u8> {
    let mut merged: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        match merged.iter_mut().find(|(key, _)| *key == name) {
            Some((_, joined)) => {
                joined.push('\0');
                joined.push_str(value);
            }
            None => merged.push((name, value.clone())),
        }
    }
    let mut block = Vec::new();
    block.put_u32(merged.len() as u32);
    for (name, value) in &merged {
        block.put_u32(name.len() as u32);
        block.put_slice(name.as_bytes());
        block.put_u32(value.len() as u32);
        block.put_slice(value.as_bytes());
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_frame_type_round_trips() {
        let frames = vec![
            Frame::SynStream {
                stream_id: 1,
                associated_to: 0,
                priority: 3,
                flags: FLAG_FIN,
                headers: headers(&[("streamtype", "error"), ("port", "80"), ("port", "81")]),
            },
            Frame::SynReply {
                stream_id: 1,
                flags: 0,
                headers: headers(&[]),
            },
            Frame::Headers {
                stream_id: 3,
                flags: FLAG_FIN,
                headers: headers(&[("a", "b")]),
            },
            Frame::RstStream {
                stream_id: 5,
                status: RST_CANCEL,
            },
            Frame::Settings {
                flags: 1,
                entries: vec![(0, 7, 65536), (1, 4, 100)],
            },
            Frame::Ping { id: 42 },
            Frame::GoAway {
                last_good_stream_id: 9,
                status: 0,
            },
            Frame::WindowUpdate {
                stream_id: 0,
                delta: 1 << 20,
            },
            Frame::Data {
                stream_id: 7,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hello"),
            },
        ];
        let (mut encoder, mut decoder) = (FrameEncoder::default(), FrameDecoder::default());
        let mut wire = BytesMut::new();
        for frame in &frames {
            encoder.encode(frame.clone(), &mut wire).unwrap();
        }
        // Feed the bytes one at a time: partial frames must wait for the rest.
        let mut buf = BytesMut::new();
        let mut decoded = Vec::new();
        for byte in wire {
            buf.put_u8(byte);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                decoded.push(frame);
            }
        }
        assert_eq!(decoded, frames);
    }

    #[test]
    fn data_frame_layout() {
        let mut wire = BytesMut::new();
        FrameEncoder::default()
            .encode(
                Frame::Data {
                    stream_id: 3,
                    flags: FLAG_FIN,
                    data: Bytes::from_static(b"ab"),
                },
                &mut wire,
            )
            .unwrap();
        assert_eq!(&wire[..], b"\0\0\0\x03\x01\0\0\x02ab");
    }

    #[test]
    fn unknown_control_frames_are_skipped_and_other_versions_refused() {
        let mut decoder = FrameDecoder::default();
        let mut buf = BytesMut::from(
            &b"\x80\x03\x00\x0a\0\0\0\x02xy\x80\x03\x00\x06\0\0\0\x04\0\0\0\x07"[..],
        );
        assert_eq!(
            decoder.decode(&mut buf).unwrap(),
            Some(Frame::Ping { id: 7 })
        );
        let mut buf = BytesMut::from(&b"\x80\x02\x00\x06\0\0\0\x04\0\0\0\x07"[..]);
        assert!(decoder.decode(&mut buf).is_err());
    }

    #[test]
    fn truncated_control_frames_are_errors() {
        let mut buf = BytesMut::from(&b"\x80\x03\x00\x03\0\0\0\x02\0\x01"[..]);
        assert!(FrameDecoder::default().decode(&mut buf).is_err());
    }
}
