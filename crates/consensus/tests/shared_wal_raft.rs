//! Three single-voter Rafts over one shared WAL, each with its own state
//! machine, as a node running several groups runs them: they write at the
//! same time, one of them snapshots and purges its log, and after a restart
//! every group is back at exactly its own state.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::BasicNode;
use regina_consensus::types::LogId;
use regina_consensus::{LogStore, Raft, SharedState};
use regina_state::command::PushItem;
use regina_state::{Command, Entry, State};
use regina_storage::RealIo;
use support::no_peers::NoPeers;
use support::{log_dir, open_sm, wal_options, wal_segments};
use tokio::task::JoinSet;

const GROUPS: u16 = 3;
const NODE: u64 = 1;
/// Small enough that the groups' pushes fill several segments.
const SEGMENT_BYTES: u64 = 16 << 10;
const PUSHES: u64 = 120;
const WAIT: Option<Duration> = Some(Duration::from_secs(10));
const T0_MS: u64 = 1_700_000_000_000;

struct Group {
    raft: Raft,
    shared: Arc<SharedState>,
    /// What the state machine held when opened, before Raft touched it.
    opened_applied: Option<LogId>,
}

fn sm_dir(data: &Path, group: u16) -> PathBuf {
    data.join(format!("group-{group}"))
}

async fn start(data: &Path) -> (Vec<Group>, Vec<LogStore>) {
    let logs = LogStore::open_groups(&log_dir(data), GROUPS, wal_options(SEGMENT_BYTES), Arc::new(RealIo))
        .expect("open the groups' log");
    let config = support::manual_snapshot_config();
    let mut groups = Vec::new();
    for log in &logs {
        let mut sm = open_sm(&sm_dir(data, log.group()));
        let shared = sm.shared();
        let opened_applied = sm.applied_state().await.unwrap().0;
        let raft = Raft::new(NODE, config.clone(), NoPeers, log.clone(), sm).await.unwrap();
        if !raft.is_initialized().await.unwrap() {
            raft.initialize(BTreeMap::from([(NODE, BasicNode::default())])).await.unwrap();
        }
        raft.wait(WAIT).current_leader(NODE, "the only voter leads").await.unwrap();
        groups.push(Group { raft, shared, opened_applied });
    }
    (groups, logs)
}

fn push(group: u16, n: u64) -> Entry {
    let mut message_id = [0u8; 16];
    message_id[..2].copy_from_slice(&group.to_be_bytes());
    message_id[8..].copy_from_slice(&n.to_be_bytes());
    let item = PushItem {
        queue: format!("group-{group}"),
        partition: "p".into(),
        transaction_id: format!("tx-{n}"),
        trace_id: None,
        message_id,
        payload: format!("{{\"group\":{group},\"n\":{n}}}").into_bytes(),
    };
    Entry { now_ms: T0_MS + n, command: Command::push(vec![item]) }
}

/// Every group pushes `ns` at the same time; returns each group's last log
/// id.
async fn push_all(groups: &[Group], ns: std::ops::RangeInclusive<u64>) -> Vec<LogId> {
    let mut tasks = JoinSet::new();
    for (g, group) in groups.iter().enumerate() {
        let raft = group.raft.clone();
        let ns = ns.clone();
        tasks.spawn(async move {
            let mut last = None;
            for n in ns {
                last = Some(raft.client_write(push(g as u16, n).into()).await.unwrap().log_id);
            }
            (g, last.expect("a non-empty range"))
        });
    }
    let mut last = vec![None; groups.len()];
    while let Some(done) = tasks.join_next().await {
        let (g, id) = done.unwrap();
        last[g] = Some(id);
    }
    last.into_iter().map(Option::unwrap).collect()
}

fn states(groups: &[Group]) -> Vec<State> {
    groups.iter().map(|g| g.shared.machine.read().state.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_rafts_on_one_wal_survive_a_snapshot_purge_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();

    let (groups, mut logs) = start(data).await;
    let pushed = push_all(&groups, 1..=PUSHES).await;
    let segments_before = wal_segments(data);
    assert!(segments_before.len() >= 4, "the pushes should span several segments: {segments_before:?}");

    // Group 1 snapshots and purges its whole log (nothing is written
    // meanwhile, so the snapshot covers its last push). The other groups
    // still hold theirs from the first segment on: nothing may be released.
    let g1 = &groups[1].raft;
    g1.trigger().snapshot().await.unwrap();
    let snapshot = Some(pushed[1]);
    g1.wait(WAIT).metrics(|m| m.snapshot == snapshot && m.purged == snapshot, "group 1 purged").await.unwrap();
    assert_eq!(logs[1].get_log_state().await.unwrap().last_purged_log_id, snapshot);
    logs[1].wait_for_released_deletions();
    let segments_after = wal_segments(data);
    assert!(segments_before.iter().all(|s| segments_after.contains(s)), "{segments_before:?} -> {segments_after:?}");

    let last = push_all(&groups, PUSHES + 1..=PUSHES + 20).await;
    let before = states(&groups);
    for (g, state) in before.iter().enumerate() {
        assert_eq!(state.message_count(), PUSHES + 20, "group {g}");
    }
    for group in &groups {
        group.raft.shutdown().await.unwrap();
    }
    drop((groups, logs));

    let (groups, _logs) = start(data).await;
    assert_eq!(groups[1].opened_applied, snapshot, "group 1 reopens at its snapshot");
    assert_eq!(groups[0].opened_applied, None);
    for (g, group) in groups.iter().enumerate() {
        let applied = Some(last[g].index);
        group.raft.wait(WAIT).applied_index_at_least(applied, "the log is replayed").await.unwrap();
    }
    assert_eq!(states(&groups), before, "every group is back at its own state");
    for group in &groups {
        group.raft.shutdown().await.unwrap();
    }
}
