//! Bad requests get a 4xx JSON error naming the problem and change nothing;
//! refusals the protocol defines as answers (a stale ack, an unknown lease)
//! are 200s with `success: false`; long polls, odd paths and odd payloads
//! behave as clients expect.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use support::paused;
use support::paused::PausedNode;

/// Asserts a 4xx (`want`) JSON error with a non-empty `error` and `code`.
fn assert_error(what: &str, status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{what}: status {status}, body {body}");
    let error = body["error"].as_str().unwrap_or_default();
    let code = body["code"].as_str().unwrap_or_default();
    assert!(!error.is_empty(), "{what}: no error text in {body}");
    assert!(!code.is_empty(), "{what}: no error code in {body}");
}

async fn send_raw(c: &reqwest::Client, method: reqwest::Method, url: &str, body: Option<Vec<u8>>) -> (u16, Value) {
    let mut req = c.request(method.clone(), url);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    support::json_of(resp).await
}

async fn post_raw(c: &reqwest::Client, url: &str, body: impl Into<Vec<u8>>) -> (u16, Value) {
    send_raw(c, reqwest::Method::POST, url, Some(body.into())).await
}

/// Pushes `item` half a second from now, from a task of its own; answers
/// when the push was answered.
fn push_after(c: &reqwest::Client, base: &str, item: Value) -> tokio::task::JoinHandle<Instant> {
    let (c, base) = (c.clone(), base.to_string());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        support::push(&c, &base, vec![item]).await;
        Instant::now()
    })
}

/// An ack answered `success: false` with an error naming `needle`.
fn assert_refused(a: &Value, needle: &str) {
    assert_eq!(a["success"], json!(false), "{a}");
    assert!(a["error"].as_str().unwrap_or_default().contains(needle), "{a}");
}

