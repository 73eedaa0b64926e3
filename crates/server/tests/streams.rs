//! The `/streams/v1/*` routes against a real broker: registration (409 on a
//! changed chain, reset), state reads, cycles judged whole (a cycle whose
//! ack is refused writes no state and no push), a resent cycle that changes
//! nothing, claims, and the limits refused with a 4xx naming them.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use serde_json::{json, Value};

use regina_types::limits::{STREAM_CYCLE_OPS_MAX, STREAM_STATE_KEY_BYTES_MAX, STREAM_STATE_VALUE_BYTES_MAX};
use support::paused::{self, PausedNode};
use support::{client, configure, messages, pop, post_json, push};

const GROUP: &str = "streams.q";

async fn register(c: &reqwest::Client, base: &str, name: &str, hash: &str, reset: bool) -> (u16, Value) {
    let body =
        json!({ "name": name, "source_queue": "src", "sink_queue": "sink", "config_hash": hash, "reset": reset });
    post_json(c, &format!("{base}/streams/v1/queries"), &body).await
}

/// Pushes `n` messages to partition `p` of `src` and pops them for the
/// stream's group: (partition id, lease id, the messages).
async fn popped(c: &reqwest::Client, base: &str, p: &str, n: usize) -> (String, String, Vec<Value>) {
    let items = (0..n).map(|i| json!({ "queue": "src", "partition": p, "payload": { "i": i } })).collect();
    push(c, base, items).await;
    let v = pop(
        c,
        base,
        &format!("/api/v1/pop/queue/src/partition/{p}?batch=100&consumerGroup={GROUP}&subscriptionMode=all"),
    )
    .await;
    let msgs = messages(&v);
    assert_eq!(msgs.len(), n, "{v}");
    (msgs[0]["partitionId"].as_str().unwrap().to_string(), v["leaseId"].as_str().unwrap().to_string(), msgs)
}

async fn cycle(c: &reqwest::Client, base: &str, body: &Value) -> (u16, Value) {
    post_json(c, &format!("{base}/streams/v1/cycle"), body).await
}

async fn state(c: &reqwest::Client, base: &str, query: &str, pid: &str, extra: Value) -> Vec<Value> {
    let mut body = json!({ "query_id": query, "partition_id": pid, "keys": [] });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, v) = post_json(c, &format!("{base}/streams/v1/state/get"), &body).await;
    assert_eq!(status, 200, "{v}");
    v["rows"].as_array().unwrap().clone()
}

