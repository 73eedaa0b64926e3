//! Tenants over HTTP: with tenancy on, requests naming different tenants in
//! `x-queen-tenant` share queue, partition, KV, lock, timer and ephemeral names and
//! still never see each other's data; requests without the header act for
//! the default tenant. Run through a follower of a three-node cluster, so
//! the header also survives forwarding. Then the same over four Raft
//! groups per node, with a leader killed midway.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
mod support;

use serde_json::{json, Value};

use cluster::{assert_group_states_identical, assert_states_identical, Cluster, CONVERGE};
use support::client;

struct Tenant<'a> {
    c: &'a reqwest::Client,
    base: String,
    name: Option<&'a str>,
}

impl Tenant<'_> {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.c.request(method, format!("{}{path}", self.base));
        if let Some(t) = self.name {
            req = req.header("x-queen-tenant", t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("a response");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn push(&self, n: usize) {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({ "queue": "orders", "partition": "p", "payload": { "who": self.name, "i": i } }))
            .collect();
        let (s, v) = self.post("/api/v1/push", json!({ "items": items })).await;
        assert_eq!(s, 201, "{v}");
    }

    async fn pop_all(&self) -> Vec<Value> {
        let (s, v) = self.get("/api/v1/pop/queue/orders?batch=100&wait=false").await;
        assert_eq!(s, 200, "{v}");
        v["messages"].as_array().cloned().unwrap_or_default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_the_same_names_never_see_each_other() {
    let cluster = Cluster::start_with(3, &[("REGINA_TENANCY", "on")]);
    let leader = cluster.wait_for_leader(CONVERGE);
    let follower = cluster.nodes.iter().find(|n| n.id != leader).unwrap().base();
    let c = client();
    let tenants: Vec<Tenant> = [None, Some("acme"), Some("globex")]
        .into_iter()
        .map(|name| Tenant { c: &c, base: follower.clone(), name })
        .collect();

    for (t, n) in tenants.iter().zip([2, 3, 1]) {
        t.push(n).await;
        let put = json!({ "operations": [{ "op": "put", "ns": "cfg", "key": "k", "value": { "owner": t.name }, "forever": true }] });
        let (s, v) = t.post("/api/v1/kv", put).await;
        assert_eq!(s, 200, "{v}");
        let eph = json!({ "queue": "replies", "messages": [{ "payload": { "owner": t.name } }] });
        let (s, v) = t.post("/api/v1/ephemeral/push", eph).await;
        assert_eq!(s, 201, "{v}");
    }
    for (t, n) in tenants.iter().zip([2, 3, 1]) {
        let msgs = t.pop_all().await;
        assert_eq!(msgs.len(), n, "{:?}: {msgs:?}", t.name);
        assert!(msgs.iter().all(|m| m["data"]["who"] == json!(t.name)), "{:?} saw another's: {msgs:?}", t.name);
        let offsets: Vec<u64> = msgs.iter().map(|m| m["offset"].as_u64().unwrap()).collect();
        assert_eq!(offsets, (0..n as u64).collect::<Vec<_>>(), "offsets count per tenant");
        let (s, v) = t.get("/api/v1/kv/cfg/k").await;
        assert_eq!((s, &v["value"]), (200, &json!({ "owner": t.name })), "{v}");
        let (s, v) = t.get("/api/v1/ephemeral/pop?queue=replies&batch=10").await;
        assert_eq!(s, 200, "{v}");
        let eph = v["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(eph.len(), 1, "{:?}: {v}", t.name);
        assert_eq!(eph[0]["payload"], json!({ "owner": t.name }));
        let (s, v) = t.get("/api/v1/resources/queues").await;
        assert_eq!(s, 200, "{v}");
    }
    // Locks: the same one-permit lock name is free in each tenant, and a
    // second owner inside one tenant is refused.
    for t in &tenants {
        let acquire = json!({ "operations": [{ "op": "acquire", "name": "leader-lock", "owner": format!("{:?}", t.name), "ttlSeconds": 60 }] });
        let (s, v) = t.post("/api/v1/locks", acquire).await;
        assert_eq!((s, &v["results"][0]["acquired"]), (200, &json!(true)), "{:?}: {v}", t.name);
        let other = json!({ "operations": [{ "op": "acquire", "name": "leader-lock", "owner": "someone-else", "ttlSeconds": 60 }] });
        let (_, again) = t.post("/api/v1/locks", other).await;
        assert_eq!(again["results"][0]["acquired"], json!(false), "{:?}: {again}", t.name);
    }
    // Timers: the same timer key in two tenants, each listed only in its own.
    for t in &tenants[1..] {
        let op = json!({ "operations": [{ "op": "schedule", "queue": "later", "timerKey": "k", "delayMs": 600000,
                                          "payload": "e30=", "txn": format!("timer-{:?}", t.name) }] });
        let (s, v) = t.post("/api/v1/timers", op).await;
        assert_eq!(s, 200, "{v}");
        let (s, v) = t.get("/api/v1/timers/later/k").await;
        assert_eq!((s, &v["found"]), (200, &json!(true)), "{v}");
    }
    let (_, v) = tenants[0].get("/api/v1/timers/later/k").await;
    assert_eq!(v["found"], json!(false), "the default tenant sees another's timer: {v}");

    // A tenant that never wrote sees nothing at all.
    let stranger = Tenant { c: &c, base: follower.clone(), name: Some("initech") };
    assert!(stranger.pop_all().await.is_empty());
    let (s, v) = stranger.get("/api/v1/kv/cfg/k").await;
    assert_eq!((s, &v["found"]), (200, &json!(false)), "{v}");
    // A lease taken by one tenant cannot be acked by another.
    let acme = &tenants[1];
    let (s, v) = acme.post("/api/v1/push", json!({ "items": [{ "queue": "jobs", "payload": 1 }] })).await;
    assert_eq!(s, 201, "{v}");
    let (_, popped) = acme.get("/api/v1/pop/queue/jobs?batch=1&wait=false").await;
    let m = &popped["messages"][0];
    let ack = json!({ "transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": popped["leaseId"], "status": "completed" });
    let (_, theirs) = tenants[2].post("/api/v1/ack", ack.clone()).await;
    let (_, mine) = acme.post("/api/v1/ack", ack).await;
    assert_ne!(theirs[0]["success"], json!(true), "another tenant acked acme's lease: {theirs}");
    assert_eq!(mine[0]["success"], json!(true), "{mine}");

    let (s, v) = Tenant { c: &c, base: follower.clone(), name: Some("no/slashes") }.get("/api/v1/kv/cfg/k").await;
    assert_eq!(s, 400, "{v}");
    assert!(v["error"].as_str().unwrap_or_default().contains("x-queen-tenant"), "{v}");
    assert_states_identical(&c, &cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_spread_over_raft_groups_stay_isolated_across_a_leader_kill() {
    const GROUPS: u16 = 4;
    let mut cluster = Cluster::start_with(3, &[("REGINA_TENANCY", "on"), ("REGINA_RAFT_GROUPS", "4")]);
    let c = client();
    let names: Vec<String> = (0..12).map(|i| format!("tenant-{i}")).collect();
    let placed: std::collections::BTreeSet<u16> =
        names.iter().map(|n| regina_node::raft_groups::group_of(Some(n.as_str()), GROUPS)).collect();
    assert!(placed.len() >= 3, "the names spread over the groups: {placed:?}");
    let h = cluster.nodes[0].health().expect("health");
    assert_eq!(h["groups"].as_array().map(Vec::len), Some(GROUPS as usize), "{h}");

    let bases: Vec<String> = cluster.nodes.iter().map(|n| n.base()).collect();
    let through = |node: usize, name: &'static str| Tenant { c: &c, base: bases[node].clone(), name: Some(name) };
    let names: Vec<&'static str> = names.into_iter().map(|n| &*Box::leak(n.into_boxed_str())).collect();
    for (i, name) in names.iter().enumerate() {
        through(i % 3, name).push(i + 1).await;
    }
    // Kill group 0's leader; every group goes on through the survivors.
    let victim = cluster.wait_for_leader(CONVERGE);
    cluster.node(victim).kill();
    let survivor = cluster.nodes.iter().position(|n| n.id != victim).unwrap();
    for name in &names {
        through(survivor, name).push(1).await;
    }
    cluster.node(victim).start();
    cluster.wait_for_leader(CONVERGE);
    for (i, name) in names.iter().enumerate() {
        let msgs = through((i + 1) % 3, name).pop_all().await;
        assert_eq!(msgs.len(), i + 2, "{name}: {msgs:?}");
        assert!(msgs.iter().all(|m| m["data"]["who"] == json!(name)), "{name} saw another's: {msgs:?}");
    }
    for g in 0..GROUPS {
        assert_group_states_identical(&c, &cluster, g).await;
    }
}
