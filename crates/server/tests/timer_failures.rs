//! Timers against a real broker: `at` schedules, the row fields, listing by
//! state and in due order, refused fires that retry and then stay failed,
//! the retry operation, the timer retry options, the metrics, sealed
//! payloads of encrypted queues, and every refusal.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Value};
use support::paused::PausedNode;
use support::*;
use tokio::time::Instant;

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(v.to_string())
}

fn unb64(v: &Value) -> Value {
    let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or_default()).expect("base64");
    serde_json::from_slice(&bytes).expect("JSON payload")
}

/// The wall clock, for a process-based broker (a node on the paused
/// harness has its own: `PausedNode::now_ms`).
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn iso_ms(v: &Value) -> u64 {
    regina_types::time::parse_iso(v.as_str().unwrap_or_else(|| panic!("not a time: {v}"))).expect("an ISO time")
}

/// A schedule op; `when` holds `delayMs` or `at`.
fn sched(queue: &str, key: &str, when: Value, payload: Value) -> Value {
    let mut op = json!({ "op": "schedule", "queue": queue, "timerKey": key, "payload": b64(&payload) });
    op.as_object_mut().unwrap().extend(when.as_object().unwrap().clone());
    op
}

async fn timers(c: &reqwest::Client, base: &str, ops: Value) -> (u16, Value) {
    post_json(c, &format!("{base}/api/v1/timers"), &json!({ "operations": ops })).await
}

/// The single result of a one-op call, asserting a 200.
async fn timer1(c: &reqwest::Client, base: &str, op: Value) -> Value {
    let (status, v) = timers(c, base, json!([op])).await;
    assert_eq!(status, 200, "{v}");
    v["results"][0].clone()
}

async fn peek(c: &reqwest::Client, base: &str, queue: &str, key: &str) -> Value {
    let (status, v) = get_json(c, &format!("{base}/api/v1/timers/{queue}/{key}")).await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Polls a timer until `done` holds for its row, failing after `within`.
async fn await_row(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    key: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let row = peek(c, base, queue, key).await;
        if done(&row) {
            return row;
        }
        assert!(start.elapsed() < within, "timer {queue}/{key} never reached the expected state: {row}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn refused(answer: &(u16, Value), status: u16, reason: &str) {
    assert_eq!((answer.0, answer.1["reason"].as_str()), (status, Some(reason)), "{}", answer.1);
    assert!(answer.1["detail"].as_str().is_some_and(|d| !d.is_empty()), "a refusal says why: {}", answer.1);
}

async fn pop_all(c: &reqwest::Client, base: &str, queue: &str) -> Vec<Value> {
    messages(&pop(c, base, &format!("/api/v1/pop/queue/{queue}?batch=100&wait=false&autoAck=true")).await)
}

#[test]
fn at_schedules_by_iso_time_or_epoch_ms_and_rows_carry_their_fields() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let in_an_hour = broker.now_ms() + 3_600_000;
        let iso = regina_types::time::format_iso(in_an_hour);
        let a = timer1(&c, &base, sched("at", "iso", json!({ "at": iso }), json!({ "n": 1 }))).await;
        assert_eq!((a["ok"].clone(), iso_ms(&a["deliverAt"])), (json!(true), in_an_hour), "{a}");
        let b = timer1(&c, &base, sched("at", "ms", json!({ "at": in_an_hour + 5 }), json!({ "n": 2 }))).await;
        assert_eq!(iso_ms(&b["deliverAt"]), in_an_hour + 5, "{b}");

        let row = peek(&c, &base, "at", "iso").await;
        assert_eq!(
            (&row["found"], &row["state"], &row["attempts"], &row["error"]),
            (&json!(true), &json!("pending"), &json!(0), &Value::Null),
            "{row}"
        );
        assert_eq!(iso_ms(&row["deliverAt"]), in_an_hour);
        assert_eq!(row["createdAt"], row["updatedAt"], "{row}");
        assert_eq!(unb64(&row["payload"]), json!({ "n": 1 }));

        // A time in the past fires at the next check.
        let past = timer1(&c, &base, sched("at", "past", json!({ "at": "2001-01-01T00:00:00Z" }), json!("late"))).await;
        assert_eq!(past["ok"], json!(true), "{past}");
        assert!(iso_ms(&past["deliverAt"]) >= broker.now_ms() - 60_000, "deliverAt is the entry's time: {past}");
        await_row(&c, &base, "at", "past", Duration::from_secs(5), |r| r["found"] == json!(false)).await;
        let fired = pop_all(&c, &base, "at").await;
        assert_eq!(fired.iter().map(|m| m["data"].clone()).collect::<Vec<_>>(), [json!("late")]);

        // A timer rider of a transaction takes `at` too.
        let (status, t) = post_json(
            &c,
            &format!("{base}/api/v1/transaction"),
            &json!({ "operations": [], "timers": [sched("at", "txn", json!({ "at": in_an_hour }), json!(3))] }),
        )
        .await;
        assert_eq!(status, 200, "{t}");
        assert_eq!(iso_ms(&peek(&c, &base, "at", "txn").await["deliverAt"]), in_an_hour);

        // So does a retry rider, answering TIMER_NOT_FAILED for a pending timer
        // without rolling the step back.
        let retry = json!({ "op": "retry", "queue": "at", "timerKey": "txn" });
        let (status, t) = post_json(
            &c,
            &format!("{base}/api/v1/transaction"),
            &json!({ "operations": [], "timers": [retry, sched("at", "more", json!({ "delayMs": 3_600_000 }), json!(4))] }),
        )
        .await;
        assert_eq!(status, 200, "{t}");
        let r = &t["results"][0];
        assert_eq!(
            (&r["type"], &r["ok"], &r["code"]),
            (&json!("timer"), &json!(false), &json!("TIMER_NOT_FAILED")),
            "{t}"
        );
        assert_eq!(peek(&c, &base, "at", "more").await["found"], json!(true));
    });
}