async fn sink_count(c: &reqwest::Client, base: &str) -> usize {
    let (status, v) = support::get_json(
        c,
        &format!("{base}/api/v1/pop/queue/sink?batch=1000&partitions=64&consumerGroup=peek-{}&subscriptionMode=all&autoAck=true", uuid()),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    messages(&v).len()
}

fn uuid() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn full_cycle(query: &str, pid: &str, lease: &str, last: &Value, n: usize) -> Value {
    let state_ops = json!([
        { "type": "upsert", "key": "w1", "value": { "count": n, "windowEnd": 1000 } },
        { "type": "upsert", "key": "w2", "value": { "count": 0, "windowEnd": 5000 } },
    ]);
    let push_items = json!([{ "queue": "sink", "partition": "a", "payload": { "emitted": true } }]);
    cycle_body((query, pid, lease), (last, n), (state_ops, push_items), true)
}

/// A cycle of query `query` on partition `pid` under `lease`: its state
/// changes and sink pushes, acking `n` messages up to `last`.
fn cycle_body(
    (query, pid, lease): (&str, &str, &str),
    (last, n): (&Value, usize),
    (state_ops, push_items): (Value, Value),
    release_lease: bool,
) -> Value {
    json!({
        "query_id": query,
        "partition_id": pid,
        "consumer_group": GROUP,
        "state_ops": state_ops,
        "push_items": push_items,
        "ack": { "transactionId": last["transactionId"], "leaseId": lease, "status": "completed", "count": n },
        "release_lease": release_lease,
    })
}

/// A node with query `q` registered and the source queue configured with
/// `src_options`; the node runs while the first value lives.
async fn with_query(src_options: Value) -> (PausedNode, reqwest::Client, String, String) {
    let node = PausedNode::start().await;
    let c = client();
    let base = node.base();
    let id = register(&c, &base, "q", "h", false).await.1["query_id"].as_str().unwrap().to_string();
    configure(&c, &base, "src", src_options).await;
    (node, c, base, id)
}

#[test]
fn registration_refuses_a_changed_chain_until_reset() {
    paused::run(async {
        let b = PausedNode::start().await;
        let c = client();
        let base = b.base();
        let (status, first) = register(&c, &base, "q", "h1", false).await;
        assert_eq!(status, 200, "{first}");
        assert_eq!(
            (first["fresh"].clone(), first["reset"].clone(), first["name"].clone()),
            (json!(true), json!(false), json!("q"))
        );
        let id = first["query_id"].as_str().unwrap().to_string();

        configure(&c, &base, "src", json!({})).await;
        let (pid, lease, msgs) = popped(&c, &base, "a", 2).await;
        let (status, v) = cycle(&c, &base, &full_cycle(&id, &pid, &lease, &msgs[1], 2)).await;
        assert_eq!((status, v["success"].clone()), (200, json!(true)), "{v}");

        let (status, again) = register(&c, &base, "q", "h1", false).await;
        assert_eq!(
            (status, again["query_id"].as_str(), again["fresh"].clone()),
            (200, Some(id.as_str()), json!(false))
        );
        let (status, conflict) = register(&c, &base, "q", "h2", false).await;
        assert_eq!(status, 409, "{conflict}");
        assert_eq!(conflict["success"], json!(false));
        assert!(conflict["error"].as_str().unwrap().contains("reset"), "{conflict}");
        assert_eq!(state(&c, &base, &id, &pid, json!({})).await.len(), 2, "a refused registration changed state");

        let (status, reset) = register(&c, &base, "q", "h2", true).await;
        assert_eq!(status, 200, "{reset}");
        assert_eq!((reset["query_id"].as_str(), reset["reset"].clone()), (Some(id.as_str()), json!(true)));
        assert!(state(&c, &base, &id, &pid, json!({})).await.is_empty(), "reset kept state");

        // Missing fields are 400s naming them.
        let (status, v) =
            post_json(&c, &format!("{base}/streams/v1/queries"), &json!({ "name": "x", "source_queue": "src" })).await;
        assert_eq!(status, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains("config_hash"), "{v}");
    });
}

#[test]
fn a_cycle_commits_whole_and_state_reads_filter_it() {
    paused::run(async {
        let (_node, c, base, id) = with_query(json!({})).await;
        let (pid, lease, msgs) = popped(&c, &base, "a", 3).await;
        let (status, v) = cycle(&c, &base, &full_cycle(&id, &pid, &lease, &msgs[2], 3)).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["success"], json!(true), "{v}");
        assert_eq!(v["state_ops_applied"], json!(2));
        assert_eq!(v["queueName"], json!("src"));
        assert_eq!(v["ack_result"]["count"], json!(3));
        assert_eq!(v["ack_result"]["lease_released"], json!(true));
        assert_eq!(v["push_results"].as_array().unwrap().len(), 1);

        let rows = state(&c, &base, &id, &pid, json!({})).await;
        assert_eq!(rows.iter().map(|r| r["key"].as_str().unwrap()).collect::<Vec<_>>(), vec!["w1", "w2"]);
        assert_eq!(rows[0]["value"], json!({ "count": 3, "windowEnd": 1000 }));
        assert!(rows[0]["updated_at"].as_str().unwrap().ends_with('Z'));
        let ripe = state(&c, &base, &id, &pid, json!({ "ripe_at_or_before": 1000 })).await;
        assert_eq!(ripe.len(), 1);
        assert_eq!(ripe[0]["key"], json!("w1"));
        assert_eq!(state(&c, &base, &id, &pid, json!({ "keys": ["w2", "nope"] })).await.len(), 1);
        assert_eq!(state(&c, &base, &id, &pid, json!({ "key_prefix": "w" })).await.len(), 2);
        assert_eq!(sink_count(&c, &base).await, 1);
        // The ack committed the batch: nothing is left for the group.
        let v = pop(&c, &base, &format!("/api/v1/pop/queue/src?batch=10&consumerGroup={GROUP}")).await;
        assert!(messages(&v).is_empty(), "{v}");

        // An unknown query is a 404, for reads and cycles alike.
        let (status, v) =
            post_json(&c, &format!("{base}/streams/v1/state/get"), &json!({ "query_id": "nope", "partition_id": pid }))
                .await;
        assert_eq!((status, v["code"].clone()), (404, json!("no_such_query")), "{v}");
        let (status, _) =
            cycle(&c, &base, &json!({ "query_id": "nope", "partition_id": pid, "release_lease": true })).await;
        assert_eq!(status, 404);
    });
}

