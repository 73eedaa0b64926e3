//! The simulated network: Raft RPCs delivered by calling the target node's
//! `Raft` of the sender's group directly, through seeded faults. As the
//! server's peers name the group in the path (`/internal/g/{group}/...`),
//! every RPC here carries its group and reaches that group's Raft on the
//! target; the faults (cuts, loss, delays) are the nodes' links, shared by
//! all groups.
//!
//! Each RPC draws, from the stream of its directed link, a delay there and
//! back, whether the request or the answer is lost, and whether the request
//! is delivered a second time later. A link can also be cut (a partition),
//! and a node that is down or crashed reaches nobody. A request is carried
//! by a task of its own, so it still arrives after its sender gave up or
//! died: late and duplicate deliveries are part of the weather. A lost
//! message looks like silence to the sender: it waits out its deadline and
//! gets a network error. Errors are never `Unreachable`: openraft backs
//! off after those with an unbiased `select!`, the one place where it would
//! draw randomness the seed does not control.
//!
//! Snapshots travel as in the real transport (`regina_consensus::network`):
//! first the sender's message-body segments into the receiver's staging
//! directory, then the state, whose install adopts them.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, SnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Snapshot};
use parking_lot::Mutex;
use regina_consensus::types::Vote;
use regina_consensus::{Raft, SharedState, TypeConfig};
use tokio::sync::oneshot;
use tokio::time::{sleep, Instant};

use crate::gate::Gate;
use crate::rng::{mix, Rng};
use crate::NodeId;

/// A running node as the network reaches it.
#[derive(Clone)]
pub struct Peer {
    pub raft: Raft,
    pub shared: Arc<SharedState>,
    pub gate: Arc<Gate>,
    /// The node's proposer for the group (clients' handle; the network's
    /// own handle has none).
    pub proposer: Option<Arc<regina_node::proposer::Proposer>>,
}

/// How lossy and slow links are; changed by the simulator over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weather {
    pub drop_per_mille: u64,
    pub delay_max_ms: u64,
    /// Chance of a slow message (50..400 ms).
    pub spike_per_mille: u64,
    /// Chance that a request is delivered twice.
    pub duplicate_per_mille: u64,
}

impl Weather {
    pub const CALM: Weather =
        Weather { drop_per_mille: 0, delay_max_ms: 2, spike_per_mille: 0, duplicate_per_mille: 0 };
}

#[derive(Debug, Default, Clone, Copy)]
pub struct NetStats {
    pub sent: u64,
    pub lost: u64,
    pub delivered: u64,
    pub duplicated: u64,
    pub snapshots: u64,
}

struct NetState {
    seed: u64,
    /// By (node, group).
    peers: BTreeMap<(NodeId, u16), Peer>,
    /// Directed links that lose everything.
    cut: BTreeSet<(NodeId, NodeId)>,
    weather: Weather,
    links: BTreeMap<(NodeId, NodeId), Rng>,
    /// When each (node, group) last accepted a leader's append or granted a
    /// vote: what its election timer counts from.
    heard: BTreeMap<(NodeId, u16), Instant>,
    /// Broken transport for the checker's own test: appends are answered
    /// "success" without being delivered.
    ack_without_delivery: bool,
    stats: NetStats,
}

pub struct Net {
    state: Mutex<NetState>,
}

/// What happens to one RPC.
struct Plan {
    there: Duration,
    back: Duration,
    lose_request: bool,
    lose_response: bool,
    /// Deliver the request a second time, this much later.
    again_after: Option<Duration>,
}

impl Net {
    pub fn new(seed: u64, ack_without_delivery: bool) -> Arc<Net> {
        Arc::new(Net {
            state: Mutex::new(NetState {
                seed,
                peers: BTreeMap::new(),
                cut: BTreeSet::new(),
                weather: Weather::CALM,
                links: BTreeMap::new(),
                heard: BTreeMap::new(),
                ack_without_delivery,
                stats: NetStats::default(),
            }),
        })
    }

    pub fn attach(&self, node: NodeId, group: u16, peer: Peer) {
        let mut s = self.state.lock();
        s.peers.insert((node, group), peer);
        s.heard.insert((node, group), Instant::now());
    }

