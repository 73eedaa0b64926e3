//! Acks, leases and retries as the clients see them: ack
//! answers and refusals, acks as cursor commits, retries and the DLQ, lease
//! expiry and commit at delivery, lease extension, and subscriptions. Each
//! test starts its own node on the paused clock; leases are 30 s, as a
//! client would set them, and their expiry costs no real time.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use support::paused;
use wire::*;

const ACK_FIELDS: [&str; 7] = ["index", "transactionId", "success", "error", "leaseReleased", "dlq", "noop"];

fn assert_ack_shape(r: &Value) {
    for k in ACK_FIELDS {
        assert!(r.get(k).is_some(), "ack result without {k}: {r}");
    }
}

async fn push_n(env: &Env, queue: &str, partition: &str, prefix: &str, n: usize) {
    for i in 0..n {
        push_one(env, queue, partition, &format!("{prefix}{i}"), json!({ "i": i })).await;
    }
}

/// Redelivery after a nack or a lapse: polls the partition for up to 40 s
/// (past a 30 s lease).
async fn redelivered(env: &Env, queue: &str, partition: &str, query: &str) -> Vec<Value> {
    let path = format!("/api/v1/pop/queue/{queue}/partition/{partition}?batch=100{query}");
    pop_within(env, &path, Duration::from_secs(40)).await.0
}

#[test]
fn acks_answer_aligned_arrays_and_name_their_refusals() {
    paused::run(async {
        let env = Env::paused().await;
        push_n(&env, "acks", "Default", "m", 3).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/acks?wait=false&batch=3").await;
        assert_eq!(txns(&msgs), ["m0", "m1", "m2"], "{v}");
        let lease = v["leaseId"].clone();

        let mut wrong = ack_of(&msgs[0], "completed", None, None);
        wrong["leaseId"] = json!("not-the-lease");
        let r = ack_one(&env, wrong).await;
        assert_ack_shape(&r[0]);
        assert_eq!(r[0]["success"], json!(false), "{r:?}");
        assert!(err_text(&r[0]).contains("lease"), "a wrong lease must say so: {r:?}");

        let bogus = json!({ "transactionId": "never-pushed", "partitionId": msgs[0]["partitionId"],
                            "status": "completed", "leaseId": lease, "error": null, "consumerGroup": null });
        let r = ack_one(&env, bogus).await;
        assert_eq!(r[0]["success"], json!(false), "{r:?}");
        assert!(err_text(&r[0]).contains("unresolv"), "an unknown transaction must say so: {r:?}");

        // The refusals did not burn the lease: the real batch still commits.
        let rs = ack_batch(&env, msgs.iter().map(|m| ack_of(m, "completed", None, None)).collect(), None).await;
        for (i, r) in rs.iter().enumerate() {
            assert_ack_shape(r);
            assert_eq!(r["index"], json!(i), "{r}");
            assert_eq!(r["transactionId"], msgs[i]["transactionId"], "{r}");
            assert_eq!(r["success"], json!(true), "{r}");
            assert_ne!(r["noop"], json!(true), "an in-range ack is not a noop: {r}");
        }
        assert_eq!(rs[2]["leaseReleased"], json!(true), "acking the end of the batch releases the lease: {rs:?}");

        let r = ack_one(&env, ack_of(&msgs[1], "completed", None, None)).await;
        assert_eq!((r[0]["success"].clone(), r[0]["noop"].clone()), (json!(true), json!(true)), "{r:?}");
        let r = ack_one(&env, ack_of(&msgs[1], "failed", None, Some("late"))).await;
        assert_eq!(r[0]["success"], json!(false), "{r:?}");
        assert!(err_text(&r[0]).contains("committed"), "a nack below the cursor must say so: {r:?}");

        // A lease that lapsed is stale too.
        push_one(&env, "acks", "Default", "m3", json!(3)).await;
        let (late, _) = pop_any(&env, "/api/v1/pop/queue/acks?wait=false&leaseSeconds=30").await;
        assert_eq!(txns(&late), ["m3"]);
        tokio::time::sleep(Duration::from_secs(31)).await;
        let r = ack_one(&env, ack_of(&late[0], "completed", None, None)).await;
        assert_eq!(r[0]["success"], json!(false), "{r:?}");
        assert!(err_text(&r[0]).contains("lease"), "an expired lease must say so: {r:?}");
    });
}

