//! The protobuf wire format: varints, keys, length-delimited and fixed-width values.

use super::Error;

/// Wire type 0: a varint.
pub const VARINT: u8 = 0;
/// Wire type 1: eight little-endian bytes.
pub const FIXED64: u8 = 1;
/// Wire type 2: a varint length, then that many bytes.
pub const LEN: u8 = 2;
/// Wire type 5: four little-endian bytes.
pub const FIXED32: u8 = 5;

/// One field as read from the wire: the varint value or the payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed-width values (wire types 1 and 5), carried but not interpreted.
    Fixed,
}

/// Reads the fields of one message.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The next field (tag and value), `None` at the end. Errors: `unexpected EOF` for a
    /// truncated message, and upstream's words for a bad key or wire type.
    pub fn field(&mut self) -> Result<Option<(u32, Value<'a>)>, Error> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3).map_err(|_| Error::new("proto: illegal tag"))?;
        if tag == 0 {
            return Err(Error::new("proto: illegal tag 0 (wire type 0)"));
        }
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.varint()?),
            FIXED64 => {
                self.take(8)?;
                Value::Fixed
            }
            LEN => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| Error::new("proto: negative length found during unmarshaling"))?;
                Value::Bytes(self.take(len)?)
            }
            FIXED32 => {
                self.take(4)?;
                Value::Fixed
            }
            other => {
                return Err(Error::new(format!(
                    "proto: illegal wireType {other} for field {tag}"
                )));
            }
        };
        Ok(Some((tag, value)))
    }

    /// Reads one varint. Errors: `unexpected EOF`, `proto: integer overflow`.
    pub fn varint(&mut self) -> Result<u64, Error> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| Error::new("unexpected EOF"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(Error::new("proto: integer overflow"))
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], Error> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| Error::new("unexpected EOF"))?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }
}

/// Appends `value` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends the key of field `tag` with `wire_type`.
pub fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire_type));
}

/// Appends field `tag` as a varint (negative numbers as ten-byte two's complement, as
/// protobuf's int32 and int64).
pub fn put_int(out: &mut Vec<u8>, tag: u32, value: i64) {
    put_key(out, tag, VARINT);
    put_varint(out, value as u64);
}

/// Appends field `tag` as length-delimited `bytes`.
pub fn put_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_key(out, tag, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for value in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(Reader::new(&out).varint().unwrap(), value);
        }
        let mut out = Vec::new();
        put_int(&mut out, 1, -1);
        assert_eq!(out.len(), 11);
        let (tag, value) = Reader::new(&out).field().unwrap().unwrap();
        assert_eq!((tag, value), (1, Value::Varint(u64::MAX)));
    }

    #[test]
    fn truncated_and_malformed_input_is_an_error() {
        assert_eq!(
            Reader::new(&[0x80]).varint().unwrap_err().0,
            "unexpected EOF"
        );
        assert_eq!(
            Reader::new(&[0x0a, 0x05, b'a']).field().unwrap_err().0,
            "unexpected EOF"
        );
        assert!(Reader::new(&[0x0b]).field().is_err(), "group wire type");
        assert!(Reader::new(&[0x00]).field().is_err(), "tag 0");
        assert_eq!(
            Reader::new(&[0xff; 11]).varint().unwrap_err().0,
            "proto: integer overflow"
        );
        let mut reader = Reader::new(&[0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4]);
        assert_eq!(reader.field().unwrap(), Some((1, Value::Fixed)));
        assert_eq!(reader.field().unwrap(), Some((2, Value::Fixed)));
        assert_eq!(reader.field().unwrap(), None);
        assert!(reader.is_empty());
    }
}
