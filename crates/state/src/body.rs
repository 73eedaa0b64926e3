//! The layout of one message body in the body segment files, and where the
//! next body goes. Both are decided here, deterministically, so that replaying
//! the log rewrites every body at the same place.
//!
//! Layout (little-endian): `[16 id][u64 created_ms][u8 flags][16 trace id if
//! flags&1][u16 txn len][txn][payload]`.

use serde::{Deserialize, Serialize};

/// Size of one body segment file. Part of the on-disk format: changing it
/// moves every later body.
pub const BODY_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

const FLAG_TRACE: u8 = 1;

/// A body the caller must write at `pos` before answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyWrite {
    pub pos: u64,
    pub bytes: Vec<u8>,
}

/// Where a body of `len` bytes goes if the next free byte is `next_free`:
/// bodies never straddle two segment files.
pub fn place(next_free: u64, len: u64) -> u64 {
    let used = next_free % BODY_SEGMENT_BYTES;
    if used + len <= BODY_SEGMENT_BYTES || used == 0 {
        next_free
    } else {
        next_free - used + BODY_SEGMENT_BYTES
    }
}

/// One decoded message body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyRecord {
    pub id: [u8; 16],
    pub created_ms: u64,
    pub trace_id: Option<[u8; 16]>,
    pub transaction_id: String,
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

impl BodyRecord {
    pub fn encoded_len(&self) -> usize {
        16 + 8 + 1 + if self.trace_id.is_some() { 16 } else { 0 } + 2 + self.transaction_id.len() + self.payload.len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.id);
        out.extend_from_slice(&self.created_ms.to_le_bytes());
        out.push(if self.trace_id.is_some() { FLAG_TRACE } else { 0 });
        if let Some(t) = &self.trace_id {
            out.extend_from_slice(t);
        }
        // Transaction ids are limited to u16::MAX bytes at the edge.
        let tl = self.transaction_id.len().min(u16::MAX as usize);
        out.extend_from_slice(&(tl as u16).to_le_bytes());
        out.extend_from_slice(&self.transaction_id.as_bytes()[..tl]);
        out.extend_from_slice(&self.payload);
        out
    }

    /// Decodes a body; `None` when the bytes are not a body (a short read or
    /// a torn file), which the caller reports as an internal error.
    pub fn decode(b: &[u8]) -> Option<BodyRecord> {
        let mut id = [0u8; 16];
        id.copy_from_slice(b.get(0..16)?);
        let created_ms = u64::from_le_bytes(b.get(16..24)?.try_into().ok()?);
        let flags = *b.get(24)?;
        // Unknown flag bits are not a body this version wrote.
        if flags & !FLAG_TRACE != 0 {
            return None;
        }
        let mut at = 25;
        let trace_id = if flags & FLAG_TRACE != 0 {
            let mut t = [0u8; 16];
            t.copy_from_slice(b.get(at..at + 16)?);
            at += 16;
            Some(t)
        } else {
            None
        };
        let tl = u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize;
        at += 2;
        let transaction_id = String::from_utf8(b.get(at..at + tl)?.to_vec()).ok()?;
        at += tl;
        Some(BodyRecord { id, created_ms, trace_id, transaction_id, payload: b.get(at..)?.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for trace in [None, Some([7u8; 16])] {
            let r = BodyRecord {
                id: [1; 16],
                created_ms: 42,
                trace_id: trace,
                transaction_id: "tx-1".into(),
                payload: b"{\"a\":1}".to_vec(),
            };
            let e = r.encode();
            assert_eq!(e.len(), r.encoded_len());
            assert_eq!(BodyRecord::decode(&e), Some(r));
        }
        assert_eq!(BodyRecord::decode(&[0u8; 10]), None);
    }

    #[test]
    fn bodies_never_straddle_segments() {
        assert_eq!(place(0, 10), 0);
        assert_eq!(place(BODY_SEGMENT_BYTES - 5, 5), BODY_SEGMENT_BYTES - 5);
        assert_eq!(place(BODY_SEGMENT_BYTES - 5, 6), BODY_SEGMENT_BYTES);
        assert_eq!(place(BODY_SEGMENT_BYTES, 6), BODY_SEGMENT_BYTES);
    }
}