#[test]
fn an_ack_commits_up_to_itself_and_a_nack_clamps_the_rest() {
    paused::run(async {
        let env = Env::paused().await;
        support::configure(&env.c, &env.base, "commit", json!({ "retryLimit": 3, "leaseTime": 30 })).await;
        // Acking the middle keeps the lease; acking the last then succeeds too.
        push_n(&env, "commit", "A", "a", 5).await;
        let (a, _) = pop_any(&env, "/api/v1/pop/queue/commit/partition/A?wait=false&batch=5").await;
        let r = ack_one(&env, ack_of(&a[2], "completed", None, None)).await;
        assert_eq!((r[0]["success"].clone(), r[0]["leaseReleased"].clone()), (json!(true), json!(false)), "{r:?}");
        let r = ack_one(&env, ack_of(&a[4], "completed", None, None)).await;
        assert_eq!((r[0]["success"].clone(), r[0]["leaseReleased"].clone()), (json!(true), json!(true)), "{r:?}");
        let (rest, _) = pop_any(&env, "/api/v1/pop/queue/commit/partition/A?wait=false").await;
        assert!(rest.is_empty(), "acking the last committed everything: {rest:?}");

        // Acking #3 of 5 commits #1..#3 and nothing after: #4 and #5 come back.
        push_n(&env, "commit", "B", "b", 5).await;
        let (b, _) = pop_any(&env, "/api/v1/pop/queue/commit/partition/B?wait=false&batch=5&leaseSeconds=30").await;
        assert_eq!(ack_one(&env, ack_of(&b[2], "completed", None, None)).await[0]["success"], json!(true));
        let again = redelivered(&env, "commit", "B", "").await;
        assert_eq!(txns(&again), ["b3", "b4"], "after the lease lapsed");
        complete_all(&env, &again, None).await;

        // One call: #1 completed, #2 failed, #3..#5 completed: #2..#5 return.
        push_n(&env, "commit", "C", "c", 5).await;
        let (c, _) = pop_any(&env, "/api/v1/pop/queue/commit/partition/C?wait=false&batch=5").await;
        let statuses = ["completed", "failed", "completed", "completed", "completed"];
        let acks = c.iter().zip(statuses).map(|(m, s)| ack_of(m, s, None, Some("boom"))).collect();
        let rs = ack_batch(&env, acks, None).await;
        assert_eq!(rs[1]["success"], json!(true), "{rs:?}");
        let again = redelivered(&env, "commit", "C", "").await;
        assert_eq!(txns(&again), ["c1", "c2", "c3", "c4"], "a nack clamps the commit");
        complete_all(&env, &again, None).await;

        // `retry` never spends the budget: with retryLimit 0 one failure would
        // dead-letter, yet three retries later the message is still there.
        support::configure(&env.c, &env.base, "retry0", json!({ "retryLimit": 0 })).await;
        push_n(&env, "retry0", "Default", "r", 3).await;
        let (r, _) = pop_any(&env, "/api/v1/pop/queue/retry0?wait=false&batch=3").await;
        let acks = r.iter().zip(["completed", "retry", "completed"]).map(|(m, s)| ack_of(m, s, None, None)).collect();
        ack_batch(&env, acks, None).await;
        let mut again = redelivered(&env, "retry0", "Default", "").await;
        assert_eq!(txns(&again), ["r1", "r2"]);
        for round in 0..2 {
            let res = ack_one(&env, ack_of(&again[0], "retry", None, None)).await;
            assert_eq!((res[0]["success"].clone(), res[0]["dlq"].clone()), (json!(true), json!(false)), "{res:?}");
            again = redelivered(&env, "retry0", "Default", "").await;
            assert_eq!(txns(&again), ["r1", "r2"], "retry round {round}");
        }
        complete_all(&env, &again, None).await;
        let dlq = get(&env.c, &env.url("/api/v1/dlq?queue=retry0")).await;
        assert_eq!(dlq.body()["total"], json!(0), "retry must never dead-letter: {}", dlq.text);
    });
}

async fn dlq_of(env: &Env, query: &str) -> Value {
    let a = get(&env.c, &env.url(&format!("/api/v1/dlq?{query}&limit=100&offset=0"))).await;
    assert_eq!(a.status, 200, "dlq {query}: {}", a.text);
    a.body().clone()
}