#[test]
fn a_cycle_whose_ack_is_refused_writes_no_state_and_no_push() {
    paused::run(async {
        let (_node, c, base, id) = with_query(json!({ "leaseTime": 1 })).await;
        let (pid, lease, msgs) = popped(&c, &base, "a", 2).await;

        // A lease the group does not hold.
        let (status, v) = cycle(&c, &base, &full_cycle(&id, &pid, "not-the-lease", &msgs[1], 2)).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["success"], json!(false), "{v}");
        assert_eq!(v["code"], json!("invalid_lease"));
        assert!(v["error"].as_str().unwrap().contains("invalid or expired lease"), "{v}");
        assert!(state(&c, &base, &id, &pid, json!({})).await.is_empty(), "a refused cycle wrote state");
        assert_eq!(sink_count(&c, &base).await, 0, "a refused cycle pushed");

        // The right lease, after it lapsed.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let (_, v) = cycle(&c, &base, &full_cycle(&id, &pid, &lease, &msgs[1], 2)).await;
        assert_eq!(v["success"], json!(false), "{v}");
        assert!(state(&c, &base, &id, &pid, json!({})).await.is_empty());
        assert_eq!(sink_count(&c, &base).await, 0);
        // Nothing was committed: both messages come back.
        let v = pop(&c, &base, &format!("/api/v1/pop/queue/src?batch=10&consumerGroup={GROUP}")).await;
        assert_eq!(messages(&v).len(), 2, "{v}");
        // A sink at maxSize refuses the cycle whole too, ack included.
        configure(&c, &base, "sink", json!({ "maxSize": 1 })).await;
        push(&c, &base, vec![json!({ "queue": "sink", "payload": {} })]).await;
        let (lease, last) = (v["leaseId"].as_str().unwrap().to_string(), messages(&v)[1].clone());
        let (_, full) = cycle(&c, &base, &full_cycle(&id, &pid, &lease, &last, 2)).await;
        assert_eq!((full["success"].clone(), full["code"].clone()), (json!(false), json!("queue_full")), "{full}");
        assert!(state(&c, &base, &id, &pid, json!({})).await.is_empty());
    });
}

