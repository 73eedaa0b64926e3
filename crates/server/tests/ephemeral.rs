//! Ephemeral queues over HTTP against a real broker: the shapes the Queen
//! clients read, long polls that wake on a push and answer at a graceful
//! stop, bounds that answer 429 with `Retry-After`, refusals in the
//! ephemeral envelope, and contents that do not survive a restart.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use support::paused::{self, PausedNode};
use support::{Broker, Workspace, STOP_TIMEOUT};

const EPH: &str = "/api/v1/ephemeral";

fn assert_refusal(what: &str, status: u16, body: &Value, want: u16, code: &str) {
    assert_eq!((status, body["code"].as_str()), (want, Some(code)), "{what}: {body}");
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: no prose in {body}");
}

async fn push(c: &reqwest::Client, base: &str, body: Value) -> (u16, Value) {
    support::post_json(c, &format!("{base}{EPH}/push"), &body).await
}

async fn pop(c: &reqwest::Client, base: &str, query: &str) -> Value {
    let (status, v) = support::get_json(c, &format!("{base}{EPH}/pop?{query}")).await;
    assert_eq!(status, 200, "pop {query}: {v}");
    assert!(v["messages"].is_array(), "pop {query}: {v}");
    v
}

#[test]
fn push_pop_ack_and_the_gauges() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();

        let (s, v) = support::post_json(
            &c,
            &format!("{base}{EPH}/configure"),
            &json!({ "queue": "reply/42", "options": { "leaseSeconds": 10, "retryLimit": 2 } }),
        )
        .await;
        assert_eq!((s, &v["declared"], &v["options"]["leaseSeconds"]), (200, &json!(true), &json!(10)), "{v}");

        let body = json!({ "queue": "reply/42", "partition": "room-7", "messages": [
            { "payload": { "n": 1 } }, { "payload": null }, { "payload": "three" } ] });
        let (s, v) = push(&c, &base, body).await;
        assert_eq!((s, v), (201, json!({ "pushed": 3 })));

        // The query as the clients encode it: every value percent-encoded.
        let v = pop(&c, &base, "queue=reply%2F42&batch=2&group=g%26h").await;
        assert_eq!(v["queue"], json!("reply/42"));
        let msgs = v["messages"].as_array().unwrap().clone();
        assert_eq!(msgs.len(), 2, "{v}");
        assert_eq!((&msgs[0]["payload"], &msgs[1]["payload"]), (&json!({ "n": 1 }), &Value::Null));
        assert_eq!((&msgs[0]["partition"], &msgs[0]["attempts"]), (&json!("room-7"), &json!(1)));
        let id0 = msgs[0]["id"].as_str().unwrap().to_string();
        assert!(id0.starts_with("e:") && id0.contains(":room-7:"), "{id0}");

        let ack = json!({ "queue": "reply/42", "group": "g&h", "acks": [
            { "id": id0, "status": "completed" },
            { "id": msgs[1]["id"], "status": "failed", "error": "boom" },
            { "id": "e:0:room-7:1" } ] });
        let (s, v) = support::post_json(&c, &format!("{base}{EPH}/ack"), &ack).await;
        assert_eq!(s, 200, "{v}");
        let outcomes: Vec<&str> =
            v["results"].as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
        assert_eq!(outcomes, ["acked", "redelivered", "stale"], "{v}");
        assert_eq!(v["results"][0]["id"], json!(id0));

        let v = pop(&c, &base, "queue=reply%2F42&batch=10&group=g%26h").await;
        let got: Vec<(Value, Value)> =
            v["messages"].as_array().unwrap().iter().map(|m| (m["payload"].clone(), m["attempts"].clone())).collect();
        assert_eq!(got, [(Value::Null, json!(2)), (json!("three"), json!(1))], "{v}");

        let (s, v) = support::get_json(&c, &format!("{base}{EPH}/queues/reply%2F42/depth")).await;
        assert_eq!(
            (s, &v["queue"], &v["depth"], &v["declared"]),
            (200, &json!("reply/42"), &json!(2), &json!(true)),
            "{v}"
        );
        let (s, v) = support::get_json(&c, &format!("{base}{EPH}/queues")).await;
        assert_eq!(
            (s, &v["queues"][0]["queue"], &v["queues"][0]["depth"]),
            (200, &json!("reply/42"), &json!(2)),
            "{v}"
        );

        let (s, v) = support::post_json(&c, &format!("{base}{EPH}/reset"), &json!({ "queue": "reply/42" })).await;
        assert_eq!((s, &v["dropped"]), (200, &json!(2)), "{v}");
        let resp = c.delete(format!("{base}{EPH}/queue/reply%2F42")).send().await.unwrap();
        let (s, v) = support::json_of(resp).await;
        assert_eq!((s, v), (200, json!({ "queue": "reply/42", "deleted": true, "declared": true })));
        let resp = c.delete(format!("{base}{EPH}/queue/reply%2F42")).send().await.unwrap();
        assert_eq!(support::json_of(resp).await.1["deleted"], json!(false));
        let (s, v) = support::get_json(&c, &format!("{base}{EPH}/queues/reply%2F42/depth")).await;
        assert_refusal("depth of a deleted queue", s, &v, 404, "ephemeral_queue_not_found");
    });
}

