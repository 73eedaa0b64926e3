//! The layout of one message body in the body segment files, and where the
//! next body goes. Both are decided here, deterministically, so that replaying
//! the log rewrites every body at the same place.
//!
//! Layout (little-endian): `[16 id][u64 created_ms][u8 flags][16 trace id if
//! flags&1][u16 txn len][txn][payload][u32 crc32c if flags&2]`. The checksum
//! covers every byte before it; every body this version writes carries one,
//! and a body written before checksums (flag 2 clear) still reads.

use serde::{Deserialize, Serialize};

/// Size of one body segment file. Part of the on-disk format: changing it
/// moves every later body.
pub const BODY_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

const FLAG_TRACE: u8 = 1;
const FLAG_CHECKSUM: u8 = 2;
const CHECKSUM_BYTES: usize = 4;

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

/// A body's bytes from its parts, borrowed: a push encodes its items'
/// bodies straight from the command, with no owned [`BodyRecord`] (and no
/// copy of the payload) between them.
pub fn encode_body(
    id: [u8; 16],
    created_ms: u64,
    trace_id: Option<[u8; 16]>,
    transaction_id: &str,
    payload: &[u8],
) -> Vec<u8> {
    // Transaction ids are limited to u16::MAX bytes at the edge.
    let tl = transaction_id.len().min(u16::MAX as usize);
    let mut out = Vec::with_capacity(body_len(trace_id.is_some(), tl, payload.len()));
    out.extend_from_slice(&id);
    out.extend_from_slice(&created_ms.to_le_bytes());
    out.push(FLAG_CHECKSUM | if trace_id.is_some() { FLAG_TRACE } else { 0 });
    if let Some(t) = &trace_id {
        out.extend_from_slice(t);
    }
    out.extend_from_slice(&(tl as u16).to_le_bytes());
    out.extend_from_slice(&transaction_id.as_bytes()[..tl]);
    out.extend_from_slice(payload);
    let checksum = crc32c::crc32c(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The bytes of a body with (or without) a trace id, a transaction id of
/// `txn_len` bytes and a payload of `payload_len`.
fn body_len(traced: bool, txn_len: usize, payload_len: usize) -> usize {
    let trace = if traced { 16 } else { 0 };
    16 + 8 + 1 + trace + 2 + txn_len + payload_len + CHECKSUM_BYTES
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
        body_len(self.trace_id.is_some(), self.transaction_id.len(), self.payload.len())
    }

    pub fn encode(&self) -> Vec<u8> {
        encode_body(self.id, self.created_ms, self.trace_id, &self.transaction_id, &self.payload)
    }

    /// Decodes a body; `None` when the bytes are not a body (a short read, a
    /// torn file or a checksum that does not match).
    pub fn decode(b: &[u8]) -> Option<BodyRecord> {
        BodyRecord::decode_checked(b).ok()
    }

    /// Decodes a body, or says why the bytes are not one.
    pub fn decode_checked(b: &[u8]) -> Result<BodyRecord, Unreadable> {
        let (head, at) = Head::parse(b).ok_or(Unreadable::Malformed)?;
        let end = if head.flags & FLAG_CHECKSUM != 0 {
            let end = b.len().checked_sub(CHECKSUM_BYTES).filter(|e| *e >= at).ok_or(Unreadable::Malformed)?;
            let stored = u32::from_le_bytes(b[end..].try_into().map_err(|_| Unreadable::Malformed)?);
            let computed = crc32c::crc32c(&b[..end]);
            if stored != computed {
                return Err(Unreadable::Checksum { stored, computed });
            }
            end
        } else {
            b.len()
        };
        let transaction_id = String::from_utf8(head.txn.to_vec()).map_err(|_| Unreadable::Malformed)?;
        Ok(BodyRecord {
            id: head.id,
            created_ms: head.created_ms,
            trace_id: head.trace_id,
            transaction_id,
            payload: b[at..end].to_vec(),
        })
    }

    /// The head of bytes that are not a whole body, when it still parses,
    /// with an empty payload: what a reader needs to ack or dead-letter a
    /// message whose payload was damaged. Unchecked: a damaged transaction
    /// id only fails to match the message it names.
    pub fn salvage(b: &[u8]) -> Option<BodyRecord> {
        let (head, _) = Head::parse(b)?;
        Some(BodyRecord {
            id: head.id,
            created_ms: head.created_ms,
            trace_id: head.trace_id,
            transaction_id: String::from_utf8_lossy(head.txn).into_owned(),
            payload: Vec::new(),
        })
    }
}

/// Why stored bytes are not a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Too short, unknown flags or a transaction id that is not UTF-8.
    Malformed,
    /// The bytes were changed after they were written.
    Checksum { stored: u32, computed: u32 },
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Malformed => f.write_str("the stored body is not a message body"),
            Unreadable::Checksum { stored, computed } => {
                write!(f, "the stored body fails its checksum (stored {stored:08x}, computed {computed:08x})")
            }
        }
    }
}

/// The fixed part of a body, before its payload.
struct Head<'a> {
    id: [u8; 16],
    created_ms: u64,
    flags: u8,
    trace_id: Option<[u8; 16]>,
    txn: &'a [u8],
}

impl<'a> Head<'a> {
    /// The head and the offset its payload starts at.
    fn parse(b: &'a [u8]) -> Option<(Head<'a>, usize)> {
        let mut id = [0u8; 16];
        id.copy_from_slice(b.get(0..16)?);
        let created_ms = u64::from_le_bytes(b.get(16..24)?.try_into().ok()?);
        let flags = *b.get(24)?;
        // Unknown flag bits are not a body this version wrote.
        if flags & !(FLAG_TRACE | FLAG_CHECKSUM) != 0 {
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
        let txn = b.get(at..at + tl)?;
        Some((Head { id, created_ms, flags, trace_id, txn }, at + tl))
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

    fn sample() -> BodyRecord {
        BodyRecord {
            id: [3; 16],
            created_ms: 7,
            trace_id: None,
            transaction_id: "tx-9".into(),
            payload: b"{\"b\":2}".to_vec(),
        }
    }

    #[test]
    fn a_changed_byte_fails_the_checksum_anywhere_in_the_body() {
        let good = sample().encode();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(BodyRecord::decode(&bad).is_none(), "a flip at byte {i} went unnoticed");
        }
        let mut payload_flip = good.clone();
        payload_flip[good.len() - 6] ^= 1;
        assert!(matches!(BodyRecord::decode_checked(&payload_flip), Err(Unreadable::Checksum { .. })));
        let salvaged = BodyRecord::salvage(&payload_flip).expect("the head parses");
        assert_eq!((salvaged.id, salvaged.transaction_id.as_str()), ([3; 16], "tx-9"));
    }

    #[test]
    fn a_body_written_before_checksums_still_reads() {
        let r = sample();
        let mut old = r.encode();
        old.truncate(old.len() - CHECKSUM_BYTES);
        old[24] &= !FLAG_CHECKSUM;
        assert_eq!(BodyRecord::decode(&old), Some(r));
    }

    #[test]
    fn bodies_never_straddle_segments() {
        assert_eq!(place(0, 10), 0);
        assert_eq!(place(BODY_SEGMENT_BYTES - 5, 5), BODY_SEGMENT_BYTES - 5);
        assert_eq!(place(BODY_SEGMENT_BYTES - 5, 6), BODY_SEGMENT_BYTES);
        assert_eq!(place(BODY_SEGMENT_BYTES, 6), BODY_SEGMENT_BYTES);
    }
}