#[test]
fn bad_requests_are_json_errors_and_change_nothing() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        const Q: &str = "guarded";
        let push_url = format!("{base}/api/v1/push");
        let ack_url = format!("{base}/api/v1/ack");
        let configure_url = format!("{base}/api/v1/configure");

        // What must survive everything below.
        let v = support::configure(&c, &base, Q, json!({ "leaseTime": 7, "retryLimit": 2 })).await;
        assert_eq!(v["options"]["leaseTime"], json!(7), "{v}");
        let sentinel = json!({ "keep": "me", "n": [1, 2, 3], "nested": { "ok": true } });
        let r = support::push(
            &c,
            &base,
            vec![json!({ "queue": Q, "partition": "A", "transactionId": "sentinel", "payload": sentinel })],
        )
        .await;
        assert_eq!(r[0]["status"], json!("queued"), "{r:?}");
        let pid = r[0]["partitionId"].as_str().expect("partitionId").to_string();

        // Malformed JSON.
        for (what, url) in [("push", &push_url), ("ack", &ack_url), ("configure", &configure_url)] {
            let (s, b) = post_raw(&c, url, r#"{"items": [ {"queue": "guarded", "#).await;
            assert_error(&format!("malformed JSON to {what}"), s, &b, 400);
            let (s, b) = post_raw(&c, url, "").await;
            assert_error(&format!("empty body to {what}"), s, &b, 400);
        }

        // Push bodies that are not a list of valid items. Each names the
        // guarded queue where it can, so an accepted one would show up there.
        let long_queue = "q".repeat(256);
        let long_txn = "t".repeat(65_536);
        let cases: Vec<(&str, Value, u16)> = vec![
            ("items missing", json!({}), 400),
            ("items not an array", json!({ "items": { "queue": Q } }), 400),
            ("items a number", json!({ "items": 5 }), 400),
            ("items empty", json!({ "items": [] }), 400),
            ("item without queue", json!({ "items": [{ "partition": "A", "payload": 1 }] }), 400),
            ("queue empty", json!({ "items": [{ "queue": "", "payload": 1 }] }), 400),
            ("queue with a control character", json!({ "items": [{ "queue": "guar\u{1}ded", "payload": 1 }] }), 400),
            ("queue not a string", json!({ "items": [{ "queue": 12, "payload": 1 }] }), 400),
            ("queue over 255 bytes", json!({ "items": [{ "queue": long_queue, "payload": 1 }] }), 413),
            (
                "transactionId over 65535 bytes",
                json!({ "items": [{ "queue": Q, "partition": "A", "transactionId": long_txn, "payload": 1 }] }),
                413,
            ),
            (
                // One bad item spoils the request: the good one before it must
                // not be stored either.
                "a good item then a bad one",
                json!({ "items": [
                    { "queue": Q, "partition": "A", "transactionId": "half", "payload": 1 },
                    { "queue": "", "payload": 2 },
                ] }),
                400,
            ),
        ];
        for (what, body, want) in cases {
            let (s, b) = support::post_json(&c, &push_url, &body).await;
            assert_error(what, s, &b, want);
        }
        let many: Vec<Value> = (0..10_001)
            .map(|i| json!({ "queue": Q, "partition": "A", "transactionId": format!("m{i}"), "payload": i }))
            .collect();
        let (s, b) = support::post_json(&c, &push_url, &json!({ "items": many })).await;
        assert_error("10001 items", s, &b, 413);
        assert!(b["error"].as_str().unwrap_or_default().contains("10000"), "the refusal names the limit: {b}");

        // A well-formed push just over the 64 MiB body limit.
        let mut huge = Vec::with_capacity(65 * 1024 * 1024 + 128);
        huge.extend_from_slice(
            format!(r#"{{"items":[{{"queue":"{Q}","partition":"A","transactionId":"huge","payload":""#).as_bytes(),
        );
        huge.resize(huge.len() + 65 * 1024 * 1024, b'x');
        huge.extend_from_slice(br#""}]}"#);
        let (s, b) = post_raw(&c, &push_url, huge).await;
        assert_error("a 65 MiB body", s, &b, 413);

        // Pop parameters.
        for query in [
            "batch=0",
            "batch=abc",
            "batch=-1",
            "batch=10001",
            "wait=maybe",
            "timeout=soon",
            "consumerGroup=g&subscriptionMode=bogus",
            "consumerGroup=g&subscriptionFrom=yesterday",
        ] {
            for path in [format!("/api/v1/pop/queue/{Q}"), format!("/api/v1/pop/queue/{Q}/partition/A")] {
                // The last value of a parameter wins, so the bad one goes last
                // (`wait=false&wait=maybe`).
                let (s, b) = support::get_json(&c, &format!("{base}{path}?wait=false&{query}")).await;
                assert_error(&format!("pop {path}?{query}"), s, &b, 400);
            }
        }
        let (s, b) = support::get_json(&c, &format!("{base}/api/v1/pop?wait=false")).await;
        assert_error("discovery pop without namespace or task", s, &b, 400);

        // Acks that cannot be judged.
        let ack_cases: Vec<(&str, Value)> = vec![
            ("ack without transactionId", json!({ "partitionId": pid, "status": "completed" })),
            (
                "ack with an empty transactionId",
                json!({ "transactionId": "", "partitionId": pid, "status": "completed" }),
            ),
            ("ack without partitionId", json!({ "transactionId": "sentinel", "status": "completed" })),
            (
                "ack with an object partitionId",
                json!({ "transactionId": "sentinel", "partitionId": { "id": pid }, "status": "completed" }),
            ),
            ("ack with status bogus", json!({ "transactionId": "sentinel", "partitionId": pid, "status": "bogus" })),
            (
                "ack with a 200-byte leaseId",
                json!({ "transactionId": "sentinel", "partitionId": pid, "leaseId": "l".repeat(200) }),
            ),
        ];
        for (what, body) in ack_cases {
            let (s, b) = support::post_json(&c, &ack_url, &body).await;
            assert_error(what, s, &b, 400);
        }
        let batch_url = format!("{base}/api/v1/ack/batch");
        let (s, b) = support::post_json(&c, &batch_url, &json!({ "acknowledgments": "all" })).await;
        assert_error("batch ack with acknowledgments not an array", s, &b, 400);
        let (s, b) = support::post_json(
            &c,
            &batch_url,
            &json!({ "acknowledgments": [
                { "transactionId": "sentinel", "partitionId": pid, "status": "completed" },
                { "transactionId": "sentinel", "partitionId": pid, "status": "bogus" },
            ] }),
        )
        .await;
        assert_error("batch ack with one bad status", s, &b, 400);

        // Configure with options out of range or of the wrong type.
        let configure_cases: Vec<(&str, Value)> = vec![
            ("leaseTime -1", json!({ "queue": Q, "options": { "leaseTime": -1 } })),
            ("leaseTime 0", json!({ "queue": Q, "options": { "leaseTime": 0 } })),
            ("leaseTime \"10\"", json!({ "queue": Q, "options": { "leaseTime": "10" } })),
            ("retryLimit 1.5", json!({ "queue": Q, "options": { "retryLimit": 1.5 } })),
            ("retentionEnabled \"yes\"", json!({ "queue": Q, "options": { "retentionEnabled": "yes" } })),
            ("options a string", json!({ "queue": Q, "options": "fast" })),
            ("options an array", json!({ "queue": Q, "options": [1] })),
            ("queue missing", json!({ "options": { "leaseTime": 9 } })),
            ("queue a number", json!({ "queue": 5, "options": { "leaseTime": 9 } })),
            ("queue empty", json!({ "queue": "", "options": { "leaseTime": 9 } })),
            ("body an array", json!([{ "queue": Q }])),
            (
                // A valid option next to a bad one must not be applied.
                "a good option then a bad one",
                json!({ "queue": Q, "options": { "leaseTime": 9, "retryLimit": -3 } }),
            ),
        ];
        for (what, body) in configure_cases {
            let (s, b) = support::post_json(&c, &configure_url, &body).await;
            assert_error(&format!("configure with {what}"), s, &b, 400);
        }

        // Lease ids and routes.
        let long_lease = "l".repeat(200);
        let (s, b) = post_raw(&c, &format!("{base}/api/v1/lease/{long_lease}/extend"), "").await;
        assert_error("extend of a 200-byte lease id", s, &b, 400);
        let (s, b) = send_raw(&c, reqwest::Method::GET, &format!("{base}/api/v1/nope"), None).await;
        assert_error("unknown route", s, &b, 404);
        assert_eq!(b["code"], json!("no_such_route"), "{b}");
        let (s, b) = send_raw(&c, reqwest::Method::GET, &push_url, None).await;
        assert_error("GET on push", s, &b, 405);
        let (s, b) = send_raw(&c, reqwest::Method::DELETE, &ack_url, None).await;
        assert_error("DELETE on ack", s, &b, 405);
        let (s, b) =
            send_raw(&c, reqwest::Method::POST, &format!("{base}/api/v1/pop/queue/{Q}"), Some(b"{}".to_vec())).await;
        assert_error("POST on pop", s, &b, 405);

        // Nothing above changed the queue: its options are as configured...
        let v = support::configure(&c, &base, Q, json!({})).await;
        assert_eq!(
            (&v["options"]["leaseTime"], &v["options"]["retryLimit"]),
            (&json!(7), &json!(2)),
            "a refused configure changed the options: {v}"
        );
        // ...it holds exactly the sentinel, unleased, with its payload intact...
        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{Q}?batch=100&wait=false")).await;
        let msgs = support::messages(&v);
        assert_eq!(msgs.len(), 1, "only the sentinel is stored: {v}");
        assert_eq!(msgs[0]["transactionId"], json!("sentinel"));
        assert_eq!(msgs[0]["offset"], json!(0));
        assert_eq!(msgs[0]["data"], sentinel);
        // ...and the refused request ids were never recorded for dedup.
        let r = support::push(
            &c,
            &base,
            vec![
                json!({ "queue": Q, "partition": "A", "transactionId": "half", "payload": 1 }),
                json!({ "queue": Q, "partition": "A", "transactionId": "huge", "payload": 2 }),
                json!({ "queue": Q, "partition": "A", "transactionId": "m0", "payload": 3 }),
            ],
        )
        .await;
        for (i, r) in r.iter().enumerate() {
            assert_eq!(r["status"], json!("queued"), "item {i}: {r}");
            assert_eq!(r["offset"], json!(i as u64 + 1), "item {i}: {r}");
        }
    });
}

