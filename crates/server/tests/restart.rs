//! Restarts: a graceful stop (SIGTERM) exits 0 promptly, and messages,
//! queue options, cursors, dedup memory and leases survive both a graceful
//! restart and a SIGKILL restart on the same data directory. And the
//! process a start makes serves without transparent huge pages.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::{Broker, Workspace, STOP_TIMEOUT};

#[derive(Clone, Copy, Debug)]
enum Stop {
    Graceful,
    Kill,
}

/// Stops the broker the given way; a graceful stop must exit 0 in time.
async fn stop(broker: Broker, how: Stop) -> Broker {
    let (broker, outcome, took) = tokio::task::spawn_blocking(move || {
        let mut broker = broker;
        let t = Instant::now();
        let outcome = match how {
            Stop::Kill => {
                broker.kill();
                None
            }
            Stop::Graceful => Some(broker.terminate(STOP_TIMEOUT)),
        };
        (broker, outcome, t.elapsed())
    })
    .await
    .expect("stop the broker");
    if let Some(status) = outcome {
        let Some(status) = status else {
            panic!(
                "SIGTERM: still running after {STOP_TIMEOUT:?} (then killed)\n--- log ---\n{}",
                broker.log_tail(3000)
            );
        };
        assert!(
            status.success(),
            "SIGTERM: exited with {status} after {took:?}\n--- log ---\n{}",
            broker.log_tail(3000)
        );
    }
    broker
}

async fn restart(broker: Broker) -> Broker {
    tokio::task::spawn_blocking(move || {
        let mut broker = broker;
        broker.restart();
        broker
    })
    .await
    .expect("restart the broker")
}

fn item(queue: &str, partition: &str, txn: &str, payload: Value) -> Value {
    json!({ "queue": queue, "partition": partition, "transactionId": txn, "payload": payload })
}

/// Pops and checks the offsets and payloads `{"n": offset}` delivered.
async fn pop_expect(c: &reqwest::Client, base: &str, path_and_query: &str, want: &[u64]) -> Value {
    let v = support::pop(c, base, path_and_query).await;
    let msgs = support::messages(&v);
    assert_eq!(support::offsets(&msgs), want, "{path_and_query}: {v:.500}");
    for m in &msgs {
        assert_eq!(m["data"], json!({ "n": m["offset"] }), "{m}");
    }
    v
}

/// Acks the last message of a pop answer as completed.
async fn ack_last(c: &reqwest::Client, base: &str, pop_answer: &Value, group: Option<&str>) {
    let msgs = support::messages(pop_answer);
    let last = msgs.last().expect("something to ack");
    let a = support::ack(
        c,
        base,
        json!({
            "transactionId": last["transactionId"],
            "partitionId": last["partitionId"],
            "leaseId": pop_answer["leaseId"],
            "consumerGroup": group,
            "status": "completed",
        }),
    )
    .await;
    assert_eq!(a["success"], json!(true), "{a}");
    assert_eq!(a["leaseReleased"], json!(true), "{a}");
}

const Q: &str = "kept";

