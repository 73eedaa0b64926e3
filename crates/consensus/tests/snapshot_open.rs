//! A restart reads its snapshot as it decodes it (`SnapshotStream`): the
//! state comes back whole, a damaged file is skipped (its checksum is known
//! only at its end), and a whole file this version cannot read stops the
//! open instead of being taken for no snapshot.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::io::Cursor;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, SnapshotMeta, StoredMembership};
use regina_consensus::state_machine::StateMachineStore;
use regina_consensus::types::LogId;
use regina_state::command::PushItem;
use regina_state::{Command, Entry, State};
use regina_storage::SnapshotStore;

/// A state of many partitions, so its snapshot spans more than one piece of a
/// stream.
fn large_state() -> State {
    let mut state = State::new();
    for batch in 0..100u64 {
        let items = (0..1_000u64)
            .map(|i| {
                let n = batch * 1_000 + i;
                PushItem {
                    queue: "orders".into(),
                    partition: format!("order-{n}"),
                    transaction_id: format!("t{n}"),
                    trace_id: None,
                    message_id: [(n % 251) as u8; 16],
                    payload: vec![b'x'; 200],
                }
            })
            .collect();
        state.apply(&Entry { now_ms: 1_700_000_000_000 + batch, command: Command::push(items) });
    }
    state
}

/// The snapshot file in `dir`, after one was installed.
fn snapshot_file(dir: &std::path::Path) -> std::path::PathBuf {
    let paths = SnapshotStore::open(dir.join("snapshots")).unwrap().newest_first().unwrap();
    assert_eq!(paths.len(), 1, "{paths:?}");
    paths[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_streams_its_snapshot_and_skips_a_damaged_one() {
    let dir = tempfile::tempdir().unwrap();
    let state = large_state();
    let encoded = state.encode();
    assert!(encoded.len() > regina_storage::snapshot_stream::STREAM_PIECE_BYTES, "{} bytes", encoded.len());
    let last = LogId::new(CommittedLeaderId::new(2, 1), 90);
    let meta = SnapshotMeta {
        last_log_id: Some(last),
        last_membership: StoredMembership::default(),
        snapshot_id: "00000000000000000090-0000000001".into(),
    };
    let mut sm = StateMachineStore::open(dir.path()).unwrap();
    sm.install_snapshot(&meta, Box::new(Cursor::new(encoded.clone()))).await.unwrap();
    drop(sm);

    let reopened = StateMachineStore::open(dir.path()).unwrap().shared();
    assert_eq!(reopened.machine.read().last_applied, Some(last));
    assert!(reopened.machine.read().state.encode() == encoded, "the state read back differs");
    assert_eq!(reopened.snapshot_bytes(), encoded.len() as u64);
    drop(reopened);

    // One byte of the state, late in the file, flipped: the decoding may
    // well succeed, but the checksum at the end refuses the file.
    let path = snapshot_file(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 1_000;
    bytes[at] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let skipped = StateMachineStore::open(dir.path()).unwrap().shared();
    assert_eq!(skipped.machine.read().last_applied, None, "the damaged snapshot is not used");
    assert_eq!(skipped.machine.read().state.message_count(), 0);
    assert!(path.exists(), "a damaged snapshot is left for inspection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_snapshot_of_a_state_this_version_cannot_read_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let meta = SnapshotMeta {
        last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 90)),
        last_membership: StoredMembership::default(),
        snapshot_id: "00000000000000000090-0000000001".into(),
    };
    let mut sm = StateMachineStore::open(dir.path()).unwrap();
    sm.install_snapshot(&meta, Box::new(Cursor::new(large_state().encode()))).await.unwrap();
    drop(sm);
    // The same file, its state's format marker that of a later version,
    // its checksum made right.
    let path = snapshot_file(dir.path());
    let (head, mut data) = regina_storage::snapshot::decode(&std::fs::read(&path).unwrap()).unwrap();
    data[..8].copy_from_slice(b"RGNSTAT9");
    std::fs::write(&path, regina_storage::snapshot::encode(&head, &data).unwrap()).unwrap();

    let refused = StateMachineStore::open(dir.path()).err().expect("the open is refused");
    assert!(refused.contains("not in format"), "{refused}");

    // A state that ends before its data does is refused too.
    let mut longer = regina_storage::snapshot::decode(&std::fs::read(&path).unwrap()).unwrap().1;
    longer[..8].copy_from_slice(regina_state::state::STATE_FORMAT);
    longer.extend_from_slice(b"left over");
    std::fs::write(&path, regina_storage::snapshot::encode(&head, &longer).unwrap()).unwrap();
    let refused = StateMachineStore::open(dir.path()).err().expect("the open is refused");
    assert!(refused.contains("9 bytes before its data"), "{refused}");
}