#[test]
fn every_refusal_names_its_reason() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let both = sched("r", "k", json!({ "at": broker.now_ms(), "delayMs": 10 }), json!(1));
        refused(&timers(&c, &base, json!([both.clone()])).await, 400, "timers_at_and_delay");
        let neither = sched("r", "k", json!({}), json!(1));
        refused(&timers(&c, &base, json!([neither])).await, 400, "timers_delay_required");
        for bad_at in [json!("next tuesday"), json!(-5), json!(1.5), json!(true), json!("2024-13-01T00:00:00Z")] {
            refused(
                &timers(&c, &base, json!([sched("r", "k", json!({ "at": bad_at }), json!(1))])).await,
                400,
                "timers_bad_at",
            );
        }
        let far = broker.now_ms() + regina_types::limits::TIMER_HORIZON_MS + 60_000;
        refused(
            &timers(&c, &base, json!([sched("r", "k", json!({ "at": far }), json!(1))])).await,
            403,
            "timers_horizon",
        );
        let retry_far = json!({ "op": "retry", "queue": "r", "timerKey": "k", "delayMs": regina_types::limits::TIMER_HORIZON_MS + 1 });
        refused(&timers(&c, &base, json!([retry_far])).await, 403, "timers_horizon");
        let retry_at = json!({ "op": "retry", "queue": "r", "timerKey": "k", "at": broker.now_ms() });
        refused(&timers(&c, &base, json!([retry_at])).await, 400, "timers_bad_op");
        let owned = json!({ "op": "schedule", "queue": "r", "timerKey": "k", "delayMs": 1, "payload": b64(&json!(1)), "state": "failed" });
        refused(&timers(&c, &base, json!([owned])).await, 400, "timers_server_owned_field");

        // The same refusals for a transaction's timer riders; nothing commits.
        let txn =
            post_json(&c, &format!("{base}/api/v1/transaction"), &json!({ "operations": [], "timers": [both] })).await;
        refused(&txn, 400, "timers_at_and_delay");

        for (query, reason) in [
            ("order=random", "timers_bad_order"),
            ("state=lost", "timers_bad_state"),
            ("order=due&after=k", "timers_bad_after"),
        ] {
            refused(&get_json(&c, &format!("{base}/api/v1/timers/r?{query}")).await, 400, reason);
        }
        for bad in [
            json!({ "timerMaxAttempts": 0 }),
            json!({ "timerMaxAttempts": regina_types::limits::TIMER_MAX_ATTEMPTS_MAX + 1 }),
            json!({ "timerRetryDelayMs": "soon" }),
            json!({ "timerMaxRetryDelayMs": regina_types::limits::TIMER_RETRY_DELAY_MS_MAX + 1 }),
        ] {
            let (status, v) =
                post_json(&c, &format!("{base}/api/v1/configure"), &json!({ "queue": "r", "options": bad })).await;
            assert_eq!(status, 400, "{v}");
        }
        let (_, listed) = get_json(&c, &format!("{base}/api/v1/timers/r")).await;
        assert_eq!(listed["rows"], json!([]), "no refused call scheduled anything");
    });
}

