//! Real `regina` processes forming a cluster on 127.0.0.1: each node has
//! its own HTTP port, Raft port and data directory, and can be killed with
//! SIGKILL and restarted on the same addresses.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{file_tail, free_port, health, regina_command};

const START_TIMEOUT: Duration = Duration::from_secs(20);

pub struct ClusterNode {
    pub id: u64,
    pub http_port: u16,
    pub raft_port: u16,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
    /// `--peers` given at start; empty for a node that starts alone.
    pub peers: String,
    /// Extra environment for the process (e.g. `REGINA_TENANCY`).
    pub env: Vec<(String, String)>,
    /// The cluster token the node is started with (`REGINA_CLUSTER_TOKEN`)
    /// and that the tests send to its Raft address.
    pub cluster_token: String,
    child: Option<Child>,
}

impl ClusterNode {
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    pub fn raft_addr(&self) -> String {
        format!("127.0.0.1:{}", self.raft_port)
    }

    /// `path` at the node's Raft address (where internal routes live).
    pub fn internal_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.raft_port)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        crate::support::sigkill(&mut self.child);
    }

    /// Starts the process (again) on its addresses and data directory.
    /// Does not wait for it to join a leader: see [`Cluster::wait_for_leader`].
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "node {} is running", self.id);
        let marker = format!("starting node {}", self.id);
        let mut cmd = regina_command(self.http_port, &self.data_dir, &self.log_path, &marker).expect("a command");
        cmd.args(["--node-id", &self.id.to_string(), "--raft-addr", &self.raft_addr()])
            .env("REGINA_CLUSTER_TOKEN", &self.cluster_token)
            .envs(self.env.iter().cloned());
        if !self.peers.is_empty() {
            cmd.args(["--peers", &self.peers]);
        }
        self.child = Some(cmd.spawn().expect("spawn regina"));
        // Serving starts once both ports listen.
        let deadline = Instant::now() + START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", self.http_port)).is_err() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("node {} exited during start with {status}\n{}", self.id, self.log_tail(3000));
            }
            assert!(Instant::now() < deadline, "node {} did not listen\n{}", self.id, self.log_tail(3000));
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    pub fn log_tail(&self, max: usize) -> String {
        file_tail(&self.log_path, max)
    }

    /// `/health` as JSON, or `None` when the node does not answer.
    pub fn health(&self) -> Option<Value> {
        health(self.http_port).map(|(_, body)| body)
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Nodes of one cluster, in a temporary directory.
pub struct Cluster {
    pub nodes: Vec<ClusterNode>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts `n` nodes that form one group from `--peers`.
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(n, &[])
    }

    /// [`Cluster::start`] with extra environment for every node.
    pub fn start_with(n: usize, env: &[(&str, &str)]) -> Cluster {
        let mut c = Cluster::prepare(n, true);
        for node in &mut c.nodes {
            node.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            node.start();
        }
        c.wait_for_leader(Duration::from_secs(20));
        c
    }

    /// `n` nodes, not started. With `peers`, they form one group on first
    /// start; without, each starts alone (to be added with the cluster
    /// route).
    pub fn prepare(n: usize, peers: bool) -> Cluster {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let token = format!("test-cluster-{}", uuid::Uuid::new_v4().simple());
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let list = ports
            .iter()
            .enumerate()
            .map(|(i, (_, raft))| format!("{}=127.0.0.1:{raft}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = ports
            .iter()
            .enumerate()
            .map(|(i, (http, raft))| ClusterNode {
                id: i as u64 + 1,
                http_port: *http,
                raft_port: *raft,
                data_dir: dir.path().join(format!("node{}", i + 1)),
                log_path: dir.path().join(format!("node{}.log", i + 1)),
                peers: if peers { list.clone() } else { String::new() },
                env: Vec::new(),
                cluster_token: token.clone(),
                child: None,
            })
            .collect();
        Cluster { nodes, _dir: dir }
    }

    pub fn node(&mut self, id: u64) -> &mut ClusterNode {
        &mut self.nodes[id as usize - 1]
    }

    /// The id every running node agrees leads, waiting up to `within`.
    pub fn wait_for_leader(&self, within: Duration) -> u64 {
        self.wait_agreed(within, "leader", |id| self.nodes[id as usize - 1].is_running())
    }

    /// Waits until every running node has applied the same index, and
    /// answers it.
    pub fn wait_converged(&self, within: Duration) -> u64 {
        self.wait_agreed(within, "appliedIndex", |_| true)
    }

    /// Waits until every running node's `/health` shows the same `field`,
    /// a number that `accept` takes, and answers it.
    fn wait_agreed(&self, within: Duration, field: &str, accept: impl Fn(u64) -> bool) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let seen: Vec<Option<u64>> = self
                .nodes
                .iter()
                .filter(|n| n.is_running())
                .map(|n| n.health().and_then(|h| h[field].as_u64()))
                .collect();
            if let Some(Some(first)) = seen.first() {
                if seen.iter().all(|v| *v == Some(*first)) && accept(*first) {
                    return *first;
                }
            }
            assert!(Instant::now() < deadline, "no agreed {field} within {within:?}: {seen:?}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every node's log tail, for failure messages.
    pub fn logs(&self) -> String {
        self.nodes.iter().map(|n| format!("--- node {} ---\n{}\n", n.id, n.log_tail(2500))).collect()
    }
}

/// How long nodes may take to agree after the load stops.
pub const CONVERGE: Duration = Duration::from_secs(20);

/// The decoded applied state of Raft group `group` of a node.
pub async fn group_state(c: &reqwest::Client, node: &ClusterNode, group: u16) -> (u64, regina_state::State) {
    let resp = c
        .get(node.internal_url(&format!("/internal/g/{group}/state")))
        .header("x-regina-cluster-token", &node.cluster_token)
        .send()
        .await
        .expect("GET the state");
    assert_eq!(resp.status(), 200);
    let index = resp.headers()["x-regina-applied-index"].to_str().unwrap().parse().unwrap();
    let bytes = resp.bytes().await.expect("state bytes");
    (index, regina_state::State::decode(&bytes).expect("a decodable state"))
}

/// Every running node holds the same state at the same applied index.
pub async fn assert_states_identical(c: &reqwest::Client, cluster: &Cluster) {
    assert_group_states_identical(c, cluster, 0).await
}

/// Every running node holds the same state of group `group` at the same
/// applied index.
pub async fn assert_group_states_identical(c: &reqwest::Client, cluster: &Cluster, group: u16) {
    let deadline = Instant::now() + CONVERGE;
    loop {
        cluster.wait_converged(CONVERGE);
        let mut states = Vec::new();
        for node in cluster.nodes.iter().filter(|n| n.is_running()) {
            states.push((node.id, group_state(c, node, group).await));
        }
        let (first_id, (index, state)) = &states[0];
        if states.iter().all(|(_, (i, _))| i == index) {
            for (id, (_, other)) in &states[1..] {
                assert!(other == state, "node {id}'s state differs from node {first_id}'s at index {index}");
            }
            return;
        }
        assert!(Instant::now() < deadline, "applied indexes kept moving");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
