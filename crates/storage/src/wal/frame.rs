//! Record framing: `[u32 len LE][u32 crc LE][payload]`.
//!
//! The checksum is crc32c over the four length bytes followed by the
//! payload. Covering the length matters for one case: an empty payload.
//! crc32c of nothing is 0, so a checksum of the payload alone would make an
//! empty record's header all zeros, indistinguishable from the zeroed space
//! that marks the end of data. With the length folded in, an all-zero header
//! is never a valid record and always means "end of data".

/// Bytes of the `len` + `crc` header in front of every payload.
pub const HEADER_LEN: u64 = 8;

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub crc: u32,
}

impl Header {
    /// Zeroed space: nothing was ever written here.
    pub fn is_end_marker(&self) -> bool {
        self.len == 0 && self.crc == 0
    }

    pub fn decode(bytes: [u8; HEADER_LEN as usize]) -> Header {
        let [l0, l1, l2, l3, c0, c1, c2, c3] = bytes;
        Header { len: u32::from_le_bytes([l0, l1, l2, l3]), crc: u32::from_le_bytes([c0, c1, c2, c3]) }
    }

    /// Reads the header at `offset` of `buf`, or `None` if fewer than
    /// [`HEADER_LEN`] bytes remain.
    pub fn read_from(buf: &[u8], offset: u64) -> Option<Header> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(HEADER_LEN as usize)?;
        let bytes: [u8; HEADER_LEN as usize] = buf.get(start..end)?.try_into().ok()?;
        Some(Header::decode(bytes))
    }
}

/// The checksum stored in a record header.
pub fn record_crc(payload: &[u8]) -> u32 {
    let len = payload.len() as u32;
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload)
}

/// Bytes a payload of `len` occupies on disk.
pub fn framed_len(len: usize) -> u64 {
    HEADER_LEN + len as u64
}

/// Appends the framed form of `payload` to `out`.
///
/// The caller has checked that the length fits in a `u32`.
/// (The writer writes the header and the payload from where they lie.)
#[cfg(test)]
pub fn encode_into(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&header(payload));
    out.extend_from_slice(payload);
}

/// The header that goes in front of `payload`.
///
/// The caller has checked that the length fits in a `u32`.
pub fn header(payload: &[u8]) -> [u8; HEADER_LEN as usize] {
    let len = (payload.len() as u32).to_le_bytes();
    let crc = record_crc(payload).to_le_bytes();
    [len[0], len[1], len[2], len[3], crc[0], crc[1], crc[2], crc[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_record_header_is_not_an_end_marker() {
        let mut buf = Vec::new();
        encode_into(&mut buf, b"");
        let header = Header::read_from(&buf, 0).expect("header present");
        assert_eq!(header.len, 0);
        assert!(!header.is_end_marker());
    }

    #[test]
    fn header_round_trips() {
        let mut buf = Vec::new();
        encode_into(&mut buf, b"hello");
        assert_eq!(buf.len() as u64, framed_len(5));
        let header = Header::read_from(&buf, 0).expect("header present");
        assert_eq!(header.len, 5);
        assert_eq!(header.crc, record_crc(b"hello"));
        assert_eq!(Header::read_from(&buf, buf.len() as u64 - 7), None);
    }
}
