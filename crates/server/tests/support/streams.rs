//! A small stream runner over raw HTTP, for tests that need exact totals
//! across crashes and failovers: a tumbling count-and-sum per source
//! partition, windows numbered by the message (`w`), state kept on the
//! broker, every step one `/streams/v1/cycle`.
//!
//! A message of window `w` closes every open window below `w`: the cycle
//! deletes its row and pushes its emit to the sink, with the ack of the
//! batch. A cycle whose answer is lost (a killed node, a failover) is sent
//! again with the same bytes until some node answers; the broker makes the
//! resend harmless. A cycle refused (`success: false`) settles nothing: its
//! batch comes back when the lease lapses.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
// Virtual on the paused harness, the real clock on an ordinary runtime.
use tokio::time::Instant;

/// Window number of a partition's last message: it only closes the others.
pub const MARKER_WINDOW: u64 = 999_999;

/// Messages per window.
pub const PER_WINDOW: u64 = 5;

/// One closed window as the sink received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emit {
    pub count: u64,
    pub sum: u64,
}

/// What the sink should hold: every window of every partition once.
pub fn expected(partitions: usize, per_partition: u64) -> BTreeMap<(String, u64), Emit> {
    let mut out = BTreeMap::new();
    for p in 0..partitions {
        for i in 0..per_partition {
            let e = out.entry((format!("p{p}"), i / PER_WINDOW)).or_insert(Emit { count: 0, sum: 0 });
            e.count += 1;
            e.sum += i + 1;
        }
    }
    out
}

/// Requests that may meet a dead node: any node of `bases`, retried.
pub struct Nodes {
    pub bases: Vec<String>,
    pub c: reqwest::Client,
}