#[test]
fn retry_limit_bounds_deliveries_then_dead_letters() {
    paused::run(async {
        let env = Env::paused().await;
        // retryLimit 2: three deliveries, then the DLQ, and the partition moves on.
        support::configure(&env.c, &env.base, "rl2", json!({ "retryLimit": 2, "dlqAfterMaxRetries": true })).await;
        push_one(&env, "rl2", "Default", "d0", json!({ "order": 7 })).await;
        push_one(&env, "rl2", "Default", "d1", json!({ "order": 8 })).await;
        let mut deliveries = 0;
        let mut last = Value::Null;
        let next = loop {
            let msgs = redelivered(&env, "rl2", "Default", "&batch=1").await;
            assert_eq!(msgs.len(), 1, "nothing redelivered after {deliveries} deliveries");
            if msgs[0]["transactionId"] != json!("d0") || deliveries >= 10 {
                break msgs;
            }
            deliveries += 1;
            let err = format!("boom-{deliveries}");
            last = ack_one(&env, ack_of(&msgs[0], "failed", None, Some(&err))).await.remove(0);
            assert_eq!(last["success"], json!(true), "{last}");
        };
        assert_eq!(deliveries, 3, "retryLimit 2 means three deliveries");
        assert_eq!(last["dlq"], json!(true), "the last nack files the message: {last}");
        assert_eq!(txns(&next), ["d1"], "the cursor moves past a dead letter");
        let d = dlq_of(&env, "queue=rl2").await;
        assert_eq!(d["total"], json!(1), "{d}");
        assert_eq!(d["messages"][0]["data"], json!({ "order": 7 }), "{d}");
        assert_eq!(d["messages"][0]["errorMessage"], json!("boom-3"), "{d}");

        // retryLimit 0: the first failure dead-letters.
        support::configure(&env.c, &env.base, "rl0", json!({ "retryLimit": 0 })).await;
        push_one(&env, "rl0", "Default", "z0", json!("zero")).await;
        let (z, _) = pop_any(&env, "/api/v1/pop/queue/rl0?wait=false").await;
        let r = ack_one(&env, ack_of(&z[0], "failed", None, Some("bad"))).await;
        assert_eq!((r[0]["success"].clone(), r[0]["dlq"].clone()), (json!(true), json!(true)), "{r:?}");
        let (none, _) = pop_any(&env, "/api/v1/pop/queue/rl0?wait=true&timeout=500").await;
        assert!(none.is_empty(), "a dead letter was redelivered: {none:?}");
        let d = dlq_of(&env, "queue=rl0").await;
        assert_eq!((d["total"].clone(), d["messages"][0]["errorMessage"].clone()), (json!(1), json!("bad")), "{d}");

        // Groups keep their own retry counts and DLQ decisions.
        support::configure(&env.c, &env.base, "rlg", json!({ "retryLimit": 1 })).await;
        push_one(&env, "rlg", "Default", "g0", json!("shared")).await;
        let g1 = "&consumerGroup=g1&subscriptionMode=all";
        for n in 1..=2 {
            let m = redelivered(&env, "rlg", "Default", g1).await;
            assert_eq!(txns(&m), ["g0"], "g1 delivery {n}");
            let r = ack_one(&env, ack_of(&m[0], "failed", Some("g1"), Some("g1 fails"))).await;
            assert_eq!(r[0]["dlq"], json!(n == 2), "{r:?}");
        }
        let (g2, _) = pop_any(&env, "/api/v1/pop/queue/rlg?wait=false&consumerGroup=g2&subscriptionMode=all").await;
        assert_eq!(txns(&g2), ["g0"], "g1's dead letter is not g2's");
        assert_eq!(g2[0]["deliveryAttempt"], json!(1), "{g2:?}");
        complete_all(&env, &g2, Some("g2")).await;
        let (qm, _) = pop_any(&env, "/api/v1/pop/queue/rlg?wait=false").await;
        assert_eq!(txns(&qm), ["g0"], "queue mode is a group of its own");
        assert_eq!(dlq_of(&env, "queue=rlg&consumerGroup=g1").await["total"], json!(1));
        assert_eq!(dlq_of(&env, "queue=rlg&consumerGroup=g2").await["total"], json!(0));
    });
}

