//! The framed pop answer `QPF1`, sent when a pop asks for `frames=true`.
//! It carries the same messages as the JSON answer without re-encoding
//! payloads as JSON strings. Little-endian:
//!
//! ```text
//! "QPF1" | u8 version (0: no head)
//! u16+queue | u16+leaseId | u16+consumerGroup | u32 claims
//! claim:  u64 partitionId | u16+partition | u64 start | u64 end
//!         | u32 deliveryAttempt | u32 records
//! record: u64 base_offset | i64 created_at_us | u32 count | u8 codec (0 raw)
//!         | u32 len | frames
//! frame:  u32 body_len | u8 flags (1 trace id) | [16] message id
//!         | [16 trace id] | u16+transactionId | payload
//! ```
//!
//! Each message travels as its own record so it keeps its creation time.

use regina_state::outcome::PopResult;

use crate::http::error::{ApiError, ApiResult};
use crate::http::render::read_message;
use regina_node::Replica;

pub const MAGIC: &[u8; 4] = b"QPF1";
pub const CONTENT_TYPE: &str = "application/x-queen-pop";

fn text16(out: &mut Vec<u8>, s: &str) -> ApiResult<()> {
    let len = u16::try_from(s.len()).map_err(|_| ApiError::internal("a name is too long for a framed answer"))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// Encodes a non-empty pop as `QPF1`.
pub fn encode(node: &Replica, r: &PopResult, group: &str) -> ApiResult<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + r.message_count() * 128);
    out.extend_from_slice(MAGIC);
    out.push(0);
    let queue = r.claims.first().map_or("", |c| c.queue.as_str());
    text16(&mut out, queue)?;
    text16(&mut out, &r.lease_id)?;
    text16(&mut out, group)?;
    out.extend_from_slice(&(r.claims.len() as u32).to_le_bytes());
    for c in &r.claims {
        let (Some(first), Some(last)) = (c.messages.first(), c.messages.last()) else { continue };
        out.extend_from_slice(&c.partition_id.to_le_bytes());
        text16(&mut out, &c.partition)?;
        out.extend_from_slice(&first.offset.to_le_bytes());
        out.extend_from_slice(&last.offset.to_le_bytes());
        out.extend_from_slice(&first.attempt.to_le_bytes());
        out.extend_from_slice(&(c.messages.len() as u32).to_le_bytes());
        for d in &c.messages {
            let (b, _) = read_message(node, d.pos, d.len)?;
            let mut frame = Vec::with_capacity(b.payload.len() + 64);
            frame.push(if b.trace_id.is_some() { 1 } else { 0 });
            frame.extend_from_slice(&b.id);
            if let Some(t) = &b.trace_id {
                frame.extend_from_slice(t);
            }
            text16(&mut frame, &b.transaction_id)?;
            frame.extend_from_slice(&b.payload);
            out.extend_from_slice(&d.offset.to_le_bytes());
            out.extend_from_slice(&((b.created_ms as i64) * 1000).to_le_bytes());
            out.extend_from_slice(&1u32.to_le_bytes());
            out.push(0);
            out.extend_from_slice(&((frame.len() + 4) as u32).to_le_bytes());
            out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            out.extend_from_slice(&frame);
        }
    }
    Ok(out)
}
