//! Several Raft groups over one WAL: each recovers exactly its own log, vote
//! and purge point; a purge releases only segments no group needs; appends
//! of different groups share fsyncs; and the directory refuses to open with
//! fewer groups than it holds, while a single-group log opens as group 0.
//!
//! Appends go through openraft's test suite helpers (openraft builds the
//! append callback itself), so every group writes the suite's entries
//! (0,0) then (1,1..=10); the groups differ in what they truncate, purge
//! and vote.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use openraft::storage::{LogState, RaftLogStorage};
use openraft::testing::log_id;
use openraft::{RaftLogReader, Vote};
use regina_consensus::types::{LogId, RaftEntry};
use regina_consensus::LogStore;
use regina_storage::{FaultyIo, Io};
use support::{log_dir, open_groups, open_log, view, wal_options, wal_segments, LogView, OurSuite, SEGMENT_BYTES};

/// A blank record is a few dozen bytes: three to a segment.
const TINY_SEGMENT_BYTES: u64 = 128;

async fn views(logs: &mut [LogStore]) -> Vec<LogView> {
    let mut out = Vec::new();
    for log in logs {
        out.push(view(log).await);
    }
    out
}

fn empty_view() -> LogView {
    LogView { state: LogState::default(), entries: Vec::new(), vote: None }
}

/// The ids the suite's `feed_10_logs_vote_self` writes: (0,0) then (1,1..=10).
fn fed(index: u64) -> LogId {
    log_id(if index == 0 { 0 } else { 1 }, 0, index)
}

fn indexes(entries: &[RaftEntry]) -> Vec<u64> {
    entries.iter().map(|e| e.log_id.index).collect()
}

async fn feed(log: &mut LogStore) {
    OurSuite::feed_10_logs_vote_self(log).await.expect("append the suite's entries");
}

fn three(logs: Vec<LogStore>) -> [LogStore; 3] {
    logs.try_into().unwrap_or_else(|v: Vec<LogStore>| panic!("expected 3 groups, got {}", v.len()))
}

// ---------------------------------------------------------------------------
// Recovery splits the WAL by group.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_groups_each_recover_their_own_entries_vote_and_purge_point() {
    let dir = tempfile::tempdir().unwrap();
    let [mut g0, mut g1, mut g2] = three(open_groups(dir.path(), 3, TINY_SEGMENT_BYTES));

    // One task, three groups: each waits for its fsyncs while the others
    // append, so their records interleave in the WAL.
    let work0 = async {
        feed(&mut g0).await;
        g0.truncate(fed(7)).await.unwrap();
        g0.purge(fed(2)).await.unwrap();
        g0.save_vote(&Vote::new(5, 1)).await.unwrap();
    };
    let work1 = async {
        feed(&mut g1).await;
        g1.purge(fed(4)).await.unwrap();
        g1.save_vote(&Vote::new_committed(3, 2)).await.unwrap();
    };
    let work2 = async {
        feed(&mut g2).await;
        g2.truncate(fed(3)).await.unwrap();
        // The same ids again, appended after the truncation: they win.
        feed(&mut g2).await;
        g2.truncate(fed(9)).await.unwrap();
        g2.purge(fed(0)).await.unwrap();
        g2.save_vote(&Vote::new(7, 3)).await.unwrap();
    };
    tokio::join!(work0, work1, work2);

    let expected = [
        (3..=6, Some(fed(2)), Some(fed(6)), Vote::new(5, 1)),
        (5..=10, Some(fed(4)), Some(fed(10)), Vote::new_committed(3, 2)),
        (1..=8, Some(fed(0)), Some(fed(8)), Vote::new(7, 3)),
    ];
    let mut logs = [g0, g1, g2];
    let before = views(&mut logs).await;
    for (g, (v, (kept, purged, last, vote))) in before.iter().zip(expected).enumerate() {
        assert_eq!(indexes(&v.entries), kept.clone().collect::<Vec<_>>(), "group {g}");
        assert_eq!(v.entries.iter().map(|e| e.log_id).collect::<Vec<_>>(), kept.map(fed).collect::<Vec<_>>());
        assert_eq!(v.state, LogState { last_purged_log_id: purged, last_log_id: last }, "group {g}");
        assert_eq!(v.vote, Some(vote), "group {g}");
    }
    drop(logs);

    let mut logs = open_groups(dir.path(), 3, TINY_SEGMENT_BYTES);
    assert_eq!(views(&mut logs).await, before, "every group recovers exactly what it held");
    // Reads after the reopen come from the WAL (nothing is cached), and a
    // sub-range of one group reads only that group's records.
    let mid = logs[2].try_get_log_entries(4..7).await.unwrap();
    assert_eq!(indexes(&mid), vec![4, 5, 6]);
}

