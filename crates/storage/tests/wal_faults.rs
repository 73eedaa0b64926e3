//! A failed write or fsync poisons the log for good; one refused for lack
//! of space is retried until space is back, and poisons nothing.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use regina_storage::io::{INJECTED_SYNC_ERROR, INJECTED_WRITE_ERROR};
use regina_storage::{FaultyIo, Wal, WalError};
use support::{fast_tempdir, open, options, payloads};

const SEGMENT: u64 = 4096;

fn records(tag: u8, count: usize) -> Vec<Vec<u8>> {
    (0..count).map(|i| vec![tag, i as u8, 0xaa, 0x55]).collect()
}

fn poisoned_reason(result: Result<Vec<regina_storage::RecordPos>, WalError>) -> String {
    match result {
        Err(WalError::Poisoned(reason)) => reason,
        other => panic!("expected Poisoned, got {other:?}"),
    }
}

/// Appends a good batch, makes the next I/O fail via `arm`, appends a batch
/// that must be poisoned, and returns (good, failed, reason).
fn poison_with(dir: &std::path::Path, arm: impl Fn(&FaultyIo), expected_text: &str) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let io = Arc::new(FaultyIo::new());
    let (wal, _) = Wal::open(dir, options(SEGMENT), io.clone()).expect("open");
    let good = records(1, 5);
    wal.append_sync(good.clone()).expect("healthy append");
    assert_eq!(wal.poisoned(), None);

    arm(&io);
    let failed = records(2, 3);
    let (tx, rx) = mpsc::channel();
    wal.append(failed.clone(), Box::new(move |r| drop(tx.send(r))));
    let result = rx.recv_timeout(Duration::from_secs(60)).expect("completion");
    let reason = poisoned_reason(result);
    assert!(reason.contains(expected_text), "{reason}");
    assert_eq!(wal.poisoned().as_deref(), Some(reason.as_str()));

    // Later appends are refused at once, on the calling thread, with the
    // same reason, even though the disk works again.
    io.heal();
    let caller = thread::current().id();
    let (tx, rx) = mpsc::channel();
    wal.append(records(3, 1), Box::new(move |r| drop(tx.send((thread::current().id(), r)))));
    let (ran_on, result) = rx.try_recv().expect("refused before append returned");
    assert_eq!(ran_on, caller);
    assert_eq!(poisoned_reason(result), reason);
    assert_eq!(poisoned_reason(wal.append_sync(records(4, 2))), reason);
    (good, failed)
}

fn assert_prefix_after_reopen(dir: &std::path::Path, good: &[Vec<u8>], failed: &[Vec<u8>]) {
    let (_wal, recovered) = open(dir, options(SEGMENT));
    let got = payloads(&recovered);
    let mut attempted = good.to_vec();
    attempted.extend_from_slice(failed);
    assert!(got.len() >= good.len(), "acknowledged records were lost");
    assert!(got.len() <= attempted.len());
    assert_eq!(got[..], attempted[..got.len()]);
}

#[test]
fn failed_fsync_poisons_the_log() {
    let dir = fast_tempdir();
    let (good, failed) = poison_with(dir.path(), FaultyIo::fail_next_sync, INJECTED_SYNC_ERROR);
    assert_prefix_after_reopen(dir.path(), &good, &failed);
}

#[test]
fn failed_write_poisons_the_log() {
    let dir = fast_tempdir();
    let (good, failed) = poison_with(dir.path(), FaultyIo::fail_next_write, INJECTED_WRITE_ERROR);
    assert_prefix_after_reopen(dir.path(), &good, &failed);
}

#[test]
fn appends_queued_behind_a_failed_batch_are_poisoned_too() {
    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let (wal, _) = Wal::open(dir.path(), options(SEGMENT), io.clone()).expect("open");
    io.fail_syncs_from(0);
    let (tx, rx) = mpsc::channel();
    for i in 0..50u8 {
        let tx = tx.clone();
        wal.append(vec![vec![i]], Box::new(move |r| drop(tx.send(r))));
    }
    drop(tx);
    drop(wal);
    let results: Vec<_> = rx.iter().collect();
    assert_eq!(results.len(), 50);
    for result in results {
        assert!(poisoned_reason(result).contains(INJECTED_SYNC_ERROR));
    }
    assert_eq!(io.syncs(), 1, "a poisoned log must not retry");
}

/// Appends on another thread while writes (or syncs) fail for lack of
/// space: the append waits, the log says why, nothing is poisoned, and once
/// space is back the append completes and survives a reopen.
fn a_full_disk_holds_appends_until_space_is_back(fill: impl Fn(&FaultyIo)) {
    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let (wal, _) = Wal::open(dir.path(), options(SEGMENT), io.clone()).expect("open");
    let good = records(1, 3);
    wal.append_sync(good.clone()).expect("healthy append");

    fill(&io);
    let wal = Arc::new(wal);
    let waiting = records(2, 2);
    let (tx, rx) = mpsc::channel();
    let (w, batch) = (wal.clone(), waiting.clone());
    let appender = thread::spawn(move || tx.send(w.append_sync(batch)).unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while wal.waiting_for_space().is_none() {
        assert!(std::time::Instant::now() < deadline, "the writer never said it waits for space");
        thread::sleep(Duration::from_millis(5));
    }
    assert!(wal.waiting_for_space().unwrap().contains("no space"), "{:?}", wal.waiting_for_space());
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "an append completed with no space to write it");
    assert_eq!(wal.poisoned(), None, "a lack of space poisons nothing");

    io.heal();
    rx.recv_timeout(Duration::from_secs(10)).expect("the append completes once space is back").expect("durable");
    assert_eq!(wal.waiting_for_space(), None);
    wal.append_sync(records(3, 1)).expect("appends go on");
    drop(rx);
    // The thread sends its answer before it drops its handle on the log.
    appender.join().expect("the appending thread ends");
    let wal = Arc::try_unwrap(wal).ok().expect("the appending thread is done");
    drop(wal);
    let (_wal, recovered) = open(dir.path(), options(SEGMENT));
    let want: Vec<Vec<u8>> = good.into_iter().chain(waiting).chain(records(3, 1)).collect();
    assert_eq!(payloads(&recovered), want);
}

#[test]
fn a_write_without_space_waits_and_then_completes() {
    a_full_disk_holds_appends_until_space_is_back(FaultyIo::fill_disk_for_writes);
}

#[test]
fn an_fsync_without_space_waits_and_then_completes() {
    a_full_disk_holds_appends_until_space_is_back(FaultyIo::fill_disk_for_syncs);
}