#[test]
fn a_lapsed_lease_redelivers_and_auto_ack_commits_at_delivery() {
    paused::run(async {
        let env = Env::paused().await;
        // The queue's leaseTime, and a pop's leaseSeconds over a long leaseTime.
        support::configure(&env.c, &env.base, "lt30", json!({ "leaseTime": 30 })).await;
        support::configure(&env.c, &env.base, "lt300", json!({ "leaseTime": 300 })).await;
        for (queue, query) in [("lt30", ""), ("lt300", "&leaseSeconds=30")] {
            push_one(&env, queue, "Default", "x0", json!(queue)).await;
            let popped = Instant::now();
            let (first, v1) = pop_any(&env, &format!("/api/v1/pop/queue/{queue}?wait=false{query}")).await;
            assert_eq!(txns(&first), ["x0"], "{queue}");
            let (none, _) = pop_any(&env, &format!("/api/v1/pop/queue/{queue}?wait=false")).await;
            assert!(none.is_empty(), "{queue}: claimed again under a live lease");
            let again = redelivered(&env, queue, "Default", "").await;
            assert_eq!(txns(&again), ["x0"], "{queue}: not redelivered after the lease lapsed");
            assert!(popped.elapsed() >= Duration::from_millis(29_900), "{queue}: redelivered before the lease lapsed");
            assert_ne!(again[0]["leaseId"], v1["leaseId"], "{queue}: redelivery needs a new lease");
            assert!(again[0]["leaseId"].as_str().is_some_and(|l| !l.is_empty()), "{again:?}");
            let old = ack_one(&env, ack_of(&first[0], "completed", None, None)).await;
            assert_eq!(old[0]["success"], json!(false), "{queue}: the lapsed lease still acks: {old:?}");
            assert!(err_text(&old[0]).contains("lease"), "{old:?}");
            complete_all(&env, &again, None).await;
        }

        // Commit at delivery: no lease, nothing to ack, the cursor has moved.
        push_one(&env, "aa", "Default", "auto", json!({ "a": 1 })).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/aa?wait=false&autoAck=true").await;
        assert_eq!(txns(&msgs), ["auto"], "{v}");
        assert_eq!(v["leaseId"], json!(""), "{v}");
        assert_eq!(msgs[0]["leaseId"], json!(""), "{v}");
        let (none, _) = pop_any(&env, "/api/v1/pop/queue/aa?wait=false").await;
        assert!(none.is_empty(), "an auto-acked message came back: {none:?}");
        // `commitOnDelivery`, the current name of the same switch, does the same.
        push_one(&env, "aa", "Default", "auto2", json!({ "a": 2 })).await;
        let (msgs2, v2) = pop_any(&env, "/api/v1/pop/queue/aa?wait=false&commitOnDelivery=true").await;
        assert_eq!(txns(&msgs2), ["auto2"], "{v2}");
        assert_eq!(v2["leaseId"], json!(""), "{v2}");
        let (none, _) = pop_any(&env, "/api/v1/pop/queue/aa?wait=false").await;
        assert!(none.is_empty(), "a message committed at delivery came back: {none:?}");
        // The admin detail is addressed by the partition id the pop named.
        let pid = msgs[0]["partitionId"].as_str().expect("partitionId");
        let a = get(&env.c, &env.url(&format!("/api/v1/messages/{pid}/auto"))).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let groups = a.body()["consumerGroups"].as_array().unwrap_or_else(|| panic!("no consumerGroups: {}", a.text));
        assert_eq!(groups.len(), 1, "exactly the queue-mode reader: {}", a.text);
        assert_eq!(groups[0]["consumed"], json!(true), "{}", a.text);
        assert!(groups[0].get("leaseExpiresAt").is_some_and(Value::is_null), "{}", a.text);
    });
}

#[test]
fn an_empty_body_extend_renews_a_live_lease_only() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        support::configure(&env.c, &env.base, "ext", json!({ "leaseTime": 30 })).await;
        push_one(&env, "ext", "Default", "e0", json!("work")).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/ext?wait=false").await;
        let lease = v["leaseId"].as_str().expect("leaseId").to_string();
        let extend_url = env.url(&format!("/api/v1/lease/{lease}/extend"));
        let a = post_empty(&env.c, &extend_url).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let b = a.body();
        assert_eq!((b["success"].clone(), b["renewed"].clone()), (json!(true), json!(1)), "{b}");
        assert_fixed_width("newExpiresAt", &[b["newExpiresAt"].as_str().unwrap_or_else(|| panic!("{b}"))]);

        // A 45 s handler on a 30 s lease, renewed every 10 s: nobody else may
        // claim the message meanwhile, and the ack at the end is accepted.
        let renewals = Arc::new(Mutex::new(Vec::new()));
        let (e, log, url) = (env.clone(), renewals.clone(), extend_url.clone());
        let renewer = tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let a = post_empty(&e.c, &url).await;
                log.lock().unwrap().push((a.status, a.body().clone()));
            }
        });
        let handler_end = Instant::now() + Duration::from_secs(45);
        while Instant::now() < handler_end {
            let (stolen, _) = pop_any(&env, "/api/v1/pop/queue/ext?wait=false").await;
            assert!(stolen.is_empty(), "a renewed lease lapsed: {stolen:?}");
            tokio::time::sleep(Duration::from_millis(2_500)).await;
        }
        renewer.abort();
        let r = ack_one(&env, ack_of(&msgs[0], "completed", None, None)).await;
        assert_eq!(r[0]["success"], json!(true), "the renewed lease was lost: {r:?}");
        let renewals = renewals.lock().unwrap().clone();
        assert!(renewals.len() >= 2, "too few renewals: {renewals:?}");
        for (status, body) in &renewals {
            assert_eq!((*status, body["success"].clone()), (200, json!(true)), "{body}");
        }

        let a = post_empty(&env.c, &extend_url).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let b = a.body();
        assert_eq!((b["success"].clone(), b["renewed"].clone()), (json!(false), json!(0)), "{b}");
        assert!(b.get("newExpiresAt").is_some_and(Value::is_null), "{b}");
    });
}

