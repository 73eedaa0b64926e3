//! Every on-disk format, pinned to checked-in bytes (`tests/fixtures/`):
//! the WAL segment's record framing, the WAL record of a Raft entry (for
//! group 0 and a later group), the log entry with every `Command` variant
//! (bincode writes a variant's index, so their order is the format), the
//! message body, the state snapshot, the snapshot file and the Raft meta
//! file. Each test encodes a fixed value and compares it with the fixture,
//! then decodes the fixture back: a change of format fails here until it is
//! made on purpose, by writing the fixtures again with
//! `REGINA_WRITE_FIXTURES=1 cargo test -p regina-consensus --test formats`
//! (and a decoder for the old bytes where data written before must still
//! open).

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::path::PathBuf;
use std::sync::Arc;

use openraft::{CommittedLeaderId, EntryPayload, LogId, Vote};
use regina_consensus::meta_file::{Meta, MetaFile};
use regina_consensus::types::RaftEntry;
use regina_consensus::wal_record::{self, Record};
use regina_state::command::*;
use regina_state::jobs::{JobOp, JobTarget, JobsCmd};
use regina_state::options::TimerPolicyPatch;
use regina_state::outcome::PushStatus;
use regina_state::streams::{RegisterCmd, StreamCmd};
use regina_state::timers::TimerOp;
use regina_state::traces::TraceEvent;
use regina_state::{BodyRecord, Command, Entry, Outcome, State};
use regina_storage::{RealIo, SnapshotStore, Wal, WalOptions};

/// Compares `bytes` with fixture `name`, or writes it when asked to.
fn pinned(name: &str, bytes: &[u8]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    if std::env::var_os("REGINA_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {} is missing ({e})", path.display()));
    assert!(
        want == bytes,
        "{name}: the bytes written differ from the fixture, so the on-disk format changed.\n\
         fixture: {want:02x?}\nnow:     {bytes:02x?}"
    );
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

fn item(txn: &str) -> PushItem {
    PushItem {
        queue: "orders".into(),
        partition: "o-1".into(),
        transaction_id: txn.into(),
        trace_id: Some([7; 16]),
        message_id: [9; 16],
        payload: br#"{"n":1}"#.to_vec(),
    }
}

/// One command of every variant, in declaration order.
fn every_command() -> Vec<Command> {
    let target = JobTarget { queue: "jobs".into(), scope: "s".into() };
    vec![
        Command::Noop,
        Command::push(vec![item("t1")]),
        Command::Pop(PopCmd {
            target: PopTarget::Queue { queue: "orders".into(), partition: None },
            group: "g".into(),
            batch: 10,
            max_partitions: 1,
            lease_id: "L1".into(),
            lease_ms: Some(30_000),
            auto_ack: false,
            subscription: Subscription::All,
            conflation: false,
        }),
        Command::Ack(AckCmd {
            group: "g".into(),
            items: vec![AckItem {
                partition_id: 1,
                transaction_id: "t1".into(),
                status: AckStatus::Completed,
                error: None,
                lease_id: Some("L1".into()),
            }],
        }),
        Command::ExtendLease { lease_id: "L1".into() },
        Command::Configure(ConfigureCmd {
            queue: "orders".into(),
            namespace: Some(Some("shop".into())),
            task: None,
            options: Default::default(),
            replace: false,
        }),
        Command::DeleteQueue { queue: "gone".into() },
        Command::Sweep,
        Command::Transaction(TxnCmd { ops: vec![TxnOp::Push(item("t2"))], kv: Vec::new(), timers: Vec::new() }),
        Command::DeleteGroup { group: "g".into(), queue: Some("orders".into()), delete_metadata: true },
        Command::Seek { group: "g".into(), queue: "orders".into(), target: SeekTarget::Time(5) },
        Command::SetSubscription { group: "g".into(), from_ms: 6 },
        Command::DeleteDeadLetter { partition_id: 1, transaction_id: "t1".into() },
        Command::RetryDeadLetter { partition_id: 1, transaction_id: "t1".into(), item: item("t1") },
        Command::RecordTrace(TraceEvent {
            id: [3; 16],
            partition_id: 1,
            transaction_id: "t1".into(),
            group: "g".into(),
            names: vec!["checkout".into()],
            event_type: "info".into(),
            data: b"{}".to_vec(),
            created_ms: 7,
        }),
        Command::Kv(KvCmd { ops: vec![KvOp::Get { ns: "ns".into(), key: "k".into() }] }),
        Command::Locks(LocksCmd { ops: vec![LockOp::Get { name: "lock".into() }] }),
        Command::Timers(vec![TimerOp::Cancel { queue: "orders".into(), timer_key: "t".into() }]),
        Command::FireTimers,
        Command::Batch(vec![Command::Noop]),
        Command::ForTenant { tenant: "acme".into(), command: Box::new(Command::Noop) },
        Command::Jobs(JobsCmd { ops: vec![JobOp::Get { at: target.clone(), id: "j1".into() }] }),
        Command::Step {
            txn: TxnCmd { ops: Vec::new(), kv: Vec::new(), timers: Vec::new() },
            jobs: vec![JobOp::Get { at: target, id: "j1".into() }],
        },
        Command::ConfigureTimerPolicy {
            queue: "orders".into(),
            policy: TimerPolicyPatch { max_attempts: Some(3), retry_delay_ms: None, max_retry_delay_ms: None },
        },
        Command::ExtendLeaseFor { lease_id: "L1".into(), duration_ms: 60_000 },
        Command::Stream(StreamCmd::Register(RegisterCmd {
            name: "totals".into(),
            source_queue: "orders".into(),
            sink_queue: Some("totals-out".into()),
            config_hash: "h1".into(),
            reset: false,
            new_id: "q1".into(),
        })),
    ]
}

