//! Tokens in a cluster: a follower checks a request's token before it
//! forwards it, and the leader checks it again (the token travels with the
//! request), so roles, tenants and the stamped producer are the same
//! whichever node a client calls.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
mod support;
#[path = "support/tokens.rs"]
mod tokens;

use serde_json::{json, Value};

use cluster::{Cluster, CONVERGE};
use support::client;
use tokens::{token, SECRET};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_forward_only_what_the_token_allows() {
    let mut cluster = Cluster::start_with(3, &[("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET)]);
    let leader = cluster.wait_for_leader(CONVERGE);
    let followers: Vec<String> = cluster.nodes.iter().filter(|n| n.id != leader).map(|n| n.base()).collect();
    let c = client();
    let (alice, reader) = (token("alice", "read-write"), token("rita", "read-only"));
    let body = json!({ "items": [{ "queue": "fwd", "payload": { "n": 1 }, "producerSub": "mallory" }] });
    let push = |base: &str, t: Option<&str>| {
        let mut r = c.post(format!("{base}/api/v1/push")).json(&body);
        if let Some(t) = t {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    assert_eq!(push(&followers[0], None).await.unwrap().status(), 401);
    assert_eq!(push(&followers[0], Some(&reader)).await.unwrap().status(), 403);
    assert_eq!(push(&followers[0], Some(&alice)).await.unwrap().status(), 201);
    let pop = c
        .get(format!("{}/api/v1/pop/queue/fwd?wait=false&autoAck=true", followers[1]))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(pop.status(), 200);
    let v: Value = pop.json().await.unwrap();
    assert_eq!(v["messages"][0]["producerSub"], "alice", "{v}");
    // The leader checks again: a forwarded request with a bad token does
    // not get in through the Raft address either.
    let l = cluster.node(leader);
    let resp = c
        .get(l.internal_url("/api/v1/resources/queues"))
        .header("x-regina-cluster-token", &l.cluster_token)
        .header("x-regina-forwarded-by", "9")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401, "the cluster token is not a client token");
}