#[test]
fn protocol_refusals_are_answers_not_errors() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        const Q: &str = "refusals";

        // An unknown but well-formed lease id.
        let (s, b) =
            post_raw(&c, &format!("{base}/api/v1/lease/0190f0e0-0000-7000-8000-000000000000/extend"), "").await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["success"], json!(false), "{b}");
        assert_eq!(b["renewed"], json!(0), "{b}");
        assert_eq!(b["newExpiresAt"], Value::Null, "{b}");

        // A pop of a queue nobody created.
        let v = support::pop(&c, &base, "/api/v1/pop/queue/never-made?wait=false").await;
        assert!(support::messages(&v).is_empty(), "{v}");
        let v = support::pop(&c, &base, "/api/v1/pop/queue/never-made/partition/x?wait=false").await;
        assert!(support::messages(&v).is_empty(), "{v}");

        let r = support::push(
            &c,
            &base,
            vec![
                json!({ "queue": Q, "partition": "A", "transactionId": "a0", "payload": 0 }),
                json!({ "queue": Q, "partition": "A", "transactionId": "a1", "payload": 1 }),
            ],
        )
        .await;
        let pid = r[0]["partitionId"].as_str().expect("partitionId").to_string();
        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{Q}/partition/A?batch=2&wait=false")).await;
        let msgs = support::messages(&v);
        assert_eq!(support::offsets(&msgs), vec![0, 1], "{v}");
        let lease = v["leaseId"].as_str().expect("leaseId").to_string();
        assert!(!lease.is_empty(), "{v}");

        // A live lease extends.
        let (s, b) = post_raw(&c, &format!("{base}/api/v1/lease/{lease}/extend"), "").await;
        assert_eq!((s, &b["success"], &b["renewed"]), (200, &json!(true), &json!(1)), "{b}");

        // A transaction id never pushed.
        let a = support::ack(
            &c,
            &base,
            json!({ "transactionId": "never-pushed", "partitionId": pid, "leaseId": lease, "status": "completed" }),
        )
        .await;
        assert_refused(&a, "unresolv");

        // A partition id that names no partition.
        let a =
            support::ack(&c, &base, json!({ "transactionId": "a0", "partitionId": "999999", "status": "completed" }))
                .await;
        assert_refused(&a, "unresolv");

        // The wrong lease.
        let a = support::ack(
            &c,
            &base,
            json!({ "transactionId": "a1", "partitionId": pid, "leaseId": "not-the-lease", "status": "completed" }),
        )
        .await;
        assert_refused(&a, "lease");

        // The refusals did not burn the lease: the real ack of the batch works.
        let a = support::ack(
            &c,
            &base,
            json!({ "transactionId": "a1", "partitionId": pid, "leaseId": lease, "status": "completed" }),
        )
        .await;
        assert_eq!(a["success"], json!(true), "{a}");
        assert_eq!(a["leaseReleased"], json!(true), "{a}");
        assert_ne!(a["noop"], json!(true), "an in-range ack is not a noop: {a}");

        // Below the cursor: completed is a noop, failed is refused.
        for txn in ["a0", "a1"] {
            let a = support::ack(&c, &base, json!({ "transactionId": txn, "partitionId": pid, "status": "completed" }))
                .await;
            assert_eq!((&a["success"], &a["noop"]), (&json!(true), &json!(true)), "{txn}: {a}");
            let a = support::ack(
                &c,
                &base,
                json!({ "transactionId": txn, "partitionId": pid, "status": "failed", "error": "boom" }),
            )
            .await;
            assert_eq!(a["success"], json!(false), "{txn}: {a}");
            assert!(a["error"].as_str().unwrap_or_default().contains("committed"), "{txn}: {a}");
        }

        // The settled lease no longer extends.
        let (s, b) = post_raw(&c, &format!("{base}/api/v1/lease/{lease}/extend"), "").await;
        assert_eq!((s, &b["success"], &b["renewed"]), (200, &json!(false), &json!(0)), "{b}");

        // The same shapes through the batch route, aligned with the input.
        let (s, b) = support::post_json(
            &c,
            &format!("{base}/api/v1/ack/batch"),
            &json!({ "acknowledgments": [
                { "transactionId": "a0", "partitionId": pid, "status": "completed" },
                { "transactionId": "never-pushed", "partitionId": pid, "status": "completed" },
                { "transactionId": "a1", "partitionId": pid, "status": "failed" },
            ] }),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let arr = b.as_array().expect("an array");
        assert_eq!(arr.len(), 3, "{b}");
        for (i, r) in arr.iter().enumerate() {
            assert_eq!(r["index"], json!(i), "{b}");
        }
        assert_eq!(arr[0]["noop"], json!(true), "{b}");
        assert_eq!(arr[1]["success"], json!(false), "{b}");
        assert_eq!(arr[2]["success"], json!(false), "{b}");

        // Nothing is left to deliver.
        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{Q}?wait=false")).await;
        assert!(support::messages(&v).is_empty(), "{v}");
    });
}