#[test]
fn long_polls_wake_on_a_push_and_time_out_empty() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();

        let t = Instant::now();
        let v = pop(&c, &base, "queue=inbox&wait=true&timeout=700").await;
        let took = t.elapsed();
        assert_eq!(v, json!({ "queue": "inbox", "messages": [] }));
        assert!(took >= Duration::from_millis(650) && took < Duration::from_secs(4), "held {took:?} for 700 ms");

        let pusher = {
            let (c, base) = (c.clone(), base.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let (s, v) = push(&c, &base, json!({ "queue": "inbox", "messages": [{ "payload": "wake" }] })).await;
                assert_eq!(s, 201, "{v}");
                Instant::now()
            })
        };
        let t = Instant::now();
        let v = pop(&c, &base, "queue=inbox&wait=true&timeout=10000").await;
        let answered = Instant::now();
        let pushed = pusher.await.expect("the pusher");
        assert_eq!(v["messages"][0]["payload"], json!("wake"), "{v}");
        assert!(answered - t >= Duration::from_millis(400), "answered before the push");
        let lag = answered.saturating_duration_since(pushed);
        assert!(lag < Duration::from_millis(500), "the poll answered {lag:?} after the push was answered");
    });
}

#[test]
fn bounds_answer_429_and_bad_input_400() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let base = broker.base();
        let c = support::client();

        let conf = json!({ "queue": "small", "options": { "maxLength": 2 } });
        assert_eq!(support::post_json(&c, &format!("{base}{EPH}/configure"), &conf).await.0, 200);
        let two = json!({ "queue": "small", "messages": [{ "payload": 1 }, { "payload": 2 }] });
        assert_eq!(push(&c, &base, two).await.0, 201);
        let resp = c
            .post(format!("{base}{EPH}/push"))
            .json(&json!({ "queue": "small", "messages": [{ "payload": 3 }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers().get("retry-after").and_then(|h| h.to_str().ok()), Some("1"));
        let (s, v) = support::json_of(resp).await;
        assert_refusal("push over maxLength", s, &v, 429, "queue_full");
        assert_eq!(pop(&c, &base, "queue=small&batch=10").await["messages"].as_array().unwrap().len(), 2);

        let long = "q".repeat(513);
        let bad: Vec<(&str, &str, Value)> = vec![
            ("push without messages", "push", json!({ "queue": "x" })),
            ("push of a message without payload", "push", json!({ "queue": "x", "messages": [{}] })),
            ("push to an empty queue name", "push", json!({ "queue": "", "messages": [{ "payload": 1 }] })),
            ("push to a 513-byte name", "push", json!({ "queue": long, "messages": [{ "payload": 1 }] })),
            ("unknown option", "configure", json!({ "queue": "x", "options": { "ttlSecond": 5 } })),
            ("lease over a day", "configure", json!({ "queue": "x", "options": { "leaseSeconds": 86_401 } })),
            ("ack without an id", "ack", json!({ "queue": "x", "acks": [{ "id": "" }] })),
            ("reset without a queue", "reset", json!({})),
        ];
        for (what, route, body) in bad {
            let (s, v) = support::post_json(&c, &format!("{base}{EPH}/{route}"), &body).await;
            assert_refusal(what, s, &v, 400, "ephemeral_bad_request");
        }
        let resp = c.post(format!("{base}{EPH}/push")).header("content-type", "application/json").body("{nope").send();
        let (s, v) = support::json_of(resp.await.unwrap()).await;
        assert_refusal("malformed JSON", s, &v, 400, "ephemeral_bad_request");
        for query in ["batch=1", "queue=x&batch=0", "queue=x&batch=10001", "queue=x&wait=perhaps", "queue=x&timeout=-1"]
        {
            let (s, v) = support::get_json(&c, &format!("{base}{EPH}/pop?{query}")).await;
            assert_refusal(query, s, &v, 400, "ephemeral_bad_request");
        }
        let (s, v) = support::get_json(&c, &format!("{base}{EPH}/queues/x/depth")).await;
        assert_refusal("depth of a queue never named", s, &v, 404, "ephemeral_queue_not_found");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_answers_parked_polls_and_a_restart_forgets_everything() {
    let ws = Workspace::new();
    let mut broker = Broker::start(&ws);
    let base = broker.base();
    let c = support::client();

    let (s, _) = push(&c, &base, json!({ "queue": "kept", "messages": [{ "payload": "gone soon" }] })).await;
    assert_eq!(s, 201);
    let parked = {
        let (c, base) = (c.clone(), base.clone());
        tokio::spawn(async move {
            let t = Instant::now();
            let v = pop(&c, &base, "queue=quiet&wait=true&timeout=60000").await;
            (v, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = broker.terminate(STOP_TIMEOUT).expect("a graceful stop within its budget");
    assert!(status.success(), "{status}");
    let (v, took) = parked.await.expect("the parked poll");
    assert_eq!(v["messages"], json!([]), "{v}");
    assert!(took < Duration::from_secs(10), "the stop waited for the poll's timeout: {took:?}");

    broker.restart();
    let (s, v) = support::get_json(&c, &format!("{}{EPH}/queues/kept/depth", broker.base())).await;
    assert_refusal("depth after a restart", s, &v, 404, "ephemeral_queue_not_found");
}
