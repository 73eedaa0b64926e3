//! Steps and what rides them, as the clients see them:
//! transactions, `once`, key/value semantics, timers, locks and
//! semaphores, lock-guarded transactions, and the robustness of the wire
//! (empty bodies, odd paths, encodings, reads by offset). Each test starts
//! its own broker.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use support::paused;
use wire::*;

#[test]
fn a_transaction_applies_all_or_nothing() {
    paused::run(async {
        let env = Env::paused().await;
        push_one(&env, "src", "Default", "s0", json!(0)).await;
        push_one(&env, "src", "Default", "s1", json!(1)).await;
        let (msgs, v) = pop_any(&env, "/api/v1/pop/queue/src?wait=false&batch=2").await;
        let acks = vec![ack_op(&msgs[0], &v["leaseId"]), ack_op(&msgs[1], &v["leaseId"])];
        let a = transaction(&env, &bundle("dst", "p1", acks, json!([v["leaseId"]]), "k1")).await;
        let b = ok_body(&a);
        has(&b, json!({ "success": true }));
        let kinds: Vec<Value> =
            b["results"].as_array().expect("results").iter().map(|r| json!([r["index"], r["type"]])).collect();
        let want = json!([[0, "push"], [1, "ack"], [2, "ack"], [3, "kv"], [4, "timer"]]);
        assert_eq!(Value::Array(kinds), want, "results in flat order: {b}");
        let (dst, _) = pop_any(&env, "/api/v1/pop/queue/dst?wait=false&batch=10").await;
        assert_eq!(txns(&dst), ["p1"]);
        assert!(pop_any(&env, "/api/v1/pop/queue/src?wait=false").await.0.is_empty(), "the acks were not applied");
        has(&kv_get(&env, "txn", "k1").await, json!({ "found": true, "value": { "v": "k1" } }));
        has(&get_body(&env, "/api/v1/timers/later/k1").await, json!({ "found": true }));

        // An ack under a lease that lapsed and was retaken, or of a bogus
        // transaction, rolls back every part of the bundle.
        push_one(&env, "src2", "Default", "s2", json!(2)).await;
        let (lost, v1) = pop_any(&env, "/api/v1/pop/queue/src2?wait=false&leaseSeconds=1").await;
        let retaken = pop_within(&env, "/api/v1/pop/queue/src2", Duration::from_secs(4)).await.0;
        assert_eq!(txns(&retaken), ["s2"], "the lapsed lease was not retaken");
        let bogus = json!({ "type": "ack", "transactionId": "bogus", "partitionId": lost[0]["partitionId"],
                            "status": "completed" });
        let cases = [(ack_op(&lost[0], &v1["leaseId"]), json!([v1["leaseId"]])), (bogus, json!([]))];
        for (n, (bad_ack, leases)) in cases.into_iter().enumerate() {
            let key = format!("lost-{n}");
            let b = ok_body(&transaction(&env, &bundle("dst2", &key, vec![bad_ack], leases, &key)).await);
            has(&b, json!({ "success": false }));
            assert!(err_text(&b).contains("rolled back"), "case {n}: {b}");
            assert!(pop_any(&env, "/api/v1/pop/queue/dst2?wait=false").await.0.is_empty(), "case {n}: push kept");
            has(&kv_get(&env, "txn", &key).await, json!({ "found": false }));
            has(&get_body(&env, &format!("/api/v1/timers/later/{key}")).await, json!({ "found": false }));
        }
        let r = ack_one(&env, ack_of(&retaken[0], "completed", None, None)).await;
        has(&r[0], json!({ "success": true }));

        // A bundle of KV writes alone commits.
        let kv_only = json!({ "operations": [], "requiredLeases": [],
                              "kv": [{ "op": "put", "ns": "txn", "key": "solo", "value": 3, "forever": true }] });
        has(&ok_body(&transaction(&env, &kv_only).await), json!({ "success": true }));
        has(&kv_get(&env, "txn", "solo").await, json!({ "value": 3 }));
    });
}