#[test]
fn long_polls_wait_and_wake() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        const Q: &str = "polled";
        support::configure(&c, &base, Q, json!({})).await;

        // Nothing arrives: the poll holds for its whole budget, then answers empty.
        let t = Instant::now();
        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{Q}?wait=true&timeout=1500")).await;
        let took = t.elapsed();
        assert!(support::messages(&v).is_empty(), "{v}");
        assert!(took >= Duration::from_millis(1400), "answered empty early, after {took:?}");
        assert!(took < Duration::from_secs(5), "held far past its timeout: {took:?}");

        // A push from elsewhere wakes a parked poll promptly.
        let pusher =
            push_after(&c, &base, json!({ "queue": Q, "partition": "P", "transactionId": "wake", "payload": "up" }));
        let t = Instant::now();
        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{Q}?wait=true&timeout=5000")).await;
        let answered = Instant::now();
        let pushed = pusher.await.expect("the pusher");
        let msgs = support::messages(&v);
        assert_eq!(msgs.len(), 1, "{v}");
        assert_eq!(msgs[0]["transactionId"], json!("wake"));
        assert_eq!(msgs[0]["data"], json!("up"));
        let took = answered - t;
        assert!(took < Duration::from_millis(1500), "the poll woke {took:?} after it started (push at ~500 ms)");
        assert!(
            answered.saturating_duration_since(pushed) < Duration::from_secs(1),
            "the poll answered {:?} after the push was answered",
            answered.saturating_duration_since(pushed)
        );
        assert!(took >= Duration::from_millis(400), "answered before the push: {took:?}");

        // The same on the named-partition route.
        let pusher =
            push_after(&c, &base, json!({ "queue": Q, "partition": "P", "transactionId": "wake2", "payload": 2 }));
        let t = Instant::now();
        // The first message is leased by the pop above; use a group so the
        // queue-mode lease does not matter here.
        let v = support::pop(
            &c,
            &base,
            &format!(
                "/api/v1/pop/queue/{Q}/partition/P?wait=true&timeout=5000&consumerGroup=late&subscriptionMode=new"
            ),
        )
        .await;
        let took = t.elapsed();
        pusher.await.expect("the pusher");
        let msgs = support::messages(&v);
        assert_eq!(msgs.len(), 1, "{v}");
        assert_eq!(msgs[0]["transactionId"], json!("wake2"));
        assert!(took < Duration::from_millis(1500), "woke after {took:?}");
    });
}

