//! Recovery: turning the segment files found at open back into records and
//! a place to continue writing.
//!
//! The writer fsyncs a segment completely before it writes anything into the
//! next one, so after a crash only the last segment holding records can end
//! in a torn write. That gives the two rules applied here:
//!
//! * In the last segment with valid records, the first damaged record marks
//!   where the crash hit. The log is cut there and the rest of the segment is
//!   zeroed, so stale bytes can never line up behind new writes and be read
//!   back as records. Later segments are zeroed if they hold anything.
//! * Damage in any earlier segment cannot come from a crash. Dropping it
//!   would silently lose acknowledged records, so recovery refuses with
//!   `WalError::Corrupt`.

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

use super::frame::{record_crc, Header, HEADER_LEN};
use super::{segment, RecordPos, RecordVisitor};
use crate::error::WalError;

/// Where and why a segment's data stops being valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub offset: u64,
    pub reason: String,
}

/// The result of scanning one segment's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScan {
    /// Offset of each valid record and the range of its payload in the
    /// scanned buffer, in order.
    pub records: Vec<(u64, Range<usize>)>,
    /// Offset just past the last valid record: where writing continues.
    pub end: u64,
    /// `None` if the valid records are followed only by zeros.
    pub damage: Option<Damage>,
}

/// Scans the bytes of one segment from the start.
///
/// Stops at the first all-zero header (end of data), at the first record
/// that runs past the end of `buf` or fails its checksum, or when fewer than
/// a header's worth of bytes remain. Anything non-zero after the end of data
/// is reported as damage: the writer only ever writes contiguously from the
/// start, so such bytes are a torn write or stale data.
pub fn scan_segment(buf: &[u8]) -> SegmentScan {
    let mut records = Vec::new();
    let mut offset = 0u64;
    let damage = loop {
        let Some(header) = Header::read_from(buf, offset) else {
            break trailing_damage(buf, offset);
        };
        if header.is_end_marker() {
            break trailing_damage(buf, offset);
        }
        let start = offset + HEADER_LEN;
        let end = start + u64::from(header.len);
        if end > buf.len() as u64 {
            break Some(Damage {
                offset,
                reason: format!("record length {} runs past the segment end ({} bytes)", header.len, buf.len()),
            });
        }
        let payload = start as usize..end as usize;
        let computed = record_crc(&buf[payload.clone()]);
        if computed != header.crc {
            break Some(Damage {
                offset,
                reason: format!("checksum mismatch (stored {:08x}, computed {computed:08x})", header.crc),
            });
        }
        records.push((offset, payload));
        offset = end;
    };
    SegmentScan { records, end: offset, damage }
}

/// Damage if anything after the end of data at `end` is non-zero.
fn trailing_damage(buf: &[u8], end: u64) -> Option<Damage> {
    let stray = last_nonzero(&buf[end as usize..])?;
    Some(Damage {
        offset: end,
        reason: format!("non-zero bytes up to offset {} after the end of data", end + stray as u64),
    })
}

fn last_nonzero(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b != 0)
}

/// A segment file found at open.
#[derive(Debug)]
pub struct FoundSegment {
    pub seq: u64,
    pub file: File,
    pub len: u64,
}

/// Everything `Wal::open` needs to resume (the records went to the
/// visitor as they were found).
#[derive(Debug)]
pub struct Recovered {
    /// Every segment in order. Those after `active` are empty spares.
    pub segments: Vec<FoundSegment>,
    pub active: usize,
    /// Where the next record goes in the active segment.
    pub active_offset: u64,
}

/// What one segment contributed, kept until we know which one is last.
struct Scanned {
    found: FoundSegment,
    records: usize,
    end: u64,
    damage: Option<Damage>,
    /// One past the last non-zero byte: how far zeroing has to reach.
    dirty_until: u64,
}

/// Scans every segment in `dir`, applies the cut rules described at the top
/// of this module and hands each surviving record to `visit`, in order.
///
/// Records are visited as their segment is scanned, from one buffer reused
/// segment after segment, so a log of any length is never held in memory.
/// That is safe because the rules only ever keep a prefix: the records
/// visited are exactly the surviving ones whenever this returns `Ok`. A
/// refusal by `visit` stops the scan and is returned as
/// [`WalError::Refused`].
///
/// `dir` must contain at least one segment.
pub fn recover(dir: &Path, visit: &mut RecordVisitor<'_>) -> Result<Recovered, WalError> {
    let listed = segment::list(dir).map_err(|e| WalError::io(format!("listing {}", dir.display()), e))?;
    let mut scanned = Vec::with_capacity(listed.len());
    let mut buf = Vec::new();
    for (i, (seq, path)) in listed.iter().enumerate() {
        if let Some((_, next)) = listed.get(i + 1) {
            read_ahead(next);
        }
        scanned.push(scan_file(*seq, path, &mut buf, visit)?);
    }
    let last_data = scanned.iter().rposition(|s| s.records > 0);
    let active = last_data.unwrap_or(0);
    for s in &scanned[..active] {
        if let Some(damage) = &s.damage {
            return Err(WalError::Corrupt {
                segment: s.found.seq,
                offset: damage.offset,
                reason: format!("{}, and later segments hold records", damage.reason),
            });
        }
    }
    for s in &scanned[active..] {
        zero_leftovers(s)?;
    }
    let active_offset = scanned.get(active).map_or(0, |s| s.end);
    let segments = scanned.into_iter().map(|s| s.found).collect();
    Ok(Recovered { segments, active, active_offset })
}