// ---------------------------------------------------------------------------
// Purge: a segment goes only when no group keeps an entry in it.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purging_one_group_keeps_the_segments_another_group_still_needs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let [mut g0, mut g1, mut g2] = three(open_groups(data, 3, TINY_SEGMENT_BYTES));
    // Group 1 fills the first segments, group 0 the next ones, group 2 the
    // last ones.
    feed(&mut g1).await;
    feed(&mut g0).await;
    feed(&mut g2).await;
    let written = wal_segments(data);
    assert_eq!(written.first(), Some(&0));
    assert!(written.len() >= 10, "33 entries should span many {TINY_SEGMENT_BYTES}-byte segments: {written:?}");

    // Group 0 drops everything it holds, but group 1's oldest entry is in
    // the first segment: nothing may go.
    g0.purge(fed(10)).await.unwrap();
    g0.wait_for_released_deletions();
    let after = wal_segments(data);
    assert!(written.iter().all(|s| after.contains(s)), "no segment may go yet: {written:?} -> {after:?}");
    drop((g0, g1, g2));

    // Proof that group 1's entries are on disk, not merely cached.
    let [mut g0, mut g1, mut g2] = three(open_groups(data, 3, TINY_SEGMENT_BYTES));
    assert_eq!(indexes(&view(&mut g1).await.entries), (0..=10).collect::<Vec<_>>());
    assert_eq!(indexes(&view(&mut g2).await.entries), (0..=10).collect::<Vec<_>>());
    let v0 = view(&mut g0).await;
    assert_eq!(v0.state, LogState { last_purged_log_id: Some(fed(10)), last_log_id: Some(fed(10)) });
    assert!(v0.entries.is_empty());

    // Group 1's purge releases what only its purged entries occupied.
    g1.purge(fed(4)).await.unwrap();
    g1.wait_for_released_deletions();
    let after_g1 = wal_segments(data);
    assert!(!after_g1.contains(&0), "the first segment holds only purged entries: {after_g1:?}");

    // Once group 1 keeps nothing either, the oldest kept entry is group 2's
    // first: every segment before it goes, none from it on.
    g1.purge(fed(10)).await.unwrap();
    g1.wait_for_released_deletions();
    let after_all_but_g2 = wal_segments(data);
    assert!(after_all_but_g2.len() < after_g1.len(), "{after_g1:?} -> {after_all_but_g2:?}");
    drop((g0, g1, g2));
    let mut logs = open_groups(data, 3, TINY_SEGMENT_BYTES);
    let reopened = views(&mut logs).await;
    assert!(reopened[0].entries.is_empty() && reopened[1].entries.is_empty());
    assert_eq!(reopened[1].state.last_purged_log_id, Some(fed(10)));
    assert_eq!(indexes(&reopened[2].entries), (0..=10).collect::<Vec<_>>(), "group 2 lost entries");

    // No group keeps anything: only the active segment and a spare remain.
    logs[2].purge(fed(10)).await.unwrap();
    logs[2].wait_for_released_deletions();
    let left = wal_segments(data);
    assert!(left.len() <= 2, "{after_all_but_g2:?} -> {left:?}");
    let before = views(&mut logs).await;
    drop(logs);
    let mut logs = open_groups(data, 3, TINY_SEGMENT_BYTES);
    assert_eq!(views(&mut logs).await, before);
}

// ---------------------------------------------------------------------------
// Group commit across groups.
// ---------------------------------------------------------------------------

/// [`FaultyIo`] (for its sync counter) whose syncs wait while the gate is
/// closed, telling the test when one starts waiting.
struct GatedIo {
    io: FaultyIo,
    closed: Mutex<bool>,
    opened: Condvar,
    waiting: mpsc::Sender<()>,
}

impl GatedIo {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed;
        self.opened.notify_all();
    }
}

impl Io for GatedIo {
    fn write_at(&self, file: &std::fs::File, buf: &[u8], pos: u64) -> std::io::Result<()> {
        self.io.write_at(file, buf, pos)
    }

    fn sync_data(&self, file: &std::fs::File) -> std::io::Result<()> {
        let mut closed = self.closed.lock().unwrap();
        if *closed {
            let _ = self.waiting.send(());
            while *closed {
                closed = self.opened.wait(closed).unwrap();
            }
        }
        drop(closed);
        self.io.sync_data(file)
    }
}

