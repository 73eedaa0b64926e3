//! Recovery after torn writes, bit flips and real corruption.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::fs;
use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;
use regina_storage::{RecordPos, WalError};
use support::{fast_tempdir, open, options, payloads, segment_path, wal_files, Lcg};

const SEGMENT: u64 = 2048;

#[derive(Debug, Clone, Copy)]
enum Fill {
    Zeros,
    Garbage(u64),
}

/// Writes `records`, then for every cut point from the start of the last
/// three records to the end of the data, damages the last segment from the
/// cut on, reopens, and checks that exactly a prefix comes back.
fn check_torn_tail(records: &[Vec<u8>], fill: Fill) -> Result<(), TestCaseError> {
    let dir = fast_tempdir();
    let positions = write_one_by_one(dir.path(), records);
    let last = *positions.last().expect("at least one record");
    let path = segment_path(dir.path(), last.segment);
    let pristine = fs::read(&path).expect("read the last segment");
    let data_end = end_of(last, &records[records.len() - 1]);
    let first_cut = positions[positions.len().saturating_sub(3)..]
        .iter()
        .find(|p| p.segment == last.segment)
        .map_or(0, |p| p.offset);
    for cut in first_cut..=data_end {
        let mut bytes = pristine.clone();
        damage(&mut bytes[cut as usize..data_end as usize], fill, cut);
        fs::write(&path, &bytes).expect("damage the segment");
        let (wal, recovered) = open(dir.path(), options(SEGMENT));
        drop(wal);
        let got = payloads(&recovered);
        prop_assert!(got.len() <= records.len());
        prop_assert_eq!(&got[..], &records[..got.len()], "not a prefix (cut at {})", cut);
        let got_positions: Vec<RecordPos> = recovered.iter().map(|(p, _)| *p).collect();
        prop_assert_eq!(&got_positions[..], &positions[..got.len()]);
        let whole =
            positions.iter().zip(records).filter(|(p, r)| p.segment < last.segment || end_of(**p, r) <= cut).count();
        prop_assert!(got.len() >= whole, "lost a whole record before cut {}", cut);
    }
    Ok(())
}

fn write_one_by_one(dir: &Path, records: &[Vec<u8>]) -> Vec<RecordPos> {
    let (wal, _) = open(dir, options(SEGMENT));
    let mut positions = Vec::new();
    for record in records {
        positions.extend(wal.append_sync(vec![record.clone()]).expect("append"));
    }
    positions
}

fn end_of(pos: RecordPos, record: &[u8]) -> u64 {
    pos.offset + 8 + record.len() as u64
}

