//! Calls of the jobs route for the integration tests.
#![allow(dead_code)]

use serde_json::{json, Value};

use crate::support::paused::PausedNode;
use crate::support::{client, post_json, Broker, Workspace};

/// A broker on a fresh workspace, a client and the broker's base URL.
pub fn setup() -> (Workspace, Broker, reqwest::Client, String) {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let base = broker.base();
    (ws, broker, client(), base)
}

/// [`setup`] on the paused harness: a node in this process, a client and
/// the node's base URL.
pub async fn paused_setup() -> (PausedNode, reqwest::Client, String) {
    let node = PausedNode::start().await;
    let base = node.base();
    (node, client(), base)
}

/// Posts a jobs call and answers its status and body.
pub async fn call(c: &reqwest::Client, base: &str, ops: Vec<Value>) -> (u16, Value) {
    post_json(c, &format!("{base}/api/v1/jobs"), &json!({ "operations": ops })).await
}

/// Posts a jobs call that must answer 200 with one result per op.
pub async fn results(c: &reqwest::Client, base: &str, ops: Vec<Value>) -> Vec<Value> {
    let n = ops.len();
    let (status, v) = call(c, base, ops).await;
    assert_eq!(status, 200, "{v}");
    let r = v["results"].as_array().unwrap_or_else(|| panic!("no results: {v}")).clone();
    assert_eq!(r.len(), n, "{v}");
    r
}

/// One op's result.
pub async fn one(c: &reqwest::Client, base: &str, op: Value) -> Value {
    results(c, base, vec![op]).await.remove(0)
}

pub async fn enqueue(c: &reqwest::Client, base: &str, queue: &str, id: &str, payload: Value) -> Value {
    one(c, base, json!({ "op": "enqueue", "queue": queue, "id": id, "payload": payload })).await
}

/// A claim's answer (`null` when nothing was ready).
pub async fn claim(c: &reqwest::Client, base: &str, queue: &str, owner: &str, extra: Value) -> Value {
    let mut op = json!({ "op": "claim", "queue": queue, "owner": owner });
    if let Value::Object(m) = extra {
        op.as_object_mut().unwrap().extend(m);
    }
    one(c, base, op).await["claim"].clone()
}

/// The identity a claim proves on renew, complete, fail and release.
pub fn proof(queue: &str, claim: &Value) -> Value {
    json!({ "queue": queue, "scope": claim["scope"], "id": claim["id"], "owner": claim["owner"], "token": claim["token"] })
}

/// `proof` with the op and more fields.
pub fn with_proof(op: &str, queue: &str, claim: &Value, extra: Value) -> Value {
    let mut v = proof(queue, claim);
    v["op"] = json!(op);
    if let Value::Object(m) = extra {
        v.as_object_mut().unwrap().extend(m);
    }
    v
}

pub async fn get(c: &reqwest::Client, base: &str, queue: &str, id: &str) -> Value {
    let r = one(c, base, json!({ "op": "get", "queue": queue, "id": id })).await;
    r["job"].clone()
}

pub fn ms(ts: &Value) -> u64 {
    regina_types::time::parse_iso(ts.as_str().unwrap_or_else(|| panic!("not a time: {ts}")))
        .unwrap_or_else(|| panic!("not a time: {ts}"))
}