    /// Takes every group of `node` off the network.
    pub fn detach(&self, node: NodeId) {
        self.state.lock().peers.retain(|(n, _), _| *n != node);
    }

    pub fn set_cut(&self, cut: BTreeSet<(NodeId, NodeId)>) {
        self.state.lock().cut = cut;
    }

    pub fn cut(&self) -> BTreeSet<(NodeId, NodeId)> {
        self.state.lock().cut.clone()
    }

    pub fn set_weather(&self, w: Weather) {
        self.state.lock().weather = w;
    }

    pub fn stats(&self) -> NetStats {
        self.state.lock().stats
    }

    pub fn heard(&self, node: NodeId, group: u16) -> Instant {
        self.state.lock().heard.get(&(node, group)).copied().unwrap_or_else(Instant::now)
    }

    pub fn hear(&self, node: NodeId, group: u16) {
        self.state.lock().heard.insert((node, group), Instant::now());
    }

    /// Group `group` on the target, if a message from `from` can reach it
    /// now. What a node sent before it crashed is still on the wire.
    fn reach(&self, from: NodeId, to: NodeId, group: u16) -> Option<Peer> {
        let s = self.state.lock();
        if s.cut.contains(&(from, to)) {
            return None;
        }
        s.peers.get(&(to, group)).filter(|p| !p.gate.crashed()).cloned()
    }

    fn plan(&self, from: NodeId, to: NodeId) -> Plan {
        let mut s = self.state.lock();
        let w = s.weather;
        let seed = s.seed;
        s.stats.sent += 1;
        let rng = s.links.entry((from, to)).or_insert_with(|| Rng::new(mix(seed, from * 31 + to)));
        let delay = |rng: &mut Rng| {
            let spike = rng.chance(w.spike_per_mille);
            let ms = if spike { rng.range(50, 400) } else { rng.range(0, w.delay_max_ms + 1) };
            Duration::from_millis(ms)
        };
        let there = delay(rng);
        let back = delay(rng);
        let lose_request = rng.chance(w.drop_per_mille);
        let lose_response = rng.chance(w.drop_per_mille);
        let again = rng.chance(w.duplicate_per_mille);
        let again_after = Duration::from_millis(rng.range(0, 200));
        Plan { there, back, lose_request, lose_response, again_after: again.then_some(again_after) }
    }

    fn count(&self, delivered: bool) {
        let mut s = self.state.lock();
        if delivered {
            s.stats.delivered += 1;
        } else {
            s.stats.lost += 1;
        }
    }
}

/// One group's side of the network on one node.
pub struct SimNetwork {
    pub from: NodeId,
    pub group: u16,
    pub net: Arc<Net>,
    /// The sender's state machine: a snapshot it sends carries its bodies.
    pub shared: Arc<SharedState>,
}

pub struct SimPeer {
    from: NodeId,
    to: NodeId,
    group: u16,
    net: Arc<Net>,
    shared: Arc<SharedState>,
}

impl RaftNetworkFactory<TypeConfig> for SimNetwork {
    type Network = SimPeer;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> SimPeer {
        SimPeer { from: self.from, to: target, group: self.group, net: self.net.clone(), shared: self.shared.clone() }
    }
}

fn lost_error(what: &str) -> NetworkError {
    NetworkError::new(&std::io::Error::other(what.to_string()))
}

