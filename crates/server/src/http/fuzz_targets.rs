//! Every decoder that reads bytes from outside, as one function per target
//! that takes arbitrary bytes and must return without panicking, whatever
//! they hold (a target may also assert that two readers of the same bytes
//! agree: its panic is then a found disagreement). `fuzz/` drives them
//! under libFuzzer (`scripts/fuzz.sh`), and `tests/fuzz_corpus.rs` replays
//! the kept corpora and found crashes through the same functions in every
//! test run, so an input that once broke a decoder stays a test.

use serde_json::value::RawValue;
use serde_json::Value;

use crate::http::input;
use crate::http::routes::ack;
use crate::http::routes::binary;
use crate::http::routes::jobs::input as jobs_input;
use crate::http::routes::kv::input as kv_input;
use crate::http::routes::push;
use crate::http::routes::timer_ops;
use crate::http::routes::transaction;

/// A target: arbitrary bytes in, nothing out, never a panic.
pub type Target = fn(&[u8]);

/// Each target by name (its corpus lives in `fuzz/corpus/<name>`).
pub const TARGETS: &[(&str, Target)] = &[
    ("binary_push", binary_push),
    ("binary_step", binary_step),
    ("json_push", json_push),
    ("json_ack", json_ack),
    ("json_step", json_step),
    ("kv_ops", kv_ops),
    ("jobs_ops", jobs_ops),
    ("timer_ops", timer_ops),
    ("query", query),
    ("wal_segment", wal_segment),
    ("wal_record", wal_record),
    ("body_record", body_record),
    ("snapshot_file", snapshot_file),
    ("state_snapshot", state_snapshot),
];

/// A `QPB1` push body, and each item as the route checks it.
pub fn binary_push(data: &[u8]) {
    if let Ok((_, items)) = binary::parse_push(data) {
        for (i, item) in items.into_iter().enumerate() {
            let _ = push::from_binary(i, item);
        }
    }
}

/// A `QTB1` step body: its JSON head and its framed pushes.
pub fn binary_step(data: &[u8]) {
    if let Ok((head, items)) = binary::parse_transaction(data) {
        let _ = serde_json::from_slice::<Value>(head);
        for (i, item) in items.into_iter().enumerate() {
            let _ = push::from_binary(i, item);
        }
    }
}

/// A JSON push body; the plain reader must never read it otherwise than
/// serde does.
pub fn json_push(data: &[u8]) {
    assert!(push::plain_reader_agrees(data), "the plain push reader and serde disagree");
    let _ = push::json_items(data);
}

/// A JSON ack body (one ack or a batch); the plain reader must never read
/// it otherwise than serde does.
pub fn json_ack(data: &[u8]) {
    assert!(ack::plain_reader_agrees(data), "the plain ack reader and serde disagree");
}

/// A step's JSON body; the plain reader must never read it otherwise than
/// serde does.
pub fn json_step(data: &[u8]) {
    assert!(transaction::plain_reader_agrees(data), "the plain step reader and serde disagree");
}

/// The `operations` of a KV call, in a call and in a step.
pub fn kv_ops(data: &[u8]) {
    if let Ok(ops) = serde_json::from_slice::<Vec<&RawValue>>(data) {
        let ops: Vec<&str> = ops.iter().map(|r| r.get()).collect();
        let _ = kv_input::parse_ops(&ops, kv_input::Scope::Call);
        let _ = kv_input::parse_ops(&ops, kv_input::Scope::Transaction);
    }
}

/// The `operations` of a jobs call, and job riders of a step.
pub fn jobs_ops(data: &[u8]) {
    if let Ok(ops) = serde_json::from_slice::<Vec<Value>>(data) {
        let _ = jobs_input::parse_ops(&ops, jobs_input::Surface::Call);
        let _ = jobs_input::parse_ops(&ops, jobs_input::Surface::Step);
    }
}

/// Timer operations, at a fixed leader time.
pub fn timer_ops(data: &[u8]) {
    if let Ok(ops) = serde_json::from_slice::<Vec<Value>>(data) {
        for (i, op) in ops.iter().enumerate() {
            let _ = timer_ops::parse_op(i, op, 1_700_000_000_000);
        }
    }
}

/// A query string, read the ways the routes read one.
pub fn query(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pairs) = input::query_pairs(Some(text)) {
        for key in ["batch", "wait", "timeout", "leaseSeconds", "autoAck", "limit"] {
            let _ = input::query_bool(&pairs, key);
            let _ = input::query_u64(&pairs, key, 1, 10_000);
        }
    }
    let _ = regina_types::time::parse_iso(text);
}

/// One WAL segment's bytes, scanned as recovery scans them.
pub fn wal_segment(data: &[u8]) {
    let scan = regina_storage::wal::scan_segment(data);
    for (_, range) in scan.records {
        assert!(range.end <= data.len(), "a record range outside the segment");
        let _ = regina_consensus::wal_record::decode(&data[range]);
    }
}

/// One WAL record's payload.
pub fn wal_record(data: &[u8]) {
    let _ = regina_consensus::wal_record::decode(data);
}

/// One message body as the body files hold it.
pub fn body_record(data: &[u8]) {
    // A body written before checksums encodes back with one, so the check
    // is that what decodes encodes to bytes that decode to it again.
    if let Some(body) = regina_state::BodyRecord::decode(data) {
        assert_eq!(
            regina_state::BodyRecord::decode(&body.encode()),
            Some(body),
            "a decoded body survives a round trip"
        );
    }
    let _ = regina_state::BodyRecord::salvage(data);
}

/// A snapshot file, its head and the state it holds.
pub fn snapshot_file(data: &[u8]) {
    if let Ok((_, state)) = regina_storage::snapshot::decode(data) {
        state_snapshot(&state);
    }
}

/// A snapshot's state.
pub fn state_snapshot(data: &[u8]) {
    let _ = regina_state::State::decode(data);
}
