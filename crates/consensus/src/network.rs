//! The peer transport: Raft RPCs over HTTP between nodes.
//!
//! Every message is one POST to the target's Raft address (the `addr` of its
//! `BasicNode` in the membership) with a bincode body and the cluster token
//! ([`CLUSTER_TOKEN_HEADER`], see [`peer_client`]); a 200 answer carries
//! the bincode reply. Anything else is a transport failure, so openraft
//! retries or backs off; no Raft error ever travels the wire (the receiver
//! answers 503 when its Raft core refuses, which the sender treats alike).
//!
//! A snapshot goes in two parts ([`full_snapshot`]): first every message-body
//! segment the leader holds (bodies live outside the state and the log, so a
//! follower installing a snapshot has none of them), each to a staging
//! directory named after the snapshot, then the state itself, whose install
//! adopts the staged segments.
//!
//! [`full_snapshot`]: RaftNetwork::full_snapshot

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, SnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Snapshot, SnapshotMeta, StorageIOError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::state_machine::SharedState;
use crate::types::{NodeId, TypeConfig, Vote};

/// Paths of the Raft routes every group's replica serves. A node reaches
/// group `g` of a peer under [`group_prefix`]`(g)` in front of them.
pub const APPEND_PATH: &str = "/internal/raft/append";
pub const VOTE_PATH: &str = "/internal/raft/vote";
pub const SNAPSHOT_PATH: &str = "/internal/raft/snapshot";

/// Where a node serves the internal routes of its Raft group `group`:
/// `/internal/g/{group}` replaces `/internal` of the group's own paths.
pub fn group_prefix(group: u16) -> String {
    format!("/internal/g/{group}")
}

/// `path` (an `/internal/...` path of one group) as a peer reaches it.
pub fn group_path(group: u16, path: &str) -> String {
    match path.strip_prefix("/internal") {
        Some(rest) => format!("{}{rest}", group_prefix(group)),
        None => path.to_string(),
    }
}

/// The header every request between nodes carries: the cluster token, which
/// the receiving node's Raft address checks before anything else.
pub const CLUSTER_TOKEN_HEADER: &str = "x-regina-cluster-token";

/// How long one snapshot part may take on the wire (a body segment is at
/// most 64 MiB).
const SNAPSHOT_PART_TIMEOUT: Duration = Duration::from_secs(120);

/// The last part of a snapshot transfer: the state and who sends it.
#[derive(Serialize, Deserialize)]
pub struct SnapshotTransfer {
    pub vote: Vote,
    pub meta: SnapshotMeta<NodeId, BasicNode>,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// The path that stages body segment `segment` of snapshot `snapshot_id`.
pub fn segment_path(snapshot_id: &str, segment: u64) -> String {
    format!("{SNAPSHOT_PATH}/{snapshot_id}/segment/{segment}")
}

/// Makes a client per peer; all share one connection pool.
#[derive(Clone)]
pub struct HttpNetwork {
    client: reqwest::Client,
    shared: Arc<SharedState>,
    group: u16,
    /// `http` or `https` (TLS between nodes).
    scheme: &'static str,
}

impl HttpNetwork {
    /// `shared` is this node's state machine: snapshots sent from here carry
    /// its body segments. `client` carries every message (it holds the
    /// cluster token and, with TLS between nodes, the trusted roots): see
    /// [`peer_client`].
    pub fn new(shared: Arc<SharedState>, group: u16, client: reqwest::Client, scheme: &'static str) -> HttpNetwork {
        HttpNetwork { client, shared, group, scheme }
    }
}

/// A client for requests to peers: every request carries `token` (when
/// the cluster has one) in [`CLUSTER_TOKEN_HEADER`]. With `ca` (a PEM
/// bundle), peers are reached over TLS and trusted only through it.
pub fn peer_client(token: Option<&str>, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
    let mut builder = peer_client_builder(token)?;
    if let Some(pem) = ca {
        let roots = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("the TLS CA bundle: {e}"))?;
        if roots.is_empty() {
            return Err("the TLS CA bundle holds no certificate".into());
        }
        builder = builder.tls_built_in_root_certs(false).use_rustls_tls();
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
    }
    builder.build().map_err(|e| format!("cannot build the peer client: {e}"))
}

/// [`peer_client`]'s builder, without TLS settings.
pub fn peer_client_builder(token: Option<&str>) -> Result<reqwest::ClientBuilder, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = token {
        let mut value = reqwest::header::HeaderValue::from_str(token)
            .map_err(|_| "the cluster token is not a valid header value".to_string())?;
        value.set_sensitive(true);
        headers.insert(CLUSTER_TOKEN_HEADER, value);
    }
    Ok(reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .pool_idle_timeout(Duration::from_secs(30))
        .default_headers(headers))
}

