//! A message body damaged on disk after it was written (a flipped bit, a
//! bad sector) fails its checksum when it is read, and its partition stays
//! readable: the pop delivers the damaged message with its ids and an
//! `unreadableBody` payload holding the bytes found, the reader acks it like
//! any other, and the messages before and after it read intact. A
//! dead-letter retry of a damaged message is refused with a reason, and
//! the row stays. The newest bodies are also kept in memory and read from
//! there, so these nodes keep none (`recent_body_bytes: 0`) but the one
//! that shows it.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::os::unix::fs::FileExt;

use base64::Engine;
use serde_json::{json, Value};

use support::paused::{self, PausedNode};
use support::{client, post_json};

/// Flips one bit of the first copy of `marker` in the node's body files
/// (not the log, which also holds the payload), as a bad disk would.
fn damage_body(broker: &PausedNode, marker: &[u8]) {
    let files = support::files_containing(&broker.data_dir(), marker);
    let bodies: Vec<&String> = files.iter().filter(|f| f.ends_with(".body")).collect();
    assert_eq!(bodies.len(), 1, "one body file holds the marker: {files:?}");
    let bytes = std::fs::read(bodies[0]).unwrap();
    let at = bytes.windows(marker.len()).position(|w| w == marker).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(bodies[0]).unwrap();
    file.write_all_at(&[bytes[at] ^ 0x01], at as u64).unwrap();
    file.sync_all().unwrap();
}

/// A node whose every body read goes to its file.
async fn reading_files() -> PausedNode {
    PausedNode::start_with(regina_node::NodeOptions { recent_body_bytes: 0, ..paused::test_options() }).await
}

fn item(txn: &str, payload: Value) -> Value {
    json!({ "queue": "orders", "partition": "o-1", "transactionId": txn, "payload": payload })
}

async fn ack_all(c: &reqwest::Client, base: &str, pop: &Value, status: &str) -> Vec<Value> {
    let acks: Vec<Value> = support::messages(pop)
        .iter()
        .map(|m| {
            json!({ "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "leaseId": m["leaseId"], "status": status, "error": "damaged" })
        })
        .collect();
    let (status, v) = post_json(c, &format!("{base}/api/v1/ack/batch"), &json!({ "acknowledgments": acks })).await;
    assert_eq!(status, 200, "batch ack: {v}");
    v.as_array().cloned().unwrap_or_else(|| panic!("an ack answer is an array: {v}"))
}

#[test]
fn a_damaged_body_is_delivered_as_unreadable_and_its_partition_reads_on() {
    paused::run(async {
        let broker = reading_files().await;
        let (c, base) = (client(), broker.base());
        let marker = "damage-me-0123456789";
        support::push(
            &c,
            &base,
            vec![item("t1", json!({ "n": 1 })), item("t2", json!({ "note": marker })), item("t3", json!({ "n": 3 }))],
        )
        .await;
        damage_body(&broker, marker.as_bytes());

        let popped = support::pop(&c, &base, "/api/v1/pop/queue/orders/partition/o-1?batch=10&wait=false").await;
        let msgs = support::messages(&popped);
        let txns: Vec<&str> = msgs.iter().map(|m| m["transactionId"].as_str().unwrap()).collect();
        assert_eq!(txns, ["t1", "t2", "t3"], "every message is delivered: {popped}");
        assert_eq!((msgs[0]["data"].clone(), msgs[2]["data"].clone()), (json!({ "n": 1 }), json!({ "n": 3 })));
        let damaged = &msgs[1]["data"]["unreadableBody"];
        let reason = damaged["reason"].as_str().unwrap_or_else(|| panic!("the damage is named: {}", msgs[1]));
        assert!(reason.contains("checksum"), "{reason}");
        let found = base64::engine::general_purpose::STANDARD.decode(damaged["base64"].as_str().unwrap()).unwrap();
        assert!(found.windows(8).any(|w| w == b"amage-me"), "the bytes found are handed over as they are");
        assert_eq!(msgs[1]["offset"], json!(1), "{}", msgs[1]);

        // The reader acks it like any other message, and the partition goes on.
        let acked = ack_all(&c, &base, &popped, "completed").await;
        assert!(acked.iter().all(|r| r["success"] == json!(true)), "{acked:?}");
        support::push(&c, &base, vec![item("t4", json!({ "n": 4 }))]).await;
        let next = support::pop(&c, &base, "/api/v1/pop/queue/orders/partition/o-1?batch=10&wait=false").await;
        let data: Vec<Value> = support::messages(&next).iter().map(|m| m["data"].clone()).collect();
        assert_eq!(data, vec![json!({ "n": 4 })], "{next}");

        // A duplicate of the damaged message still answers its offset.
        let dup = support::push(&c, &base, vec![item("t2", json!({ "again": true }))]).await;
        assert_eq!((dup[0]["status"].clone(), dup[0]["offset"].clone()), (json!("duplicate"), json!(1)), "{dup:?}");
    });
}

#[test]
fn a_damaged_dead_letter_is_listed_and_its_retry_refused_with_a_reason() {
    paused::run(async {
        let broker = reading_files().await;
        let (c, base) = (client(), broker.base());
        support::configure(&c, &base, "orders", json!({ "retryLimit": 0 })).await;
        let marker = "dead-and-damaged-42";
        support::push(&c, &base, vec![item("d1", json!({ "note": marker }))]).await;
        let popped = support::pop(&c, &base, "/api/v1/pop/queue/orders/partition/o-1?batch=10&wait=false").await;
        let acked = ack_all(&c, &base, &popped, "failed").await;
        assert_eq!(acked[0]["dlq"], json!(true), "{acked:?}");
        damage_body(&broker, marker.as_bytes());

        let (status, listed) = support::get_json(&c, &format!("{base}/api/v1/dlq?queue=orders")).await;
        assert_eq!(status, 200, "the DLQ lists a damaged row: {listed}");
        assert_eq!(listed["total"], json!(1), "{listed}");
        let row = &listed["messages"][0];
        assert!(row["data"]["unreadableBody"]["reason"].as_str().unwrap().contains("checksum"), "{row}");

        let pid = row["partitionId"].as_str().unwrap().to_string();
        let (status, refused) = post_json(&c, &format!("{base}/api/v1/messages/{pid}/d1/retry"), &json!({})).await;
        assert_eq!((status, refused["code"].clone()), (409, json!("unreadable_body")), "{refused}");
        assert!(refused["error"].as_str().unwrap().contains("checksum"), "{refused}");
        let (_, still) = support::get_json(&c, &format!("{base}/api/v1/dlq?queue=orders")).await;
        assert_eq!(still["total"], json!(1), "the row stays: {still}");
    });
}

/// A body damaged on disk while it is among the newest is still served as
/// it was written: reads of the newest bodies come from memory.
#[test]
fn a_newest_body_damaged_on_disk_is_served_as_written() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let marker = "kept-in-memory-0123";
        support::push(&c, &base, vec![item("t1", json!({ "note": marker })), item("t2", json!({ "n": 2 }))]).await;
        damage_body(&broker, marker.as_bytes());
        let popped = support::pop(&c, &base, "/api/v1/pop/queue/orders/partition/o-1?batch=10&wait=false").await;
        let data: Vec<Value> = support::messages(&popped).iter().map(|m| m["data"].clone()).collect();
        assert_eq!(data, vec![json!({ "note": marker }), json!({ "n": 2 })], "{popped}");
    });
}