/// Asks the kernel to start reading the segment at `path` while the one
/// before it is checked. Only a hint: failing it costs nothing but time.
fn read_ahead(path: &Path) {
    if let Ok(file) = File::open(path) {
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::WillNeed);
    }
}

fn scan_file(seq: u64, path: &Path, buf: &mut Vec<u8>, visit: &mut RecordVisitor<'_>) -> Result<Scanned, WalError> {
    let context = || format!("reading wal segment {}", path.display());
    let mut file = segment::open_existing(path).map_err(|e| WalError::io(context(), e))?;
    buf.clear();
    file.read_to_end(buf).map_err(|e| WalError::io(context(), e))?;
    let scan = scan_segment(buf);
    for (offset, payload) in &scan.records {
        visit(RecordPos { segment: seq, offset: *offset }, &buf[payload.clone()]).map_err(WalError::Refused)?;
    }
    let dirty_until = last_nonzero(buf).map_or(0, |i| i as u64 + 1);
    Ok(Scanned {
        found: FoundSegment { seq, file, len: buf.len() as u64 },
        records: scan.records.len(),
        end: scan.end,
        damage: scan.damage,
        dirty_until,
    })
}

/// Zeros whatever lies past the valid records of the active segment or in a
/// spare, and syncs it, so the space reads as "end of data" from now on.
fn zero_leftovers(s: &Scanned) -> Result<(), WalError> {
    if s.dirty_until <= s.end {
        return Ok(());
    }
    if let Some(damage) = &s.damage {
        tracing::warn!(
            segment = s.found.seq,
            offset = damage.offset,
            reason = %damage.reason,
            "cutting the wal at a torn or damaged record"
        );
    }
    segment::zero_and_sync(&s.found.file, s.end, s.dirty_until)
        .map_err(|e| WalError::io(format!("zeroing the tail of wal segment {}", s.found.seq), e))
}

#[cfg(test)]
mod tests {
    use super::super::frame::encode_into;
    use super::*;

    fn segment_with(records: &[&[u8]], len: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        for r in records {
            encode_into(&mut buf, r);
        }
        buf.resize(len, 0);
        buf
    }

    fn payloads<'a>(buf: &'a [u8], scan: &SegmentScan) -> Vec<&'a [u8]> {
        scan.records.iter().map(|(_, r)| &buf[r.clone()]).collect()
    }

    #[test]
    fn clean_segment_yields_all_records() {
        let buf = segment_with(&[b"a", b"", b"ccc"], 100);
        let scan = scan_segment(&buf);
        assert_eq!(payloads(&buf, &scan), vec![&b"a"[..], b"", b"ccc"]);
        assert_eq!(scan.end, 8 + 1 + 8 + 8 + 3);
        assert_eq!(scan.damage, None);
    }

    #[test]
    fn record_filling_the_segment_exactly_ends_cleanly() {
        let buf = segment_with(&[b"abcd", b"efgh"], 24);
        let scan = scan_segment(&buf);
        assert_eq!(scan.records.len(), 2);
        assert_eq!(scan.damage, None);
    }

    #[test]
    fn bad_checksum_stops_the_scan() {
        let mut buf = segment_with(&[b"one", b"two", b"three"], 100);
        buf[8 + 3 + 8] ^= 0x40; // first payload byte of "two"
        let scan = scan_segment(&buf);
        assert_eq!(payloads(&buf, &scan), vec![&b"one"[..]]);
        let damage = scan.damage.expect("damage reported");
        assert_eq!(damage.offset, 11);
        assert!(damage.reason.contains("checksum"), "{}", damage.reason);
    }

    #[test]
    fn length_past_the_end_stops_the_scan() {
        let mut buf = segment_with(&[b"one", b"two"], 40);
        buf[11..15].copy_from_slice(&1000u32.to_le_bytes());
        let scan = scan_segment(&buf);
        assert_eq!(scan.records.len(), 1);
        let damage = scan.damage.expect("damage reported");
        assert!(damage.reason.contains("runs past"), "{}", damage.reason);
    }

    #[test]
    fn bytes_after_the_end_marker_are_damage() {
        let mut buf = segment_with(&[b"one"], 100);
        buf[90] = 1;
        let scan = scan_segment(&buf);
        assert_eq!(scan.records.len(), 1);
        assert_eq!(scan.end, 11);
        assert_eq!(scan.damage.map(|d| d.offset), Some(11));
    }

    #[test]
    fn stray_bytes_too_short_for_a_header_are_damage() {
        let mut buf = segment_with(&[b"abcd"], 16);
        buf[15] = 9;
        let scan = scan_segment(&buf);
        assert_eq!(scan.records.len(), 1);
        assert_eq!(scan.damage.map(|d| d.offset), Some(12));
    }

    #[test]
    fn all_zero_segment_is_empty_and_clean() {
        let scan = scan_segment(&[0u8; 64]);
        assert!(scan.records.is_empty());
        assert_eq!((scan.end, scan.damage), (0, None));
    }
}
