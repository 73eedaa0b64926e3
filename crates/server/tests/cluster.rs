//! Three real `regina` processes as one Raft group: any node answers every
//! route (followers forward to the leader), a single node grows into a
//! cluster in place and shrinks again, and a node that missed a purged log
//! catches up from a snapshot that carries the message bodies.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cluster::{assert_states_identical, Cluster, ClusterNode, CONVERGE};
use support::{client, drain, get_json, post_json, push};

fn items(queue: &str, partition: &str, from: u64, n: u64) -> Vec<Value> {
    (from..from + n)
        .map(|i| json!({ "queue": queue, "partition": partition, "transactionId": format!("t{i}"), "payload": { "n": i, "pad": "x".repeat(300) } }))
        .collect()
}

fn follower_ids(cluster: &Cluster, leader: u64) -> Vec<u64> {
    cluster.nodes.iter().map(|n| n.id).filter(|id| *id != leader).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_node_answers_every_route() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.wait_for_leader(CONVERGE);
    let f = follower_ids(&cluster, leader);
    let (a, b) = (cluster.node(f[0]).base(), cluster.node(f[1]).base());
    let l = cluster.node(leader).base();
    let c = client();

    // Pushed through one follower, read through the other.
    let answers = push(&c, &a, items("orders", "o-1", 0, 5)).await;
    assert!(answers.iter().all(|r| r["status"] == "queued"), "{answers:?}");
    let msgs = drain(&c, &b, "orders", "o-1", "g1", 10).await;
    assert_eq!(msgs.iter().map(|m| m["data"]["n"].as_u64().unwrap()).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    // A retry through another node is a duplicate, not a second message.
    let again = push(&c, &l, items("orders", "o-1", 4, 1)).await;
    assert_eq!(again[0]["status"], "duplicate", "{again:?}");

    // KV: written through one follower, read at once through the other.
    let (s, v) = post_json(
        &c,
        &format!("{a}/api/v1/kv"),
        &json!({ "operations": [{ "op": "put", "ns": "ns", "key": "k", "value": { "v": 7 }, "forever": true }] }),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = get_json(&c, &format!("{b}/api/v1/kv/ns/k")).await;
    assert_eq!((s, &v["value"]), (200, &json!({ "v": 7 })), "{v}");

    // A long poll parked on a follower wakes when a push lands through
    // the other follower.
    let poll = {
        let (c, a) = (c.clone(), a.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let url = format!("{a}/api/v1/pop/queue/waiting?batch=1&wait=true&timeout=15000");
            let (s, v) = get_json(&c, &url).await;
            (s, v, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    push(&c, &b, items("waiting", "w", 0, 1)).await;
    let (s, v, took) = poll.await.unwrap();
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["messages"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(took < Duration::from_secs(10), "the long poll waited {took:?}");

    // Health is each node's own; the cluster view is the leader's.
    for node in &cluster.nodes {
        let h = node.health().expect("health");
        assert_eq!(h["leader"], json!(leader), "{h}");
        assert_eq!(h["role"], if node.id == leader { "leader" } else { "follower" }, "{h}");
        assert!(h["commitIndex"].as_u64().is_some() && h["appliedIndex"].as_u64().is_some(), "{h}");
    }
    let (s, view) = get_json(&c, &format!("{a}/api/v1/cluster")).await;
    assert_eq!(s, 200);
    assert_eq!(view["nodeId"], json!(leader), "answered by the leader: {view}");
    assert_eq!(view["members"].as_array().map(Vec::len), Some(3), "{view}");
    assert_states_identical(&c, &cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_grows_into_a_cluster_and_shrinks() {
    let mut cluster = Cluster::prepare(3, false);
    cluster.node(1).start();
    cluster.wait_for_leader(CONVERGE);
    let c = client();
    let one = cluster.node(1).base();
    push(&c, &one, items("grow", "g", 0, 20)).await;

    // Joining nodes name the group they join (and themselves) so that they
    // wait to be added instead of forming a group of their own.
    for id in [2, 3] {
        let joiners = format!("1={},{id}={}", cluster.node(1).raft_addr(), cluster.node(id).raft_addr());
        let node = cluster.node(id);
        node.peers = joiners;
        node.start();
        let addr = node.raft_addr();
        let (s, v) = post_json(&c, &format!("{one}/api/v1/cluster/members"), &json!({ "id": id, "addr": addr })).await;
        assert_eq!(s, 200, "adding node {id}: {v}");
    }
    let (_, view) = get_json(&c, &format!("{one}/api/v1/cluster")).await;
    let voters: Vec<u64> = view["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["voter"] == true)
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert_eq!(voters, vec![1, 2, 3], "{view}");
    cluster.wait_for_leader(CONVERGE);
    assert_states_identical(&c, &cluster).await;
    // The new voters count: writes go on with node 1 gone.
    cluster.node(1).kill();
    let leader = cluster.wait_for_leader(CONVERGE);
    assert_ne!(leader, 1);
    let two = cluster.node(2).base();
    let answers = push(&c, &two, items("grow", "g", 20, 5)).await;
    assert!(answers.iter().all(|r| r["status"] == "queued"), "{answers:?}");
    cluster.node(1).start();
    cluster.wait_for_leader(CONVERGE);

    // Shrink: remove node 3; the others go on as a group of two.
    let (s, v) = post_json(&c, &format!("{two}/api/v1/cluster/members/3"), &json!({})).await;
    assert_eq!(s, 405, "removal is a DELETE: {v}");
    let resp = c.delete(format!("{two}/api/v1/cluster/members/3")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let (_, view) = get_json(&c, &format!("{two}/api/v1/cluster")).await;
    let ids: Vec<u64> = view["members"].as_array().unwrap().iter().map(|m| m["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![1, 2], "{view}");
    cluster.node(3).kill();
    let msgs = drain(&c, &two, "grow", "g", "after", 10).await;
    assert_eq!(msgs.len(), 25);
    let resp = c.delete(format!("{two}/api/v1/cluster/members/9")).send().await.unwrap();
    assert_eq!(resp.status(), 409, "not a member");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_a_purged_log_catches_up_from_a_snapshot_with_its_bodies() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.wait_for_leader(CONVERGE);
    let behind = follower_ids(&cluster, leader)[1];
    let c = client();
    let l = cluster.node(leader).base();
    push(&c, &l, items("snap", "s", 0, 10)).await;
    cluster.wait_converged(CONVERGE);
    cluster.node(behind).kill();
    for batch in 0..20 {
        push(&c, &l, items("snap", &format!("s{}", batch % 4), 100 + batch * 50, 50)).await;
    }
    // A partition past a sealed chunk of 1,024 messages: the leader's
    // snapshot is holed, and the follower is sent it filled.
    for batch in 0..11 {
        push(&c, &l, items("snap", "big", 10_000 + batch * 100, 100)).await;
    }
    let (s, v) = post_json(&c, &format!("{l}/api/v1/cluster/snapshot"), &json!({})).await;
    assert_eq!(s, 200, "{v}");
    let snap = v["snapshotIndex"].as_u64().expect("a snapshot index");
    let h = cluster.node(leader).health().unwrap();
    assert!(h["snapshotIndex"].as_u64() >= Some(snap), "{h}");
    let packs_dir = cluster.node(leader).data_dir.join("snapshots").join(regina_storage::snapshot::PACKS_DIR);
    let packs = regina_storage::chunk_packs::pack_files(&packs_dir).unwrap();
    assert!(!packs.is_empty(), "the leader's snapshot left its sealed chunk in no pack");

    cluster.node(behind).start();
    let deadline = Instant::now() + CONVERGE;
    while cluster.node(behind).health().and_then(|h| h["appliedIndex"].as_u64()).unwrap_or(0) < snap {
        assert!(Instant::now() < deadline, "node {behind} did not catch up\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = cluster.node(behind).log_tail(20_000);
    assert_states_identical(&c, &cluster).await;
    // The bodies came with the snapshot: the segment files match the
    // leader's byte for byte.
    let bodies = |node: &ClusterNode| {
        let dir = node.data_dir.join("bodies");
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        files.iter().map(|f| std::fs::read(f).unwrap()).collect::<Vec<_>>()
    };
    let (mine, theirs) = (bodies(cluster.node(behind)), bodies(cluster.node(leader)));
    assert!(!mine.is_empty() && mine == theirs, "body segments differ after the snapshot\n{log}");

    // And the group reads every message, bodies included, through it.
    let b = cluster.node(behind).base();
    let mut n = 0;
    for p in 0..4 {
        let msgs = drain(&c, &b, "snap", &format!("s{p}"), "check", 10).await;
        assert!(msgs.iter().all(|m| m["data"]["pad"].as_str().map(str::len) == Some(300)), "bodies unreadable");
        n += msgs.len();
    }
    assert_eq!(n, 1000);
    let big = drain(&c, &b, "snap", "big", "check", 10).await;
    assert_eq!(big.len(), 1_100);
}

/// Timers fire from whichever node leads: scheduled before a leader kill,
/// due before and after it, each fires exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_fire_exactly_once_across_a_leader_kill() {
    use base64::Engine;
    const TIMERS: i64 = 40;
    let mut cluster = Cluster::start(3);
    let leader = cluster.wait_for_leader(CONVERGE);
    let f = follower_ids(&cluster, leader);
    let c = client();
    let ops: Vec<Value> = (0..TIMERS)
        .map(|i| {
            let payload = base64::engine::general_purpose::STANDARD.encode(json!({ "i": i }).to_string());
            json!({ "op": "schedule", "queue": "due", "timerKey": format!("t{i}"), "payload": payload,
                    "delayMs": 300 + i * 75, "txn": format!("timer-{i}") })
        })
        .collect();
    let (s, v) = post_json(&c, &cluster.node(f[0]).url("/api/v1/timers"), &json!({ "operations": ops })).await;
    assert_eq!(s, 200, "{v}");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    cluster.node(leader).kill();
    let after = cluster.wait_for_leader(CONVERGE);
    assert_ne!(after, leader);
    cluster.node(leader).start();
    // The last timer is due 3.3 s after scheduling.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let msgs = drain(&c, &cluster.node(f[1]).base(), "due", "Default", "fired", 10).await;
    let mut txns: Vec<&str> = msgs.iter().map(|m| m["transactionId"].as_str().unwrap()).collect();
    txns.sort_unstable();
    let mut expected: Vec<String> = (0..TIMERS).map(|i| format!("timer-{i}")).collect();
    expected.sort_unstable();
    assert_eq!(txns, expected, "every timer fired once: {msgs:?}");
    assert_states_identical(&c, &cluster).await;
}
