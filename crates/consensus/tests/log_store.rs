//! Durability of the log store and the state machine across a reopen,
//! exercised through the openraft traits only.
//!
//! openraft builds the append callback (`LogFlushed`) itself, so appends
//! outside a running Raft go through its test suite's public helpers; the
//! end-to-end cases run a real single-voter Raft over our stores.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::{LogState, RaftLogStorage, RaftStateMachine};
use openraft::testing::log_id;
use openraft::{BasicNode, EntryPayload, Membership, RaftLogReader, RaftSnapshotBuilder, Vote};
use regina_consensus::types::{LogId, RaftEntry, StorageError};
use regina_consensus::{LogStore, Raft, SharedState, StateMachineStore};
use regina_state::command::PushItem;
use regina_state::outcome::PushResult;
use regina_state::{BodyRecord, Command, Entry, Outcome, State};
use support::no_peers::NoPeers;
use support::{open_log, open_sm, view, wal_segments, OurSuite};

/// Tiny segments: a blank entry's record is a few dozen bytes, so even the
/// suite's ten-entry log spans several segment files.
const TINY_SEGMENT_BYTES: u64 = 128;
const NODE: u64 = 1;
/// A fixed clock, so runs are reproducible.
const T0_MS: u64 = 1_700_000_000_000;

fn indexes(entries: &[RaftEntry]) -> Vec<u64> {
    entries.iter().map(|e| e.log_id.index).collect()
}

/// The ids the suite's `feed_10_logs_vote_self` writes: (0,0) then (1,1..=10).
fn fed_log_id(index: u64) -> LogId {
    log_id(if index == 0 { 0 } else { 1 }, 0, index)
}

// ---------------------------------------------------------------------------
// The suite's own scenarios, each followed by a reopen.
// ---------------------------------------------------------------------------

/// Runs one of openraft's suite cases against fresh stores, then drops them,
/// reopens the log and expects to read back exactly what it read before.
async fn check_reopen<F, Fut>(name: &str, case: F)
where
    F: FnOnce(LogStore, StateMachineStore) -> Fut,
    Fut: Future<Output = Result<(), StorageError>>,
{
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let sm = open_sm(dir.path());
    case(log.clone(), sm.clone()).await.unwrap_or_else(|e| panic!("suite case {name} failed: {e}"));
    let before = view(&mut log).await;
    drop((log, sm));

    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let after = view(&mut log).await;
    assert_eq!(after, before, "{name}: the reopened log differs");
}

macro_rules! suite_cases_survive_reopen {
    ($($case:ident),* $(,)?) => {
        mod suite_cases_survive_reopen {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    check_reopen(stringify!($case), OurSuite::$case).await;
                }
            )*
        }
    };
}

suite_cases_survive_reopen!(
    last_membership_in_log,
    last_membership_in_log_multi_step,
    get_membership_from_log_and_empty_sm,
    get_initial_state_with_state,
    get_initial_state_membership_from_log_and_sm,
    get_initial_state_last_log_gt_sm,
    get_initial_state_last_log_lt_sm,
    get_initial_state_log_ids,
    get_initial_state_re_apply_committed,
    save_vote,
    get_log_entries,
    get_log_state,
    last_id_in_log,
    purge_logs_upto_0,
    purge_logs_upto_5,
    purge_logs_upto_20,
    delete_logs_since_11,
    delete_logs_since_0,
    append_to_log,
);