fn damage(tail: &mut [u8], fill: Fill, cut: u64) {
    match fill {
        Fill::Zeros => tail.fill(0),
        Fill::Garbage(seed) => {
            let mut rng = Lcg(seed ^ cut);
            tail.iter_mut().for_each(|b| *b = rng.next() as u8);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn torn_tail_of_zeros_recovers_a_prefix(records in vec(vec(any::<u8>(), 0..300), 1..=20)) {
        check_torn_tail(&records, Fill::Zeros)?;
    }

    #[test]
    fn torn_tail_of_garbage_recovers_a_prefix(
        records in vec(vec(any::<u8>(), 0..300), 1..=20),
        seed in any::<u64>(),
    ) {
        check_torn_tail(&records, Fill::Garbage(seed))?;
    }
}

#[test]
fn flipped_byte_cuts_the_log_and_stale_records_never_return() {
    let dir = fast_tempdir();
    // Equal sizes, so new records land exactly where the stale ones start:
    // if recovery left the old tail in place, it would read back as valid.
    let old: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100]).collect();
    let positions = write_one_by_one(dir.path(), &old);
    assert!(positions.iter().all(|p| p.segment == 0));
    let path = segment_path(dir.path(), 0);
    let mut bytes = fs::read(&path).expect("read segment");
    bytes[positions[5].offset as usize + 8 + 40] ^= 0x10;
    fs::write(&path, &bytes).expect("flip a byte");

    let (wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(payloads(&recovered), old[..5].to_vec());
    let new: Vec<Vec<u8>> = (0..2u8).map(|i| vec![100 + i; 100]).collect();
    let new_positions = wal.append_sync(new.clone()).expect("append after recovery");
    assert_eq!(new_positions, positions[5..7].to_vec());
    drop(wal);

    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    let mut expected = old[..5].to_vec();
    expected.extend(new);
    assert_eq!(payloads(&recovered), expected);
}

/// Fills several segments and returns the positions and records.
fn fill_segments(dir: &Path, count: usize) -> (Vec<RecordPos>, Vec<Vec<u8>>) {
    let records: Vec<Vec<u8>> = (0..count).map(|i| vec![i as u8; 200]).collect();
    let positions = write_one_by_one(dir, &records);
    assert!(positions.last().expect("records").segment >= 2);
    (positions, records)
}

#[test]
fn damage_before_the_last_segment_is_corruption() {
    let dir = fast_tempdir();
    let (positions, _) = fill_segments(dir.path(), 30);
    let victim = positions[3];
    assert_eq!(victim.segment, 0);
    let path = segment_path(dir.path(), 0);
    let mut bytes = fs::read(&path).expect("read segment");
    bytes[victim.offset as usize + 8 + 17] ^= 0x01;
    fs::write(&path, &bytes).expect("flip a byte");
    match regina_storage::Wal::open(dir.path(), options(SEGMENT), std::sync::Arc::new(regina_storage::RealIo)) {
        Err(WalError::Corrupt { segment, offset, reason }) => {
            assert_eq!((segment, offset), (0, victim.offset));
            assert!(reason.contains("checksum"), "{reason}");
        }
        Err(other) => panic!("expected Corrupt, got {other}"),
        Ok(_) => panic!("expected Corrupt, the log opened"),
    }
}

#[test]
fn zeroed_header_before_the_last_segment_is_corruption() {
    let dir = fast_tempdir();
    let (positions, _) = fill_segments(dir.path(), 30);
    let victim = positions[positions.iter().position(|p| p.segment == 1).expect("segment 1") + 1];
    let path = segment_path(dir.path(), 1);
    let mut bytes = fs::read(&path).expect("read segment");
    bytes[victim.offset as usize..victim.offset as usize + 8].fill(0);
    fs::write(&path, &bytes).expect("zero a header");
    let opened = regina_storage::Wal::open(dir.path(), options(SEGMENT), std::sync::Arc::new(regina_storage::RealIo));
    assert!(matches!(opened, Err(WalError::Corrupt { segment: 1, .. })));
}

#[test]
fn torn_first_record_of_a_new_segment_is_dropped_and_zeroed() {
    let dir = fast_tempdir();
    let records: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 50]).collect();
    let positions = write_one_by_one(dir.path(), &records);
    assert!(positions.iter().all(|p| p.segment == 0));
    // As if a crash hit while the writer wrote into the next segment.
    let mut torn = vec![0u8; SEGMENT as usize];
    torn[..4].copy_from_slice(&100u32.to_le_bytes());
    torn[4..8].copy_from_slice(&0xdead_beefu32.to_le_bytes());
    torn[8..60].fill(7);
    let next = segment_path(dir.path(), 1);
    fs::write(&next, &torn).expect("write a torn segment");

    let (wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(payloads(&recovered), records);
    assert!(fs::read(&next).expect("read").iter().all(|&b| b == 0));
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(payloads(&recovered), records);
}

#[test]
fn segments_are_preallocated_and_leftovers_cleaned() {
    let dir = fast_tempdir();
    let leftover = dir.path().join("00000000000000000009.wal.tmp");
    fs::write(&leftover, b"half prepared").expect("write leftover");
    let (wal, _) = open(dir.path(), options(SEGMENT));
    assert!(!leftover.exists());
    let pos = wal.append_sync(vec![b"abc".to_vec()]).expect("append")[0];
    drop(wal);
    let bytes = fs::read(segment_path(dir.path(), pos.segment)).expect("read");
    assert_eq!(bytes.len() as u64, SEGMENT);
    assert!(bytes[8 + 3..].iter().all(|&b| b == 0));
    assert!(!wal_files(dir.path()).is_empty());
}

#[test]
fn open_visiting_hands_over_every_record_in_order_across_segments() {
    let dir = fast_tempdir();
    let (positions, records) = fill_segments(dir.path(), 30);
    let mut seen = Vec::new();
    let wal = regina_storage::Wal::open_visiting(
        dir.path(),
        options(SEGMENT),
        std::sync::Arc::new(regina_storage::RealIo),
        &mut |pos, bytes| {
            seen.push((pos, bytes.to_vec()));
            Ok(())
        },
    )
    .unwrap();
    let expected: Vec<(RecordPos, Vec<u8>)> = positions.into_iter().zip(records).collect();
    assert_eq!(seen, expected);
    // The log goes on after the last record visited.
    let next = wal.append_sync(vec![b"after".to_vec()]).unwrap();
    assert!(next[0] > expected.last().unwrap().0);
}

#[test]
fn a_refused_record_stops_the_open_with_the_callers_words() {
    let dir = fast_tempdir();
    let (positions, _) = fill_segments(dir.path(), 30);
    let mut visited = 0;
    let refused = regina_storage::Wal::open_visiting(
        dir.path(),
        options(SEGMENT),
        std::sync::Arc::new(regina_storage::RealIo),
        &mut |pos, _| {
            visited += 1;
            if pos == positions[12] {
                return Err(format!("no thanks at {pos:?}"));
            }
            Ok(())
        },
    );
    match refused {
        Err(WalError::Refused(reason)) => assert_eq!(reason, format!("no thanks at {:?}", positions[12])),
        Err(other) => panic!("expected Refused, got {other}"),
        Ok(_) => panic!("expected Refused, the log opened"),
    }
    assert_eq!(visited, 13, "the scan stops at the refusal");
    // Nothing was cut: every record is still there.
    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(recovered.len(), positions.len());
}