#[test]
fn once_admits_a_bundle_a_single_time() {
    paused::run(async {
        let env = Env::paused().await;
        let once = |txn: &str| {
            json!({
                "operations": [{ "type": "push", "items": [{ "queue": "gate", "payload": txn, "transactionId": txn }] }],
                "requiredLeases": [],
                "kv": [{ "op": "putIfAbsent", "ns": "gates", "key": "gate:evt-1", "value": true,
                         "ttlSeconds": 60, "required": true }],
            })
        };
        has(&ok_body(&transaction(&env, &once("once-1")).await), json!({ "success": true }));
        let b = ok_body(&transaction(&env, &once("once-2")).await);
        // The push item is flat index 0, the `once` index 1.
        has(&b, json!({ "success": false, "reason": "kv_precondition", "kvReason": "exists", "failedIndex": 1 }));
        let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/gate?wait=false&batch=10").await;
        assert_eq!(txns(&msgs), ["once-1"], "the refused bundle's push was applied");
    });
}

#[test]
fn kv_semantics_hold_at_the_edges() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        let kv1 = |op: Value| {
            let env = env.clone();
            async move { kv_results(&env, json!([op])).await.remove(0) }
        };
        // Eight racing putIfAbsent: one winner, the losers see its value.
        let results =
            race(8, |i| kv1(json!({ "op": "putIfAbsent", "ns": "kvt", "key": "race", "value": i, "forever": true })))
                .await;
        assert_eq!(results.iter().filter(|r| r["applied"] == json!(true)).count(), 1, "{results:?}");
        let won = kv_get(&env, "kvt", "race").await["value"].clone();
        for r in results.iter().filter(|r| r["applied"] != json!(true)) {
            has(r, json!({ "reason": "exists", "value": won }));
        }

        // `expect` on an absent key creates nothing.
        let r =
            kv1(json!({ "op": "put", "ns": "kvt", "key": "ghost", "value": 1, "forever": true, "expect": 3 })).await;
        has(&r, json!({ "applied": false, "reason": "absent", "version": 0 }));
        has(&kv_get(&env, "kvt", "ghost").await, json!({ "found": false }));

        // Expiry is exact at read time.
        kv1(json!({ "op": "put", "ns": "kvt", "key": "brief", "value": "x", "ttlSeconds": 1 })).await;
        has(&kv_get(&env, "kvt", "brief").await, json!({ "found": true }));
        tokio::time::sleep(Duration::from_millis(1_600)).await;
        has(&kv_get(&env, "kvt", "brief").await, json!({ "found": false }));
        let r = kv1(json!({ "op": "putIfAbsent", "ns": "kvt", "key": "brief", "value": "y", "ttlSeconds": 60 })).await;
        has(&r, json!({ "applied": true }));

        // incr with `max` refuses whole steps and spends nothing; its TTL is
        // set when the counter is created, never after.
        let incr = |key: &str, delta: i64, expiry: Value| {
            let mut op = json!({ "op": "incr", "ns": "kvt", "key": key, "delta": delta, "max": 10 });
            op.as_object_mut().unwrap().extend(expiry.as_object().unwrap().clone());
            kv1(op)
        };
        let forever = || json!({ "forever": true });
        for (delta, applied, value) in [(5, true, 5.0), (5, true, 10.0), (1, false, 10.0)] {
            let r = incr("ctr", delta, forever()).await;
            assert_eq!((&r["applied"], r["value"].as_f64()), (&json!(applied), Some(value)), "{r}");
            assert!(applied || r["reason"] == json!("limit"), "{r}");
        }
        assert_eq!(kv_get(&env, "kvt", "ctr").await["value"].as_f64(), Some(10.0), "a refused incr spent");
        has(&incr("over", 20, forever()).await, json!({ "applied": false }));
        has(&kv_get(&env, "kvt", "over").await, json!({ "found": false }));
        incr("ttl-ctr", 1, json!({ "ttlSeconds": 100 })).await;
        let first = kv_get(&env, "kvt", "ttl-ctr").await["expiresAt"].clone();
        assert!(first.is_string(), "{first}");
        incr("ttl-ctr", 1, json!({ "ttlSeconds": 5_000 })).await;
        let later = kv_get(&env, "kvt", "ttl-ctr").await;
        assert_eq!((&later["expiresAt"], later["value"].as_f64()), (&first, Some(2.0)), "{later}");

        // getPrefix pages by key with `truncated` and `nextAfter`.
        let keys = ["p/a", "p/b", "p/c", "p/d", "p/e", "q/a", "p"];
        let puts: Vec<Value> =
            keys.iter().map(|k| json!({ "op": "put", "ns": "kvt", "key": k, "value": k, "forever": true })).collect();
        kv_results(&env, Value::Array(puts)).await;
        let pages = walk_pages(|after| {
            kv1(json!({ "op": "getPrefix", "ns": "kvt", "prefix": "p/", "limit": 2, "after": after }))
        })
        .await;
        assert_eq!(column(&pages, "rows", "key"), keys[..5].iter().map(|k| json!(k)).collect::<Vec<_>>(), "{pages:?}");
        for p in &pages[..2] {
            has(p, json!({ "truncated": true, "nextAfter": p["rows"][1]["key"] }));
        }
        has(&pages[2], json!({ "truncated": false, "nextAfter": null }));

        let a = kv(&env, json!([{ "op": "get", "ns": "Bad NS!", "key": "k" }])).await;
        assert_eq!((a.status, &a.body()["error"]), (400, &json!("kv_bad_request")), "{}", a.text);
    });
}

