//! Queues, pushes and pops as the clients see them: queue
//! configuration, push answers and dedup, payload round-trips, the pop
//! shape, long polls, per-partition order with lease exclusivity, and how
//! `batch` and `partitions` bound a pop. Each test starts its own broker.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use support::paused;
use wire::*;

#[test]
fn configure_echoes_options_reconfigures_and_deletes() {
    paused::run(async {
        let env = Env::paused().await;
        // The Python client's body: labels always present, its defaults merged
        // under the caller's options.
        let body = json!({
            "queue": "cfg", "namespace": null, "task": null,
            "options": {
                "leaseTime": 10, "retryLimit": 2, "priority": 5, "maxSize": 1000,
                "delayedProcessing": 0, "windowBuffer": 0, "retentionSeconds": 0,
                "completedRetentionSeconds": 0, "encryptionEnabled": false,
            },
        });
        let a = post(&env.c, &env.url("/api/v1/configure"), &body).await;
        assert_eq!(a.status, 200, "configure: {}", a.text);
        let v = a.body();
        assert_eq!(v["configured"], json!(true), "{v}");
        assert!(v.get("error").is_none(), "a configure answer must not carry `error`: {v}");
        for (k, want) in [("leaseTime", 10), ("retryLimit", 2), ("priority", 5), ("maxSize", 1000)] {
            assert_eq!(v["options"][k], json!(want), "options.{k} is not echoed: {v}");
        }

        // Clients create the same queue again and again; a partial options
        // object keeps what it does not name.
        let again = support::configure(&env.c, &env.base, "cfg", json!({ "priority": 7 })).await;
        assert_eq!(again["configured"], json!(true), "{again}");
        assert!(again.get("error").is_none(), "{again}");
        assert_eq!(again["options"]["priority"], json!(7), "{again}");
        assert_eq!(again["options"]["leaseTime"], json!(10), "an unnamed option changed: {again}");
        assert_eq!(again["options"]["retryLimit"], json!(2), "an unnamed option changed: {again}");
        let full = post(&env.c, &env.url("/api/v1/configure"), &body).await;
        assert_eq!(full.status, 200, "the same configure twice: {}", full.text);
        assert_eq!(full.body()["options"]["priority"], json!(5), "{}", full.text);

        // Deleting removes the queue with its messages.
        push_one(&env, "cfg", "Default", "doomed", json!({ "n": 1 })).await;
        let d = delete(&env.c, &env.url("/api/v1/resources/queues/cfg")).await;
        assert_eq!(d.status, 200, "delete: {}", d.text);
        assert_eq!(d.body()["deleted"], json!(true), "{}", d.text);
        assert!(d.body().get("error").is_none(), "a delete answer must not carry `error`: {}", d.text);
        let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/cfg?wait=false").await;
        assert!(msgs.is_empty(), "a deleted queue still delivers: {msgs:?}");
    });
}

