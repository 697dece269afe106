//! SPDY/3 header block compression: one zlib stream per direction and connection, primed
//! with the dictionary of the SPDY/3 specification (draft-mbelshe-httpbis-spdy-00,
//! section 2.6.10.1), each header block ended with a sync flush.

use std::sync::LazyLock;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// Header names of the dictionary, each stored with a 4-byte big-endian length prefix.
const DICTIONARY_WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The dictionary's tail, stored as is after the prefixed words.
const DICTIONARY_TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417",
    "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently",
    "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error",
    "501 Not Implemented503 Service Unavailable",
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,",
    "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

/// The SPDY/3 header compression dictionary (1423 bytes).
pub static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut dictionary = Vec::with_capacity(1423);
    for word in DICTIONARY_WORDS {
        dictionary.extend_from_slice(&(word.len() as u32).to_be_bytes());
        dictionary.extend_from_slice(word.as_bytes());
    }
    dictionary.extend_from_slice(DICTIONARY_TAIL.as_bytes());
    dictionary
});

/// Compresses the header blocks sent on one connection.
pub struct Compressor(Compress);

impl Compressor {
    /// A fresh zlib stream with the SPDY/3 dictionary.
    pub fn new() -> Self {
        let mut compress = Compress::new(Compression::default(), true);
        // Cannot fail on a fresh stream.
        let _ = compress.set_dictionary(&DICTIONARY);
        Self(compress)
    }

    /// Compresses one header block; the output ends on a byte boundary (sync flush), so the
    /// peer can decompress it without waiting for more.
    pub fn compress(&mut self, block: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(block.len() / 2 + 64);
        let mut input = block;
        loop {
            out.reserve(256);
            let before = self.0.total_in();
            let status = self
                .0
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(std::io::Error::other)?;
            input = &input[(self.0.total_in() - before) as usize..];
            // Done when all input is consumed and zlib left spare room (flush complete).
            if input.is_empty() && out.len() < out.capacity() || status == Status::StreamEnd {
                return Ok(out);
            }
        }
    }
}

impl Default for Compressor {
    fn default() -> Self {
        Self::new()
    }
}

/// Decompresses the header blocks received on one connection.
pub struct Decompressor(Decompress);

impl Decompressor {
    /// A fresh zlib stream; the dictionary is supplied when the stream asks for it.
    pub fn new() -> Self {
        Self(Decompress::new(true))
    }

    /// Decompresses one header block (at most `limit` bytes of output).
    pub fn decompress(&mut self, block: &[u8], limit: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(block.len() * 4 + 64);
        let mut input = block;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= limit {
                    return Err(std::io::Error::other("header block too large"));
                }
                out.reserve(out.len());
            }
            let before = self.0.total_in();
            let result = self
                .0
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            input = &input[(self.0.total_in() - before) as usize..];
            match result {
                Ok(Status::StreamEnd) => return Ok(out),
                Ok(_) if input.is_empty() && out.len() < out.capacity() => return Ok(out),
                Ok(Status::BufError) if input.is_empty() => return Ok(out),
                Ok(_) => {}
                Err(err) if err.needs_dictionary().is_some() => {
                    self.0
                        .set_dictionary(&DICTIONARY)
                        .map_err(std::io::Error::other)?;
                }
                Err(err) => return Err(std::io::Error::other(err)),
            }
        }
    }
}

impl Default for Decompressor {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_is_the_spdy3_one() {
        assert_eq!(DICTIONARY.len(), 1423);
        assert_eq!(&DICTIONARY[..11], b"\0\0\0\x07options");
        assert!(DICTIONARY.ends_with(b",enq=0."));
    }

    #[test]
    fn blocks_round_trip_through_one_stream_per_direction() {
        let (mut compressor, mut decompressor) = (Compressor::new(), Decompressor::new());
        for block in [
            b"\0\0\0\x01\0\0\0\x0astreamtype\0\0\0\x05error".to_vec(),
            vec![7u8; 100_000],
            b"".to_vec(),
            b"content-type".to_vec(),
        ] {
            let compressed = compressor.compress(&block).unwrap();
            assert_eq!(
                decompressor.decompress(&compressed, 1 << 20).unwrap(),
                block
            );
        }
    }

    #[test]
    fn the_first_block_needs_the_dictionary() {
        let compressed = Compressor::new().compress(b"accept-encoding").unwrap();
        // zlib header with FDICT set, then the dictionary's Adler-32.
        assert_eq!(compressed[1] & 0x20, 0x20);
        let adler =
            u32::from_be_bytes([compressed[2], compressed[3], compressed[4], compressed[5]]);
        let mut fresh = Decompress::new(true);
        let mut out = Vec::with_capacity(64);
        let err = fresh
            .decompress_vec(&compressed, &mut out, FlushDecompress::Sync)
            .unwrap_err();
        assert_eq!(err.needs_dictionary(), Some(adler));
    }

    #[test]
    fn oversized_blocks_are_refused() {
        let compressed = Compressor::new().compress(&vec![0u8; 10_000]).unwrap();
        assert!(Decompressor::new().decompress(&compressed, 1000).is_err());
    }
}