impl SimPeer {
    /// One request-response RPC through [`Self::exchange`]: the target hears
    /// from this node when `heard` accepts its answer; a lost request or
    /// answer is a network error, a refusal the target's own error.
    async fn rpc<Req, Resp, E, F, Fut>(
        &self,
        option: &RPCOption,
        what: &str,
        rpc: Req,
        call: F,
        heard: fn(&Resp) -> bool,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, E>>
    where
        Req: Clone + Send + 'static,
        Resp: Send + 'static,
        E: std::error::Error + Send + 'static,
        F: Fn(Peer, Req) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<Resp, E>> + Send,
    {
        let (net, to, group) = (self.net.clone(), self.to, self.group);
        let answer = self
            .exchange(option, move |peer: Peer| {
                let (rpc, net, call) = (rpc.clone(), net.clone(), call.clone());
                async move {
                    let resp = call(peer, rpc).await;
                    if matches!(&resp, Ok(r) if heard(r)) {
                        net.hear(to, group);
                    }
                    resp
                }
            })
            .await;
        match answer {
            Some(resp) => resp.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e))),
            None => Err(RPCError::Network(lost_error(&format!("{what} request or response lost")))),
        }
    }

    /// Sends one request and waits for its answer, `None` if either was
    /// lost. The delivery runs on a task of its own: a request whose sender
    /// gave up waiting (its deadline passed, or it crashed) still arrives,
    /// late, as on a real network; and now and then it arrives twice.
    async fn exchange<R, F, Fut>(&self, option: &RPCOption, call: F) -> Option<R>
    where
        F: Fn(Peer) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = R> + Send,
        R: Send + 'static,
    {
        let plan = self.net.plan(self.from, self.to);
        let (tx, rx) = oneshot::channel();
        let (net, from, to, group) = (self.net.clone(), self.from, self.to, self.group);
        tokio::spawn(async move {
            sleep(plan.there).await;
            let peer = if plan.lose_request { None } else { net.reach(from, to, group) };
            net.count(peer.is_some());
            let Some(peer) = peer else { return };
            if let Some(after) = plan.again_after {
                let (net, call) = (net.clone(), call.clone());
                tokio::spawn(async move {
                    sleep(after).await;
                    if let Some(peer) = net.reach(from, to, group) {
                        net.state.lock().stats.duplicated += 1;
                        call(peer).await;
                    }
                });
            }
            let answer = call(peer).await;
            sleep(plan.back).await;
            if !plan.lose_response && net.reach(to, from, group).is_some() {
                let _ = tx.send(answer);
            }
        });
        match rx.await {
            Ok(answer) => Some(answer),
            Err(_) => {
                // A lost message is silence: nothing until the deadline.
                sleep(option.hard_ttl()).await;
                None
            }
        }
    }
}

impl RaftNetwork<TypeConfig> for SimPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        if self.net.state.lock().ack_without_delivery {
            return Ok(AppendEntriesResponse::Success);
        }
        let call = |peer: Peer, rpc| async move { peer.raft.append_entries(rpc).await };
        self.rpc(&option, "append", rpc, call, |r| !matches!(r, AppendEntriesResponse::HigherVote(_))).await
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        // As in the real transport: snapshots travel whole (`full_snapshot`).
        Err(RPCError::Network(lost_error("chunked snapshots are not used")))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let call = |peer: Peer, rpc| async move { peer.raft.vote(rpc).await };
        self.rpc(&option, "vote", rpc, call, |r: &VoteResponse<NodeId>| r.vote_granted).await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let send = async {
            let plan = self.net.plan(self.from, self.to);
            sleep(plan.there).await;
            let peer = if plan.lose_request { None } else { self.net.reach(self.from, self.to, self.group) };
            self.net.count(peer.is_some());
            let Some(peer) = peer else {
                sleep(option.hard_ttl()).await;
                return Err(StreamingError::Network(lost_error("snapshot lost")));
            };
            let snapshot = self.shared.snapshot_to_send(snapshot)?;
            let id = snapshot.meta.snapshot_id.clone();
            stage_bodies(&self.shared, &peer.shared, &id)
                .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
            self.net.state.lock().stats.snapshots += 1;
            let resp = peer.raft.install_full_snapshot(vote, snapshot).await;
            sleep(plan.back).await;
            if plan.lose_response || self.net.reach(self.to, self.from, self.group).is_none() {
                return Err(StreamingError::Network(lost_error("snapshot response lost")));
            }
            resp.map_err(|e| StreamingError::RemoteError(RemoteError::new(self.to, e)))
        };
        tokio::select! {
            biased;
            closed = cancel => Err(StreamingError::Closed(closed)),
            res = send => res,
        }
    }
}

/// Copies every body segment of the sender into the receiver's staging
/// directory for snapshot `id`, as the HTTP transport does.
fn stage_bodies(from: &SharedState, to: &SharedState, id: &str) -> std::io::Result<()> {
    for segment in from.bodies.segments()? {
        let bytes = match from.bodies.read_segment(segment) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        to.stage_body_segment(id, segment, &bytes)?;
    }
    Ok(())
}