#[test]
fn timers_schedule_fire_move_cancel_and_list() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        let sched = |op, key, delay, payload: Value, txn| timer_op(op, "tq", key, delay, &payload, txn);
        let a = timers(
            &env,
            json!([
                sched("schedule", "k1", 300, json!({ "n": 1 }), "txn-k1"),
                sched("schedule", "k2", 600_000, json!({ "v": "old" }), "txn-k2"),
                sched("schedule", "k3", 600_000, json!("never"), "txn-k3"),
                sched("schedule", "neg", -5_000, json!("neg"), "txn-neg"),
            ]),
        )
        .await;
        let rs = ok_body(&a)["results"].as_array().unwrap_or_else(|| panic!("{}", a.text)).clone();
        for (r, txn) in rs.iter().zip(["txn-k1", "txn-k2", "txn-k3", "txn-neg"]) {
            has(r, json!({ "ok": true, "status": "scheduled", "txn": txn }));
            assert!(r["messageId"].as_str().is_some_and(|id| uuid::Uuid::parse_str(id).is_ok()), "{r}");
            assert_fixed_width("deliverAt", &[r["deliverAt"].as_str().unwrap_or_default()]);
        }
        let moved = timers(&env, json!([sched("reschedule", "k2", 300, json!({ "v": "new" }), "txn-k2-new")])).await;
        let m = ok_body(&moved)["results"][0].clone();
        has(&m, json!({ "ok": true, "status": "rescheduled" }));
        assert!(m["deliverAt"].as_str() < rs[1]["deliverAt"].as_str(), "moved earlier: {m} vs {}", rs[1]);
        has(
            &ok_body(&delete(&env.c, &env.url("/api/v1/timers/tq/k3")).await),
            json!({ "ok": true, "status": "cancelled" }),
        );
        let absent = ok_body(&delete(&env.c, &env.url("/api/v1/timers/tq/nope?txn=echo-me")).await);
        has(&absent, json!({ "ok": false, "status": "absent", "txn": "echo-me" }));

        // Fires carry the promised transaction id, message id and payload.
        let fired = collect(&env, "/api/v1/pop/queue/tq?batch=10", 3, Duration::from_secs(5)).await;
        assert_eq!(fired.len(), 3, "fired: {fired:?}");
        for (txn, data, promised) in [
            ("txn-k1", json!({ "n": 1 }), &rs[0]),
            ("txn-k2-new", json!({ "v": "new" }), &m),
            ("txn-neg", json!("neg"), &rs[3]),
        ] {
            let f =
                fired.iter().find(|f| f["transactionId"] == json!(txn)).unwrap_or_else(|| panic!("{txn}: {fired:?}"));
            has(f, json!({ "data": data, "id": promised["messageId"] }));
        }
        let (late, _) = pop_any(&env, "/api/v1/pop/queue/tq?wait=true&timeout=500").await;
        assert!(late.is_empty(), "a cancelled or moved timer fired: {late:?}");
        has(&get_body(&env, "/api/v1/timers/tq/k1").await, json!({ "found": false }));

        // Listing pages by key.
        let ops: Vec<Value> =
            (1..=5).map(|i| timer_op("schedule", "tl", &format!("l-{i}"), 600_000, &json!(i), "l")).collect();
        assert_eq!(timers(&env, Value::Array(ops)).await.status, 200);
        let pages = walk_pages(|after| {
            let path = format!("/api/v1/timers/tl?limit=2&after={}", after.as_str().unwrap_or_default());
            let env = env.clone();
            async move { get_body(&env, &path).await }
        })
        .await;
        let keys = column(&pages, "rows", "timerKey");
        assert_eq!((json!(keys), pages.len()), (json!(["l-1", "l-2", "l-3", "l-4", "l-5"]), 3), "{pages:?}");

        let twice =
            json!([sched("schedule", "twice", 1_000, json!(1), "a"), sched("schedule", "twice", 2_000, json!(2), "b")]);
        let dup = timers(&env, twice).await;
        assert_eq!((dup.status, &dup.body()["error"]), (400, &json!("timers_bad_request")), "{}", dup.text);
    });
}