#[test]
fn a_resent_cycle_changes_nothing() {
    paused::run(async {
        let (_node, c, base, id) = with_query(json!({})).await;
        let (pid, lease, msgs) = popped(&c, &base, "a", 4).await;
        // A gate's cycle: two of four settled, the lease kept for the tail.
        let ops = json!([{ "type": "upsert", "key": "used", "value": { "n": 2 } }]);
        let pushes = json!([{ "queue": "sink", "payload": { "i": 0 } }, { "queue": "sink", "payload": { "i": 1 } }]);
        let body = cycle_body((&id, &pid, &lease), (&msgs[1], 2), (ops, pushes), false);
        let (_, first) = cycle(&c, &base, &body).await;
        assert_eq!(first["success"], json!(true), "{first}");
        assert_eq!(first["ack_result"]["lease_released"], json!(false));
        assert_eq!(first["duplicate"], json!(false));
        let (_, resent) = cycle(&c, &base, &body).await;
        assert_eq!(resent["success"], json!(true), "{resent}");
        assert_eq!(resent["duplicate"], json!(true));
        assert_eq!(sink_count(&c, &base).await, 2, "the resend pushed again");
        // The tail is still held by the lease: the group gets nothing yet.
        let v = pop(&c, &base, &format!("/api/v1/pop/queue/src?batch=10&consumerGroup={GROUP}")).await;
        assert!(messages(&v).is_empty(), "the kept lease was released: {v}");
        // A full-batch cycle that released its lease: a resend finds the fence.
        let ops = json!([{ "type": "delete", "key": "used" }]);
        let pushes = json!([{ "queue": "sink", "payload": { "i": 2 } }]);
        let rest = cycle_body((&id, &pid, &lease), (&msgs[3], 2), (ops, pushes), true);
        let (_, done) = cycle(&c, &base, &rest).await;
        assert_eq!((done["success"].clone(), done["ack_result"]["count"].clone()), (json!(true), json!(2)), "{done}");
        // It left no rows and released its lease: the resend meets the fence.
        let (_, again) = cycle(&c, &base, &rest).await;
        assert_eq!(
            (again["success"].clone(), again["code"].clone()),
            (json!(false), json!("invalid_lease")),
            "{again}"
        );
        assert_eq!(sink_count(&c, &base).await, 3, "two from the gate's cycle, one from the last");
        assert!(state(&c, &base, &id, &pid, json!({})).await.is_empty());
    });
}

#[test]
fn claims_lease_idle_partitions_and_the_close_is_fenced() {
    paused::run(async {
        let (_node, c, base, id) = with_query(json!({})).await;
        let (pid, lease, msgs) = popped(&c, &base, "a", 1).await;
        let mut open = full_cycle(&id, &pid, &lease, &msgs[0], 1);
        open["push_items"] = json!([]);
        assert_eq!(cycle(&c, &base, &open).await.1["success"], json!(true));

        let listed = post_json(&c, &format!("{base}/streams/v1/state/partitions"), &json!({ "query_id": id })).await.1;
        assert_eq!(listed["partitions"][0]["partition_id"], json!(pid), "{listed}");
        assert_eq!(listed["partitions"][0]["partition"], json!("a"));
        assert_eq!(listed["partitions"][0]["queue"], json!("src"));
        assert_eq!(listed["next"], Value::Null);
        let young = json!({ "query_id": id, "untouched_for_ms": 600_000 });
        let none = post_json(&c, &format!("{base}/streams/v1/state/partitions"), &young).await.1;
        assert_eq!(none["partitions"], json!([]), "{none}");

        let claim =
            json!({ "query_id": id, "partition_ids": [pid, "424242"], "consumer_group": GROUP, "lease_seconds": 30 });
        let (status, got) = post_json(&c, &format!("{base}/streams/v1/claim"), &claim).await;
        assert_eq!(status, 200, "{got}");
        assert_eq!(got["partitions"][0]["status"], json!("claimed"), "{got}");
        assert_eq!(got["partitions"][1]["status"], json!("missing"));
        assert!(got["now_ms"].as_u64().unwrap() > 0);
        let claim_lease = got["lease_id"].as_str().unwrap().to_string();
        let busy = post_json(&c, &format!("{base}/streams/v1/claim"), &claim).await.1;
        assert_eq!(busy["partitions"][0]["status"], json!("busy"), "{busy}");

        let close = json!({
            "query_id": id,
            "partition_id": pid,
            "consumer_group": GROUP,
            "state_ops": [{ "type": "delete", "key": "w1" }, { "type": "delete", "key": "w2" }],
            "push_items": [{ "queue": "sink", "payload": { "closed": true } }],
            "ack": { "transactionId": "", "leaseId": claim_lease, "status": "completed", "count": 0 },
            "release_lease": true,
        });
        let (_, closed) = cycle(&c, &base, &close).await;
        assert_eq!(closed["success"], json!(true), "{closed}");
        assert_eq!(closed["ack_result"]["count"], json!(0));
        let mut late = close.clone();
        late["push_items"] = json!([{ "queue": "sink", "payload": { "closed": "again" } }]);
        let (_, again) = cycle(&c, &base, &late).await;
        assert_eq!(again["code"], json!("invalid_lease"), "a second close under a spent claim: {again}");
        assert_eq!(sink_count(&c, &base).await, 1);
    });
}