#[test]
fn push_answers_per_item_and_dedups_per_partition() {
    paused::run(async {
        let env = Env::paused().await;
        support::configure(&env.c, &env.base, "orders", json!({})).await;
        let first = push(
            &env,
            vec![
                json!({ "queue": "orders", "partition": "A", "transactionId": "t-1", "payload": { "n": 1 } }),
                json!({ "queue": "orders", "partition": "A", "transactionId": "t-2", "payload": { "n": 2 } }),
                // An id the answer must escape, on another queue: each item's
                // answer names its own id and queue.
                json!({ "queue": "receipts", "transactionId": "t-\"3\"\\é\n", "payload": { "n": 3 } }),
            ],
        )
        .await;
        let named = [("t-1", "orders"), ("t-2", "orders"), ("t-\"3\"\\é\n", "receipts")];
        assert_eq!(first.len(), named.len(), "{first:?}");
        for (i, (r, (txn, queue))) in first.iter().zip(named).enumerate() {
            assert_eq!(r["status"], json!("queued"), "{r}");
            assert_eq!(r["index"], json!(i), "{r}");
            assert_eq!(r["transaction_id"], json!(txn), "{r}");
            assert_eq!(r["transactionId"], json!(txn), "{r}");
            assert_eq!(r["queueName"], json!(queue), "{r}");
            let id = r["message_id"].as_str().unwrap_or_else(|| panic!("no message_id: {r}"));
            assert!(uuid::Uuid::parse_str(id).is_ok(), "message_id is not a UUID: {r}");
        }
        assert_ne!(first[0]["message_id"], first[1]["message_id"]);

        // The same id on the same partition is a duplicate of the original...
        let dup = push(
            &env,
            vec![json!({ "queue": "orders", "partition": "A", "transactionId": "t-1", "payload": { "n": 9 } })],
        )
        .await;
        assert_eq!(dup[0]["status"], json!("duplicate"), "{dup:?}");
        assert_eq!(dup[0]["message_id"], first[0]["message_id"], "a duplicate must name the original message");
        assert_eq!(dup[0]["transaction_id"], json!("t-1"), "{dup:?}");
        // ...and a new message on another partition.
        let other = push(
            &env,
            vec![json!({ "queue": "orders", "partition": "B", "transactionId": "t-1", "payload": { "n": 3 } })],
        )
        .await;
        assert_eq!(other[0]["status"], json!("queued"), "{other:?}");
        assert_ne!(other[0]["message_id"], first[0]["message_id"]);
        let (a, _) = pop_any(&env, "/api/v1/pop/queue/orders/partition/A?wait=false&batch=10").await;
        assert_eq!(datas(&a), vec![json!({ "n": 1 }), json!({ "n": 2 })], "the duplicate was stored");

        // A queue nobody configured is created by its first push.
        let fresh = push_one(&env, "never-configured", "Default", "f-1", json!("hello")).await;
        assert!(fresh["message_id"].is_string(), "{fresh}");
        let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/never-configured?wait=false").await;
        assert_eq!(txns(&msgs), vec!["f-1"], "{msgs:?}");
        assert_eq!(msgs[0]["data"], json!("hello"));
    });
}

#[test]
fn payloads_round_trip_and_are_visible_at_once() {
    paused::run(async {
        let env = Env::paused().await;
        let big = json!({
            "blob": "x".repeat(1_500_000),
            "nested": { "list": [1, 2.5, -3, "four", null, true], "empty": {}, "unicode": "é ✓ 漢字 \u{1F600}" },
        });
        let payloads = vec![json!(null), json!({}), big, json!("a string"), json!(42), json!([])];
        for (i, p) in payloads.into_iter().enumerate() {
            let txn = format!("p-{i}");
            push_one(&env, "payloads", "Default", &txn, p.clone()).await;
            // No wait: a push must be visible to the very next pop.
            let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/payloads?wait=false&batch=1").await;
            assert_eq!(msgs.len(), 1, "payload {i} not visible to an immediate pop");
            assert_eq!(msgs[0]["transactionId"], json!(txn));
            assert!(msgs[0]["data"] == p, "payload {i} came back changed");
            complete_all(&env, &msgs, None).await;
        }
    });
}

#[test]
fn pop_answer_has_the_fields_clients_read() {
    paused::run(async {
        let env = Env::paused().await;
        push_one(&env, "shape", "P1", "s-1", json!({ "k": "v" })).await;
        let a = get(&env.c, &env.url("/api/v1/pop/queue/shape?wait=false&batch=5")).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let v = a.body();
        let msgs = v["messages"].as_array().unwrap_or_else(|| panic!("no top-level messages: {v}"));
        assert_eq!(msgs.len(), 1, "{v}");
        let m = &msgs[0];
        assert_eq!(m["transactionId"], json!("s-1"), "{m}");
        let pid = m["partitionId"].as_str().unwrap_or_else(|| panic!("partitionId is not a string: {m}"));
        assert!(!pid.is_empty(), "{m}");
        let lease = m["leaseId"].as_str().unwrap_or_else(|| panic!("leaseId is not a string: {m}"));
        assert!(!lease.is_empty(), "a leased message needs its leaseId: {m}");
        assert_eq!(v["leaseId"], json!(lease), "{v}");
        assert_eq!(m["data"], json!({ "k": "v" }), "{m}");
        assert_eq!(m["partition"], json!("P1"), "{m}");
        let created = m["createdAt"].as_str().unwrap_or_else(|| panic!("createdAt is not a string: {m}"));
        assert_fixed_width("createdAt", &[created]);
        complete_all(&env, msgs, None).await;

        // Empty: 204, or 200 with `messages: []`; a missing queue is empty too.
        for path in ["/api/v1/pop/queue/shape?wait=false", "/api/v1/pop/queue/no-such-queue?wait=false"] {
            let a = get(&env.c, &env.url(path)).await;
            let empty = a.status == 204 || (a.status == 200 && a.body()["messages"] == json!([]));
            assert!(empty, "{path}: an empty pop answered {} {}", a.status, a.text);
        }
        // A conflating or autopilot pop carries its echo, so even empty it is
        // a 200 with a body.
        for q in ["consumerGroup=cg&conflation=true", "autopilot=true"] {
            let a = get(&env.c, &env.url(&format!("/api/v1/pop/queue/shape?wait=false&{q}"))).await;
            assert_eq!(a.status, 200, "{q}: {}", a.text);
            assert!(a.is_json(), "{q}: Content-Type {}", a.content_type);
            assert_eq!(a.body()["messages"], json!([]), "{q}: {}", a.text);
            if q.contains("conflation") {
                assert_eq!(a.body()["conflation"], json!(true), "{q}: {}", a.text);
            }
        }
    });
}