pub struct HttpPeer {
    target: NodeId,
    group: u16,
    base: String,
    client: reqwest::Client,
    shared: Arc<SharedState>,
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        let base =
            if node.addr.contains("://") { node.addr.clone() } else { format!("{}://{}", self.scheme, node.addr) };
        HttpPeer { target, group: self.group, base, client: self.client.clone(), shared: self.shared.clone() }
    }
}

/// Why one RPC did not get a reply.
enum Failure {
    /// Nothing reached the peer (it is down or not listening).
    Unreachable(std::io::Error),
    /// The request may have reached it; retry.
    Network(std::io::Error),
}

impl Failure {
    fn rpc<E: std::error::Error>(self) -> RPCError<NodeId, BasicNode, E> {
        match self {
            Failure::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            Failure::Network(e) => RPCError::Network(NetworkError::new(&e)),
        }
    }

    fn streaming(self) -> StreamingError<TypeConfig, Fatal<NodeId>> {
        match self {
            Failure::Unreachable(e) => StreamingError::Unreachable(Unreachable::new(&e)),
            Failure::Network(e) => StreamingError::Network(NetworkError::new(&e)),
        }
    }
}

impl HttpPeer {
    async fn post(&self, path: &str, body: Vec<u8>, timeout: Duration) -> Result<Vec<u8>, Failure> {
        let url = format!("{}{}", self.base, group_path(self.group, path));
        let sent = self.client.post(&url).timeout(timeout).body(body).send().await;
        let resp = sent.map_err(|e| {
            let io = std::io::Error::other(format!("node {} at {url}: {e}", self.target));
            if e.is_connect() {
                Failure::Unreachable(io)
            } else {
                Failure::Network(io)
            }
        })?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| Failure::Network(std::io::Error::other(e.to_string())))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            return Err(Failure::Unreachable(std::io::Error::other(format!(
                "node {} answered {status} on {path}: {text}",
                self.target
            ))));
        }
        Ok(bytes.to_vec())
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, Failure> {
        let body = bincode::serialize(req).map_err(|e| Failure::Network(std::io::Error::other(e)))?;
        let bytes = self.post(path, body, timeout).await?;
        bincode::deserialize(&bytes).map_err(|e| Failure::Network(std::io::Error::other(e)))
    }

    /// Streams every body segment of this node to the peer's staging
    /// directory of `snapshot_id`.
    async fn send_segments(&self, snapshot_id: &str) -> Result<(), Failure> {
        let io = |e: std::io::Error| Failure::Network(e);
        let segments = self.shared.bodies.segments().map_err(io)?;
        for segment in segments {
            let bytes = match self.shared.bodies.read_segment(segment) {
                Ok(b) => b,
                // Released since it was listed: nothing in the snapshot's
                // state can still point at it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e)),
            };
            self.post(&segment_path(snapshot_id, segment), bytes, SNAPSHOT_PART_TIMEOUT).await?;
        }
        Ok(())
    }
}

impl RaftNetwork<TypeConfig> for HttpPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(APPEND_PATH, &rpc, option.hard_ttl()).await.map_err(Failure::rpc)
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        // Snapshots travel whole, with their bodies, through `full_snapshot`.
        let e = std::io::Error::other("chunked snapshots are not used; full_snapshot sends them");
        Err(RPCError::Network(NetworkError::new(&e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(VOTE_PATH, &rpc, option.hard_ttl()).await.map_err(Failure::rpc)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let shared = self.shared.clone();
        let read = tokio::task::spawn_blocking(move || shared.snapshot_to_send(snapshot));
        let snapshot = match read.await {
            Ok(read) => read?,
            Err(e) => return Err(StreamingError::StorageError(StorageIOError::read_snapshot(None, &e).into())),
        };
        let snapshot_id = snapshot.meta.snapshot_id.clone();
        let transfer = SnapshotTransfer { vote, meta: snapshot.meta, data: snapshot.snapshot.into_inner() };
        let send = async {
            self.send_segments(&snapshot_id).await?;
            self.call::<_, SnapshotResponse<NodeId>>(SNAPSHOT_PATH, &transfer, SNAPSHOT_PART_TIMEOUT).await
        };
        tokio::select! {
            res = send => res.map_err(Failure::streaming),
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }
}