#[test]
fn a_refused_fire_retries_fails_and_a_retry_fires_it() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let cfg = configure(
            &c,
            &base,
            "box",
            json!({ "maxSize": 1, "timerMaxAttempts": 3, "timerRetryDelayMs": 40, "timerMaxRetryDelayMs": 60 }),
        )
        .await;
        for (k, v) in [("timerMaxAttempts", 3), ("timerRetryDelayMs", 40), ("timerMaxRetryDelayMs", 60)] {
            assert_eq!((&cfg["options"][k], &cfg[k]), (&json!(v), &json!(v)), "shown with the queue options: {cfg}");
        }
        let (_, shown) = get_json(&c, &format!("{base}/api/v1/resources/queues/box")).await;
        assert_eq!(shown["config"]["timerRetryDelayMs"], json!(40), "{shown}");
        push(&c, &base, vec![json!({ "queue": "box", "payload": "filler", "transactionId": "filler" })]).await;
        timer1(&c, &base, sched("box", "t1", json!({ "delayMs": 0 }), json!({ "pay": 1 }))).await;
        timer1(&c, &base, sched("box", "later", json!({ "delayMs": 3_600_000 }), json!(2))).await;

        let row = await_row(&c, &base, "box", "t1", Duration::from_secs(5), |r| r["state"] == json!("failed")).await;
        assert_eq!(row["attempts"], json!(3), "{row}");
        assert_eq!(row["error"]["code"], json!("QUEUE_FULL"), "{row}");
        assert_eq!(row["error"]["maxSize"], json!(1), "{row}");
        assert!(row["error"]["message"].as_str().is_some_and(|m| m.contains("maxSize")), "{row}");
        assert!(row["updatedAt"].as_str() > row["createdAt"].as_str(), "{row}");
        // 40 ms then 60 ms (capped): the last attempt came at least 100 ms after the first.
        assert!(iso_ms(&row["updatedAt"]) - iso_ms(&row["createdAt"]) >= 100, "{row}");

        // It never fires by itself, and the timer driver proposes nothing for
        // it: no entry is applied while it sits there.
        let applied = |m: &Value| m["requests"]["appliedEntries"].as_u64().unwrap_or_else(|| panic!("{m}"));
        let before = applied(&get_json(&c, &format!("{base}/metrics")).await.1);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            applied(&get_json(&c, &format!("{base}/metrics")).await.1),
            before,
            "the driver spins on a failed timer"
        );
        assert_eq!(peek(&c, &base, "box", "t1").await["attempts"], json!(3));

        let keys = |v: &Value| v["rows"].as_array().unwrap().iter().map(|r| r["timerKey"].clone()).collect::<Vec<_>>();
        let (_, failed) = get_json(&c, &format!("{base}/api/v1/timers/box?state=failed")).await;
        assert_eq!(keys(&failed), [json!("t1")], "{failed}");
        let (_, pending) = get_json(&c, &format!("{base}/api/v1/timers/box?state=pending")).await;
        assert_eq!(keys(&pending), [json!("later")], "{pending}");

        let (_, m) = get_json(&c, &format!("{base}/metrics")).await;
        assert_eq!(m["timers"], json!({ "pending": 1, "failed": 1 }), "{m}");
        let text =
            c.get(format!("{base}/metrics")).header("accept", "text/plain").send().await.unwrap().text().await.unwrap();
        assert!(text.contains("regina_timers{state=\"failed\"} 1"), "{text}");
        assert!(text.contains("regina_timers{state=\"pending\"} 1"), "{text}");

        // Only a failed timer can be retried.
        let r = timer1(&c, &base, json!({ "op": "retry", "queue": "box", "timerKey": "later" })).await;
        assert_eq!(
            (&r["ok"], &r["code"], &r["status"]),
            (&json!(false), &json!("TIMER_NOT_FAILED"), &json!("pending")),
            "{r}"
        );
        let r = timer1(&c, &base, json!({ "op": "retry", "queue": "box", "timerKey": "nobody" })).await;
        assert_eq!(
            (&r["ok"], &r["code"], &r["status"]),
            (&json!(false), &json!("TIMER_NOT_FAILED"), &json!("absent")),
            "{r}"
        );

        // Room again, then a retry: fresh attempts, and it fires.
        configure(&c, &base, "box", json!({ "maxSize": 10 })).await;
        let r = timer1(&c, &base, json!({ "op": "retry", "queue": "box", "timerKey": "t1", "delayMs": 50 })).await;
        assert_eq!((&r["ok"], &r["status"]), (&json!(true), &json!("retried")), "{r}");
        let row = peek(&c, &base, "box", "t1").await;
        assert_eq!(
            (&row["state"], &row["attempts"], &row["error"]),
            (&json!("pending"), &json!(0), &Value::Null),
            "{row}"
        );
        await_row(&c, &base, "box", "t1", Duration::from_secs(5), |r| r["found"] == json!(false)).await;
        let data: Vec<Value> = pop_all(&c, &base, "box").await.into_iter().map(|m| m["data"].clone()).collect();
        assert_eq!(data, [json!("filler"), json!({ "pay": 1 })]);
        let (_, m) = get_json(&c, &format!("{base}/metrics")).await;
        assert_eq!(m["timers"], json!({ "pending": 1, "failed": 0 }), "{m}");
    });
}

