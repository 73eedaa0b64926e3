//! The closed internal port: Raft messages, snapshot parts and state dumps
//! are served only on a node's Raft address, only to callers with the
//! cluster token; the client port never serves them. A node with another
//! token cannot join or read anything, and a node refuses to serve a Raft
//! address without a token unless told `--insecure-cluster`.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use cluster::{assert_states_identical, Cluster, CONVERGE};
use support::{client, free_port, get_json, push};

const TOKEN: &str = "x-regina-cluster-token";

/// Every internal route a peer uses, as a (method, path) a caller can try.
const INTERNAL: [(&str, &str); 9] = [
    ("GET", "/internal/state"),
    ("GET", "/internal/g/0/state"),
    ("POST", "/internal/raft/vote"),
    ("POST", "/internal/g/0/raft/vote"),
    ("POST", "/internal/g/0/raft/append"),
    ("POST", "/internal/g/0/raft/snapshot"),
    ("POST", "/internal/g/0/raft/snapshot/1-1-1-1/segment/0"),
    ("POST", "/internal/g/0/raft/members"),
    ("POST", "/internal/raft/members"),
];

async fn send(c: &reqwest::Client, method: &str, url: &str, token: Option<&str>) -> u16 {
    let mut req = c.request(method.parse().unwrap(), url).body(vec![1u8, 2, 3]);
    if let Some(t) = token {
        req = req.header(TOKEN, t);
    }
    req.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}")).status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_routes_live_only_on_the_raft_address_behind_the_token() {
    let mut cluster = Cluster::start(3);
    let leader = cluster.wait_for_leader(CONVERGE);
    let c = client();
    let answers =
        push(&c, &cluster.node(leader).base(), vec![json!({ "queue": "q", "payload": { "secret": 1 } })]).await;
    assert_eq!(answers[0]["status"], "queued");
    for node in &cluster.nodes {
        let token = node.cluster_token.clone();
        for (method, path) in INTERNAL {
            // The client port does not know these routes, even with the token.
            for t in [None, Some(token.as_str())] {
                let s = send(&c, method, &node.url(path), t).await;
                assert_eq!(s, 404, "{method} {path} on node {}'s client port answered {s}", node.id);
            }
            // The Raft address refuses them without the token, or with another.
            for t in [None, Some("not-the-cluster-token"), Some(&token[..token.len() - 1])] {
                let s = send(&c, method, &node.internal_url(path), t).await;
                assert_eq!(s, 401, "{method} {path} on node {}'s Raft address with {t:?} answered {s}", node.id);
            }
        }
        // Forwarded client requests and health there need the token too.
        for path in ["/health", "/api/v1/resources/queues", "/api/v1/cluster"] {
            assert_eq!(send(&c, "GET", &node.internal_url(path), None).await, 401, "{path}");
            assert_eq!(send(&c, "GET", &node.internal_url(path), Some(&token)).await, 200, "{path}");
        }
        // The state dump answers peers with the token.
        let resp = c.get(node.internal_url("/internal/g/0/state")).header(TOKEN, &token).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers().contains_key("x-regina-applied-index"));
    }
    // A client cannot pass itself off as a forwarding peer on the client port.
    let follower = cluster.nodes.iter().find(|n| n.id != leader).unwrap();
    let resp = c
        .get(follower.url("/api/v1/resources/queues"))
        .header("x-regina-forwarded-by", "1")
        .header(TOKEN, &follower.cluster_token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the follower forwards it as usual");
    assert_states_identical(&c, &cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_token_cannot_join_or_read() {
    let mut cluster = Cluster::prepare(3, true);
    cluster.node(3).cluster_token = "a-token-the-others-do-not-know".to_string();
    for node in &mut cluster.nodes {
        node.start();
    }
    let c = client();
    // Nodes 1 and 2 are a majority of the three voters: they elect a leader.
    let deadline = Instant::now() + CONVERGE;
    let leader = loop {
        let l1 = cluster.node(1).health().and_then(|h| h["leader"].as_u64());
        let l2 = cluster.node(2).health().and_then(|h| h["leader"].as_u64());
        if let (Some(a), Some(b)) = (l1, l2) {
            if a == b && a != 3 {
                break a;
            }
        }
        assert!(Instant::now() < deadline, "nodes 1 and 2 elected no leader\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let base = cluster.node(leader).base();
    for i in 0..5 {
        push(&c, &base, vec![json!({ "queue": "kept", "transactionId": format!("t{i}"), "payload": { "n": i } })])
            .await;
    }
    // Node 3 hears nothing from them and they take nothing from it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let h3 = cluster.node(3).health().expect("node 3 answers /health");
    assert!(h3["leader"].is_null(), "node 3 learned of a leader: {h3}");
    assert!(h3["appliedIndex"].as_u64().unwrap_or(0) == 0, "node 3 applied entries: {h3}");
    let (_, view) = get_json(&c, &format!("{base}/api/v1/cluster")).await;
    let m3: Vec<&Value> = view["members"].as_array().unwrap().iter().filter(|m| m["id"] == 3).collect();
    assert!(m3[0]["matchedIndex"].is_null(), "the leader replicated to node 3: {view}");
    // With its token, node 3 reads nothing from the others' Raft addresses.
    let wrong = cluster.node(3).cluster_token.clone();
    for id in [1, 2] {
        let url = cluster.node(id).internal_url("/internal/g/0/state");
        assert_eq!(send(&c, "GET", &url, Some(&wrong)).await, 401);
        let url = cluster.node(id).internal_url("/api/v1/resources/queues");
        assert_eq!(send(&c, "GET", &url, Some(&wrong)).await, 401);
    }
    // A request to node 3's client port gets no answer from the cluster.
    let resp = c.get(cluster.node(3).url("/api/v1/resources/queues")).send().await.unwrap();
    assert_eq!(resp.status(), 503, "{}", resp.text().await.unwrap());
}

#[test]
fn a_node_with_a_raft_address_refuses_to_start_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let (http, raft) = (free_port(), free_port());
    let peers = format!("1=127.0.0.1:{raft}");
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_regina"));
        cmd.args(["--port", &http.to_string(), "--raft-addr", &format!("127.0.0.1:{raft}")])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(extra)
            .env_remove("REGINA_CLUSTER_TOKEN")
            .env_remove("REGINA_CLUSTER_TOKEN_FILE")
            .env_remove("REGINA_INSECURE_CLUSTER")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    for extra in [vec![], vec!["--peers", peers.as_str()]] {
        let out = run(&extra, &[]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("needs a cluster token"), "{text}");
    }
    let out = run(&["--peers", &peers], &[("REGINA_CLUSTER_TOKEN", "short")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // `--insecure-cluster` starts, and says so loudly.
    let child = run(&["--peers", &peers, "--insecure-cluster"], &[("REGINA_LOG", "warn")]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while support::health_status(http) != Some(200) {
        assert!(Instant::now() < deadline, "the insecure node did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("INSECURE") && text.contains("without a cluster token"), "{text}");
}

/// A port one test process drew is drawn by no other until that process
/// exits: two tests side by side drew the same port, and the second node's
/// start failed with `Address already in use`.
#[test]
fn a_drawn_port_stays_reserved_for_its_process() {
    let port = free_port();
    // Held by this process: a second claim (even from here) is refused.
    assert!(!support::reserve(port), "port {port} was claimed twice");
    // Held by another process (flock(1) takes the same lock).
    let other = free_port() + 1;
    let path = std::env::temp_dir().join("regina-test-ports").join(other.to_string());
    // `cat` holds it until its input closes.
    let mut holder = std::process::Command::new("flock")
        .arg("-n")
        .arg(&path)
        .arg("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("flock(1) from util-linux");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut refused = false;
    while !refused && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        refused = !support::reserve(other);
    }
    drop(holder.stdin.take());
    let _ = holder.wait();
    assert!(refused, "port {other}, locked by another process, was reserved here");
}