impl Nodes {
    pub fn new(bases: Vec<String>) -> Self {
        let c = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(1))
            .build()
            .expect("an HTTP client");
        Nodes { bases, c }
    }

    /// POSTs `body` (the same bytes every time) until a node answers
    /// something other than 5xx, or `within` passes.
    pub async fn post(&self, path: &str, body: &[u8], within: Duration) -> Option<(u16, Value)> {
        let deadline = Instant::now() + within;
        let mut i = 0usize;
        while Instant::now() < deadline {
            let base = &self.bases[i % self.bases.len()];
            i += 1;
            let sent = self
                .c
                .post(format!("{base}{path}"))
                .header("content-type", "application/json")
                .body(body.to_vec())
                .send()
                .await;
            if let Ok(resp) = sent {
                let status = resp.status().as_u16();
                if let Ok(v) = resp.json::<Value>().await {
                    if status < 500 {
                        return Some((status, v));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        None
    }

    pub async fn get(&self, path: &str) -> Option<Value> {
        for base in &self.bases {
            if let Ok(resp) = self.c.get(format!("{base}{path}")).send().await {
                if resp.status().as_u16() == 200 {
                    if let Ok(v) = resp.json::<Value>().await {
                        return Some(v);
                    }
                }
            }
        }
        None
    }
}

/// Creates the source (a short lease, so refused batches come back soon)
/// and the sink, and registers the query; answers its id.
pub async fn prepare(nodes: &Nodes, src: &str, sink: &str, query: &str) -> String {
    for (queue, options) in [(src, json!({ "leaseTime": 2, "retryLimit": 1000 })), (sink, json!({}))] {
        let body = json!({ "queue": queue, "options": options }).to_string();
        let (status, v) =
            nodes.post("/api/v1/configure", body.as_bytes(), Duration::from_secs(30)).await.expect("configure");
        assert_eq!(status, 200, "configure {queue}: {v}");
    }
    let body = json!({ "name": query, "source_queue": src, "sink_queue": sink, "config_hash": "count-sum-v1" });
    let (status, v) = nodes
        .post("/streams/v1/queries", body.to_string().as_bytes(), Duration::from_secs(30))
        .await
        .expect("register");
    assert_eq!(status, 200, "register: {v}");
    v["query_id"].as_str().expect("a query id").to_string()
}

/// Pushes message `i` of partition `p` (idempotent by transaction id).
pub async fn push_one(nodes: &Nodes, src: &str, p: usize, i: u64, w: u64) {
    let body = json!({ "items": [{
        "queue": src,
        "partition": format!("p{p}"),
        "transactionId": format!("p{p}-m{i}"),
        "payload": { "w": w, "v": i + 1 },
    }]});
    let (status, v) = nodes
        .post("/api/v1/push", body.to_string().as_bytes(), Duration::from_secs(60))
        .await
        .expect("a push answered");
    assert_eq!(status, 201, "push: {v}");
}

/// Pushes `per_partition` messages to each partition, interleaved, with a
/// pause every round, then one marker per partition.
pub async fn feed(nodes: &Nodes, src: &str, partitions: usize, per_partition: u64, pause: Duration) {
    for i in 0..per_partition {
        for p in 0..partitions {
            push_one(nodes, src, p, i, i / PER_WINDOW).await;
        }
        tokio::time::sleep(pause).await;
    }
    for p in 0..partitions {
        push_one(nodes, src, p, per_partition, MARKER_WINDOW).await;
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct RunnerStats {
    pub cycles: u64,
    pub refused: u64,
    pub duplicates: u64,
}

/// Runs the stream until `stop` is set.
pub async fn run(nodes: Arc<Nodes>, src: String, sink: String, query_id: String, stop: Arc<AtomicBool>) -> RunnerStats {
    let group = "streams.count-sum";
    let mut stats = RunnerStats::default();
    let mut turn = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let base = nodes.bases[turn % nodes.bases.len()].clone();
        turn += 1;
        let url = format!("{base}/api/v1/pop/queue/{src}?batch=20&partitions=4&wait=true&timeout=300&consumerGroup={group}&subscriptionMode=all");
        let popped = match nodes.c.get(url).send().await {
            Ok(r) if r.status().as_u16() == 200 => r.json::<Value>().await.ok(),
            _ => None,
        };
        let Some(popped) = popped else {
            tokio::time::sleep(Duration::from_millis(150)).await;
            continue;
        };
        let msgs = popped["messages"].as_array().cloned().unwrap_or_default();
        let mut by_partition: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for m in msgs {
            by_partition.entry(m["partitionId"].as_str().unwrap().to_string()).or_default().push(m);
        }
        for (pid, batch) in by_partition {
            match cycle(&nodes, &query_id, &pid, group, &sink, &batch).await {
                Some(Answer::Committed) => stats.cycles += 1,
                Some(Answer::Resend) => stats.duplicates += 1,
                Some(Answer::Refused) => stats.refused += 1,
                None => {}
            }
        }
    }
    stats
}

/// How the broker answered a cycle.
enum Answer {
    Committed,
    /// A resend of a committed cycle: nothing applied.
    Resend,
    Refused,
}

/// One cycle over one partition's batch (`None`: no node answered).
async fn cycle(nodes: &Nodes, query_id: &str, pid: &str, group: &str, sink: &str, batch: &[Value]) -> Option<Answer> {
    let get = json!({ "query_id": query_id, "partition_id": pid, "keys": [] }).to_string();
    let (status, state) = nodes.post("/streams/v1/state/get", get.as_bytes(), Duration::from_secs(60)).await?;
    assert_eq!(status, 200, "state/get: {state}");
    let mut open: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for row in state["rows"].as_array().unwrap() {
        let w = row["value"]["windowEnd"].as_u64().unwrap();
        open.insert(w, (row["value"]["count"].as_u64().unwrap(), row["value"]["sum"].as_u64().unwrap()));
    }
    let partition = batch[0]["partition"].as_str().unwrap().to_string();
    let (mut ops, mut pushes) = (Vec::new(), Vec::new());
    let mut touched = std::collections::BTreeSet::new();
    for m in batch {
        let (w, v) = (m["data"]["w"].as_u64().unwrap(), m["data"]["v"].as_u64().unwrap());
        let ripe: Vec<u64> = open.range(..w).map(|(k, _)| *k).collect();
        for r in ripe {
            let (count, sum) = open.remove(&r).unwrap();
            touched.remove(&r);
            ops.push(json!({ "type": "delete", "key": format!("w{r:06}") }));
            pushes.push(json!({ "queue": sink, "partition": partition, "payload": { "p": partition, "w": r, "count": count, "sum": sum } }));
        }
        if w != MARKER_WINDOW {
            let e = open.entry(w).or_insert((0, 0));
            e.0 += 1;
            e.1 += v;
            touched.insert(w);
        }
    }
    for w in touched {
        let (count, sum) = open[&w];
        ops.push(json!({ "type": "upsert", "key": format!("w{w:06}"), "value": { "count": count, "sum": sum, "windowEnd": w } }));
    }
    let last = batch.last().unwrap();
    let body = json!({
        "query_id": query_id,
        "partition_id": pid,
        "consumer_group": group,
        "state_ops": ops,
        "push_items": pushes,
        "ack": { "transactionId": last["transactionId"], "leaseId": last["leaseId"], "status": "completed", "count": batch.len() },
        "release_lease": true,
    })
    .to_string();
    let (status, v) = nodes.post("/streams/v1/cycle", body.as_bytes(), Duration::from_secs(60)).await?;
    assert_eq!(status, 200, "cycle: {v}");
    Some(match (v["success"] == true, v["duplicate"] == true) {
        (true, false) => Answer::Committed,
        (true, true) => Answer::Resend,
        _ => Answer::Refused,
    })
}

/// Drains the sink with its own group, committing at delivery, into `seen`:
/// (partition, window) to every emit of it.
pub async fn drain(nodes: &Nodes, sink: &str, seen: &mut BTreeMap<(String, u64), Vec<Emit>>) {
    loop {
        let path = format!(
            "/api/v1/pop/queue/{sink}?batch=1000&partitions=64&autoAck=true&consumerGroup=audit&subscriptionMode=all"
        );
        let Some(v) = nodes.get(&path).await else { return };
        let msgs = v["messages"].as_array().cloned().unwrap_or_default();
        if msgs.is_empty() {
            return;
        }
        for m in msgs {
            let d = &m["data"];
            let key = (d["p"].as_str().unwrap().to_string(), d["w"].as_u64().unwrap());
            seen.entry(key)
                .or_default()
                .push(Emit { count: d["count"].as_u64().unwrap(), sum: d["sum"].as_u64().unwrap() });
        }
    }
}

/// Drains until every expected window arrived (or `within` passes), then a
/// little longer to catch any emitted twice; asserts the totals are exact.
pub async fn assert_exact(nodes: &Nodes, sink: &str, want: &BTreeMap<(String, u64), Emit>, within: Duration) {
    let mut seen: BTreeMap<(String, u64), Vec<Emit>> = BTreeMap::new();
    let deadline = Instant::now() + within;
    while seen.len() < want.len() && Instant::now() < deadline {
        drain(nodes, sink, &mut seen).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(3000)).await;
    drain(nodes, sink, &mut seen).await;
    let missing: Vec<_> = want.keys().filter(|k| !seen.contains_key(*k)).collect();
    assert!(missing.is_empty(), "windows never emitted: {missing:?}");
    for (k, emits) in &seen {
        assert_eq!(emits.len(), 1, "window {k:?} emitted {} times: {emits:?}", emits.len());
        assert_eq!(Some(&emits[0]), want.get(k), "window {k:?} totals");
    }
    let total: u64 = seen.values().map(|e| e[0].count).sum();
    let want_total: u64 = want.values().map(|e| e.count).sum();
    assert_eq!(total, want_total, "every message counted once");
}