#[test]
fn locks_have_one_holder_rising_tokens_and_bounded_semaphores() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        let a = lock1(&env, lock_acquire("mx", "A", 30, 1)).await;
        let t1 = a["token"].as_u64().unwrap_or_else(|| panic!("{a}"));
        let guard = json!({ "op": "check", "ns": "queen-locks", "key": "mx#0", "expect": t1, "required": true });
        has(&a, json!({ "acquired": true, "slot": 0, "guard": guard }));
        let b = lock1(&env, lock_acquire("mx", "B", 30, 1)).await;
        has(&b, json!({ "acquired": false, "reason": "held" }));
        has(&b["holders"][0], json!({ "owner": "A" }));
        has(
            &lock1(&env, lock_acquire("mx", "A", 30, 1)).await,
            json!({ "acquired": true, "already": true, "token": t1 }),
        );

        let renewed = |r: &Value, above: u64| {
            r["token"].as_u64().filter(|t| r["renewed"] == json!(true) && *t > above).unwrap_or_else(|| panic!("{r}"))
        };
        let t2 = renewed(&lock1(&env, lock_renew("mx", "A", t1, 30)).await, t1);
        // The same owner retrying with the token its lost answer replaced.
        let t3 = renewed(&lock1(&env, lock_renew("mx", "A", t1, 30)).await, t2);
        let s = lock1(&env, lock_renew("mx", "B", t2, 30)).await;
        has(&s, json!({ "renewed": false, "reason": "lost" }));
        has(&s["holders"][0], json!({ "owner": "A" }));
        let row = kv_get(&env, "queen-locks", "mx#0").await;
        has(&row, json!({ "found": true, "version": t3 }));
        has(&row["value"], json!({ "owner": "A" }));
        has(
            &lock1(&env, json!({ "op": "release", "name": "mx", "token": t3, "slot": 0 })).await,
            json!({ "released": true }),
        );
        let next = lock1(&env, lock_acquire("mx", "B", 30, 1)).await;
        assert!(next["acquired"] == json!(true) && next["token"].as_u64() > Some(t3), "{next}");

        // A semaphore of three: slots 0..2, a fourth refused, a freed slot reused.
        let mut tokens = Vec::new();
        for (i, owner) in ["s1", "s2", "s3"].iter().enumerate() {
            let r = lock1(&env, lock_acquire("sem", owner, 30, 3)).await;
            has(&r, json!({ "acquired": true, "slot": i }));
            tokens.push(r["token"].clone());
        }
        has(&lock1(&env, lock_acquire("sem", "s4", 30, 3)).await, json!({ "acquired": false }));
        lock1(&env, json!({ "op": "release", "name": "sem", "token": tokens[1], "slot": 1 })).await;
        has(&lock1(&env, lock_acquire("sem", "s5", 30, 3)).await, json!({ "acquired": true, "slot": 1 }));

        let crowd = race(12, |i| {
            let (e, op) = (env.clone(), lock_acquire("crowd", &format!("w{i}"), 30, 3));
            async move { lock1(&e, op).await }
        })
        .await;
        let granted: Vec<u64> =
            crowd.iter().filter(|r| r["acquired"] == json!(true)).map(|r| r["slot"].as_u64().unwrap()).collect();
        let slots: BTreeSet<u64> = granted.iter().copied().collect();
        assert_eq!(slots.len(), granted.len(), "a slot granted twice: {crowd:?}");
        assert!((1..=3).contains(&slots.len()) && slots.iter().all(|s| *s < 3), "granted slots {slots:?}");
        let held = lock1(&env, json!({ "op": "get", "name": "crowd" })).await;
        assert!(held["holders"].as_array().is_some_and(|h| h.len() <= 3), "{held}");
    });
}