#[test]
fn double_slash_paths_and_odd_payloads() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        const Q: &str = "payloads";

        // A base URL with a trailing slash makes clients send `//api/...`.
        let slashed = format!("{base}/");
        let (s, v) = support::post_json(
            &c,
            &format!("{slashed}/api/v1/push"),
            &json!({ "items": [{ "queue": "slashes", "partition": "S", "transactionId": "s0", "payload": 1 }] }),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        assert_eq!(v[0]["status"], json!("queued"), "{v}");
        let (s, v) =
            support::get_json(&c, &format!("{slashed}/api/v1/pop/queue/slashes/partition/S?wait=false&batch=5")).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(support::messages(&v).len(), 1, "{v}");
        let (s, v) = support::get_json(&c, &format!("{slashed}/health")).await;
        assert_eq!(s, 200, "{v}");

        // The same on the wire as written, whatever a client library would
        // make of the path. `Connection: close` keeps the body unchunked.
        let (s, text) = support::raw_request_async(
            broker.port(),
            "POST",
            "//api/v1/push",
            r#"{"items":[{"queue":"slashes","partition":"S","transactionId":"s1","payload":2}]}"#,
        )
        .await;
        assert_eq!(s, 201, "{text}");
        assert!(text.contains(r#""status":"queued""#), "{text}");
        let (s, text) = support::raw_request_async(
            broker.port(),
            "GET",
            "///api/v1/pop/queue/slashes/partition/S?wait=false&consumerGroup=raw&subscriptionMode=all",
            "",
        )
        .await;
        assert_eq!(s, 200, "{text}");
        assert!(text.contains(r#""transactionId":"s1""#), "{text}");

        // Payloads of every shape come back as they went in.
        let mut big = serde_json::Map::new();
        let mut size = 0usize;
        let mut i = 0u64;
        while size < 1_500_000 {
            let k = format!("key-{i:06}");
            let val = json!({
                "i": i,
                "f": (i as f64) * 0.5,
                "s": format!("value {i} with \"quotes\", unicode é✓ and a \\ backslash"),
                "list": [i, -(i as i64), null, true, "x"],
            });
            size += k.len() + val.to_string().len() + 4;
            big.insert(k, val);
            i += 1;
        }
        let big = Value::Object(big);
        let payloads = vec![
            Value::Null,
            json!({}),
            json!([]),
            json!("a plain string"),
            json!(""),
            json!(0),
            json!(-12.5),
            json!(true),
            json!({ "emoji": "😀", "nul": "a\u{0}b", "deep": [[[[{ "x": 1 }]]]] }),
            big,
        ];
        let items: Vec<Value> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| json!({ "queue": Q, "partition": "odd", "transactionId": format!("p{i}"), "payload": p }))
            .collect();
        let r = support::push(&c, &base, items).await;
        assert!(r.iter().all(|r| r["status"] == json!("queued")), "{r:?}");
        // An item with no payload at all reads back as null.
        let r =
            support::push(&c, &base, vec![json!({ "queue": Q, "partition": "odd", "transactionId": "absent" })]).await;
        assert_eq!(r[0]["status"], json!("queued"), "{r:?}");

        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{Q}/partition/odd?batch=100&wait=false")).await;
        let msgs = support::messages(&v);
        assert_eq!(msgs.len(), payloads.len() + 1, "every payload comes back");
        for (i, (m, p)) in msgs.iter().zip(&payloads).enumerate() {
            assert_eq!(m["transactionId"], json!(format!("p{i}")));
            assert!(m["data"] == *p, "payload {i} changed: sent {p:.200}, got {:.200}", m["data"]);
        }
        assert_eq!(msgs[payloads.len()]["data"], Value::Null);
    });
}

#[test]
fn an_encoded_body_is_refused_not_read_as_plain() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        let body = serde_json::to_vec(&json!({ "items": [{ "queue": "enc", "payload": { "n": 1 } }] })).unwrap();
        for encoding in ["gzip", "zstd", "br", "x-unknown", "gzip, identity"] {
            let resp = c
                .post(format!("{base}/api/v1/push"))
                .header("content-type", "application/json")
                .header("content-encoding", encoding)
                .body(body.clone())
                .send()
                .await
                .unwrap();
            let (status, v) = support::json_of(resp).await;
            assert_error(encoding, status, &v, 415);
            assert_eq!(v["code"], json!("unsupported_encoding"), "{v}");
        }
        let v = support::pop(&c, &base, "/api/v1/pop/queue/enc?wait=false").await;
        assert!(support::messages(&v).is_empty(), "a refused body stored nothing: {v}");
        let resp = c
            .post(format!("{base}/api/v1/push"))
            .header("content-type", "application/json")
            .header("content-encoding", "identity")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201, "identity is no encoding");
    });
}