#[test]
fn a_long_poll_parks_and_wakes_on_push() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        support::configure(&env.c, &env.base, "lp", json!({})).await;

        // Nothing arrives: the poll holds its whole timeout, then answers empty.
        let t0 = Instant::now();
        let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/lp?wait=true&timeout=1500").await;
        let held = t0.elapsed();
        assert!(msgs.is_empty(), "{msgs:?}");
        assert!(held >= Duration::from_millis(1_490), "an empty long poll answered early, after {held:?}");
        assert!(held < Duration::from_millis(3_500), "an empty long poll overstayed: {held:?}");

        // A push lands while polls are parked: they answer at once.
        for (n, path) in ["/api/v1/pop/queue/lp", "/api/v1/pop/queue/lp/partition/Default"].into_iter().enumerate() {
            let e = env.clone();
            let t0 = Instant::now();
            let parked = tokio::spawn(async move {
                let (msgs, _) = pop_any(&e, &format!("{path}?wait=true&timeout=8000")).await;
                (msgs, Instant::now())
            });
            tokio::time::sleep(Duration::from_millis(1_000)).await;
            assert!(!parked.is_finished(), "{path}: the poll answered before anything was pushed");
            let txn = format!("wake-{n}");
            push_one(&env, "lp", "Default", &txn, json!(n)).await;
            let pushed = Instant::now();
            let (msgs, answered) = parked.await.expect("the parked poll");
            assert_eq!(txns(&msgs), vec![txn], "{path}");
            assert!(answered.duration_since(t0) >= Duration::from_millis(1_000), "{path}: answered early");
            // Woken by the push itself: on the paused clock a poll that only
            // noticed on its next 100 ms recheck would show that lag exactly.
            let lag = answered.saturating_duration_since(pushed);
            assert!(lag < Duration::from_millis(100), "{path}: the parked poll woke {lag:?} after the push");
            complete_all(&env, &msgs, None).await;
        }
    });
}

#[test]
fn a_partition_is_consumed_strictly_in_order_under_exclusive_leases() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        for i in 0..100 {
            push_one(&env, "fifo", "Default", &format!("f-{i:03}"), json!(i)).await;
        }
        // Ten consumers racing with `wait=false, batch=1`: a delivery is logged
        // before its ack is sent, and the next claim needs that ack, so the log
        // is the delivery order.
        let log: Arc<Mutex<Vec<(i64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut workers = Vec::new();
        for _ in 0..10 {
            let (env, log, done) = (env.clone(), log.clone(), done.clone());
            workers.push(tokio::spawn(async move {
                for _ in 0..5_000 {
                    if done.load(Ordering::SeqCst) >= 100 || Instant::now() >= deadline {
                        return;
                    }
                    let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/fifo?wait=false&batch=1").await;
                    let Some(m) = msgs.first() else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    assert_eq!(msgs.len(), 1, "batch=1 delivered {msgs:?}");
                    let attempt = m["deliveryAttempt"].as_u64().unwrap_or(1);
                    log.lock().unwrap().push((m["data"].as_i64().expect("an integer payload"), attempt));
                    done.fetch_add(1, Ordering::SeqCst);
                    let r = ack_one(&env, ack_of(m, "completed", None, None)).await;
                    assert_eq!(r[0]["success"], json!(true), "{r:?}");
                }
            }));
        }
        for w in workers {
            w.await.expect("a consumer failed");
        }
        let log = log.lock().unwrap().clone();
        let order: Vec<i64> = log.iter().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..100).collect::<Vec<_>>(), "deliveries out of order or repeated");
        assert!(log.iter().all(|(_, a)| *a == 1), "a message was delivered twice: {log:?}");

        // Exclusivity is per (partition, group): other groups and other
        // partitions are not held back by a lease.
        push_one(&env, "excl", "A", "a-0", json!("a0")).await;
        push_one(&env, "excl", "A", "a-1", json!("a1")).await;
        let (held, _) = pop_any(&env, "/api/v1/pop/queue/excl/partition/A?wait=false&batch=1").await;
        assert_eq!(txns(&held), vec!["a-0"]);
        let (none, _) = pop_any(&env, "/api/v1/pop/queue/excl/partition/A?wait=false&batch=1").await;
        assert!(none.is_empty(), "a leased partition was claimed twice by one group: {none:?}");
        let (other_group, _) = pop_any(
            &env,
            "/api/v1/pop/queue/excl/partition/A?wait=false&batch=1&consumerGroup=g2&subscriptionMode=all",
        )
        .await;
        assert_eq!(txns(&other_group), vec!["a-0"], "another group is independent of the lease");
        push_one(&env, "excl", "B", "b-0", json!("b0")).await;
        let (other_partition, _) = pop_any(&env, "/api/v1/pop/queue/excl?wait=false&batch=1").await;
        assert_eq!(txns(&other_partition), vec!["b-0"], "another partition stays claimable");
        complete_all(&env, &held, None).await;
        let (next, _) = pop_any(&env, "/api/v1/pop/queue/excl/partition/A?wait=false&batch=1").await;
        assert_eq!(txns(&next), vec!["a-1"], "the released partition continues in order");
    });
}