#[test]
fn the_default_retry_policy_waits_1_then_2_seconds_and_fails_after_3_attempts() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let cfg = configure(&c, &base, "slow", json!({ "maxSize": 1 })).await;
        assert_eq!(
            (&cfg["timerMaxAttempts"], &cfg["timerRetryDelayMs"], &cfg["timerMaxRetryDelayMs"]),
            (&json!(3), &json!(1_000), &json!(60_000)),
            "{cfg}"
        );
        push(&c, &base, vec![json!({ "queue": "slow", "payload": 0, "transactionId": "f" })]).await;
        timer1(&c, &base, sched("slow", "t", json!({ "delayMs": 0 }), json!(1))).await;
        let wait = |row: &Value| iso_ms(&row["deliverAt"]) - iso_ms(&row["updatedAt"]);
        let one = await_row(&c, &base, "slow", "t", Duration::from_secs(5), |r| r["attempts"] == json!(1)).await;
        assert_eq!((wait(&one), &one["state"]), (1_000, &json!("pending")), "{one}");
        let two = await_row(&c, &base, "slow", "t", Duration::from_secs(5), |r| r["attempts"] == json!(2)).await;
        assert_eq!(wait(&two), 2_000, "{two}");
        let three = await_row(&c, &base, "slow", "t", Duration::from_secs(8), |r| r["attempts"] == json!(3)).await;
        assert_eq!(three["state"], json!("failed"), "{three}");
        assert!(iso_ms(&three["updatedAt"]) - iso_ms(&one["updatedAt"]) >= 3_000, "{one} {three}");
    });
}

#[test]
fn scheduling_again_resets_a_failed_timer_and_a_duplicate_fire_counts_as_fired() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        configure(&c, &base, "full", json!({ "maxSize": 1, "timerMaxAttempts": 1 })).await;
        push(&c, &base, vec![json!({ "queue": "full", "payload": 0, "transactionId": "f" })]).await;
        timer1(&c, &base, sched("full", "t", json!({ "delayMs": 0 }), json!(1))).await;
        await_row(&c, &base, "full", "t", Duration::from_secs(5), |r| r["state"] == json!("failed")).await;
        let again = timer1(&c, &base, sched("full", "t", json!({ "delayMs": 3_600_000 }), json!(2))).await;
        assert_eq!(again["status"], json!("rescheduled"), "{again}");
        let row = peek(&c, &base, "full", "t").await;
        assert_eq!(
            (&row["state"], &row["attempts"], &row["error"]),
            (&json!("pending"), &json!(0), &Value::Null),
            "{row}"
        );

        // The message the timer promises is stored already: the fire is a dedup hit.
        push(&c, &base, vec![json!({ "queue": "dups", "payload": "first", "transactionId": "once" })]).await;
        let op = json!({ "op": "schedule", "queue": "dups", "timerKey": "d", "delayMs": 0, "payload": b64(&json!("second")), "txn": "once" });
        timer1(&c, &base, op).await;
        await_row(&c, &base, "dups", "d", Duration::from_secs(5), |r| r["found"] == json!(false)).await;
        let data: Vec<Value> = pop_all(&c, &base, "dups").await.into_iter().map(|m| m["data"].clone()).collect();
        assert_eq!(data, [json!("first")]);
    });
}