#[test]
fn limits_and_bad_input_are_refused_with_a_4xx_naming_them() {
    paused::run(async {
        let (_node, c, base, id) = with_query(json!({})).await;
        let (pid, lease, msgs) = popped(&c, &base, "a", 1).await;
        let with = |ops: Value, pushes: Value| {
            json!({
                "query_id": id,
                "partition_id": pid,
                "consumer_group": GROUP,
                "state_ops": ops,
                "push_items": pushes,
                "ack": { "transactionId": msgs[0]["transactionId"], "leaseId": lease, "status": "completed", "count": 1 },
                "release_lease": true,
            })
        };
        let big = "x".repeat(STREAM_STATE_VALUE_BYTES_MAX);
        let (status, v) =
            cycle(&c, &base, &with(json!([{ "type": "upsert", "key": "k", "value": big }]), json!([]))).await;
        assert_eq!(status, 413, "{v}");
        assert!(v["error"].as_str().unwrap().contains("STREAM_STATE_VALUE_BYTES_MAX"), "{v}");
        let key = "k".repeat(STREAM_STATE_KEY_BYTES_MAX + 1);
        let (status, v) = cycle(&c, &base, &with(json!([{ "type": "delete", "key": key }]), json!([]))).await;
        assert_eq!(status, 413, "{v}");
        let ops: Vec<Value> =
            (0..=STREAM_CYCLE_OPS_MAX).map(|i| json!({ "type": "delete", "key": format!("k{i}") })).collect();
        let (status, v) = cycle(&c, &base, &with(json!(ops), json!([]))).await;
        assert_eq!(status, 413, "{v}");
        assert!(v["error"].as_str().unwrap().contains("STREAM_CYCLE_OPS_MAX"), "{v}");
        let (status, v) = cycle(&c, &base, &with(json!([{ "type": "merge", "key": "k" }]), json!([]))).await;
        assert_eq!(status, 400, "{v}");
        let (status, v) = cycle(&c, &base, &with(json!([]), json!([{ "queue": "", "payload": {} }]))).await;
        assert_eq!(status, 400, "{v}");
        let mut bad = with(json!([]), json!([]));
        bad["partition_id"] = json!("not-a-number");
        assert_eq!(cycle(&c, &base, &bad).await.0, 400);
        // A partition of another queue.
        push(&c, &base, vec![json!({ "queue": "other", "partition": "z", "payload": {} })]).await;
        let other = pop(&c, &base, "/api/v1/pop/queue/other?batch=1&autoAck=true").await;
        let mut elsewhere = with(json!([]), json!([]));
        elsewhere["partition_id"] = messages(&other)[0]["partitionId"].clone();
        let (status, v) = cycle(&c, &base, &elsewhere).await;
        assert_eq!((status, v["code"].clone()), (400, json!("not_source_partition")), "{v}");
        // A claim's lease beyond its limit.
        let (status, v) = post_json(
            &c,
            &format!("{base}/streams/v1/claim"),
            &json!({ "query_id": id, "partition_ids": [pid], "lease_seconds": 601 }),
        )
        .await;
        assert_eq!(status, 400, "{v}");
        // None of it wrote anything, and the good cycle still commits.
        assert!(state(&c, &base, &id, &pid, json!({})).await.is_empty());
        let (status, v) =
            cycle(&c, &base, &with(json!([{ "type": "upsert", "key": "k", "value": 1 }]), json!([]))).await;
        assert_eq!((status, v["success"].clone()), (200, json!(true)), "{v}");
    });
}