#[test]
fn every_command_variant_keeps_its_index() {
    // The variant index bincode writes first, by position in the enum:
    // a new variant goes at the end, never between.
    for (index, command) in every_command().iter().enumerate() {
        let bytes = bincode::serialize(command).unwrap();
        assert_eq!(u32::from_le_bytes(bytes[..4].try_into().unwrap()), index as u32, "{command:?}");
    }
}

#[test]
fn a_log_entry_of_every_command() {
    let entry = Entry { now_ms: 1_700_000_000_123, command: Command::Batch(every_command()) };
    pinned("log-entry.bin", &entry.encode());
    let back: Entry = bincode::deserialize(&fixture("log-entry.bin")).unwrap();
    assert_eq!(back, entry);
}

fn raft_entry() -> RaftEntry {
    let entry = Entry { now_ms: 1_700_000_000_123, command: Command::push(vec![item("t1")]) };
    RaftEntry { log_id: LogId::new(CommittedLeaderId::new(3, 1), 42), payload: EntryPayload::Normal(entry.into()) }
}

#[test]
fn wal_records_of_group_zero_and_a_later_group() {
    for (group, name) in [(0u16, "wal-record-group0.bin"), (3, "wal-record-group3.bin")] {
        pinned(name, &wal_record::encode_entry(group, &raft_entry()));
        let (g, record) = wal_record::decode(&fixture(name)).unwrap();
        assert_eq!((g, record), (group, Record::Entry(raft_entry())));
    }
    pinned("wal-truncate-group3.bin", &wal_record::encode_truncate(3, 17));
    assert_eq!(wal_record::decode(&fixture("wal-truncate-group3.bin")).unwrap(), (3, Record::Truncate { since: 17 }));
}

#[test]
fn a_wal_segment_frames_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let payload = wal_record::encode_entry(0, &raft_entry());
    {
        let options = WalOptions { segment_bytes: 64 << 10, ..WalOptions::default() };
        let (wal, recovered) = Wal::open(dir.path(), options, Arc::new(RealIo)).unwrap();
        assert!(recovered.is_empty());
        wal.append_sync(vec![payload.clone()]).unwrap();
    }
    let mut segments: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segments.sort();
    let bytes = std::fs::read(&segments[0]).unwrap();
    let framed = 8 + payload.len();
    pinned("wal-segment-head.bin", &bytes[..framed]);
    assert!(bytes[framed..framed + 8].iter().all(|b| *b == 0), "zeroed space marks the end of data");
    // The pinned head is read back as the record it holds.
    let copy = tempfile::tempdir().unwrap();
    let mut image = fixture("wal-segment-head.bin");
    image.resize(bytes.len(), 0);
    std::fs::write(copy.path().join(segments[0].file_name().unwrap()), image).unwrap();
    let options = WalOptions { segment_bytes: 64 << 10, ..WalOptions::default() };
    let (_wal, recovered) = Wal::open(copy.path(), options, Arc::new(RealIo)).unwrap();
    assert_eq!(recovered.into_iter().map(|(_, p)| p).collect::<Vec<_>>(), vec![payload]);
}