/// Writes messages, options and cursors, restarts the given way, and
/// checks that all of it is still there.
async fn data_survives(how: Stop) {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let base = broker.base();
    let c = support::client();

    let v = support::configure(
        &c,
        &base,
        Q,
        json!({ "leaseTime": 45, "retryLimit": 5, "priority": 3, "dedupWindowSeconds": 600 }),
    )
    .await;
    assert_eq!(v["options"]["leaseTime"], json!(45), "{v}");
    let items: Vec<Value> = (0..10)
        .map(|n| item(Q, "A", &format!("a{n}"), json!({ "n": n })))
        .chain((0..3).map(|n| item(Q, "B", &format!("b{n}"), json!({ "n": n }))))
        .collect();
    let r = support::push(&c, &base, items).await;
    assert!(r.iter().all(|r| r["status"] == json!("queued")), "{r:?}");
    let pid_a = r[0]["partitionId"].clone();

    // Queue mode commits A up to offset 3, group g up to offset 5.
    let v =
        pop_expect(&c, &base, &format!("/api/v1/pop/queue/{Q}/partition/A?batch=4&wait=false"), &[0, 1, 2, 3]).await;
    ack_last(&c, &base, &v, None).await;
    let v = pop_expect(
        &c,
        &base,
        &format!("/api/v1/pop/queue/{Q}/partition/A?batch=6&wait=false&consumerGroup=g&subscriptionMode=all"),
        &[0, 1, 2, 3, 4, 5],
    )
    .await;
    ack_last(&c, &base, &v, Some("g")).await;

    // A deleted queue stays deleted.
    let r = support::push(&c, &base, vec![item("doomed", "D", "d0", json!({ "n": 0 }))]).await;
    assert_eq!(r[0]["status"], json!("queued"), "{r:?}");
    let resp = c.delete(format!("{base}/api/v1/resources/queues/doomed")).send().await.expect("delete the queue");
    let (s, v) = support::json_of(resp).await;
    assert_eq!((s, &v["deleted"]), (200, &json!(true)), "{v}");

    let broker = stop(broker, how).await;
    let broker = restart(broker).await;
    let base = broker.base();
    let c = support::client();

    pop_expect(&c, &base, "/api/v1/pop/queue/doomed?batch=10&wait=false", &[]).await;
    let r = support::push(&c, &base, vec![item("doomed", "D", "d0", json!({ "n": 0 }))]).await;
    assert_eq!(
        (&r[0]["status"], &r[0]["offset"]),
        (&json!("queued"), &json!(0)),
        "{how:?}: a queue made again after its deletion starts empty: {r:?}"
    );

    // Options: an empty merge changes nothing and shows what is stored.
    let v = support::configure(&c, &base, Q, json!({})).await;
    for (k, want) in
        [("leaseTime", json!(45)), ("retryLimit", json!(5)), ("priority", json!(3)), ("dedupWindowSeconds", json!(600))]
    {
        assert_eq!(v["options"][k], want, "{how:?}: option {k} after the restart: {v}");
    }

    // Dedup memory: a resent id is still a duplicate of the original.
    let r = support::push(&c, &base, vec![item(Q, "A", "a3", json!({ "n": 3 }))]).await;
    assert_eq!(r[0]["status"], json!("duplicate"), "{how:?}: {r:?}");
    assert_eq!(r[0]["offset"], json!(3), "{r:?}");
    assert_eq!(r[0]["partitionId"], pid_a, "{r:?}");

    // Cursors: each group resumes where it committed.
    pop_expect(&c, &base, &format!("/api/v1/pop/queue/{Q}/partition/A?batch=100&wait=false"), &[4, 5, 6, 7, 8, 9])
        .await;
    pop_expect(
        &c,
        &base,
        &format!("/api/v1/pop/queue/{Q}/partition/A?batch=100&wait=false&consumerGroup=g"),
        &[6, 7, 8, 9],
    )
    .await;
    pop_expect(&c, &base, &format!("/api/v1/pop/queue/{Q}/partition/B?batch=100&wait=false"), &[0, 1, 2]).await;
    // Messages: a new group reads everything from the beginning.
    pop_expect(
        &c,
        &base,
        &format!("/api/v1/pop/queue/{Q}/partition/A?batch=100&wait=false&consumerGroup=fresh&subscriptionMode=all"),
        &(0..10).collect::<Vec<_>>(),
    )
    .await;
    // Offsets continue without a gap.
    let r = support::push(&c, &base, vec![item(Q, "A", "a10", json!({ "n": 10 }))]).await;
    assert_eq!((&r[0]["status"], &r[0]["offset"]), (&json!("queued"), &json!(10)), "{r:?}");

    // And a second restart of the same kind keeps the commits made since.
    let broker = stop(broker, how).await;
    let broker = restart(broker).await;
    let base = broker.base();
    let c = support::client();
    pop_expect(&c, &base, &format!("/api/v1/pop/queue/{Q}/partition/A?batch=100&wait=false&consumerGroup=fresh"), &[])
        .await;
    pop_expect(
        &c,
        &base,
        &format!("/api/v1/pop/queue/{Q}/partition/A?batch=100&wait=false&consumerGroup=other&subscriptionMode=all"),
        &(0..11).collect::<Vec<_>>(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_graceful_restart() {
    data_survives(Stop::Graceful).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_sigkill_restart() {
    data_survives(Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_of_an_idle_broker_exits_zero() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let t = Instant::now();
    stop(broker, Stop::Graceful).await;
    assert!(t.elapsed() < STOP_TIMEOUT, "took {:?}", t.elapsed());
}

/// A consumer parked in a long poll must not hold a graceful stop hostage:
/// the poll may wait up to a minute, and an orchestrator's grace period is
/// usually shorter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_with_a_parked_long_poll_exits_zero_promptly() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let base = broker.base();
    let c = support::client();
    support::configure(&c, &base, "parked", json!({})).await;
    let poll = {
        let c = c.clone();
        let url = format!("{base}/api/v1/pop/queue/parked?wait=true&timeout=30000");
        tokio::spawn(async move {
            let t = Instant::now();
            let r = c.get(&url).send().await;
            (t.elapsed(), r.map(|r| r.status().as_u16()))
        })
    };
    // Let the poll park.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t = Instant::now();
    stop(broker, Stop::Graceful).await;
    let took = t.elapsed();
    let (poll_took, outcome) = poll.await.expect("the poll task");
    eprintln!("stopped in {took:?}; the poll ended after {poll_took:?} with {outcome:?}");
    assert!(took < STOP_TIMEOUT, "took {took:?}");
}

/// Pushes answered while a graceful stop begins are all kept: the stop
/// lets in-flight requests finish and then closes the log cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_under_load_keeps_every_answered_push() {
    const LQ: &str = "busy";
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let base = broker.base();
    let pushers: Vec<_> = (0..2u64)
        .map(|w| {
            let url = format!("{base}/api/v1/push");
            tokio::spawn(async move {
                let c = support::client();
                let mut answered: Vec<(String, u64)> = Vec::new();
                let until = Instant::now() + Duration::from_secs(8);
                let mut seq = 0u64;
                while Instant::now() < until {
                    let items: Vec<Value> =
                        (0..5).map(|i| item(LQ, "P", &format!("w{w}-{}", seq + i), json!({ "n": seq + i }))).collect();
                    let Ok(resp) = c.post(&url).json(&json!({ "items": items })).send().await else {
                        break;
                    };
                    if resp.status().as_u16() != 201 {
                        break;
                    }
                    let Ok(v) = resp.json::<Value>().await else {
                        break;
                    };
                    for (i, r) in v.as_array().expect("an array").iter().enumerate() {
                        assert_eq!(r["status"], json!("queued"), "{r}");
                        answered.push((format!("w{w}-{}", seq + i as u64), r["offset"].as_u64().expect("offset")));
                    }
                    seq += 5;
                }
                answered
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let broker = stop(broker, Stop::Graceful).await;
    let mut answered = Vec::new();
    for p in pushers {
        answered.extend(p.await.expect("a pusher"));
    }
    assert!(!answered.is_empty(), "no push was answered before the stop");

    let broker = restart(broker).await;
    let base = broker.base();
    let c = support::client();
    let msgs = support::drain(&c, &base, LQ, "P", "audit", 100).await;
    let offs = support::offsets(&msgs);
    assert_eq!(offs, (0..msgs.len() as u64).collect::<Vec<_>>(), "gapless from 0");
    let stored: std::collections::HashMap<&str, u64> = msgs
        .iter()
        .map(|m| (m["transactionId"].as_str().expect("transactionId"), m["offset"].as_u64().expect("offset")))
        .collect();
    assert_eq!(stored.len(), msgs.len(), "a transaction id stored twice");
    for (txn, offset) in &answered {
        assert_eq!(stored.get(txn.as_str()), Some(offset), "{txn} was answered at offset {offset}");
    }
    eprintln!("{} pushes answered before the stop, {} stored", answered.len(), msgs.len());
}

/// A lease taken before a restart still holds the partition after it, and
/// only its expiry hands the batch to someone else.
async fn lease_survives(how: Stop) {
    let ws = Workspace::new();
    let mut broker = Broker::start(&ws);
    let setup = support::client();
    const LQ: &str = "leased";
    let v = support::configure(&setup, &broker.base(), LQ, json!({ "leaseTime": 2 })).await;
    assert_eq!(v["options"]["leaseTime"], json!(2), "{v}");

    // The restart must finish well inside the 2 s lease for the check to
    // mean anything; on a busy machine it may not, so a slow attempt is
    // repeated on a fresh partition (bounded).
    const ATTEMPTS: usize = 3;
    const CHECK_BEFORE: Duration = Duration::from_millis(1600);
    for attempt in 0..ATTEMPTS {
        let base = broker.base();
        // A fresh client: the previous attempt's connections died with
        // the broker.
        let c = support::client();
        let part = format!("L{attempt}");
        let items: Vec<Value> = (0..3).map(|n| item(LQ, &part, &format!("{part}-{n}"), json!({ "n": n }))).collect();
        let r = support::push(&c, &base, items).await;
        let pid = r[0]["partitionId"].clone();
        let path = format!("/api/v1/pop/queue/{LQ}/partition/{part}?batch=10&wait=false");
        let popped_at = Instant::now();
        let v = pop_expect(&c, &base, &path, &[0, 1, 2]).await;
        let lease = v["leaseId"].as_str().expect("leaseId").to_string();
        assert!(!lease.is_empty(), "{v}");

        broker = stop(broker, how).await;
        broker = restart(broker).await;
        let base = broker.base();
        let c = support::client();

        let checked_at = Instant::now();
        let held = support::pop(&c, &base, &path).await;
        let extended = support::post_json(&c, &format!("{base}/api/v1/lease/{lease}/extend"), &json!({})).await;
        if checked_at.duration_since(popped_at) >= CHECK_BEFORE {
            eprintln!(
                "attempt {attempt}: the restart took {:?}, too close to the lease expiry",
                checked_at.duration_since(popped_at)
            );
            continue;
        }
        assert!(
            support::messages(&held).is_empty(),
            "{how:?}: the partition was handed out again while its lease was live: {held:.500}"
        );
        let (s, b) = extended;
        assert_eq!(s, 200, "{b}");
        assert_eq!(
            (&b["success"], &b["renewed"]),
            (&json!(true), &json!(1)),
            "{how:?}: the lease is unknown after the restart: {b}"
        );
        let extended_at = Instant::now();

        // Once the (extended) lease lapses, the same batch comes back
        // under a new lease.
        let v = support::pop(&c, &base, &format!("{path}&wait=true&timeout=6000")).await;
        let back_after = extended_at.elapsed();
        let msgs = support::messages(&v);
        assert_eq!(support::offsets(&msgs), vec![0, 1, 2], "{v:.500}");
        assert!(back_after >= Duration::from_millis(1500), "handed out {back_after:?} after a 2 s extension");
        let new_lease = v["leaseId"].as_str().expect("leaseId").to_string();
        assert_ne!(new_lease, lease);

        // The old lease is dead: acking with it is refused, with the new
        // one it works.
        let a = support::ack(
            &c,
            &base,
            json!({ "transactionId": format!("{part}-2"), "partitionId": pid, "leaseId": lease, "status": "completed" }),
        )
        .await;
        assert_eq!(a["success"], json!(false), "{a}");
        assert!(a["error"].as_str().unwrap_or_default().contains("lease"), "{a}");
        let a = support::ack(
            &c,
            &base,
            json!({ "transactionId": format!("{part}-2"), "partitionId": pid, "leaseId": new_lease, "status": "completed" }),
        )
        .await;
        assert_eq!(a["success"], json!(true), "{a}");
        return;
    }
    panic!("{how:?}: every restart took {CHECK_BEFORE:?} or more; the lease was never checked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_survives_a_sigkill_restart_until_it_expires() {
    lease_survives(Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_survives_a_graceful_restart_until_it_expires() {
    lease_survives(Stop::Graceful).await;
}

/// The broker turns transparent huge pages off for its process before it
/// serves (after recovery, which they speed up): a 2 MiB page zeroed at
/// its first touch, inside a request, stalled deliveries
/// (docs/benchmarks.md, items 22 and 29).
#[test]
fn the_broker_runs_without_transparent_huge_pages() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let pid = broker.pid().expect("the broker runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let thp = status.lines().find_map(|l| l.strip_prefix("THP_enabled:")).map(str::trim);
    assert_eq!(thp, Some("0"), "THP_enabled in /proc/{pid}/status");
}