/// Pushes `per` messages to each of `parts` partitions named `p0`, `p1`...
async fn fill(env: &Env, queue: &str, parts: usize, per: usize) {
    let items = (0..parts)
        .flat_map(|p| {
            (0..per)
                .map(move |i| json!({ "queue": queue, "partition": format!("p{p}"), "payload": { "p": p, "i": i } }))
        })
        .collect();
    push(env, items).await;
}

fn claimed_partitions(msgs: &[Value]) -> BTreeSet<String> {
    msgs.iter().map(|m| m["partitionId"].as_str().expect("partitionId").to_string()).collect()
}

#[test]
fn batch_caps_a_pop_and_partitions_widens_it_under_one_lease() {
    paused::run(async {
        let env = Env::paused().await;
        fill(&env, "wide", 3, 2).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/wide?wait=false&batch=100&partitions=3").await;
        assert_eq!(msgs.len(), 6, "three partitions of two in one pop: {v}");
        assert_eq!(claimed_partitions(&msgs).len(), 3, "{v}");
        assert_eq!(v["partitionsClaimed"], json!(3), "{v}");
        let lease = v["leaseId"].as_str().filter(|l| !l.is_empty()).unwrap_or_else(|| panic!("no leaseId: {v}"));
        for m in &msgs {
            assert_eq!(m["leaseId"], json!(lease), "one lease for every claimed partition: {m}");
            let p = m["data"]["p"].as_u64().expect("p");
            assert_eq!(m["partition"], json!(format!("p{p}")), "a message names its own partition: {m}");
        }
        for p in claimed_partitions(&msgs) {
            let mine: Vec<&Value> = msgs.iter().filter(|m| m["partitionId"] == json!(p)).collect();
            let order: Vec<u64> = mine.iter().map(|m| m["data"]["i"].as_u64().unwrap()).collect();
            assert_eq!(order, vec![0, 1], "partition {p} out of order");
        }

        // `partitions=N` claims at most N.
        fill(&env, "two-of-three", 3, 2).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/two-of-three?wait=false&batch=100&partitions=2").await;
        assert_eq!(claimed_partitions(&msgs).len(), 2, "{v}");
        assert_eq!(msgs.len(), 4, "{v}");

        // `batch` is a cap across all claimed partitions.
        fill(&env, "capped", 5, 100).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/capped?wait=false&batch=10&partitions=5").await;
        assert_eq!(msgs.len(), 10, "batch=10 over five partitions: {} messages", msgs.len());
        assert!(v["leaseId"].as_str().is_some_and(|l| !l.is_empty()), "{v}");

        // Without `partitions`, one partition only.
        fill(&env, "narrow", 3, 5).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/narrow?wait=false&batch=100").await;
        assert_eq!(msgs.len(), 5, "one partition's five messages: {v}");
        assert_eq!(claimed_partitions(&msgs).len(), 1, "{v}");
    });
}