#[test]
fn a_path_or_query_that_is_not_utf8_is_a_json_error() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        for path in [
            "/api/v1/pop/queue/%FF?wait=false",
            "/api/v1/pop/queue/orders?wait=false&consumerGroup=%C3",
            "/api/v1/kv/ns/%E2%82",
        ] {
            let (status, v) = send_raw(&c, reqwest::Method::GET, &format!("{base}{path}"), None).await;
            assert_error(path, status, &v, 400);
            assert!(v["error"].as_str().unwrap_or_default().contains("UTF-8"), "{path}: {v}");
        }
        // Nothing was made of the undecodable name: no group named U+FFFD.
        let (_, v) = send_raw(&c, reqwest::Method::GET, &format!("{base}/api/v1/resources/queues"), None).await;
        assert!(!v.to_string().contains('\u{FFFD}'), "{v}");
    });
}

#[test]
fn a_timer_field_of_the_wrong_type_is_refused_by_name() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        let payload = "eyJuIjoxfQ=="; // {"n":1}
        let op = |extra: Value| {
            let mut o =
                json!({ "op": "schedule", "queue": "typed", "timerKey": "t", "delayMs": 60_000, "payload": payload });
            o.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            o
        };
        for (field, bad) in [
            ("partition", json!({ "partition": 5 })),
            ("txn", json!({ "txn": { "id": 1 } })),
            ("payloadZstd", json!({ "payloadZstd": "yes" })),
            ("payload", json!({ "payload": 7 })),
            ("timerKey", json!({ "timerKey": ["t"] })),
        ] {
            let (status, v) = post_raw(
                &c,
                &format!("{base}/api/v1/timers"),
                serde_json::to_vec(&json!({ "operations": [op(bad)] })).unwrap(),
            )
            .await;
            assert_eq!(status, 400, "{field}: {v}");
            assert!(v["detail"].as_str().is_some_and(|d| d.contains(field)), "{field}: the refusal names it: {v}");
        }
        let (status, v) = send_raw(&c, reqwest::Method::GET, &format!("{base}/api/v1/timers/typed"), None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["rows"].as_array().map(Vec::len), Some(0), "nothing was scheduled: {v}");
    });
}

