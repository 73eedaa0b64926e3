//! A snapshot stores each sealed message chunk once: the next snapshot
//! names the chunks an earlier one stored and writes only the new ones,
//! and a restart reads them back into the same state. Followers and
//! backups are handed the flat state.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::path::Path;

use openraft::storage::RaftStateMachine;
use openraft::testing::log_id;
use openraft::{EntryPayload, RaftSnapshotBuilder};
use regina_consensus::state_machine::StateMachineStore;
use regina_consensus::types::RaftEntry;
use regina_state::command::PushItem;
use regina_state::msg_table::CHUNK;
use regina_state::snapshot_holes::META_BYTES;
use regina_state::{Command, Entry};

/// A chunk's record in a pack: its framing and its messages.
const RECORD_BYTES: u64 = (8 + CHUNK * META_BYTES) as u64;

/// Entries from log index `first` on, pushing `messages` messages to
/// partition `partition`, 100 an entry.
fn pushes(first: u64, partition: &str, messages: u64) -> Vec<RaftEntry> {
    (0..messages.div_ceil(100))
        .map(|e| {
            let items = (0..100.min(messages - e * 100))
                .map(|i| {
                    let n = first * 1_000 + e * 100 + i;
                    PushItem {
                        queue: "orders".into(),
                        partition: partition.into(),
                        transaction_id: format!("t-{partition}-{n}"),
                        trace_id: None,
                        message_id: [(n % 251) as u8; 16],
                        payload: format!(r#"{{"n":{n}}}"#).into_bytes(),
                    }
                })
                .collect();
            let entry = Entry { now_ms: 1_700_000_000_000 + first + e, command: Command::push(items) };
            RaftEntry { log_id: log_id(1, 1, first + e), payload: EntryPayload::Normal(entry.into()) }
        })
        .collect()
}

fn pack_bytes(dir: &Path) -> Vec<(String, u64)> {
    let packs =
        regina_storage::chunk_packs::pack_files(&dir.join("snapshots").join(regina_storage::snapshot::PACKS_DIR))
            .unwrap();
    packs.into_iter().map(|(path, len)| (path.file_name().unwrap().to_string_lossy().into_owned(), len)).collect()
}

async fn snapshot(sm: &mut StateMachineStore) {
    let mut builder = sm.get_snapshot_builder().await;
    builder.build_snapshot().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_writes_only_the_chunks_the_last_one_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachineStore::open(dir.path()).unwrap();
    let mut next = 1;
    for p in ["a", "b", "c"] {
        let entries = pushes(next, p, 2_500);
        next += entries.len() as u64;
        sm.apply(entries).await.unwrap();
    }
    snapshot(&mut sm).await;
    let flat = sm.shared().machine.read().state.encode();
    let packs = pack_bytes(dir.path());
    assert_eq!(packs.len(), 1);
    assert_eq!(packs[0].1, 6 * RECORD_BYTES, "two sealed chunks in each of three partitions");
    let written = sm.shared().snapshot_bytes();
    assert!(written > 6 * RECORD_BYTES && written < flat.len() as u64 + 7 * RECORD_BYTES, "{written}");
    let sent = sm.get_current_snapshot().await.unwrap().unwrap();
    assert!(sent.snapshot.get_ref() == &flat, "a follower is sent the flat state");

    // One more chunk sealed in "a": the next snapshot writes that one alone.
    let entries = pushes(next, "a", 1_100);
    next += entries.len() as u64;
    sm.apply(entries).await.unwrap();
    snapshot(&mut sm).await;
    let packs = pack_bytes(dir.path());
    assert_eq!(packs.len(), 1);
    assert_eq!(packs[0].1, 7 * RECORD_BYTES, "only the new chunk is written");
    let live = sm.shared().machine.read().state.encode();
    let written = sm.shared().snapshot_bytes();
    assert!(written < live.len() as u64 / 3, "{written} bytes written of {}", live.len());
    assert!(sm.get_current_snapshot().await.unwrap().unwrap().snapshot.get_ref() == &live);
    // A backup carries a plain file, its holes filled.
    let file = sm.shared().latest_snapshot_file().unwrap().unwrap();
    assert_eq!(&file[4..8], &1u32.to_le_bytes());
    assert!(regina_storage::snapshot::decode(&file).unwrap().1 == live);
    assert!(regina_consensus::backup::facts(&file).is_ok());
    drop(sm);

    // A restart reads the chunks back into the same state.
    let mut sm = StateMachineStore::open(dir.path()).unwrap();
    assert!(sm.shared().machine.read().state.encode() == live, "the state read back differs");
    assert_eq!(sm.shared().machine.read().last_applied, Some(log_id(1, 1, next - 1)));
    assert_eq!(sm.shared().snapshot_bytes(), live.len() as u64);

    // Its first snapshot stores every chunk anew and lets the old pack go.
    sm.apply(pushes(next, "d", 10)).await.unwrap();
    snapshot(&mut sm).await;
    let packs = pack_bytes(dir.path());
    assert_eq!(packs.len(), 1);
    assert!(packs[0].0.ends_with("0000000002.chunks"), "{packs:?}");
    assert_eq!(packs[0].1, 7 * RECORD_BYTES);
    let live = sm.shared().machine.read().state.encode();
    drop(sm);
    let sm = StateMachineStore::open(dir.path()).unwrap();
    assert!(sm.shared().machine.read().state.encode() == live);
}
