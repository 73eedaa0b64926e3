//! Segment rollover, oversized records and releasing old segments.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::fs;

use regina_storage::{RecordPos, WalError};
use support::{fast_tempdir, open, options, payloads, segment_path, wal_files, AdviceLog, Lcg};

const SEGMENT: u64 = 4096;

fn random_records(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Lcg(seed);
    (0..count)
        .map(|_| {
            let len = rng.below(300) as usize;
            rng.bytes(len)
        })
        .collect()
}

#[test]
fn records_roll_over_many_segments_and_release_old_ones() {
    let dir = fast_tempdir();
    let records = random_records(600, 7);
    let (wal, _) = open(dir.path(), options(SEGMENT));
    let mut positions = Vec::new();
    for chunk in records.chunks(7) {
        positions.extend(wal.append_sync(chunk.to_vec()).expect("append"));
    }
    let last_segment = positions.last().expect("records").segment;
    assert!(last_segment >= 20, "only {last_segment} segments used");
    assert!(positions.windows(2).all(|w| w[0] < w[1]));
    drop(wal);

    let (wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(payloads(&recovered), records);

    let keep_from = positions[400];
    let released = wal.release_segments_before(keep_from).expect("release");
    assert_eq!(released as u64, keep_from.segment);
    for seq in 0..keep_from.segment {
        assert!(!segment_path(dir.path(), seq).exists(), "segment {seq} still there");
    }
    assert!(matches!(wal.read(positions[0]), Err(WalError::NoRecord { .. })));
    assert_eq!(wal.read(positions[599]).expect("still readable"), records[599]);
    let more = random_records(50, 8);
    wal.append_sync(more.clone()).expect("append after release");
    drop(wal);

    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    let first_kept = positions.iter().position(|p| p.segment == keep_from.segment);
    let mut expected = records[first_kept.expect("kept segment")..].to_vec();
    expected.extend(more);
    assert_eq!(payloads(&recovered), expected);
    assert!(recovered[0].0.segment == keep_from.segment);
}

#[test]
fn release_never_deletes_the_segment_being_written() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(SEGMENT));
    let records = random_records(100, 9);
    wal.append_sync(records.clone()).expect("append");
    let current = wal.current_segment();
    assert!(current > 0);
    let everything = RecordPos { segment: u64::MAX, offset: 0 };
    assert_eq!(wal.release_segments_before(everything).expect("release"), current as usize);
    assert!(segment_path(dir.path(), current).exists());
    wal.append_sync(vec![b"after".to_vec()]).expect("append");
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    let got = payloads(&recovered);
    assert_eq!(got.last().map(Vec::as_slice), Some(&b"after"[..]));
    assert!(recovered.iter().all(|(p, _)| p.segment == current));
}

#[test]
fn a_record_larger_than_a_segment_gets_a_segment_that_fits() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(SEGMENT));
    let big = vec![0x5a; 3 * SEGMENT as usize];
    let first = wal.append_sync(vec![b"small".to_vec()]).expect("append");
    let positions = wal.append_sync(vec![big.clone(), b"after".to_vec(), big.clone()]).expect("append big");
    assert_eq!(wal.read(positions[0]).expect("read big"), big);
    assert!(positions[0].segment > first[0].segment);
    let size = fs::metadata(segment_path(dir.path(), positions[0].segment)).expect("stat").len();
    assert!(size >= 3 * SEGMENT + 8, "segment of {size} bytes cannot hold the record");
    drop(wal);

    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    let expected = vec![b"small".to_vec(), big.clone(), b"after".to_vec(), big];
    assert_eq!(payloads(&recovered), expected);
    assert!(wal_files(dir.path()).len() >= 3);
}

#[test]
fn an_oversized_first_record_grows_the_empty_active_segment() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(SEGMENT));
    let big = vec![1u8; 2 * SEGMENT as usize];
    let pos = wal.append_sync(vec![big.clone()]).expect("append")[0];
    assert_eq!(pos, RecordPos { segment: 0, offset: 0 });
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(payloads(&recovered), vec![big]);
}

/// Every full segment is handed to the page cache advice once, as the
/// writer moves past it, and never the one being written; the records in
/// advised segments still read back.
#[test]
fn full_segments_leave_the_page_cache_at_rollover() {
    let dir = fast_tempdir();
    let log = std::sync::Arc::new(AdviceLog::default());
    let (wal, _) = regina_storage::Wal::open(dir.path(), options(SEGMENT), log.clone()).unwrap();
    let records = random_records(200, 11);
    let mut positions = Vec::new();
    for chunk in records.chunks(5) {
        positions.extend(wal.append_sync(chunk.to_vec()).unwrap());
    }
    let last = positions.last().unwrap().segment;
    assert!(last >= 5, "only {last} segments used");
    let want: Vec<String> = (0..last).map(|seq| format!("{seq:020}.wal")).collect();
    assert_eq!(*log.advised.lock(), want);
    for (pos, record) in positions.iter().zip(&records) {
        assert_eq!(&wal.read(*pos).unwrap(), record);
    }
}