// ---------------------------------------------------------------------------
// Append, vote, truncate, purge.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_entries_and_vote_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    OurSuite::feed_10_logs_vote_self(&mut log).await.unwrap();
    let before = view(&mut log).await;
    drop(log);

    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let after = view(&mut log).await;
    assert_eq!(after, before);
    assert_eq!(after.state, LogState { last_purged_log_id: None, last_log_id: Some(fed_log_id(10)) });
    let ids: Vec<LogId> = after.entries.iter().map(|e| e.log_id).collect();
    assert_eq!(ids, (0..=10).map(fed_log_id).collect::<Vec<_>>());
    assert!(after.entries.iter().all(|e| matches!(e.payload, EntryPayload::Blank)));
    assert_eq!(after.vote, Some(Vote::new(1, 0)));

    // Nothing is cached after a reopen: a sub-range comes from the WAL.
    let mid = log.try_get_log_entries(3..7).await.unwrap();
    assert_eq!(indexes(&mid), vec![3, 4, 5, 6]);

    // A later, committed vote replaces the first one durably.
    let committed = Vote::new_committed(2, NODE);
    log.save_vote(&committed).await.unwrap();
    drop(log);
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    assert_eq!(log.read_vote().await.unwrap(), Some(committed));
    assert_eq!(indexes(&view(&mut log).await.entries), (0..=10).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    OurSuite::feed_10_logs_vote_self(&mut log).await.unwrap();
    log.truncate(fed_log_id(6)).await.unwrap();
    assert_eq!(indexes(&view(&mut log).await.entries), vec![0, 1, 2, 3, 4, 5]);
    drop(log);

    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let v = view(&mut log).await;
    assert_eq!(v.state, LogState { last_purged_log_id: None, last_log_id: Some(fed_log_id(5)) });
    assert_eq!(indexes(&v.entries), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(v.vote, Some(Vote::new(1, 0)));

    // Entries appended after a truncation win over it on replay.
    OurSuite::feed_10_logs_vote_self(&mut log).await.unwrap();
    drop(log);
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let v = view(&mut log).await;
    assert_eq!(indexes(&v.entries), (0..=10).collect::<Vec<_>>());
    assert_eq!(v.state.last_log_id, Some(fed_log_id(10)));

    // Truncating everything leaves an empty log, also after a reopen.
    log.truncate(fed_log_id(0)).await.unwrap();
    drop(log);
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let v = view(&mut log).await;
    assert_eq!(v.state, LogState::default());
    assert!(v.entries.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_survives_reopen_and_releases_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    OurSuite::feed_10_logs_vote_self(&mut log).await.unwrap();
    let segments_before = wal_segments(dir.path());
    assert_eq!(segments_before.first(), Some(&0));
    assert!(
        segments_before.len() >= 3,
        "eleven entries should span several {TINY_SEGMENT_BYTES}-byte segments: {segments_before:?}"
    );

    log.purge(fed_log_id(4)).await.unwrap();
    log.wait_for_released_deletions();
    let segments_after = wal_segments(dir.path());
    assert!(
        !segments_after.contains(&0),
        "the first segment holds only purged entries and must be released: {segments_after:?}"
    );
    // The preparer may add the next spare segment at any moment, so the
    // count can stay level: what must hold is that only leading segments went.
    let released: Vec<u64> = segments_before.iter().filter(|s| !segments_after.contains(s)).copied().collect();
    assert!(
        released.iter().all(|r| segments_after.iter().all(|kept| r < kept)),
        "only segments before every kept one are released: before {segments_before:?}, after {segments_after:?}"
    );
    let before = view(&mut log).await;
    assert_eq!(before.state, LogState { last_purged_log_id: Some(fed_log_id(4)), last_log_id: Some(fed_log_id(10)) });
    assert_eq!(indexes(&before.entries), vec![5, 6, 7, 8, 9, 10]);
    drop(log);

    // Purged entries still in a kept segment are not resurrected, the kept
    // ones are all readable, and the vote beside the purge point survives.
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let after = view(&mut log).await;
    assert_eq!(after, before);
    assert_eq!(after.vote, Some(Vote::new(1, 0)));
    assert_eq!(wal_segments(dir.path()), segments_after);

    // A purge never goes back.
    log.purge(fed_log_id(2)).await.unwrap();
    assert_eq!(view(&mut log).await, after);

    // Purging past the last entry empties the log; the purge point is then
    // also the last log id, and that survives a reopen.
    log.purge(log_id(1, 0, 20)).await.unwrap();
    log.wait_for_released_deletions();
    let before = view(&mut log).await;
    assert_eq!(
        before.state,
        LogState { last_purged_log_id: Some(log_id(1, 0, 20)), last_log_id: Some(log_id(1, 0, 20)) }
    );
    assert!(before.entries.is_empty());
    // With no entry left, every segment before the active one holds only
    // purged records; what may remain is the active segment and the one
    // spare the WAL keeps ready.
    let segments_all_purged = wal_segments(dir.path());
    assert!(
        segments_all_purged.len() <= 2,
        "purging every entry must release the segments behind the active one: \
         {segments_after:?} -> {segments_all_purged:?}"
    );
    drop(log);
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    assert_eq!(view(&mut log).await, before);

    // A vote rewrites the meta file that also holds the purge point; both
    // must survive that.
    let vote = Vote::new(3, NODE);
    log.save_vote(&vote).await.unwrap();
    drop(log);
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    let after = view(&mut log).await;
    assert_eq!(after.state, before.state);
    assert!(after.entries.is_empty());
    assert_eq!(after.vote, Some(vote));
}

/// A purge only queues the deletion of the segments it releases. A crash
/// before the unlink reached the disk leaves such a segment behind: the
/// next open must skip its purged entries, and a later purge delete it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_segment_a_crash_kept_is_skipped_and_released_again() {
    let dir = tempfile::tempdir().unwrap();
    let first_segment = support::wal_dir(dir.path()).join(format!("{:020}.wal", 0));
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    OurSuite::feed_10_logs_vote_self(&mut log).await.unwrap();
    let kept_by_the_crash = std::fs::read(&first_segment).unwrap();

    log.purge(fed_log_id(4)).await.unwrap();
    log.wait_for_released_deletions();
    assert!(!first_segment.exists(), "the first segment holds only purged entries");
    let before = view(&mut log).await;
    drop(log);

    // The unlink undone, as a crash before the directory's sync undoes it.
    std::fs::write(&first_segment, &kept_by_the_crash).unwrap();
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    assert_eq!(view(&mut log).await, before, "purged entries came back from a released segment");
    assert!(wal_segments(dir.path()).contains(&0));

    log.purge(fed_log_id(5)).await.unwrap();
    log.wait_for_released_deletions();
    assert!(!first_segment.exists(), "the next purge must release the segment again");
    let after = view(&mut log).await;
    assert_eq!(indexes(&after.entries), vec![6, 7, 8, 9, 10]);
    drop(log);
    let mut log = open_log(dir.path(), TINY_SEGMENT_BYTES);
    assert_eq!(view(&mut log).await, after);
}

// ---------------------------------------------------------------------------
// The state machine: snapshots and body files.
// ---------------------------------------------------------------------------

fn push_item(n: u64) -> PushItem {
    let mut message_id = [0u8; 16];
    message_id[..8].copy_from_slice(&n.to_be_bytes());
    PushItem {
        queue: ["orders", "emails"][(n % 2) as usize].to_string(),
        partition: format!("p{}", n % 3),
        transaction_id: format!("tx-{n}"),
        trace_id: [Some([n as u8; 16]), None, None, None, None][(n % 5) as usize],
        message_id,
        payload: format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat((n % 7 * 30) as usize)).into_bytes(),
    }
}