#[test]
fn lists_by_key_by_default_and_pages_in_due_order() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let t = broker.now_ms() + 3_600_000;
        for (k, at) in [("a", t + 30), ("b", t + 10), ("c", t + 20), ("d", t + 10), ("e", t)] {
            timer1(&c, &base, sched("ord", k, json!({ "at": at }), json!(k))).await;
        }
        let keys = |v: &Value| {
            v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["timerKey"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let (_, by_key) = get_json(&c, &format!("{base}/api/v1/timers/ord")).await;
        assert_eq!(
            (keys(&by_key), &by_key["order"]),
            (vec!["a", "b", "c", "d", "e"].into_iter().map(String::from).collect(), &json!("key"))
        );
        let mut seen = Vec::new();
        let mut after = String::new();
        let mut pages = 0;
        loop {
            let url = format!("{base}/api/v1/timers/ord?order=due&limit=2&after={}", after.replace(':', "%3A"));
            let (status, page) = get_json(&c, &url).await;
            assert_eq!(status, 200, "{page}");
            pages += 1;
            seen.extend(keys(&page));
            match page["nextAfter"].as_str() {
                Some(next) => {
                    let last = page["rows"][1].clone();
                    assert_eq!(next, format!("{}:{}", iso_ms(&last["deliverAt"]), last["timerKey"].as_str().unwrap()));
                    after = next.to_string();
                }
                None => break,
            }
        }
        assert_eq!(seen, ["e", "b", "d", "c", "a"]);
        assert_eq!(pages, 3);
    });
}

const SECRET: &str = "timer-secret-4111-1111";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_payloads_of_an_encrypted_queue_are_sealed_on_disk() {
    let ws = Workspace::new();
    let mut broker = Broker::start(&ws);
    let (c, base) = (client(), broker.base());
    configure(&c, &base, "vault", json!({ "encryptionEnabled": true })).await;
    timer1(&c, &base, sched("vault", "later", json!({ "delayMs": 3_600_000 }), json!({ "card": SECRET }))).await;
    timer1(&c, &base, sched("vault", "now", json!({ "at": now_ms() }), json!({ "card": SECRET }))).await;
    timer1(&c, &base, sched("open", "later", json!({ "delayMs": 3_600_000 }), json!("clear-timer-marker"))).await;
    let row = peek(&c, &base, "vault", "later").await;
    assert_eq!((unb64(&row["payload"]), &row["encrypted"]), (json!({ "card": SECRET }), &json!(true)), "{row}");
    assert_eq!(peek(&c, &base, "open", "later").await["encrypted"], json!(false));
    await_row(&c, &base, "vault", "now", Duration::from_secs(5), |r| r["found"] == json!(false)).await;
    let fired = pop_all(&c, &base, "vault").await;
    assert_eq!(fired.iter().map(|m| m["data"].clone()).collect::<Vec<_>>(), [json!({ "card": SECRET })]);

    broker.terminate(Duration::from_secs(10));
    let dir = ws.data_dir();
    assert!(files_containing(&dir, SECRET.as_bytes()).is_empty(), "a timer payload in plaintext on disk");
    assert!(!files_containing(&dir, b"clear-timer-marker").is_empty(), "the check would not see plaintext at all");

    broker.restart();
    let (c, base) = (client(), broker.base());
    let (_, listed) = get_json(&c, &format!("{base}/api/v1/timers/vault")).await;
    assert_eq!(unb64(&listed["rows"][0]["payload"]), json!({ "card": SECRET }), "{listed}");
}
