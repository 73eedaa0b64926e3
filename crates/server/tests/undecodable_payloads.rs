//! Payload bytes no JSON reader could decode never get in: a binary push
//! (`QPB1`, plain or framed) or a timer whose payload holds a string that is
//! not UTF-8 is refused at the edge, and the partition it aimed at stays
//! readable by every JSON consumer, before and after the refusal.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use base64::Engine;
use serde_json::{json, Value};

use support::paused::{self, PausedNode};
use support::{client, post_json};

/// A JSON string whose bytes are not UTF-8: serde_json's validation alone
/// skips over them.
const NOT_UTF8: &[u8] = b"\"\xff\xfe\"";

fn text(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A `QPB1` body of one group holding one plain item.
fn plain_push(queue: &str, partition: &str, payload: &[u8]) -> Vec<u8> {
    let mut b = b"QPB1".to_vec();
    b.push(0);
    b.extend_from_slice(&1u32.to_le_bytes());
    text(&mut b, queue);
    text(&mut b, partition);
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// A `QPB1` body with flag 8: the group's items as one zstd frame.
fn framed_push(queue: &str, partition: &str, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&[9u8; 16]);
    text(&mut frame, "framed-bad");
    frame.extend_from_slice(payload);
    let mut frames = (frame.len() as u32).to_le_bytes().to_vec();
    frames.extend_from_slice(&frame);
    let z = zstd_frame(&frames);
    let mut b = b"QPB1".to_vec();
    b.push(8);
    b.extend_from_slice(&1u32.to_le_bytes());
    text(&mut b, queue);
    text(&mut b, partition);
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(z.len() as u32).to_le_bytes());
    b.extend_from_slice(&z);
    b
}

fn zstd_frame(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

async fn post_bytes(c: &reqwest::Client, url: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = c
        .post(url)
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    support::json_of(resp).await
}

fn assert_refused(what: &str, status: u16, body: &Value) {
    assert_eq!(status, 400, "{what}: {body}");
    // The timers route answers Queen's `{error: code, detail: text}`.
    let text = body["detail"].as_str().or(body["error"].as_str()).unwrap_or_default();
    assert!(text.contains("UTF-8"), "{what}: the error names the problem: {body}");
}

#[test]
fn a_payload_that_is_not_utf8_is_refused_and_the_partition_stays_readable() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let push_url = format!("{base}/api/v1/push");
        support::push(&c, &base, vec![json!({ "queue": "orders", "partition": "o-1", "payload": { "n": 1 } })]).await;

        // The plain binary form, and a well-formed one beside it as a control.
        let (status, v) = post_bytes(&c, &push_url, plain_push("orders", "o-1", NOT_UTF8)).await;
        assert_refused("plain QPB1", status, &v);
        let (status, v) = post_bytes(&c, &push_url, plain_push("orders", "o-1", br#"{"n":2}"#)).await;
        assert_eq!(status, 201, "a JSON payload in QPB1 is taken: {v}");
        // The framed form.
        let (status, v) = post_bytes(&c, &push_url, framed_push("orders", "o-1", NOT_UTF8)).await;
        assert_refused("framed QPB1", status, &v);
        let (status, v) = post_bytes(&c, &push_url, framed_push("orders", "o-1", br#"{"n":3}"#)).await;
        assert_eq!(status, 201, "a JSON payload in a framed QPB1 is taken: {v}");

        // A timer's payload would be pushed into the partition when it fires.
        let payload = base64::engine::general_purpose::STANDARD.encode(NOT_UTF8);
        let op = json!({ "op": "schedule", "queue": "orders", "partition": "o-1", "timerKey": "t", "delayMs": 0, "payload": payload });
        let (status, v) = post_json(&c, &format!("{base}/api/v1/timers"), &json!({ "operations": [op] })).await;
        assert_refused("timer schedule", status, &v);

        support::push(&c, &base, vec![json!({ "queue": "orders", "partition": "o-1", "payload": { "n": 4 } })]).await;
        let popped = support::pop(&c, &base, "/api/v1/pop/queue/orders/partition/o-1?batch=10&wait=false").await;
        let data: Vec<Value> = support::messages(&popped).iter().map(|m| m["data"].clone()).collect();
        assert_eq!(data, vec![json!({"n":1}), json!({"n":2}), json!({"n":3}), json!({"n":4})], "{popped}");
    });
}