/// A wrong-typed, missing or out-of-range field of a JSON body or query is
/// refused with `field` naming it, beside the prose.
#[test]
fn a_refusal_names_its_field() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        let push = format!("{base}/api/v1/push");
        for (body, field) in [
            (json!({ "items": [{ "queue": "f", "partition": 5, "payload": {} }] }), "items[0].partition"),
            (json!({ "items": [{ "queue": ["f"], "payload": {} }] }), "items[0].queue"),
            (json!({ "items": "none" }), "items"),
        ] {
            let (status, v) = post_raw(&c, &push, serde_json::to_vec(&body).unwrap()).await;
            assert_eq!(status, 400, "{body}: {v}");
            assert_eq!(v["code"], json!("bad_body"), "{v}");
            assert_eq!(v["field"], json!(field), "{body}: {v}");
        }
        let (status, v) = post_raw(&c, &format!("{base}/api/v1/ack"), br#"{"partitionId": "p"}"#.to_vec()).await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], json!("transactionId"), "a missing field is named: {v}");
        let pop = format!("{base}/api/v1/pop/queue/f?batch=lots&wait=false");
        let (status, v) = send_raw(&c, reqwest::Method::GET, &pop, None).await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], json!("batch"), "a bad query parameter is named: {v}");
        let (_, v) = send_raw(&c, reqwest::Method::GET, &format!("{base}/api/v1/resources/queues"), None).await;
        assert!(!v.to_string().contains("\"f\""), "nothing refused was stored: {v}");
    });
}

/// Refusals made by a route's own rules (names, ranges, enumerations), not
/// by the body's shape, name their field too.
#[test]
fn a_rule_refusal_names_its_field() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();
        for (path, body, field) in [
            ("/api/v1/configure", json!({ "queue": "f", "options": { "retryLimit": -3 } }), "options.retryLimit"),
            (
                "/api/v1/configure",
                json!({ "queue": "f", "options": { "dlqAfterMaxRetries": 3 } }),
                "options.dlqAfterMaxRetries",
            ),
            ("/api/v1/configure", json!({ "queue": "f\u{1}" }), "queue"),
            ("/api/v1/configure", json!({ "queue": "f", "mode": "sideways" }), "mode"),
            ("/api/v1/push", json!({ "items": [] }), "items"),
            ("/api/v1/push", json!({ "items": [{ "queue": "", "payload": {} }] }), "items[0].queue"),
            (
                "/api/v1/push",
                json!({ "items": [{ "queue": "q", "partition": "p\u{7}", "payload": {} }] }),
                "items[0].partition",
            ),
            (
                "/api/v1/ack/batch",
                json!({ "acknowledgments": [{ "transactionId": "t", "partitionId": "1", "status": "maybe" }] }),
                "acknowledgments[0].status",
            ),
        ] {
            let (status, v) = post_raw(&c, &format!("{base}{path}"), serde_json::to_vec(&body).unwrap()).await;
            assert!((400..500).contains(&status), "{path} {body}: {status} {v}");
            assert_eq!(v["field"], json!(field), "{path} {body}: {v}");
        }
        let long = "g".repeat(10_000);
        let pop = format!("{base}/api/v1/pop/queue/f?consumerGroup={long}&wait=false");
        let (status, v) = send_raw(&c, reqwest::Method::GET, &pop, None).await;
        assert_eq!((status, v["field"].clone()), (413, json!("consumerGroup")), "{v}");
    });
}
