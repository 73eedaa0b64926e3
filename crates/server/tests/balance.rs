//! Leadership balancing: a three-node cluster with six Raft groups per node
//! forms with two group leaders on every node. Producers then push through
//! all three nodes for many tenants (spread over the groups) while one node
//! is killed with SIGKILL and restarted; leadership returns to two per node
//! within a bounded time, moving groups while the pushes go on. Every push
//! is retried with its transaction ids until it is answered, so dedup
//! decides whether a lost answer's push was applied. Afterwards every
//! answered push is stored exactly once at its answered offset, offsets are
//! gapless, each producer's messages are in order in every partition, and
//! all nodes hold identical states in every group.
//!
//! The times to the balanced spread (at formation and after the restart)
//! are printed (`balance:`), and bounded by the assertions.

#[path = "support/cluster.rs"]
mod cluster;
mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cluster::{assert_group_states_identical, Cluster};
use support::drain;

const GROUPS: u16 = 6;
const TENANTS: u64 = 18;
const QUEUE: &str = "spread";
const PARTITIONS: u64 = 4;
const BATCH_MAX: u64 = 4;
/// How long the cluster may take to spread leadership, at formation and
/// after the killed node is back.
const BALANCED_WITHIN: Duration = Duration::from_secs(30);
const KILL_AFTER: Duration = Duration::from_millis(1500);
const DOWN_FOR: Duration = Duration::from_millis(2500);
/// Load goes on this long after the spread is back.
const LOAD_AFTER: Duration = Duration::from_millis(1000);
const RETRY_BUDGET: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

#[derive(Debug, Clone)]
struct Answered {
    partition: String,
    offset: u64,
    producer: u64,
    seq: u64,
}

/// (tenant, transaction id) -> what was answered.
type Ledger = Arc<Mutex<HashMap<(String, String), Answered>>>;

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(REQUEST_TIMEOUT).build().unwrap()
}

fn tenant_client(tenant: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-queen-tenant", tenant.parse().unwrap());
    reqwest::Client::builder().no_proxy().timeout(REQUEST_TIMEOUT).default_headers(headers).build().unwrap()
}

fn tenant_name(i: u64) -> String {
    format!("tenant-{i}")
}

/// Who leads each group, as every running node sees it, once they agree.
fn leaders(cluster: &Cluster) -> Option<Vec<u64>> {
    let mut seen = None;
    for node in cluster.nodes.iter().filter(|n| n.is_running()) {
        let h = node.health()?;
        let rows = h["groups"].as_array()?;
        let view: Option<Vec<u64>> = rows.iter().map(|r| r["leader"].as_u64()).collect();
        let view = view?;
        if seen.as_ref().is_some_and(|s| *s != view) {
            return None;
        }
        seen = Some(view);
    }
    seen
}

fn per_node(leaders: &[u64]) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for l in leaders {
        *counts.entry(*l).or_default() += 1;
    }
    counts
}

