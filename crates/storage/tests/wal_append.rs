//! Appending: concurrency, group commit, shutdown and argument checks.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use regina_storage::{Io, RealIo, RecordPos, Wal, WalError, WalOptions};
use support::{fast_tempdir, open, options, payloads, Lcg};

const WAIT: Duration = Duration::from_secs(60);

type Completion = (usize, usize, Vec<Vec<u8>>, Result<Vec<RecordPos>, WalError>);

#[test]
fn concurrent_appends_round_trip_in_order() {
    let dir = fast_tempdir();
    let (wal, recovered) = open(dir.path(), options(64 << 10));
    assert!(recovered.is_empty());
    let wal = Arc::new(wal);
    let (tx, rx) = mpsc::channel::<Completion>();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (wal, tx) = (Arc::clone(&wal), tx.clone());
            thread::spawn(move || {
                let mut rng = Lcg(t as u64 + 1);
                for i in 0..100 {
                    let count = 1 + rng.below(3) as usize;
                    let records: Vec<Vec<u8>> = (0..count)
                        .map(|j| {
                            let mut r = format!("t{t}-a{i}-r{j}-").into_bytes();
                            let len = rng.below(120) as usize;
                            r.extend(rng.bytes(len));
                            r
                        })
                        .collect();
                    let tx = tx.clone();
                    let sent = records.clone();
                    wal.append(
                        records,
                        Box::new(move |result| {
                            let _ = tx.send((t, i, sent, result));
                        }),
                    );
                }
            })
        })
        .collect();
    drop(tx);
    for t in threads {
        t.join().expect("appending thread");
    }
    let mut written = BTreeMap::new();
    let mut last_per_thread: BTreeMap<usize, (usize, RecordPos)> = BTreeMap::new();
    for _ in 0..800 {
        let (t, i, records, result) = rx.recv_timeout(WAIT).expect("every append completes");
        let positions = result.expect("append succeeds");
        assert_eq!(positions.len(), records.len());
        assert!(positions.windows(2).all(|w| w[0] < w[1]));
        // One thread's appends were queued in order, so they land in order.
        if let Some((prev_i, prev_pos)) = last_per_thread.get(&t) {
            assert!(*prev_i < i && *prev_pos < positions[0], "thread {t} out of order");
        }
        last_per_thread.insert(t, (i, *positions.last().expect("non-empty")));
        for (pos, record) in positions.into_iter().zip(records) {
            assert_eq!(wal.read(pos).expect("read back"), record);
            assert!(written.insert(pos, record).is_none(), "position handed out twice");
        }
    }
    let written_bytes: u64 = written.values().map(|r| 8 + r.len() as u64).sum();
    assert_eq!(wal.bytes_written(), written_bytes);
    assert!(wal.current_segment() > 0, "64 KiB segments should have rolled over");
    drop(wal);

    let (wal, recovered) = open(dir.path(), options(64 << 10));
    let expected: Vec<(RecordPos, Vec<u8>)> = written.into_iter().collect();
    assert_eq!(recovered, expected);
    for (pos, record) in &recovered {
        assert_eq!(&wal.read(*pos).expect("read after reopen"), record);
    }
}

/// Counts data syncs, and makes each one take a little while, as on a real
/// disk, so the test does not depend on the speed of the file system.
struct CountingIo {
    syncs: AtomicU64,
}

impl Io for CountingIo {
    fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> std::io::Result<()> {
        RealIo.write_at(file, buf, pos)
    }

    fn sync_data(&self, file: &File) -> std::io::Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        thread::sleep(Duration::from_micros(500));
        RealIo.sync_data(file)
    }
}

#[test]
fn group_commit_shares_fsyncs() {
    let dir = fast_tempdir();
    let io = Arc::new(CountingIo { syncs: AtomicU64::new(0) });
    let (wal, _) = Wal::open(dir.path(), options(1 << 20), io.clone()).expect("open");
    let wal = Arc::new(wal);
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (wal, tx) = (Arc::clone(&wal), tx.clone());
            thread::spawn(move || {
                for i in 0..125 {
                    let tx = tx.clone();
                    let record = format!("thread {t} record {i}").into_bytes();
                    wal.append(vec![record], Box::new(move |r| drop(tx.send(r))));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("appending thread");
    }
    for _ in 0..1000 {
        rx.recv_timeout(WAIT).expect("completion").expect("append succeeds");
    }
    let syncs = io.syncs.load(Ordering::SeqCst);
    println!("1000 records from 8 threads took {syncs} fsyncs");
    assert!(syncs < 1000, "{syncs} fsyncs: appends were not grouped");
}

#[test]
fn drop_finishes_queued_appends() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(8 << 10));
    let (tx, rx) = mpsc::channel();
    for i in 0..300u32 {
        let tx = tx.clone();
        wal.append(vec![i.to_le_bytes().to_vec()], Box::new(move |r| drop(tx.send(r))));
    }
    drop(wal);
    drop(tx);
    let results: Vec<_> = rx.iter().collect();
    assert_eq!(results.len(), 300);
    assert!(results.iter().all(|r| r.is_ok()));
    let (_wal, recovered) = open(dir.path(), options(8 << 10));
    let expected: Vec<Vec<u8>> = (0..300u32).map(|i| i.to_le_bytes().to_vec()).collect();
    assert_eq!(payloads(&recovered), expected);
}

#[test]
fn oversized_record_is_refused_without_poisoning() {
    let dir = fast_tempdir();
    let options = WalOptions { max_record_bytes: 100, ..options(4096) };
    let (wal, _) = open(dir.path(), options.clone());
    match wal.append_sync(vec![vec![1; 10], vec![2; 101]]) {
        Err(WalError::TooLarge { len: 101, max: 100 }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(wal.poisoned(), None);
    wal.append_sync(vec![vec![3; 100]]).expect("a record at the limit is fine");
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options);
    assert_eq!(payloads(&recovered), vec![vec![3; 100]]);
}

#[test]
fn empty_records_and_empty_appends() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(4096));
    assert_eq!(wal.append_sync(vec![]).expect("nothing to append"), vec![]);
    let positions = wal.append_sync(vec![vec![], b"x".to_vec(), vec![]]).expect("append");
    assert_eq!(wal.read(positions[0]).expect("read empty"), Vec::<u8>::new());
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options(4096));
    assert_eq!(payloads(&recovered), vec![vec![], b"x".to_vec(), vec![]]);
}

#[test]
fn reading_where_no_record_starts_fails() {
    let dir = fast_tempdir();
    let (wal, _) = open(dir.path(), options(4096));
    let positions = wal.append_sync(vec![b"hello world".to_vec()]).expect("append");
    let pos = positions[0];
    let beyond = RecordPos { offset: 100, ..pos };
    assert!(matches!(wal.read(beyond), Err(WalError::NoRecord { .. })));
    let other_segment = RecordPos { segment: 99, offset: 0 };
    assert!(matches!(wal.read(other_segment), Err(WalError::NoRecord { .. })));
    let inside = RecordPos { offset: pos.offset + 3, ..pos };
    assert!(wal.read(inside).is_err());
}

#[test]
fn invalid_options_are_rejected() {
    let dir = fast_tempdir();
    let result = Wal::open(dir.path(), options(10), Arc::new(RealIo));
    assert!(matches!(result, Err(WalError::InvalidOptions(_))));
}