fn push_entry(n: u64) -> Entry {
    Entry { now_ms: T0_MS + n, command: Command::push(vec![push_item(n)]) }
}

fn normal(index: u64, entry: Entry) -> RaftEntry {
    RaftEntry { log_id: log_id(1, NODE, index), payload: EntryPayload::Normal(entry.into()) }
}

fn membership(index: u64) -> RaftEntry {
    RaftEntry {
        log_id: log_id(1, NODE, index),
        payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([NODE])], None)),
    }
}

/// Checks that every pushed message's body reads back as written.
fn assert_bodies(shared: &SharedState, pushed: &[(u64, PushResult)]) {
    for (n, r) in pushed {
        let bytes = shared.read_body(r.pos, r.len).unwrap_or_else(|e| panic!("body of push {n}: {e}"));
        let body = BodyRecord::decode(&bytes).unwrap_or_else(|| panic!("body of push {n}"));
        let item = push_item(*n);
        assert_eq!(body.id, item.message_id, "push {n}");
        assert_eq!(body.transaction_id, item.transaction_id, "push {n}");
        assert_eq!(body.trace_id, item.trace_id, "push {n}");
        assert_eq!(body.payload, item.payload, "push {n}");
    }
}

fn push_results(ns: impl IntoIterator<Item = u64>, outcomes: Vec<Outcome>) -> Vec<(u64, PushResult)> {
    ns.into_iter()
        .zip(outcomes)
        .map(|(n, o)| match o {
            Outcome::Push(mut r) if r.len() == 1 => (n, r.remove(0)),
            other => panic!("push {n} answered {other:?}"),
        })
        .collect()
}