/// Starts `fut` and leaves it at its first wait. The suite's `feed` hands
/// its first entry to `append`, which queues it in the WAL without waiting,
/// and then waits for the flush; dropping it there leaves the append queued.
fn start(fut: impl Future) {
    let mut fut = pin!(fut);
    let poll = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(poll.is_pending(), "the append cannot be flushed before the writer is let go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_from_several_groups_share_one_fsync() {
    const GROUPS: u16 = 8;
    let dir = tempfile::tempdir().unwrap();
    let (waiting, waits) = mpsc::channel();
    let io = Arc::new(GatedIo { io: FaultyIo::new(), closed: Mutex::new(true), opened: Condvar::new(), waiting });
    let options = wal_options(SEGMENT_BYTES);
    let mut logs = LogStore::open_groups(&log_dir(dir.path()), GROUPS, options.clone(), io.clone()).unwrap();
    let syncs_before = io.io.syncs();

    // A truncation is queued without waiting for it: the writer takes it
    // alone and stops in its fsync, so everything after queues up.
    logs[0].truncate(log_id(1, 0, 1)).await.unwrap();
    waits.recv_timeout(Duration::from_secs(10)).expect("the writer reaches the gated fsync");
    for log in &mut logs {
        start(OurSuite::feed_10_logs_vote_self(log));
    }
    io.set_closed(false);
    // Dropping the stores drains the WAL's queue before its writer stops.
    drop(logs);

    let syncs = io.io.syncs() - syncs_before;
    assert_eq!(syncs, 2, "one fsync for the truncation, one for the {GROUPS} groups' appends");

    let mut logs = LogStore::open_groups(&log_dir(dir.path()), GROUPS, options, Arc::new(FaultyIo::new())).unwrap();
    for (g, v) in views(&mut logs).await.into_iter().enumerate() {
        assert_eq!(v.entries.iter().map(|e| e.log_id).collect::<Vec<_>>(), vec![fed(0)], "group {g}");
    }
}

// ---------------------------------------------------------------------------
// Opening: fewer groups than the data holds, and a single-group log.
// ---------------------------------------------------------------------------

fn open_err(data: &Path, groups: u16) -> String {
    match LogStore::open_groups(&log_dir(data), groups, wal_options(SEGMENT_BYTES), Arc::new(FaultyIo::new())) {
        Ok(_) => panic!("opening {groups} group(s) must fail"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_with_fewer_groups_than_the_data_holds_fails() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let [mut g0, _g1, mut g2] = three(open_groups(data, 3, SEGMENT_BYTES));
    feed(&mut g0).await;
    feed(&mut g2).await;
    let before = view(&mut g2).await;
    drop((g0, _g1, g2));

    for groups in [1, 2] {
        let err = open_err(data, groups);
        assert!(
            err.contains("holds Raft group 2")
                && err.contains(&format!("opened with {groups} group(s)"))
                && err.contains("at least 3 groups"),
            "{err}"
        );
    }
    let err = LogStore::open(&log_dir(data), wal_options(SEGMENT_BYTES), Arc::new(FaultyIo::new())).err();
    assert!(err.is_some_and(|e| e.contains("holds Raft group 2")));
    assert!(open_err(data, 0).contains("1 to 64 Raft groups"));
    assert!(open_err(data, 65).contains("1 to 64 Raft groups"));

    // The refused opens changed nothing.
    let mut logs = open_groups(data, 3, SEGMENT_BYTES);
    assert_eq!(view(&mut logs[2]).await, before);
    // More groups than the data holds is fine: the new ones start empty.
    drop(logs);
    let mut logs = open_groups(data, 5, SEGMENT_BYTES);
    assert_eq!(view(&mut logs[2]).await, before);
    assert_eq!(view(&mut logs[4]).await, empty_view());
    drop(logs);

    // A group that only voted has no WAL record, but its vote file counts.
    let dir = tempfile::tempdir().unwrap();
    let mut logs = open_groups(dir.path(), 2, SEGMENT_BYTES);
    logs[1].save_vote(&Vote::new(2, 1)).await.unwrap();
    drop(logs);
    let err = open_err(dir.path(), 1);
    assert!(err.contains("holds Raft group 1") && err.contains("raft-meta-1"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_group_log_opens_as_group_0_of_three() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut log = open_log(data, TINY_SEGMENT_BYTES);
    feed(&mut log).await;
    log.truncate(fed(8)).await.unwrap();
    log.purge(fed(2)).await.unwrap();
    log.save_vote(&Vote::new(4, 1)).await.unwrap();
    let before = view(&mut log).await;
    assert_eq!(indexes(&before.entries), (3..=7).collect::<Vec<_>>());
    drop(log);

    let [mut g0, mut g1, mut g2] = three(open_groups(data, 3, TINY_SEGMENT_BYTES));
    assert_eq!(view(&mut g0).await, before);
    assert_eq!(view(&mut g1).await, empty_view());
    assert_eq!(view(&mut g2).await, empty_view());

    // Another group's work leaves group 0 as it was, across a reopen too.
    feed(&mut g1).await;
    g1.purge(fed(5)).await.unwrap();
    assert_eq!(view(&mut g0).await, before);
    drop((g0, g1, g2));
    let mut logs = open_groups(data, 3, TINY_SEGMENT_BYTES);
    assert_eq!(view(&mut logs[0]).await, before);
    assert_eq!(indexes(&view(&mut logs[1]).await.entries), (6..=10).collect::<Vec<_>>());
    drop(logs);

    // Now the directory holds group 1, so the single-group form refuses it.
    let err = LogStore::open(&log_dir(data), wal_options(TINY_SEGMENT_BYTES), Arc::new(FaultyIo::new())).err();
    assert!(err.is_some_and(|e| e.contains("holds Raft group 1")));
}