#[test]
fn guards_fence_lost_locks_and_survive_own_renewals() {
    paused::run(async {
        let env = Arc::new(Env::paused().await);
        // A's permit lapses and B takes the lock: A's guard no longer holds.
        let a = lock1(&env, lock_acquire("gl", "A", 30, 1)).await;
        has(&a, json!({ "acquired": true }));
        tokio::time::sleep(Duration::from_secs(31)).await;
        let b = lock1(&env, lock_acquire("gl", "B", 30, 1)).await;
        has(&b, json!({ "acquired": true }));
        let v = ok_body(&transaction(&env, &guarded(&a["guard"], "late-a", "gq")).await);
        has(&v, json!({ "success": false, "reason": "kv_precondition", "failedIndex": 1, "version": b["token"] }));
        has(&v["value"], json!({ "owner": "B" }));
        assert!(pop_any(&env, "/api/v1/pop/queue/gq?wait=false").await.0.is_empty(), "a fenced push was applied");
        has(&kv_get(&env, "guarded", "late-a").await, json!({ "found": false }));

        // C renews every 100 ms while its guarded commits run for 1.5 s, one
        // every 10 ms (a commit itself takes no time on the paused clock). A
        // commit that meets C's own renewal re-sends with the new token, as
        // the client does, which it can only tell from the refusal's body.
        let c = lock1(&env, lock_acquire("rl", "C", 2, 1)).await;
        let token = c["token"].as_u64().expect("token");
        let renewer = Renewer::spawn(env.clone(), "rl", "C", token, 2, Duration::from_millis(100));
        let (mut commits, mut resent) = (0, 0);
        let end = Instant::now() + Duration::from_millis(1_500);
        while Instant::now() < end {
            let txn = format!("c-{commits}");
            let mut sent = renewer.current();
            let mut ok = false;
            for _ in 0..4 {
                let guard =
                    json!({ "op": "check", "ns": "queen-locks", "key": "rl#0", "expect": sent, "required": true });
                let v = ok_body(&transaction(&env, &guarded(&guard, &txn, "cq")).await);
                if v["success"] == json!(true) {
                    ok = true;
                    break;
                }
                has(&v, json!({ "reason": "kv_precondition", "failedIndex": 1, "kvReason": "version" }));
                has(&v["value"], json!({ "owner": "C" }));
                assert!(v["version"].as_u64() > Some(sent), "{v}");
                resent += 1;
                sent = renewer.moved_past(sent).await;
            }
            assert!(ok, "guarded commit {txn} failed while its lock was renewed");
            commits += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let renewals = renewer.stop().await;
        assert!(renewals.iter().all(|r| r["renewed"] == json!(true)), "a renewal failed: {renewals:?}");
        assert!(
            renewals.len() >= 5 && commits >= 5,
            "{} renewals, {commits} commits ({resent} re-sent)",
            renewals.len()
        );
        let (msgs, _) = pop_any(&env, "/api/v1/pop/queue/cq?wait=false&batch=10000").await;
        assert_eq!(msgs.len(), commits, "each guarded commit applied exactly once");
    });
}

#[test]
fn the_wire_takes_what_clients_send_and_reads_by_offset() {
    paused::run(async {
        let env = Env::paused().await;
        let mut seen: Vec<(String, Answer)> = Vec::new();
        // Empty-body POSTs: extend, stats/refresh, seek (= to the end), DLQ retry.
        push_one(&env, "wire", "Default", "w0", json!(0)).await;
        let (_, v) = pop_any(&env, "/api/v1/pop/queue/wire?wait=false&consumerGroup=sk&subscriptionMode=all").await;
        let lease = v["leaseId"].as_str().expect("leaseId");
        let ext = post_empty(&env.c, &env.url(&format!("/api/v1/lease/{lease}/extend"))).await;
        has(&ok_body(&ext), json!({ "success": true }));
        let refresh = post_empty(&env.c, &env.url("/api/v1/stats/refresh")).await;
        ok_body(&refresh);
        let seek = post_empty(&env.c, &env.url("/api/v1/consumer-groups/sk/queues/wire/seek")).await;
        has(&ok_body(&seek), json!({ "seekToEnd": true }));
        push_one(&env, "wire", "Default", "w1", json!(1)).await;
        let (after_seek, _) = pop_any(&env, "/api/v1/pop/queue/wire?wait=false&consumerGroup=sk&batch=10").await;
        assert_eq!(txns(&after_seek), ["w1"], "a seek without a body goes to the end and clears the lease");
        support::configure(&env.c, &env.base, "wire-dlq", json!({ "retryLimit": 0 })).await;
        push_one(&env, "wire-dlq", "Default", "d0", json!("d")).await;
        let (d, _) = pop_any(&env, "/api/v1/pop/queue/wire-dlq?wait=false").await;
        has(&ack_one(&env, ack_of(&d[0], "failed", None, Some("x"))).await[0], json!({ "dlq": true }));
        let pid = d[0]["partitionId"].as_str().expect("partitionId");
        let retry = post_empty(&env.c, &env.url(&format!("/api/v1/messages/{pid}/d0/retry"))).await;
        assert!((200..300).contains(&retry.status), "retry without a body: {} {}", retry.status, retry.text);
        seen.extend(
            [("extend", ext), ("refresh", refresh), ("seek", seek), ("retry", retry)].map(|(k, a)| (k.into(), a)),
        );

        // A doubled leading slash is one slash.
        let item = r#"{"items":[{"queue":"wire","partition":"Default","transactionId":"slash","payload":2}]}"#;
        let (pushed, push_body) = raw(&env, "POST", "//api/v1/push", item).await;
        let (popped, pop_body) = raw(&env, "GET", "//api/v1/pop/queue/wire?wait=false&batch=10", "").await;
        assert_eq!(pushed, 201, "POST //api/v1/push: {push_body}");
        assert!(popped == 200 && pop_body.contains("\"slash\""), "GET //api/v1/pop: {popped} {pop_body}");

        // Percent-encoded path segments and `+` in query strings are decoded.
        push_one(&env, "sp ace", "pa rt", "sp0", json!("sp")).await;
        let path =
            "/api/v1/pop/queue/sp%20ace/partition/pa%20rt?wait=false&consumerGroup=my+group&subscriptionMode=all";
        let (m, v) = pop_any(&env, path).await;
        assert_eq!(txns(&m), ["sp0"]);
        has(&m[0], json!({ "partition": "pa rt", "consumerGroup": "my group" }));
        has(&v, json!({ "consumerGroup": "my group" }));
        complete_all(&env, &m, Some("my group")).await;
        assert_eq!(
            timers(&env, json!([timer_op("schedule", "sp ace", "a/b c+d", 600_000, &json!(1), "tk")])).await.status,
            200
        );
        let timer = env.url(&format!("/api/v1/timers/{}/{}", enc("sp ace", false), enc("a/b c+d", true)));
        let peek = get(&env.c, &timer).await;
        has(&ok_body(&peek), json!({ "found": true, "timerKey": "a/b c+d" }));
        let cancel = delete(&env.c, &timer).await;
        has(&ok_body(&cancel), json!({ "status": "cancelled" }));
        seen.extend([("peek", peek), ("cancel", cancel)].map(|(k, a)| (k.into(), a)));

        // Odd requests still answer JSON, never a redirect.
        let odd = [
            ("GET", "/api/v1/nope"),
            ("GET", "/api/v1/push"),
            ("POST", "/api/v1/ack/"),
            ("GET", "/api/v1/resources/queues/wire/"),
            ("GET", "/api/v1/pop/queue/wire/?wait=false"),
        ];
        for (method, path) in odd {
            seen.push((format!("{method} {path}"), send(&env, method, path).await));
        }
        assert_json_answers(&seen);

        // Reads by offset: fetch over 1200 partitions, one message each.
        push_spread(&env, "reads", "r-", 1_200, 600).await;
        let ask =
            |p: String, offset: u64| json!({ "queue": "reads", "partition": p, "offset": offset, "maxBytes": 1 << 20 });
        let got = fetch(&env, &(0..1_200).map(|i| ask(format!("r-{i}"), 0)).collect::<Vec<_>>()).await;
        let mut times = Vec::new();
        for (i, e) in got.iter().enumerate() {
            has(e, json!({ "partition": format!("r-{i}"), "highWatermark": 1, "logStartOffset": 0, "error": null }));
            assert_eq!(e["records"].as_array().map(Vec::len), Some(1), "{e}");
            has(&e["records"][0], json!({ "offset": 0, "transactionId": format!("r-t{i}"), "payload": { "i": i } }));
            times.push(e["records"][0]["ts"].as_str().unwrap_or_default().to_string());
        }
        push_one(&env, "reads", "r-7", "r-late", json!("late")).await;
        let late =
            fetch(&env, &[ask("r-7".into(), 1), json!({ "queue": "no-such", "partition": "x", "offset": 0 })]).await;
        has(&late[0]["records"][0], json!({ "offset": 1, "transactionId": "r-late" }));
        has(&late[1], json!({ "error": "UNKNOWN_TOPIC_OR_PARTITION" }));
        let (m, _) = pop_any(&env, "/api/v1/pop/queue/reads/partition/r-7?wait=false&batch=10").await;
        assert_eq!(txns(&m), ["r-t7", "r-late"], "reads by offset moved a cursor");

        // Partition discovery over 1100 partitions: two pages, then `since`.
        push_spread(&env, "chg", "c-", 1_100, 550).await;
        let pages = changed(&env, "chg", None).await;
        let all = partitions_of(&pages);
        assert_eq!((pages.len(), all.len()), (2, 1_100), "pages of at most 1000");
        let names: BTreeSet<String> = all.iter().map(|p| p["name"].as_str().unwrap_or_default().to_string()).collect();
        assert_eq!(names, (0..1_100).map(|i| format!("c-{i}")).collect::<BTreeSet<_>>());
        let c5 = all.iter().find(|p| p["name"] == json!("c-5")).expect("c-5");
        has(c5, json!({ "lastOffset": 0, "logStart": 0 }));
        assert!(c5["id"].is_string(), "{c5}");
        let safe = pages.iter().filter_map(|p| p["safeTime"].as_str()).min().expect("safeTime").to_string();
        times.extend(pages.iter().filter_map(|p| p["safeTime"].as_str().map(str::to_string)));
        times.extend(all.iter().filter_map(|p| p["lastWriteAt"].as_str().map(str::to_string)));
        push_one(&env, "chg", "c-42", "c-late", json!("late")).await;
        let since = partitions_of(&changed(&env, "chg", Some(&safe)).await);
        let c42 = since.iter().find(|p| p["name"] == json!("c-42")).unwrap_or_else(|| panic!("c-42 since {safe}"));
        has(c42, json!({ "lastOffset": 1 }));
        for p in &since {
            let at = p["lastWriteAt"].as_str().unwrap_or_default();
            assert!(at >= safe.as_str(), "{at} is before safeTime {safe}: {p}");
            times.push(at.to_string());
        }
        assert_fixed_width("read timestamps", &times.iter().map(String::as_str).collect::<Vec<_>>());
    });
}