#[test]
fn an_extend_with_seconds_renews_by_that_length_and_refuses_bad_bodies() {
    paused::run(async {
        let env = Env::paused().await;
        support::configure(&env.c, &env.base, "ext", json!({ "leaseTime": 30 })).await;
        push_one(&env, "ext", "Default", "e0", json!("work")).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/ext?wait=false").await;
        let lease = v["leaseId"].as_str().expect("leaseId").to_string();
        let extend_url = env.url(&format!("/api/v1/lease/{lease}/extend"));
        for bad in
            [json!({ "seconds": 0 }), json!({ "seconds": "30" }), json!({ "seconds": 86_401 }), json!({ "secs": 3 })]
        {
            let a = post(&env.c, &extend_url, &bad).await;
            assert_eq!(a.status, 400, "{bad}: {}", a.text);
            assert!(a.body()["error"].as_str().is_some_and(|e| !e.is_empty()), "{}", a.text);
        }
        let a = post(&env.c, &extend_url, &json!({ "seconds": 600 })).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let b = a.body();
        assert_eq!(b["renewed"], json!(1), "{b}");
        let expires = regina_types::time::parse_iso(b["newExpiresAt"].as_str().expect("newExpiresAt")).expect("iso");
        let popped_at = regina_types::time::parse_iso(msgs[0]["createdAt"].as_str().expect("createdAt")).expect("iso");
        assert!(expires >= popped_at + 590_000, "renewed by 600 s, not by the 30 s lease: {b}");
        // Past the queue's own 30 s the message is still held.
        tokio::time::sleep(Duration::from_secs(31)).await;
        let (stolen, _) = pop_any(&env, "/api/v1/pop/queue/ext?wait=false").await;
        assert!(stolen.is_empty(), "a lease renewed for 600 s lapsed: {stolen:?}");
        let r = ack_one(&env, ack_of(&msgs[0], "completed", None, None)).await;
        assert_eq!(r[0]["success"], json!(true), "{r:?}");
    });
}

#[test]
fn subscriptions_seed_new_groups_and_groups_fan_out() {
    paused::run(async {
        let env = Env::paused().await;
        push_n(&env, "subs", "Default", "h", 3).await;
        let readers = [
            ("", vec!["h0", "h1", "h2"]),
            ("&consumerGroup=g-all&subscriptionMode=all", vec!["h0", "h1", "h2"]),
            ("&consumerGroup=g-fb&subscriptionMode=from_beginning", vec!["h0", "h1", "h2"]),
            ("&consumerGroup=g-new&subscriptionMode=new", vec![]),
            ("&consumerGroup=g-now&subscriptionFrom=now", vec![]),
        ];
        let group_of = |q: &str| q.split("consumerGroup=").nth(1).map(|s| s.split('&').next().unwrap().to_string());
        for (q, want) in &readers {
            let (msgs, _) = pop_any(&env, &format!("/api/v1/pop/queue/subs?wait=false&batch=100{q}")).await;
            assert_eq!(txns(&msgs), *want, "history for {q:?}");
            if !msgs.is_empty() {
                complete_all(&env, &msgs, group_of(q).as_deref()).await;
            }
        }
        // A later push reaches every reader: each group has its own cursor.
        push_one(&env, "subs", "Default", "later", json!("later")).await;
        for (q, _) in &readers {
            let (msgs, _) = pop_any(&env, &format!("/api/v1/pop/queue/subs?wait=false&batch=100{q}")).await;
            assert_eq!(txns(&msgs), ["later"], "the later push for {q:?}");
            complete_all(&env, &msgs, group_of(q).as_deref()).await;
        }
        // Deleting a group resets it: it meets the queue afresh.
        let d = delete(&env.c, &env.url("/api/v1/consumer-groups/g-all?deleteMetadata=true")).await;
        assert_eq!(d.status, 200, "{}", d.text);
        let (msgs, _) =
            pop_any(&env, "/api/v1/pop/queue/subs?wait=false&batch=100&consumerGroup=g-all&subscriptionMode=all").await;
        assert_eq!(txns(&msgs), ["h0", "h1", "h2", "later"], "a deleted group starts over");
    });
}
