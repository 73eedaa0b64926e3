//! Requests that arrive together share a log entry: each still gets its own
//! answer, and none is lost, repeated or merged with another.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::collections::BTreeSet;

use serde_json::{json, Value};

use support::paused;
use wire::*;

const CLIENTS: usize = 32;
const ROUNDS: usize = 15;

#[test]
fn concurrent_requests_each_get_their_own_answer() {
    paused::run(async {
        let env = std::sync::Arc::new(Env::paused().await);
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let env = env.clone();
            tasks.push(tokio::spawn(async move {
                let mut offsets = Vec::new();
                for r in 0..ROUNDS {
                    // One push to a shared partition and one increment of a
                    // shared counter, both racing every other client.
                    let pushed = push_one(&env, "batched", "shared", &format!("c{c}-r{r}"), json!({"c": c, "r": r})).await;
                    assert_eq!(pushed["status"], "queued", "{pushed}");
                    let got = kv_results(&env, json!([{"op": "incr", "ns": "batching", "key": "n", "delta": 1, "forever": true}])).await;
                    assert!(got[0]["value"].as_i64().is_some(), "{got:?}");
                    let again = json!({"queue": "batched", "partition": "shared", "transactionId": format!("c{c}-r{r}"), "payload": {}});
                    let duplicate = push(&env, vec![again]).await;
                    assert_eq!(duplicate[0]["status"], "duplicate", "{duplicate:?}");
                    offsets.push(pushed["offset"].clone());
                }
                offsets
            }));
        }
        let mut seen = BTreeSet::new();
        for t in tasks {
            for off in t.await.expect("a client task") {
                let off = off.as_u64().or_else(|| off.as_str().and_then(|s| s.parse().ok()));
                assert!(seen.insert(off.expect("a numeric offset")), "an offset was handed out twice");
            }
        }
        let total = (CLIENTS * ROUNDS) as u64;
        assert_eq!(seen, (0..total).collect::<BTreeSet<u64>>(), "offsets are gapless and unique");
        let n = kv_get(&env, "batching", "n").await;
        assert_eq!(n["value"], Value::from(total), "every increment applied exactly once: {n}");
    });
}
