//! Segment rollover, oversized records and releasing old segments.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use regina_storage::{Io, RealIo, RecordPos, Wal, WalError};
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
    let released = wal.release_segments_before(keep_from);
    assert_eq!(released as u64, keep_from.segment);
    wal.wait_for_released_deletions();
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

/// Deletions held until the test lets them through, as a slow unlink on
/// a file system mounted with `discard` holds them.
struct HeldDeletes {
    inner: RealIo,
    gate: Mutex<bool>,
    opened: Condvar,
    deleted: Mutex<Vec<PathBuf>>,
}

impl HeldDeletes {
    fn open_gate(&self) {
        *self.gate.lock() = true;
        self.opened.notify_all();
    }
}

impl Io for HeldDeletes {
    fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> std::io::Result<()> {
        self.inner.write_at(file, buf, pos)
    }
    fn sync_data(&self, file: &File) -> std::io::Result<()> {
        self.inner.sync_data(file)
    }
    fn delete_file(&self, path: &Path) -> std::io::Result<()> {
        let mut open = self.gate.lock();
        while !*open {
            self.opened.wait(&mut open);
        }
        self.deleted.lock().push(path.to_path_buf());
        self.inner.delete_file(path)
    }
}

struct OpenOnDrop<'a>(&'a HeldDeletes);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

#[test]
fn release_returns_before_the_files_are_deleted_and_they_go_in_the_background() {
    let dir = fast_tempdir();
    let io = Arc::new(HeldDeletes {
        inner: RealIo,
        gate: Mutex::new(false),
        opened: Condvar::new(),
        deleted: Mutex::new(Vec::new()),
    });
    let (wal, _) = Wal::open(dir.path(), options(SEGMENT), Arc::clone(&io) as Arc<dyn Io>).expect("open");
    // Dropped before the log, whose drop waits for the held deletions.
    let _gate_opens_on_exit = OpenOnDrop(&io);
    let records = random_records(300, 11);
    let mut positions = Vec::new();
    for chunk in records.chunks(5) {
        positions.extend(wal.append_sync(chunk.to_vec()).expect("append"));
    }
    let keep_from = positions[200];
    assert!(keep_from.segment >= 5, "the records should span several segments: {keep_from:?}");

    // Every unlink is held, yet the release returns, and what it released
    // is unreadable at once while the files are still there.
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| tx.send(wal.release_segments_before(keep_from)).expect("send"));
        let released = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
            io.open_gate();
            panic!("the release waited for a held unlink");
        });
        assert_eq!(released as u64, keep_from.segment);
    });
    assert!(matches!(wal.read(positions[0]), Err(WalError::NoRecord { .. })));
    assert_eq!(wal.read(positions[200]).expect("kept"), records[200]);
    assert!(segment_path(dir.path(), 0).exists(), "deleted although every unlink is held");
    // Appends go on meanwhile.
    wal.append_sync(vec![b"meanwhile".to_vec()]).expect("append while deletions are held");

    io.open_gate();
    wal.wait_for_released_deletions();
    let deleted = io.deleted.lock().clone();
    let expected: Vec<PathBuf> = (0..keep_from.segment).map(|seq| segment_path(dir.path(), seq)).collect();
    assert_eq!(deleted, expected, "each released segment deleted once, oldest first");
    for path in &expected {
        assert!(!path.exists(), "{} still there", path.display());
    }
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    assert_eq!(recovered.first().map(|(p, _)| p.segment), Some(keep_from.segment));
    assert_eq!(recovered.last().map(|(_, r)| r.as_slice()), Some(&b"meanwhile"[..]));
}

#[test]
fn a_log_closed_with_deletions_queued_finishes_them_first() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(SEGMENT));
    let positions = wal.append_sync(random_records(100, 12)).expect("append");
    let last = *positions.last().expect("records");
    assert!(last.segment >= 2);
    wal.release_segments_before(last);
    drop(wal);
    for seq in 0..last.segment {
        assert!(!segment_path(dir.path(), seq).exists(), "segment {seq} outlived the log that released it");
    }
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
    assert_eq!(wal.release_segments_before(everything), current as usize);
    wal.wait_for_released_deletions();
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
