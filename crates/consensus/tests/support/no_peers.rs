//! A peer network for single-voter groups: a lone voter never sends a Raft
//! message, so every client answers "unreachable".

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::BasicNode;
use regina_consensus::{NodeId, TypeConfig};

#[derive(Clone, Default)]
pub struct NoPeers;

pub struct NoPeer {
    target: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for NoPeers {
    type Network = NoPeer;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Self::Network {
        NoPeer { target }
    }
}

impl NoPeer {
    fn unreachable<E: std::error::Error>(&self) -> RPCError<NodeId, BasicNode, E> {
        let msg = format!("node {} is not reachable: this node runs without peers", self.target);
        RPCError::Unreachable(Unreachable::new(&std::io::Error::other(msg)))
    }
}

impl RaftNetwork<TypeConfig> for NoPeer {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        Err(self.unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        Err(self.unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        Err(self.unreachable())
    }
}