#[test]
fn a_message_body() {
    let body = BodyRecord {
        id: [1; 16],
        created_ms: 1_700_000_000_123,
        trace_id: Some([2; 16]),
        transaction_id: "t1".into(),
        payload: br#"{"n":1}"#.to_vec(),
    };
    pinned("body-checksummed.bin", &body.encode());
    assert_eq!(BodyRecord::decode(&fixture("body-checksummed.bin")), Some(body.clone()));
    // Bodies written before checksums (`body.bin`) still read.
    assert_eq!(BodyRecord::decode(&fixture("body.bin")), Some(body));
}

#[test]
fn a_state_snapshot() {
    let mut state = State::new();
    let now_ms = 1_700_000_000_000;
    state.apply(&Entry { now_ms, command: Command::push(vec![item("t1"), item("t2")]) });
    state.apply(&Entry { now_ms: now_ms + 1, command: every_command()[2].clone() });
    pinned("state-snapshot.bin", &state.encode());
    let back = State::decode(&fixture("state-snapshot.bin")).unwrap();
    back.check_invariants().unwrap();
    assert_eq!(back.encode(), state.encode());
}

#[test]
fn a_state_snapshot_that_stored_a_transaction_id_index_still_opens() {
    // Written when snapshots stored each partition's transaction-id index
    // (one partition of ten messages, t0..t9, has one); indexes are now
    // rebuilt from the messages instead.
    let old = fixture("state-snapshot-indexed.bin");
    let mut state = State::decode(&old).unwrap();
    state.check_invariants().unwrap();
    assert_eq!(state.message_count(), 10);
    assert!(state.encode().len() < old.len(), "the index is no longer stored");
    let q = state.queue("orders").unwrap();
    assert!(q.txn_indexes.get(0).is_some(), "decoding rebuilt the index");
    let now_ms = 1_700_000_000_001;
    let pushed = state.apply(&Entry { now_ms, command: Command::push(vec![item("t3"), item("t10")]) });
    let Outcome::Push(results) = pushed.outcome else { panic!("{pushed:?}") };
    assert_eq!((results[0].status, results[0].offset), (PushStatus::Duplicate, 3));
    assert_eq!((results[1].status, results[1].offset), (PushStatus::Queued, 10));
}

#[test]
fn a_state_snapshot_of_format_5_still_opens() {
    // Written before stream queries existed; it opens with none.
    let state = State::decode(&fixture("state-snapshot-v5.bin")).unwrap();
    state.check_invariants().unwrap();
    assert_eq!(state.message_count(), 2);
}

#[test]
fn a_snapshot_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path()).unwrap();
    store.save("3-1-42", b"meta", b"the state").unwrap();
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "snap"))
        .unwrap();
    pinned("snapshot-file.bin", &std::fs::read(&file).unwrap());
    let copy = tempfile::tempdir().unwrap();
    std::fs::write(copy.path().join(file.file_name().unwrap()), fixture("snapshot-file.bin")).unwrap();
    let loaded = SnapshotStore::open(copy.path()).unwrap().load_latest().unwrap();
    assert_eq!(loaded, Some((b"meta".to_vec(), b"the state".to_vec())));
}

#[test]
fn a_raft_meta_file() {
    let dir = tempfile::tempdir().unwrap();
    let meta =
        Meta { vote: Some(Vote::new_committed(3, 1)), last_purged: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)) };
    let file = MetaFile::for_group(dir.path(), 2);
    file.store(&meta).unwrap();
    pinned("raft-meta.bin", &std::fs::read(file.path()).unwrap());
    let copy = tempfile::tempdir().unwrap();
    let again = MetaFile::for_group(copy.path(), 2);
    std::fs::write(again.path(), fixture("raft-meta.bin")).unwrap();
    assert_eq!(again.load().unwrap(), meta);
}