fn first_body_file_len(data: &Path) -> u64 {
    match std::fs::metadata(data.join("bodies").join(format!("{:020}.body", 0))) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("body file: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_is_loaded_on_reopen_and_bodies_are_cut_back_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = open_sm(dir.path());

    // Index 1 is the membership; push n sits at index n + 1.
    let mut entries = vec![membership(1)];
    entries.extend((1..=40).map(|n| normal(n + 1, push_entry(n))));
    let outcomes = sm.apply(entries).await.unwrap();
    let mut pushed = push_results(1..=40, outcomes.into_iter().skip(1).collect());

    let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let snap_state = sm.shared().machine.read().state.clone();
    assert_eq!(snap.meta.last_log_id, Some(log_id(1, NODE, 41)));
    assert_eq!(snap.meta.last_membership.log_id(), &Some(log_id(1, NODE, 1)));
    // openraft keeps only a built snapshot's meta; its data is the file.
    let saved = sm.get_current_snapshot().await.unwrap().expect("the built snapshot is saved");
    assert_eq!(saved.meta, snap.meta);
    assert_eq!(State::decode(saved.snapshot.get_ref()).unwrap(), snap_state);

    // The tail after the snapshot: only the log could rewrite these bodies.
    let tail: Vec<RaftEntry> = (41..=60).map(|n| normal(n + 1, push_entry(n))).collect();
    let outcomes = sm.apply(tail.clone()).await.unwrap();
    pushed.extend(push_results(41..=60, outcomes));
    let full_state = sm.shared().machine.read().state.clone();
    let full_len = first_body_file_len(dir.path());
    assert!(full_state.next_body_pos > snap_state.next_body_pos);
    assert_eq!(full_len, full_state.next_body_pos);
    assert_bodies(&sm.shared(), &pushed);
    drop(sm);

    let mut sm = open_sm(dir.path());
    assert_eq!(
        first_body_file_len(dir.path()),
        snap_state.next_body_pos,
        "bodies past the snapshot must be cut on reopen"
    );
    let (last_applied, last_membership) = sm.applied_state().await.unwrap();
    assert_eq!(last_applied, snap.meta.last_log_id);
    assert_eq!(last_membership, snap.meta.last_membership);
    assert_eq!(sm.shared().machine.read().state, snap_state);
    // The first ask is openraft's start, which keeps only the meta: the
    // file just decoded is not read again for it.
    let at_start = sm.get_current_snapshot().await.unwrap().expect("a snapshot");
    assert_eq!(at_start.meta, snap.meta);
    assert!(at_start.snapshot.get_ref().is_empty());
    // Were that answer handed to a transport, it reads the data first.
    let sent = sm.shared().snapshot_to_send(at_start).unwrap();
    assert_eq!(sent.meta, snap.meta);
    assert_eq!(State::decode(sent.snapshot.get_ref()).unwrap(), snap_state);
    // Every later ask (a follower to catch up) reads the file.
    let current = sm.get_current_snapshot().await.unwrap().expect("a snapshot");
    assert_eq!(current.meta, snap.meta);
    assert_eq!(State::decode(current.snapshot.get_ref()).unwrap(), snap_state);
    assert_bodies(&sm.shared(), &pushed[..40]);

    // Replaying the tail rewrites the cut bodies at the same positions.
    let outcomes = sm.apply(tail).await.unwrap();
    assert_eq!(push_results(41..=60, outcomes), pushed[40..].to_vec());
    assert_eq!(sm.shared().machine.read().state, full_state);
    assert_eq!(first_body_file_len(dir.path()), full_len);
    assert_bodies(&sm.shared(), &pushed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_snapshot_reopen_starts_empty_and_cuts_every_body() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = open_sm(dir.path());
    sm.apply((1..=10).map(|n| normal(n, push_entry(n)))).await.unwrap();
    assert!(first_body_file_len(dir.path()) > 0);
    drop(sm);

    let mut sm = open_sm(dir.path());
    assert_eq!(first_body_file_len(dir.path()), 0);
    let (last_applied, last_membership) = sm.applied_state().await.unwrap();
    assert_eq!(last_applied, None);
    assert_eq!(last_membership, Default::default());
    assert_eq!(sm.shared().machine.read().state, State::new());
    assert!(sm.get_current_snapshot().await.unwrap().is_none());
}

// ---------------------------------------------------------------------------
// A real single-voter Raft over our stores.
// ---------------------------------------------------------------------------

/// Small enough that a few hundred pushes fill several segments.
const RAFT_SEGMENT_BYTES: u64 = 16 << 10;
const WAIT: Option<Duration> = Some(Duration::from_secs(10));

struct Started {
    raft: Raft,
    log: LogStore,
    shared: Arc<SharedState>,
    /// What the state machine held when opened, before Raft touched it.
    opened_applied: Option<LogId>,
}

async fn start(data: &Path) -> Started {
    let log = open_log(data, RAFT_SEGMENT_BYTES);
    let mut sm = open_sm(data);
    let shared = sm.shared();
    let opened_applied = sm.applied_state().await.unwrap().0;
    let config = support::manual_snapshot_config();
    // As a node starts: the re-apply inside `Raft::new` reads ahead.
    let reading_ahead = log.read_ahead();
    let raft = Raft::new(NODE, config, NoPeers, log.clone(), sm).await.unwrap();
    drop(reading_ahead);
    if !raft.is_initialized().await.unwrap() {
        raft.initialize(BTreeMap::from([(NODE, BasicNode::default())])).await.unwrap();
    }
    raft.wait(WAIT).current_leader(NODE, "the only voter leads").await.unwrap();
    Started { raft, log, shared, opened_applied }
}

/// Writes one entry; answers once it is durable and applied.
async fn write(raft: &Raft, entry: Entry) -> (LogId, Outcome) {
    let resp = raft.client_write(entry.into()).await.unwrap();
    (resp.log_id, resp.data)
}

/// Pushes messages `ns` one entry each; returns their results and the log id
/// of the last one.
async fn push_range(raft: &Raft, ns: std::ops::RangeInclusive<u64>) -> (Vec<(u64, PushResult)>, LogId) {
    let mut out = Vec::new();
    let mut last = None;
    for n in ns.clone() {
        let (id, outcome) = write(raft, push_entry(n)).await;
        out.push(outcome);
        last = Some(id);
    }
    (push_results(ns, out), last.expect("a non-empty range"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_state_survives_snapshot_purge_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();

    let Started { raft, mut log, shared, .. } = start(data).await;
    let (mut pushed, last_pushed) = push_range(&raft, 1..=300).await;
    let segments_before = wal_segments(data);
    assert!(segments_before.len() >= 4, "three hundred pushes should span several segments: {segments_before:?}");

    // Nothing is written meanwhile, so the snapshot covers the last push
    // and, keeping no log behind it, the purge reaches it too.
    raft.trigger().snapshot().await.unwrap();
    let snapshot_id = Some(last_pushed);
    raft.wait(WAIT)
        .metrics(|m| m.snapshot == snapshot_id && m.purged == snapshot_id, "snapshot built and log purged")
        .await
        .unwrap();
    log.wait_for_released_deletions();
    let segments_after = wal_segments(data);
    assert!(
        !segments_after.contains(&0) && segments_after.len() < segments_before.len(),
        "the purge must release old segments: before {segments_before:?}, after {segments_after:?}"
    );

    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, snapshot_id);
    assert!(log.try_get_log_entries(..).await.unwrap().is_empty());

    let (more, last_pushed) = push_range(&raft, 301..=500).await;
    pushed.extend(more);
    let before = shared.machine.read().state.clone();
    assert_eq!(before.message_count(), 500);
    assert_bodies(&shared, &pushed);

    raft.shutdown().await.unwrap();
    drop((raft, log, shared));

    let Started { raft, mut log, shared, opened_applied } = start(data).await;
    assert_eq!(opened_applied, snapshot_id, "the state machine reopens at its snapshot");
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, snapshot_id);
    assert!(!wal_segments(data).contains(&0));

    // The new leader's blank entry commits the tail, which is then applied.
    raft.wait(WAIT).applied_index_at_least(Some(last_pushed.index), "the tail is applied").await.unwrap();
    assert_eq!(shared.machine.read().state, before);
    assert_bodies(&shared, &pushed);

    // A write after the election: applied on top of exactly that state.
    let (_, outcome) = write(&raft, Entry { now_ms: before.now_ms, command: Command::Noop }).await;
    assert_eq!(outcome, Outcome::Done);
    let mut expected = before;
    expected.applied_entries += 1;
    assert_eq!(shared.machine.read().state, expected);
    expected.check_invariants().unwrap();

    raft.shutdown().await.unwrap();
}

/// Entries handed over by the read-ahead are the ones the WAL holds,
/// whatever order they are asked for in: forward in openraft's chunks (the
/// re-apply), backward from the end (its search for a membership change),
/// again, or one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_read_ahead_are_the_entries_in_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let Started { raft, log, shared, .. } = start(data).await;
    let (_, last_pushed) = push_range(&raft, 1..=300).await;
    raft.shutdown().await.unwrap();
    drop((raft, log, shared));

    let mut log = open_log(data, RAFT_SEGMENT_BYTES);
    let in_wal = log.try_get_log_entries(..).await.unwrap();
    assert_eq!(in_wal.last().map(|e| e.log_id), Some(last_pushed));
    drop(log);
    let as_text = |entries: &[RaftEntry]| entries.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>();

    let mut log = open_log(data, RAFT_SEGMENT_BYTES);
    let reading_ahead = log.read_ahead();
    let first = in_wal[0].log_id.index;
    let end = last_pushed.index + 1;
    let mut forward = Vec::new();
    let mut at = first + 10;
    while at < end - 100 {
        let chunk = log.try_get_log_entries(at..(at + 64).min(end - 100)).await.unwrap();
        at += chunk.len() as u64;
        forward.extend(chunk);
    }
    let mut backward = Vec::new();
    let mut to = end;
    while to > first {
        let mut chunk = log.try_get_log_entries(to.saturating_sub(64).max(first)..to).await.unwrap();
        to -= chunk.len() as u64;
        chunk.extend(backward);
        backward = chunk;
    }
    let one = log.try_get_log_entries(first + 20..=first + 20).await.unwrap();
    drop(reading_ahead);
    let after = log.try_get_log_entries(..).await.unwrap();

    let stop = (end - 100 - first) as usize;
    assert_eq!(as_text(&forward), as_text(&in_wal[10..stop]));
    assert_eq!(as_text(&backward), as_text(&in_wal));
    assert_eq!(as_text(&one), as_text(&in_wal[20..21]));
    assert_eq!(as_text(&after), as_text(&in_wal));
}

/// A restart learns how far the log was committed, so openraft applies
/// those entries as it starts rather than searching them all for a
/// membership change first; a remembered id whose entry is not in the log
/// (lost, or replaced after a truncation) is not believed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_log_id_survives_a_restart_only_with_its_entry() {
    use regina_consensus::committed_file::{CommittedFile, PERSIST_EVERY_ENTRIES};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let Started { raft, log, shared, .. } = start(data).await;
    let (_, last_pushed) = push_range(&raft, 1..=PERSIST_EVERY_ENTRIES + 20).await;
    let before = shared.machine.read().state.clone();
    raft.shutdown().await.unwrap();
    drop((raft, log, shared));

    let mut log = open_log(data, RAFT_SEGMENT_BYTES);
    let committed = log.read_committed().await.unwrap().expect("a committed log id is remembered");
    assert!(committed.index >= PERSIST_EVERY_ENTRIES && committed.index <= last_pushed.index, "{committed:?}");
    let entry = log.try_get_log_entries(committed.index..=committed.index).await.unwrap();
    assert_eq!(entry[0].log_id, committed);
    drop(log);

    // The restart applies up to it inside `Raft::new`, then the rest.
    let Started { raft, shared, .. } = start(data).await;
    raft.wait(WAIT).applied_index_at_least(Some(last_pushed.index), "the tail is applied").await.unwrap();
    assert_eq!(shared.machine.read().state.message_count(), before.message_count());
    raft.shutdown().await.unwrap();
    drop((raft, shared));

    // The same index under another term is another entry: not believed.
    let file = support::log_dir(data).join("raft-committed");
    std::fs::remove_file(&file).unwrap();
    let foreign = LogId::new(openraft::CommittedLeaderId::new(committed.leader_id.term + 7, NODE), committed.index);
    CommittedFile::open(&support::log_dir(data), 0).save(foreign);
    assert!(open_log(data, RAFT_SEGMENT_BYTES).read_committed().await.unwrap().is_none());
    // Nor is one past the end of the log.
    std::fs::remove_file(&file).unwrap();
    let past = LogId::new(committed.leader_id, last_pushed.index + 1_000);
    CommittedFile::open(&support::log_dir(data), 0).save(past);
    assert!(open_log(data, RAFT_SEGMENT_BYTES).read_committed().await.unwrap().is_none());
}
