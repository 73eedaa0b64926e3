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
        tenants.iter().map(|t| regina_node::raft_groups::group_of(Some(t), GROUPS)).collect();
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

async fn get_json(c: &reqwest::Client, url: &str) -> Value {
    c.get(url).send().await.expect("an answer").json().await.expect("JSON")
}

/// The group view `/api/v1/cluster/groups` answers through `node`.
async fn groups_view(c: &reqwest::Client, cluster: &Cluster, node: u64) -> Value {
    get_json(c, &cluster.nodes[node as usize - 1].url("/api/v1/cluster/groups")).await
}

async fn wait_group_leader(c: &reqwest::Client, cluster: &Cluster, group: usize, want: u64) {
    let started = Instant::now();
    loop {
        let v = groups_view(c, cluster, 1).await;
        if v["groups"][group]["leader"].as_u64() == Some(want) {
            println!("balance: group {group} led by node {want} after {:?}", started.elapsed());
            return;
        }
        assert!(started.elapsed() < BALANCED_WITHIN, "group {group} not led by node {want}: {v}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Placement that can be seen and steered: a tenant pinned to a group
/// lands there and is listed with the group's leader and load; the SDK
/// follows the leader the answers name, and falls back to the URL it was
/// given when that leader is gone; an operator's preferred-leader pin moves
/// a group and dropping it moves the group back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_is_visible_and_steerable() {
    const PINNED: &str = "pinned-a";
    let hashed = regina_node::raft_groups::group_of(Some(PINNED), GROUPS);
    assert_ne!(hashed, 5, "the pin must change the tenant's group");
    let env = [("REGINA_TENANCY", "on"), ("REGINA_RAFT_GROUPS", "6"), ("QUEEN_TENANT_GROUPS", "pinned-a=5")];
    let mut cluster = Cluster::start_with(3, &env);
    tokio::task::block_in_place(|| wait_balanced(&cluster, "formation"));
    let c = client();

    // The SDK, pointed at node 1, pushes for the pinned tenant: group 5,
    // led by node 3 (5 % 3 = position 2).
    let sdk = regina_client::Client::new(cluster.nodes[0].base()).unwrap().with_tenant(PINNED);
    let load_until = Instant::now() + Duration::from_millis(2500);
    let mut i = 0;
    while Instant::now() < load_until {
        let item = regina_client::PushItem::new("orders", json!({ "i": i })).transaction_id(format!("t-{i}"));
        sdk.push(&[item]).await.expect("a push");
        i += 1;
    }
    let leader3 = cluster.nodes[2].base();
    assert_eq!(sdk.leader_hint().as_deref(), Some(leader3.as_str()), "the SDK follows group 5's leader");

    let v = groups_view(&c, &cluster, 2).await;
    let g5 = &v["groups"][5];
    assert_eq!(g5["leader"], json!(3), "{v}");
    assert_eq!(g5["leaderAddr"], json!(cluster.nodes[2].raft_addr()), "{v}");
    assert_eq!(g5["preferredLeader"], json!(3), "{v}");
    assert_eq!(g5["tenants"], json!([PINNED]), "{v}");
    assert_eq!(g5["pinnedTenants"], json!([PINNED]), "{v}");
    assert!(g5["load"]["entriesPerSec"].as_f64().unwrap() > 0.0, "group 5 carries the load: {v}");
    assert!(g5["load"]["bytesPerSec"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["groups"][hashed as usize]["tenantCount"], json!(0), "nothing in the hashed group: {v}");
    assert_eq!(v["leadersPerNode"], json!({ "1": 2, "2": 2, "3": 2 }), "{v}");
    // /health and the metrics show the same.
    let h = cluster.nodes[0].health().unwrap();
    assert_eq!(h["groups"][5]["tenants"], json!([PINNED]), "{h}");
    let m = get_json(&c, &cluster.nodes[0].url("/metrics")).await;
    assert_eq!(m["groups"][5]["leader"], json!(3), "{m}");
    assert_eq!(m["groups"][5]["tenants"], json!([PINNED]), "{m}");
    let text = c.get(cluster.nodes[1].url("/metrics/prometheus")).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("regina_group_leader{group=\"5\"} 3"), "{text}");
    assert!(text.contains("regina_tenant_group{tenant=\"pinned-a\"} 5"), "{text}");
    // Every answer names the group's leader, here and through a follower.
    let r =
        c.get(cluster.nodes[0].url("/api/v1/resources/queues")).header("x-queen-tenant", PINNED).send().await.unwrap();
    assert_eq!(r.headers()["x-regina-leader"].to_str().unwrap(), cluster.nodes[2].base().trim_start_matches("http://"));
    assert_eq!(r.headers()["x-regina-group"].to_str().unwrap(), "5");

    // Bad pins are refused with the reason.
    let put = |node: usize, path: String, body: Value| c.put(cluster.nodes[node].url(&path)).json(&body).send();
    let r = put(0, "/api/v1/cluster/groups/0/leader".into(), json!({ "node": 9 })).await.unwrap();
    assert_eq!(r.status(), 400);
    let r = put(0, "/api/v1/cluster/groups/6/leader".into(), json!({ "node": 2 })).await.unwrap();
    assert_eq!(r.status(), 404);
    let r = put(0, "/api/v1/cluster/groups/0/leader".into(), json!({ "nodes": 2 })).await.unwrap();
    assert_eq!(r.status(), 400);

    // Pin group 0 to node 2 (asked through node 3): it moves, and stays
    // while the others keep their preferred leaders.
    let r = put(2, "/api/v1/cluster/groups/0/leader".into(), json!({ "node": 2 })).await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    wait_group_leader(&c, &cluster, 0, 2).await;
    let v = groups_view(&c, &cluster, 1).await;
    assert_eq!(v["groups"][0]["pinnedLeader"], json!(2), "{v}");
    assert_eq!(v["groups"][0]["preferredLeader"], json!(2), "{v}");
    // Unpinned, it goes back to node 1.
    let r = c.delete(cluster.nodes[0].url("/api/v1/cluster/groups/0/leader")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    wait_group_leader(&c, &cluster, 0, 1).await;
    tokio::task::block_in_place(|| wait_balanced(&cluster, "after the pin was dropped"));

    // The same through `regina cluster leader`, and `status` shows it.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_regina"))
            .arg("cluster")
            .args(args)
            .args(["--url", &cluster.nodes[1].base()])
            .output()
            .expect("run regina cluster");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
    };
    let (ok, text) = cli(&["leader", "--group", "1", "--id", "1"]);
    assert!(ok && text.contains("preferred leader node 1, pinned 1"), "{text}");
    wait_group_leader(&c, &cluster, 1, 1).await;
    let (ok, text) = cli(&["status"]);
    assert!(ok && text.contains("groups led: node 1: 3, node 2: 1, node 3: 2"), "{text}");
    let (ok, text) = cli(&["leader", "--group", "1", "--unpin"]);
    assert!(ok && text.contains("pinned -"), "{text}");
    wait_group_leader(&c, &cluster, 1, 2).await;
    let (ok, text) = cli(&["leader", "--id", "1"]);
    assert!(!ok && text.contains("--group"), "{text}");
    tokio::task::block_in_place(|| wait_balanced(&cluster, "after the CLI's pin was dropped"));

    // The hinted leader dies: the SDK falls back to node 1, which forwards
    // to group 5's new leader.
    cluster.node(3).kill();
    let started = Instant::now();
    loop {
        let item = regina_client::PushItem::new("orders", json!({ "i": i })).transaction_id(format!("t-{i}"));
        match sdk.push(&[item]).await {
            Ok(_) => break,
            Err(e) => assert!(started.elapsed() < Duration::from_secs(20), "no push after the kill: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hint = sdk.leader_hint().expect("a new hint");
    assert_ne!(hint, leader3, "the hint moved off the dead node");
    let pushed = i + 1;
    // Every push is stored once (a retried one collapsed onto its first).
    let tc = tenant_client(PINNED);
    let msgs = drain(&tc, &cluster.nodes[1].base(), "orders", "Default", "audit", 50).await;
    assert_eq!(msgs.len(), pushed, "stored messages vs pushes");
}

/// A node of the default single group still honours a pin: the balancer
/// used to skip every tick on a node with fewer than two groups, so a pin
/// was stored and never acted on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_moves_the_only_group() {
    let cluster = Cluster::start(3);
    let c = client();
    let first = groups_view(&c, &cluster, 1).await["groups"][0]["leader"].as_u64().expect("a leader");
    let target = if first == 3 { 2 } else { 3 };
    let url = cluster.nodes[0].url("/api/v1/cluster/groups/0/leader");
    let r = c.put(url).json(&json!({ "node": target })).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    wait_group_leader(&c, &cluster, 0, target).await;
}