/// Waits until the running nodes agree that every node leads two groups;
/// answers how long that took.
fn wait_balanced(cluster: &Cluster, what: &str) -> Duration {
    let started = Instant::now();
    let want: BTreeMap<u64, usize> = (1..=3).map(|id| (id, 2)).collect();
    let mut last = None;
    loop {
        let now = leaders(cluster);
        if now.as_deref().map(per_node).as_ref() == Some(&want) {
            println!("balance: {what}: 2/2/2 after {:?} ({:?})", started.elapsed(), now.unwrap());
            return started.elapsed();
        }
        if now.is_some() {
            last = now;
        }
        assert!(
            started.elapsed() < BALANCED_WITHIN,
            "{what}: leadership not 2/2/2 within {BALANCED_WITHIN:?}; last seen {last:?}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn push_until_answered(
    c: &reqwest::Client,
    base: &str,
    tenant: &str,
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
        let sent = c.post(format!("{base}/api/v1/push")).header("x-queen-tenant", tenant).json(&body).send().await;
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
            if let Some(prev) = ledger.insert((tenant.to_string(), txn.clone()), entry) {
                assert_eq!(prev.offset, offset, "{tenant}/{txn} answered two offsets");
            }
        }
        return;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_spreads_and_returns_after_a_kill_with_every_push_once() {
    let mut cluster = Cluster::start_with(3, &[("REGINA_TENANCY", "on"), ("REGINA_RAFT_GROUPS", "6")]);
    let tenants: Vec<String> = (0..TENANTS).map(tenant_name).collect();
    let groups: std::collections::BTreeSet<u16> =
        tenants.iter().map(|t| regina_server::groups::group_of(Some(t), GROUPS)).collect();
    assert_eq!(groups.len(), GROUPS as usize, "the tenants cover every group");
    tokio::task::block_in_place(|| wait_balanced(&cluster, "formation"));

    let bases: Vec<String> = cluster.nodes.iter().map(|n| n.base()).collect();
    let ledger: Ledger = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut producers = Vec::new();
    for (k, base) in bases.iter().enumerate() {
        let (base, ledger, stop) = (base.clone(), ledger.clone(), stop.clone());
        producers.push(tokio::spawn(async move {
            let c = client();
            let mut seq = 0u64;
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let tenant = tenant_name((round * 7 + k as u64) % TENANTS);
                let n = 1 + seq % BATCH_MAX;
                let items: Vec<(String, String, u64)> = (seq..seq + n)
                    .map(|s| (format!("p{k}-{s}"), format!("part-{}", (s * 5 + k as u64) % PARTITIONS), s))
                    .collect();
                push_until_answered(&c, &base, &tenant, &items, k as u64, &ledger).await;
                seq += n;
                round += 1;
            }
            seq
        }));
    }

    tokio::time::sleep(KILL_AFTER).await;
    let victim = 3;
    let before = ledger.lock().unwrap().len();
    cluster.node(victim).kill();
    tokio::time::sleep(DOWN_FOR).await;
    let during = ledger.lock().unwrap().len();
    cluster.node(victim).start();
    let took = tokio::task::block_in_place(|| wait_balanced(&cluster, "after the restart"));
    assert!(took < BALANCED_WITHIN);
    tokio::time::sleep(LOAD_AFTER).await;
    stop.store(true, Ordering::Relaxed);
    let mut pushed = 0;
    for p in producers {
        pushed += p.await.expect("a producer panicked");
    }
    let ledger = ledger.lock().unwrap().clone();
    assert_eq!(ledger.len() as u64, pushed, "every push was answered");
    assert!(during > before, "writes went on while node {victim} was down");
    println!("balance: {pushed} messages answered, {before} before the kill, {during} before the restart");

    let c = support::client();
    for g in 0..GROUPS {
        assert_group_states_identical(&c, &cluster, g).await;
    }
    // Still balanced once the load is over.
    let end = leaders(&cluster).expect("agreed leaders");
    assert!(per_node(&end).values().all(|n| *n == 2), "{end:?}");

    let mut by_partition: BTreeMap<(String, String), Vec<&Answered>> = BTreeMap::new();
    for ((tenant, _), a) in &ledger {
        by_partition.entry((tenant.clone(), a.partition.clone())).or_default().push(a);
    }
    for (i, node) in cluster.nodes.iter().enumerate() {
        let base = node.base();
        for ((tenant, partition), expected) in &by_partition {
            let tc = tenant_client(tenant);
            let msgs = drain(&tc, &base, QUEUE, partition, &format!("check-{i}"), 50).await;
            let offsets: Vec<u64> = msgs.iter().map(|m| m["offset"].as_u64().unwrap()).collect();
            assert_eq!(
                offsets,
                (0..msgs.len() as u64).collect::<Vec<_>>(),
                "{tenant}/{partition}: offsets not gapless"
            );
            assert_eq!(msgs.len(), expected.len(), "{tenant}/{partition}: stored messages vs answered pushes");
            let mut last_seq: HashMap<u64, u64> = HashMap::new();
            for m in &msgs {
                let txn = m["transactionId"].as_str().unwrap();
                let a = &ledger[&(tenant.clone(), txn.to_string())];
                assert_eq!(a.offset, m["offset"].as_u64().unwrap(), "{tenant}/{txn} stored at another offset");
                let producer = m["data"]["producer"].as_u64().unwrap();
                let seq = m["data"]["seq"].as_u64().unwrap();
                assert_eq!((producer, seq), (a.producer, a.seq));
                if let Some(prev) = last_seq.insert(producer, seq) {
                    assert!(prev < seq, "{tenant}/{partition}: producer {producer} out of order ({prev} then {seq})");
                }
            }
        }
    }
}
