//! A snapshot that finds the disk full waits for space instead of failing:
//! openraft stops a group whose storage fails, so a follower installing a
//! leader's snapshot on a full disk would otherwise leave its group for
//! good. Once space is back the install completes and survives a reopen.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, SnapshotMeta, StoredMembership};
use regina_consensus::state_machine::StateMachineStore;
use regina_consensus::types::LogId;
use regina_state::command::PushItem;
use regina_state::{Command, Entry, State};
use regina_storage::FaultyIo;

fn leader_state() -> State {
    let mut state = State::new();
    let item = leader_state_item(1);
    state.apply(&Entry { now_ms: 1_700_000_000_000, command: Command::push(vec![item]) });
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installing_a_snapshot_on_a_full_disk_waits_for_space() {
    let dir = tempfile::tempdir().unwrap();
    let io = Arc::new(FaultyIo::new());
    let mut sm = StateMachineStore::open_with_io(dir.path(), io.clone()).unwrap();
    let state = leader_state();
    let last = LogId::new(CommittedLeaderId::new(3, 1), 40);
    let meta = SnapshotMeta {
        last_log_id: Some(last),
        last_membership: StoredMembership::default(),
        snapshot_id: "00000000000000000040-0000000001".into(),
    };

    io.fill_disk_for_writes();
    let (m, data) = (meta.clone(), state.encode());
    let install = tokio::spawn(async move { sm.install_snapshot(&m, Box::new(Cursor::new(data))).await.map(|()| sm) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!install.is_finished(), "the install waits for space rather than failing its group");

    io.heal();
    let sm = tokio::time::timeout(Duration::from_secs(10), install).await.unwrap().unwrap().unwrap();
    let shared = sm.shared();
    assert_eq!(shared.machine.read().last_applied, Some(last));
    assert_eq!(shared.machine.read().state.encode(), state.encode());
    drop(sm);

    let again = StateMachineStore::open_with_io(dir.path(), Arc::new(FaultyIo::new())).unwrap();
    let machine = again.shared();
    assert_eq!(machine.machine.read().last_applied, Some(last), "the installed snapshot is on disk");
}

/// A snapshot of a copied state is encoded into its file as it is written;
/// on a full disk the save is tried again from the same copy until space is
/// back, and the file then holds the state at the moment it was taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn building_a_snapshot_on_a_full_disk_waits_for_space() {
    use openraft::testing::log_id;
    use openraft::{EntryPayload, RaftSnapshotBuilder};
    use regina_consensus::types::RaftEntry;

    let dir = tempfile::tempdir().unwrap();
    let io = Arc::new(FaultyIo::new());
    let mut sm = StateMachineStore::open_with_io(dir.path(), io.clone()).unwrap();
    let entries: Vec<RaftEntry> = (1..=60u64)
        .map(|n| {
            let mut item = leader_state_item(n);
            item.partition = format!("o-{}", n % 2);
            let entry = Entry { now_ms: 1_700_000_000_000 + n, command: Command::push(vec![item]) };
            RaftEntry { log_id: log_id(1, 1, n), payload: EntryPayload::Normal(entry.into()) }
        })
        .collect();
    sm.apply(entries).await.unwrap();
    let taken = sm.shared().machine.read().state.clone();
    assert!(taken.copy_is_cheaper(), "the case saves a copy, streamed");

    io.fill_disk_for_writes();
    let mut builder = sm.get_snapshot_builder().await;
    let build = tokio::spawn(async move { builder.build_snapshot().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!build.is_finished(), "the build waits for space rather than failing its group");

    io.heal();
    let built = tokio::time::timeout(Duration::from_secs(10), build).await.unwrap().unwrap().unwrap();
    assert_eq!(built.meta.last_log_id, Some(log_id(1, 1, 60)));
    let saved = sm.get_current_snapshot().await.unwrap().expect("the snapshot is saved");
    assert_eq!(saved.meta, built.meta);
    assert_eq!(saved.snapshot.get_ref(), &taken.encode());
    assert_eq!(sm.shared().snapshot_bytes(), taken.encode().len() as u64);
}

fn leader_state_item(n: u64) -> PushItem {
    PushItem {
        queue: "orders".into(),
        partition: "o-1".into(),
        transaction_id: format!("t{n}"),
        trace_id: None,
        message_id: [n as u8; 16],
        payload: format!(r#"{{"n":{n}}}"#).into_bytes(),
    }
}
