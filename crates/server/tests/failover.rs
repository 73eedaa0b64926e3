//! Failover under load: producers push through all three nodes while the
//! leader is killed with SIGKILL and later restarted. Every push is retried
//! with the same transaction ids until it is answered, so dedup decides
//! whether a lost answer's push was applied. Afterwards every push answered
//! `queued` (or `duplicate`, with the original offset) is stored exactly
//! once at that offset, offsets are gapless and each producer's messages
//! are in order in every partition, and all nodes hold identical states.
//!
//! The time from the kill to the first write answered through a surviving
//! node is printed (`failover:`), as a figure, never asserted.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cluster::{assert_states_identical, Cluster, CONVERGE};
use support::drain;

const QUEUE: &str = "failover";
const PARTITIONS: u64 = 12;
const BATCH_MAX: u64 = 5;
const KILL_AFTER: Duration = Duration::from_millis(1200);
const RESTART_AFTER: Duration = Duration::from_millis(3500);
const LOAD_FOR: Duration = Duration::from_millis(5500);
/// One push may be retried this long before the test gives up.
const RETRY_BUDGET: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

/// What the broker answered for one transaction id.
#[derive(Debug, Clone)]
struct Answered {
    partition: String,
    offset: u64,
    producer: u64,
    seq: u64,
}

type Ledger = Arc<Mutex<HashMap<String, Answered>>>;

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(REQUEST_TIMEOUT).build().unwrap()
}

/// Pushes one batch through `base` until it is answered 201; records every
/// item's offset.
async fn push_until_answered(
    c: &reqwest::Client,
    base: &str,
    items: &[(String, String, u64)],
    producer: u64,
    ledger: &Ledger,
) {
    let body = json!({ "items": items.iter().map(|(txn, partition, seq)| json!({
        "queue": QUEUE, "partition": partition, "transactionId": txn, "payload": { "producer": producer, "seq": seq },
    })).collect::<Vec<_>>() });
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < RETRY_BUDGET,
            "producer {producer}: a push was not answered within {RETRY_BUDGET:?}"
        );
        let sent = c.post(format!("{base}/api/v1/push")).json(&body).send().await;
        let Ok(resp) = sent else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if status == 503 || v.is_null() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(status, 201, "push answered {status}: {v}");
        let answers = v.as_array().expect("an array");
        let mut ledger = ledger.lock().unwrap();
        for ((txn, partition, seq), a) in items.iter().zip(answers) {
            let st = a["status"].as_str().unwrap_or_default();
            assert!(st == "queued" || st == "duplicate", "item {txn} answered {a}");
            let offset = a["offset"].as_u64().unwrap_or_else(|| panic!("no offset in {a}"));
            let entry = Answered { partition: partition.clone(), offset, producer, seq: *seq };
            if let Some(prev) = ledger.insert(txn.clone(), entry) {
                assert_eq!(prev.offset, offset, "{txn} answered two offsets");
            }
        }
        return;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_pushes_survive_a_leader_kill() {
    let mut cluster = Cluster::start(3);
    let bases: Vec<String> = cluster.nodes.iter().map(|n| n.base()).collect();
    let ledger: Ledger = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut producers = Vec::new();
    for (k, base) in bases.iter().enumerate() {
        let (base, ledger, stop) = (base.clone(), ledger.clone(), stop.clone());
        producers.push(tokio::spawn(async move {
            let c = client();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = 1 + seq % BATCH_MAX;
                let items: Vec<(String, String, u64)> = (seq..seq + n)
                    .map(|s| (format!("p{k}-{s}"), format!("part-{}", (s * 7 + k as u64) % PARTITIONS), s))
                    .collect();
                push_until_answered(&c, &base, &items, k as u64, &ledger).await;
                seq += n;
            }
            seq
        }));
    }

    tokio::time::sleep(KILL_AFTER).await;
    let victim = cluster.wait_for_leader(CONVERGE);
    let before = ledger.lock().unwrap().len();
    cluster.node(victim).kill();
    let killed_at = Instant::now();
    // A probe through a surviving node measures when writes flow again.
    let survivor = cluster.nodes.iter().find(|n| n.id != victim).unwrap().base();
    let probe = client();
    let mut first_write = None;
    for i in 0.. {
        let body = json!({ "items": [{ "queue": "probe", "partition": "p", "transactionId": format!("probe-{i}"), "payload": {} }] });
        if let Ok(r) = probe.post(format!("{survivor}/api/v1/push")).json(&body).send().await {
            if r.status() == 201 {
                first_write = Some(killed_at.elapsed());
                break;
            }
        }
        assert!(killed_at.elapsed() < Duration::from_secs(20), "no write succeeded within 20 s of the kill");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("failover: leader {victim} killed; first write answered after {:?}", first_write.unwrap());

    tokio::time::sleep(RESTART_AFTER.saturating_sub(KILL_AFTER)).await;
    cluster.node(victim).start();
    tokio::time::sleep(LOAD_FOR.saturating_sub(RESTART_AFTER)).await;
    stop.store(true, Ordering::Relaxed);
    let mut pushed = 0;
    for p in producers {
        pushed += p.await.expect("a producer panicked");
    }
    let ledger = ledger.lock().unwrap().clone();
    assert_eq!(ledger.len() as u64, pushed, "every push was answered");
    assert!(ledger.len() > before, "writes continued after the kill");
    println!("failover: {pushed} messages answered, {before} before the kill");

    cluster.wait_for_leader(CONVERGE);
    let c = support::client();
    assert_states_identical(&c, &cluster).await;

    // Read everything back through each node in turn (each forwards to the
    // leader; the states are identical, so any answers for all).
    let mut by_partition: BTreeMap<String, Vec<&Answered>> = BTreeMap::new();
    for a in ledger.values() {
        by_partition.entry(a.partition.clone()).or_default().push(a);
    }
    for (i, node) in cluster.nodes.iter().enumerate() {
        let base = node.base();
        for (partition, expected) in &by_partition {
            let msgs = drain(&c, &base, QUEUE, partition, &format!("check-{i}"), 50).await;
            let offsets: Vec<u64> = msgs.iter().map(|m| m["offset"].as_u64().unwrap()).collect();
            assert_eq!(offsets, (0..msgs.len() as u64).collect::<Vec<_>>(), "{partition}: offsets not gapless");
            assert_eq!(msgs.len(), expected.len(), "{partition}: stored messages vs answered pushes");
            let mut last_seq: HashMap<u64, u64> = HashMap::new();
            for m in &msgs {
                let txn = m["transactionId"].as_str().unwrap();
                let a = &ledger[txn];
                assert_eq!(a.offset, m["offset"].as_u64().unwrap(), "{txn} stored at another offset");
                let producer = m["data"]["producer"].as_u64().unwrap();
                let seq = m["data"]["seq"].as_u64().unwrap();
                assert_eq!((producer, seq), (a.producer, a.seq));
                if let Some(prev) = last_seq.insert(producer, seq) {
                    assert!(prev < seq, "{partition}: producer {producer} out of order ({prev} then {seq})");
                }
            }
        }
    }
}
